"""complement(A, n) ignores A's stride-0 (and extent-1) modes, as CuTe filters them first
(issue 34, item 9: ``complement(2:0, 4)`` is ``4:1``, and the docs say so).

Checked against a brute-force definition written here from shape and stride alone: with
``A'`` the flat modes of A that have stride != 0 and extent != 1, the complement of an
admissible ``A'`` is the ordered R whose image tiles ``[0, M)`` with A's image
(``(A', R)`` a bijection onto ``[0, M)``), for the smallest ``M >= n`` for which such a
tiling exists. Such an R is unique: each ``R(j)`` is the smallest offset the earlier ones
leave uncovered, which the search below builds greedily.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tylo.layouts import ComplementError, Layout, complement, filter_, size
from tylo.layouts.strategies import injective_layouts, nest

P = Layout.parse
PROPERTY = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def flat(t: object) -> tuple:
    return tuple(x for e in t for x in flat(e)) if type(t) is tuple else (t,)


def image(modes: list[tuple[int, int]]) -> list[int]:
    """Offsets of the layout with these flat (extent, stride) modes, colexicographic."""
    out = [0]
    for s, d in modes:
        out = [o + x * d for x in range(s) for o in out]
    return out


def kept(a: Layout) -> list[tuple[int, int]]:
    """A' : A's flat modes without the stride-0 and extent-1 ones."""
    return [(s, d) for s, d in zip(flat(a.shape), flat(a.stride)) if d != 0 and s != 1]


def tiling(img: list[int], m: int) -> list[int] | None:
    """The ordered R with ``{a + r}`` a bijection onto ``[0, m)``, or None."""
    covered = [False] * m
    r = []
    for y in range(m):
        if covered[y]:
            continue
        for a in img:
            if y + a >= m or covered[y + a]:
                return None
            covered[y + a] = True
        r.append(y)
    return r


def brute_complement(a: Layout, n: int) -> list[int] | None:
    """R's offsets by the definition above (None when no M up to the bound tiles; for an
    admissible A' the answer's M is below ``n + 2*cosize(A')``)."""
    img = image(kept(a))
    if len(set(img)) < len(img):
        return None
    top = max(img) + 1
    for m in range(n, n + 2 * top + 1):
        r = tiling(img, m)
        if r is not None:
            return r
    return None


def admissible(modes: list[tuple[int, int]]) -> bool:
    cur = 1
    for d, s in sorted((d, s) for s, d in modes):
        if d < 1 or d % cur:
            return False
        cur = s * d
    return True


def offsets(x: Layout) -> list[int]:
    return image(list(zip(flat(x.shape), flat(x.stride))))


@st.composite
def with_zero_modes(draw, base=None):
    """A layout (an admissible injective one by default) with 1 to 3 stride-0 modes of
    extent 2..4 and up to 2 extent-1 modes spliced in at random places, then nested."""
    b = draw(base if base is not None else injective_layouts(max_size=24))
    fs, fd = list(flat(b.shape)), list(flat(b.stride))
    for _ in range(draw(st.integers(1, 3))):
        k = draw(st.integers(0, len(fs)))
        fs.insert(k, draw(st.integers(2, 4)))
        fd.insert(k, 0)
    for _ in range(draw(st.integers(0, 2))):
        k = draw(st.integers(0, len(fs)))
        fs.insert(k, 1)
        fd.insert(k, draw(st.integers(0, 9)))
    shape = draw(nest(tuple(fs)))
    it = iter(fd)

    def regroup(t):
        return tuple(regroup(e) for e in t) if type(t) is tuple else next(it)

    return Layout(shape, regroup(shape))


@st.composite
def any_nonneg_layouts(draw):
    """Any layout with strides in [0, 12] (so possibly not injective or not admissible)."""
    n = draw(st.integers(1, 3))
    fs = [draw(st.integers(1, 4)) for _ in range(n)]
    fd = [draw(st.integers(0, 12)) for _ in range(n)]
    return Layout(tuple(fs), tuple(fd))


def outcome(a: Layout, n: int) -> object:
    try:
        return offsets(complement(a, n))
    except ComplementError as e:
        return type(e)


# -- the example --------------------------------------------------------------------


@pytest.mark.parametrize(
    "a, n, want",
    [
        ("2:0", 4, "4:1"),  # the issue's example: A' is empty, R covers [0, 4)
        ("(2,3):(0,0)", 5, "5:1"),
        ("(2,4):(0,2)", 16, "(2,2):(1,8)"),  # A' = 4:2
        ("(4,2,3):(1,0,4)", 24, "2:12"),  # A' = (4,3):(1,4)
    ],
)
def test_stride_zero_modes_are_filtered_as_cute_does(a, n, want):
    r = complement(P(a), n)
    assert str(r) == want
    assert offsets(r) == brute_complement(P(a), n)


def test_a_non_injective_rest_is_still_refused():
    # filtering drops stride-0 modes only: (4,2,2):(1,6,7) is not injective (7 == 1 + 6)
    with pytest.raises(ComplementError, match="no complement exists"):
        complement(P("(2,4,2,2):(0,1,6,7)"), 2)


# -- properties -----------------------------------------------------------------------------


@PROPERTY
@given(with_zero_modes(), st.integers(1, 96))
def test_filtered_complement_is_the_brute_force_one(a, n):
    assert admissible(kept(a))
    assert offsets(complement(a, n)) == brute_complement(a, n), (str(a), n)


@PROPERTY
@given(with_zero_modes(any_nonneg_layouts()), st.integers(1, 64))
def test_filtering_changes_nothing(a, n):
    """complement(A) and complement(A') agree (the same offsets, or the same error class),
    A' built here from A's flat modes; on an admissible A' both are the brute-force one."""
    modes = kept(a)
    rest = Layout(tuple(s for s, _ in modes) or 1, tuple(d for _, d in modes) or 0)
    got = outcome(a, n)
    assert got == outcome(rest, n), (str(a), str(rest), n)
    if admissible(modes):
        assert got == brute_complement(a, n), (str(a), n)
    elif got is not ComplementError:  # any result has the defining property for A'
        img, r = image(modes), got
        both = [x + y for y in r for x in img]
        assert len(set(both)) == len(both) and set(range(n)) <= set(both)
        assert all(p < q for p, q in itertools.pairwise(r))


def test_brute_force_can_fail():
    """The oracle is not vacuous: it rejects a wrong answer and finds none for a tile that
    cannot tile."""
    assert brute_complement(P("4:2"), 17) == offsets(P("(2,3):(1,8)"))
    assert brute_complement(P("4:2"), 17) != offsets(P("(2,2):(1,8)"))
    assert tiling([0, 1, 3], 6) is None
    assert size(filter_(P("2:0"))) == 1
