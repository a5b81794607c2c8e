"""mma.sync m16n8k16 fragments and the ldmatrix loads tylo derives, against the PTX ISA.

The expected values are written out below from the PTX ISA, never read from tylo's tables:

- section 9.7.14.5.8, "Matrix Fragments for mma.m16n8k16 with floating point type" (Figures
  79, 81 and 83 and their row/col formulas, with ``groupID = laneid >> 2`` and
  ``threadID_in_group = laneid % 4``): each grid cell ``L.i`` at (row, column) says lane
  ``L`` holds element ``a_i`` (``b_i``, ``c_i``) there. A is M x K (16 x 16), B is K x N
  (16 x 8, as the ISA draws it), C/D is M x N (16 x 8).
- section 9.7.14.5.15, "ldmatrix": lanes ``8j .. 8j+7`` give the row addresses of matrix
  ``j``; every lane receives, in destination register ``j``, row ``laneid >> 2``, columns
  ``2 * (laneid % 4) + (0, 1)`` of matrix ``j`` (with ``.trans``, the matrix transposed:
  rows ``2 * (laneid % 4) + (0, 1)`` of column ``laneid >> 2``).
"""

from __future__ import annotations

import pytest

from tylo import dtypes as dt
from tylo.layouts import idx2crd
from tylo.layouts.tv import MMA_M16N8K16_A_TV, MMA_M16N8K16_B_TV, MMA_M16N8K16_C_TV
from tylo.nvgpu.warp.ldmatrix import operand_loads
from tylo.nvgpu.warp.mma import MMAAtom, TiledMMA

# Figure 79: A (16 x 16), row m, column k
A_GRID = """
  0.0   0.1   1.0   1.1   2.0   2.1   3.0   3.1   0.4   0.5   1.4   1.5   2.4   2.5   3.4   3.5
  4.0   4.1   5.0   5.1   6.0   6.1   7.0   7.1   4.4   4.5   5.4   5.5   6.4   6.5   7.4   7.5
  8.0   8.1   9.0   9.1  10.0  10.1  11.0  11.1   8.4   8.5   9.4   9.5  10.4  10.5  11.4  11.5
 12.0  12.1  13.0  13.1  14.0  14.1  15.0  15.1  12.4  12.5  13.4  13.5  14.4  14.5  15.4  15.5
 16.0  16.1  17.0  17.1  18.0  18.1  19.0  19.1  16.4  16.5  17.4  17.5  18.4  18.5  19.4  19.5
 20.0  20.1  21.0  21.1  22.0  22.1  23.0  23.1  20.4  20.5  21.4  21.5  22.4  22.5  23.4  23.5
 24.0  24.1  25.0  25.1  26.0  26.1  27.0  27.1  24.4  24.5  25.4  25.5  26.4  26.5  27.4  27.5
 28.0  28.1  29.0  29.1  30.0  30.1  31.0  31.1  28.4  28.5  29.4  29.5  30.4  30.5  31.4  31.5
  0.2   0.3   1.2   1.3   2.2   2.3   3.2   3.3   0.6   0.7   1.6   1.7   2.6   2.7   3.6   3.7
  4.2   4.3   5.2   5.3   6.2   6.3   7.2   7.3   4.6   4.7   5.6   5.7   6.6   6.7   7.6   7.7
  8.2   8.3   9.2   9.3  10.2  10.3  11.2  11.3   8.6   8.7   9.6   9.7  10.6  10.7  11.6  11.7
 12.2  12.3  13.2  13.3  14.2  14.3  15.2  15.3  12.6  12.7  13.6  13.7  14.6  14.7  15.6  15.7
 16.2  16.3  17.2  17.3  18.2  18.3  19.2  19.3  16.6  16.7  17.6  17.7  18.6  18.7  19.6  19.7
 20.2  20.3  21.2  21.3  22.2  22.3  23.2  23.3  20.6  20.7  21.6  21.7  22.6  22.7  23.6  23.7
 24.2  24.3  25.2  25.3  26.2  26.3  27.2  27.3  24.6  24.7  25.6  25.7  26.6  26.7  27.6  27.7
 28.2  28.3  29.2  29.3  30.2  30.3  31.2  31.3  28.6  28.7  29.6  29.7  30.6  30.7  31.6  31.7
"""

# Figure 81: B (16 x 8 as K x N), row k, column n
B_GRID = """
  0.0   4.0   8.0  12.0  16.0  20.0  24.0  28.0
  0.1   4.1   8.1  12.1  16.1  20.1  24.1  28.1
  1.0   5.0   9.0  13.0  17.0  21.0  25.0  29.0
  1.1   5.1   9.1  13.1  17.1  21.1  25.1  29.1
  2.0   6.0  10.0  14.0  18.0  22.0  26.0  30.0
  2.1   6.1  10.1  14.1  18.1  22.1  26.1  30.1
  3.0   7.0  11.0  15.0  19.0  23.0  27.0  31.0
  3.1   7.1  11.1  15.1  19.1  23.1  27.1  31.1
  0.2   4.2   8.2  12.2  16.2  20.2  24.2  28.2
  0.3   4.3   8.3  12.3  16.3  20.3  24.3  28.3
  1.2   5.2   9.2  13.2  17.2  21.2  25.2  29.2
  1.3   5.3   9.3  13.3  17.3  21.3  25.3  29.3
  2.2   6.2  10.2  14.2  18.2  22.2  26.2  30.2
  2.3   6.3  10.3  14.3  18.3  22.3  26.3  30.3
  3.2   7.2  11.2  15.2  19.2  23.2  27.2  31.2
  3.3   7.3  11.3  15.3  19.3  23.3  27.3  31.3
"""

# Figure 83: C/D (16 x 8), row m, column n
C_GRID = """
  0.0   0.1   1.0   1.1   2.0   2.1   3.0   3.1
  4.0   4.1   5.0   5.1   6.0   6.1   7.0   7.1
  8.0   8.1   9.0   9.1  10.0  10.1  11.0  11.1
 12.0  12.1  13.0  13.1  14.0  14.1  15.0  15.1
 16.0  16.1  17.0  17.1  18.0  18.1  19.0  19.1
 20.0  20.1  21.0  21.1  22.0  22.1  23.0  23.1
 24.0  24.1  25.0  25.1  26.0  26.1  27.0  27.1
 28.0  28.1  29.0  29.1  30.0  30.1  31.0  31.1
  0.2   0.3   1.2   1.3   2.2   2.3   3.2   3.3
  4.2   4.3   5.2   5.3   6.2   6.3   7.2   7.3
  8.2   8.3   9.2   9.3  10.2  10.3  11.2  11.3
 12.2  12.3  13.2  13.3  14.2  14.3  15.2  15.3
 16.2  16.3  17.2  17.3  18.2  18.3  19.2  19.3
 20.2  20.3  21.2  21.3  22.2  22.3  23.2  23.3
 24.2  24.3  25.2  25.3  26.2  26.3  27.2  27.3
 28.2  28.3  29.2  29.3  30.2  30.3  31.2  31.3
"""


def cells(grid: str) -> dict[tuple[int, int], tuple[int, int]]:
    """(lane, element) -> (row, column) of a grid written as above."""
    out = {}
    for r, line in enumerate(grid.strip().splitlines()):
        for c, cell in enumerate(line.split()):
            lane, i = (int(x) for x in cell.split("."))
            assert (lane, i) not in out, f"{cell} twice"
            out[(lane, i)] = (r, c)
    return out


A_ISA, B_ISA, C_ISA = cells(A_GRID), cells(B_GRID), cells(C_GRID)


def test_the_grids_are_whole():
    assert sorted(A_ISA) == [(t, i) for t in range(32) for i in range(8)]
    assert sorted(B_ISA) == [(t, i) for t in range(32) for i in range(4)]
    assert sorted(C_ISA) == [(t, i) for t in range(32) for i in range(4)]
    assert sorted(A_ISA.values()) == [(r, c) for r in range(16) for c in range(16)]
    whole = [(r, c) for r in range(16) for c in range(8)]
    assert sorted(B_ISA.values()) == sorted(C_ISA.values()) == whole


def test_the_grids_give_the_isa_formulas_at_a_few_lanes():
    # lane 5: groupID 1, threadID_in_group 1; lane 31: groupID 7, threadID_in_group 3
    assert [A_ISA[(5, i)] for i in range(8)] == [
        (1, 2), (1, 3), (9, 2), (9, 3), (1, 10), (1, 11), (9, 10), (9, 11)
    ]  # fmt: skip
    assert [B_ISA[(5, i)] for i in range(4)] == [(2, 1), (3, 1), (10, 1), (11, 1)]
    assert [C_ISA[(31, i)] for i in range(4)] == [(7, 6), (7, 7), (15, 6), (15, 7)]


def test_atom_ownerships_are_the_isa_fragments():
    atom = MMAAtom((16, 8, 16), dt.bf16)
    assert {(t, i): atom.a.coord(t, i) for t in range(32) for i in range(8)} == A_ISA
    # tylo holds B over (N, K): the ISA's (k, n) transposed
    assert {(t, i): atom.b.coord(t, i)[::-1] for t in range(32) for i in range(4)} == B_ISA
    assert {(t, i): atom.c.coord(t, i) for t in range(32) for i in range(4)} == C_ISA


@pytest.mark.parametrize(
    "tv,tile,isa,swap",
    [
        (MMA_M16N8K16_A_TV, (16, 16), A_ISA, False),
        (MMA_M16N8K16_B_TV, (8, 16), B_ISA, True),
        (MMA_M16N8K16_C_TV, (16, 8), C_ISA, False),
    ],
    ids=["A", "B", "C"],
)
def test_tv_layouts_are_the_isa_fragments(tv, tile, isa, swap):
    for (lane, i), want in isa.items():
        got = idx2crd(tv(lane, i), tile)
        assert (got[::-1] if swap else got) == want, (lane, i)


def isa_ldmatrix(loads, thread: int, load: int, j: int, v: int, k_step: int = 0) -> tuple:
    """The coordinate ldmatrix puts in half ``v`` of destination register ``j`` of
    ``thread``, given the rows tylo's loads address: lane ``8j + i`` of the thread's warp
    points at the row whose 8 elements are its source slots ``slot(load, k_step) + 0..7``."""
    src, base = loads.source, loads.slot(load, k_step)
    lane = thread % 32
    warp0 = thread - lane
    if loads.trans:  # matrix j transposed: row 2 * (lane % 4) + v, column lane >> 2
        return src.coord(warp0 + 8 * j + 2 * (lane % 4) + v, base + (lane >> 2))
    return src.coord(warp0 + 8 * j + (lane >> 2), base + 2 * (lane % 4) + v)


@pytest.mark.parametrize("operand,axis", [("a", 1), ("b", 1), ("b", 0), ("a", 0)])
def test_ldmatrix_rows_deliver_the_isa_fragment(operand, axis):
    """One warp, one atom: the row addresses tylo derives, fed through the ISA's ldmatrix,
    put every element of the ISA's fragment in its register (K-contiguous tiles plainly;
    tiles with rows contiguous through ``.trans``)."""
    plan = TiledMMA(MMAAtom((16, 8, 16), dt.bf16), warps=(1, 1), repeat=(1, 1), k=16)
    loads = operand_loads(plan, operand, axis)
    assert loads.trans == (axis == 0)
    isa = A_ISA if operand == "a" else B_ISA
    got = {}
    for g, ld in enumerate(loads.loads):
        for j, reg in enumerate(ld.registers):
            for lane in range(32):
                for v in (0, 1):
                    c = isa_ldmatrix(loads, lane, g, j, v)
                    got[(lane, 2 * reg + v)] = c if operand == "a" else c[::-1]
    assert got == isa


@pytest.mark.parametrize("operand", ["a", "b"])
def test_ldmatrix_rows_of_a_tiled_plan_deliver_each_warps_fragment(operand):
    """Warps (2, 2), repeats (2, 2), two k-steps: every thread's register holds the ISA
    fragment element of its own atom tile (offset by its warp tile, its repeat and the
    k-step). Warps are numbered M-major."""
    plan = TiledMMA(MMAAtom((16, 8, 16), dt.bf16), warps=(2, 2), repeat=(2, 2), k=32)
    loads = operand_loads(plan, operand)
    per_atom = 4 if operand == "a" else 2  # packed registers of one atom's operand
    rows = 16 if operand == "a" else 8
    isa = A_ISA if operand == "a" else {key: rc[::-1] for key, rc in B_ISA.items()}
    for ks in range(2):
        for w in range(4):
            wrow = w % 2 if operand == "a" else w // 2
            for g, ld in enumerate(loads.loads):
                for j, reg in enumerate(ld.registers):
                    rep, r = divmod(reg, per_atom)
                    for lane in range(32):
                        for v in (0, 1):
                            m, k = isa[(lane, 2 * r + v)]
                            want = (2 * rows * wrow + rows * rep + m, 16 * ks + k)
                            got = isa_ldmatrix(loads, 32 * w + lane, g, j, v, ks)
                            assert got == want, (ks, w, g, j, lane, v)
