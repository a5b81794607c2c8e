"""Row softmax bandwidth: tylo's softmax beside ``torch.softmax`` and a device copy.

``python benchmarks/softmax.py`` times, for 32768x1024, 8192x8192 and 4096x32768 in f32
and bf16 (output dtype = input dtype):

- tylo's softmax with the configuration :func:`tylo.ops.softmax.host.softmax` picks
  (``--sweep`` adds variants: threads per row, rows per block, cache hints, other styles);
- ``torch.softmax(x, dim=-1, out=...)`` on the same data;
- ``dst.copy_(src)`` of the same bytes: the device copy bandwidth of this run.

Method (``docs/measuring.md``): every variant is checked against a float64
softmax first; then the cases run interleaved (A, B, C, A, B, C, ...), each timed alone
with CUDA events, and the median is reported; inputs and outputs rotate over enough
buffer sets that their total exceeds the 60 MB L2 several times (no run reads data the
previous one left in L2). Achieved bandwidth counts bytes read (x) plus bytes written
(out). Target: tylo >= 0.90x the copy bandwidth measured in the same run.

The table is printed last; ``--json PATH`` also writes every number.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks import provenance

SHAPES = ((32768, 1024), (8192, 8192), (4096, 32768))
DTYPES = ("f32", "bf16")
TARGET = 0.90
L2_BYTES = 60 * 2**20
ROTATE_BYTES = 4 * L2_BYTES  # total bytes of the rotated inputs (and as many outputs)


def variants(rows: int, cols: int, dtype: str, sweep: bool) -> dict[str, Any]:
    """name -> configuration (None: the one softmax() picks)."""
    from tylo.ops.softmax.plan import (
        PREFETCH_SHARED,
        SoftmaxError,
        make_config,
        prefetch_bytes,
        vector_width,
    )

    itemsize = 4 if dtype == "f32" else 2
    vec = vector_width(itemsize, cols, True)
    out: dict[str, Any] = {"tylo (default)": None}
    if not sweep:
        return out
    base = make_config("warp", cols, vec=vec)
    t = base.threads_per_row
    alts: dict[str, dict[str, Any]] = {
        f"warp t={t} ld.cs st.cs": {"load_cache": "cs", "store_cache": "cs"},
        f"warp t={t} ld.L1::no_allocate": {"load_cache": "L1::no_allocate"},
        f"warp t={t} st.cs": {"store_cache": "cs"},
    }
    if t < 1024:
        alts[f"warp t={2 * t}"] = {"threads_per_row": 2 * t}
        alts[f"warp t={2 * t} ld.cs st.cs"] = {
            "threads_per_row": 2 * t,
            "load_cache": "cs",
            "store_cache": "cs",
        }
    if t >= 64:
        alts[f"warp t={t // 2} (2x values/thread)"] = {"threads_per_row": t // 2, "passes": 1}
    if t <= 32:
        alts[f"warp t={t} 4 rows/block"] = {"rows_per_block": 4}
        alts[f"warp t={t} 16 rows/block"] = {"rows_per_block": 16}
    for name, kw in alts.items():
        kw = {"threads_per_row": t, **kw}
        try:
            out[name] = make_config("warp", cols, vec=vec, **kw)
        except SoftmaxError as err:  # a variant that does not apply to this shape
            print(f"  (variant {name} skipped: {err})")
    if t >= 256:  # the persistent kernel with the next row streamed into shared memory
        for name, kw in (
            (f"warp t={t} prefetch", {"prefetch": True}),
            (f"warp t={t} prefetch 2 stages", {"prefetch": True, "stages": 2}),
            (f"warp t={t} no prefetch", {"prefetch": False}),
        ):
            try:
                cfg = make_config("warp", cols, vec=vec, threads_per_row=t, **kw)
            except SoftmaxError:
                continue
            if not cfg.prefetch or prefetch_bytes(cfg, itemsize) <= PREFETCH_SHARED:
                out[name] = cfg
    out["default config again (noise)"] = make_config(
        "warp", cols, vec=vec, prefetch=t == 1024 and itemsize == 2
    )
    out["mma (two-pass, 64-col tiles)"] = make_config("mma", cols, vec=2)
    return out


def _torch_dtype(name: str) -> Any:
    import torch

    return {"f32": torch.float32, "bf16": torch.bfloat16}[name]


def run_shape(rows: int, cols: int, dtype: str, reps: int, sweep: bool) -> list[dict[str, Any]]:
    import torch

    from tylo.ops.softmax.host import softmax

    td = _torch_dtype(dtype)
    itemsize = torch.tensor([], dtype=td).element_size()
    nbytes = rows * cols * itemsize
    sets = max(2, math.ceil(ROTATE_BYTES / nbytes))
    g = torch.Generator(device="cuda").manual_seed(rows * 7 + cols)
    xs = [(3 * torch.randn(rows, cols, device="cuda", generator=g)).to(td) for _ in range(sets)]
    outs = [torch.empty_like(xs[0]) for _ in range(sets)]
    cases: dict[str, Any] = {}
    checks: dict[str, float] = {}
    ref = torch.softmax(xs[0].double(), dim=-1)
    for name, cfg in variants(rows, cols, dtype, sweep).items():
        outs[0].fill_(float("nan"))
        used = softmax(outs[0], xs[0], cfg=cfg)
        torch.cuda.synchronize()
        err = ((outs[0].double() - ref).abs().max() / ref.abs().max()).item()
        tol = 1e-5 if dtype == "f32" else 1e-2
        if not err <= tol:
            raise AssertionError(f"{name} on {rows}x{cols} {dtype}: max error {err:.3g} > {tol}")
        checks[name] = err
        label = name if cfg is not None else f"{name}: {used.describe()}"
        cases[label] = lambda i, c=cfg: softmax(outs[i], xs[i], cfg=c)
    cases["torch.softmax"] = lambda i: torch.softmax(xs[i], dim=-1, out=outs[i])
    cases["copy (dst.copy_(src))"] = lambda i: outs[i].copy_(xs[i])
    times: dict[str, list[float]] = {k: [] for k in cases}
    for i in range(3 * sets):  # warm up: clocks, modules, caches of every case
        for fn in cases.values():
            fn(i % sets)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(reps):
        for name, fn in cases.items():
            # the GPU sleeps while the host issues `sets` launches (one per rotated input),
            # so the events time the kernels back to back, not the host's launch path
            torch.cuda._sleep(2_000_000)
            start.record()
            for i in range(sets):
                fn(i)
            end.record()
            end.synchronize()
            times[name].append(start.elapsed_time(end) * 1e-3 / sets)
    med = {k: statistics.median(v) for k, v in times.items()}
    moved = 2 * nbytes  # x read once, out written once (same dtype)
    copy_bw = moved / med["copy (dst.copy_(src))"]
    torch_t = med["torch.softmax"]
    rows_out = []
    for name, t in med.items():
        bw = moved / t
        rows_out.append(
            {
                "shape": f"{rows}x{cols}",
                "dtype": dtype,
                "kernel": name,
                "us": 1e6 * t,
                "TB/s": bw / 1e12,
                "x copy": bw / copy_bw,
                "x torch": torch_t / t,
                "spread": (max(times[name]) - min(times[name])) / t,
                "check": checks.get(name.split(":")[0]),
            }
        )
    cases.clear()
    torch.cuda.empty_cache()
    return rows_out


def print_table(results: list[dict[str, Any]]) -> None:
    header = ["shape", "dtype", "kernel", "us", "TB/s", "x copy", "x torch"]
    lines = []
    for r in results:
        lines.append(
            [
                r["shape"],
                r["dtype"],
                r["kernel"][:88],
                f"{r['us']:.1f}",
                f"{r['TB/s']:.2f}",
                f"{r['x copy']:.3f}",
                f"{r['x torch']:.2f}",
            ]
        )
    widths = [max(len(str(x)) for x in col) for col in zip(header, *lines)]
    print()
    for line in [header, ["-" * w for w in widths], *lines]:
        print("  ".join(str(x).ljust(w) for x, w in zip(line, widths)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=60, help="timed repetitions per case")
    parser.add_argument("--sweep", action="store_true", help="also time configuration variants")
    parser.add_argument("--dtypes", nargs="+", default=list(DTYPES), choices=DTYPES)
    parser.add_argument(
        "--shapes", nargs="+", default=[f"{r}x{c}" for r, c in SHAPES], help="ROWSxCOLS ..."
    )
    parser.add_argument("--json", default=None, help="also write every number here")
    provenance.add_arguments(parser)
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("benchmarks/softmax.py: needs a CUDA GPU and torch; nothing to time here")
        return
    props = torch.cuda.get_device_properties(0)
    print(
        f"# softmax benchmark: {props.name}, {props.multi_processor_count} SMs, torch "
        f"{torch.__version__}; median of {args.reps} interleaved runs, CUDA events"
    )
    results: list[dict[str, Any]] = []
    for shape in args.shapes:
        rows, cols = (int(v) for v in shape.lower().split("x"))
        for dtype in args.dtypes:
            part = run_shape(rows, cols, dtype, args.reps, args.sweep)
            results += part
            for r in part:
                print(
                    f"  {r['shape']} {r['dtype']} {r['kernel'][:60]}: {r['us']:.1f} us, "
                    f"{r['TB/s']:.2f} TB/s, {r['x copy']:.3f}x copy",
                    flush=True,
                )
    if args.json:
        meta = provenance.run_metadata(
            ("torch",), script="benchmarks/softmax.py", commit=args.commit, dirty=args.dirty
        )
        provenance.write_json(args.json, results, meta)
    print_table(results)
    print()
    ok_all = True
    for r in results:
        if r["kernel"].startswith("tylo (default)"):
            ok = r["x copy"] >= TARGET
            ok_all &= ok
            print(
                f"{r['shape']} {r['dtype']}: tylo {r['TB/s']:.2f} TB/s = {r['x copy']:.3f}x copy, "
                f"{r['x torch']:.2f}x torch.softmax (target >= {TARGET}x copy: "
                f"{'yes' if ok else 'NO'})"
            )
    print(f"all targets met: {'yes' if ok_all else 'NO'}")


if __name__ == "__main__":
    main()
