"""Shared-memory instructions traced into kernels touch only the tile they name (issue #34,
item 1): wgmma operands, ldmatrix, stmatrix, the cp.async destination and TMA boxes are
refused at trace time, with the extents, when their region leaves the tile, the tile leaves
its layout, or the layout's offsets leave the allocation; and warpgroup instructions are
refused in a CTA that is not a whole number of warpgroups. Traced only (no libNVVM, no GPU).
"""

from __future__ import annotations

import pytest

import tylo
from tylo.layouts import Layout, Swizzle, composition
from tylo.nvgpu import tma
from tylo.nvgpu.cpasync import CopyPlan, copy_async
from tylo.nvgpu.mbarrier import Barriers
from tylo.nvgpu.warp.ldmatrix import load_operand
from tylo.nvgpu.warp.mma import MMAAtom, TiledMMA
from tylo.nvgpu.warp.stmatrix import store_fragment
from tylo.nvgpu.warpgroup.mma import (
    WarpgroupMMAAtom,
    commit_group,
    fence,
    mma_async,
    wait_group,
)
from tylo.tile.fragment import zeros
from tylo.tile.views import GlobalTile, SharedTile

SW128 = Swizzle(3, 3, 3)


def k_major_128b(rows: int, k: int = 64):
    return composition(SW128, Layout((rows, (64, k // 64)), (64, (1, rows * 64))))


@tylo.kernel
def wgmma_kernel(out, n: tylo.Static, b_rows: tylo.Static, k_offset: tylo.Static):
    atom = WarpgroupMMAAtom((64, n, 16), tylo.bf16)
    sa = SharedTile(tylo.shared(tylo.bf16, 64 * 64, align=1024), k_major_128b(64))
    sb = SharedTile(tylo.shared(tylo.bf16, b_rows * 64, align=1024), k_major_128b(b_rows))
    fence()
    acc = mma_async(atom, sa, sb, zeros(atom.c), k_offset=k_offset, accumulate=False)
    commit_group()
    acc = wait_group(0, acc)
    out[tylo.thread_idx.x] = acc[0]


def trace_wgmma(n=128, b_rows=128, k_offset=0, block=128):
    return wgmma_kernel.trace(tylo.f32, n, b_rows, k_offset, block=block, target="sm_90a")


def test_an_n128_wgmma_on_a_64_row_b_tile_is_refused():
    trace_wgmma()  # the right tile traces
    with pytest.raises(
        tylo.TyloError, match=r"TileBoundsError: wgmma\.mma_async.*m64n128k16.* B: .*128 x 16"
    ):
        trace_wgmma(b_rows=64)


@pytest.mark.parametrize("k_offset", [64, 80, 1024])
def test_a_k_step_past_k_is_refused(k_offset):
    with pytest.raises(tylo.TyloError, match=rf"k_offset {k_offset}.*extents are \(128, 64\)"):
        trace_wgmma(k_offset=k_offset)


@pytest.mark.parametrize("block", [32, 96, 160, 192, (64, 3), (32, 2, 3)])
def test_wgmma_in_a_partial_warpgroup_is_refused(block):
    with pytest.raises(tylo.TyloError, match="not a whole number of 128-thread warpgroups"):
        trace_wgmma(block=block)


@pytest.mark.parametrize("block", [128, 256, 384, (64, 2), (32, 2, 4)])
def test_wgmma_in_whole_warpgroups_traces(block):
    trace_wgmma(block=block)


# ------------------------------------------------------------------ ldmatrix


PLAN = TiledMMA(MMAAtom((16, 8, 16), tylo.bf16), warps=(1, 1), repeat=(1, 1), k=32)


@tylo.kernel
def ldmatrix_kernel(out, elements: tylo.Static, base: tylo.Static, k_step: tylo.Static):
    tid = tylo.thread_idx.x
    smem = tylo.shared(tylo.bf16, elements, align=16)
    tile = SharedTile(smem, Layout((16, 32), (32, 1)), base=base)
    frag = load_operand(PLAN, "a", tile, tid, k_step)
    out[tid] = frag.values[0]


def trace_ldmatrix(elements=512, base=0, k_step=0):
    return ldmatrix_kernel.trace(tylo.u32, elements, base, k_step, block=32, target="sm_90a")


def test_ldmatrix_inside_the_allocation_traces():
    trace_ldmatrix()
    trace_ldmatrix(elements=520, base=8)


@pytest.mark.parametrize("elements,base", [(511, 0), (512, 8), (4096, -8)])
def test_ldmatrix_past_the_allocation_is_refused(elements, base):
    with pytest.raises(tylo.TyloError, match=rf"TileBoundsError: ldmatrix .*holds {elements}"):
        trace_ldmatrix(elements, base)


@pytest.mark.parametrize("k_step", [2, -1, True, 1.0])
def test_ldmatrix_k_step_out_of_range_is_refused(k_step):
    with pytest.raises(tylo.TyloError, match=r"k_step must be an int in \[0, 2\)"):
        trace_ldmatrix(k_step=k_step)


# ------------------------------------------------------------------ stmatrix


@tylo.kernel
def stmatrix_kernel(out, origin: tylo.Static, elements: tylo.Static):
    from tylo.layouts.tv import wgmma_m64_c_tv
    from tylo.tile.ownership import Ownership

    own = Ownership(wgmma_m64_c_tv(16), (64, 16))
    tid = tylo.thread_idx.x
    tile = SharedTile(tylo.shared(tylo.bf16, elements, align=16), Layout((128, 16), (16, 1)))
    store_fragment(zeros(own), tile.window(origin, (64, 16)), tid)
    out[tid] = tile.storage[tid]


def test_stmatrix_inside_traces():
    stmatrix_kernel.trace(tylo.bf16, (64, 0), 2048, block=128, target="sm_90a")


def test_stmatrix_window_past_its_layout_is_refused():
    with pytest.raises(
        tylo.TyloError, match=r"TileBoundsError: stmatrix .*origin 72 .*\(128, 16\)"
    ):
        stmatrix_kernel.trace(tylo.bf16, (72, 0), 4096, block=128, target="sm_90a")


def test_stmatrix_past_the_allocation_is_refused():
    with pytest.raises(tylo.TyloError, match=r"TileBoundsError: stmatrix .*holds 1536"):
        stmatrix_kernel.trace(tylo.bf16, (64, 0), 1536, block=128, target="sm_90a")


# ------------------------------------------------------------------ cp.async


@tylo.kernel
def copy_kernel(src: tylo.Ptr(align=16), elements: tylo.Static, base: tylo.Static):
    layout = Layout((16, 64), (64, 1))
    plan = CopyPlan((16, 64), tylo.bf16, 128, layout)
    dst = SharedTile(tylo.shared(tylo.bf16, elements, align=16), layout, base=base)
    copy_async(plan, GlobalTile(src, layout), dst, tylo.thread_idx.x)


def trace_copy(elements, base=0):
    spec = tylo.pointer(tylo.bf16, align=16)
    return copy_kernel.trace(spec, elements, base, block=128, target="sm_90a")


def test_cp_async_destination_inside_traces():
    trace_copy(1024)
    trace_copy(1032, 8)


@pytest.mark.parametrize("elements,base", [(1023, 0), (1024, 8)])
def test_cp_async_destination_past_the_allocation_is_refused(elements, base):
    with pytest.raises(tylo.TyloError, match=rf"TileBoundsError: cp\.async .*holds {elements}"):
        trace_copy(elements, base)


# ------------------------------------------------------------------ TMA


M, K = tylo.layouts.dim("M"), tylo.layouts.dim("K")
LD = tylo.layouts.dim("ld", multiple_of=8)
BOX = tma.TensorMapPlan(
    tylo.bf16,
    Layout((M, K), (LD, 1)),
    (16, 64),
    "128B",
    composition(SW128, Layout((16, 64), (64, 1))),
)


@tylo.kernel
def tma_kernel(out, tm, elements: tylo.Static, base: tylo.Static, store: tylo.Static):
    plan = tm.plan
    tile = SharedTile(tylo.shared(plan.dtype, elements, align=1024), plan.smem_layout, base=base)
    if tylo.thread_idx.x == 0:
        if store:
            tma.store(tm, tile, (0, 0))
        else:
            bars = Barriers(1)
            tma.load(tm, tile, (0, 0), bars, 0)


def trace_tma(elements, base=0, store=False):
    return tma_kernel.trace(tylo.f32, BOX, elements, base, store, block=128, target="sm_90a")


@pytest.mark.parametrize("store", [False, True])
def test_tma_box_inside_traces(store):
    trace_tma(1024, store=store)
    trace_tma(2048, 512, store=store)


@pytest.mark.parametrize("store", [False, True])
@pytest.mark.parametrize("elements,base", [(1023, 0), (1535, 512), (4096, -512)])
def test_tma_box_past_the_allocation_is_refused(store, elements, base):
    op = "tma.store" if store else "tma.load"
    with pytest.raises(tylo.TyloError, match=rf"TileBoundsError: {op} .*holds {elements}"):
        trace_tma(elements, base, store)
