"""Individual symbolic rules: what each proves, and the hint it names when it cannot."""

from __future__ import annotations

import sympy

from tylo.layouts import Layout, dim, divisible, index_symbol, zipped_divide
from tylo.layouts.proofs import (
    prove_aligned,
    prove_bounded,
    prove_contiguous,
    prove_equal,
    prove_injective,
)

M, N, K, B = dim("M"), dim("N"), dim("K"), dim("B")
lda, ldm, bs = dim("lda"), dim("ldm"), dim("bs")


def test_sorted_span_hint_follows_layout_order() -> None:
    v = prove_injective(Layout((M, N, B), (1, ldm, bs)), assuming=[ldm >= M])
    assert v.disproved and v.hint == "needs bs >= M + ldm*(N - 1)"
    v = prove_injective(Layout((K, M), (lda, 1)))
    assert v.disproved and v.hint == "needs lda >= M"


def test_static_block_continues_the_chain() -> None:
    lay = Layout(((3, 2), K), ((2, 3), lda))
    v = prove_injective(lay, assuming=[lda >= 8])
    assert v.proved and "block (3,2):(2,3) is injective" in v.reason
    assert prove_injective(lay).hint == "needs lda >= 8"


def test_two_mode_gcd_rule_with_symbolic_extents() -> None:
    assert prove_injective(Layout((M, 2), (2, 3))).proved  # 2 >= 2: exact, any M
    v = prove_injective(Layout((M, 3), (2, 3)))
    assert v.disproved and v.values == {"M": 4}


def test_negative_and_zero_strides() -> None:
    rev = Layout((M, K), (-1, -M))
    assert prove_injective(rev).proved
    assert prove_bounded(rev, extent=M * K, base=M * K - 1).proved
    assert prove_bounded(rev, extent=M * K, base=M * K - 2).disproved
    assert prove_contiguous(rev, vector=2).disproved
    bcast = Layout((M, K), (0, 1))
    v = prove_injective(bcast)
    assert v.disproved and v.values["M"] == 2 and v.hint == "needs M <= 1"
    assert prove_injective(bcast, assuming=[sympy.Eq(M, 1)]).proved


def test_gemm_block_tile_with_index_symbols() -> None:
    Mb, Kb = dim("M", multiple_of=64), dim("K", multiple_of=32)
    bm = index_symbol("bm", upper=Mb / 64)
    kt = index_symbol("kt", upper=Kb / 32)
    tile = Layout((64, 32), (1, lda))
    base = 64 * bm + 32 * kt * lda
    assert prove_bounded(tile, extent=lda * Kb, base=base, assuming=[lda >= Mb]).proved
    v = prove_bounded(tile, extent=lda * Kb, base=base)
    assert v.disproved and v.values["lda"] < v.values["M"]
    assert prove_aligned(
        tile, vector=8, elem_bytes=2, base=base, assuming=[divisible(lda, 8)]
    ).proved
    v = prove_aligned(tile, vector=8, elem_bytes=2, base=base)
    assert v.disproved and v.values["lda"] % 8 and v.witness["coordinates"] == ((0, 1),)


def test_zipped_divide_tiles() -> None:
    Mb, Kb = dim("M", multiple_of=64), dim("K", multiple_of=32)
    a = Layout((Mb, Kb), (1, lda))
    tiled = zipped_divide(a, (64, 32))
    assert prove_injective(tiled, assuming=[lda >= Mb]).proved
    assert prove_contiguous(tiled, vector=8).proved
    assert prove_bounded(tiled, extent=lda * Kb, assuming=[lda >= Mb]).proved
    assert prove_equal(tiled, a, assuming=[lda >= Mb]).disproved  # different index order


def test_equal_hint_names_the_merge() -> None:
    v = prove_equal(Layout((M, N), (1, lda)), Layout(M * N, 1))
    assert v.disproved and v.hint == "needs lda == M"
    v = prove_equal(Layout((M, N), (1, lda)), Layout((M, N), (1, ldm)))
    assert v.disproved and v.hint == "needs lda == ldm"


def test_alignment_of_the_last_pair_need_not_divide() -> None:
    # starts 0, 4, 8, ... < M along a stride-3 mode: generator 12, present when M > 4
    assert prove_aligned(Layout(M, 2), vector=4, elem_bytes=2).proved
    assert prove_aligned(Layout(M, 3), vector=4, elem_bytes=2, assuming=[M <= 4]).proved
    v = prove_aligned(Layout(M, 3), vector=4, elem_bytes=2)
    assert v.disproved and v.values == {"M": 5} and v.hint == "needs M <= 4"
