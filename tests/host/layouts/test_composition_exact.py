"""composition(A, B) is exact or refused (issue 10, part 1).

Every returned layout is checked against ``A(B(c))`` at every coordinate ``c`` of B (A
evaluated by tylo itself past size(A), and below 0 also by C's truncating division, as
CuTe's C++ splits a negative index: tylo composes there only where the two agree); every
refusal that says no layout exists is checked by an independent brute force over every
refinement of B's shape, and every refusal of negative indices by finding one where the
two evaluations differ. Right operands are random: not injective, overlapping, interleaving,
reaching past
size(A), with zero and negative strides.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tylo.layouts import (
    ComposedLayout,
    CompositionError,
    Layout,
    LayoutError,
    ShapeError,
    Swizzle,
    UndecidableError,
    assuming,
    complement,
    composition,
    cosize,
    dim,
    logical_product,
    size,
    substitute,
)
from tylo.layouts.inttuple import flatten_tuple
from tylo.layouts.strategies import nest

P = Layout.parse
NO_LAYOUT = "no layout exists"
NEGATIVE = "reaches negative indices"
PROPERTY = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SYMBOLIC = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# -- brute force (independent of tylo's search) ---------------------------------------------


def _factorizations(n: int) -> list[tuple[int, ...]]:
    """Every ordered factorization of n into factors > 1 (``()`` for 1)."""
    if n == 1:
        return [()]
    out = []
    for t in range(2, n + 1):
        if n % t == 0:
            out.extend((t, *rest) for rest in _factorizations(n // t))
    return out


def _leaf_offsets(shape: tuple) -> list[int]:
    """Index of each factor's first element in a leaf refined into ``shape``."""
    out, acc = [], 1
    for t in shape:
        out.append(acc)
        acc *= t
    return out


def layout_exists(a: Layout, b: Layout) -> bool:
    """Whether some layout of B's shape, each leaf refined by any factorization, computes
    ``c -> A(B(c))`` at every coordinate of B. The strides of a candidate are fixed by
    the function (stride of a factor = the value at that factor's unit coordinate), so
    trying every combination of factorizations is exhaustive."""
    bs, bd = b.flat()
    values = [a(b(i)) for i in range(size(b))]
    choices = []
    for j, s in enumerate(bs):
        unit = 1
        for t in bs[:j]:
            unit *= t
        leaf = []
        for fac in _factorizations(s):
            strides = [values[unit * o] for o in _leaf_offsets(fac)]
            leaf.append(Layout(fac or 1, tuple(strides) or 0))
        choices.append(leaf)
    for combo in itertools.product(*choices):
        cand = Layout(tuple(x.shape for x in combo), tuple(x.stride for x in combo))
        if all(cand(i) == values[i] for i in range(len(values))):
            return True
    return False


def trunc_ev(a: Layout, i: int) -> int:
    """``A(i)`` from shape and stride, a negative ``i`` split with C's truncating division
    (CuTe's C++), the last flat mode unbounded."""
    fs, fd = flatten_tuple(a.shape), flatten_tuple(a.stride)
    total = 0
    for s, d in zip(fs[:-1], fd[:-1]):
        q = abs(i) // s * (1 if i >= 0 else -1)
        total += (i - q * s) * d
        i = q
    return total + i * fd[-1]


def conventions_differ(a: Layout, b: Layout) -> int | None:
    """A negative index B reaches where floor division (tylo's ``A(i)``) and truncation
    give different values of A, or None."""
    for i in range(size(b)):
        x = b(i)
        if x < 0 and a(x) != trunc_ev(a, x):
            return x
    return None


def assert_exact(a: Layout, b: Layout, r: Layout) -> None:
    """R has B's shape (leaves refined) and R(c) == A(B(c)) at every coordinate of B."""
    assert size(r) == size(b)
    rshape = r.shape if type(b.shape) is tuple else (r.shape,)
    bshape = b.shape if type(b.shape) is tuple else (b.shape,)

    def refines(rt: object, bt: object) -> bool:
        if type(bt) is tuple:
            return type(rt) is tuple and len(rt) == len(bt) and all(map(refines, rt, bt))
        prod = 1
        for x in flatten_tuple(rt) if type(rt) is tuple else (rt,):
            prod *= x
        return prod == bt

    assert refines(rshape, bshape), (str(r), str(b))
    for i in range(size(b)):
        assert r(i) == a(b(i)) == trunc_ev(a, b(i)), (str(a), str(b), str(r), i)


def check(a: Layout, b: Layout) -> Layout | None:
    """Compose; on success check exactness, on refusal check the claim. Returns R."""
    try:
        r = composition(a, b)
    except CompositionError as e:
        msg = str(e)
        assert "composition(" in msg and str(b) in msg
        if NEGATIVE in msg:
            assert NO_LAYOUT not in msg
            if size(b) <= 4096:
                assert conventions_differ(a, b) is not None, (str(a), str(b))
        elif NO_LAYOUT in msg:
            assert not layout_exists(a, b), (str(a), str(b))
        else:  # static and small: tylo decides exhaustively, so a refusal always claims
            assert size(b) > 4096
        return None
    assert isinstance(r, Layout)
    assert_exact(a, b, r)
    return r


# -- random operands --------------------------------------------------------------------------


@st.composite
def any_layouts(draw, max_size=48, max_leaves=4, lo=-6, hi=24):
    """Any layout: random extents and strides in [lo, hi] (zero, negative, repeated)."""
    n = draw(st.integers(1, max_leaves))
    flat, budget = [], max_size
    for _ in range(n):
        if budget < 2:
            break
        e = draw(st.integers(1, min(budget, 8)))
        flat.append(e)
        budget //= e
    flat = flat or [1]
    strides = draw(st.lists(st.integers(lo, hi), min_size=len(flat), max_size=len(flat)))
    shape = draw(nest(tuple(flat)))
    it = iter(strides)

    def regroup(t):
        return tuple(regroup(e) for e in t) if type(t) is tuple else next(it)

    return Layout(shape, regroup(shape))


@PROPERTY
@given(any_layouts(lo=-3, hi=12), any_layouts(max_size=32, lo=-8, hi=30))
def test_composition_exact_or_refused(a, b):
    check(a, b)


@PROPERTY
@given(any_layouts(max_size=12, lo=0, hi=6), any_layouts(max_size=24, lo=1, hi=40))
def test_composition_past_size_of_a(a, b):
    # small A, right operands reaching far past size(A): the last mode of A keeps counting
    check(a, b)


@PROPERTY
@given(any_layouts(max_size=48, lo=1, hi=16), st.data())
def test_composition_int_tiler(a, data):
    n = data.draw(st.integers(1, 3 * size(a)))
    r = check(a, Layout(n, 1))
    try:
        ri = composition(a, n)
    except CompositionError:
        assert r is None
    else:
        assert r is not None and all(ri(i) == r(i) for i in range(n))


# -- the issue's examples -------------------------------------------------------------------


@pytest.mark.parametrize(
    "a, b",
    [
        ("(2,2):(1,4)", "(2,2):(1,1)"),  # B's modes overlap in A's domain
        ("(6,2):(1,100)", "(2,3):(3,2)"),  # injective B whose modes interleave
        ("(4,6):(1,5)", "4:3"),
        ("(3,5):(1,4)", "4:1"),
    ],
)
def test_no_layout_claims_are_true(a, b):
    with pytest.raises(CompositionError, match=NO_LAYOUT):
        composition(P(a), P(b))
    assert not layout_exists(P(a), P(b))


@pytest.mark.parametrize(
    "a, b",
    [
        ("1:1", "4:1"),  # B past size(A): tylo's A(4) is 4
        ("(4,3,1):(3,1,0)", "24:1"),  # past size(A) the extent-1 last mode keeps stride 0
        ("(8,8):(8,1)", "2:3"),  # a leaf that fits in a non-dividing extent
        ("(6,2):(8,2)", "(4,3):(3,1)"),  # two leaves share A's first mode without carry
        ("(4,8):(1,4)", "4:-1"),  # negative stride: A is the identity everywhere
        ("(4,8):(8,1)", "4:-4"),  # negative stride landing in A's last mode
        ("(1,(2,4)):(0,(-1,512))", "2:-2"),  # negative indices, all multiples of 2
        ("(4,4):(-1,1)", "(2,4,2)"),  # a negative stride in A only: indices >= 0
    ],
)
def test_issue_examples_are_exact(a, b):
    r = check(P(a), P(b))
    assert r is not None


def test_past_size_agrees_with_evaluation_beyond_size():
    a = P("(4,3,1):(3,1,0)")
    r = composition(a, 24)
    assert [r(c) for c in range(12, 24)] == [a(c) for c in range(12, 24)]
    assert a(12) == 0 and r(12) == 0  # the extent-1 last mode has stride 0
    assert composition(P("1:1"), 4)(3) == P("1:1")(3) == 3


def test_logical_product_inherits_exactness():
    a, b = P("2:4"), P("(2,3):(2,1)")
    with pytest.raises(CompositionError, match=NO_LAYOUT) as info:
        logical_product(a, b)
    assert "logical_product(2:4, (2,3):(2,1))" in str(info.value)
    # the claim concerns complement(A, size(A)*cosize(B)) o B, checked by brute force
    assert not layout_exists(complement(a, size(a) * cosize(b)), b)


def test_zero_and_negative_tilers_are_refused():
    for bad in (0, -3):
        with pytest.raises(ShapeError, match="n >= 1"):
            composition(P("(4,8):(1,4)"), bad)
    with pytest.raises(LayoutError):
        composition(P("(4,8):(1,4)"), (0, 2))
    with pytest.raises(ShapeError):
        composition(P("(4,8):(1,4)"), True)
    with pytest.raises(ShapeError):
        composition(P("(4,8):(1,4)"), 2.5)


def test_refusal_past_search_limit_does_not_claim():
    # 4 coprime-strided leaves overlap in A's first mode; size(B) is past the search limit
    a, b = P("(7,1000):(1,100)"), P("(2,2,2,2,2,2,2,2,2,2,2,2,2):(1,1,1,1,1,1,1,1,1,1,1,1,1)")
    with pytest.raises(CompositionError) as info:
        composition(a, b)
    msg = str(info.value)
    assert NO_LAYOUT not in msg and "not decided" in msg and "additive" in msg


# -- swizzled right operands ------------------------------------------------------------------


def test_swizzled_right_operand():
    inner = P("(8,64):(64,1)")
    sw = composition(Swizzle(3, 3, 3), inner)
    for ident in (P("4096:1"), P("(64,64):(1,64)"), P("1:1")):
        r = composition(ident, sw)
        assert isinstance(r, ComposedLayout)
        assert all(r(i) == ident(sw(i)) for i in range(size(inner)))
    with pytest.raises(CompositionError) as info:
        composition(P("(64,64):(64,1)"), sw)
    assert NO_LAYOUT not in str(info.value) and "identity" in str(info.value)
    with pytest.raises(CompositionError):
        composition(P("(64,64):(64,1)"), Swizzle(3, 3, 3))
    with pytest.raises(CompositionError):  # two outer functions
        composition(composition(Swizzle(2, 0, 3), P("4096:1")), sw)


# -- symbolic operands ------------------------------------------------------------------------


def test_symbolic_tilers_over_runtime_strides():
    m, k, lda = dim("M", multiple_of=64), dim("K", multiple_of=32), dim("lda")
    a = Layout((m, k), (1, lda))
    for tiler in ((64, 32), (Layout(16, 4), Layout((4, 8), (1, 4))), (None, 8)):
        r = composition(a, tiler)
        for vals in ({"M": 128, "K": 64, "lda": 130}, {"M": 64, "K": 96, "lda": 64}):
            ra, aa = substitute(r, vals), substitute(a, vals)
            tl = [Layout(t) if type(t) is int else t for t in tiler]
            for i, t in enumerate(tl):
                if t is None:
                    continue
                for c in range(size(t)):
                    assert ra[i](c) == aa[i](t(c))


def _agrees(a: Layout, b: Layout, r: Layout, vals: dict) -> bool:
    ra, aa, bb = substitute(r, vals), substitute(a, vals), substitute(b, vals)
    return all(ra(i) == aa(bb(i)) for i in range(size(bb)))


def test_symbolic_undecidable_names_the_condition():
    m = dim("M")
    with pytest.raises(UndecidableError) as info:
        composition(Layout((m, 2), (1, 1000)), Layout(16, 1))  # M | 16 or 16 <= M
    assert info.value.condition and info.value.operation == "composition"
    with assuming(m >= 17):
        with pytest.raises(UndecidableError) as info:  # 15 + 15 < M: additivity
            composition(Layout((m, 2), (1, 1000)), Layout((16, 16), (1, 1)))
        assert "additive" in str(info.value)
    with assuming(m >= 32):
        a, b = Layout((m, 2), (1, 1000)), Layout((16, 16), (1, 1))
        r = composition(a, b)
        assert _agrees(a, b, r, {"M": 48}) and _agrees(a, b, r, {"M": 32})


def test_symbolic_conditions_decided_by_facts():
    n = dim("N", multiple_of=16)
    # 16 <= N for every multiple of 16, so the leaf fits in N whichever N
    a, b = Layout((n, 4), (1, n + 1)), Layout((16, 4), (1, n))
    r = composition(a, b)
    for v in (16, 32, 64):
        assert _agrees(a, b, r, {"N": v})


def test_symbolic_refusal_does_not_claim_non_existence():
    n = dim("N", multiple_of=16)
    with pytest.raises(CompositionError) as info:
        composition(Layout((4, n), (1, 5)), Layout(4, 3))
    assert NO_LAYOUT not in str(info.value) and "symbolic" in str(info.value)
    m = dim("M")
    with pytest.raises(CompositionError) as info:  # negative stride inside A's bounded modes
        composition(Layout((4, m), (m, 1)), Layout(4, -1))
    assert NO_LAYOUT not in str(info.value)


@st.composite
def symbolic_pairs(draw):
    s0 = draw(st.integers(1, 8))
    b = draw(any_layouts(max_size=24, lo=-4, hi=20))
    return s0, b


@SYMBOLIC
@given(symbolic_pairs(), st.integers(1, 5), st.integers(1, 40))
def test_symbolic_results_agree_after_substitution(pair, kval, ldval):
    s0, b = pair
    k, lda = dim("K"), dim("lda")
    a = Layout((s0, k), (1, lda))
    try:
        r = composition(a, b)
    except (CompositionError, UndecidableError) as e:
        assert NO_LAYOUT not in str(e)
        return
    vals = {"K": kval, "lda": ldval}
    ra, aa = substitute(r, vals), substitute(a, vals)
    assert all(ra(i) == aa(b(i)) == trunc_ev(aa, b(i)) for i in range(size(b)))
