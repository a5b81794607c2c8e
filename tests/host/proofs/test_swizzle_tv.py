"""Swizzled (composed) layouts and thread-value layouts through every prover."""

from __future__ import annotations

import pytest

from tests.host.proofs import reference
from tylo.layouts import (
    ComposedLayout,
    Layout,
    Swizzle,
    composition,
    dim,
    divisible,
    make_tv_layout,
)
from tylo.layouts.proofs import (
    prove_aligned,
    prove_bounded,
    prove_contiguous,
    prove_equal,
    prove_injective,
)
from tylo.layouts.tv import (
    LDMATRIX_X4_DST_TV,
    LDMATRIX_X4_SRC_TV,
    MMA_M16N8K16_A_TV,
    MMA_M16N8K16_B_TV,
    MMA_M16N8K16_C_TV,
    wgmma_m64_c_tv,
)

M = dim("M")
N8 = dim("N", multiple_of=8)
TVS = {
    "mma A": (MMA_M16N8K16_A_TV, 256),
    "mma B": (MMA_M16N8K16_B_TV, 128),
    "mma C": (MMA_M16N8K16_C_TV, 128),
    "ldmatrix src": (LDMATRIX_X4_SRC_TV, 256),
    "ldmatrix dst": (LDMATRIX_X4_DST_TV, 256),
    "cp.async": (make_tv_layout(Layout((16, 8), (8, 1)), Layout((1, 8)))[1], 1024),
    "wgmma 64x64 C": (wgmma_m64_c_tv(64), 64 * 64),
}


@pytest.mark.parametrize("name", sorted(TVS))
def test_tv_layouts_cover_their_tile_once(name: str) -> None:
    tv, tile = TVS[name]
    assert prove_injective(tv).proved
    assert prove_bounded(tv, extent=tile).proved
    assert prove_bounded(tv, extent=tile - 1).disproved


@pytest.mark.parametrize("name", sorted(TVS))
@pytest.mark.parametrize("vector", [1, 2, 4, 8])
def test_tv_value_mode_contiguity_matches_brute_force(name: str, vector: int) -> None:
    tv, _ = TVS[name]
    v = prove_contiguous(tv, vector=vector, mode=1)
    assert v.proved == reference.contiguous(tv, vector, 1), v


def test_ldmatrix_destination_pairs_are_contiguous() -> None:
    assert prove_contiguous(LDMATRIX_X4_DST_TV, vector=2, mode=1).proved
    assert prove_contiguous(LDMATRIX_X4_SRC_TV, vector=8, mode=1).proved
    v = prove_contiguous(MMA_M16N8K16_C_TV, vector=2, mode=1)
    assert v.disproved and v.witness["offsets"] == (0, 16)


def test_symbolic_wgmma_accumulator() -> None:
    tv = wgmma_m64_c_tv(N8)
    assert prove_injective(tv).proved
    assert prove_bounded(tv, extent=64 * N8).proved
    assert prove_contiguous(tv, vector=2, mode=1).disproved


SW = composition(Swizzle(3, 3, 3), Layout((8, 64), (64, 1)))
SW_BYTES = composition(Swizzle(3, 4, 3), Layout((8, 128), (128, 1)))  # bf16 128B, in bytes


def test_swizzle_keeps_runs_of_2_to_the_m() -> None:
    for vector in (1, 2, 4, 8):
        assert prove_contiguous(SW, vector=vector, mode=1).proved
    v = prove_contiguous(SW, vector=16, mode=1)
    assert v.disproved and not reference.contiguous(SW, 16, 1)
    assert prove_contiguous(SW_BYTES, vector=16, mode=1).proved
    assert prove_aligned(SW_BYTES, vector=16, elem_bytes=1, mode=1).proved


def test_a_negative_shift_moves_its_source_bits() -> None:
    # S<1,0,-1> XORs bit 0 into bit 1: offsets 0, 1 become 0, 3, so a run of 2 is not kept
    # (the destination bits alone, from bit 1, wrongly suggested runs of 2 survive)
    m = dim("M")
    for inner in (Layout(((2,),), ((1,),)), Layout((2, m), (1, 2)), Layout((8, 4), (1, 8))):
        sw = ComposedLayout(Swizzle(1, 0, -1), 0, inner)
        assert prove_contiguous(sw, vector=2, mode=0).disproved, inner
    sw = ComposedLayout(Swizzle(2, 2, -2), 0, Layout((16, 4), (1, 16)))  # bits 2..3 -> 4..5
    assert prove_contiguous(sw, vector=4, mode=0).proved
    assert prove_contiguous(sw, vector=8, mode=0).disproved
    for vector in (4, 8):
        assert prove_contiguous(sw, vector=vector, mode=0).proved == reference.contiguous(
            sw, vector, 0
        )


def test_swizzle_alignment_and_bounds() -> None:
    assert prove_aligned(SW, vector=8, elem_bytes=2, mode=1).proved
    assert prove_aligned(SW, vector=8, elem_bytes=2, mode=1, base=8).proved
    assert prove_aligned(SW, vector=8, elem_bytes=2, mode=1, base=4).disproved
    assert prove_bounded(SW, extent=512).proved
    assert prove_bounded(SW, extent=511).disproved
    s2 = composition(Swizzle(2, 2, 3), Layout((8, 64), (64, 1)))  # moves bits 2..3
    for vector in (4, 8):
        v = prove_aligned(s2, vector=vector, elem_bytes=2, mode=1)
        assert v.proved == reference.aligned(s2, vector, 2, 1), v


def test_symbolic_swizzled_rows() -> None:
    s = composition(Swizzle(3, 3, 3), Layout((M, 64), (64, 1)))
    assert prove_injective(s).proved
    assert prove_contiguous(s, vector=8, mode=1).proved
    assert prove_aligned(s, vector=8, elem_bytes=2, mode=1).proved
    assert prove_bounded(s, extent=64 * M).proved
    v = prove_bounded(s, extent=64 * M - 1)
    assert v.disproved and v.values == {"M": 1}
    assert prove_contiguous(s, vector=16, mode=1).disproved


def test_swizzle_with_offset_and_symbolic_stride() -> None:
    lda = dim("lda")
    s = ComposedLayout(Swizzle(3, 3, 3), 8, Layout((8, M), (lda, 1)))
    v = prove_contiguous(s, vector=8, mode=1, assuming=[divisible(M, 8), divisible(lda, 8)])
    assert v.proved, v
    v = prove_contiguous(s, vector=8, mode=1, assuming=[divisible(M, 8)])
    assert not v.proved
    if v.disproved:
        values = {k: x for k, x in v.counterexample.items() if k != "witness"}
        from tylo.layouts import substitute

        assert not reference.contiguous(substitute(s, values), 8, 1)


def test_equal_swizzled() -> None:
    a = composition(Swizzle(3, 3, 3), Layout((8, (8, 8)), (64, (1, 8))))
    b = composition(Swizzle(3, 3, 3), Layout((8, 64), (64, 1)))
    assert prove_equal(a, b).proved
    assert prove_equal(b, Layout((8, 64), (64, 1))).disproved
    c = composition(Swizzle(3, 3, 3), Layout((M, 64), (64, 1)))
    d = composition(Swizzle(3, 3, 3), Layout((M, (8, 8)), (64, (1, 8))))
    assert prove_equal(c, d).proved


def test_outer_layout_composition() -> None:
    outer = Layout((4, 4), (4, 1))  # a transpose of 16 offsets
    c = ComposedLayout(outer, 0, Layout(16, 1))
    assert prove_injective(c).proved
    assert prove_contiguous(c, vector=4).disproved
    c2 = ComposedLayout(Layout((4, 4), (1, 0)), 0, Layout(16, 1))
    assert prove_injective(c2).disproved
    cs = ComposedLayout(outer, 0, Layout(M, 1))
    v = prove_injective(cs)
    assert v.status in ("unknown", "disproved")
    for m in range(1, 40):
        assert v.guard(M=m) == reference.injective(ComposedLayout(outer, 0, Layout(m, 1)))
