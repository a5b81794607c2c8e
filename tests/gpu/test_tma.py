# TEST_TARGET: cc>=9.0a
"""TMA alone: a tensor map encoded on the host, passed by value (grid_constant), one box
loaded into a (swizzled) shared tile with its bytes completing on an mbarrier, and a box
stored back. The loaded tile is read through the plan's shared layout and compared with
numpy, including boxes that hang over every edge (TMA fills zeros there); the store is
compared with a poisoned destination whose elements outside the box (and outside the
tensor) must stay untouched."""

from __future__ import annotations

import numpy as np
import pytest

import tylo
from tylo.layouts import Layout, dim
from tylo.nvgpu import tma
from tylo.nvgpu.mbarrier import Barriers
from tylo.nvgpu.warpgroup.mma import fence_shared_to_async
from tylo.tile.views import SharedTile

Coord = tylo.Int(min=0, max=2**20)
Inner = tylo.Int(min=0, max=2**20, multiple_of=8)  # 16 bytes of any dtype here
M, K, LD = dim("M"), dim("K"), dim("ld", multiple_of=8)

PLANS = {
    "bf16 128B 16x64": (tylo.bf16, (16, 64), "128B"),
    "bf16 64B 8x32": (tylo.bf16, (8, 32), "64B"),
    "f32 none 8x8": (tylo.f32, (8, 8), "none"),
    "f16 32B 32x16": (tylo.f16, (32, 16), "32B"),
}


INTERPRET_SKIP = (  # the interpreter tier (tests/interp_tier.py)
    "sm_90a kernels (wgmma, TMA, mbarrier, setmaxnreg, clusters): the interpreter refuses "
    "these instructions by name (UnsupportedOperation; docs/interpret.md)"
)


def plan_for(name):
    dtype, box, swizzle = PLANS[name]
    probe = tma.TensorMapPlan(dtype, Layout((M, K), (LD, 1)), box, "none", Layout(box, (box[1], 1)))
    smem = probe.box_layout() if swizzle == "none" else None
    if smem is None:
        from tylo.layouts import ComposedLayout, Swizzle

        bits = {"32B": 1, "64B": 2, "128B": 3}[swizzle]
        smem = ComposedLayout(
            Swizzle(bits, 4 - (dtype.nbytes.bit_length() - 1), 3), 0, Layout(box, (box[1], 1))
        )
    return tma.TensorMapPlan(dtype, Layout((M, K), (LD, 1)), box, swizzle, smem)


@tylo.kernel
def tma_load_box(out, tm, r0: Coord, c0: Inner):
    plan = tm.plan
    rows, cols = plan.box
    tile = SharedTile(tylo.shared(plan.dtype, rows * cols, align=1024), plan.smem_layout)
    bars = Barriers(1)
    tid = tylo.thread_idx.x
    if tid == 0:
        bars.init(0, 1)
    tylo.sync_threads()
    if tid == 0:
        bars.arrive_expect_tx(0, plan.box_bytes)
        tma.load(tm, tile, (r0, c0), bars, 0)
    bars.wait(0, 0)
    for j in range(-(-rows * cols // 128)):
        e = tid + 128 * j
        if e < rows * cols:
            out[e] = tile.storage[tile.offset((e // cols, e % cols))]


@tylo.kernel
def tma_store_box(src, tm, r0: Coord, c0: Inner):
    plan = tm.plan
    rows, cols = plan.box
    tile = SharedTile(tylo.shared(plan.dtype, rows * cols, align=1024), plan.smem_layout)
    tid = tylo.thread_idx.x
    for j in range(-(-rows * cols // 128)):
        e = tid + 128 * j
        if e < rows * cols:
            tile.storage[tile.offset((e // cols, e % cols))] = src[e]
    fence_shared_to_async()
    tylo.sync_threads()
    if tid == 0:
        tma.store(tm, tile, (r0, c0))
        tma.commit_stores()
        tma.wait_stores(0)


@pytest.mark.parametrize("name", sorted(PLANS))
def test_assembly(name):
    plan = plan_for(name)
    dtype = plan.dtype
    k = tma_load_box.compile(dtype, plan, Coord, Inner, block=128, target="sm_90a")
    assert ".param .align 64 .b8" in k.ptx and "cp.async.bulk.tensor.2d" in k.ptx
    assert "UTMALDG.2D" in k.sass and "SYNCS" in k.sass
    k = tma_store_box.compile(dtype, plan, Coord, Inner, block=128, target="sm_90a")
    assert "UTMASTG.2D" in k.sass
    for op in ("LDL", "STL"):
        assert op not in k.sass


def test_a_tile_that_is_not_the_box_is_refused():
    @tylo.kernel
    def wrong(out, tm):
        plan = tm.plan
        tile = SharedTile(tylo.shared(plan.dtype, 64 * 64, align=1024), Layout((64, 64), (64, 1)))
        tma.load(tm, tile, (0, 0), Barriers(1), 0)

    with pytest.raises(tylo.TyloError, match="not the box"):
        wrong.compile(tylo.bf16, plan_for("bf16 128B 16x64"), block=128, target="sm_90a")


@tylo.kernel
def load_anywhere(tm, r0: Coord, c0: Coord):
    plan = tm.plan
    tile = SharedTile(tylo.shared(plan.dtype, 16 * 64, align=1024), plan.smem_layout)
    tma.load(tm, tile, (r0, c0), Barriers(1), 0)


def test_an_unaligned_inner_coordinate_is_refused():
    plan = plan_for("bf16 128B 16x64")
    with pytest.raises(tylo.TyloError, match="multiple of 8"):
        load_anywhere.compile(plan, Coord, Coord, block=128, target="sm_90a")


def test_views_not_ending_on_16_bytes_are_refused(gpu_runtime):
    import torch

    plan = plan_for("bf16 128B 16x64")
    a = torch.zeros(37, 104, dtype=torch.bfloat16, device="cuda")
    with pytest.raises(tma.TMAError, match="multiple of 16 bytes"):
        tma.TensorMap(plan, a[:, :100])


def _torch_dtype(d):
    import torch

    return {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[d.name]


@pytest.mark.parametrize("name", sorted(PLANS))
@pytest.mark.parametrize("where", ["inside", "bottom-right", "outside"])
def test_load_matches_numpy(gpu_runtime, name, where):
    import torch

    plan = plan_for(name)
    rows, cols = plan.box
    m, k, ld = 37, 100 + (-100 % 8), 104  # ld: a 16-byte multiple for every dtype here
    a = torch.randn(m, ld, device="cuda").to(_torch_dtype(plan.dtype))
    view = a[:, :k]
    r0, c0 = {
        "inside": (3, 8),
        "bottom-right": (m - 5, k - 8),
        "outside": (m + 2, 0),
    }[where]
    out = torch.full((rows * cols,), float("nan"), device="cuda").to(a.dtype)
    tma_load_box[1, 128](out, tma.TensorMap(plan, view), r0, c0)
    torch.cuda.synchronize()
    want = np.zeros((rows, cols), np.float64)
    host = view.float().cpu().numpy()
    for r in range(rows):
        for c in range(cols):
            if 0 <= r0 + r < m and 0 <= c0 + c < k:
                want[r, c] = host[r0 + r, c0 + c]
    np.testing.assert_array_equal(out.float().cpu().numpy().reshape(rows, cols), want)


@pytest.mark.parametrize("name", sorted(PLANS))
@pytest.mark.parametrize("where", ["inside", "bottom-right"])
def test_store_writes_exactly_the_box(gpu_runtime, name, where):
    import torch

    plan = plan_for(name)
    rows, cols = plan.box
    m, k, ld = 37, 96, 104  # the view ends on a 16-byte boundary (encode requires it)
    dst = torch.full((m, ld), -7.0, device="cuda").to(_torch_dtype(plan.dtype))
    src = torch.randn(rows * cols, device="cuda").to(dst.dtype)
    r0, c0 = (3, 8) if where == "inside" else (m - 5, k - 8)
    tma_store_box[1, 128](src, tma.TensorMap(plan, dst[:, :k]), r0, c0)
    torch.cuda.synchronize()
    want = np.full((m, ld), -7.0)
    box = src.float().cpu().numpy().reshape(rows, cols)
    for r in range(rows):
        for c in range(cols):
            if r0 + r < m and c0 + c < k:
                want[r0 + r, c0 + c] = box[r, c]
    np.testing.assert_array_equal(dst.float().cpu().numpy(), want)


@pytest.mark.parametrize("name", ["f32 none 8x8", "bf16 128B 16x64"])
def test_repeated_launches_load_each_calls_map(gpu_runtime, name, monkeypatch):
    """Launches with tensor maps take the fast paths after the first checked one (Hot.slow
    at most once here), and each launch passes the map given on that call: eight launches
    back to back, maps of four arrays alternating, synchronized only at the end (the driver copies
    the parameters at the launch call),
    each output compared with its own array's box."""
    import torch

    from tylo.kernel import fastpath

    slow_calls = []
    slow = fastpath.Hot.slow
    monkeypatch.setattr(
        fastpath.Hot, "slow", lambda self, *a: slow_calls.append(1) or slow(self, *a)
    )
    plan = plan_for(name)
    rows, cols = plan.box
    m, k = 37, 96
    dtype = _torch_dtype(plan.dtype)
    arrays = [torch.randn(m, k, device="cuda").to(dtype) for _ in range(4)]
    maps = [tma.TensorMap(plan, a) for a in arrays]
    launcher = tma_load_box[1, 128]
    launcher(torch.empty(rows * cols, device="cuda").to(dtype), maps[0], 0, 0)  # warm
    order = [0, 1, 2, 3, 1, 0, 3, 2]
    coords = [(i % 5, 8 * (i % 3)) for i in range(len(order))]
    outs = [torch.full((rows * cols,), float("nan"), device="cuda").to(dtype) for _ in order]
    for out, i, (r0, c0) in zip(outs, order, coords):
        launcher(out, maps[i], r0, c0)
    torch.cuda.synchronize()
    assert len(slow_calls) <= 1 and launcher.inline is not None
    if fastpath.ACCELERATED:  # torch tensors: wrapped to pass torch's current stream
        inner = getattr(launcher.inline, "__wrapped__", launcher.inline)
        assert type(inner).__name__ == "InlineLaunch"
    for out, i, (r0, c0) in zip(outs, order, coords):
        want = arrays[i].float().cpu().numpy()[r0 : r0 + rows, c0 : c0 + cols]
        np.testing.assert_array_equal(out.float().cpu().numpy().reshape(rows, cols), want)
