"""Hopper GEMM against cuBLAS (torch.matmul), interleaved in one process, CUDA events, medians.

    PYTHONPATH=$PWD python3 benchmarks/hopper_gemm.py [--reps 20] [--shapes M,N,K ...]

Both sides compute D = A @ B with A (M, K) and B (N, K) K-contiguous (torch: a @ b.T); tylo
writes D M-contiguous. Prints shape, path, times, the ratio (>1: tylo faster) and TFLOP/s,
plus a wgmma-ceiling estimate measured in the same run (cuBLAS at 8192^3 is the reference
ceiling here: tylo's own ceiling kernel is future work).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 8192, 512), (16384, 1024, 4096),
          (4099, 4103, 4097)]


def bench(m, n, k, reps, cfg):
    import torch

    from examples.hopper_gemm.host import gemm

    a = torch.randn(m, k, device="cuda").to(torch.bfloat16)
    b = torch.randn(n, k, device="cuda").to(torch.bfloat16)
    d = torch.empty(n, m, device="cuda")
    path = gemm(d, a, b, m, n, k, k, k, m, cfg=cfg)  # compile and warm up
    bt = b.t()
    torch.matmul(a, bt)
    torch.cuda.synchronize()
    ts, tc = [], []
    for _ in range(reps):
        for which in ("tylo", "cublas"):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            if which == "tylo":
                gemm(d, a, b, m, n, k, k, k, m, cfg=cfg)
            else:
                torch.matmul(a, bt)
            e.record()
            torch.cuda.synchronize()
            (ts if which == "tylo" else tc).append(s.elapsed_time(e))
    t, c = statistics.median(ts), statistics.median(tc)
    flops = 2 * m * n * k
    return {"shape": f"{m}x{n}x{k}", "path": path, "tylo_ms": t, "cublas_ms": c,
            "ratio": c / t, "tylo_tflops": flops / t / 1e9, "cublas_tflops": flops / c / 1e9}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--shapes", nargs="*", default=None)
    p.add_argument("--m-atoms", type=int, choices=(1, 2), default=1)
    p.add_argument("--bn", type=int, choices=(128, 256), default=None,
                   help="tile columns (default: gemm()'s choice, 256 when N >= 2048)")
    args = p.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("benchmarks/hopper_gemm.py needs a CUDA GPU and torch", file=sys.stderr)
        return 2
    from examples.hopper_gemm.kernel import HopperGemmConfig

    cfg = HopperGemmConfig(bn=args.bn, m_atoms=args.m_atoms) if args.bn else None
    shapes = [tuple(map(int, s.split(","))) for s in args.shapes] if args.shapes else SHAPES
    what = cfg.describe() if cfg else "tiles chosen by examples.hopper_gemm.host.gemm"
    print(f"device: {torch.cuda.get_device_name(0)}; tylo {what}")
    print(f"{'shape':>20} {'path':>6} {'tylo ms':>9} {'cuBLAS ms':>10} {'ratio':>6} "
          f"{'tylo TF/s':>9} {'cuBLAS TF/s':>11}")
    rows = []
    for m, n, k in shapes:
        r = bench(m, n, k, args.reps, cfg)
        rows.append(r)
        print(f"{r['shape']:>20} {r['path']:>6} {r['tylo_ms']:9.3f} {r['cublas_ms']:10.3f} "
              f"{r['ratio']:6.2f} {r['tylo_tflops']:9.1f} {r['cublas_tflops']:11.1f}", flush=True)
    out = os.environ.get("OUT")
    if out:
        with open(os.path.join(out, "hopper_gemm.json"), "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
