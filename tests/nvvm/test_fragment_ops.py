"""Fragments inside kernels, compiled for sm_80 and sm_90a without a GPU: elementwise math,
reductions by ownership (butterfly shuffles within a warp, shared memory across warps),
broadcast of reduced rows, packing to bf16 pairs, and ``ptx`` over fragments."""

from __future__ import annotations

import re

import pytest

import tylo
from tylo.layouts import Layout
from tylo.layouts.tv import MMA_M16N8K16_C_TV
from tylo.nvgpu.warp.mma import MMAAtom, TiledMMA
from tylo.tile.access import GlobalTile, SharedTile, load, store
from tylo.tile.fragment import Fragment
from tylo.tile.ownership import Ownership
from tylo.tile.reduce import reduction_plan, reduction_scratch

C = Ownership(MMA_M16N8K16_C_TV, (16, 8))
PLAN = TiledMMA(MMAAtom((16, 8, 16), tylo.bf16), warps=(2, 2), repeat=(2, 4), k=32)


def _count(sass: str, opcode: str) -> int:
    return len(re.findall(rf"\b{re.escape(opcode)}\b", sass))


# --8<-- [start:softmax]
@tylo.kernel
def row_softmax_c(out, x, own: tylo.Static):
    tid = tylo.thread_idx.x
    f = load(GlobalTile(x, Layout(own.shape, (1, own.shape[0]))), own, tid)
    e = tylo.exp(f - f.max(axis=1))
    store(None, GlobalTile(out, Layout(own.shape, (1, own.shape[0]))), e / e.sum(axis=1), tid)


# --8<-- [end:softmax]


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
def test_warp_reduction_is_two_butterflies_per_row(target):
    k = row_softmax_c.compile(tylo.f32, tylo.f32, C, block=32, target=target)
    sass = k.module.sass_for(k.entry)
    # two row slots per thread, two reductions, two shuffles each
    assert _count(sass, "SHFL.BFLY") == 8
    assert "LDL" not in sass and "STL" not in sass
    assert "BAR.SYNC" not in sass


# --8<-- [start:across_warps]
@tylo.kernel
def acc_row_sums(out, x, plan: tylo.Static):
    tid = tylo.thread_idx.x
    own = plan.acc_ownership
    f = load(GlobalTile(x, Layout(own.shape, (1, own.shape[0]))), own, tid)
    scratch = tylo.shared(tylo.f32, reduction_plan(own, 1).scratch_elements)
    s = f.sum(axis=1, scratch=scratch)
    store(None, GlobalTile(out, Layout(own.shape, (1, own.shape[0]))), f / s, tid)


# --8<-- [end:across_warps]


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
def test_cross_warp_reduction_goes_through_shared_memory(target):
    k = acc_row_sums.compile(tylo.f32, tylo.f32, PLAN, block=128, target=target)
    sass = k.module.sass_for(k.entry)
    plan = reduction_plan(PLAN.acc_ownership, 1)
    rows = plan.result.values  # rows per thread
    # the quad's 2 butterflies, then one shared partial per row and warp, one load per
    # lane, and 1 butterfly over the 2 warps' partials
    assert plan.exchange_masks == (1,) and plan.partials_per_lane == 1
    assert _count(sass, "SHFL.BFLY") == rows * (2 + 1)
    assert _count(sass, "STS") == rows and _count(sass, "LDS") == rows
    assert len(re.findall(r"\bBAR\.SYNC", sass)) == 2  # leading (sync=True) and between
    assert "LDL" not in sass and "STL" not in sass


WIDE = Ownership.from_modes((2, 4096), [(512, 1, 8), (2, 0, 1)], [(8, 1, 1)])  # 16 warps/row


# --8<-- [start:two_scratch]
@tylo.kernel
def wide_rows(out, x, own: tylo.Static, sync: tylo.Static):
    tid = tylo.thread_idx.x
    tile = GlobalTile(x, Layout(own.shape, (own.shape[1], 1)))
    f = load(tile, own, tid)
    # one scratch per reduction, used in turn: each one's own barrier protects the other
    m = f.max(axis=1, scratch=reduction_scratch(own, 1, tylo.f32, name="a"), sync=sync)
    e = tylo.exp(f - m)
    s = e.sum(axis=1, scratch=reduction_scratch(own, 1, tylo.f32, name="b"), sync=sync)
    store(None, GlobalTile(out, Layout(own.shape, (own.shape[1], 1))), e / s, tid)


# --8<-- [end:two_scratch]


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("sync", [False, True])
def test_rows_over_many_warps_take_one_shared_load_per_reduction(target, sync):
    """16 warps share each row: 5 butterflies within the warp, one partial per warp, one
    barrier, one shared load per lane, log2(16) = 4 butterflies over the partials; with
    two scratch arrays used alternately no leading barrier is needed (sync=False)."""
    k = wide_rows.compile(tylo.f32, tylo.f32, WIDE, sync, block=1024, target=target)
    sass = k.module.sass_for(k.entry)
    assert reduction_plan(WIDE, 1).exchange_masks == (1, 2, 4, 8)
    assert _count(sass, "SHFL.BFLY") == 2 * (5 + 4)
    assert _count(sass, "STS") == 2 and _count(sass, "LDS") == 2
    assert len(re.findall(r"\bBAR\.SYNC", sass)) == (4 if sync else 2)
    assert "LDL" not in sass and "STL" not in sass


@tylo.kernel
def pack_and_ptx(out, x):
    tid = tylo.thread_idx.x
    f = load(GlobalTile(x, Layout((16, 8), (1, 16))), C, tid)
    g = f.ptx("tanh.approx.f32")
    packed = g.pack(tylo.bf16)
    for i in range(len(packed)):
        out[tid * len(packed) + i] = packed[i]
    h = tylo.maximum(g, 0.0) * 2.0 + tylo.shfl_xor(g, 1)
    store(None, GlobalTile(x, Layout((16, 8), (1, 16))), h, tid)


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
def test_pack_and_ptx_over_fragments(target):
    k = pack_and_ptx.compile(tylo.u32, tylo.f32, block=32, target=target)
    assert k.ptx.count("tanh.approx.f32") == 4
    assert k.ptx.count("cvt.rn.bf16x2.f32") == 2
    sass = k.module.sass_for(k.entry)
    assert "MUFU.TANH" in sass and "F2FP.BF16" in sass and "SHFL.BFLY" in sass


def test_fragment_ops_trace_errors():
    @tylo.kernel
    def bad(out, x):
        tid = tylo.thread_idx.x
        f = load(GlobalTile(x, Layout((64, 64), (1, 64))), PLAN.acc_ownership, tid)
        s = f.sum(axis=1)  # crosses warps: needs scratch
        store(None, GlobalTile(out, Layout((64, 64), (1, 64))), s + f, tid)

    with pytest.raises(tylo.TraceError, match="scratch"):
        bad.compile(tylo.f32, tylo.f32, block=128, target="sm_90a")
    assert isinstance(Fragment, type)


@tylo.kernel
def bad_scratch(out, x, kind: tylo.Static):
    tid = tylo.thread_idx.x
    own = PLAN.acc_ownership
    f = load(GlobalTile(x, Layout((64, 64), (1, 64))), own, tid)
    need = reduction_plan(own, 1).scratch_elements
    if kind == "dtype":
        scratch = tylo.shared(tylo.bf16, need)
    elif kind == "global":
        scratch = out
    else:  # a tile that holds fewer elements than the recipe writes
        scratch = SharedTile(tylo.shared(tylo.f32, need), Layout(need // 2))
    s = f.sum(axis=1, scratch=scratch)
    store(None, GlobalTile(out, Layout((64, 64), (1, 64))), s + f, tid)


@pytest.mark.parametrize(
    "kind,match",
    [
        ("dtype", "holds bf16 elements, but the partials are f32"),
        ("global", "scratch must be shared memory"),
        ("small", "has 64 elements, the recipe needs 128"),
    ],
)
def test_bad_scratch_is_a_typed_error(kind, match):
    with pytest.raises(tylo.TraceError, match=match):
        bad_scratch.compile(tylo.f32, tylo.f32, kind, block=128, target="sm_90a")
