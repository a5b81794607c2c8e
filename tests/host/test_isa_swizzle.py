"""The 32B, 64B and 128B swizzles against the PTX ISA's own pattern tables.

PTX ISA section 5.5.7, "Swizzling Modes" (the tensor copy's shared-memory layouts, the same
patterns wgmma's descriptors name), draws each mode as a table: one row per 128-byte line of
shared memory, one cell per 16-byte chunk of the line, the number in a cell being the chunk
of the unswizzled line stored there; the pattern repeats after 2 (32B), 4 (64B) or 8 (128B)
lines, from a 256-, 512- or 1024-byte aligned start. The tables are written out below as the
ISA prints them; tylo's swizzles (the byte swizzle, the element swizzles of TMA boxes and of
wgmma canonical layouts, for every element size) must move every byte where they say.
"""

from __future__ import annotations

import pytest

from tylo import dtypes as dt
from tylo.layouts import ComposedLayout, Layout, Swizzle, composition
from tylo.nvgpu.tma import TensorMapPlan
from tylo.nvgpu.warpgroup.descriptor import canonical_layout

ISA_TABLES = {
    "32B": [
        [0, 1, 2, 3, 4, 5, 6, 7],
        [1, 0, 3, 2, 5, 4, 7, 6],
    ],
    "64B": [
        [0, 1, 2, 3, 4, 5, 6, 7],
        [1, 0, 3, 2, 5, 4, 7, 6],
        [2, 3, 0, 1, 6, 7, 4, 5],
        [3, 2, 1, 0, 7, 6, 5, 4],
    ],
    "128B": [
        [0, 1, 2, 3, 4, 5, 6, 7],
        [1, 0, 3, 2, 5, 4, 7, 6],
        [2, 3, 0, 1, 6, 7, 4, 5],
        [3, 2, 1, 0, 7, 6, 5, 4],
        [4, 5, 6, 7, 0, 1, 2, 3],
        [5, 4, 7, 6, 1, 0, 3, 2],
        [6, 7, 4, 5, 2, 3, 0, 1],
        [7, 6, 5, 4, 3, 2, 1, 0],
    ],
}
ISA_ALIGN = {"32B": 256, "64B": 512, "128B": 1024}  # where the repeating pattern starts
WIDTH = {"32B": 32, "64B": 64, "128B": 128}  # bytes of one swizzled row (the mode's name)
SPAN = 4096  # bytes checked: several repeats of every pattern


def isa_byte(mode: str, a: int) -> int:
    """Where the ISA's table puts byte ``a`` of the unswizzled layout (from an aligned
    start): same line, the position whose cell names ``a``'s chunk, same byte in it."""
    line, chunk, byte = a // 128, (a % 128) // 16, a % 16
    row = ISA_TABLES[mode][line % len(ISA_TABLES[mode])]
    return 128 * line + 16 * row.index(chunk) + byte


def test_the_tables_are_permutations_that_repeat_at_the_alignment():
    for mode, rows in ISA_TABLES.items():
        assert all(sorted(r) == list(range(8)) for r in rows)
        assert 128 * len(rows) == ISA_ALIGN[mode]
        moved = [isa_byte(mode, a) for a in range(SPAN)]
        assert sorted(moved) == list(range(SPAN))


@pytest.mark.parametrize("mode,bits", [("32B", 1), ("64B", 2), ("128B", 3)])
def test_the_byte_swizzle_is_the_isa_table(mode, bits):
    s = Swizzle(bits, 4, 3)  # tylo's name for the mode on byte addresses
    assert [s(a) for a in range(SPAN)] == [isa_byte(mode, a) for a in range(SPAN)]


ELEMENTS = [dt.u8, dt.bf16, dt.f16, dt.f32, dt.i32, dt.f64]


@pytest.mark.parametrize("mode", ["32B", "64B", "128B"])
@pytest.mark.parametrize("dtype", ELEMENTS, ids=str)
def test_tma_boxes_are_written_as_the_isa_table(mode, dtype):
    """A box of 16 rows of one swizzled row each: element (r, c) sits at the byte the ISA's
    table gives for its unswizzled byte ``r * width + c * size``."""
    n = dtype.nbytes
    cols = WIDTH[mode] // n
    box = tylo_box(dtype, mode, cols)
    for r in range(16):
        for c in range(cols):
            got = box(r, c) * n
            assert got == isa_byte(mode, r * WIDTH[mode] + c * n), (r, c)


def tylo_box(dtype, mode, cols):
    """The shared layout tylo says a TMA box of (16, cols) is written in."""
    smem = _element_swizzled(mode, dtype, Layout((16, cols), (cols, 1)))
    plan = TensorMapPlan(dtype, Layout((1024, 4096), (4096, 1)), (16, cols), mode, smem)
    return plan.box_layout()


def _element_swizzled(mode, dtype, layout):
    # the ISA's byte swizzle Swizzle<b,4,3> on element offsets: base 4 - log2(size)
    bits = {"32B": 1, "64B": 2, "128B": 3}[mode]
    return composition(Swizzle(bits, 4 - (dtype.nbytes.bit_length() - 1), 3), layout)


@pytest.mark.parametrize("mode", ["32B", "64B", "128B"])
@pytest.mark.parametrize("major", ["K", "MN"])
def test_wgmma_canonical_layouts_swizzle_as_the_isa_table(mode, major):
    """The swizzle of a wgmma canonical layout (bf16), applied to the byte address of every
    element offset of an aligned tile, moves each byte where the ISA's table says."""
    lay = canonical_layout(major, mode, dt.bf16, 64, 8, 512)
    assert isinstance(lay, ComposedLayout)
    s = lay.outer
    for e in range(SPAN // 2):
        assert 2 * s(e) == isa_byte(mode, 2 * e), e
