"""tylo.kernel's public names resolve on first use (issue 35: a cache hit imports no sympy).

Decorating a kernel and naming its parameter annotations import only the launch path; the
tracer (and sympy) come with the first trace. Every public name still resolves to the
object its module defines, and ``tylo.kernel.local`` stays the function even after the
submodule of the same name is imported.
"""

from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

import pytest

import tylo
import tylo.kernel as K

ROOT = Path(__file__).resolve().parents[2]
PUBLIC = sorted({*K.__all__, "abs", "range"})


@pytest.mark.parametrize("name", PUBLIC)
def test_every_public_name_resolves_to_a_kernel_object(name: str) -> None:
    value = getattr(K, name)
    assert not isinstance(value, types.ModuleType), name
    # tylo.kernel is the package itself, callable as the decorator tylo.kernel.kernel
    assert getattr(tylo, name) is (K if name == "kernel" else value)
    module = getattr(value, "__module__", None)
    if isinstance(value, (type, types.FunctionType)):
        assert module is not None and module.startswith("tylo.kernel."), (name, module)
        # the defining module's own object, not a copy
        assert getattr(sys.modules[module], value.__name__) is value


def test_star_import_gives_every_name_but_the_builtins() -> None:
    ns: dict[str, object] = {}
    exec("from tylo.kernel import *", ns)
    got = {k for k in ns if not k.startswith("__")}
    assert got == set(K.__all__)
    assert "abs" not in got and "range" not in got


def test_local_stays_the_function_after_its_module_is_imported() -> None:
    import tylo.kernel.local as _mod  # noqa: F401 - the import binds the package attribute

    assert callable(K.local) and not isinstance(K.local, types.ModuleType)
    assert K.local is sys.modules["tylo.kernel.local"].local
    assert tylo.local is K.local


def test_submodules_resolve_and_unknown_names_refuse() -> None:
    assert K.facts is sys.modules["tylo.kernel.facts"]
    with pytest.raises(AttributeError, match="no_such_name"):
        K.no_such_name  # noqa: B018
    with pytest.raises(AttributeError):
        K.__wrapped__  # noqa: B018 - dunder lookups (inspect, doctest) must not import


SCRIPT = """
import sys
import tylo

@tylo.kernel
def k(c: tylo.Ptr(align=16), a: tylo.pointer(tylo.f32), n: tylo.Int(multiple_of=4), d: tylo.Dim):
    c[0] = a[0]

@tylo.inline
def helper(x):
    return x

assert callable(tylo.kernel) and k.name == "k"
print(sorted(m for m in ("sympy", "tylo.kernel.trace", "tylo.layouts", "llvmlite")
             if m in sys.modules))
"""


def test_decorating_a_kernel_imports_no_tracer() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
