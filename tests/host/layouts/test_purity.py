"""The public API is explicit and importing tylo.layouts stays pure."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

PUBLIC_MODULES = [
    "tylo.layouts",
    "tylo.layouts.algebra",
    "tylo.layouts.compose",
    "tylo.layouts.divide",
    "tylo.layouts.errors",
    "tylo.layouts.inttuple",
    "tylo.layouts.inverse",
    "tylo.layouts.layout",
    "tylo.layouts.parse",
    "tylo.layouts.product",
    "tylo.layouts.strategies",
    "tylo.layouts.swizzle",
    "tylo.layouts.symbolic",
    "tylo.layouts.tv",
]

CONTRACT = [
    "Layout",
    "Swizzle",
    "ComposedLayout",
    "dim",
    "make_layout",
    "size",
    "cosize",
    "rank",
    "depth",
    "flatten",
    "crd2idx",
    "idx2crd",
    "select",
    "group_modes",
    "coalesce",
    "filter_",
    "composition",
    "complement",
    "right_inverse",
    "left_inverse",
    "logical_divide",
    "zipped_divide",
    "tiled_divide",
    "flat_divide",
    "logical_product",
    "zipped_product",
    "tiled_product",
    "flat_product",
    "blocked_product",
    "raked_product",
    "tile_to_shape",
]


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_all_is_sorted_and_resolves(name):
    mod = importlib.import_module(name)
    names = mod.__all__
    assert names == sorted(names), f"{name}.__all__ is not sorted"
    assert len(set(names)) == len(names)
    for n in names:
        assert getattr(mod, n) is not None, f"{name}.{n} does not resolve"


def test_contract_names_are_exported():
    import tylo.layouts as tl

    missing = [n for n in CONTRACT if n not in tl.__all__]
    assert not missing


def test_import_is_pure():
    code = (
        "import sys, tylo.layouts, tylo.layouts.symbolic\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in "
        "('llvmlite', 'cuda', 'hypothesis', 'torch', 'cupy', 'jax') "
        "or m.startswith(('tylo.backend', 'tylo.kernel'))]\n"
        "print(','.join(sorted(bad)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "", f"import tylo.layouts pulled in: {out.stdout}"


def test_strategies_import_hypothesis_only_when_asked():
    code = "import sys, tylo.layouts.strategies; print('hypothesis' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "True"


def test_provers_are_exported_from_tylo_layouts():
    import tylo.layouts as tl
    import tylo.layouts.proofs as proofs

    for name in (
        "Verdict",
        "prove_injective",
        "prove_contiguous",
        "prove_aligned",
        "prove_bounded",
        "prove_equal",
        "require",
    ):
        assert name in tl.__all__
        assert getattr(tl, name) is getattr(proofs, name)
    with pytest.raises(AttributeError):
        tl.no_such_name  # noqa: B018


def test_every_error_class_is_exported():
    """Each LayoutError subclass of tylo.layouts.errors is in its __all__ and exported from
    tylo.layouts (SizeBudgetError was missing once)."""
    import tylo.layouts as tl
    import tylo.layouts.errors as errors

    classes = [
        n
        for n, v in vars(errors).items()
        if isinstance(v, type) and issubclass(v, errors.LayoutError)
    ]
    assert "SizeBudgetError" in classes
    for n in classes:
        assert n in errors.__all__, n
        assert n in tl.__all__ and getattr(tl, n) is getattr(errors, n), n
