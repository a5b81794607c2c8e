"""Layout algebra behaviour pinned by tests written to kill mutants that survived
tools/mutate.py (the rule each test states is the documented one; no expected value is read
from the code under test)."""

from __future__ import annotations

import pytest

from tylo.layouts import Layout, composition, dim
from tylo.layouts.errors import ShapeError, UndecidableError


@pytest.mark.parametrize("bad", [object(), "4:1", [4, 1], 2.5])
def test_composition_refuses_a_left_operand_that_is_no_layout(bad):
    with pytest.raises(ShapeError, match="composition"):
        composition(bad, Layout(4, 1))


def test_an_undecided_extent_one_is_the_condition_named():
    """A symbolic extent ``N`` between A's modes may or may not be 1, and A's coalesced form
    (what composition is judged on) depends on it: the refusal names ``N == 1``."""
    n = dim("N")
    with pytest.raises(UndecidableError) as info:
        composition(Layout((2, n, 4), (1, 4, 64)), Layout(2, 3))
    assert info.value.condition == "N == 1"
    assert "with assuming(N == 1)" in str(info.value)


def test_symbolic_extents_print_without_spaces():
    """CuTe notation has no spaces, in sums and products of symbols too."""
    from tylo.layouts.inttuple import fmt

    n = dim("N")
    assert str(Layout((n + 1, 4), (1, n + 1))) == "(N+1,4):(1,N+1)"
    assert fmt((2 * n + 3, (n, 8))) == "(2*N+3,(N,8))"


def test_a_swizzle_composed_with_a_shape_is_the_swizzle_over_its_column_major_layout():
    from tylo.layouts import ComposedLayout, Swizzle

    c = composition(Swizzle(3, 3, 3), (8, 8))
    assert isinstance(c, ComposedLayout) and c.inner == Layout((8, 8), (1, 8))
    s = Swizzle(3, 3, 3)
    assert [c(i) for i in range(64)] == [s(i) for i in range(64)]


def test_a_refined_leaf_of_one_mode_stays_one_mode():
    """Composition keeps B's shape: B = (2):(-4) gives a rank-1 (2):(...) result, not a
    nested ((2)):((...)); its offsets are A(B(i)) (here 0 and A(-4) = 2, the same with
    truncating and floor division, so tylo composes it)."""
    r = composition(Layout((4, 2), (6, -2)), Layout((2,), (-4,)))
    assert str(r) == "(2):(2)"


def test_a_symbolic_stride_whose_elements_fit_the_extent_composes():
    """B = (2):(2) inside A's first mode of extent 3: (2 - 1) * 2 < 3, so the two elements
    fit and the result is A(B(i)): 0 and A(2) = 2 * (2N)."""
    n = dim("N")
    r = composition(Layout((3, 1), (2 * n, 1)), Layout((2,), (2,)))
    assert str(r) == "(2):(4*N)"
    r = composition(Layout((8, 1), (16, 2 * n)), Layout((3,), (3,)))
    assert str(r) == "(3):(48)"


def test_vmul_normalizes_sympy_integers_to_ints():
    import sympy

    from tylo.layouts.inttuple import vmul

    for a, b in [(sympy.Integer(4), 2), (2, sympy.Integer(4)), (4, 2), (sympy.Integer(2), 4)]:
        got = vmul(a, b)
        assert got == 8 and type(got) is int, (a, b)


@pytest.mark.parametrize("shape,stride", [(0, 1), (4, 0), (-4, 1), (4, -2), (0, 0)])
def test_idx2crd_refuses_non_positive_extents_and_strides(shape, stride):
    from tylo.layouts.inttuple import idx2crd

    with pytest.raises(ShapeError, match="must be positive"):
        idx2crd(5, shape, stride)
    assert idx2crd(5, 4, 1) == 1 and idx2crd(13, 4, 2) == 2


@pytest.mark.parametrize(
    "call",
    [
        lambda f: f.idx2crd((1, 2), (4, 4, 4)),  # an index tuple of another rank
        lambda f: f.idx2crd(5, (4, 4), (1, 4, 16)),  # a stride of another rank
        lambda f: f.crd2idx((1, 2), (4, 4), (1, 4, 16)),
        lambda f: f.crd2idx(3, (4, 4), (1,)),
    ],
)
def test_index_maps_refuse_operands_of_another_rank(call):
    from tylo.layouts import inttuple

    with pytest.raises(ShapeError, match="not congruent"):
        call(inttuple)


@pytest.mark.parametrize("crd,shape", [((1, 2), 4), ((1, 2, 3), (4, 4)), ((1,), (4, 4))])
def test_crd2idx_refuses_a_coordinate_of_another_rank(crd, shape):
    from tylo.layouts.inttuple import crd2idx

    with pytest.raises(ShapeError, match="does not match shape"):
        crd2idx(crd, shape)


def test_shape_div_values_and_refusals():
    from tylo.layouts.inttuple import shape_div

    assert [shape_div(12, 4), shape_div(4, 12), shape_div(8, 8), shape_div(1, 5)] == [3, 1, 1, 1]
    assert shape_div(12, (2, 2)) == 3 and shape_div((4, 6), (2, 4)) == (1, 3)  # by the size
    for a, b in [(0, 4), (4, 0), (-4, 2), (4, -2), (0, 0)]:
        with pytest.raises(ShapeError, match="must both be positive"):
            shape_div(a, b)
    with pytest.raises(ShapeError, match="neither 6 nor 4 divides"):
        shape_div(6, 4)


def test_right_inverse_stops_where_no_mode_continues_it():
    """(4,8):(1,N) with N a multiple of 8: after the first mode the inverse needs stride 4,
    and N == 4 is decided false, so the inverse is 4:1 (no question to ask); with an
    unconstrained M, M == 4 is the undecided question named."""
    from tylo.layouts import right_inverse

    n = dim("N", multiple_of=8)
    assert right_inverse(Layout((4, 8), (1, n))) == Layout(4, 1)
    with pytest.raises(UndecidableError) as info:
        right_inverse(Layout((4, 8), (1, dim("M"))))
    assert info.value.condition == "M == 4"


def _random_swizzled(rng):
    from tylo.layouts import Swizzle

    n = rng.randint(1, 3)
    shape = tuple(rng.choice([1, 2, 4, 8, 16, 3, 32]) for _ in range(n))
    stride = tuple(rng.choice([0, 1, 2, 4, 8, 16, 32, 64, 3, 128]) for _ in range(n))
    bits = rng.randint(1, 3)
    shift = rng.randint(bits, 4)
    return composition(Swizzle(bits, rng.randint(0, 4), shift), Layout(shape, stride))


def test_swizzled_inverses_are_inverses_whenever_given():
    """Brute force over seeded random swizzled layouts (zero strides, extents of 1 and 3): a
    left inverse L returned satisfies L(x(i)) == i on x's whole domain, a right inverse R
    satisfies x(R(j)) == j on R's; otherwise the operation refuses with InverseError."""
    import random

    from tylo.layouts import left_inverse, right_inverse, size
    from tylo.layouts.errors import InverseError, LayoutError

    rng = random.Random(7)
    given = {"left": 0, "right": 0}
    for _ in range(400):
        try:
            x = _random_swizzled(rng)
        except LayoutError:
            continue
        try:
            inv = left_inverse(x)
            assert all(inv(x(i)) == i for i in range(size(x))), (x, inv)
            given["left"] += 1
        except InverseError:
            pass
        try:
            inv = right_inverse(x)
            assert all(x(inv(j)) == j for j in range(size(inv))), (x, inv)
            given["right"] += 1
        except InverseError:
            pass
    assert given["left"] > 40 and given["right"] > 300  # the check is not vacuous


def test_a_swizzled_left_inverse_tylo_cannot_represent_is_refused():
    from tylo.layouts import Swizzle, left_inverse
    from tylo.layouts.errors import InverseError

    x = composition(Swizzle(2, 1, 2), Layout((1, 16, 2), (0, 1, 32)))
    with pytest.raises(InverseError, match="represents it only as"):
        left_inverse(x)
    y = composition(Swizzle(3, 1, 3), Layout((32,), (1,)))
    assert str(left_inverse(y)) == "S<3,1,3> o 128:1"


@pytest.mark.parametrize("op", ["flatten", "select", "group_modes"])
@pytest.mark.parametrize("bad", ["4:1", [4, 1], 2.5, None])
def test_mode_operations_refuse_what_is_no_layout(op, bad):
    from tylo.layouts import layout as lay

    call = {"flatten": lambda: lay.flatten(bad), "select": lambda: lay.select(bad, 0),
            "group_modes": lambda: lay.group_modes(bad, 0, 1)}[op]  # fmt: skip
    with pytest.raises(ShapeError, match="expected a Layout, a ComposedLayout or an int"):
        call()


def test_select_refuses_mode_indexes_that_are_not_ints_or_out_of_range():
    from tylo.layouts.layout import select

    x = Layout((4, 5, 6))
    assert select(x, 2, 0) == Layout((6, 4), (20, 1)) and select(x, -1) == Layout((6,), (20,))
    for bad in ("0", 1.0, None, 3, -4):
        with pytest.raises(ShapeError, match="mode index"):
            select(x, bad)


@pytest.mark.parametrize("begin,end", [(1, 1), (2, 1), (0, 4), (-1, 2), (0, 0), ("0", 2)])
def test_group_modes_refuses_empty_or_outside_ranges(begin, end):
    from tylo.layouts.layout import group_modes

    with pytest.raises(ShapeError, match="needs ints"):
        group_modes(Layout((4, 5, 6)), begin, end)


def test_a_stride_nested_past_the_depth_limit_is_refused_naming_the_stride():
    from tylo.layouts._depth import MAX_DEPTH
    from tylo.layouts.errors import LayoutError

    deep = 1
    for _ in range(MAX_DEPTH + 5):
        deep = (deep,)
    with pytest.raises(LayoutError, match="the stride"):
        Layout(4, deep)


def test_a_bad_stride_is_named_in_the_refusal():
    with pytest.raises(ShapeError, match=r"stride \(1,x\) holds 'x'"):
        Layout((4, 4), (1, "x"))


def test_mode_minus_one_of_a_rank_one_layout_is_itself():
    x = Layout(4, 2)
    assert x[0] == x and x[-1] == x
    with pytest.raises(IndexError):
        x[1]
    with pytest.raises(IndexError):
        x[-2]


def test_a_swizzle_of_a_nonnegative_offset_is_nonnegative():
    """XOR of bits of a nonnegative integer stays nonnegative; sympy is told so (what the
    provers use to bound swizzled offsets)."""
    import sympy

    from tylo.layouts.swizzle import SwizzleXor

    i = sympy.Symbol("i", integer=True, nonnegative=True)
    assert SwizzleXor(i, 3, 3, 3).is_nonnegative is True
    j = sympy.Symbol("j", integer=True)
    assert SwizzleXor(j, 3, 3, 3).is_nonnegative is None


def test_a_swizzle_of_no_bits_is_the_identity_even_symbolically():
    import sympy

    from tylo.layouts.swizzle import SwizzleXor

    i = sympy.Symbol("i", integer=True, nonnegative=True)
    assert SwizzleXor(i, 0, 3, 3) == i
    assert SwizzleXor(sympy.Integer(77), 0, 3, 3) == 77


def test_swizzles_fill_at_most_64_bits():
    from tylo.layouts import Swizzle
    from tylo.layouts.errors import SwizzleError

    assert Swizzle(1, 60, 3)(1 << 63) == (1 << 63) | (1 << 60)  # 1 + 60 + 3 = 64 bits
    for args in [(1, 61, 3), (2, 60, 3), (1, 60, -4)]:
        with pytest.raises(SwizzleError, match="exceeds 64"):
            Swizzle(*args)


def test_a_composed_layout_holds_a_layout_inside():
    from tylo.layouts import ComposedLayout, Swizzle
    from tylo.layouts.errors import LayoutError

    for inner in ("4:1", (4, 1), None, Swizzle(1, 0, 1)):
        with pytest.raises(LayoutError, match="inner .* must be a Layout"):
            ComposedLayout(Swizzle(1, 0, 1), 0, inner)


def test_one_swizzle_bit_moves_symbolically_as_it_does_on_ints():
    import sympy

    from tylo.layouts import Swizzle
    from tylo.layouts.swizzle import SwizzleXor

    s = Swizzle(1, 0, 3)
    for v in range(32):
        assert SwizzleXor(sympy.Integer(v), 1, 0, 3) == s(v) == v ^ ((v >> 3) & 1)


@pytest.mark.parametrize("args,period", [((3, 3, 3), 512), ((2, 4, 3), 512), ((1, 0, 1), 4),
                                         ((1, 2, -1), 16), ((3, 4, 3), 1024)])  # fmt: skip
def test_a_swizzle_permutes_aligned_blocks_of_its_period(args, period):
    from tylo.layouts import Swizzle

    s = Swizzle(*args)
    assert s.size() == period
    for block in range(3):
        lo = block * period
        assert sorted(s(x) for x in range(lo, lo + period)) == list(range(lo, lo + period))


def test_a_layout_composed_over_a_layout_evaluates_and_bounds_like_brute_force():
    from tylo.layouts import ComposedLayout, cosize

    c = ComposedLayout(Layout((4, 2), (1, 4)), 0, Layout(16, 1))  # outer's last mode unbounded
    values = [c(i) for i in range(16)]
    assert values == list(range(16))
    assert cosize(c) == max(values) + 1 == 16
    d = ComposedLayout(Layout(8, 2), 0, Layout(4, 1))
    assert [d(i) for i in range(4)] == [0, 2, 4, 6] and cosize(d) == 7


def test_make_tv_layout_refuses_swizzled_or_non_compact_arrangements():
    from tylo.layouts import ComposedLayout, Swizzle, make_tv_layout

    sw = ComposedLayout(Swizzle(1, 0, 1), 0, Layout(4, 1))
    for thr, val in [(sw, Layout(2, 1)), (Layout(4, 1), sw)]:
        with pytest.raises(ShapeError, match="must be plain"):
            make_tv_layout(thr, val)
    for thr, val in [(Layout(4, 0), Layout(2, 1)), (Layout(2, 1), Layout(4, 2))]:
        with pytest.raises(ShapeError, match="is not a bijection"):  # broadcast / gaps
            make_tv_layout(thr, val)
    tile, tv = make_tv_layout(Layout((2, 2), (2, 1)), Layout(2, 1))
    assert tile == (4, 2)  # a compact arrangement is accepted


def test_tv_owners_refuses_indexes_outside_the_tile_on_both_sides():
    from tylo.layouts import tv_owners

    with pytest.raises(ShapeError, match=r"holds index -1, outside the tile's \[0, 4\)"):
        tv_owners(Layout((2, 2), (1, -1)), (4,))
    with pytest.raises(ShapeError, match=r"holds index 4, outside"):
        tv_owners(Layout((2, 2), (1, 4)), (4,))
    owners = tv_owners(Layout((2, 2), (1, 2)), (4,))  # in range: each element owned once
    assert len(owners) == 4 and all(len(v) == 1 for v in owners.values())


def test_tv_queries_refuse_what_is_no_tv_layout_or_no_tile():
    from tylo.layouts.errors import LayoutError
    from tylo.layouts.tv import MMA_M16N8K16_C_TV, tv_coords

    for bad in (Layout(32, 1), Layout((4, 8, 2)), "((4,8),(2,2)):((32,1),(16,8))"):
        with pytest.raises(ShapeError, match=r"is not a \(thread, value\) Layout of rank 2"):
            tv_coords(bad, (16, 8), 0)
    with pytest.raises(LayoutError, match="tile shape"):
        tv_coords(MMA_M16N8K16_C_TV, (16, "8"), 0)
    assert tv_coords(MMA_M16N8K16_C_TV, (16, 8), 0) == [(0, 0), (0, 1), (8, 0), (8, 1)]


def test_warp_and_warpgroup_sizes():
    """CUDA: 32 threads per warp; PTX wgmma: a warpgroup is 4 contiguous warps."""
    import tylo
    from tylo.layouts.tv import WARP_SIZE, WARPGROUP_SIZE

    assert (WARP_SIZE, WARPGROUP_SIZE, tylo.WARP_SIZE) == (32, 128, 32)


def test_a_composed_layout_needs_a_swizzle_or_layout_outside():
    from tylo.layouts import ComposedLayout
    from tylo.layouts.errors import LayoutError

    for outer in ("S<3,3,3>", 3, None):
        with pytest.raises(LayoutError, match="outer .* must be a Swizzle or a Layout"):
            ComposedLayout(outer, 0, Layout(4, 1))


def test_a_swizzled_layout_evaluates_symbolically():
    import sympy

    from tylo.layouts import ComposedLayout, Swizzle

    c = ComposedLayout(Swizzle(3, 3, 3), 0, Layout(512, 1))
    i = sympy.Symbol("i", integer=True, nonnegative=True)
    e = c(i)
    assert all(e.subs(i, v) == Swizzle(3, 3, 3)(v) for v in (0, 9, 77, 300))


def test_symbolic_shapes_divide_when_one_divides_the_other():
    from tylo.layouts.inttuple import shape_div

    n = dim("N", multiple_of=4)
    assert str(shape_div(n, 4)) == "N/4"
    with pytest.raises(ShapeError, match="neither"):
        shape_div(dim("M"), 4)


@pytest.mark.parametrize("bits,base,shift", [(1, 2, -1), (2, 3, -2), (3, 3, 3), (1, 0, 1)])
def test_the_cosize_of_a_swizzled_layout_is_its_largest_offset_plus_one(bits, base, shift):
    from tylo.layouts import ComposedLayout, Swizzle, cosize, size

    for inner in (Layout(64, 1), Layout((4, 8), (16, 1)), Layout((8, 4), (1, 32))):
        c = ComposedLayout(Swizzle(bits, base, shift), 0, inner)
        assert cosize(c) == max(c(i) for i in range(size(inner))) + 1
