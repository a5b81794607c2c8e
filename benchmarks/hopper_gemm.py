"""Hopper GEMM against cuBLAS (torch.matmul) and Triton, interleaved in one process, CUDA
events, medians.

    PYTHONPATH=$PWD python3 benchmarks/hopper_gemm.py [--reps 20] [--shapes M,N,K ...]
        [--out bf16|f32] [--bn 128|256] [--stages N] [--group G] [--tma-store] [--json FILE]

Every side computes D = A @ B with A (M, K) and B (N, K) K-contiguous, bf16 (torch: a @ b.T;
Triton: a plain ``tl.dot`` kernel, which Triton lowers to TMA-free wgmma on sm_90, and
Triton's TMA GEMM through tensor descriptors where this Triton has them, on the shapes TMA
takes); D is bf16 unless ``--out f32`` (tylo writes D M-contiguous, cuBLAS and Triton
row-major). The columns: times, the ratios cuBLAS/tylo and Triton/tylo (>1: tylo faster),
TFLOP/s, and ``ceiling``: the same tylo
kernel with its TMA loads switched off (``HopperGemmConfig(loads=False)``: the wgmma issue,
barrier and epilogue cost alone), so ``of ceiling`` is the fraction of its own MMA-bound
speed the full kernel reaches. Each sample times ``--inner`` launches back to back (GPU
time); ``host us`` is the host's time per tylo ``gemm()`` call.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from benchmarks import provenance

SHAPES = [
    (4096, 4096, 4096),
    (8192, 8192, 8192),
    (8192, 8192, 512),
    (16384, 1024, 4096),
    (4099, 4103, 4097),
]


def _triton_matmul():
    """A plain Triton GEMM (c = a @ b.T, bf16 in and out), or None without Triton."""
    try:
        import triton
        import triton.language as tl
    except Exception as e:  # noqa: BLE001 - any import failure means "not available"
        print(f"triton: not available ({type(e).__name__}: {e})")
        return None

    @triton.jit
    def kernel(
        a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, G: tl.constexpr
    ):
        pid = tl.program_id(0)
        tiles_m, tiles_n = tl.cdiv(M, BM), tl.cdiv(N, BN)
        band = pid // (G * tiles_n)
        first = band * G
        rows = min(tiles_m - first, G)
        pm = first + (pid % (G * tiles_n)) % rows
        pn = (pid % (G * tiles_n)) // rows
        rm = pm * BM + tl.arange(0, BM)
        rn = pn * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k0 in range(0, K, BK):
            x = tl.load(
                a + rm[:, None] * K + (k0 + rk)[None, :],
                mask=(rm[:, None] < M) & ((k0 + rk)[None, :] < K),
                other=0.0,
            )
            y = tl.load(
                b + rn[:, None] * K + (k0 + rk)[None, :],
                mask=(rn[:, None] < N) & ((k0 + rk)[None, :] < K),
                other=0.0,
            )
            acc = tl.dot(x, tl.trans(y), acc)
        tl.store(
            c + rm[:, None] * N + rn[None, :],
            acc.to(tl.bfloat16),
            mask=(rm[:, None] < M) & (rn[None, :] < N),
        )

    def run(a, b, c):
        m, k = a.shape
        n = b.shape[0]
        grid = (triton.cdiv(m, 128) * triton.cdiv(n, 256),)
        kernel[grid](a, b, c, m, n, k, BM=128, BN=256, BK=64, G=8, num_warps=8, num_stages=3)

    return run


def _triton_tma_matmul():
    """Triton's TMA GEMM (tensor descriptors: ``a_desc.load`` / ``c_desc.store``, which Triton
    lowers to TMA and wgmma on sm_90; c = a @ b.T, bf16), or None where this Triton has no
    host-side ``TensorDescriptor`` (Triton >= 3.4)."""
    try:
        import triton
        import triton.language as tl
        from triton.tools.tensor_descriptor import TensorDescriptor
    except Exception as e:  # noqa: BLE001 - any import failure means "not available"
        print(f"triton TMA GEMM: not available ({type(e).__name__}: {e})")
        return None

    @triton.jit
    def kernel(
        a_desc,
        b_desc,
        c_desc,
        M,
        N,
        K,
        BM: tl.constexpr,
        BN: tl.constexpr,
        BK: tl.constexpr,
        G: tl.constexpr,
    ):
        pid = tl.program_id(0)
        tiles_m, tiles_n = tl.cdiv(M, BM), tl.cdiv(N, BN)
        band = pid // (G * tiles_n)
        first = band * G
        rows = min(tiles_m - first, G)
        pm = first + (pid % (G * tiles_n)) % rows
        pn = (pid % (G * tiles_n)) // rows
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k0 in range(0, K, BK):
            x = a_desc.load([pm * BM, k0])
            y = b_desc.load([pn * BN, k0])
            acc = tl.dot(x, y.T, acc)
        c_desc.store([pm * BM, pn * BN], acc.to(tl.bfloat16))

    def run(a, b, c, BM=128, BN=256, BK=64):
        m, k = a.shape
        n = b.shape[0]
        descs = (
            TensorDescriptor.from_tensor(a, [BM, BK]),
            TensorDescriptor.from_tensor(b, [BN, BK]),
            TensorDescriptor.from_tensor(c, [BM, BN]),
        )
        grid = (triton.cdiv(m, BM) * triton.cdiv(n, BN),)
        kernel[grid](*descs, m, n, k, BM=BM, BN=BN, BK=BK, G=8, num_warps=8, num_stages=4)

    return run


def bench(m, n, k, reps, cfg, out, triton_mm, inner=1):
    import dataclasses

    import torch

    from tylo.ops.gemm.hopper_host import chosen_config, gemm

    odt = torch.bfloat16 if out == "bf16" else torch.float32
    a = torch.randn(m, k, device="cuda").to(torch.bfloat16)
    b = torch.randn(n, k, device="cuda").to(torch.bfloat16)
    d = torch.empty(n, m, device="cuda", dtype=odt)
    d2 = torch.empty(n, m, device="cuda", dtype=odt)
    bt = b.t()
    ct = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    path = gemm(d, a, b, m, n, k, k, k, m, cfg=cfg)  # compile and warm up
    ran = chosen_config(d, a, b, m, n, k, k, k, m, cfg=cfg)  # what gemm() ran (its choice)
    ceil_cfg = ran and dataclasses.replace(ran, loads=False)
    sides = {
        "tylo": lambda: gemm(d, a, b, m, n, k, k, k, m, cfg=cfg),
        "cublas": lambda: torch.matmul(a, bt),
    }
    if path == "hopper":
        sides["ceiling"] = lambda: gemm(d2, a, b, m, n, k, k, k, m, cfg=ceil_cfg)
    for name, fn in (triton_mm or {}).items():
        try:  # a shape Triton cannot take (TMA: 16-byte row strides) is skipped
            fn(a, b, ct)
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 - report and go on without this side
            first = str(e).splitlines()[0][:90]
            print(f"  {name} skipped at {m}x{n}x{k}: {type(e).__name__}: {first}")
            continue
        sides[name] = lambda fn=fn: fn(a, b, ct)
    for f in sides.values():
        f()
    torch.cuda.synchronize()
    times = {name: [] for name in sides}
    host = {name: [] for name in sides}
    names = list(sides)
    for i in range(reps):  # interleaved, the round's first side rotating
        for name in names[i % len(names) :] + names[: i % len(names)]:
            f = sides[name]
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            h0 = time.perf_counter()
            for _ in range(inner):  # back to back: the GPU time, not the host's launch time
                f()
            h1 = time.perf_counter()
            e.record()
            torch.cuda.synchronize()
            times[name].append(s.elapsed_time(e) / inner)
            host[name].append((h1 - h0) / inner * 1e6)
    med = {name: statistics.median(v) for name, v in times.items()}
    flops = 2 * m * n * k
    row = {
        "shape": f"{m}x{n}x{k}",
        "path": path,
        "out": out,
        "inner": inner,
        "tylo_host_us": statistics.median(host["tylo"]),
        "cublas_host_us": statistics.median(host["cublas"]),
    }
    for name, t in med.items():
        row[f"{name}_ms"] = t
        row[f"{name}_tflops"] = flops / t / 1e9
    row["ratio"] = med["cublas"] / med["tylo"]
    for name in ("triton", "triton_tma"):
        if name in med:
            row[f"ratio_{name}"] = med[name] / med["tylo"]
    if "ceiling" in med:
        row["of_ceiling"] = med["ceiling"] / med["tylo"]
    return row


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--shapes", nargs="*", default=None)
    p.add_argument("--out", choices=("bf16", "f32"), default="bf16", help="D's dtype")
    p.add_argument("--m-atoms", type=int, choices=(1, 2), default=1)
    p.add_argument(
        "--bn",
        type=int,
        choices=(128, 256),
        default=None,
        help="tile columns; with it the flags below make an explicit config "
        "(default: gemm()'s own choice, tylo.ops.gemm.hopper_host.default_config)",
    )
    p.add_argument("--stages", type=int, default=4)
    p.add_argument("--group", type=int, default=8, help="raster band height (tile-rows)")
    p.add_argument("--pingpong", action="store_true", help="consumers alternate tiles")
    p.add_argument(
        "--cluster",
        type=int,
        choices=(1, 2),
        default=1,
        help="2: CTA pairs multicast the shared Y tile",
    )
    p.add_argument(
        "--tma-store",
        action="store_true",
        help="with --bn: the TMA-store epilogue (stmatrix, then TMA; --out bf16 "
        "only; gemm()'s default takes it for bf16 D)",
    )
    p.add_argument(
        "--inner",
        type=int,
        default=5,
        help="launches per timed sample, back to back (1: include launch gaps)",
    )
    p.add_argument("--no-triton", action="store_true")
    p.add_argument("--json", default=None, help="write the rows to this file")
    provenance.add_arguments(p)
    args = p.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("benchmarks/hopper_gemm.py needs a CUDA GPU and torch", file=sys.stderr)
        return 2
    import tylo
    from tylo.ops.gemm.hopper_kernel import HopperGemmConfig

    if args.tma_store and args.out != "bf16":
        print("--tma-store writes 16-bit D (stmatrix): use --out bf16", file=sys.stderr)
        return 2
    out = getattr(tylo, args.out)
    cfg = (
        HopperGemmConfig(
            bn=args.bn,
            m_atoms=args.m_atoms,
            stages=args.stages,
            out=out,
            group=args.group,
            pingpong=args.pingpong,
            cluster=args.cluster,
            tma_store=args.tma_store,
        )
        if args.bn
        else None
    )
    triton_mm = (
        {} if args.no_triton else {"triton": _triton_matmul(), "triton_tma": _triton_tma_matmul()}
    )
    triton_mm = {name: fn for name, fn in triton_mm.items() if fn is not None}
    shapes = [tuple(map(int, s.split(","))) for s in args.shapes] if args.shapes else SHAPES
    what = cfg.describe() if cfg else "tiles chosen by tylo.ops.gemm.hopper_host.gemm"
    print(f"device: {torch.cuda.get_device_name(0)}; tylo {what}; D {args.out}")
    print(
        f"{'shape':>18} {'path':>6} {'tylo ms':>8} {'cuBLAS':>8} {'ratio':>6} {'triton':>8} "
        f"{'vs tri':>6} {'vs tri-TMA':>10} {'tylo TF/s':>9} {'cuBLAS TF/s':>11} "
        f"{'of ceiling':>10} {'host us':>8}"
    )
    rows = []
    for m, n, k in shapes:
        r = bench(m, n, k, args.reps, cfg, args.out, triton_mm, args.inner)
        rows.append(r)
        tri = (
            f"{r['triton_ms']:8.3f} {r['ratio_triton']:6.2f}"
            if "triton_ms" in r
            else f"{'-':>8} {'-':>6}"
        )
        tri += f" {r['ratio_triton_tma']:10.2f}" if "triton_tma_ms" in r else f" {'-':>10}"
        ceil = f"{r['of_ceiling']:10.2f}" if "of_ceiling" in r else f"{'-':>10}"
        print(
            f"{r['shape']:>18} {r['path']:>6} {r['tylo_ms']:8.3f} {r['cublas_ms']:8.3f} "
            f"{r['ratio']:6.2f} {tri} {r['tylo_tflops']:9.1f} {r['cublas_tflops']:11.1f} {ceil} "
            f"{r['tylo_host_us']:8.1f}",
            flush=True,
        )
    out_dir = os.environ.get("OUT")
    path = args.json or (os.path.join(out_dir, "hopper_gemm.json") if out_dir else None)
    if path:
        meta = provenance.run_metadata(
            ("torch", "triton"),
            script="benchmarks/hopper_gemm.py",
            argv=argv,
            commit=args.commit,
            dirty=args.dirty,
        )
        provenance.write_json(path, rows, meta)
    return 0


if __name__ == "__main__":
    sys.exit(main())
