"""Row reduction: ``out[r] = sum(x[r, :])`` or ``max(x[r, :])`` over a 2-D array.

The array is described by a layout with runtime extents and strides,
``Layout((rows, cols), (ld, cs))``; when the host finds the rows 16-byte aligned and the
column stride 1, the kernel is specialized for 16-byte vector loads (``ld.global.v4.f32``)
and *states* what that needs (:func:`tylo.assume_aligned`, :func:`tylo.assume`), which
every launch checks. Each row is reduced by one warp (or, for few long rows, by a whole
block): every thread keeps ``unroll`` independent accumulators and issues ``unroll``
vector loads per iteration (enough bytes in flight to saturate HBM), reduces them, then
the warp reduces with butterfly shuffles (``shfl.sync.bfly``) and, for a block per row,
the warps combine through shared memory. Columns past the last full vector chunk are read
with scalar loads.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

import tylo
from tylo.layouts import Layout

__all__ = [
    "BLOCK",
    "CACHE",
    "OPS",
    "UNROLL",
    "compile_for",
    "launch",
    "plan",
    "reference",
    "row_reduce_kernel",
    "verify",
]

OPS = ("sum", "max")
UNROLL = 4  # independent vector loads in flight per thread and iteration
BLOCK = 256  # threads per block: 8 warps
CACHE = None  # PTX cache qualifier of the loads (None: plain ld.global)
WARPS_PER_ROW = 4  # warps sharing a row (fewer rows in flight at once: better DRAM locality)


def _combine(op: str, a: Any, b: Any) -> Any:
    return a + b if op == "sum" else tylo.maximum(a, b)


# --8<-- [start:kernel]
@tylo.kernel
def row_reduce_kernel(
    out,
    x: tylo.Ptr(strided=True),  # read through Layout((rows, cols), (ld, cs)): any strides
    rows,
    cols,
    ld,
    cs,
    op: tylo.Static,
    vec: tylo.Static,
    warps_per_row: tylo.Static,
    unroll: tylo.Static,
    cache: tylo.Static,
):
    if vec > 1:  # static: the host chose 16-byte vectors; launches check the facts
        x = tylo.assume_aligned(x, x.dtype.nbytes * vec)
        tylo.assume(tylo.divisible(ld, vec))
        xv = tylo.view(x, Layout((rows, cols), (ld, 1)))
    else:
        xv = tylo.view(x, Layout((rows, cols), (ld, cs)))
    acc_dtype = tylo.f64 if x.dtype == tylo.f64 else tylo.f32
    init = 0.0 if op == "sum" else -math.inf
    threads = tylo.WARP_SIZE * warps_per_row  # threads sharing one row
    t = tylo.thread_idx.x
    row = tylo.block_idx.x * (tylo.block_dim.x // threads) + t // threads
    tr = t % threads  # rank within the row
    chunk = threads * vec  # columns one sweep of vector loads covers
    acc = tylo.value(init, acc_dtype)
    if row < rows:
        accs = [acc] * unroll
        main = cols - cols % (chunk * unroll)  # columns covered by full unrolled sweeps
        for c in tylo.range(tr * vec, main, chunk * unroll):
            # issue every load of the sweep before using any: unroll x 16 bytes in flight
            loads = [xv.load((row, c + u * chunk), vector=vec, cache=cache) for u in range(unroll)]
            for u in range(unroll):
                loaded = loads[u] if vec > 1 else (loads[u],)
                part = loaded[0].to(acc_dtype)
                for v in loaded[1:]:
                    part = _combine(op, part, v.to(acc_dtype))
                accs[u] = _combine(op, accs[u], part)
        while len(accs) > 1:  # pairwise: a short dependency chain
            accs = [_combine(op, accs[k], accs[k + 1]) for k in range(0, len(accs), 2)]
        acc = accs[0]
        for c in tylo.range(main + tr, cols, threads):  # the tail, one element at a time
            acc = _combine(op, acc, xv[row, c].to(acc_dtype))
    # every lane of every warp takes part from here on (shuffles, the barrier)
    for offset in (16, 8, 4, 2, 1):  # butterfly: every lane ends with the warp's result
        acc = _combine(op, acc, tylo.shfl_xor(acc, offset))
    if warps_per_row > 1:  # the warps of a row combine their results in shared memory
        warps = tylo.block_dim.x // tylo.WARP_SIZE
        partial = tylo.shared(acc_dtype, warps)
        if tylo.lane_id() == 0:
            partial[tylo.warp_id()] = acc
        tylo.sync_threads()
        first = (t // threads) * warps_per_row
        acc = partial[first]
        for w in range(1, warps_per_row):
            acc = _combine(op, acc, partial[first + w])
    if row < rows and tr == 0:
        out[row] = acc.to(out.dtype)


# --8<-- [end:kernel]


def plan(
    rows: int,
    cols: int,
    ld: int,
    cs: int,
    ptr: int,
    itemsize: int,
    *,
    block: int = BLOCK,
    warps_per_row: int | None = None,
) -> dict[str, int]:
    """The static configuration for a launch: vector width (16 bytes when the rows are
    16-byte aligned and contiguous), warps per row (a whole block for few long rows) and
    the grid."""
    vec = 16 // itemsize if (cs == 1 and ptr % 16 == 0 and (ld * itemsize) % 16 == 0) else 1
    if cols == 1 and cs != 1:
        vec = 1
    warps = block // tylo.WARP_SIZE
    if warps_per_row is None:
        warps_per_row = warps if (rows < 2 * 132 and cols >= 2048) else WARPS_PER_ROW
    warps_per_row = min(warps_per_row, warps)
    rows_per_block = warps // warps_per_row
    grid = (rows + rows_per_block - 1) // rows_per_block
    return {"vec": vec, "warps_per_row": warps_per_row, "grid": grid}


def launch(
    out: Any,
    x: Any,
    op: str = "sum",
    *,
    stream: Any = None,
    block: int = BLOCK,
    unroll: int = UNROLL,
    cache: str | None = CACHE,
    warps_per_row: int | None = None,
) -> dict[str, int]:
    """``out[r] = op(x[r, :])`` for a 2-D device array ``x`` (DeviceBuffer, torch, CuPy,
    JAX; any strides) and a 1-D ``out`` of the same dtype; returns the plan used."""
    from tylo.arrays import as_device_array

    if op not in OPS:
        raise ValueError(f"op must be one of {OPS}, got {op!r}")
    a = as_device_array(x)
    if a.ndim != 2:
        raise ValueError(f"row_reduce: x must be 2-D, got shape {a.shape}")
    rows, cols = a.shape
    ld, cs = a.strides
    p = plan(rows, cols, ld, cs, a.ptr, a.dtype.nbytes, block=block, warps_per_row=warps_per_row)
    row_reduce_kernel[p["grid"], block](
        out,
        x,
        rows,
        cols,
        max(ld, 1),
        max(cs, 1),
        op,
        p["vec"],
        p["warps_per_row"],
        unroll,
        cache,
        stream=stream,
    )
    return p


def compile_for(
    op: str,
    vec: int,
    warps_per_row: int,
    target: Any,
    *,
    block: int = BLOCK,
    unroll: int = UNROLL,
    cache: str | None = CACHE,
) -> Any:
    """Compile the f32 specialization :func:`launch` would use, without a GPU."""
    f32 = tylo.f32
    return row_reduce_kernel.compile(
        f32,
        f32,
        int,
        int,
        int,
        int,
        op,
        vec,
        warps_per_row,
        unroll,
        cache,
        block=block,
        target=target,
    )


def reference(x: np.ndarray, op: str = "sum") -> np.ndarray:
    """The float64 row sums or maxima."""
    x64 = x.astype(np.float64)
    return x64.sum(axis=1) if op == "sum" else x64.max(axis=1)


def verify(
    rows: int,
    cols: int,
    op: str = "sum",
    *,
    use_torch: bool = False,
    seed: int | None = None,
    transpose: bool = False,
    offset: int = 0,
    **options: Any,
) -> dict[str, Any]:
    """Reduce fresh random ``rows x cols`` f32 data on the GPU (output poisoned with NaN
    first) and compare with :func:`reference`. ``transpose`` reads the array through a
    column-major view (column stride != 1: the scalar path); ``offset`` starts the data
    ``offset`` elements into its allocation (misaligned rows: the scalar path). Returns
    the plan and the largest relative error; raises AssertionError on a mismatch.
    ``options`` go to :func:`launch` (block, unroll, cache, warps_per_row)."""
    rng = np.random.default_rng(seed)
    host = rng.standard_normal((rows, cols)).astype(np.float32)
    storage = np.ascontiguousarray(host.T) if transpose else host
    flat = np.concatenate([np.zeros(offset, np.float32), storage.ravel()])
    if use_torch:
        import torch

        buf = torch.from_numpy(flat).cuda()[offset:]
        x = buf.view(cols, rows).t() if transpose else buf.view(rows, cols)
        out = torch.full((rows,), float("nan"), dtype=torch.float32, device="cuda")
        p = launch(out, x, op, **options)
        torch.cuda.synchronize()
        got = out.cpu().numpy()
    else:
        from tylo.arrays import DeviceArray, DeviceBuffer
        from tylo.backend import driver

        buf = DeviceBuffer.from_numpy(flat)
        strides = (1, rows) if transpose else (cols, 1)
        x = DeviceArray(
            buf.ptr + 4 * offset, (rows, cols), strides, tylo.f32, buf.device, owner=buf
        )
        out_buf = DeviceBuffer.empty(rows, tylo.f32).fill_bytes(0xFF)  # NaN poison
        p = launch(out_buf, x, op, **options)
        driver.synchronize()
        got = out_buf.to_numpy()
    want = reference(host, op)
    scale = np.abs(host.astype(np.float64)).sum(axis=1) if op == "sum" else np.abs(want)
    err = np.abs(got.astype(np.float64) - want) / np.maximum(scale, 1e-30)
    tol = 1e-6 * math.sqrt(cols) + 1e-6 if op == "sum" else 0.0
    bad = ~(err <= tol)
    if bad.any():
        r = int(np.flatnonzero(bad)[0])
        raise AssertionError(
            f"row_reduce {op} {rows}x{cols} (plan {p}): {int(bad.sum())} wrong rows; first "
            f"row {r}: got {got[r]}, want {want[r]}"
        )
    return {**p, "max_rel_error": float(err.max())}
