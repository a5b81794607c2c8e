# TEST_TARGET: cc>=8.0
"""Fragments and reductions on the GPU against numpy: a row softmax over the MMA
accumulator layout (rows over a quad of lanes: butterfly shuffles), row sums of a tiled
accumulator across warps (shared-memory recipe), column maxima, and bf16 packing."""

from __future__ import annotations

import numpy as np
import pytest

import tylo
from tylo.layouts import Layout
from tylo.layouts.tv import MMA_M16N8K16_C_TV
from tylo.nvgpu.warp.mma import MMAAtom, TiledMMA
from tylo.tile.access import GlobalTile, load, store
from tylo.tile.ownership import Ownership
from tylo.tile.reduce import reduction_plan, reduction_scratch

C = Ownership(MMA_M16N8K16_C_TV, (16, 8))
PLAN = TiledMMA(MMAAtom((16, 8, 16), tylo.bf16), warps=(2, 2), repeat=(2, 4), k=32)


pytestmark = pytest.mark.interpret  # every runtime test here runs in the interpreter tier


def _colmajor(t, shape):
    return GlobalTile(t, Layout(shape, (1, shape[0])))


@tylo.kernel
def softmax_rows(out, x, own: tylo.Static):
    tid = tylo.thread_idx.x
    f = load(_colmajor(x, own.shape), own, tid)
    scratch = tylo.shared(tylo.f32, max(1, reduction_plan(own, 1).scratch_elements))
    e = tylo.exp(f - f.max(axis=1, scratch=scratch))
    store(None, _colmajor(out, own.shape), e / e.sum(axis=1, scratch=scratch), tid)


@tylo.kernel
def column_max(out, x, own: tylo.Static):
    tid = tylo.thread_idx.x
    f = load(_colmajor(x, own.shape), own, tid)
    scratch = tylo.shared(tylo.f32, max(1, reduction_plan(own, 0).scratch_elements))
    store(None, _colmajor(out, own.shape), f * 0.0 + f.max(axis=0, scratch=scratch), tid)


@tylo.kernel
def packed(out, x):
    tid = tylo.thread_idx.x
    f = load(_colmajor(x, (16, 8)), C, tid)
    p = (f * 2.0).pack(tylo.bf16)
    for i in range(len(p)):
        out[tid * len(p) + i] = p[i]


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
def test_assembly(target):
    for own, block in ((C, 32), (PLAN.acc_ownership, 128)):
        k = softmax_rows.compile(tylo.f32, tylo.f32, own, block=block, target=target)
        assert "SHFL.BFLY" in k.sass and "LDL" not in k.sass
    k = packed.compile(tylo.u32, tylo.f32, block=32, target=target)
    assert "F2FP.BF16" in k.sass


def _run(kernel, own, x, *extra, threads):
    from tylo.arrays import DeviceBuffer
    from tylo.backend import driver

    xb = DeviceBuffer.from_numpy(np.asfortranarray(x).ravel(order="F"))
    out = DeviceBuffer.empty(x.size, tylo.f32).fill_bytes(0xFF)
    kernel[1, threads](out, xb, own, *extra)
    driver.synchronize()
    return out.to_numpy().reshape(x.shape[::-1]).T


@pytest.mark.parametrize(("own", "threads"), [(C, 32), (PLAN.acc_ownership, 128)])
def test_softmax_rows(gpu_runtime, own, threads):
    x = np.random.default_rng().standard_normal(own.shape).astype(np.float32) * 4
    got = _run(softmax_rows, own, x, threads=threads)
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(got, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(("own", "threads"), [(C, 32), (PLAN.acc_ownership, 128)])
def test_column_max(gpu_runtime, own, threads):
    x = np.random.default_rng().standard_normal(own.shape).astype(np.float32)
    got = _run(column_max, own, x, threads=threads)
    np.testing.assert_array_equal(got, np.broadcast_to(x.max(axis=0), x.shape))


def test_pack_bf16(gpu_runtime):
    from tylo.arrays import DeviceBuffer
    from tylo.backend import driver

    x = np.random.default_rng().standard_normal((16, 8)).astype(np.float32)
    xb = DeviceBuffer.from_numpy(np.asfortranarray(x).ravel(order="F"))
    out = DeviceBuffer.empty(64, tylo.u32).fill_bytes(0)
    packed[1, 32](out, xb)
    driver.synchronize()
    words = out.to_numpy().reshape(32, 2)
    for t in range(32):
        for i in range(2):
            for half, v in ((words[t, i] & 0xFFFF, 2 * i), (words[t, i] >> 16, 2 * i + 1)):
                got = np.array([int(half) << 16], dtype=np.uint32).view(np.float32)[0]
                want = 2 * x[C.coord(t, v)]
                assert abs(got - want) <= abs(want) * 2**-8 + 1e-30


# rows shared by many warps: the two-level step (one partial per warp, one barrier, each
# lane reads one partial, log2(warps) butterflies); fewer lane bits than warps (the MMA
# accumulator with 8 warps along its rows: each lane reads 2 partials); 3 warps (every
# lane reads every partial); columns
WIDE = Ownership.from_modes((2, 4096), [(512, 1, 8), (2, 0, 1)], [(8, 1, 1)])
STRIPED = Ownership.from_modes((4, 256), [(64, 1, 4), (4, 0, 1)], [(4, 1, 1)])
THREE = Ownership.from_modes((2, 192), [(32, 1, 1), (3, 1, 32), (2, 0, 1)], [(2, 1, 96)])
MMA8 = TiledMMA(MMAAtom((16, 8, 16), tylo.bf16), warps=(1, 8), repeat=(1, 2), k=16).acc_ownership


@tylo.kernel
def alternating_softmax(out, x, own: tylo.Static):
    """max then sum, each with its own scratch and no leading barrier (sync=False)."""
    tid = tylo.thread_idx.x
    f = load(_colmajor(x, own.shape), own, tid)
    a = reduction_scratch(own, 1, tylo.f32, name="a")
    b = reduction_scratch(own, 1, tylo.f32, name="b")
    for _ in range(2):  # reuse both arrays: the alternation keeps one barrier each
        e = tylo.exp(f - f.max(axis=1, scratch=a, sync=False))
        f = e / e.sum(axis=1, scratch=b, sync=False)
    store(None, _colmajor(out, own.shape), f, tid)


@pytest.mark.parametrize("own", [WIDE, STRIPED, THREE, MMA8], ids=["16w", "2w", "3w", "mma8"])
def test_rows_across_warps_two_level(gpu_runtime, own):
    x = np.random.default_rng().standard_normal(own.shape).astype(np.float32) * 4
    got = _run(alternating_softmax, own, x, threads=own.threads)
    want = x.astype(np.float64)
    for _ in range(2):
        e = np.exp(want - want.max(axis=1, keepdims=True))
        want = e / e.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("own", [WIDE.transpose(), MMA8], ids=["16w", "mma8"])
def test_column_max_across_warps(gpu_runtime, own):
    x = np.random.default_rng().standard_normal(own.shape).astype(np.float32)
    got = _run(column_max, own, x, threads=own.threads)
    np.testing.assert_array_equal(got, np.broadcast_to(x.max(axis=0), x.shape))
