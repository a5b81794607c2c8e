"""wgmma matrix descriptors against values written out from the PTX ISA, not tylo's table.

Sources (PTX ISA, "Asynchronous Warpgroup Level Matrix Shared Memory Layout"; numbered
9.7.15.5.1.2 in ISA 8.x):

- "Matrix Descriptor Format": bits 13-0 hold ``(start address & 0x3FFFF) >> 4``, bits 29-16
  the leading dimension byte offset ``>> 4``, bits 45-32 the stride dimension byte offset
  ``>> 4``, bits 51-49 the matrix base offset, bits 63-62 the swizzle mode: 0 no swizzle,
  1 the 128-byte swizzle, 2 the 64-byte swizzle, 3 the 32-byte swizzle. The base offset is 0
  when the swizzle's repeating pattern starts on a 1024-byte (128B), 512-byte (64B) or
  256-byte (32B) boundary.
- "Canonical Layouts", with their worked examples for bf16 (Figures 168-170): the exact
  layout, LBO and SBO in elements, and their encodings. For K-major swizzled layouts "LBO is
  not used, assumed 1" (encoded 1, i.e. 16 bytes).

Every expected number below is copied from those tables (or, for the K-major and 128B
bf16 cases the ISA draws only for tf32, from the canonical-layout table with T = 8).
"""

from __future__ import annotations

import pytest

from tylo import dtypes as dt
from tylo.layouts import Layout, Swizzle, composition
from tylo.nvgpu.errors import PlanError
from tylo.nvgpu.warpgroup.descriptor import derive_descriptor, swizzle_period_bytes

# "Matrix Descriptor Format", bits 63-62
ISA_MODE = {"none": 0, "128B": 1, "64B": 2, "32B": 3}
# the base-offset table: where each swizzle's repeating pattern starts (none: 16-byte aligned)
ISA_PATTERN_BYTES = {"none": 16, "32B": 256, "64B": 512, "128B": 1024}


def bf16_swizzled(bits, layout):
    """The ISA's byte swizzle Swizzle<bits,4,3> o layout, written on bf16 element offsets."""
    return composition(Swizzle(bits, 3, 3), layout) if bits else layout


# (name, tile layout in elements, rows, major, mode, LBO bytes, SBO bytes, LBO enc, SBO enc)
ISA_EXAMPLES = [
    # Figure 168: MN-major, no swizzling, bf16: LBO 128*2 (enc 16), SBO 64*2 (enc 8)
    ("fig168-mn-none", Layout(((8, 1, 2), (8, 2)), ((1, 8, 64), (8, 128))), 16,
     "MN", "none", 256, 128, 16, 8),
    # Figure 169: MN-major, 32B swizzling, bf16: LBO 128*2 (enc 16), SBO 256*2 (enc 32)
    ("fig169-mn-32B", bf16_swizzled(1, Layout(((8, 2, 2), (8, 2)), ((1, 8, 128), (16, 256)))),
     32, "MN", "32B", 256, 512, 16, 32),
    # Figure 170: MN-major, 64B swizzling, bf16: LBO 256*2 (enc 32), SBO 512*2 (enc 64)
    ("fig170-mn-64B", bf16_swizzled(2, Layout(((8, 4, 2), (8, 2)), ((1, 8, 256), (32, 512)))),
     64, "MN", "64B", 512, 1024, 32, 64),
    # MN-major 128B, T = 8: ((T,8,m),(8,k)):((1,T,LBO),(8T,SBO)), m = k = 2, LBO 1024, SBO 512
    ("mn-128B", bf16_swizzled(3, Layout(((8, 8, 2), (8, 2)), ((1, 8, 1024), (64, 512)))),
     128, "MN", "128B", 2048, 1024, 128, 64),
    # K-major none, T = 8: ((8,m),(T,2k)):((1T,SBO),(1,LBO)), m = 8, SBO 64, LBO 512 elements
    ("k-none", Layout(((8, 8), (8, 2)), ((8, 64), (1, 512))), 64,
     "K", "none", 1024, 128, 64, 8),
    # K-major 32B: ((8,m),(T,2k)):((2T,SBO),(1,T)), m = 4, SBO 128 elements; LBO assumed 1
    ("k-32B", bf16_swizzled(1, Layout(((8, 4), (8, 2)), ((16, 128), (1, 8)))), 32,
     "K", "32B", 16, 256, 1, 16),
    # K-major 64B: ((8,m),(T,2k)):((4T,SBO),(1,T)), m = 4, SBO 256 elements
    ("k-64B", bf16_swizzled(2, Layout(((8, 4), (8, 2)), ((32, 256), (1, 8)))), 32,
     "K", "64B", 16, 512, 1, 32),
    # K-major 128B: ((8,m),(T,2k)):((8T,SBO),(1,T)), m = 8, SBO 512 elements
    ("k-128B", bf16_swizzled(3, Layout(((8, 8), (8, 2)), ((64, 512), (1, 8)))), 64,
     "K", "128B", 16, 1024, 1, 64),
]  # fmt: skip


def fields(desc: int) -> dict[str, int]:
    """The descriptor's bit fields, at the ISA's positions."""
    return {
        "start": desc & 0x3FFF,  # 13-0
        "lbo": (desc >> 16) & 0x3FFF,  # 29-16
        "sbo": (desc >> 32) & 0x3FFF,  # 45-32
        "base_offset": (desc >> 49) & 0x7,  # 51-49
        "mode": desc >> 62,  # 63-62
        "reserved": desc & ((0x3 << 14) | (0x3 << 30) | (0x7 << 46) | (0x3FF << 52)),
    }


@pytest.mark.parametrize("case", ISA_EXAMPLES, ids=[c[0] for c in ISA_EXAMPLES])
def test_isa_examples_derive_the_isa_fields(case):
    _, layout, rows, major, mode, lbo, sbo, lbo_enc, sbo_enc = case
    d = derive_descriptor(layout, dt.bf16, rows)
    assert (d.major, d.swizzle, d.lbo, d.sbo, d.start) == (major, mode, lbo, sbo, 0)
    assert d.align == ISA_PATTERN_BYTES[mode]
    assert d.transposed == (0 if major == "K" else 1)  # imm-trans: 1 for MN-major
    for k in range(3):  # tile bases on the pattern boundary: base offset 0
        address = 0x400 * 4 + k * ISA_PATTERN_BYTES[mode]
        got = fields(d.encode(address))
        assert got == {
            "start": address >> 4,
            "lbo": lbo_enc,
            "sbo": sbo_enc,
            "base_offset": 0,
            "mode": ISA_MODE[mode],
            "reserved": 0,
        }


def test_one_descriptor_written_out_whole():
    # Figure 169's tile at shared address 0x2300 (a 256-byte boundary): start 0x230, LBO 16,
    # SBO 32, 32B swizzle (3): 0xC000_0020_0010_0230
    d = derive_descriptor(ISA_EXAMPLES[1][1], dt.bf16, 32)
    assert d.encode(0x2300) == 0xC000_0020_0010_0230
    # the K-major 128B tile at 0x8000: start 0x800, LBO 1 (assumed), SBO 64, mode 1
    d = derive_descriptor(ISA_EXAMPLES[7][1], dt.bf16, 64)
    assert d.encode(0x8000) == 0x4000_0040_0001_0800


def test_swizzle_periods_are_the_isa_pattern_boundaries():
    assert {m: swizzle_period_bytes(m) for m in ISA_MODE} == ISA_PATTERN_BYTES


@pytest.mark.parametrize("k_offset,start", [(0, 0), (16, 16), (32, 32), (48, 48)])
def test_k_steps_of_a_swizzled_row_start_at_their_unswizzled_offset(k_offset, start):
    """A 64 x 64 bf16 K-major tile, 128-byte rows, 128B swizzle: k-step ``k`` starts
    ``2k`` bytes in (the hardware applies the swizzle to the absolute address), so its
    start field is ``(base + 2k) >> 4``."""
    tile = composition(Swizzle(3, 3, 3), Layout((64, 64), (64, 1)))
    d = derive_descriptor(tile, dt.bf16, 64, k_offset=k_offset)
    assert (d.major, d.swizzle, d.start, d.lbo, d.sbo) == ("K", "128B", start, 16, 1024)
    assert fields(d.encode(0x1000 + 2 * start))["start"] == (0x1000 + 2 * start) >> 4


@pytest.mark.parametrize("address", [8, 0x3FFF8, 0x40000, 1 << 18, -16, 1 << 63])
def test_addresses_the_start_field_cannot_hold_are_refused(address):
    # 14 bits of address >> 4: a multiple of 16 below 2**18
    d = derive_descriptor(ISA_EXAMPLES[0][1], dt.bf16, 16)
    with pytest.raises(PlanError, match="start address"):
        d.encode(address)
    assert fields(d.encode(0x3FFF0))["start"] == 0x3FFF
    assert fields(d.encode(0))["start"] == 0  # shared address 0 is a tile's start too


def test_a_window_coordinate_map_gives_the_same_descriptor():
    """The k-step read through ``coordinate`` (the tile as a 1-D layout of 64 x 64 bf16,
    row-major, 128B swizzle) is the 2-D tile's: K-major, LBO 16, SBO 1024."""
    flat = composition(Swizzle(3, 3, 3), Layout(4096, 1))
    for k in (0, 16, 48):
        d = derive_descriptor(
            flat, dt.bf16, 64, k_offset=k, coordinate=lambda c: (64 * c[0] + c[1],)
        )
        assert (d.major, d.swizzle, d.lbo, d.sbo, d.start) == ("K", "128B", 16, 1024, k)


# The ISA's canonical layouts (table "Canonical Layouts"), T = 8 for bf16, written with
# m = rows / (rows per repeating pattern) and the two 8-column halves of a k16 step; the
# swizzle Swizzle<b,4,3> on bytes is S<b,3,3> on bf16 elements. (tylo writes MN-major
# swizzled (T,x,m) as (xT,m): the same function.)
ISA_CANONICAL = [
    ("K", "none", 64, 512, 64, "((8,8),(8,2)):((8,64),(1,512))"),
    ("K", "32B", 64, 0, 128, "S<1,3,3> o ((8,8),(8,2)):((16,128),(1,8))"),
    ("K", "64B", 64, 0, 256, "S<2,3,3> o ((8,8),(8,2)):((32,256),(1,8))"),
    ("K", "128B", 64, 0, 512, "S<3,3,3> o ((8,8),(8,2)):((64,512),(1,8))"),
    ("MN", "none", 64, 128, 64, "((8,8),(8,2)):((1,64),(8,128))"),
    ("MN", "32B", 64, 256, 512, "S<1,3,3> o ((16,4),(8,2)):((1,256),(16,512))"),
    ("MN", "64B", 64, 512, 1024, "S<2,3,3> o ((32,2),(8,2)):((1,512),(32,1024))"),
    ("MN", "128B", 64, 1024, 512, "S<3,3,3> o ((64,1),(8,2)):((1,1024),(64,512))"),
]


@pytest.mark.parametrize("major,mode,rows,lbo,sbo,text", ISA_CANONICAL)
def test_canonical_layouts_are_the_isa_table(major, mode, rows, lbo, sbo, text):
    from tylo.nvgpu.warpgroup.descriptor import canonical_layout

    assert str(canonical_layout(major, mode, dt.bf16, rows, lbo, sbo)) == text
