# TEST_TARGET: cc>=9.0a
"""stmatrix round trips on the device: a fragment whose every element is a known function
of its ownership coordinate (wgmma m64nN accumulators, an mma.sync accumulator; f32 values
converted, or registers packed beforehand) is stored with ``store_fragment`` into a shared
tile (row-major: plain stores; column-major: ``.trans``; 128-byte swizzled), read back
element by element through the tile's layout into global memory, and compared with numpy.
The values are small integers, exact in bf16 and f16; the output is poisoned first."""

from __future__ import annotations

import numpy as np
import pytest

import tylo
from tylo.layouts import ComposedLayout, Layout, Swizzle
from tylo.layouts.tv import MMA_M16N8K16_C_TV, wgmma_m64_c_tv
from tylo.nvgpu.warp.stmatrix import store_fragment
from tylo.tile.fragment import Fragment
from tylo.tile.ownership import Ownership
from tylo.tile.views import SharedTile


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
