"""wgmma operands stay inside the tile they name (issue #34, item 1).

The oracle is a model of which shared bytes one ``wgmma`` k-step reads, written here from the
PTX ISA's description of the matrix descriptor (9.7.15.5.1.1 "Shared Memory Matrix Layout",
9.7.15.5.1.2 "Matrix Descriptor Format") and nothing of tylo's: a 16-bit operand of
``rows x 16`` elements is read as *core matrices* of 8 rows x 16 bytes; the descriptor gives
the start address, the leading-dimension byte offset (LBO), the stride-dimension byte offset
(SBO) and a swizzle mode; the swizzle XORs address bits [4, 4+b) with bits [7, 7+b) of the
*absolute* address (b = 1, 2, 3 for 32, 64, 128 bytes).

The properties: a tile is a window of a larger canonical tile, so that every byte the
instruction might read has a known owner. ``operand_descriptor`` accepts a k-step exactly when
every byte the model reads (with the descriptor derived for the whole, unwindowed region)
belongs to an element of the window, and then the descriptor is that one; a refusal is a
``TileBoundsError`` whose numbers are the k-step's and the window's. A second property does
the same for the tile's base and the allocation's size.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tylo import dtypes as dt
from tylo.backend.ir import ADDRSPACE_SHARED
from tylo.layouts import Layout, Swizzle, composition, cosize
from tylo.nvgpu.errors import PlanError, TileBoundsError
from tylo.nvgpu.warpgroup.descriptor import derive_descriptor
from tylo.nvgpu.warpgroup.mma import operand_descriptor
from tylo.tile.views import SharedTile

E = 2  # bytes per bf16 element
WIDTH = {"none": 16, "32B": 32, "64B": 64, "128B": 128}


# ------------------------------------------------------------------ the PTX ISA's model


def ptx_reads(major: str, swizzle: str, lbo: int, sbo: int, start: int, rows: int) -> dict:
    """``{(r, k): byte address}`` of the first byte of each element of one ``rows x 16``
    16-bit k-step that wgmma reads through a descriptor (``start``: absolute byte address),
    enumerated core matrix by core matrix (8 rows of 16 bytes)."""
    out = {}
    w = WIDTH[swizzle]
    for i in range(rows // 8 if major == "K" else -(-rows // (w // E))):
        for j in range(2):  # the k-step's two 8-column halves
            for q in range(8):  # a core matrix's 8 rows of 16 bytes
                for e in range(8):  # the 8 elements of one 16-byte row
                    if major == "K":  # rows along M/N, 16-byte rows along K
                        r, k = 8 * i + q, 8 * j + e
                        if swizzle == "none":  # core (i, j): i * SBO + j * LBO
                            a = start + i * sbo + j * lbo + 16 * q + E * e
                        else:  # 8-row group i at i * SBO; rows w bytes apart; LBO unused
                            a = start + i * sbo + w * q + 16 * j + E * e
                    else:  # MN-major: 16-byte rows along M/N, one per k
                        k = 8 * j + q
                        if swizzle == "none":  # core (i: 8 MN, j: 8 K) at i*SBO + j*LBO
                            r = 8 * i + e
                            a = start + i * sbo + j * lbo + 16 * q + E * e
                        else:  # atoms of w bytes along MN: i * LBO; k groups: j * SBO
                            for part in range(w // 16):
                                r = (w // E) * i + 8 * part + e
                                if r < rows:
                                    a = start + i * lbo + j * sbo + w * q + 16 * part + E * e
                                    out[(r, k)] = _swizzle(a, swizzle)
                            continue
                    if r < rows:
                        out[(r, k)] = _swizzle(a, swizzle)
    return out


def _swizzle(a: int, swizzle: str) -> int:
    b = {"none": 0, "32B": 1, "64B": 2, "128B": 3}[swizzle]
    return a ^ (((a >> 7) & ((1 << b) - 1)) << 4)


def read_bytes(reads: dict) -> set:
    return {a + x for a in reads.values() for x in range(E)}


# ------------------------------------------------------------------ canonical parent tiles


def parent_tile(major: str, swizzle: str, rows: int, cols: int):
    """A (rows, cols) bf16 tile in the canonical arrangement of (major, swizzle), compact
    (offsets exactly 0 .. rows*cols - 1), built from the same core-matrix picture."""
    t = 16 // E
    if major == "K":
        if swizzle == "none":
            return Layout(((8, rows // 8), (t, cols // t)), ((t, 8 * t), (1, rows * t)))
        w = WIDTH[swizzle] // E
        return composition(
            Swizzle(_bits(swizzle), 3, 3), Layout((rows, (w, cols // w)), (w, (1, rows * w)))
        )
    if swizzle == "none":
        return Layout(((t, rows // t), (8, cols // 8)), ((1, 8 * t), (t, rows * 8)))
    w = WIDTH[swizzle] // E
    return composition(
        Swizzle(_bits(swizzle), 3, 3), Layout(((w, rows // w), cols), ((1, w * cols), w))
    )


def _bits(swizzle: str) -> int:
    return {"32B": 1, "64B": 2, "128B": 3}[swizzle]


class FakeShared:
    """Enough of a shared tensor for a SharedTile: its space, dtype, size and alignment."""

    addrspace = ADDRSPACE_SHARED
    dtype = dt.bf16
    name = "smem"

    def __init__(self, extent: int, align: int = 1024) -> None:
        self.extent = extent
        self.align = align


def units(major: str, swizzle: str) -> tuple[int, int]:
    """(row unit, column unit) of a canonical tile of this form."""
    w = WIDTH[swizzle] // E
    if major == "K":
        return 8, max(16, w)
    return max(8, w), 16


CASES = st.tuples(
    st.sampled_from(["K", "MN"]), st.sampled_from(list(WIDTH)), st.integers(1, 2), st.integers(1, 2)
)


@settings(max_examples=60, deadline=None)
@given(CASES, st.data())
def test_accepted_exactly_when_every_byte_read_is_in_the_window(case, data):
    major, swizzle, pr, pc = case
    ru, cu = units(major, swizzle)
    prow, pcol = ru * pr, cu * pc
    parent = parent_tile(major, swizzle, prow, pcol)
    # the window: anywhere inside the parent (origins on 8 rows / 16 columns)
    r0 = 8 * data.draw(st.integers(0, prow // 8 - 1), label="r0")
    c0 = 16 * data.draw(st.integers(0, pcol // 16 - 1), label="c0")
    nr = data.draw(st.integers(1, prow - r0), label="window rows")
    nc = data.draw(st.integers(1, pcol - c0), label="window cols")
    # the instruction: any k-step that stays inside the parent
    rows = 8 * data.draw(st.integers(1, (prow - r0) // 8), label="rows / 8")
    k_offset = 16 * data.draw(st.integers(0, (pcol - c0) // 16 - 1), label="k_offset / 16")
    storage = FakeShared(cosize(parent))
    tile = SharedTile(storage, parent).window((r0, c0), (nr, nc))
    # what the instruction reads with the descriptor of the unwindowed region
    try:
        ref = derive_descriptor(
            parent, dt.bf16, rows, k_offset=k_offset, coordinate=lambda c: (c[0] + r0, c[1] + c0)
        )
    except TileBoundsError:  # pragma: no cover - the region lies inside the parent
        raise
    except PlanError:
        ref = None  # no canonical form reads this region at all (a k-step across a swizzle row)
    window_bytes = {
        parent(r0 + r, c0 + c) * E + x for r in range(nr) for c in range(nc) for x in range(E)
    }
    inside = rows <= nr and k_offset + 16 <= nc  # the k-step's elements, by coordinates
    try:
        got = operand_descriptor(tile, rows, k_offset=k_offset)
    except TileBoundsError as err:
        assert not inside
        text = str(err)
        assert f"{rows} x 16 k-step at k_offset {k_offset}" in text
        assert f"({nr}, {nc})" in text
        if ref is not None:  # the read it refused reaches bytes outside the window
            reads = ptx_reads(ref.major, ref.swizzle, ref.lbo, ref.sbo, ref.start * E, rows)
            assert not read_bytes(reads) <= window_bytes
        return
    except PlanError as err:
        assert ref is None and inside, err  # refused for its layout, not its bounds
        return
    assert inside and got == ref
    reads = ptx_reads(got.major, got.swizzle, got.lbo, got.sbo, got.start * E, rows)
    assert len(reads) == rows * 16
    assert read_bytes(reads) <= window_bytes
    for (r, k), a in reads.items():  # and each element is the tile's own
        assert a == parent(r0 + r, c0 + k_offset + k) * E


@settings(max_examples=40, deadline=None)
@given(CASES, st.data())
def test_accepted_exactly_when_every_byte_read_is_in_the_allocation(case, data):
    major, swizzle, pr, pc = case
    ru, cu = units(major, swizzle)
    layout = parent_tile(major, swizzle, ru * pr, cu * pc)
    # a base on the swizzle's period (8 rows of its width), as the trace requires
    period = {"none": 8, "32B": 128, "64B": 256, "128B": 512}[swizzle]
    base = period * data.draw(st.integers(-3, 3), label="base / period")
    rows = ru * pr
    k_offset = 16 * data.draw(st.integers(0, cu * pc // 16 - 1), label="k_offset / 16")
    ref = derive_descriptor(layout, dt.bf16, rows, k_offset=k_offset)
    reads = ptx_reads(ref.major, ref.swizzle, ref.lbo, ref.sbo, (base + ref.start) * E, rows)
    need = max(reads.values()) // E + 1  # the model's: one past the last element read
    extent = data.draw(
        st.integers(1, 3 * cosize(layout) + 4 * period) | st.integers(need - 2, need + 2),
        label="extent",
    )
    assume(extent >= 1)
    tile = SharedTile(FakeShared(extent), layout, base=base)
    fits = all(0 <= b < extent * E for b in read_bytes(reads))
    try:
        got = operand_descriptor(tile, rows, k_offset=k_offset)
    except TileBoundsError as err:
        assert not fits
        nums = re.search(
            r"reach elements \[(-?\d+), (-?\d+)\] of smem, which holds (\d+)", str(err)
        )
        assert nums, err
        lo, hi, held = map(int, nums.groups())
        elems = {b // E for b in read_bytes(reads)}
        assert (lo, hi, held) == (min(elems), max(elems), extent)
        return
    assert fits and got == ref


# ------------------------------------------------------------------ regressions


def test_the_issue_example_is_refused():
    """A 64x64 bf16 128B-swizzled tile has no k-step at k_offset=64: unchecked, its
    layout's linear extension put the read at elements up to 8143 of a 4096-element tile."""
    tile = parent_tile("K", "128B", 64, 64)
    assert cosize(tile) == 4096
    # the linear part of the layout's extension (before the swizzle) at that k-step
    extension = max(tile.inner(r, 64 + k) for r in range(64) for k in range(16))
    assert extension == 8143  # what the descriptor would have described
    assert min(tile(r, 64 + k) for r in range(64) for k in range(16)) >= 4096
    with pytest.raises(TileBoundsError, match=r"k_offset 64 .* extents are \(64, 64\)"):
        derive_descriptor(tile, dt.bf16, 64, k_offset=64)
    for k_offset in (0, 16, 32, 48):  # every k-step inside is still accepted
        derive_descriptor(tile, dt.bf16, 64, k_offset=k_offset)


def test_an_n128_instruction_on_a_64_row_tile_is_refused():
    tile = SharedTile(FakeShared(4096), parent_tile("K", "128B", 64, 64))
    with pytest.raises(TileBoundsError, match=r"128 x 16 k-step .* extents are \(64, 64\)"):
        operand_descriptor(tile, 128)
    operand_descriptor(tile, 64)


def test_a_window_past_its_layout_is_refused():
    parent = parent_tile("K", "128B", 64, 64)
    tile = SharedTile(FakeShared(4096), parent).window((8, 0), (64, 64))  # rows 8..71
    with pytest.raises(TileBoundsError, match="outside the domain"):
        operand_descriptor(tile, 64)
    operand_descriptor(tile, 56)


def test_a_base_past_the_allocation_is_refused():
    layout = parent_tile("K", "128B", 64, 64)
    with pytest.raises(TileBoundsError, match="which holds 4096 elements"):
        operand_descriptor(SharedTile(FakeShared(4096), layout, base=512), 64)
    with pytest.raises(TileBoundsError, match="reach elements \\[-512"):
        operand_descriptor(SharedTile(FakeShared(8192), layout, base=-512), 64)
    operand_descriptor(SharedTile(FakeShared(4608), layout, base=512), 64)


def test_the_model_reads_each_element_once():
    """The model itself: every canonical form reads rows x 16 distinct elements, 2 bytes
    each, all inside the rows x 16 elements' span when laid out compactly."""
    for major in ("K", "MN"):
        for swizzle in WIDTH:
            ru, cu = units(major, swizzle)
            layout = parent_tile(major, swizzle, ru, cu)
            d = derive_descriptor(layout, dt.bf16, ru)
            reads = ptx_reads(d.major, d.swizzle, d.lbo, d.sbo, 0, ru)
            assert len(set(reads.values())) == ru * 16
            assert {a // E for a in reads.values()} == {
                layout(r, k) for r in range(ru) for k in range(16)
            }


# ------------------------------------------------------------------ host plans over their layouts


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 8), st.integers(1, 4), st.integers(-8, 8), st.integers(-2, 2))
def test_a_copy_plan_needs_a_layout_over_its_tile(r, c, dr, dc):
    """CopyPlan((rows, cols), ...) writes every coordinate of its tile: a shared layout with
    fewer rows or columns is refused by its extents, and only such a layout (a larger one may
    still be refused by the provers, for its strides)."""
    from tylo.errors import TyloError
    from tylo.nvgpu.cpasync import CopyPlan

    rows, cols = 8 * r, 64 * c
    lr, lc = max(1, rows + dr), max(8, cols + 8 * dc)
    smem = Layout((lr, lc), (lc, 1))
    fits = lr >= rows and lc >= cols
    try:
        CopyPlan((rows, cols), dt.bf16, 32, smem)
    except TileBoundsError as err:
        assert not fits and f"extents are ({lr}, {lc})" in str(err)
        return
    except TyloError:
        assert fits
        return
    assert fits


def test_ldmatrix_proofs_need_a_layout_over_the_operand_tile():
    from tylo.nvgpu.warp.ldmatrix import operand_loads
    from tylo.nvgpu.warp.mma import MMAAtom, TiledMMA

    plan = TiledMMA(MMAAtom((16, 8, 16), dt.bf16), warps=(2, 2), repeat=(2, 4), k=32)
    loads = operand_loads(plan, "a")
    loads.prove(Layout((64, 32), (32, 1)))
    with pytest.raises(TileBoundsError, match=r"\(64, 32\) tile.*extents \(32, 32\)"):
        loads.prove(Layout((32, 32), (32, 1)))
