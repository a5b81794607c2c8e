"""The tracer's view of :mod:`tylo.layouts.symbolic`: symbols with facts and decisions.

One place where the tracer meets the symbolic layer, so the rest of ``tylo.kernel`` reads
in its own terms: runtime integers are :func:`dim` symbols, thread/block/loop indices are
:func:`index_symbol` s with exclusive upper bounds, a dynamic condition is one that
:func:`decide` cannot settle, and facts valid inside a branch or loop body are entered with
:func:`assuming`. :func:`minimum`, :func:`maximum` and :func:`relation` build sympy's
``Min``, ``Max`` and inequalities exactly, faster (:mod:`tylo.kernel.minmax`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tylo.kernel.minmax import maximum, minimum, relation
from tylo.layouts import symbolic as _sym
from tylo.layouts._lazy import sympy

__all__ = [
    "assuming",
    "captured",
    "current_facts",
    "decide",
    "dim",
    "divides",
    "implied",
    "index_symbol",
    "integer_symbol",
    "maximum",
    "minimum",
    "relation",
    "symbol_bounds",
]

dim = _sym.dim
index_symbol = _sym.index_symbol
assuming = _sym.assuming
current_facts = _sym.current_assumptions


def decide(rel: Any) -> bool | None:
    """True or False when the facts settle ``rel`` (a relation, or an And/Or/Not of
    relations), None when they do not."""
    if rel is True or rel is sympy.true:
        return True
    if rel is False or rel is sympy.false:
        return False
    if isinstance(rel, (sympy.And, sympy.Or)):
        parts = [decide(a) for a in rel.args]
        if isinstance(rel, sympy.And):
            return False if False in parts else True if all(p is True for p in parts) else None
        return True if True in parts else False if all(p is False for p in parts) else None
    if isinstance(rel, sympy.Not):
        inner = decide(rel.args[0])
        return None if inner is None else not inner
    return _sym.decide(rel)


def implied(cond: Any, holds: bool) -> list[Any]:
    """Relations known inside a branch taken when ``cond`` is ``holds``: the relation or
    its negation, the parts of an And (of a negated Or); nothing for a disjunction."""
    if isinstance(cond, sympy.Not):
        return implied(cond.args[0], not holds)
    if isinstance(cond, sympy.And if holds else sympy.Or):
        return [r for a in cond.args for r in implied(a, holds)]
    if isinstance(cond, sympy.core.relational.Relational):
        rel = cond if holds else cond.negated
        return [] if rel in (sympy.true, sympy.false) else [rel]
    return []


def captured(cond: Any, holds: bool) -> bool:
    """Whether :func:`implied` of ``cond`` holds all there is to know inside the branch
    taken when ``cond`` is ``holds``: a relation, a conjunction of them (taken), a
    disjunction of them (not taken), through ``Not``; False for anything else (``a < b or
    c < d`` taken, which no single fact states)."""
    if isinstance(cond, sympy.Not):
        return captured(cond.args[0], not holds)
    if isinstance(cond, sympy.core.relational.Relational):
        return True
    if isinstance(cond, sympy.And if holds else sympy.Or):
        return all(captured(a, holds) for a in cond.args)
    return cond is sympy.true or cond is sympy.false or type(cond) is bool


def divides(divisor: int, expr: Any) -> bool | None:
    """Whether ``divisor`` divides ``expr`` under the facts in force (None: unknown)."""
    return _sym.divides(divisor, expr)


def integer_symbol(name: str, *, nonnegative: bool = False) -> sympy.Symbol:
    """A plain integer symbol (no upper bound): a runtime integer carried through a loop,
    or an index computed from data."""
    if nonnegative:
        return sympy.Symbol(name, integer=True, nonnegative=True)
    return sympy.Symbol(name, integer=True)


def symbol_bounds(
    symbol: sympy.Symbol, upper_hi: Callable[[Any], int | None], int_max: int
) -> tuple[int | None, int | None]:
    """Static bounds of a symbol from its own facts: a dim is in [multiple_of, int_max];
    an index symbol in [0, upper - 1] (``upper_hi`` bounds a symbolic ``upper``)."""
    if isinstance(symbol, _sym.IndexSymbol):
        upper = symbol.upper
        if upper is None:
            return 0, int_max
        if isinstance(upper, int):
            return 0, upper - 1
        hi = upper_hi(upper)
        return 0, None if hi is None else hi - 1
    if isinstance(symbol, _sym.Dim):
        return symbol.multiple_of, int_max
    if symbol.is_nonnegative:
        return 0, int_max
    return -int_max - 1, int_max
