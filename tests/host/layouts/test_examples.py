"""The reference cases with known answers (CuTe's documented examples), compared as functions (same
size, same
offset at every index) unless the case pins the exact form."""

from __future__ import annotations

import pytest

from tylo.layouts import (
    CompositionError,
    InverseError,
    Layout,
    LayoutError,
    Swizzle,
    UndecidableError,
    assuming,
    blocked_product,
    coalesce,
    complement,
    composition,
    crd2idx,
    dim,
    flat_divide,
    group_modes,
    idx2crd,
    left_inverse,
    logical_divide,
    logical_product,
    make_layout,
    make_tv_layout,
    raked_product,
    right_inverse,
    select,
    size,
    substitute,
    tile_to_shape,
    tiled_divide,
    zipped_divide,
)
from tylo.layouts.inttuple import shape_div
from tylo.layouts.tv import (
    LDMATRIX_X4_DST_TV,
    MMA_M16N8K16_A_TV,
    MMA_M16N8K16_B_TV,
    MMA_M16N8K16_C_TV,
    tv_owners,
    wgmma_m64_c_tv,
)

P = Layout.parse


def same_function(a, b) -> bool:
    n = size(a)
    return n == size(b) and all(a(i) == b(i) for i in range(n))


def check(result, expected: str, exact: bool = False) -> None:
    want = P(expected)
    if exact:
        assert str(result) == expected
    assert same_function(result, want), f"{result} is not the function of {expected}"


# -- coordinates and construction ------------------------------------------------------------------


def test_coordinates():
    assert idx2crd(16, (3, (2, 3))) == (1, (1, 2))
    assert crd2idx(16, (3, (2, 3)), (3, (12, 1))) == 17
    assert crd2idx((1, 5), (3, (2, 3)), (3, (12, 1))) == 17
    x = P("(2,(2,2)):(4,(2,1))")
    assert [x(i) for i in range(8)] == [0, 4, 2, 6, 1, 5, 3, 7]


def test_construction():
    assert str(make_layout((2, (2, 2)))) == "(2,(2,2)):(1,(2,4))"
    assert str(select(P("(2,3,5,7):(1,2,6,30)"), 1, 3)) == "(3,7):(2,30)"
    g = P("(4,5,6):(1,4,20)")
    assert str(group_modes(g, 0, 2)) == "((4,5),6):((1,4),20)"
    assert str(group_modes(g, 1, 3)) == "(4,(5,6)):(1,(4,20))"


# -- coalesce --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "profile", "expected"),
    [
        ("(2,(1,6)):(1,(6,2))", None, "12:1"),
        ("(2,(1,6)):(1,(6,2))", (1, 1), "(2,6):(1,2)"),
        ("((2,(3,4)),(3,2),1):((4,(8,24)),(2,6),12)", None, "(24,6):(4,2)"),
        ("(3,(4,5)):(8,(1,4))", (1, 1), "(3,20):(8,1)"),
    ],
)
def test_coalesce(text, profile, expected):
    check(coalesce(P(text), profile), expected, exact=True)


# -- composition -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("(6,2):(8,2)", P("(4,3):(3,1)"), "((2,2),3):((24,2),8)"),
        ("20:2", P("(5,4):(4,1)"), "(5,4):(8,2)"),
        ("(12,(4,8)):(59,(13,1))", (3, 8), "(3,(4,2)):(59,(13,1))"),
        ("(4,8):(1,4)", (2, 4), "(2,4):(1,4)"),
        ("(4,8):(1,4)", P("(2,4):(1,2)"), "(2,4):(1,2)"),
        ("(6,4):(4,1)", (P("2:1"), P("2:1")), "(2,2):(4,1)"),
    ],
)
def test_composition(a, b, expected):
    check(composition(P(a), b), expected, exact=True)


def test_shape_div():
    s = (3, 6, 2, 8)
    assert [shape_div(s, d) for d in (3, 6, 9, 72)] == [
        (1, 6, 2, 8),
        (1, 3, 2, 8),
        (1, 2, 2, 8),
        (1, 1, 1, 4),
    ]


def test_composition_divisibility_failure_raises():
    with pytest.raises(CompositionError) as info:
        composition(P("(4,6):(1,5)"), P("4:3"))
    msg = str(info.value)
    assert "(4,6):(1,5)" in msg and "4:3" in msg and "does not divide" in msg
    # shape divisibility: 4 elements of stride 1 over an extent-3 mode is not a layout
    with pytest.raises(CompositionError, match="shape divisibility"):
        composition(P("(3,5):(1,4)"), P("4:1"))


# -- complement ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "cotarget", "expected"),
    [
        ("4:1", 24, "6:4"),
        ("6:4", 24, "4:1"),
        ("(4,6):(1,4)", 24, "1:0"),
        ("4:2", 24, "(2,3):(1,8)"),
        ("(2,4):(1,6)", 24, "3:2"),
        ("(2,2):(1,6)", 24, "(3,2):(2,12)"),
        ("(2,2):(4,1)", 24, "(2,3):(2,8)"),
    ],
)
def test_complement(a, cotarget, expected):
    check(complement(P(a), cotarget), expected, exact=True)


# -- divide ----------------------------------------------------------------------------------------


def test_divides():
    check(logical_divide(P("(4,2,3):(2,1,8)"), P("4:2")), "((2,2),(2,3)):((4,1),(2,8))", True)
    a = P("(6,8):(8,1)")
    check(logical_divide(a, (3, 4)), "((3,2),(4,2)):((8,24),(1,4))", True)
    check(zipped_divide(a, (3, 4)), "((3,4),(2,2)):((8,1),(24,4))", True)
    check(tiled_divide(a, (3, 4)), "((3,4),2,2):((8,1),24,4)", True)
    check(flat_divide(a, (3, 4)), "(3,4,2,2):(8,1,24,4)", True)
    check(logical_divide(P("1000:1"), 128), "(128,8):(1,128)", True)
    check(zipped_divide(Layout((8, 24)), (4, 8)), "((4,8),(2,3)):((1,8),(4,64))", True)


# -- product ---------------------------------------------------------------------------------------


def test_products():
    check(logical_product(P("(2,2):(4,1)"), P("6:1")), "((2,2),(2,3)):((4,1),(2,8))", True)
    check(logical_product(P("(2,2):(4,1)"), P("(3,2):(2,1)")), "((2,2),(3,2)):((4,1),(8,2))", True)
    a, b = P("(3,4):(4,1)"), P("(2,5):(1,2)")
    check(logical_product(a, b), "((3,4),(2,5)):((4,1),(12,24))", True)
    check(blocked_product(a, b), "((3,2),(4,5)):((4,12),(1,24))")
    check(raked_product(a, b), "((2,3),(5,4)):((12,4),(24,1))")
    check(tile_to_shape(P("(2,2):(1,2)"), (8, 8)), "((2,4),(2,4)):((1,4),(2,16))", True)


# -- inverse ---------------------------------------------------------------------------------------


def test_inverses():
    x = P("(2,4,6):(4,1,8)")
    check(right_inverse(x), "(4,2,6):(2,1,8)", True)
    check(left_inverse(x), "(4,2,6):(2,1,8)", True)
    check(right_inverse(P("(2,4):(4,1)")), "(4,2):(2,1)", True)
    check(left_inverse(P("(2,3):(1,2)")), "6:1", True)
    with pytest.raises(InverseError, match="not injective"):
        left_inverse(P("(4,8):(1,2)"))


# -- symbolic --------------------------------------------------------------------------------------


def test_symbolic_rows():
    n = dim("N", multiple_of=128)
    c = coalesce(Layout((16, n / 128), (8, 128)))
    assert c == Layout(16 * n / 128, 8) and str(c) == "N/8:8"
    n1 = dim("N")
    assert right_inverse(Layout((16, n1), (1, 16))) == Layout(16 * n1, 1)
    m = dim("M")
    assert coalesce(Layout((m, 4), (1, m))) == Layout(4 * m, 1)
    # complement(4:n, 16n) has last mode exactly 4, no floor left
    small = dim("n")
    comp = complement(Layout(4, small), 16 * small)
    assert comp == Layout((small, 4), (1, 4 * small))


def test_symbolic_complement_does_not_assume():
    n = dim("N")
    with pytest.raises(LayoutError) as info:
        complement(Layout((4, n), (1, 8)), 1000)
    assert isinstance(info.value, UndecidableError)
    assert "N" in str(info.value) and "assum" in str(info.value)
    # with the needed fact, the answer is exact and matches every instance
    with assuming(divisible_1000 := _divisible(1000, 8 * n)):
        c = complement(Layout((4, n), (1, 8)), 1000)
    for v in (1, 5, 25, 125):
        want = complement(Layout((4, v), (1, 8)), 1000)
        assert same_function(substitute(c, {n: v}), want), (v, divisible_1000)


def _divisible(e, d):
    from tylo.layouts import divisible

    return divisible(e, d)


# -- thread-value layouts --------------------------------------------------------------------------


def test_mma_tv_layouts():
    assert str(MMA_M16N8K16_A_TV) == "((4,8),(2,2,2)):((32,1),(16,8,128))"
    assert str(MMA_M16N8K16_B_TV) == "((4,8),(2,2)):((16,1),(8,64))"
    assert str(MMA_M16N8K16_C_TV) == "((4,8),(2,2)):((32,1),(16,8))"
    # PTX lane maps: every element owned once; spot checks against the ISA's formulas
    for tv, tile in (
        (MMA_M16N8K16_A_TV, (16, 16)),
        (MMA_M16N8K16_B_TV, (8, 16)),
        (MMA_M16N8K16_C_TV, (16, 8)),
    ):
        own = tv_owners(tv, tile)
        assert len(own) == tile[0] * tile[1] and all(len(v) == 1 for v in own.values())
    for lane in range(32):
        group, tig = lane // 4, lane % 4
        for v in range(8):
            row = group + 8 * ((v >> 1) & 1)
            col = 2 * tig + (v & 1) + 8 * (v >> 2)
            assert idx2crd(MMA_M16N8K16_A_TV(lane, v), (16, 16)) == (row, col)
    assert str(wgmma_m64_c_tv(dim("N", multiple_of=8))) == (
        "((4,8,4),(2,2,N/8)):((128,1,16),(64,8,512))"
    )
    assert [LDMATRIX_X4_DST_TV(5, v) for v in range(8)] == [10, 11, 74, 75, 138, 139, 202, 203]


def test_cp_async_tv():
    tile, tv = make_tv_layout(P("(16,8):(8,1)"), Layout((1, 8)))
    assert tile == (16, 64)
    check(tv, "((8,16),8):((128,1),16)", True)


# -- swizzles --------------------------------------------------------------------------------------


def test_swizzle_row():
    c = composition(Swizzle(3, 3, 3), P("(8,64):(64,1)"))
    assert str(c) == "S<3,3,3> o (8,64):(64,1)"
    assert [c(r, 0) for r in range(8)] == [0, 72, 144, 216, 288, 360, 432, 504]
    assert sorted(c(i) for i in range(512)) == list(range(512))


def test_tiled_warps_thread_layout():
    # (thread, M, N, K) over warps (2,2,1): 32 lanes, then warps column-major
    threads = Layout((32, (2, 2, 1)))
    check(threads, "(32,2,2,1):(1,32,64,0)")


def test_wgmma_accumulator_covers_its_tile_once():
    tv = wgmma_m64_c_tv(16)
    own = tv_owners(tv, (64, 16))
    assert len(own) == 64 * 16 and all(len(v) == 1 for v in own.values())
    for t in range(128):
        warp, lane = divmod(t, 32)
        for v in range(8):
            m = 16 * warp + lane // 4 + 8 * ((v >> 1) & 1)
            n = 2 * (lane % 4) + (v & 1) + 8 * (v >> 2)
            assert idx2crd(tv(t, v), (64, 16)) == (m, n)


def test_swizzle_units_bytes_versus_elements():
    # the Hopper 128-byte swizzle S<3,4,3> on bf16 byte addresses is S<3,3,3> on elements
    on_bytes, on_elems = Swizzle(3, 4, 3), Swizzle(3, 3, 3)
    assert all(on_bytes(2 * e) == 2 * on_elems(e) for e in range(1024))
