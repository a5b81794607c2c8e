"""The public surface: every name in ``tylo.__all__`` and ``tylo.kernel.__all__`` resolves,
the lists are sorted, and ``import tylo`` stays light (no llvmlite, no CUDA bindings)."""

from __future__ import annotations

import subprocess
import sys

import tylo
import tylo.kernel


def test_every_public_name_resolves():
    for name in tylo.__all__:
        assert getattr(tylo, name) is not None, name
    for name in tylo.kernel.__all__:
        assert getattr(tylo.kernel, name) is not None, name
    assert set(tylo.kernel.__all__) <= set(tylo.__all__) | {"Tensor"}


def test_all_lists_are_sorted_and_unique():
    for names in (tylo.kernel.__all__,):
        assert len(set(names)) == len(names)
    import builtins

    assert not set(tylo.kernel.__all__) & set(vars(builtins))  # star imports shadow nothing
    assert tylo.kernel.abs is not abs and tylo.kernel.range is not range
    assert sorted(set(tylo._LAZY) - tylo._SHADOWS_BUILTINS) == sorted(
        n for n in tylo.__all__ if n != "__version__"
    )


def test_kernel_is_the_package_and_the_decorator():
    assert callable(tylo.kernel)

    @tylo.kernel(index_bits=32)
    def k(out):
        out[0] = 1.0

    assert isinstance(k, tylo.Kernel) and k.index_bits == 32


def test_import_tylo_is_light():
    code = (
        "import sys, tylo, tylo.layouts; "
        "heavy = [m for m in ('llvmlite', 'cuda', 'tylo.backend', 'tylo.kernel') "
        "if m in sys.modules]; print(heavy)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "[]"


def test_decorating_does_not_load_the_driver():
    code = (
        "import sys, tylo\n"
        "@tylo.kernel\n"
        "def k(out):\n"
        "    out[0] = 1.0\n"
        "print('cuda.bindings.driver' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "False"
