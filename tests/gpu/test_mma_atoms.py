# TEST_TARGET: cc>=8.0
"""MMA atoms and operand loads on the GPU, decoded independently of tylo's layouts.

Operand test: the A and B tiles hold, as raw 16-bit patterns, their own coordinates
(``row << 6 | col``); the kernel copies them to shared memory with ``cp.async``, loads the
operand fragments with ``ldmatrix`` and dumps every register. The host decodes each
register's two halves and checks they are exactly the coordinates the operand ownership
names for that thread and slot. Accumulator test: small integers (exact in bf16/f16 and
f32) multiplied by ``mma``; every thread's raw accumulators must equal the float64 product
at the coordinates the accumulator ownership names, and the stored D must equal it too.
"""

from __future__ import annotations

import numpy as np
import pytest

import tylo
from tylo.layouts import Layout, Swizzle, composition, cosize
from tylo.nvgpu.cpasync import CopyPlan, commit_copies, copy_async, wait_copies
from tylo.nvgpu.warp.mma import MMAAtom, TiledMMA, load_operands, mma, size, zero_accumulator
from tylo.tile.access import GlobalTile, SharedTile, store

PLANS = {
    "seed": TiledMMA(MMAAtom((16, 8, 16), tylo.bf16), warps=(2, 2), repeat=(2, 4), k=32),
    "atom": TiledMMA(MMAAtom((16, 8, 16), tylo.bf16), warps=(1, 1), repeat=(1, 1), k=16),
    "big": TiledMMA(MMAAtom((16, 8, 16), tylo.bf16), warps=(2, 4), repeat=(4, 8), k=32),
    "odd": TiledMMA(MMAAtom((16, 8, 16), tylo.f16), warps=(2, 1), repeat=(1, 3), k=48),
}


pytestmark = pytest.mark.interpret  # the runtime tests here run in the interpreter tier too


def _smem(rows: int, cols: int, swizzle: bool):
    layout = Layout((rows, cols), (cols, 1))
    if swizzle and cols >= 32:
        return composition(Swizzle(2, 3, 3), layout)
    return layout


def _stage(plan, a, b, tid, swizzle):
    """Copy the (M, k) A and (N, k) B tiles (K-contiguous) to shared memory."""
    m, n, k = size(plan)
    la, lb = _smem(m, k, swizzle), _smem(n, k, swizzle)
    sa = SharedTile(tylo.shared(a.dtype, cosize(la)), la)  # a swizzle may reach past m*k
    sb = SharedTile(tylo.shared(b.dtype, cosize(lb)), lb)
    for rows, src, dst, lay in ((m, a, sa, la), (n, b, sb, lb)):
        # 16-byte vectors, or narrower when they do not split evenly over the threads
        nbytes = rows * k * src.dtype.nbytes
        vec = next(v for v in (16, 8, 4) if nbytes % (v * plan.threads) == 0)
        copy_async(
            CopyPlan((rows, k), src.dtype, plan.threads, lay, vector_bytes=vec),
            GlobalTile(src, Layout((rows, k), (k, 1))),
            dst,
            tid,
        )
    commit_copies()
    wait_copies(0)
    tylo.sync_threads()
    return sa, sb


@tylo.kernel
def dump_operands(
    out_a,
    out_b,
    a: tylo.Ptr(align=16),
    b: tylo.Ptr(align=16),
    plan: tylo.Static,
    swizzle: tylo.Static,
):
    tid = tylo.thread_idx.x
    sa, sb = _stage(plan, a, b, tid, swizzle)
    for ks in range(plan.k_steps):
        fa, fb = load_operands(plan, sa, sb, tid, ks)
        for r in range(len(fa)):
            out_a[(tid * plan.k_steps + ks) * len(fa) + r] = fa[r]
        for r in range(len(fb)):
            out_b[(tid * plan.k_steps + ks) * len(fb) + r] = fb[r]


@tylo.kernel
def mma_tile(
    raw, d, a: tylo.Ptr(align=16), b: tylo.Ptr(align=16), plan: tylo.Static, swizzle: tylo.Static
):
    tid = tylo.thread_idx.x
    sa, sb = _stage(plan, a, b, tid, swizzle)
    acc = mma(plan, sa, sb, zero_accumulator(plan), tid)
    for v in range(len(acc)):
        raw[tid * len(acc) + v] = acc[v]
    m, n, _ = size(plan)
    store(plan, GlobalTile(d, Layout((m, n), (1, m))), acc, tid)


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
def test_assembly(target):
    plan = PLANS["seed"]
    k = dump_operands.compile(
        tylo.u32,
        tylo.u32,
        tylo.pointer(tylo.bf16, align=16),
        tylo.pointer(tylo.bf16, align=16),
        plan,
        True,
        block=128,
        target=target,
    )
    assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in k.ptx and "LDSM.16.M88.4" in k.sass
    k = mma_tile.compile(
        tylo.f32,
        tylo.f32,
        tylo.pointer(tylo.bf16, align=16),
        tylo.pointer(tylo.bf16, align=16),
        plan,
        True,
        block=128,
        target=target,
    )
    assert k.ptx.count("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32") == 16
    assert "HMMA.16816.F32.BF16" in k.sass


def _device(array: np.ndarray, dtype):
    from tylo.arrays import DeviceBuffer

    return DeviceBuffer.from_numpy(array, dtype=dtype)


@pytest.mark.parametrize("name", sorted(PLANS))
@pytest.mark.parametrize("swizzle", [False, True])
def test_operand_registers_hold_their_ownership(gpu_runtime, name, swizzle):
    from tylo.arrays import DeviceBuffer
    from tylo.backend import driver

    plan = PLANS[name]
    m, n, k = size(plan)
    rows = np.arange(max(m, n))[:, None]
    cols = np.arange(k)[None, :]
    codes = (rows << 6 | cols).astype(np.uint16)  # each element's own coordinate
    a, b = _device(codes[:m], plan.atom.dtype), _device(codes[:n], plan.atom.dtype)
    ra, rb = 4 * plan.repeat[0], 2 * plan.repeat[1]
    out_a = DeviceBuffer.empty(plan.threads * plan.k_steps * ra, tylo.u32).fill_bytes(0xFF)
    out_b = DeviceBuffer.empty(plan.threads * plan.k_steps * rb, tylo.u32).fill_bytes(0xFF)
    dump_operands[1, plan.threads](out_a, out_b, a, b, plan, swizzle)
    driver.synchronize()
    for operand, out, regs in (("a", out_a, ra), ("b", out_b, rb)):
        got = out.to_numpy().reshape(plan.threads, plan.k_steps, regs)
        own = plan.operand_ownership(operand, k_steps=1)
        for t in range(plan.threads):
            for ks in range(plan.k_steps):
                for r in range(regs):
                    word = int(got[t, ks, r])
                    for half, v in ((word & 0xFFFF, 0), (word >> 16, 1)):
                        row, col = own.coord(t, 2 * r + v)
                        assert (half >> 6, half & 63) == (row, col + 16 * ks), (
                            operand,
                            t,
                            ks,
                            r,
                            v,
                        )


def _exact_inputs(rng, m, n, k, dtype):
    a = rng.integers(-3, 4, size=(m, k)).astype(np.float32)
    b = rng.integers(-3, 4, size=(n, k)).astype(np.float32)

    def bits(x):
        if dtype is tylo.bf16:
            return (x.view(np.uint32) >> 16).astype(np.uint16)
        return x.astype(np.float16).view(np.uint16)

    return a, b, bits(a), bits(b)


@pytest.mark.parametrize("name", sorted(PLANS))
@pytest.mark.parametrize("swizzle", [False, True])
def test_accumulators_hold_their_ownership(gpu_runtime, name, swizzle):
    from tylo.arrays import DeviceBuffer
    from tylo.backend import driver

    plan = PLANS[name]
    m, n, k = size(plan)
    rng = np.random.default_rng()
    a, b, abits, bbits = _exact_inputs(rng, m, n, k, plan.atom.dtype)
    want = a.astype(np.float64) @ b.astype(np.float64).T  # (M, N)
    acc = plan.acc_ownership
    raw = DeviceBuffer.empty(plan.threads * acc.values, tylo.f32).fill_bytes(0xFF)
    d = DeviceBuffer.empty(m * n, tylo.f32).fill_bytes(0xFF)
    mma_tile[1, plan.threads](
        raw, d, _device(abits, plan.atom.dtype), _device(bbits, plan.atom.dtype), plan, swizzle
    )
    driver.synchronize()
    got = raw.to_numpy().reshape(plan.threads, acc.values)
    table = acc.table()
    np.testing.assert_array_equal(got, want[table[..., 0], table[..., 1]])
    np.testing.assert_array_equal(d.to_numpy().reshape(n, m).T, want)
