"""Times of the CPU interpreter (tylo.interpret) on vector_add (1M f32) and a row softmax
(512 x 4096 f32, one warp per row) and the warp-MMA GEMM of tylo/ops/gemm at 256^3;
Triton's interpreter beside them when importable.

``python -m benchmarks.interpret`` prints one line per problem (the first launch, which
traces, is timed apart from a second one).
"""

from __future__ import annotations

import time

import numpy as np

import tylo


@tylo.kernel
def vector_add(c, a, b, n):
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    if i < n:
        c[i] = a[i] + b[i]


@tylo.kernel
def softmax_rows(out, x, rows, cols):
    """One warp per row: max and sum by butterfly shuffles, exp via ex2."""
    t = tylo.thread_idx.x
    row = tylo.block_idx.x * (tylo.block_dim.x // 32) + t // 32
    lane = t % 32
    if row < rows:
        m = tylo.value(-float("inf"))
        for c in tylo.range(lane, cols, 32):
            m = tylo.maximum(m, x[row * cols + c])
        for off in (16, 8, 4, 2, 1):
            m = tylo.maximum(m, tylo.shfl_xor(m, off))
        s = tylo.value(0.0)
        for c in tylo.range(lane, cols, 32):
            s = s + tylo.exp(x[row * cols + c] - m)
        for off in (16, 8, 4, 2, 1):
            s = s + tylo.shfl_xor(s, off)
        for c in tylo.range(lane, cols, 32):
            out[row * cols + c] = tylo.exp(x[row * cols + c] - m) / s


def _time(f) -> float:
    t = time.perf_counter()
    f()
    return time.perf_counter() - t


def gemm(m: int = 256, n: int = 256, k: int = 256) -> None:
    """The warp-MMA GEMM of tylo/ops/gemm (bf16 in, f32 out) at m x n x k."""
    from tylo.interpret import HostArray
    from tylo.interpret.numerics import bf16_to_f32, f32_to_bf16
    from tylo.ops.gemm.host import choose_config
    from tylo.ops.gemm.kernel import tiled_gemm_kernel

    rng = np.random.default_rng(1)
    a = f32_to_bf16(rng.standard_normal((m, k)).astype(np.float32))
    b = f32_to_bf16(rng.standard_normal((n, k)).astype(np.float32))
    cfg = choose_config(m, n, k, k, k, dtype=tylo.bf16, ldd=m)
    d = np.full((n, m), np.nan, np.float32)

    def run() -> None:
        tiled_gemm_kernel.interpret[cfg.grid(m, n), cfg.plan.threads](
            cfg, d, HostArray(a, tylo.bf16), HostArray(b, tylo.bf16), m, n, k, k, k, m, 1.0,
            False, shared=cfg.shared_bytes,
        )  # fmt: skip

    first, second = _time(run), _time(run)
    want = bf16_to_f32(a).astype(np.float64) @ bf16_to_f32(b).astype(np.float64).T
    err = np.abs(d.T - want).max() / np.abs(want).max()
    print(f"gemm {m}x{n}x{k} (warp MMA, bf16): {second:.2f} s (first: {first:.2f} s), "
          f"max relative error {err:.1e}")  # fmt: skip


def main() -> None:
    """Run and print the benchmark."""
    rng = np.random.default_rng(0)
    n = 1 << 20
    a, b = rng.standard_normal((2, n)).astype(np.float32)
    c = np.zeros(n, np.float32)

    def run_vector_add() -> None:
        vector_add.interpret[n // 256, 256](c, a, b, n)

    first, second = _time(run_vector_add), _time(run_vector_add)
    assert np.array_equal(c, a + b)
    print(f"vector_add n=2^20: {second:.2f} s (first launch, with tracing: {first:.2f} s)")
    rows, cols = 512, 4096
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    out = np.zeros_like(x)

    def run_softmax() -> None:
        softmax_rows.interpret[rows // 8, 256](out, x, rows, cols)

    first, second = _time(run_softmax), _time(run_softmax)
    e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
    err = np.abs(out - e / e.sum(1, keepdims=True)).max()
    print(f"softmax {rows}x{cols}: {second:.2f} s (first: {first:.2f} s), max error {err:.1e}")
    gemm()
    try:
        import triton  # noqa: F401
    except ImportError:
        print("Triton's interpreter: triton is not installed here; no comparison")


if __name__ == "__main__":
    main()
