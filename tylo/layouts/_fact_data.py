"""The sympy-free pieces of the fact system: the fact ``divisor | expr``
(:class:`Divisible`), the text of a fact's values, and the registry of index-range checks.

Private module: :class:`Divisible` is re-exported by :mod:`tylo.layouts.symbolic`. Nothing
here is a sympy class, so static code can ask ``isinstance(fact, Divisible)`` without
importing sympy (:mod:`tylo.layouts._lazy`). The emptiness check of an index range needs
the fact engine (_facts.py), which builds on the symbol classes (_symbols.py), so
_ranges.py installs it here (tylo.layouts.symbolic imports _ranges) and
``IndexSymbol(...)`` runs it through :func:`check_nonempty`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tylo.layouts._lazy import is_sympy, sympy

__all__ = ["RANGE_CHECKS", "Divisible", "check_nonempty"]

RANGE_CHECKS: list[Any] = []  # installed by _ranges.py


def check_nonempty(name: str, upper: Any) -> None:
    """Refuse an index range that is empty for every value of its symbols (the check
    :func:`tylo.layouts._ranges.check_index_range` installs)."""
    for check in RANGE_CHECKS:
        check(name, upper)


@dataclass(frozen=True)
class Divisible:
    """The fact ``divisor | expr`` (``expr`` is a multiple of ``divisor``), for ``assuming``.

    Build it with :func:`tylo.layouts.symbolic.divisible`.
    """

    expr: Any
    divisor: Any

    def __str__(self) -> str:
        return f"{_text(self.divisor)} | {_text(self.expr)}"

    def __repr__(self) -> str:
        return f"divisible({_text(self.expr)}, {_text(self.divisor)})"


def _text(x: Any) -> str:
    if is_sympy(x):
        return str(sympy.sstr(x))
    return str(x)
