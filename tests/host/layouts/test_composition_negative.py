"""composition(A, B) with a right operand that reaches negative indices of A (issue 34,
item 9).

Below 0, A is outside its domain and the peers extend it differently: CuTe's C++ splits a
negative index with C's truncating division, pycute (and tylo's ``A(i)``) with floor
division. tylo composes such a B only where the two agree at every negative index B
reaches, so a result is right in both conventions, and otherwise raises CompositionError
saying why. Both halves are checked by brute force with evaluators written here from
shape and stride alone: every result against both conventions at every coordinate of B;
every small static refusal by finding an index B reaches where the conventions differ.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tylo.layouts import (
    CompositionError,
    Layout,
    LayoutError,
    UndecidableError,
    composition,
    dim,
    sample_assignment,
    size,
    substitute,
)
from tylo.layouts.strategies import nest, symbolic_layouts

P = Layout.parse
NEGATIVE = "reaches negative indices"
PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def flat(t: object) -> tuple:
    return tuple(x for e in t for x in flat(e)) if type(t) is tuple else (t,)


def ev(a: Layout, i: int, trunc: bool) -> int:
    """A(i) from shape and stride: split colexicographically, the last flat mode unbounded;
    a negative ``i`` split with floor division or, ``trunc``, C's truncating division."""
    fs, fd = flat(a.shape), flat(a.stride)
    total = 0
    for s, d in zip(fs[:-1], fd[:-1]):
        q = i // s if not trunc else abs(i) // s * (1 if i >= 0 else -1)
        total += (i - q * s) * d
        i = q
    return total + i * fd[-1]


def offsets(b: Layout) -> list[int]:
    """B(c) for every coordinate, colexicographic, from shape and stride."""
    out = [0]
    for s, d in zip(flat(b.shape), flat(b.stride)):
        out = [o + x * d for x in range(s) for o in out]
    return out


def differing_index(a: Layout, b: Layout) -> int | None:
    for i in offsets(b):
        if i < 0 and ev(a, i, False) != ev(a, i, True):
            return i
    return None


def check(a: Layout, b: Layout) -> str:
    """Compose and judge: 'composed' (R agrees with both conventions at every coordinate of
    B) or 'refused' (typed; a negative-index refusal of small static operands has an index
    where the conventions differ)."""
    try:
        r = composition(a, b)
    except CompositionError as e:
        msg = str(e)
        assert "no layout exists" not in msg or NEGATIVE not in msg
        if NEGATIVE in msg:
            assert min(offsets(b)) < 0
            assert differing_index(a, b) is not None, (str(a), str(b))
            return "refused: negative"
        return "refused"
    got = offsets(r)
    for c, i in enumerate(offsets(b)):
        assert got[c] == ev(a, i, False) == ev(a, i, True), (str(a), str(b), str(r), c)
    return "composed"


@st.composite
def signed_layouts(draw, max_size=32, max_leaves=4, lo=-9, hi=12):
    """Random extents, strides in [lo, hi] (negative and zero included), random nesting."""
    n = draw(st.integers(1, max_leaves))
    extents, budget = [], max_size
    for _ in range(n):
        if budget < 2:
            break
        e = draw(st.integers(1, min(budget, 6)))
        extents.append(e)
        budget //= e
    extents = extents or [1]
    strides = iter(
        draw(st.lists(st.integers(lo, hi), min_size=len(extents), max_size=len(extents)))
    )
    shape = draw(nest(tuple(extents)))

    def regroup(t):
        return tuple(regroup(e) for e in t) if type(t) is tuple else next(strides)

    return Layout(shape, regroup(shape))


@st.composite
def negative_right_operands(draw):
    """B with at least one negative stride on an extent >= 2 (so B reaches below 0); half
    the time every stride a multiple of a small k (negative indices all multiples of k)."""
    b = draw(signed_layouts(max_size=24, lo=-6, hi=8))
    fs, fd = list(flat(b.shape)), list(flat(b.stride))
    big = [j for j, s in enumerate(fs) if s >= 2]
    if not big:
        fs[0], big = 2, [0]
    j = draw(st.sampled_from(big))
    fd[j] = -abs(fd[j]) or -draw(st.integers(1, 4))
    if draw(st.booleans()):
        k = draw(st.sampled_from([2, 3, 4, 8]))
        fd = [d * k for d in fd]
    shape = draw(nest(tuple(fs)))
    it = iter(fd)

    def regroup(t):
        return tuple(regroup(e) for e in t) if type(t) is tuple else next(it)

    return Layout(shape, regroup(shape))


# -- the issue's example and its neighbours ------------------------------------------------


def test_issue_example_is_refused_saying_why():
    a = P("(1,(2,4)):(0,(-1,512))")
    assert ev(a, -1, True) == 1 and ev(a, -1, False) == -513 == a(-1)
    for b in ("2:-1", "4:-1"):
        with pytest.raises(CompositionError) as info:
            composition(a, P(b))
        msg = str(info.value)
        assert msg.startswith(f"composition({a}, {b}): ")
        assert NEGATIVE in msg and "A(-1) is 1 with truncation and -513 with floor" in msg
        assert "no layout exists" not in msg


@pytest.mark.parametrize(
    "a, b, want",
    [
        ("4:1", "4:-1", "4:-1"),  # A is one unbounded mode: every convention agrees
        ("4:-1", "4:-1", "4:1"),
        ("4:1", "4:-2", "4:-2"),
        ("(1,(2,4)):(0,(-1,512))", "2:-2", "2:-512"),  # every negative index a multiple of 2
        ("(4,8):(8,1)", "4:-4", "4:-1"),
        ("(4,4):(-1,1)", "(2,4,2)", "(2,(2,2),2):(-1,(-2,1),2)"),  # A's strides only
    ],
)
def test_where_the_conventions_agree_it_composes(a, b, want):
    assert check(P(a), P(b)) == "composed"
    assert str(composition(P(a), P(b))) == want


@pytest.mark.parametrize(
    "a, b",
    [
        ("(4,8):(8,1)", "4:-1"),
        ("(4,8):(8,1)", "2:-1"),
        ("(2,4):(3,1)", "(2,2):(1,-2)"),  # each leaf alone agrees; their sum reaches -1
    ],
)
def test_where_they_differ_it_refuses(a, b):
    assert check(P(a), P(b)) == "refused: negative"


def test_large_right_operands_need_multiples():
    a = P("(4,4):(1,8)")
    with pytest.raises(CompositionError, match="past the 4096 indices") as info:
        composition(a, P("5000:-1"))
    assert "no layout exists" not in str(info.value)
    assert str(composition(a, P("5000:-4"))) == "5000:-8"


def test_symbolic_operands():
    n = dim("N")
    a = Layout((n, 4), (1, 2 * n))
    with pytest.raises(UndecidableError) as info:  # at N = 1 the conventions agree
        composition(a, P("2:-1"))
    assert info.value.operation == "composition"
    r = composition(a, Layout((2, 2), (n, -n)))
    for v in (1, 2, 5):
        ra, aa = substitute(r, {"N": v}), substitute(a, {"N": v})
        bb = Layout((2, 2), (v, -v))
        assert offsets(ra) == [ev(aa, i, True) for i in offsets(bb)]
        assert offsets(ra) == [ev(aa, i, False) for i in offsets(bb)]
    m = dim("M")
    with pytest.raises(CompositionError, match=NEGATIVE) as info:  # 4 | -1 never holds
        composition(Layout((4, m), (m, 1)), P("4:-1"))
    assert "no layout exists" not in str(info.value)


# -- properties over random operands ---------------------------------------------------------


@PROPERTY
@given(signed_layouts(), negative_right_operands())
def test_negative_right_operands_static(a, b):
    check(a, b)


@PROPERTY
@given(signed_layouts(), signed_layouts(max_size=24, lo=-6, hi=20))
def test_any_right_operands_static(a, b):
    check(a, b)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    symbolic_layouts(), negative_right_operands(), st.booleans(), st.randoms(use_true_random=False)
)
def test_negative_right_operands_symbolic(case, b, negate, rng):
    """A symbolic A (strides negated at random) with a negative-stride B: a result agrees
    with both conventions at sampled values; a refusal is typed."""
    a, assumptions = case
    if negate:
        a = Layout(a.shape, _negate_first(a.stride))
    if a.is_static:  # the strategy draws static layouts too
        check(a, b)
        return
    try:
        r = composition(a, b)
    except (CompositionError, UndecidableError) as e:
        assert "no layout exists" not in str(e)
        return
    except LayoutError as e:  # any other refusal must be typed too
        assert str(e)
        return
    for _ in range(3):
        vals = sample_assignment(
            [a], random.Random(rng.random()), max_value=12, assumptions=assumptions
        )
        ra, aa = substitute(r, vals), substitute(a, vals)
        assert size(ra) == size(b)
        got = offsets(ra)
        for c, i in enumerate(offsets(b)):
            assert got[c] == ev(aa, i, False) == ev(aa, i, True), (str(a), str(b), vals)


def _negate_first(stride: object) -> object:
    done = [False]

    def go(t: object) -> object:
        if type(t) is tuple:
            return tuple(go(e) for e in t)
        if not done[0] and t != 0:
            done[0] = True
            return -t
        return t

    return go(stride)
