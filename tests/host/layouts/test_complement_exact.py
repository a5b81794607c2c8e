"""complement(A, n) is exact or refused (issue 10, part 1).

Defining properties (with ``A' = filter_(A)``: stride-0 and extent-1 modes ignored, as
CuTe filters them): ``(A', R)`` is injective, so the images of A' and R meet only at 0
(pycute's disjointness); its image covers ``[0, n)``; R is ordered (``R(i-1) < R(i)``);
so ``size(A') * size(R) >= n``. A refusal that says no complement exists is checked by
brute force: A' is then not injective, so no R makes ``(A', R)`` injective.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tylo.layouts import (
    ComplementError,
    Layout,
    ShapeError,
    UndecidableError,
    complement,
    cosize,
    dim,
    filter_,
    make_layout,
    size,
    substitute,
)
from tylo.layouts.strategies import injective_layouts, nest

P = Layout.parse
NO_COMPLEMENT = "no complement exists"
PROPERTY = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def offsets(x: Layout) -> list[int]:
    return [x(i) for i in range(size(x))]


def assert_complement(a: Layout, n: int, r: Layout) -> None:
    f = filter_(a)
    both = offsets(make_layout(f, r))
    assert len(set(both)) == len(both), (str(a), n, str(r))  # (A', R) injective
    image_a, image_r = set(offsets(f)), offsets(r)
    assert all(x == 0 or x not in image_a for x in image_r)  # disjoint but for 0
    assert set(range(n)) <= set(both)  # covers [0, n)
    assert all(image_r[i - 1] < image_r[i] for i in range(1, len(image_r)))  # ordered
    assert size(f) * size(r) >= n


def check(a: Layout, n: int) -> Layout | None:
    try:
        r = complement(a, n)
    except ComplementError as e:
        msg = str(e)
        assert f"complement({a}, {n})" in msg
        if NO_COMPLEMENT in msg:
            image = offsets(filter_(a))
            assert len(set(image)) < len(image)  # A' not injective: no R can help
        return None
    assert_complement(a, n, r)
    return r


@st.composite
def any_layouts(draw, max_size=32, max_leaves=4, hi=20):
    n = draw(st.integers(1, max_leaves))
    flat, budget = [], max_size
    for _ in range(n):
        if budget < 2:
            break
        e = draw(st.integers(1, min(budget, 6)))
        flat.append(e)
        budget //= e
    flat = flat or [1]
    strides = iter(draw(st.lists(st.integers(0, hi), min_size=len(flat), max_size=len(flat))))
    shape = draw(nest(tuple(flat)))

    def regroup(t):
        return tuple(regroup(e) for e in t) if type(t) is tuple else next(strides)

    return Layout(shape, regroup(shape))


@PROPERTY
@given(any_layouts(), st.integers(1, 80))
def test_complement_exact_or_refused(a, n):
    check(a, n)


@PROPERTY
@given(injective_layouts(max_size=32), st.integers(1, 4))
def test_admissible_layouts_always_have_a_complement(a, k):
    n = k * cosize(a) - (k > 1)
    r = check(a, n)
    assert r is not None
    # an admissible layout and its complement are a bijection onto an interval
    both = sorted(offsets(make_layout(filter_(a), r)))
    assert both == list(range(len(both)))


def test_issue_examples():
    r = check(P("(4,6):(1,6)"), 1)  # inadmissible, yet 1:0 is a valid complement
    assert r is not None and size(r) == 1
    assert check(P("(4,6):(1,6)"), 4) is not None
    with pytest.raises(ComplementError) as info:
        complement(P("(4,6):(1,6)"), 24)
    assert NO_COMPLEMENT not in str(info.value) and "not admissible" in str(info.value)
    with pytest.raises(ComplementError, match=NO_COMPLEMENT):
        complement(P("(4,2,2):(1,6,7)"), 2)  # not injective: 7 == 1 + 6
    assert check(P("(2,3):(2,3)"), 1) is not None


@pytest.mark.parametrize("bad", [-5, 0, True, 2.5, "8", (2, 0)])
def test_cotarget_must_be_a_positive_size(bad):
    with pytest.raises(ShapeError, match="cotarget"):
        complement(P("4:1"), bad)


def test_stride_zero_modes_are_ignored_as_documented():
    for a in (P("4:0"), P("(4,2):(0,1)"), P("(2,4,3):(1,0,2)")):
        for n in (1, 6, 16):
            r = check(a, n)
            assert r is not None
            assert complement(a, n) == complement(filter_(a), n)


def test_symbolic_complement_and_cotarget():
    n = dim("n")
    r = complement(Layout(4, n), 16 * n)
    for v in (1, 3, 8):
        assert_complement(substitute(Layout(4, n), {"n": v}), 16 * v, substitute(r, {"n": v}))
    with pytest.raises(UndecidableError):
        complement(Layout(4, 1), n - 5)  # n - 5 >= 1 depends on n
    with pytest.raises(ShapeError):
        complement(Layout(4, 1), -n)
