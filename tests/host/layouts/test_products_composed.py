"""Products, tile_to_shape, flatten, select and group_modes: the rearrangement properties
of the products over whole domains, the same operations on swizzled (composed) operands,
and typed refusals of invalid operands."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tylo.layouts import (
    Layout,
    blocked_product,
    complement,
    composition,
    cosize,
    flat_product,
    flatten,
    group_modes,
    logical_product,
    make_tv_layout,
    raked_product,
    select,
    size,
    tile_to_shape,
    tiled_product,
    tv_coords,
    tv_owners,
    zipped_product,
)
from tylo.layouts.errors import CompositionError, LayoutError, ShapeError
from tylo.layouts.inttuple import product_each
from tylo.layouts.product import make_ordered_layout
from tylo.layouts.strategies import compact_layouts, injective_layouts, swizzled_layouts
from tylo.layouts.swizzle import ComposedLayout, Swizzle

SWIZZLES = st.builds(
    lambda b, m, s: Swizzle(b, m, s), st.integers(0, 3), st.integers(0, 4), st.integers(3, 5)
)


def rank2(x: Layout) -> Layout:
    """x as a rank-2 layout (a rank-1 x gets a 1:0 mode)."""
    if type(x.shape) is tuple and len(x.shape) == 2:
        return x
    if type(x.shape) is tuple and len(x.shape) == 1:
        return Layout._make((x.shape[0], 1), (x.stride[0], 0))
    if type(x.shape) is tuple:
        return Layout._make((x.shape[0], x.shape[1:]), (x.stride[0], x.stride[1:]))
    return Layout._make((x.shape, 1), (x.stride, 0))


def mode_sizes(x: Layout) -> list[int]:
    return [size(x[i]) for i in range(len(x.shape))]


def same_function(a, b) -> None:
    assert size(a) == size(b)
    assert [a(i) for i in range(size(a))] == [b(i) for i in range(size(b))], (str(a), str(b))


@st.composite
def block_and_tiles(draw):
    a = rank2(draw(injective_layouts(max_size=16, max_leaves=3)))
    b = rank2(draw(compact_layouts(max_size=12, max_leaves=3)))
    return a, b


@settings(max_examples=80, deadline=None)
@given(block_and_tiles())
def test_blocked_and_raked_rearrange_the_logical_product(ab):
    """blocked(((a0,b0),(a1,b1))) == raked(((b0,a0),(b1,a1))) == logical((a0,a1),(b0,b1))
    at every coordinate, and the logical product is (A, complement(A, size*cosize) o B)."""
    a, b = ab
    try:
        lp = logical_product(a, b)
    except LayoutError:
        # complement(A, ...) o B is not a layout: every product refuses alike
        for fn in (blocked_product, raked_product):
            with pytest.raises(LayoutError):
                fn(a, b)
        return
    assert lp[0] == a
    same_function(lp[1], composition(complement(a, size(a) * cosize(b)), b))
    bp, rp = blocked_product(a, b), raked_product(a, b)
    sa, sb = mode_sizes(a), mode_sizes(b)
    for a0, a1, b0, b1 in itertools.product(range(sa[0]), range(sa[1]), range(sb[0]), range(sb[1])):
        want = lp((a0, a1), (b0, b1))
        assert bp((a0, b0), (a1, b1)) == want
        assert rp((b0, a0), (b1, a1)) == want


@settings(max_examples=80, deadline=None)
@given(injective_layouts(max_size=16, max_leaves=3), st.data())
def test_tiled_and_flat_are_the_zipped_product(a, data):
    """tiled_product and flat_product regroup zipped_product: the same function."""
    r = len(a.shape) if type(a.shape) is tuple else 1
    k = data.draw(st.integers(1, r))
    tiler = tuple(data.draw(compact_layouts(max_size=4, max_leaves=2)) for _ in range(k))
    try:
        z = zipped_product(a, tiler)
    except LayoutError:
        for fn in (tiled_product, flat_product):
            with pytest.raises(LayoutError):
                fn(a, tiler)
        return
    same_function(tiled_product(a, tiler), z)
    same_function(flat_product(a, tiler), z)
    fp = flat_product(a, tiler)
    zs = z.shape
    assert fp.shape == _top(zs[0]) + _top(zs[1])  # both modes unpacked one level


def _top(mode):
    return mode if type(mode) is tuple else (mode,)


PRODUCTS = [
    blocked_product,
    raked_product,
    logical_product,
    zipped_product,
    tiled_product,
    flat_product,
]


@settings(max_examples=80, deadline=None)
@given(swizzled_layouts(max_size=16), compact_layouts(max_size=8, max_leaves=2))
def test_products_of_swizzled_blocks(c, b):
    """Every product of S o A is S o (the product of A): same outer, offset and function."""
    for fn in PRODUCTS:
        tiler = b if fn in (blocked_product, raked_product, logical_product) else (b,)
        try:
            want = fn(c.inner, tiler)
        except LayoutError as e:
            with pytest.raises(type(e)):
                fn(c, tiler)
            continue
        got = fn(c, tiler)
        assert isinstance(got, ComposedLayout), fn.__name__
        assert (got.outer, got.offset, got.inner) == (c.outer, c.offset, want)
        for i in range(size(want)):
            assert got(i) == c.outer(want(i))


@settings(max_examples=60, deadline=None)
@given(compact_layouts(max_size=8, max_leaves=2), st.data())
def test_tile_to_shape_covers_the_shape(block, data):
    """product_each of the result is the target; on the first block it is the block; a
    compact block gives a bijection onto [0, size); a swizzled block keeps its swizzle."""
    blk = rank2(block)
    ext = product_each(blk.shape)
    reps = (data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3)))
    target = (ext[0] * reps[0], ext[1] * reps[1])
    order = data.draw(st.sampled_from([None, (0, 1), (1, 0)]))
    t = tile_to_shape(blk, target, order)
    assert product_each(t.shape) == target
    for i0, i1 in itertools.product(range(ext[0]), range(ext[1])):
        assert t(i0, i1) == blk(i0, i1)
    assert sorted(t(i) for i in range(size(t))) == list(range(size(t)))
    sw = data.draw(SWIZZLES)
    ct = tile_to_shape(ComposedLayout(sw, 0, blk), target, order)
    assert isinstance(ct, ComposedLayout) and ct.inner == t and ct.outer == sw


def test_tile_to_shape_of_a_swizzled_atom():
    atom = composition(Swizzle(3, 3, 3), Layout((8, 64), (64, 1)))
    t = tile_to_shape(atom, (128, 128))
    assert product_each(t.shape) == (128, 128)
    assert sorted(t(i) for i in range(size(t))) == list(range(128 * 128))
    for r, k in itertools.product(range(8), range(64)):
        assert t(r, k) == atom(r, k)


@settings(max_examples=60, deadline=None)
@given(swizzled_layouts(max_size=32), st.data())
def test_flatten_select_group_modes_of_composed(c, data):
    """The rearrangements act on the inner layout: the same function, outer kept."""
    f = flatten(c)
    assert isinstance(f, ComposedLayout) and f.outer == c.outer
    same_function(f, c)
    inner = c.inner
    r = len(inner.shape) if type(inner.shape) is tuple else 1
    begin = data.draw(st.integers(0, r - 1))
    end = data.draw(st.integers(begin + 1, r))
    g = group_modes(c, begin, end)
    assert g.inner == group_modes(inner, begin, end)
    same_function(g, c)
    modes = data.draw(st.lists(st.integers(-r, r - 1), min_size=1, max_size=3))
    s = select(c, *modes)
    assert s.inner == select(inner, *modes) and s.outer == c.outer


@pytest.mark.parametrize(
    "call",
    [
        lambda: flatten(None),
        lambda: flatten("(4,8):(1,4)"),
        lambda: group_modes(Layout((4, 5, 6)), 1, 1),
        lambda: group_modes(Layout((4, 5, 6)), 2, 1),
        lambda: group_modes(Layout((4, 5, 6)), True, 2),
        lambda: group_modes(Layout((4, 5, 6)), 0, 4),
        lambda: group_modes(None, 0, 1),
        lambda: select(Layout((4, 5, 6))),
        lambda: select(Layout((4, 5, 6)), 3),
        lambda: select(Layout((4, 5, 6)), "a"),
        lambda: make_ordered_layout((0, -3), (0, 1)),
        lambda: make_ordered_layout((4, -3)),
        lambda: make_ordered_layout((4, 8), ("a", "b")),
        lambda: make_ordered_layout((4, 8), (1,)),
        lambda: tile_to_shape(Layout((2, 2)), (0, 8)),
        lambda: tile_to_shape(Layout((2, 2)), (-4, 8)),
        lambda: tile_to_shape(Layout((2, 2)), (3, 8)),
        lambda: tile_to_shape(Layout((2, 2, 2)), (4, 8)),
    ],
)
def test_invalid_operands_are_typed(call):
    with pytest.raises(LayoutError):
        call()


def test_make_ordered_layout_refuses_non_positive_extents():
    with pytest.raises(ShapeError, match="not positive"):
        make_ordered_layout((0, -3), (1, 0))
    x = make_ordered_layout((4, 3, 2), (2, 0, 1))
    assert sorted(x(i) for i in range(size(x))) == list(range(24))


def test_composed_tiler_is_refused():
    sw = ComposedLayout(Swizzle(1, 0, 1), 0, Layout((2, 2)))
    for fn in (blocked_product, raked_product):
        with pytest.raises(CompositionError, match="composed"):
            fn(Layout((2, 2)), sw)


def test_products_of_negative_strides_are_typed():
    """complement needs non-negative strides: the refusal is a LayoutError, not a crash."""
    a = Layout((2, 2), (1, -2))
    for fn in (blocked_product, raked_product, logical_product):
        with pytest.raises(LayoutError):
            fn(a, Layout((2, 2)))


def test_deep_nesting_is_refused_by_every_entry_point():
    deep: object = 2
    for _ in range(10_000):
        deep = (deep,)
    for call in (
        lambda: Layout(deep),
        lambda: Layout(4, deep),
        lambda: make_ordered_layout(deep),
        lambda: make_ordered_layout((4,), deep),
        lambda: tile_to_shape(Layout(2), deep),
        lambda: zipped_product(Layout((4, 4)), deep),
        lambda: tiled_product(Layout((4, 4)), deep),
        lambda: flat_product(Layout((4, 4)), deep),
    ):
        with pytest.raises(ShapeError, match="MAX_DEPTH"):
            call()
    for call in (
        lambda: blocked_product(Layout(2), deep),
        lambda: flatten(deep),
        lambda: group_modes(deep, 0, 1),
    ):
        with pytest.raises(ShapeError, match="expected a Layout"):
            call()
    x = Layout(2)
    for _ in range(70):
        try:
            x = group_modes(x, 0, 1)
        except ShapeError as e:
            assert "MAX_DEPTH" in str(e)
            break
    else:
        pytest.fail("group_modes nested past MAX_DEPTH without refusing")


@settings(max_examples=40, deadline=None)
@given(compact_layouts(max_size=16, max_leaves=2), compact_layouts(max_size=8, max_leaves=2))
def test_make_tv_layout_inverts_the_raked_product(thr, val):
    """raked_product(thr, val)(tv(t, v)) == t + size(thr)*v for every thread and value."""
    thr, val = rank2(thr), rank2(val)
    tile, tv = make_tv_layout(thr, val)
    mn = raked_product(thr, val)
    assert tile == product_each(mn.shape)
    nt = size(thr)
    for t, v in itertools.product(range(nt), range(size(val))):
        assert mn(tv(t, v)) == t + nt * v


def test_tv_operands_are_typed():
    with pytest.raises(ShapeError, match="bijection"):
        make_tv_layout(Layout((4, 2), (2, 16)), Layout((1, 2)))  # threads leave holes
    with pytest.raises(ShapeError, match="plain layouts"):
        make_tv_layout(ComposedLayout(Swizzle(1, 0, 1), 0, Layout((4, 2))), Layout((1, 2)))
    for bad in (None, Layout(8), ComposedLayout(Swizzle(1, 0, 1), 0, Layout((4, 2)))):
        with pytest.raises(ShapeError, match="rank 2"):
            tv_coords(bad, (4, 2), 0)
        with pytest.raises(ShapeError, match="rank 2"):
            tv_owners(bad, (4, 2))
