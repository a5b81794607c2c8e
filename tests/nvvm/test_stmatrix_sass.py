"""stmatrix stores of fragments compiled for sm_90a without a GPU: the instruction forms
(x4/x2, plain/.trans) and their SASS, and the trace-time refusals (targets below sm_90,
tiles that are not 16-bit, not the fragment's shape, rows that are not 16-byte runs)."""

from __future__ import annotations

import pytest

import tylo
from tylo.kernel.values import to_index
from tylo.layouts import Layout
from tylo.layouts.tv import MMA_M16N8K16_C_TV, wgmma_m64_c_tv
from tylo.nvgpu.warp.stmatrix import store_fragment
from tylo.tile.fragment import Fragment
from tylo.tile.ownership import Ownership
from tylo.tile.views import SharedTile


def accumulator(own, tid):
    return Fragment([tylo.value(r * 1000 + c, tylo.f32) for r, c in own.coords(tid)], own)


@tylo.kernel
def to_shared(out, n: tylo.Static, layout: tylo.Static, dtype: tylo.Static):
    own = Ownership(wgmma_m64_c_tv(n), (64, n))
    tid = tylo.thread_idx.x
    tile = SharedTile(tylo.shared(dtype, 64 * n + 64, align=128), layout)
    store_fragment(accumulator(own, tid), tile, tid)
    tylo.sync_threads()
    out[tid] = tile.storage[tid]


def compile_for(n, layout, dtype=tylo.bf16, target="sm_90a"):
    return to_shared.compile(dtype, n, layout, dtype, block=128, target=target)


@pytest.mark.parametrize("n,major", [(8, "row"), (8, "col"), (64, "row"), (32, "col")])
def test_forms_and_sass(n, major):
    layout = Layout((64, n), (n, 1)) if major == "row" else Layout((64, n), (1, 64))
    k = compile_for(n, layout)
    x = 4 if n >= 16 else 2
    trans = ".trans" if major == "col" else ""
    assert f"stmatrix.sync.aligned.m8n8.x{x}{trans}.shared.b16" in k.ptx
    count = k.ptx.count("stmatrix.sync.aligned")
    assert count == n // 4 // x
    sass_op = f"STSM.16.{'MT88' if major == 'col' else 'M88'}.{x}"
    assert sass_op in k.sass and k.sass.count("STSM") == count
    assert "LDL" not in k.sass and "STL" not in k.sass


def test_swizzled_tile():
    from tylo.layouts import ComposedLayout, Swizzle

    layout = ComposedLayout(Swizzle(3, 3, 3), 0, Layout((64, 64), (64, 1)))
    k = compile_for(64, layout)
    assert "STSM.16.M88.4" in k.sass


def test_needs_sm90():
    with pytest.raises(tylo.TyloError, match="stmatrix needs sm_90"):
        compile_for(16, Layout((64, 16), (16, 1)), target="sm_80")


@pytest.mark.parametrize(
    "layout,dtype,match",
    [
        (Layout((64, 16), (16, 1)), tylo.f32, "stores 16-bit elements"),
        (Layout((64, 16), (20, 1)), tylo.bf16, r"thread \d+ stores the row"),
        (Layout((64, 16), (1, 68)), tylo.f16, r"thread \d+ stores the row"),
        (Layout((64, 16), (32, 2)), tylo.bf16, "the shared tile .* is contiguous along neither"),
    ],
)
def test_refused_tiles(layout, dtype, match):
    with pytest.raises(tylo.TyloError, match="StmatrixError: stmatrix: " + match):
        compile_for(16, layout, dtype)


def test_row_refusal_claim_by_brute_force():
    """The thread and row the refusal names really are not 8 consecutive elements from a
    multiple of 8 in that layout."""
    import re

    layout = Layout((64, 16), (20, 1))
    with pytest.raises(tylo.TyloError) as err:
        compile_for(16, layout)
    offs = [int(x) for x in re.search(r"tile offsets \[([^\]]*)\]", str(err.value))[1].split(",")]
    start = re.search(r"stores the row \((\d+), (\d+)\)", str(err.value))
    r, c = int(start[1]), int(start[2])
    assert offs == [layout(r, c + j) for j in range(8)]
    assert offs[0] % 8 != 0 or offs != list(range(offs[0], offs[0] + 8))


def test_fragment_and_tile_must_agree():
    @tylo.kernel
    def wrong_shape(out):
        own = Ownership(MMA_M16N8K16_C_TV, (16, 8))
        tid = tylo.thread_idx.x
        tile = SharedTile(tylo.shared(tylo.bf16, 256, align=16), Layout((16, 16), (16, 1)))
        store_fragment(accumulator(own, tid), tile, tid)

    with pytest.raises(tylo.TyloError, match="covers \\(16, 8\\), the tile is \\(16, 16\\)"):
        wrong_shape.compile(tylo.f32, block=32, target="sm_90a")

    @tylo.kernel
    def wrong_pack(out):
        own = Ownership(MMA_M16N8K16_C_TV, (16, 8))
        tid = tylo.thread_idx.x
        tile = SharedTile(tylo.shared(tylo.bf16, 128, align=16), Layout((16, 8), (8, 1)))
        store_fragment(accumulator(own, tid).pack(tylo.f16), tile, tid)

    with pytest.raises(tylo.TyloError, match="packs f16, the tile holds bf16"):
        wrong_pack.compile(tylo.f32, block=32, target="sm_90a")

    @tylo.kernel
    def not_a_fragment(out):
        tile = SharedTile(tylo.shared(tylo.bf16, 128, align=16), Layout((16, 8), (8, 1)))
        store_fragment([1.0], tile, tylo.thread_idx.x)

    with pytest.raises(tylo.TyloError, match="expected a Fragment"):
        not_a_fragment.compile(tylo.f32, block=32, target="sm_90a")


def test_mma_sync_accumulator_x2():
    @tylo.kernel
    def small(out):
        own = Ownership(MMA_M16N8K16_C_TV, (16, 8))
        tid = tylo.thread_idx.x
        tile = SharedTile(tylo.shared(tylo.f16, 128, align=16), Layout((16, 8), (8, 1)))
        store_fragment(accumulator(own, tid), tile, tid)
        tylo.sync_threads()
        out[tid] = tile.storage[tid]

    k = small.compile(tylo.f16, block=32, target="sm_90a")
    assert "stmatrix.sync.aligned.m8n8.x2.shared.b16" in k.ptx and "STSM.16.M88.2" in k.sass


@tylo.kernel
def into_half(out, which: tylo.Static):
    """A warpgroup's 64x16 accumulator into half of a 128x16 tile: a static window, a
    runtime base, or a runtime window origin (refused)."""
    own = Ownership(wgmma_m64_c_tv(16), (64, 16))
    tid = tylo.thread_idx.x % 128
    half = tylo.thread_idx.x // 128
    storage = tylo.shared(tylo.bf16, 128 * 16, align=128)
    if which == "window":
        tile = SharedTile(storage, Layout((128, 16), (16, 1))).window((64, 0), (64, 16))
    elif which == "base":
        tile = SharedTile(storage, Layout((64, 16), (16, 1)), base=half * 64 * 16)
    else:
        tile = SharedTile(storage, Layout((128, 16), (16, 1))).window((64 * half, 0), (64, 16))
    store_fragment(accumulator(own, tid), tile, tid)


def test_windows_and_bases():
    for which in ("window", "base"):
        k = into_half.compile(tylo.f32, which, block=256, target="sm_90a")
        assert "STSM.16.M88.4" in k.sass
    with pytest.raises(tylo.TyloError, match="window origin .* is not static"):
        into_half.compile(tylo.f32, "runtime", block=256, target="sm_90a")


@tylo.kernel
def in_loop_and_after(out, shift, trips, n: tylo.Static, layout: tylo.Static):
    own = Ownership(wgmma_m64_c_tv(n), (64, n))
    tid = tylo.thread_idx.x
    me = tid + to_index(shift[0], "shift")  # read at run time: not an entry-block value
    tile = SharedTile(tylo.shared(tylo.bf16, 64 * n + 64, align=128), layout)
    for _ in tylo.range(trips[0]):
        store_fragment(accumulator(own, me), tile, me)
    store_fragment(accumulator(own, me), tile, me)  # the same addresses, after the loop
    tylo.sync_threads()
    out[tid] = tile.storage[tid]


def test_addresses_bound_in_a_loop_are_bound_again_after_it():
    """A store's per-thread shared offsets made inside a ``tylo.range`` loop from a runtime
    thread index are bound in the loop body; the same store after the loop binds them again
    instead of reusing symbols whose values do not reach it (which failed the trace with
    "the index symbol smem_off has no value here")."""
    k = in_loop_and_after.compile(tylo.bf16, tylo.i32, tylo.i32, 64, Layout((64, 64), (64, 1)),
                                  block=128, target="sm_90a")  # fmt: skip
    assert k.ptx.count("stmatrix.sync.aligned") == 2 * 64 // 4 // 4
    assert "STSM.16.M88.4" in k.sass
