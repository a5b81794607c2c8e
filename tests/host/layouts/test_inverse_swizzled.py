"""Inverses of swizzled layouts ``S o L``: the defining properties at every point, the
shared-memory atoms kernels use, and the refusals (typed, and never claiming that no
layout exists unless the inner layout shows it)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tylo.layouts import Layout, dim, left_inverse, right_inverse, size
from tylo.layouts.errors import InverseError
from tylo.layouts.inverse import ENUMERATION_LIMIT
from tylo.layouts.strategies import swizzled_layouts
from tylo.layouts.swizzle import ComposedLayout, Swizzle

from .test_inverse_exact import NO_LAYOUT, signed_layouts

ATOMS = [
    (Swizzle(3, 3, 3), Layout((8, 64), (64, 1))),  # 128B swizzle, bf16 elements, K-major
    (Swizzle(2, 3, 3), Layout((8, 32), (32, 1))),  # 64B
    (Swizzle(1, 3, 3), Layout((8, 16), (16, 1))),  # 32B
    (Swizzle(3, 4, 3), Layout((8, 128), (128, 1))),  # 128B swizzle on bytes
    (Swizzle(3, 3, 3), Layout((64, 8), (1, 64))),  # MN-major
    (Swizzle(3, 3, 3), Layout(((8, 2), (64, 2)), ((64, 512), (1, 1024)))),  # tiled atom
    (Swizzle(3, 3, -3), Layout((64, 8), (8, 1))),
]


def check_right(x, r) -> None:
    for i in range(size(r)):
        j = r(i)
        assert 0 <= j < size(x), (x, r, i, j)
        assert x(j) == i, (x, r, i, j)


def check_left(x, r) -> None:
    for c in range(size(x)):
        o = x(c)
        assert 0 <= o < size(r), (x, r, c, o)
        assert r(o) == c, (x, r, c, o)


@pytest.mark.parametrize("sw,inner", ATOMS, ids=lambda v: str(v))
def test_atoms_invert_to_swizzled_layouts(sw, inner):
    x = ComposedLayout(sw, 0, inner)
    r = right_inverse(x)
    assert isinstance(r, ComposedLayout) and isinstance(r.outer, Swizzle)
    assert size(r) == size(inner)  # the whole tile: a bijection
    check_right(x, r)
    li = left_inverse(x)
    assert isinstance(li, ComposedLayout)
    check_left(x, li)


def test_identity_swizzle_on_the_domain_gives_a_layout():
    """S<1,2,3> moves bit 5 into bit 2: on offsets below 32 it is the identity."""
    x = ComposedLayout(Swizzle(1, 2, 3), 0, Layout((4, 8), (8, 1)))
    assert right_inverse(x) == right_inverse(x.inner)
    check_left(x, left_inverse(x))
    x = ComposedLayout(Swizzle(0, 0, 0), 0, Layout((4, 8), (8, 1)))
    assert left_inverse(x) == left_inverse(x.inner)


def test_large_domain_proved_bitwise():
    """2**17 indices, past the enumeration limit: exactness is proved from the bits."""
    x = ComposedLayout(Swizzle(3, 3, 3), 0, Layout((8, 2**14), (2**14, 1)))
    assert size(x) > ENUMERATION_LIMIT
    r = right_inverse(x)
    li = left_inverse(x)
    rng = random.Random(10)
    for i in [0, 1, 2**17 - 1] + [rng.randrange(2**17) for _ in range(3000)]:
        assert x(r(i)) == i
        assert li(x(i)) == i


@settings(max_examples=200, deadline=None)
@given(swizzled_layouts())
def test_swizzled_inverse_properties(x):
    """Either the property at every point, or an InverseError naming the operation that
    makes no claim that no layout exists (the inner layout is injective here)."""
    for fn, check in ((right_inverse, check_right), (left_inverse, check_left)):
        try:
            r = fn(x)
        except InverseError as e:
            assert str(e).startswith(f"{fn.__name__}({x})")
            assert NO_LAYOUT not in str(e)
            continue
        check(x, r)


@settings(max_examples=120, deadline=None)
@given(
    st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(3, 5)),
    signed_layouts(max_size=32, max_stride=12),
)
def test_swizzled_signed_inner(params, inner):
    """Any inner layout (zero and negative strides): the right inverse holds or refuses;
    a left inverse refusal that claims no layout exists is true of S o L itself."""
    b, m, s = params
    x = ComposedLayout(Swizzle(b, m, s), 0, inner)
    try:
        check_right(x, right_inverse(x))
    except InverseError as e:
        assert NO_LAYOUT not in str(e)
    try:
        r = left_inverse(x)
    except InverseError as e:
        if NO_LAYOUT in str(e):
            offs = [x(i) for i in range(size(x))]
            assert len(set(offs)) < len(offs) or min(offs) < 0, str(e)
        return
    check_left(x, r)


def test_refusal_when_the_inverse_is_no_swizzled_layout():
    """(3,4):(4,1) has right inverse (4,3):(3,1); S<1,0,2> reads bit 2 and writes bit 0;
    (4,3):(3,1) sends index bit 0 to 3: no bit image, so no S' o (4,3):(3,1). The
    refusal says what tylo needs, and a search over every swizzle confirms none fits."""
    x = ComposedLayout(Swizzle(1, 0, 2), 0, Layout((3, 4), (4, 1)))
    with pytest.raises(InverseError, match="tylo represents it only as") as e:
        right_inverse(x)
    assert NO_LAYOUT not in str(e.value)
    q = right_inverse(x.inner)
    fits = [
        (b, m, s)
        for b in range(1, 4)
        for m in range(6)
        for s in range(-6, 7)
        if abs(s) >= b
        and (m + s >= 0)
        and all(q(x.outer(i)) == Swizzle(b, m, s)(q(i)) for i in range(size(q)))
    ]
    assert fits == []


def test_unsupported_composed_operands_are_typed():
    sw_off = ComposedLayout(Swizzle(3, 3, 3), 8, Layout((8, 64), (64, 1)))
    for fn in (left_inverse, right_inverse):
        with pytest.raises(InverseError, match="offset 0"):
            fn(sw_off)
    lay = ComposedLayout(Layout(64, 2), 0, Layout((8, 8), (8, 1)))
    for fn in (left_inverse, right_inverse):
        with pytest.raises(InverseError, match="outer function is a Swizzle"):
            fn(lay)
    n = dim("N", multiple_of=8)
    sym = ComposedLayout(Swizzle(3, 3, 3), 0, Layout((8, n), (n, 1)))
    with pytest.raises(InverseError, match="static"):
        right_inverse(sym)


def test_right_inverse_size_not_a_multiple_of_the_block():
    """S<3,3,3> permutes blocks of 512. On [0, 96) it stays inside (64..95 flip bit 3), so
    the right inverse of S o 96:1 has size 96; on [0, 100) it maps 96 to 104: refused,
    naming that index (a right inverse exists, a smaller one; tylo does not cut it)."""
    x = ComposedLayout(Swizzle(3, 3, 3), 0, Layout(96, 1))
    r = right_inverse(x)
    assert size(r) == 96
    check_right(x, r)
    x = ComposedLayout(Swizzle(3, 3, 3), 0, Layout(100, 1))
    with pytest.raises(InverseError, match="maps index 96 to 104") as e:
        right_inverse(x)
    assert NO_LAYOUT not in str(e.value)


@st.composite
def pow2_layouts(draw) -> Layout:
    """Power-of-two extents (size <= 2**11) with strides compact in a random order, each
    scaled by 1, 2 or 3: layouts whose bits a swizzle acts on, with carries possible."""
    n = draw(st.integers(2, 4))
    exts = [draw(st.sampled_from([2, 4, 8])) for _ in range(n)]
    order = draw(st.permutations(range(n)))
    strides = [0] * n
    acc = 1
    for i in order:
        strides[i] = acc * draw(st.sampled_from([1, 1, 2, 3]))
        acc = strides[i] * exts[i]
    return Layout(tuple(exts), tuple(strides))


@settings(max_examples=60, deadline=None)
@given(pow2_layouts(), st.integers(1, 3), st.integers(0, 2), st.integers(0, 2), st.booleans())
def test_swizzled_inverses_of_bit_layouts(inner, b, m, extra, neg):
    """Layouts a swizzle acts on bit by bit, with gaps and odd strides that may carry into
    the swizzled bits: whatever tylo returns holds at every point (it is checked against
    the whole domain here, while tylo's own proof looks only at one block and the bits)."""
    s = -(b + extra) if neg and m >= b + extra else b + extra
    x = ComposedLayout(Swizzle(b, m, s), 0, inner)
    for fn, check in ((right_inverse, check_right), (left_inverse, check_left)):
        try:
            r = fn(x)
        except InverseError as e:
            assert NO_LAYOUT not in str(e) or fn is left_inverse
            continue
        check(x, r)
