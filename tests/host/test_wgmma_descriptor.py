"""wgmma shared-memory descriptors derived from tile layouts (tylo.nvgpu.warpgroup).

Every accepted descriptor is checked against an independent model of the hardware, written
from the PTX ISA's byte-level description (core matrices of 8 rows x 16 bytes, LBO and SBO in
bytes, the swizzle XOR on absolute byte-address bits 4-6 with bits 7-9), at every element of
the k-step. Every refusal is checked by brute force: no LBO/SBO of any canonical form
reproduces the tile.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tylo import dtypes as dt
from tylo.layouts import Layout, Swizzle, composition
from tylo.nvgpu.errors import PlanError
from tylo.nvgpu.warpgroup.descriptor import derive_descriptor
from tylo.nvgpu.warpgroup.mma import WarpgroupMMAAtom

E = 2  # bytes per bf16
T = 8  # elements per 16 bytes
WIDTH = {"none": 16, "32B": 32, "64B": 64, "128B": 128}
BITS = {"none": 0, "32B": 1, "64B": 2, "128B": 3}
# PTX ISA "Matrix Descriptor Format", bits 63-62 (not tylo's table: an oracle of its own)
MODE_CODE = {"none": 0, "128B": 1, "64B": 2, "32B": 3}
MODES = ["none", "32B", "64B", "128B"]


def hw_byte_address(major, swizzle, lbo, sbo, start, r, k):
    """The byte address wgmma reads for element (r, k) of a k-step (tile base 0, aligned)."""
    if major == "K":
        chunk = 16 if swizzle == "none" else WIDTH[swizzle]
        kstride = lbo if swizzle == "none" else 16
        lin = (r % 8) * chunk + (r // 8) * sbo + (k % T) * E + (k // T) * kstride
    elif swizzle == "none":
        lin = (r % T) * E + (r // T) * sbo + (k % 8) * 16 + (k // 8) * lbo
    else:
        x = WIDTH[swizzle] // 16
        lin = (r % (x * T)) * E + (r // (x * T)) * lbo + (k % 8) * WIDTH[swizzle] + (k // 8) * sbo
    a = start * E + lin
    b = BITS[swizzle]
    return a ^ (((a >> 7) & ((1 << b) - 1)) << 4)


def tile_layout(major, swizzle, rows, kw):
    """A (rows, kw) bf16 tile in the canonical arrangement of (major, swizzle)."""
    if major == "K":
        if swizzle == "none":
            return Layout(((8, rows // 8), (T, kw // T)), ((T, 8 * T), (1, rows * T)))
        w = WIDTH[swizzle] // E
        return composition(
            Swizzle(BITS[swizzle], 3, 3), Layout((rows, (w, kw // w)), (w, (1, rows * w)))
        )
    if swizzle == "none":
        return Layout(((T, rows // T), (8, kw // 8)), ((1, 8 * T), (T, rows * 8)))
    w = WIDTH[swizzle] // E
    return composition(Swizzle(BITS[swizzle], 3, 3), Layout(((w, rows // w), kw), ((1, w * kw), w)))


def offsets(layout, rows, k_offset):
    return {(r, k): layout(r, k + k_offset) for r in range(rows) for k in range(16)}


CASES = st.tuples(
    st.sampled_from(["K", "MN"]),
    st.sampled_from(MODES),
    st.integers(1, 4),  # rows multiplier
    st.integers(1, 4),  # k width multiplier
    st.data(),
)


@settings(max_examples=40, deadline=None)
@given(CASES)
def test_derived_descriptor_matches_the_hardware_model(case):
    major, swizzle, rm, km, data = case
    unit = 8 if major == "K" else max(T, WIDTH[swizzle] // E)
    rows = unit * rm
    kw = max(16, WIDTH[swizzle] // E if major == "K" else 16) * km
    layout = tile_layout(major, swizzle, rows, kw)
    k_offset = 16 * data.draw(st.integers(0, kw // 16 - 1))
    d = derive_descriptor(layout, dt.bf16, rows, k_offset=k_offset)
    assert (d.major, d.swizzle) == (major, swizzle)
    assert d.align == (16 if swizzle == "none" else 8 * WIDTH[swizzle])
    for (r, k), off in offsets(layout, rows, k_offset).items():
        assert hw_byte_address(major, swizzle, d.lbo, d.sbo, d.start, r, k) == off * E
    enc = d.encode(d.align * 3)
    assert enc & 0x3FFF == (d.align * 3) >> 4
    assert (enc >> 16) & 0x3FFF == d.lbo >> 4 and (enc >> 32) & 0x3FFF == d.sbo >> 4
    assert enc >> 62 == MODE_CODE[swizzle]


REFUSED = [
    Layout((64, 16), (16, 1)),  # row-major, no swizzle: rows 32 B apart
    Layout((64, 16), (1, 64)),  # column-major, no swizzle: 8 rows are not one core matrix
    composition(Swizzle(3, 3, 3), Layout((64, 16), (16, 1))),  # 128B swizzle over 32-B rows
    composition(Swizzle(2, 3, 3), Layout((64, 64), (64, 1))),  # 64B swizzle over 128-B rows
]


@pytest.mark.parametrize("layout", REFUSED, ids=str)
def test_refusals_are_true(layout):
    with pytest.raises(PlanError, match="matches no wgmma canonical layout"):
        derive_descriptor(layout, dt.bf16, 64)
    assert not _exhaustive_match_fast(layout, 64)


def _exhaustive_match_fast(layout, rows):
    """As :func:`_exhaustive_match`, pruned: a candidate must place (1,0), (0,1), (8,0),
    (0,8) and (T,0) right before the whole k-step is compared; every LBO/SBO below 2 KB."""
    want = offsets(layout, rows, 0)
    start = want[(0, 0)]
    probes = [(1, 0), (0, 1), (8, 0), (0, 8), (T, 0), (rows - 1, 15)]
    for major in ("K", "MN"):
        for swizzle in MODES:
            for lbo in range(16, 2048, 16):
                for sbo in range(16, 2048, 16):
                    hw = lambda r, k: hw_byte_address(major, swizzle, lbo, sbo, start, r, k)  # noqa: E731
                    if all(hw(r, k) == want[(r, k)] * E for r, k in probes) and all(
                        hw(r, k) == off * E for (r, k), off in want.items()
                    ):
                        return True
    return False


def test_refusal_names_every_form():
    with pytest.raises(PlanError) as err:
        derive_descriptor(Layout((64, 16), (16, 1)), dt.bf16, 64)
    text = str(err.value)
    for major in ("K", "MN"):
        for swizzle in MODES:
            assert f"{major}-major {swizzle}" in text


@pytest.mark.parametrize(
    "bad",
    [
        dict(layout=Layout((64, 16), (16, 1)), dtype=dt.f32, rows=64),
        dict(layout=Layout((64, 16), (16, 1)), dtype=dt.bf16, rows=4),
        dict(layout=Layout((64, 64), (64, 1)), dtype=dt.bf16, rows=64, k_offset=8),
        dict(layout=Layout((64, 64), (64, 1)), dtype=dt.bf16, rows=64, k_offset=-16),
        dict(layout="(64,16):(16,1)", dtype=dt.bf16, rows=64),
    ],
)
def test_bad_arguments_are_typed(bad):
    with pytest.raises(PlanError):
        derive_descriptor(bad.pop("layout"), bad.pop("dtype"), bad.pop("rows"), **bad)


def test_symbolic_layouts_are_refused():
    from tylo.layouts import dim

    n = dim("N")
    with pytest.raises(PlanError, match="static"):
        derive_descriptor(Layout((64, 16), (n, 1)), dt.bf16, 64)


def test_encode_refuses_unaligned_or_out_of_range_addresses():
    d = derive_descriptor(tile_layout("K", "128B", 64, 64), dt.bf16, 64)
    for bad in (8, -16, 1 << 18):
        with pytest.raises(PlanError):
            d.encode(bad)


@pytest.mark.parametrize(
    "shape,dtype,a",
    [
        ((64, 12, 16), dt.bf16, "shared"),
        ((64, 264, 16), dt.bf16, "shared"),
        ((64, 0, 16), dt.bf16, "shared"),
        ((128, 64, 16), dt.bf16, "shared"),
        ((64, 64, 8), dt.bf16, "shared"),
        ((64, 64, 16), dt.f32, "shared"),
        ((64, 64, 16), dt.bf16, "global"),
        ("64x64x16", dt.bf16, "shared"),
    ],
)
def test_atom_refuses_what_wgmma_lacks(shape, dtype, a):
    with pytest.raises(PlanError):
        WarpgroupMMAAtom(shape, dtype, a=a)


@pytest.mark.parametrize("n", range(8, 257, 8))
def test_every_legal_n(n):
    atom = WarpgroupMMAAtom((64, n, 16), dt.f16)
    assert atom.instruction == f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.f16.f16"
    assert atom.c.values == n // 2 and atom.c.threads == 128 and atom.c.covers_once
