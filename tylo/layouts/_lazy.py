"""sympy, imported when a symbolic question is first asked.

A static layout (every extent and stride a Python int) needs no sympy: its operations run
on plain integer code paths. So the modules of this package bind ``sympy`` (and the
symbol classes built on it) from here, as stand-ins that import the real module on their
first attribute lookup and then rebind every module global that held the stand-in to the
real module, so later lookups cost nothing extra. :func:`is_sympy` answers
``isinstance(x, sympy.Basic)`` without importing sympy: while sympy is not imported,
nothing is a sympy object.

:func:`lazy` serves numpy the same way (the proofs' enumeration imports it only when no
rule decides). ``tylo layout`` and ``tylo prove`` on static layouts import no sympy
(tests/host/test_cli_static_start.py, tests/host/layouts/test_static_no_sympy.py).
"""

from __future__ import annotations

import importlib
import sys
import threading
import types
from typing import TYPE_CHECKING, Any, TypeGuard

if TYPE_CHECKING:
    from sympy import Basic  # untyped: Any to mypy

__all__ = ["LazyModule", "is_sympy", "lazy", "sympy"]

_LOCK = threading.Lock()


class LazyModule(types.ModuleType):
    """A module imported on first attribute lookup (then every global of tylo's modules
    bound to this stand-in is rebound to the real module)."""

    def __init__(self, name: str) -> None:
        super().__init__(name)

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)  # copy, pickle and inspect probe dunders: not a use
        real = self._load()
        return getattr(real, attr)

    def _load(self) -> types.ModuleType:
        real = importlib.import_module(self.__name__)
        with _LOCK:  # the stand-ins are handed out to tylo's own modules only
            for name, module in list(sys.modules.items()):
                d = getattr(module, "__dict__", None)  # None: a module blocked in sys.modules
                if d is not None and (name == "tylo" or name.startswith("tylo.")):
                    for key in [k for k, v in d.items() if v is self]:
                        d[key] = real
        return real

    def __repr__(self) -> str:
        return f"<lazy module {self.__name__!r}>"


_STAND_INS: dict[str, LazyModule] = {}


def lazy(name: str) -> Any:
    """Module ``name``: the module itself when imported, else its stand-in."""
    real = sys.modules.get(name)
    if real is not None:
        return real
    with _LOCK:
        return _STAND_INS.setdefault(name, LazyModule(name))


_BASIC: list[type] = []  # sympy.Basic, once sympy is imported


def is_sympy(x: object) -> TypeGuard[Basic]:
    """``isinstance(x, sympy.Basic)``, without importing sympy."""
    if _BASIC:
        return isinstance(x, _BASIC[0])
    basic = getattr(sys.modules.get("sympy"), "Basic", None)
    if basic is None:
        return False  # sympy not imported (or still importing): nothing is a sympy object
    _BASIC.append(basic)
    return isinstance(x, basic)


#: sympy, or its stand-in until it is imported (then this global is rebound, like every other)
sympy: Any = lazy("sympy")
