# TEST_TARGET: cc>=8.0
"""tylo.tile.fragment_io on the GPU against numpy: windows of odd-shaped arrays loaded and
stored by ownership in 16-byte vectors (elements past the bounds read as fill, clamped rows
read the last row, stores past the bounds skipped and nothing outside written), keep masks
with coordinates, and a shared staging tile read back by the same ownership."""

from __future__ import annotations

import math

import numpy as np
import pytest

import tylo
from tylo.layouts import Layout
from tylo.tile.access import SharedTile
from tylo.tile.fragment_io import coordinates, load_fragment, store_fragment
from tylo.tile.ownership import Ownership

Dim = tylo.Int(min=1, max=2**31 - 1)
TILE = (8, 512)


pytestmark = pytest.mark.interpret  # every runtime test here runs in the interpreter tier


def striped(vec: int) -> Ownership:
    """8 rows of 512: 32 lanes per row, ``vec``-element vectors strided 32 * vec apart."""
    return Ownership.from_modes(
        TILE, [(32, 1, vec), (8, 0, 1)], [(vec, 1, 1), (512 // (32 * vec), 1, 32 * vec)]
    )


@tylo.kernel
def windows(out, x, rows: Dim, cols: Dim, own: tylo.Static, vec: tylo.Static, clamp: tylo.Static):
    """Block b loads the window of x at row 8b (elements past the bounds -1; rows past the
    last read the last row again when ``clamp``) and stores all of it, fills included,
    into the (grid * 8, 512) array out."""
    x = tylo.assume_aligned(x, 4 * vec)
    out = tylo.assume_aligned(out, 4 * vec)
    tylo.assume(tylo.divisible(cols, vec))
    X = tylo.view(x, Layout((rows, cols), (cols, 1)))
    full = tylo.view(out, Layout((tylo.grid_dim.x * 8, 512), (512, 1)))
    tid = tylo.thread_idx.x
    at = (tylo.block_idx.x * 8, 0)
    f = load_fragment(
        X,
        own,
        tid,
        origin=at,
        bounds=(rows, cols),
        clamp=(0,) if clamp else (),
        vector=vec,
        fill=-1.0,
    )
    store_fragment(full, f, tid, origin=at, vector=vec)  # every value, fills included


@tylo.kernel
def bounded_copy(out, x, rows: Dim, cols: Dim, own: tylo.Static, vec: tylo.Static):
    x = tylo.assume_aligned(x, 4 * vec)
    out = tylo.assume_aligned(out, 4 * vec)
    tylo.assume(tylo.divisible(cols, vec))
    X = tylo.view(x, Layout((rows, cols), (cols, 1)))
    Out = tylo.view(out, Layout((rows, cols), (cols, 1)))
    tid = tylo.thread_idx.x
    edge = {"origin": (tylo.block_idx.x * 8, 0), "bounds": (rows, cols), "vector": vec}
    f = load_fragment(X, own, tid, clamp=(0,), fill=0.0, **edge)
    store_fragment(Out, f * 2.0, tid, **edge)


@tylo.kernel
def masked(out, x, mask, n: Dim, own: tylo.Static):
    tid = tylo.thread_idx.x
    x = tylo.assume_aligned(x, 16)
    out = tylo.assume_aligned(out, 16)
    mask = tylo.assume_aligned(mask, 4)
    X = tylo.view(x, Layout(TILE, (512, 1)))
    M = tylo.view(mask, Layout(TILE, (512, 1)))
    keep = load_fragment(M, own, tid, vector=4, fill=False) & (coordinates(own, tid, 1) < n)
    f = load_fragment(X, own, tid, vector=4, fill=-math.inf, keep=keep)
    S = SharedTile(tylo.shared(tylo.f32, 8 * 512), Layout(TILE, (512, 1)))
    store_fragment(S, f, tid, vector=4)
    tylo.sync_threads()
    g = load_fragment(S, own, tid, vector=4)
    store_fragment(tylo.view(out, Layout(TILE, (512, 1))), g, tid, vector=4)


def _buffers(*arrays):
    from tylo.arrays import DeviceBuffer

    out = []
    for a in arrays:
        d = tylo.bool_ if a.dtype == np.bool_ else None
        out.append(DeviceBuffer.from_numpy(np.ascontiguousarray(a), dtype=d))
    return out


@pytest.mark.parametrize("vec", [1, 2, 4])
@pytest.mark.parametrize("clamp", [False, True])
@pytest.mark.parametrize("shape", [(8, 512), (13, 100), (3, 4), (17, 512)])
def test_fill_and_clamp(gpu_runtime, vec, clamp, shape):
    from tylo.backend import driver

    rows, cols = shape
    grid = -(-rows // 8)
    x = np.random.default_rng().standard_normal(shape).astype(np.float32)
    (dx,) = _buffers(x)
    (dout,) = _buffers(np.full((grid * 8, 512), np.nan, np.float32))
    windows[grid, 256](dout, dx, rows, cols, striped(vec), vec, clamp)
    driver.synchronize()
    got = dout.to_numpy().reshape(grid * 8, 512)
    want = np.full((grid * 8, 512), -1.0, np.float32)
    want[:rows, :cols] = x
    if clamp:  # rows past the last read the last row (its columns still bounded)
        want[rows:, :cols] = x[rows - 1]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("vec", [1, 4])
@pytest.mark.parametrize("shape", [(13, 100), (9, 512), (1, 4)])
def test_bounded_store_writes_nothing_outside(gpu_runtime, vec, shape):
    from tylo.arrays import DeviceBuffer
    from tylo.backend import driver

    rows, cols = shape
    x = np.random.default_rng().standard_normal(shape).astype(np.float32)
    (dx,) = _buffers(x)
    pad = 4096  # poisoned elements after the array: a stray store would show there
    dout = DeviceBuffer.from_numpy(np.full(rows * cols + pad, np.nan, np.float32))
    bounded_copy[-(-rows // 8), 256](dout, dx, rows, cols, striped(vec), vec)
    driver.synchronize()
    got = dout.to_numpy()
    np.testing.assert_array_equal(got[: rows * cols].reshape(shape), 2 * x)
    assert np.isnan(got[rows * cols :]).all()


@pytest.mark.parametrize("n", [1, 37, 512])
def test_keep_masks_and_shared_staging(gpu_runtime, n):
    from tylo.backend import driver

    rng = np.random.default_rng()
    x = rng.standard_normal(TILE).astype(np.float32)
    keep = rng.random(TILE) < 0.7
    dx, dm, dout = _buffers(x, keep, np.full(TILE, np.nan, np.float32))
    masked[1, 256](dout, dx, dm, n, striped(4))
    driver.synchronize()
    want = np.where(keep & (np.arange(512)[None, :] < n), x, -np.inf)
    np.testing.assert_array_equal(dout.to_numpy().reshape(TILE), want)
