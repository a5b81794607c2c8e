# TEST_TARGET: cc>=9.0a
"""Thread-block clusters on the device: launches whose CTAs report their cluster numbering
(checked against the CUDA C++ Programming Guide's formulas), the cluster barrier with
distributed shared memory, remote mbarrier arrives in both directions over several phases,
TMA multicast into the CTAs of a mask (compared with numpy, edges zero-filled), and a
non-portable 16-CTA cluster. Outputs are poisoned first; every CTA writes its own slice."""

from __future__ import annotations

import numpy as np
import pytest

import tylo
from tylo.layouts import Layout, dim
from tylo.nvgpu import cluster as cl
from tylo.nvgpu import tma
from tylo.nvgpu.mbarrier import Barriers, fence_barrier_init
from tylo.tile.views import SharedTile

FIELDS = 8  # per CTA: rank, nctarank, cluster_idx x/y, cluster_cta_idx x/y, block x/y


INTERPRET_SKIP = (  # the interpreter tier (tests/interp_tier.py)
    "thread-block clusters, distributed shared memory and mbarriers: the interpreter refuses "
    "them by name (UnsupportedOperation; docs/interpret.md)"
)


@tylo.kernel
def numbering(out):
    if tylo.thread_idx.x == 0:
        b = tylo.block_idx.x + tylo.grid_dim.x * tylo.block_idx.y
        values = (
            cl.cluster_ctarank(),
            cl.cluster_nctarank(),
            cl.cluster_idx.x,
            cl.cluster_idx.y,
            cl.cluster_cta_idx.x,
            cl.cluster_cta_idx.y,
            tylo.block_idx.x,
            tylo.block_idx.y,
        )
        for k, v in enumerate(values):
            out[b * FIELDS + k] = tylo.value(v, tylo.i32)


def expected_numbering(grid, cluster):
    """The CUDA C++ Programming Guide's numbering, per CTA (x fastest)."""
    gx, gy = grid
    cx, cy = cluster
    rows = []
    for by in range(gy):
        for bx in range(gx):
            tx, ty = bx % cx, by % cy
            rows.append([tx + cx * ty, cx * cy, bx // cx, by // cy, tx, ty, bx, by])
    return np.array(rows, np.int32)


@pytest.mark.parametrize(
    "grid,cluster", [((8, 1), (2, 1)), ((8, 3), (4, 1)), ((4, 4), (2, 2)), ((6, 2), (1, 2))]
)
def test_cluster_numbering(gpu_runtime, grid, cluster):
    import torch

    out = torch.full((grid[0] * grid[1] * FIELDS,), -1, dtype=torch.int32, device="cuda")
    numbering[grid, 32, cluster](out)
    torch.cuda.synchronize()
    got = out.cpu().numpy().reshape(-1, FIELDS)
    np.testing.assert_array_equal(got, expected_numbering(grid, cluster))


def test_non_portable_cluster_of_16(gpu_runtime):
    import torch

    grid = (32, 1)
    out = torch.full((32 * FIELDS,), -1, dtype=torch.int32, device="cuda")
    numbering[grid, 32, (16, 1, 1)](out)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(
        out.cpu().numpy().reshape(-1, FIELDS), expected_numbering(grid, (16, 1))
    )


def test_shape_in_ptx_with_the_launch_attribute(gpu_runtime, monkeypatch):
    """Whether the driver launches a kernel whose PTX states its cluster shape
    (.reqnctapercluster, tylo.kernel.clusters.SHAPE_IN_PTX) with the same shape as a launch
    attribute, as tylo's launches always pass it. If this passes on the device, SHAPE_IN_PTX
    may be turned on."""
    import torch

    from tylo.kernel import clusters

    monkeypatch.setattr(clusters, "SHAPE_IN_PTX", True)
    numbering_in_ptx = tylo.kernel(numbering.fn)  # its own specializations (and cache key)
    grid = (8, 2)
    out = torch.full((16 * FIELDS,), -1, dtype=torch.int32, device="cuda")
    launcher = numbering_in_ptx[grid, 32, (2, 2)]
    launcher(out)
    launcher(out)  # the fast path too
    torch.cuda.synchronize()
    hot = next(iter(numbering_in_ptx.cache.values()))
    assert ".reqnctapercluster 2, 2, 1" in hot.entry.ptx
    np.testing.assert_array_equal(
        out.cpu().numpy().reshape(-1, FIELDS), expected_numbering(grid, (2, 2))
    )


# ---------------------------------------------------------------------------- barrier + DSMEM


@tylo.kernel
def neighbours(out, write_remote: tylo.Static):
    """Every CTA fills a shared buffer (its own, or its right neighbour's through
    st.shared::cluster), meets the cluster, and copies what its buffer (or its left
    neighbour's, through ld.shared::cluster) holds."""
    buf = tylo.shared(tylo.f32, 64)
    t = tylo.thread_idx.x
    r = cl.cluster_ctarank()
    n = cl.cluster_nctarank()
    mine = tylo.value(r * 1000 + t, tylo.f32)
    if write_remote:
        cl.map_shared(buf, (r + 1) % n)[t] = mine
    else:
        buf[t] = mine
    cl.cluster_sync()
    if write_remote:
        got = buf[t]
    else:
        got = cl.map_shared(buf, (r + n - 1) % n)[t]
    out[tylo.block_idx.x * 64 + t] = got
    cl.cluster_sync()  # no CTA exits while a peer may still read its shared memory


@pytest.mark.parametrize("size", [2, 4])
@pytest.mark.parametrize("write_remote", [False, True])
def test_cluster_barrier_and_distributed_shared(gpu_runtime, size, write_remote):
    import torch

    blocks = 4 * size
    out = torch.full((blocks * 64,), float("nan"), device="cuda")
    neighbours[blocks, 64, size](out, write_remote)
    torch.cuda.synchronize()
    got = out.cpu().numpy().reshape(blocks, 64)
    for b in range(blocks):
        left = (b % size + size - 1) % size
        np.testing.assert_array_equal(got[b], left * 1000 + np.arange(64, dtype=np.float32))


# ---------------------------------------------------------------------------- remote arrives

ROUNDS = 3


@tylo.kernel
def ping_pong(out):
    """CTA 1 writes 32 values into CTA 0's shared memory and each thread arrives on CTA 0's
    'full' barrier (remote, release.cluster); CTA 0 waits (acquire.cluster), copies them
    out and each thread arrives on CTA 1's 'empty' barrier; ROUNDS rounds, so both barriers
    go through several phases."""
    buf = tylo.shared(tylo.f32, 32)
    bars = Barriers(2)  # 0: full (in CTA 0), 1: empty (in CTA 1)
    t = tylo.thread_idx.x
    r = cl.cluster_ctarank()
    if t == 0:
        bars.init(0, 32)
        bars.init(1, 32)
        fence_barrier_init()
    cl.cluster_sync()
    for k in tylo.range(ROUNDS):
        if r == 1:
            if k > 0:
                bars.wait(1, (k - 1) % 2, scope="cluster")
            cl.map_shared(buf, 0)[t] = tylo.value(k * 100 + t, tylo.f32)
            bars.arrive(0, cta=0)
        if r == 0:
            bars.wait(0, k % 2, scope="cluster")
            out[(tylo.block_idx.x // 2) * ROUNDS * 32 + k * 32 + t] = buf[t]
            bars.arrive(1, cta=1)
    cl.cluster_sync()


def test_remote_arrives(gpu_runtime):
    import torch

    clusters = 3
    out = torch.full((clusters * ROUNDS * 32,), float("nan"), device="cuda")
    ping_pong[2 * clusters, 32, 2](out)
    torch.cuda.synchronize()
    want = np.tile(
        (100 * np.arange(ROUNDS)[:, None] + np.arange(32)[None, :]).astype(np.float32).ravel(),
        clusters,
    )
    np.testing.assert_array_equal(out.cpu().numpy(), want)


# ---------------------------------------------------------------------------- TMA multicast

M, K, LD = dim("M"), dim("K"), dim("ld", multiple_of=8)
BOX = (8, 16)
PLAN = tma.TensorMapPlan(tylo.f32, Layout((M, K), (LD, 1)), BOX, "none", Layout(BOX, (16, 1)))
Coord = tylo.Int(min=0, max=2**20)
Inner = tylo.Int(min=0, max=2**20, multiple_of=4)


@tylo.kernel
def multicast_box(out, tm, r0: Coord, c0: Inner, mask: tylo.Static):
    """CTA 0 of each cluster loads one box with multicast to the CTAs of ``mask``; each of
    them armed its own barrier for the box's bytes and copies its tile out; the others copy
    nothing (their output stays poisoned)."""
    rows, cols = BOX
    tile = SharedTile(tylo.shared(tylo.f32, rows * cols, align=128), PLAN.smem_layout)
    bars = Barriers(1)
    t = tylo.thread_idx.x
    r = cl.cluster_ctarank()
    receives = ((tylo.value(mask, tylo.i32) >> tylo.value(r, tylo.i32)) & 1) == 1
    if t == 0:
        bars.init(0, 1)
        fence_barrier_init()
    cl.cluster_sync()
    if t == 0 and receives:
        bars.arrive_expect_tx(0, PLAN.box_bytes)
    if t == 0 and r == 0:
        tma.load(tm, tile, (r0, c0), bars, 0, multicast=mask)
    if receives:
        bars.wait(0, 0)
        out[tylo.block_idx.x * rows * cols + t] = tile.storage[t]
    cl.cluster_sync()


@pytest.mark.parametrize("size,mask", [(2, 0b11), (2, 0b10), (4, 0b1111), (4, 0b1010), (4, 0b0110)])
@pytest.mark.parametrize("where", ["inside", "bottom-right"])
def test_multicast_matches_numpy(gpu_runtime, size, mask, where):
    import torch

    m, k, ld = 37, 100, 104
    a = torch.randn(m, ld, device="cuda")
    view = a[:, :k]
    r0, c0 = (3, 8) if where == "inside" else (m - 5, k - 4)
    blocks = 2 * size
    n = BOX[0] * BOX[1]
    out = torch.full((blocks * n,), float("nan"), device="cuda")
    multicast_box[blocks, n, size](out, tma.TensorMap(PLAN, view), r0, c0, mask)
    torch.cuda.synchronize()
    host = view.cpu().numpy()
    box = np.zeros(BOX, np.float32)
    for i in range(BOX[0]):
        for j in range(BOX[1]):
            if r0 + i < m and c0 + j < k:
                box[i, j] = host[r0 + i, c0 + j]
    got = out.cpu().numpy().reshape(blocks, *BOX)
    for b in range(blocks):
        if mask >> (b % size) & 1:
            np.testing.assert_array_equal(got[b], box)
        else:
            assert np.isnan(got[b]).all()


@tylo.kernel
def multicast_ring(out, tm, chunks, stages: tylo.Static):
    """A 2-CTA multicast pipeline, the GEMM's pattern: each CTA's thread 0 waits until the
    stage is free in *both* CTAs (its empty barrier counts the consumer warps of both, which
    release it remotely), arms its own full barrier, and CTA 0 multicasts the chunk into
    both; each CTA's consumer warp copies every chunk out. With more chunks than stages
    every barrier goes through several phases."""
    rows, cols = BOX
    n = rows * cols
    buf = tylo.shared(tylo.f32, stages * n, align=128)
    full = Barriers(stages)
    empty = Barriers(stages)
    t = tylo.thread_idx.x
    r = cl.cluster_ctarank()
    if t == 0:
        for s in range(stages):
            full.init(s, 1)
            empty.init(s, 64)
        fence_barrier_init()
    cl.cluster_sync()
    if t == 0:
        for it in tylo.range(chunks):
            s = it % stages
            empty.wait(s, 1 - (it // stages) % 2, scope="cluster")
            full.arrive_expect_tx(s, PLAN.box_bytes)
            if r == 0:
                tile = SharedTile(buf, PLAN.smem_layout, base=s * n)
                tma.load(tm, tile, (it * rows, 0), full, s, multicast=0b11)
    if t >= 32:
        lane = t - 32
        for it in tylo.range(chunks):
            s = it % stages
            full.wait(s, (it // stages) % 2)
            for j in range(n // 32):
                e = lane + 32 * j
                out[(tylo.block_idx.x * chunks + it) * n + e] = buf[s * n + e]
            empty.arrive(s, cta=0)
            empty.arrive(s, cta=1)
    cl.cluster_sync()


@pytest.mark.parametrize("stages,chunks", [(1, 3), (2, 7), (3, 16)])
def test_multicast_pipeline(gpu_runtime, stages, chunks):
    import torch

    src = torch.randn(chunks * BOX[0], BOX[1], device="cuda")
    clusters = 2
    out = torch.full((2 * clusters * chunks * BOX[0] * BOX[1],), float("nan"), device="cuda")
    multicast_ring[2 * clusters, 64, 2](out, tma.TensorMap(PLAN, src), chunks, stages)
    torch.cuda.synchronize()
    got = out.cpu().numpy().reshape(2 * clusters, -1)
    for b in range(2 * clusters):
        np.testing.assert_array_equal(got[b], src.cpu().numpy().ravel())


def test_every_kernel_compiles_for_sm90a():
    """The compile-only half (no GPU): each kernel above, for one of its configurations."""
    numbering.compile(tylo.i32, block=32, cluster=(2, 2), target="sm_90a")
    neighbours.compile(tylo.f32, True, block=64, cluster=4, target="sm_90a")
    neighbours.compile(tylo.f32, False, block=64, cluster=2, target="sm_90a")
    k = ping_pong.compile(tylo.f32, block=32, cluster=2, target="sm_90a")
    assert k.ptx.count("mbarrier.arrive.release.cluster.shared::cluster.b64") >= 2
    k = multicast_box.compile(tylo.f32, PLAN, Coord, Inner, 0b1010, block=128, cluster=4)
    assert "UTMALDG.2D.MULTICAST" in k.sass
    k = multicast_ring.compile(tylo.f32, PLAN, int, 3, block=64, cluster=2)
    from tylo.kernel import clusters

    clusters.SHAPE_IN_PTX, saved = True, clusters.SHAPE_IN_PTX
    try:
        k2 = tylo.kernel(numbering.fn).compile(tylo.i32, block=32, cluster=(2, 2))
    finally:
        clusters.SHAPE_IN_PTX = saved
    assert ".reqnctapercluster 2, 2, 1" in k2.ptx
    assert "UTMALDG.2D.MULTICAST" in k.sass and "LDL" not in k.sass
