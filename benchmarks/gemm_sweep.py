"""Sweep GEMM plan variants (tile shape, K-tile, stages, epilogue, rasterization) in one run.

    PYTHONPATH=$PWD python3 benchmarks/gemm_sweep.py [--reps 15] [--only NAME ...]

First, without a GPU too, every variant is planned (proofs), compiled for the device's
target (sm_90a without one) and its SASS summarized: registers, spills, and per main-loop
iteration the HMMA / LDSM / LDGSTS / barrier counts and the instruction total. With a GPU,
every variant is then verified against float32 and timed at bf16 4096^3 and 8192^3,
interleaved with cuBLAS (CUDA events, medians); the table is sorted by the mean of the two
ratios and the best variant is named. Failures of one variant are reported and do not stop
the sweep. The variants are the ones worth timing now (benchmarks/NOTES-gemm.md says why);
the whole sweep takes about a minute on an H200.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import traceback
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

SHAPES = ((4096, 4096, 4096), (8192, 8192, 8192))

from benchmarks import provenance
from benchmarks.gemm_variants import variants  # noqa: E402 - after the sys.path set-up


def compile_all(cfgs: dict[str, Any], target: Any) -> dict[str, Any]:
    from tylo.ops.gemm.host import compile_gemm
    from tylo.ops.gemm.kernel import sass_summary

    info = {}
    print(
        f"{'variant':>32} {'regs':>4} {'spill':>5} {'smem':>5} {'HMMA':>4} {'LDSM':>4} "
        f"{'LDGSTS':>6} {'BAR':>3} {'loop':>4} {'compile':>7}"
    )
    for name, cfg in cfgs.items():
        t = time.perf_counter()
        try:
            k = compile_gemm(cfg, target)
        except Exception as err:  # noqa: BLE001 - report and continue
            print(f"{name:>32} compile failed: {type(err).__name__}: {err}")
            continue
        s = sass_summary(k)
        lp = s["loop"]
        info[name] = {"summary": s, "compiled": k}
        print(
            f"{name:>32} {s['registers']:4d} {sum(s['spills']):5d} "
            f"{cfg.shared_bytes // 1024:4d}K {lp['HMMA']:4d} {lp['LDSM']:4d} "
            f"{lp['LDGSTS']:6d} {lp['BAR']:3d} {lp['instructions']:4d} "
            f"{time.perf_counter() - t:6.1f}s"
        )
    return info


def sweep(cfgs: dict[str, Any], info: dict[str, Any], reps: int) -> list[dict[str, Any]]:
    import torch

    from benchmarks.gemm import check, interleaved, make_inputs, occupancy, tylo_runner

    stream = torch.cuda.current_stream()
    rows = []
    for shape in SHAPES:
        m, n, k = shape
        flops = 2.0 * m * n * k
        sets = make_inputs(torch, shape, True, 1)
        s0 = sets[0]
        want = s0["av"].float() @ s0["bv"].float().t()
        fns: dict[str, Any] = {"cuBLAS": lambda i, s0=s0: torch.matmul(s0["av"], s0["bv"].t())}
        for name, entry in info.items():
            run = tylo_runner(cfgs[name], stream)

            def fn(i: int, run: Any = run, s0: dict = s0, mnk: tuple = shape) -> None:
                run(s0["d"], s0["a"], s0["b"], *mnk, s0["lda"], s0["ldb"], s0["ldd"])

            try:
                s0["d"].fill_(float("nan"))
                fn(0)
                torch.cuda.synchronize()
                entry["error"] = check(name, s0["d"][:, :m].t(), want)
                fns[name] = fn
            except Exception as err:  # noqa: BLE001 - report and continue
                print(f"{name} at {m}x{n}x{k}: FAILED: {type(err).__name__}: {err}")
                traceback.print_exc(limit=2)
        for fn in fns.values():
            for i in range(3):
                fn(i)
        times = interleaved(fns, reps, torch)
        base = statistics.median(times["cuBLAS"])
        for name, t in times.items():
            med = statistics.median(t)
            extra = {}
            if name in info:
                cfg = cfgs[name]
                extra = {
                    "registers": info[name]["summary"]["registers"],
                    "blocks/SM": occupancy(
                        info[name]["compiled"], cfg.plan.threads, cfg.shared_bytes
                    ),
                    "error": info[name].get("error"),
                }
            rows.append(
                {
                    "variant": name,
                    "shape": f"{m}x{n}x{k}",
                    "ms": med,
                    "tflops": flops / med / 1e9,
                    "vs_cublas": base / med,
                    "spread": (max(t) - min(t)) / med,
                    **extra,
                }
            )
        print(f"-- {m}x{n}x{k}: cuBLAS {base:.3f} ms ({flops / base / 1e9:.0f} TFLOP/s)")
    return rows


def print_table(rows: list[dict[str, Any]]) -> str | None:
    by: dict[str, dict[str, dict[str, Any]]] = {}
    for r in rows:
        by.setdefault(r["variant"], {})[r["shape"]] = r
    keys = [f"{m}x{n}x{k}" for m, n, k in SHAPES]
    order = sorted(by, key=lambda v: -sum(by[v].get(key, {}).get("vs_cublas", 0.0) for key in keys))
    head = f"{'variant':>32} " + " ".join(f"{s:>26}" for s in keys) + f" {'regs':>4} {'blk':>3}"
    print(head)
    print(" " * 33 + " ".join(f"{'TFLOP/s  x cuBLAS  spread':>26}" for _ in keys))
    for v in order:
        cells = []
        for key in keys:
            r = by[v].get(key)
            cells.append(
                f"{r['tflops']:8.1f} {r['vs_cublas']:9.3f} {r['spread']:7.2f}"
                if r
                else f"{'-':>26}"
            )
        any_row = next(iter(by[v].values()))
        print(
            f"{v:>32} "
            + " ".join(f"{c:>26}" for c in cells)
            + f" {any_row.get('registers', '-')!s:>4} {any_row.get('blocks/SM', '-')!s:>3}"
        )
    best = next((v for v in order if v != "cuBLAS"), None)
    if best:
        print(f"best: {best}")
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--only", nargs="*", default=None, help="variant names to keep")
    parser.add_argument("--compile-only", action="store_true")
    parser.add_argument(
        "--then-benchmark",
        action="store_true",
        help="then run benchmarks/gemm.py with the best variant",
    )
    provenance.add_arguments(parser)
    args = parser.parse_args(argv)
    from tylo.target import Target

    cfgs = variants()
    if args.only:
        cfgs = {k: v for k, v in cfgs.items() if k in args.only}
    try:
        target = Target.from_device(0)
        gpu = True
    except Exception:  # noqa: BLE001 - no GPU: compile and summarize only
        target, gpu = Target.parse("sm_90a"), False
    print(f"target {target}; {len(cfgs)} variants")
    info = compile_all(cfgs, target)
    if args.compile_only or not gpu:
        print("no GPU (or --compile-only): compiled and summarized, not timed")
        return 0
    import torch

    print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
    rows = sweep(cfgs, info, args.reps)
    best = print_table(rows)
    out = os.environ.get("OUT")
    if out:
        meta = provenance.run_metadata(
            ("torch",), script="benchmarks/gemm_sweep.py", argv=argv,
            commit=args.commit, dirty=args.dirty,
        )  # fmt: skip
        provenance.write_json(os.path.join(out, "gemm_sweep.json"), rows, meta, best=best)
    if args.then_benchmark and best:
        from benchmarks.gemm import main as benchmark

        print(f"\n==== benchmarks/gemm.py --variant {best!r}")
        return benchmark(["--variant", best])
    return 0


if __name__ == "__main__":
    sys.exit(main())
