"""Vector add: ``c[i] = a[i] + b[i]`` for ``i < n``, one element per thread.

The smallest complete tylo kernel: a runtime length ``n`` (a symbol inside the kernel; the
launch checks it is >= 1), the global thread index built from ``block_idx``,
``block_dim`` and ``thread_idx``, a dynamic bounds check, and loads and stores through
the pointer parameters. Works for any float dtype the arrays have (each dtype is its own
specialization).
"""

from __future__ import annotations

from typing import Any

import numpy as np

import tylo

__all__ = ["BLOCK", "launch", "reference", "vector_add", "verify"]

BLOCK = 256  # threads per block


# --8<-- [start:kernel]
@tylo.kernel
def vector_add(c, a, b, n):
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    if i < n:
        c[i] = a[i] + b[i]


# --8<-- [end:kernel]


def launch(c: Any, a: Any, b: Any, n: int, *, stream: Any = None) -> None:
    """``c[:n] = a[:n] + b[:n]`` on the GPU (arrays: DeviceBuffers or torch/CuPy/JAX)."""
    vector_add[(n + BLOCK - 1) // BLOCK, BLOCK](c, a, b, n, stream=stream)


def reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The float64 sum."""
    return a.astype(np.float64) + b.astype(np.float64)


def verify(
    n: int, *, dtype: Any = np.float32, use_torch: bool = False, seed: int | None = None
) -> float:
    """Run on fresh random data of length ``n`` (output poisoned with NaN first) and
    compare with :func:`reference`; returns the largest absolute error, raises
    AssertionError on a mismatch."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(n).astype(dtype)
    b = rng.standard_normal(n).astype(dtype)
    if use_torch:
        import torch

        ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
        tc = torch.full((n,), float("nan"), dtype=ta.dtype, device="cuda")
        launch(tc, ta, tb, n)
        torch.cuda.synchronize()
        got = tc.cpu().numpy()
    else:
        from tylo.arrays import DeviceBuffer
        from tylo.backend import driver

        da, db = DeviceBuffer.from_numpy(a), DeviceBuffer.from_numpy(b)
        dc = DeviceBuffer.empty(n, a.dtype).fill_bytes(0xFF)  # NaN poison
        launch(dc, da, db, n)
        driver.synchronize()
        got = dc.to_numpy()
    want = reference(a, b)
    err = np.abs(got.astype(np.float64) - want)
    tol = np.finfo(dtype).eps * (np.abs(want) + 1.0) * 2
    bad = ~(err <= tol)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise AssertionError(
            f"vector_add n={n}: {int(bad.sum())} wrong elements; first at {k}: got {got[k]}, "
            f"want {want[k]}"
        )
    return float(err.max()) if n else 0.0
