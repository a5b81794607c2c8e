# TEST_TARGET: cc>=9.0a
"""stmatrix round trips on the device: a fragment whose every element is a known function
of its ownership coordinate (wgmma m64nN accumulators, an mma.sync accumulator; f32 values
converted, or registers packed beforehand) is stored with ``store_fragment`` into a shared
tile (row-major: plain stores; column-major: ``.trans``; 128-byte swizzled), read back
element by element through the tile's layout into global memory, and compared with numpy.
The values are small integers, exact in bf16 and f16; the output is poisoned first. Last, the
GEMM epilogue alone: a real wgmma accumulator through stmatrix and a TMA store."""

from __future__ import annotations

import numpy as np
import pytest

import tylo
from tylo.layouts import ComposedLayout, Layout, Swizzle, composition, dim
from tylo.layouts.tv import MMA_M16N8K16_C_TV, wgmma_m64_c_tv
from tylo.nvgpu import tma
from tylo.nvgpu.warp.stmatrix import store_fragment
from tylo.nvgpu.warpgroup.mma import (
    WarpgroupMMAAtom,
    commit_group,
    fence,
    fence_shared_to_async,
    mma_async,
    wait_group,
)
from tylo.tile.fragment import Fragment, zeros
from tylo.tile.ownership import Ownership
from tylo.tile.views import SharedTile

Coord = tylo.Int(min=0, max=2**20)
Inner = tylo.Int(min=0, max=2**20, multiple_of=8)


INTERPRET_SKIP = (  # the interpreter tier (tests/interp_tier.py)
    "wgmma accumulators and torch CUDA tensors: the interpreter refuses wgmma by name "
    "(its stmatrix is tested against ldmatrix in tests/host/test_interpret_warp.py)"
)


def value_at(r, c):
    """An exact 16-bit value for coordinate (r, c): a small signed integer."""
    return (r * 7 + c * 3) % 251 - 125


def layout_for(rows, cols, kind):
    if kind == "row":
        return Layout((rows, cols), (cols, 1))
    if kind == "col":
        return Layout((rows, cols), (1, rows))
    return ComposedLayout(Swizzle(3, 3, 3), 0, Layout((rows, cols), (cols, 1)))  # 128B rows


@tylo.kernel
def round_trip(out, tv: tylo.Static, shape: tylo.Static, kind: tylo.Static, pack: tylo.Static):
    rows, cols = shape
    own = Ownership(tv, shape)
    tid = tylo.thread_idx.x
    values = [
        ((tylo.value(r * 7 + c * 3, tylo.i32) % 251) - 125).to(tylo.f32) for r, c in own.coords(tid)
    ]
    frag = Fragment(values, own)
    if pack:
        frag = frag.pack(out.dtype)
    tile = SharedTile(tylo.shared(out.dtype, rows * cols, align=1024), layout_for(rows, cols, kind))
    store_fragment(frag, tile, tid)
    tylo.sync_threads()
    for j in range(-(-rows * cols // own.threads)):
        e = tid + own.threads * j
        if e < rows * cols:
            out[e] = tile.storage[tile.offset((e // cols, e % cols))]


def _torch(dtype):
    import torch

    return {"bf16": torch.bfloat16, "f16": torch.float16}[dtype.name]


CASES = [
    (wgmma_m64_c_tv(8), (64, 8), "row"),
    (wgmma_m64_c_tv(8), (64, 8), "col"),
    (wgmma_m64_c_tv(64), (64, 64), "row"),
    (wgmma_m64_c_tv(64), (64, 64), "col"),
    (wgmma_m64_c_tv(64), (64, 64), "swizzled"),
    (wgmma_m64_c_tv(256), (64, 256), "row"),
    (wgmma_m64_c_tv(136), (64, 136), "col"),
    (MMA_M16N8K16_C_TV, (16, 8), "row"),
    (MMA_M16N8K16_C_TV, (16, 8), "col"),
]


@pytest.mark.parametrize("tv,shape,kind", CASES, ids=lambda x: str(x))
@pytest.mark.parametrize("dtype", [tylo.bf16, tylo.f16])
@pytest.mark.parametrize("pack", [False, True])
def test_round_trip_matches_numpy(gpu_runtime, tv, shape, kind, dtype, pack):
    import torch

    rows, cols = shape
    threads = Ownership(tv, shape).threads
    out = torch.full((rows * cols,), float("nan"), device="cuda").to(_torch(dtype))
    round_trip[1, threads](out, tv, shape, kind, pack)
    torch.cuda.synchronize()
    r, c = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    want = value_at(r, c).astype(np.float32)
    np.testing.assert_array_equal(out.float().cpu().numpy().reshape(rows, cols), want)


def test_compiles_without_a_gpu():
    """The compile-only half, for one case (every form: tests/nvvm/test_stmatrix_sass.py)."""
    tv, shape, kind = CASES[1]
    k = round_trip.compile(tylo.f16, tv, shape, kind, True, block=128, target="sm_90a")
    assert "STSM.16.MT88.2" in k.sass and "LDL" not in k.sass


# ---------------------------------------------------------------------------- the epilogue

M, N, LD = dim("M"), dim("N"), dim("ld", multiple_of=8)
EPILOGUE_K = 64


def _k_major_128b(rows):
    """A (rows, 64) bf16 tile, K-major, 128-byte swizzle (wgmma's canonical form)."""
    return composition(Swizzle(3, 3, 3), Layout((rows, 64), (64, 1)))


def c_plan(n):
    """The C box (64, n) in bf16: 128-byte swizzled rows when they are 128 bytes, plain
    rows otherwise."""
    if n == 64:
        smem = ComposedLayout(Swizzle(3, 3, 3), 0, Layout((64, 64), (64, 1)))
        return tma.TensorMapPlan(tylo.bf16, Layout((M, N), (LD, 1)), (64, 64), "128B", smem)
    return tma.TensorMapPlan(
        tylo.bf16, Layout((M, N), (LD, 1)), (64, n), "none", Layout((64, n), (n, 1))
    )


@tylo.kernel
def wgmma_epilogue(tm, a: tylo.Ptr(align=16), b: tylo.Ptr(align=16), m0: Coord, n0: Inner):
    """The GEMM epilogue alone: one warpgroup's wgmma accumulator (A 64x64 times B^T,
    B n x 64), scaled and shifted elementwise, stored to shared bf16 with stmatrix, then to
    global memory with one TMA store."""
    plan = tm.plan
    n = plan.box[1]
    atom = WarpgroupMMAAtom((64, n, 16), tylo.bf16)
    tid = tylo.thread_idx.x
    sa = SharedTile(tylo.shared(tylo.bf16, 64 * EPILOGUE_K, align=1024), _k_major_128b(64))
    sb = SharedTile(tylo.shared(tylo.bf16, n * EPILOGUE_K, align=1024), _k_major_128b(n))
    for rows, src, dst in ((64, a, sa), (n, b, sb)):
        for i in range(rows * EPILOGUE_K // 128):
            e = tid + 128 * i
            dst.storage[dst.offset((e // EPILOGUE_K, e % EPILOGUE_K))] = src[e]
    fence_shared_to_async()
    tylo.sync_threads()
    fence()
    acc = zeros(atom.c)
    for ks in range(EPILOGUE_K // 16):
        acc = mma_async(atom, sa, sb, acc, k_offset=16 * ks, accumulate=ks > 0)
    commit_group()
    acc = wait_group(0, acc)
    c = SharedTile(tylo.shared(tylo.bf16, 64 * n, align=1024), plan.smem_layout)
    store_fragment(acc * 2.0 + 1.0, c, tid)
    fence_shared_to_async()
    tylo.sync_threads()
    if tid == 0:
        tma.store(tm, c, (m0, n0))
        tma.commit_stores()
        tma.wait_stores(0)


@pytest.mark.parametrize("n", [8, 64, 128])
@pytest.mark.parametrize("where", ["inside", "bottom edge"])
def test_wgmma_stmatrix_tma_store(gpu_runtime, n, where):
    import torch

    rng = np.random.default_rng(n)
    a = rng.integers(-1, 2, (64, EPILOGUE_K)).astype(np.float32)
    b = rng.integers(-1, 2, (n, EPILOGUE_K)).astype(np.float32)
    m_rows, cols = (160, n + 16) if where == "inside" else (100, n + 8)
    m0 = 32 if where == "inside" else 64
    c = torch.full((m_rows, cols), -7.0, device="cuda").to(torch.bfloat16)
    ta = torch.from_numpy(a).to("cuda", torch.bfloat16).contiguous()
    tb = torch.from_numpy(b).to("cuda", torch.bfloat16).contiguous()
    wgmma_epilogue[1, 128](tma.TensorMap(c_plan(n), c), ta, tb, m0, 8)
    torch.cuda.synchronize()
    want = np.full((m_rows, cols), -7.0)
    box = 2.0 * (a.astype(np.float64) @ b.T.astype(np.float64)) + 1.0
    rows = min(64, m_rows - m0)
    want[m0 : m0 + rows, 8 : 8 + n] = box[:rows]
    np.testing.assert_array_equal(c.float().cpu().numpy(), want)


def test_epilogue_compiles_without_a_gpu():
    k = wgmma_epilogue.compile(
        c_plan(64), tylo.pointer(tylo.bf16, align=16), tylo.pointer(tylo.bf16, align=16),
        Coord, Inner, block=128, target="sm_90a",
    )  # fmt: skip
    for op in ("HGMMA.64x64x16.F32.BF16", "STSM.16.M88.4", "UTMASTG.2D"):
        assert op in k.sass, op
    assert "LDL" not in k.sass and "STL" not in k.sass
