"""Hypothesis strategies of symbol values (private; :mod:`tylo.layouts.strategies`
re-exports :func:`assignments_for` and :func:`fact_symbols`, and documents them)."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import strategies as st

from tylo.layouts._lazy import sympy
from tylo.layouts._scope import Fact, Value
from tylo.layouts.errors import AssumptionError
from tylo.layouts.inttuple import IntTuple
from tylo.layouts.layout import Layout
from tylo.layouts.symbolic import Dim, dim, divisible, index_symbol, sample_assignment

__all__ = ["assignments_for", "fact_symbols"]


def assignments_for(
    obj: Any, assumptions: tuple[Fact, ...] = (), max_value: int = 40
) -> st.SearchStrategy[dict[sympy.Symbol, int]]:
    """Random integer assignments (dict symbol -> int) of the symbols in ``obj``
    satisfying their facts and ``assumptions`` (see ``symbolic.sample_assignment``). Half
    the time a symbol that may be 1 (a ``dim`` without ``multiple_of``) is
    held at 1, where extent-1 modes drop out, when the assumptions allow it."""
    return st.randoms(use_true_random=False).map(
        lambda rng: _assignment(obj, tuple(assumptions), max_value, random.Random(rng.random()))
    )


def _symbols(obj: Any) -> set[sympy.Symbol]:
    vals: tuple[Value, ...] = (
        (*_flat(obj.shape), *_flat(obj.stride)) if isinstance(obj, Layout) else _flat(obj)
    )
    return {s for v in vals if isinstance(v, sympy.Basic) for s in v.free_symbols}


def _flat(t: IntTuple) -> tuple[Value, ...]:
    return tuple(x for e in t for x in _flat(e)) if isinstance(t, (tuple, list)) else (t,)


def _assignment(
    obj: Any, assumptions: tuple[Fact, ...], max_value: int, rng: random.Random
) -> dict[sympy.Symbol, int]:
    ones = sorted((s for s in _symbols(obj) if isinstance(s, Dim) and s.multiple_of == 1), key=str)
    if ones and rng.random() < 0.5:
        pin = (sympy.Eq(rng.choice(ones), 1),)
        try:
            return sample_assignment(
                [obj], rng, max_value=max_value, assumptions=assumptions + pin, tries=40
            )
        except AssumptionError:
            pass  # the assumptions keep it above 1: an ordinary sample
    return sample_assignment([obj], rng, max_value=max_value, assumptions=assumptions)


_FACT_KINDS = ("multiple_of", "odd_multiple", "index", "lower", "upper", "relation", "divisible")


@st.composite
def fact_symbols(draw: st.DrawFn) -> tuple[sympy.Symbol, tuple[Fact, ...]]:
    """``(symbol, assumptions)``: a symbol with one kind of fact tylo records, drawn from
    ``dim(multiple_of=k)`` (k a power of two up to 1024), ``dim(multiple_of=k)`` with k
    not a power of two (3, 6, 12), ``index_symbol(upper=u)``, and a plain ``dim`` under an
    assumption: a lower bound (up to ``2**40``), an upper bound, a relation to another
    dim (``N >= M``) or ``divisible(N, k)``. The assumptions are satisfiable."""
    kind = draw(st.sampled_from(_FACT_KINDS))
    if kind == "multiple_of":
        return dim("N", multiple_of=2 ** draw(st.integers(0, 10))), ()
    if kind == "odd_multiple":
        return dim("N", multiple_of=draw(st.sampled_from([3, 6, 12]))), ()
    if kind == "index":
        return index_symbol("i", upper=draw(st.integers(1, 64))), ()
    n = dim("N")
    if kind == "lower":
        return n, (n >= draw(st.sampled_from([2, 8, 2**31, 2**40])),)
    if kind == "upper":
        return n, (n <= draw(st.integers(1, 16)),)
    if kind == "relation":
        return n, (n >= dim("M"),)
    return n, (divisible(n, draw(st.sampled_from([2, 3, 8]))),)
