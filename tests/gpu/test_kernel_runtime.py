# TEST_TARGET: cc>=8.0
"""Traced kernels on the GPU: loops, branches, shared memory, shuffles, vector memory,
inline PTX, math, conversions, launch-argument checks.

Each feature has an assembly half (always runs: compiles for sm_80 and sm_90a and checks
the PTX/SASS for the instructions meant) and a runtime half (``gpu_runtime``: runs on the
device and compares with numpy).
"""

from __future__ import annotations

import numpy as np
import pytest

import tylo
from tylo.arrays import DeviceArray, DeviceBuffer
from tylo.layouts import Layout

F32, F64, I32, BF16 = tylo.f32, tylo.f64, tylo.i32, tylo.bf16
TARGETS = ("sm_80", "sm_90a")


# the interpreter tier (tests/interp_tier.py): what it cannot run here, and why
LAUNCH_CHECKS = (
    "expects a numpy array to be refused as host memory, which the interpreter takes, and "
    "the GPU launch's messages for a float int and a block of 2048 threads"
)
COMPILES = "counts the GPU compiles (stats.compiles); the interpreter traces and compiles nothing"


def dev(a: np.ndarray, dtype=None) -> DeviceBuffer:
    return DeviceBuffer.from_numpy(a, dtype=dtype)


def poisoned(n: int, dtype=F32) -> DeviceBuffer:
    return DeviceBuffer.empty(n, dtype).fill_bytes(0xFF)


def host(buf: DeviceBuffer) -> np.ndarray:
    from tylo.backend import driver

    driver.synchronize()
    return buf.to_numpy()


def no_llvm_calls(ptx: str) -> None:
    assert ".extern .func llvm." not in ptx


# ---------------------------------------------------------------------------- loops


@tylo.kernel
def column_sums(out, x, rows):
    t = tylo.thread_idx.x
    total = 0.0
    count = 0
    for r in tylo.range(rows):
        total = total + x[r * tylo.block_dim.x + t]
        count = count + 1
    out[t] = total + tylo.value(count).to(F32) * 1000.0


@pytest.mark.parametrize("target", TARGETS)
def test_loops_assembly(target):
    k = column_sums.compile(F32, F32, int, block=64, target=target)
    no_llvm_calls(k.ptx)
    assert "bra" in k.ptx and "ld.global.f32" in k.ptx


@pytest.mark.interpret
@pytest.mark.parametrize("rows", [1, 7, 100])
def test_loops_runtime(gpu_runtime, rows):
    x = np.random.default_rng(rows).standard_normal((rows, 64)).astype(np.float32)
    out = poisoned(64)
    column_sums[1, 64](out, dev(x), rows)
    np.testing.assert_allclose(host(out), x.sum(0) + 1000.0 * rows, rtol=1e-5, atol=1e-3)


@tylo.kernel
def strided_loop(out, n, start, step: tylo.Static):
    t = tylo.thread_idx.x
    acc = tylo.value(0, I32)
    for i in tylo.range(start, n, step):
        if i % 3 == 0:
            acc = acc + tylo.value(i, I32)
    out[t] = acc


@pytest.mark.interpret
def test_strided_and_negative_step_loops_runtime(gpu_runtime):
    for n, start, step in [(50, 3, 4), (1, 40, -3), (33, 1, 1), (5, 9, 2)]:
        out = poisoned(1, I32)
        strided_loop[1, 1](out, n, start, step)
        want = sum(i for i in range(start, n, step) if i % 3 == 0)
        assert host(out)[0] == want, (n, start, step)


# ---------------------------------------------------------------------------- branches


@tylo.kernel
def branches(out, x, n, relu):
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    if i < n:
        v = x[i]
        kind = 0
        if v > 1.0:
            v = v * 2.0
            kind = 1
        elif v < -1.0 and i % 2 == 0:
            v = -v
            kind = 2
        else:
            kind = i % 5 + 3
        if relu:
            v = tylo.maximum(v, 0.0)
        w = v + 100.0 if kind == 1 else v
        out[i] = w + tylo.value(kind).to(F32) * 1000.0


def branches_reference(x, relu):
    out = np.empty_like(x)
    for i, v in enumerate(x.astype(np.float64)):
        if v > 1.0:
            v, kind = v * 2.0, 1
        elif v < -1.0 and i % 2 == 0:
            v, kind = -v, 2
        else:
            kind = i % 5 + 3
        if relu:
            v = max(v, 0.0)
        out[i] = (v + 100.0 if kind == 1 else v) + kind * 1000.0
    return out


@pytest.mark.parametrize("target", TARGETS)
def test_branches_assembly(target):
    k = branches.compile(F32, F32, int, True, block=128, target=target)
    no_llvm_calls(k.ptx)
    assert "max.f32" in k.ptx
    assert "max.f32" not in branches.compile(F32, F32, int, False, block=128, target=target).ptx


@pytest.mark.interpret
@pytest.mark.parametrize("relu", [False, True])
def test_branches_runtime(gpu_runtime, relu):
    n = 1000
    x = (np.random.default_rng(1).standard_normal(n) * 2).astype(np.float32)
    out = poisoned(n)
    branches[(n + 127) // 128, 128](out, dev(x), n, relu)
    np.testing.assert_allclose(host(out), branches_reference(x, relu), rtol=1e-6)


# ---------------------------------------------------------------------------- shared memory


@tylo.kernel
def reverse_block(out, x):
    t = tylo.thread_idx.x
    n = tylo.block_dim.x
    base = tylo.block_idx.x * n
    tile = tylo.shared(F32, n)
    tile[t] = x[base + t]
    tylo.sync_threads()
    out[base + t] = tile[n - 1 - t]


@tylo.kernel
def transpose_tile(out, x, width: tylo.Static):
    # a 32 x 32 tile through dynamic shared memory with a padded layout (no bank conflicts)
    tx, ty = tylo.thread_idx.x, tylo.thread_idx.y
    tile = tylo.dynamic_shared(F32, Layout((32, 32), (33, 1)))
    tile[ty, tx] = x[ty * width + tx]
    tylo.sync_threads()
    out[ty * width + tx] = tile[tx, ty]


@pytest.mark.parametrize("target", TARGETS)
def test_shared_memory_assembly(target):
    k = reverse_block.compile(F32, F32, block=128, target=target)
    assert "bar.sync" in k.ptx and "st.shared.f32" in k.ptx and "ld.shared.f32" in k.ptx
    assert k.resources.shared_bytes == 512
    d = transpose_tile.compile(F32, F32, 32, block=(32, 32), target=target)
    assert d.dynamic_shared_bytes == (31 * 33 + 32) * 4
    assert "BAR.SYNC" in d.sass or "BAR" in d.sass


@pytest.mark.interpret
def test_shared_memory_runtime(gpu_runtime):
    x = np.arange(512, dtype=np.float32)
    out = poisoned(512)
    reverse_block[4, 128](out, dev(x))
    np.testing.assert_array_equal(host(out), x.reshape(4, 128)[:, ::-1].ravel())
    m = np.random.default_rng(2).standard_normal((32, 32)).astype(np.float32)
    out = poisoned(1024)
    transpose_tile[1, (32, 32)](out, dev(m), 32, shared=(31 * 33 + 32) * 4)
    np.testing.assert_array_equal(host(out).reshape(32, 32), m.T)
    with pytest.raises(tylo.KernelArgumentError, match="need 4220 bytes, but the launch gives"):
        transpose_tile[1, (32, 32)](out, dev(m), 32, shared=1024)


# ---------------------------------------------------------------------------- shuffles


@tylo.kernel
def warp_ops(out_sum, out_bcast, out_down, out_up, x, xi: tylo.Ptr(I32), xd: tylo.Ptr(F64)):
    t = tylo.thread_idx.x
    lane = tylo.lane_id()
    v = x[t]
    s = v
    for off in (16, 8, 4, 2, 1):
        s = s + tylo.shfl_xor(s, off)
    out_sum[t] = s
    out_bcast[t] = tylo.shfl_idx(xi[t], 3).to(F32) + tylo.shfl_idx(xd[t], 31).to(F32)
    out_down[t] = tylo.shfl_down(v, 1)
    out_up[t] = tylo.shfl_up(v, 2) + tylo.value(lane).to(F32) * 0.0


@pytest.mark.parametrize("target", TARGETS)
def test_shuffle_assembly(target):
    k = warp_ops.compile(F32, F32, F32, F32, F32, I32, F64, block=64, target=target)
    for mode in ("bfly", "idx", "down", "up"):
        assert f"shfl.sync.{mode}.b32" in k.ptx
    assert "SHFL.BFLY" in k.sass and "SHFL.IDX" in k.sass
    no_llvm_calls(k.ptx)


@pytest.mark.interpret
def test_shuffle_runtime(gpu_runtime):
    x = np.random.default_rng(3).standard_normal(64).astype(np.float32)
    xi = np.arange(64, dtype=np.int32) * 7
    xd = np.arange(64, dtype=np.float64) + 0.5
    outs = [poisoned(64) for _ in range(4)]
    warp_ops[1, 64](*outs, dev(x), dev(xi), dev(xd))
    s, b, d, u = (host(o).reshape(2, 32) for o in outs)
    w = x.reshape(2, 32)
    np.testing.assert_allclose(s, np.repeat(w.sum(1, keepdims=True), 32, 1), rtol=1e-5)
    want_b = xi.reshape(2, 32)[:, 3:4] + xd.reshape(2, 32)[:, 31:32]
    np.testing.assert_allclose(b, np.repeat(want_b, 32, 1))
    np.testing.assert_array_equal(d[:, :31], w[:, 1:])
    np.testing.assert_array_equal(d[:, 31], w[:, 31])  # past the end: own value
    np.testing.assert_array_equal(u[:, 2:], w[:, :30])
    np.testing.assert_array_equal(u[:, :2], w[:, :2])


# ---------------------------------------------------------------------------- vector memory


@tylo.kernel
def vector_copy(
    out: tylo.Ptr(align=16), x: tylo.Ptr(align=16), n: tylo.Int(multiple_of=8), cache: tylo.Static
):
    i = (tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x) * 8
    if i < n:
        a = x.load(i, vector=16 // x.dtype.nbytes, cache=cache)
        out.store(i, a)
        if x.dtype.nbytes == 4:
            b = x.load(i + 4, vector=4, cache=cache)
            out.store(i + 4, tuple(v * 2.0 for v in b), cache="cs" if cache else None)


@pytest.mark.parametrize("target", TARGETS)
def test_vector_memory_assembly(target):
    k = vector_copy.compile(
        tylo.pointer(F32, align=16),
        tylo.pointer(F32, align=16),
        int,
        None,
        block=128,
        target=target,
    )
    assert "ld.global.v4.f32" in k.ptx and "st.global.v4.f32" in k.ptx
    assert "LDG.E.128" in k.sass and "STG.E.128" in k.sass
    h = vector_copy.compile(
        tylo.pointer(BF16, align=16),
        tylo.pointer(BF16, align=16),
        int,
        "nc",
        block=128,
        target=target,
    )
    assert "ld.global.nc.v4.b32" in h.ptx and "st.global.v4" in h.ptx
    c = vector_copy.compile(
        tylo.pointer(F32, align=16),
        tylo.pointer(F32, align=16),
        int,
        "nc",
        block=128,
        target=target,
    )
    assert "ld.global.nc.v4.f32" in c.ptx and "st.global.cs.v4.f32" in c.ptx


@pytest.mark.interpret
@pytest.mark.parametrize("cache", [None, "nc"])
def test_vector_memory_runtime(gpu_runtime, cache):
    n = 8 * 1000
    x = np.random.default_rng(4).standard_normal(n).astype(np.float32)
    out = poisoned(n)
    vector_copy[(n // 8 + 127) // 128, 128](out, dev(x), n, cache)
    got = host(out).reshape(-1, 8)
    np.testing.assert_array_equal(got[:, :4], x.reshape(-1, 8)[:, :4])
    np.testing.assert_array_equal(got[:, 4:], 2 * x.reshape(-1, 8)[:, 4:])
    bits = np.random.default_rng(5).integers(0, 2**16, n, dtype=np.uint16)
    hb = poisoned(n, BF16)
    vector_copy[(n // 8 + 127) // 128, 128](hb, dev(bits, BF16), n, cache)
    np.testing.assert_array_equal(host(hb), bits)


@pytest.mark.interpret
def test_vector_alignment_is_checked_at_launch(gpu_runtime):
    base = dev(np.zeros(64, np.float32))
    shifted = DeviceArray(base.ptr + 4, (60,), (1,), F32, base.device, owner=base)
    with pytest.raises(tylo.KernelArgumentError, match="not aligned to 16 bytes"):
        vector_copy[1, 32](shifted, base, 56, None)
    with pytest.raises(tylo.KernelArgumentError, match="multiple of 8"):
        vector_copy[1, 32](base, base, 60, None)


# ---------------------------------------------------------------------------- inline PTX


@tylo.kernel
def inline(out, x, y, bits: tylo.Ptr(tylo.u32)):
    t = tylo.thread_idx.x
    a, b = x[t], y[t]
    out[4 * t] = tylo.ptx("fma.rn.f32", a, b, 1.0)
    lo, hi = tylo.ptx(
        "mov.b64 {$0, $1}, $2;", tylo.value(t, tylo.u64) * 4294967296 + 5, out=(tylo.u32, tylo.u32)
    )
    out[4 * t + 1] = (lo + hi).to(F32)
    out[4 * t + 2] = tylo.ptx("cvt.rn.f32.s32", tylo.value(t, I32) - 3)
    bits[t] = tylo.pack_bf16x2(a, b)
    out[4 * t + 3] = tylo.ptx("add.rn.f32", a, 0.25)


@pytest.mark.parametrize("target", TARGETS)
def test_inline_ptx_assembly(target):
    k = inline.compile(F32, F32, F32, tylo.u32, block=32, target=target)
    for text in (
        "fma.rn.f32",
        "mov.b64",
        "cvt.rn.f32.s32",
        "cvt.rn.bf16x2.f32",
        "// begin inline asm",
    ):
        assert text in k.ptx, text
    no_llvm_calls(k.ptx)


@pytest.mark.interpret
def test_inline_ptx_runtime(gpu_runtime):
    rng = np.random.default_rng(6)
    x = rng.standard_normal(32).astype(np.float32)
    y = rng.standard_normal(32).astype(np.float32)
    out, bits = poisoned(128), poisoned(32, tylo.u32)
    inline[1, 32](out, dev(x), dev(y), bits)
    got = host(out).reshape(32, 4)
    np.testing.assert_allclose(got[:, 0], x * y + 1.0, rtol=1e-6)
    np.testing.assert_array_equal(got[:, 1], np.arange(32) + 5)
    np.testing.assert_array_equal(got[:, 2], np.arange(32) - 3)
    np.testing.assert_allclose(got[:, 3], x + 0.25, rtol=1e-7)
    b = host(bits)

    def bf16(v):  # round to nearest even, as cvt.rn.bf16
        u = v.astype(np.float32).view(np.uint32).astype(np.uint64)
        return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint32)

    np.testing.assert_array_equal(b & 0xFFFF, bf16(x))
    np.testing.assert_array_equal(b >> 16, bf16(y))


# ---------------------------------------------------------------------------- math, dtypes


@tylo.kernel
def math_fns(out, x, xh: tylo.Ptr(BF16), d: tylo.Ptr(F64)):
    t = tylo.thread_idx.x
    v = x[t]
    a = tylo.abs(v) + 0.5
    out[12 * t + 0] = tylo.exp(v)
    out[12 * t + 1] = tylo.exp2(v)
    out[12 * t + 2] = tylo.log(a)
    out[12 * t + 3] = tylo.log2(a)
    out[12 * t + 4] = tylo.sqrt(a)
    out[12 * t + 5] = tylo.rsqrt(a)
    out[12 * t + 6] = tylo.fma(v, v, 1.0)
    out[12 * t + 7] = tylo.where(v > 0.0, v, v * 0.5)
    out[12 * t + 8] = xh[t].to(F32) * 2.0
    out[12 * t + 9] = (v.to(BF16) * 3.0).to(F32)
    out[12 * t + 10] = tylo.sqrt(d[t] + 1.0).to(F32)
    out[12 * t + 11] = (tylo.value(t, I32) // 3 - tylo.value(7, I32) % (t + 1)).to(F32) + (
        tylo.value(-7, I32) // 2
    ).to(F32)


@pytest.mark.interpret
def test_math_runtime(gpu_runtime):
    rng = np.random.default_rng(7)
    x = rng.uniform(-4, 4, 64).astype(np.float32)
    xb = (x.view(np.uint32) >> 16).astype(np.uint16)  # bf16 bits (truncated)
    d = rng.uniform(0, 100, 64)
    out = poisoned(64 * 12)
    math_fns[1, 64](out, dev(x), dev(xb, BF16), dev(d))
    g = host(out).reshape(64, 12).astype(np.float64)
    x64 = x.astype(np.float64)
    a = np.abs(x64) + 0.5
    rel = {"exp": 1e-5, "log": 1e-5, "sqrt": 1e-7, "rsqrt": 1e-6}
    np.testing.assert_allclose(g[:, 0], np.exp(x64), rtol=rel["exp"])
    np.testing.assert_allclose(g[:, 1], np.exp2(x64), rtol=rel["exp"])
    np.testing.assert_allclose(g[:, 2], np.log(a), atol=1e-6)
    np.testing.assert_allclose(g[:, 3], np.log2(a), atol=1e-6)
    np.testing.assert_allclose(g[:, 4], np.sqrt(a), rtol=rel["sqrt"])
    np.testing.assert_allclose(g[:, 5], 1 / np.sqrt(a), rtol=rel["rsqrt"])
    np.testing.assert_allclose(g[:, 6], x64 * x64 + 1, rtol=1e-6)
    np.testing.assert_allclose(g[:, 7], np.where(x64 > 0, x64, x64 * 0.5), rtol=1e-7)
    np.testing.assert_allclose(g[:, 8], (xb.astype(np.uint32) << 16).view(np.float32) * 2.0)
    np.testing.assert_allclose(g[:, 9], x64 * 3.0, rtol=2**-7)
    np.testing.assert_allclose(g[:, 10], np.sqrt(d + 1.0), rtol=1e-6)
    t = np.arange(64)
    np.testing.assert_array_equal(g[:, 11], t // 3 - 7 % (t + 1) + (-7 // 2))


# ---------------------------------------------------------------------------- 2-D launch


@tylo.kernel
def grid_2d(out, width, height):
    x = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    y = tylo.block_idx.y * tylo.block_dim.y + tylo.thread_idx.y
    if x < width and y < height:
        out[y * width + x] = tylo.value(x + 1000 * y + 1000000 * tylo.grid_dim.y).to(F32)


@pytest.mark.interpret
def test_2d_grid_runtime(gpu_runtime):
    w, h = 70, 37
    out = poisoned(w * h)
    grid_2d[((w + 15) // 16, (h + 7) // 8), (16, 8)](out, w, h)
    yy, xx = np.mgrid[0:h, 0:w]
    np.testing.assert_array_equal(host(out).reshape(h, w), xx + 1000 * yy + 1000000 * 5)


# ---------------------------------------------------------------------------- launches


@tylo.kernel
def scaled(out: tylo.Ptr(F32), x, n: tylo.Int(min=0), alpha, vec: tylo.Static = 1):
    if vec > 1:
        tylo.assume(tylo.divisible(n, vec))
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    if i < n:
        out[i] = x[i] * alpha


@pytest.mark.interpret(skip=LAUNCH_CHECKS)
def test_launch_argument_checks(gpu_runtime):
    x = dev(np.ones(16, np.float32))
    out = poisoned(16)
    scaled[1, 32](out, x, 0, 2.0)  # min=0 allows an empty launch
    scaled[1, 32](out, x, n=16, alpha=3.0)  # keywords and defaults
    np.testing.assert_array_equal(host(out), np.full(16, 3.0, np.float32))
    with pytest.raises(tylo.KernelArgumentError, match="must be >= 0"):
        scaled[1, 32](out, x, -1, 2.0)
    with pytest.raises(tylo.KernelArgumentError, match="takes f32 elements"):
        scaled[1, 32](dev(np.ones(16, np.float64)), x, 16, 2.0)
    with pytest.raises(tylo.KernelArgumentError, match="compiled assuming 4 | n"):
        scaled[1, 32](out, x, 10, 2.0, vec=4)
    with pytest.raises(tylo.KernelArgumentError, match="missing a required argument"):
        scaled[1, 32](out, x, 16)
    with pytest.raises(tylo.KernelArgumentError, match="expected a Python int"):
        scaled[1, 32](out, x, 1.5, 2.0)
    with pytest.raises(tylo.KernelArgumentError, match="host memory"):
        scaled[1, 32](out, np.ones(16, np.float32), 16, 2.0)
    with pytest.raises(tylo.KernelArgumentError, match="at most 1024"):
        scaled[1, 2048](out, x, 16, 2.0)


@pytest.mark.interpret(skip=COMPILES)
def test_ten_launches_compile_once(gpu_runtime):
    @tylo.kernel
    def fresh(out, x, n):
        i = tylo.thread_idx.x
        if i < n:
            out[i] = x[i] + 1.0

    x = dev(np.arange(32, dtype=np.float32))
    out = poisoned(32)
    for _ in range(10):
        fresh[1, 32](out, x, 32)
    assert fresh.stats.compiles == 1
    np.testing.assert_array_equal(host(out), np.arange(32, dtype=np.float32) + 1.0)
    fresh[1, 64](out, x, 32)  # another block shape: another specialization
    assert fresh.stats.compiles == 2


@pytest.mark.interpret(skip=COMPILES)
def test_static_value_selects_a_specialization(gpu_runtime):
    x = dev(np.arange(8, dtype=np.float32))
    out = poisoned(8)
    branches[1, 32](out, x, 8, True)
    branches[1, 32](out, x, 8, False)
    branches[1, 32](out, x, 8, True)
    assert len({k for k in branches.cache if k[0] == (32, 1, 1)}) >= 2


# ---------------------------------------------------------------------------- every kernel


SPECS = [
    (column_sums, (F32, F32, int), 64),
    (strided_loop, (I32, int, int, 4), 1),
    (strided_loop, (I32, int, int, -3), 1),
    (branches, (F32, F32, int, True), 128),
    (reverse_block, (F32, F32), 128),
    (transpose_tile, (F32, F32, 32), (32, 32)),
    (warp_ops, (F32, F32, F32, F32, F32, I32, F64), 64),
    (vector_copy, (tylo.pointer(F32, align=16), tylo.pointer(F32, align=16), int, None), 128),
    (inline, (F32, F32, F32, tylo.u32), 32),
    (math_fns, (F32, F32, BF16, F64), 64),
    (grid_2d, (F32, int, int), (16, 8)),
    (scaled, (F32, F32, int, float, 4), 32),
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("kern,specs,block", SPECS, ids=lambda v: getattr(v, "name", None))
def test_every_kernel_compiles(kern, specs, block, target):
    k = kern.compile(*specs, block=block, target=target)
    no_llvm_calls(k.ptx)
    assert k.resources.spill_stores in (0, None) and k.resources.registers <= 128
