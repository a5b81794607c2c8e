"""Free symbols of index expressions, memoized per sub-expression: below the lowering
(:mod:`tylo.kernel.lower`) and the Min/Max builders (:mod:`tylo.kernel.minmax`), which both
ask for them on every node."""

from __future__ import annotations

import functools

from tylo.layouts._lazy import sympy

__all__ = ["free_symbols"]


def free_symbols(e: sympy.Basic) -> frozenset[sympy.Symbol]:
    """``e.free_symbols``, memoized per sub-expression: sympy walks the whole tree on every
    call, and lowering asks for every node of every index expression."""
    got = _FREE.get(e)
    if got is None:
        if e.args and _unions_args(type(e)):
            got = frozenset().union(*map(free_symbols, e.args))
        else:  # symbols, atoms, and classes with bound variables (Lambda, Sum, ...)
            got = frozenset(e.free_symbols)
        if len(_FREE) > 100_000:
            _FREE.clear()
        _FREE[e] = got
    return got


_FREE: dict[sympy.Basic, frozenset[sympy.Symbol]] = {}


@functools.cache
def _unions_args(cls: type) -> bool:
    """Whether ``cls`` keeps sympy's default ``free_symbols``, the union of its args' (the
    MRO is searched: a class attribute lookup would find the metaclass' property)."""
    owner = next(k for k in cls.__mro__ if "free_symbols" in k.__dict__)
    return owner is sympy.Basic
