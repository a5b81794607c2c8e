"""The tracer's fast paths over sympy give exactly sympy's answers: ``minimum``/``maximum``
(memo and sign witness) equal ``sympy.Min``/``sympy.Max``, ``free_symbols`` equals sympy's,
and the structural integrality test agrees with sympy's ``is_integer``, ``expand`` is sympy's."""

from __future__ import annotations

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from tylo.kernel import minmax
from tylo.kernel.expand import expand
from tylo.kernel.lower import _is_integer, free_symbols
from tylo.layouts.symbolic import dim, index_symbol

M, N = dim("M"), dim("N", multiple_of=8)
T, B = index_symbol("t", upper=128), index_symbol("b")
Z = sympy.Symbol("z", integer=True)
E = sympy.Symbol("e", even=True)
X = sympy.Symbol("x", real=True)
ATOMS = [M, N, T, B, Z, E]


def exprs(max_leaves: int = 12) -> st.SearchStrategy:
    leaf = st.one_of(st.sampled_from(ATOMS), st.integers(-9, 9).map(sympy.Integer))

    def grow(inner: st.SearchStrategy) -> st.SearchStrategy:
        return st.one_of(
            st.tuples(inner, inner).map(lambda p: p[0] + p[1]),
            st.tuples(inner, inner).map(lambda p: p[0] - p[1]),
            st.tuples(st.integers(-4, 4), inner).map(lambda p: p[0] * p[1]),
            st.tuples(inner, inner).map(lambda p: p[0] * p[1]),
            st.tuples(inner, st.integers(1, 9)).map(lambda p: sympy.floor(p[0] / p[1])),
            st.tuples(inner, st.integers(1, 9)).map(lambda p: sympy.Mod(p[0], p[1])),
            st.tuples(inner, inner).map(lambda p: sympy.Min(*p)),
            st.tuples(inner, inner).map(lambda p: sympy.Max(*p)),
        )

    return st.recursive(leaf, grow, max_leaves=max_leaves)


def same(a, b) -> bool:
    return a == b and type(a) is type(b) and a.args == b.args


@settings(max_examples=150, deadline=None)
@given(exprs(), exprs())
def test_min_max_are_sympys(a, b) -> None:
    minmax._extreme.cache_clear()
    assert same(minmax.minimum(a, b), sympy.Min(a, b))
    assert same(minmax.maximum(a, b), sympy.Max(a, b))


@settings(max_examples=200, deadline=None)
@given(exprs(6), st.integers(-9, 9), st.integers(-9, 9))
def test_nested_min_max_with_integers_are_sympys(x, c, d) -> None:
    minmax._extreme.cache_clear()
    assert same(minmax.minimum(minmax.maximum(x, d), c), sympy.Min(sympy.Max(x, d), c))
    assert same(minmax.maximum(minmax.minimum(x, d), c), sympy.Max(sympy.Min(x, d), c))


def test_the_sign_witness_is_taken_and_sound() -> None:
    assert minmax._sign_changes(T, M - 1)  # the bounded copy's row clamp
    assert not minmax._sign_changes(M, -T)  # M + T > 0 always: left to sympy
    assert not minmax._sign_changes(X, M)  # a real symbol: no integer witnesses
    assert not minmax._sign_changes(M, sympy.floor(M / (T - T)))  # undefined: no witness
    assert minmax.minimum(T, M - 1) == sympy.Min(T, M - 1)
    assert minmax.minimum(T, T + M) == T


@settings(max_examples=150, deadline=None)
@given(exprs())
def test_free_symbols_are_sympys(e) -> None:
    assert free_symbols(e) == e.free_symbols
    rel = sympy.And(sympy.Lt(e, M), sympy.Ge(e, 0))
    if isinstance(rel, sympy.Basic):
        assert free_symbols(rel) == rel.free_symbols


def test_free_symbols_of_bound_variables() -> None:
    k = sympy.Symbol("k", integer=True)
    s = sympy.Sum(k * M, (k, 0, T))
    assert free_symbols(s) == {M, T}


@settings(max_examples=150, deadline=None)
@given(exprs())
def test_structural_integrality_agrees_with_sympy(e) -> None:
    q = e / 3 + sympy.Rational(1, 2) * M
    for x in (e, q, sympy.floor(q), sympy.Mod(e, N), sympy.Min(e, q)):
        assert _is_integer(x) == (x.is_integer is True)


@settings(max_examples=150, deadline=None)
@given(exprs(), exprs())
def test_expand_is_sympys(a, b) -> None:
    for e in (a * b, (a + 3) * (b - M) * 2, sympy.Min(a * (b + 1), M) * (a + T), (a + b) ** 2):
        assert same(expand(e), sympy.expand(e))


def test_expand_of_atoms_and_relations() -> None:
    assert expand(3) == 3 and expand(M) == M
    rel = sympy.Lt((M + 1) * (T + 2), N)
    assert expand(rel) == sympy.expand(rel)


@settings(max_examples=150, deadline=None)
@given(exprs(), st.lists(st.integers(-30, 30), min_size=6, max_size=6))
def test_exact_values_are_sympys(e, values) -> None:
    env = {s: v for s, v in zip(ATOMS, values)}
    env = {
        s: v if s.is_integer and minmax._values(s) and _allowed(s, v) else 1 for s, v in env.items()
    }
    got = minmax._value(e, env, {})
    # doit(): a node the generator left unevaluated (seen: ``Max(M, Min(2, 3))``) is
    # evaluated too, so that the reference is the expression's value, not its shape
    want = e.xreplace({s: sympy.Integer(v) for s, v in env.items()}).doit()
    assert got == want


def _allowed(s, v) -> bool:
    n = sympy.Integer(v)
    return all(getattr(n, f"is_{k}") == w for k, w in s.assumptions0.items())


@settings(max_examples=150, deadline=None)
@given(exprs(), exprs(), st.sampled_from([sympy.Lt, sympy.Le, sympy.Gt, sympy.Ge]))
def test_inequalities_are_sympys(a, b, cls) -> None:
    minmax._relation.cache_clear()
    got, want = minmax.relation(cls, a, b), cls(a, b)
    assert got == want and type(got) is type(want)


def test_relation_takes_only_inequalities() -> None:
    with pytest.raises(TypeError, match="not an inequality"):
        minmax.relation(sympy.Eq, M, T)
