"""Symbolic complements size their last mode ``ceil(cotarget / reach)``, as the static
algebra and CuTe do.

Defining property: substituting values into ``complement(L, n)`` gives a layout with the
same size and the same offset at every index as the static ``complement`` of the
substituted operands. A refusal names a condition whose truth depends on the values.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tylo.layouts import (
    ComplementError,
    Layout,
    LayoutError,
    UndecidableError,
    complement,
    dim,
    logical_divide,
    size,
    substitute,
)
from tylo.layouts.strategies import injective_layouts

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
N = dim("N")
N32 = dim("N", multiple_of=32)
S = dim("S")


def same_function(got: Layout, want: Layout) -> None:
    """Same size and the same offset at every 1-D index."""
    assert size(got) == size(want), (got, want)
    for i in range(size(want)):
        assert got(i) == want(i), (got, want, i)


def test_cute_examples_round_up():
    assert str(complement(Layout(32, 1), N)) == "ceiling(N/32):32"
    assert str(logical_divide(Layout(N, 1), Layout(32, 1))) == "(32,ceiling(N/32)):(1,32)"
    got = logical_divide(Layout(N32, 1), Layout(32, 2))
    assert str(got) == "(32,(2,ceiling(N/64))):(2,(1,64))"  # CuTe's form
    assert str(complement(Layout(32, 2), N32)) == "(2,ceiling(N/64)):(1,64)"
    for n in (32, 64, 96, 160, 1024):
        same_function(substitute(got, {"N": n}), logical_divide(Layout(n, 1), Layout(32, 2)))


@SETTINGS
@given(
    injective_layouts(32),
    st.sampled_from([N, N32, 2 * N, N + 3, 3 * N32]),
    st.lists(st.integers(1, 200), min_size=3, max_size=3),
)
def test_symbolic_cotarget_substitutes_to_the_static_complement(x, cotarget, values):
    try:
        sym = complement(x, cotarget)
    except LayoutError:
        # the static complement must then refuse as well (inadmissible x) for some value
        refused = 0
        for v in values:
            try:
                complement(x, substitute(cotarget, {"N": 32 * v}))
            except LayoutError:
                refused += 1
        assert refused, f"complement({x}, {cotarget}) refused, the static ones do not"
        return
    for v in values:
        n = 32 * v if cotarget.free_symbols == {N32} else v
        env = {"N": n}
        same_function(substitute(sym, env), complement(x, substitute(cotarget, env)))


@SETTINGS
@given(st.integers(2, 6), st.integers(1, 4), st.lists(st.integers(1, 90), min_size=3, max_size=3))
def test_symbolic_extent_substitutes_to_the_static_complement(k, d, values):
    # k >= 2: mode N:k*d then continues k:d with gap 1 whatever N is (for k == 1 the
    # mode may be trivial, test_a_mode_that_may_be_trivial_is_still_refused)
    x = Layout((k, N), (d, k * d))
    sym = complement(x, 4 * N * k * d + 3)
    for n in values:
        env = {"N": n}
        same_function(substitute(sym, env), complement(substitute(x, env), 4 * n * k * d + 3))


def test_a_mode_that_may_be_trivial_is_still_refused():
    """Mode S:4 of (2,S):(1,4) is skipped when S == 1 (reach 2) and kept otherwise (reach
    4S): the last extent then depends on S, so tylo refuses naming S == 1."""
    x = Layout((2, S), (1, 4))
    with pytest.raises(UndecidableError) as info:
        complement(x, N)
    assert "S" in info.value.condition
    sizes = {size(complement(substitute(x, {"S": s}), 5)) for s in (1, 2)}
    assert len(sizes) == 2  # the sizes really differ with S: the refusal is needed
    # a multiple of the reach makes either reading agree, so it is given
    got = complement(x, 8 * S)
    for s in (1, 2, 3):
        same_function(substitute(got, {"S": s}), complement(substitute(x, {"S": s}), 8 * s))


def test_divide_by_an_inadmissible_tiler_refuses_without_a_fake_complement():
    """complement((2,2):(1,3), 3) does not exist (offset 2 is covered only by R containing
    1 or 2, and both collide with the tiler's offsets {0,1,3,4}); the divide used to
    return A o (B, 1:0) anyway."""
    b = Layout((2, 2), (1, 3))
    offsets = {0, 1, 3, 4}
    for r in (1, 2):  # the only R values that could reach offset 2
        assert any((o + r) in offsets for o in offsets)
    with pytest.raises(ComplementError) as info:
        logical_divide(Layout(3, 1), b)
    assert "logical_divide" in str(info.value)
    assert "no complement exists" not in str(info.value)


def test_inadmissible_static_layout_gets_cutes_construction_when_checked():
    """(2,2):(1,5) is not admissible; CuTe's construction (gaps rounded down) gives 2:2,
    which covers [0, 3) injectively with the layout's offsets {0, 1, 5, 6}: tylo checks
    and returns it (the divide by that tiler then exists too)."""
    x = Layout((2, 2), (1, 5))
    r = complement(x, 3)
    assert r == Layout(2, 2)
    sums = [a + b for b in (r(0), r(1)) for a in (0, 1, 5, 6)]
    assert len(set(sums)) == len(sums) and {0, 1, 2} <= set(sums)
    d = logical_divide(Layout(3, 1), x)
    assert d[0] == x
