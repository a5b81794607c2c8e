"""Symbolic divides round the tile count up, as the static algebra and CuTe do.

Defining property: for every value of the symbols, substituting into the symbolic divide
gives the static divide of the substituted operands (same shape, same offset at every
coordinate of the tile and rest modes). A refusal names a condition that really depends
on the values (checked by brute force over small values).
"""

from __future__ import annotations

import re

import pytest
import sympy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tylo.layouts import (
    Layout,
    UndecidableError,
    dim,
    flat_divide,
    logical_divide,
    rank,
    size,
    substitute,
    tiled_divide,
    zipped_divide,
)

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
N = dim("N")
N4 = dim("N", multiple_of=4)
M, K, lda = dim("M"), dim("K"), dim("lda")


def same_function(got: Layout, want: Layout) -> None:
    """Same top-level modes (rank and size of each) and the same offset at every 1-D
    index. (A symbolic tile count that is 1 for these values keeps its mode, which the
    static algebra coalesces away: ``(2,(2,1))`` is the function ``(2,2)``.)"""
    assert rank(got) == rank(want), (got, want)
    assert [size(got[i]) for i in range(rank(got))] == [size(want[i]) for i in range(rank(want))], (
        got,
        want,
    )
    for i in range(size(want)):
        assert got(i) == want(i), (got, want, i)


def test_cute_documentation_example():
    got = logical_divide(Layout(N, 1), Layout(32, 1))
    assert str(got) == "(32,ceiling(N/32)):(1,32)"
    assert str(logical_divide(Layout(48, 1), Layout(32, 1))) == "(32,2):(1,32)"
    for n in (2, 31, 32, 33, 48, 64, 65, 1000):
        same_function(substitute(got, {"N": n}), logical_divide(Layout(n, 1), Layout(32, 1)))


def test_exact_divides_stay_exact():
    assert str(logical_divide(Layout(dim("K", multiple_of=16)), 16)) == "(16,K/16):(1,16)"
    assert str(logical_divide(Layout(N4, 1), 4)) == "(4,N/4):(1,4)"


TILERS = st.one_of(
    st.integers(1, 40).map(lambda n: Layout(n, 1)),
    st.tuples(st.integers(1, 6), st.integers(1, 3)).map(lambda t: Layout(t[0], t[1])),
    st.tuples(st.integers(1, 4), st.integers(1, 4)).map(
        lambda t: Layout((t[0], t[1]), (1, 2 * t[0]))
    ),
)


@SETTINGS
@given(
    st.sampled_from([N, N4, 2 * N, N4 + 1, 3 * N4]),
    st.integers(1, 3),
    TILERS,
    st.lists(st.integers(1, 90), min_size=4, max_size=4),
)
def test_substitution_gives_the_static_divide(extent, stride, tiler, values):
    a = Layout(extent, stride)
    # a rank-1 layout composes with any tiler (its mode is unbounded), so the divide never
    # depends on the values: the tile count is ceil(size / reach), never a refusal
    sym = logical_divide(a, tiler)
    for v in values:
        n = v - v % 4 if extent.free_symbols == {N4} else v
        n = max(n, 4)
        static_a = substitute(a, {"N": n})
        if size(static_a) < 2:
            continue  # composition with a size-1 layout coalesces it to 1:0 (compose.py)
        same_function(substitute(sym, {"N": n}), logical_divide(static_a, tiler))


@SETTINGS
@given(
    st.sampled_from([zipped_divide, tiled_divide, flat_divide]),
    st.integers(1, 12),
    st.integers(1, 12),
    st.lists(st.tuples(st.integers(2, 70), st.integers(2, 40)), min_size=3, max_size=3),
)
def test_by_mode_divides_round_up(op, tm, tk, values):
    a = Layout((M, K), (1, lda))
    sym = op(a, (tm, tk))
    for m, k in values:
        env = {"M": m, "K": k, "lda": m + 3}
        same_function(substitute(sym, env), op(substitute(a, env), (tm, tk)))


def test_refusal_names_a_condition_that_depends_on_the_values():
    a = Layout((M, K), (1, lda))
    with pytest.raises(UndecidableError) as info:
        logical_divide(a, 32)
    cond = info.value.condition
    assert re.fullmatch(r"M \| 32", cond), cond
    holds = {m for m in range(1, 80) if 32 % m == 0 or m % 32 == 0}
    assert holds and set(range(1, 80)) - holds  # true for some values, false for others
    for m in sorted(holds)[:4]:  # where it holds the static divide exists
        logical_divide(substitute(a, {"M": m, "K": 3, "lda": m}), 32)


def test_ceil_evaluates_exactly_after_substitution():
    got = logical_divide(Layout((N, 4), (1, N)), (8, None))
    for n in (1, 7, 8, 9, 23):
        s = substitute(got, {"N": n})
        assert s.shape[0] == (8, -(-n // 8)) and type(s.shape[0][1]) is int
    assert isinstance(got.shape[0][1], sympy.ceiling)
