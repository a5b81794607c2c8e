"""Compile, cache and launch costs of traced kernels, and row_reduce bandwidth.

``python benchmarks/launch.py`` prints:

1. cold compile time of examples/vector_add and examples/row_reduce split into trace
   (the Python function running, IR built), IR (module text), libNVVM and link;
2. the disk-cache hit time in a fresh process (no trace: the first-level cache), and the
   time to the first launch there when a GPU is present;
3. per-launch host overhead of a cached kernel (median over 10,000 launches), from tylo
   DeviceBuffers and from torch tensors, beside torch's launch of a trivial op, the bare
   driver calls from Python, and the driver's own floor measured from C
   (``launch_floor.c``, built with the system C compiler); without a GPU only the host
   path up to the driver call (replaced by a no-op) is measured;
4. row_reduce (sum and max) on 8192 x 8192 f32 against ``torch.sum``/``torch.amax`` along
   rows and against a device-to-device copy, interleaved, CUDA events around batches of
   back-to-back calls (host issue time overlapped), medians, each sample starting from a
   clean L2 (a read-only pass over another buffer before it).

Targets (ISSUE 4): cold compile <= 0.5 s, cache hit <= 10 ms, launch <= 5 us,
row_reduce >= 1.0x torch.sum and >= 0.85x copy bandwidth.

``--json FILE`` also writes every table's rows with the run's metadata
(``benchmarks/provenance.py``).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import numpy as np

import tylo
from examples.row_reduce.kernel import BLOCK as RR_BLOCK
from examples.row_reduce.kernel import CACHE, UNROLL, row_reduce_kernel
from examples.row_reduce.kernel import launch as row_reduce
from examples.vector_add.kernel import BLOCK as VA_BLOCK
from examples.vector_add.kernel import vector_add

F32 = tylo.f32
BATCH = 10  # calls per timed sample in the bandwidth comparison


def have_gpu() -> bool:
    from tylo.backend import driver

    return driver.device_count() > 0


# every table printed, as rows of {"section": title, column: value}: --json writes them
TABLES: list[dict[str, Any]] = []


def table(title: str, header: list[str], rows: list[list[Any]]) -> None:
    TABLES.extend({"section": title, **dict(zip(header, row))} for row in rows)
    print(f"\n## {title}")
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    for line in [header, ["-" * w for w in widths], *rows]:
        print("  ".join(str(x).ljust(w) for x, w in zip(line, widths)))


# ---------------------------------------------------------------------------- compile


def specs(target: str) -> dict[str, tuple[Any, tuple[Any, ...], int]]:
    return {
        "vector_add": (vector_add, (F32, F32, F32, int), VA_BLOCK),
        "row_reduce (sum, vec 4)": (
            row_reduce_kernel,
            (F32, F32, int, int, int, int, "sum", 4, 1, UNROLL, CACHE),
            RR_BLOCK,
        ),
    }


def cold_compile(target: str) -> None:
    os.environ["TYLO_CACHE"] = "0"  # every stage runs
    try:
        warm = tylo.kernel(vector_add.fn)  # pay one-time imports (sympy's lazy modules...)
        t = time.perf_counter()
        warm.compile(F32, F32, F32, int, block=64, target=target)
        first = time.perf_counter() - t
        rows = []
        for name, (kern, args, block) in specs(target).items():
            fresh = tylo.kernel(kern.fn)  # a new Kernel: nothing cached in memory
            t = time.perf_counter()
            k = fresh.compile(*args, block=block, target=target)
            total = time.perf_counter() - t
            tm = k.timings
            rows.append(
                [
                    name,
                    *(f"{1e3 * tm[s]:.1f}" for s in ("trace_s", "ir_s", "nvvm_s", "link_s")),
                    f"{1e3 * total:.1f}",
                    "yes" if total <= 0.5 else "NO",
                ]
            )
    finally:
        del os.environ["TYLO_CACHE"]
    table(
        f"cold compile for {target} (ms; target <= 500 ms; first compile in the process, "
        f"with one-time imports: {1e3 * first:.0f} ms)",
        ["kernel", "trace", "IR", "libNVVM", "link", "total", "ok"],
        rows,
    )


HIT_SCRIPT = r"""
import json, sys, time
t0 = time.perf_counter()
sys.path.insert(0, sys.argv[1])
import tylo
from examples.vector_add.kernel import vector_add
from examples.row_reduce.kernel import compile_for
import tylo.backend.pipeline, tylo.kernel.diskcache  # modules a compile needs
t1 = time.perf_counter()
F32 = tylo.f32
out = {"imports_s": t1 - t0}
t = time.perf_counter()
k = vector_add.compile(F32, F32, F32, int, block=256, target=sys.argv[2])
out["vector_add_s"] = time.perf_counter() - t
out["vector_add_cache"] = k.timings["cache"]
t = time.perf_counter()
k = compile_for("sum", 4, 1, sys.argv[2])
out["row_reduce_s"] = time.perf_counter() - t
out["row_reduce_cache"] = k.timings["cache"]
if sys.argv[3] == "launch":
    import numpy as np
    from tylo.arrays import DeviceBuffer
    from tylo.backend import driver
    a = DeviceBuffer.from_numpy(np.ones(1024, np.float32))
    c = DeviceBuffer.empty(1024, F32)
    driver.synchronize()
    t = time.perf_counter()
    vector_add[4, 256](c, a, a, 1024)
    driver.synchronize()
    out["first_launch_s"] = time.perf_counter() - t
    out["first_launch_cache"] = next(iter(vector_add._built.values())).timings["cache"]
print(json.dumps(out))
"""


def cache_hit(target: str, gpu: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "TYLO_CACHE_DIR": tmp}
        env.pop("TYLO_CACHE", None)
        mode = "launch" if gpu else "compile"
        runs = []
        for _ in range(3):
            proc = subprocess.run(
                [sys.executable, "-c", HIT_SCRIPT, ROOT, target, mode],
                capture_output=True,
                text=True,
                env=env,
                check=False,
            )
            if proc.returncode:
                print(proc.stderr)
                raise SystemExit("cache-hit subprocess failed")
            runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    rows = []
    for i, r in enumerate(runs):
        rows.append(
            [
                i + 1,
                r["vector_add_cache"],
                f"{1e3 * r['vector_add_s']:.2f}",
                r["row_reduce_cache"],
                f"{1e3 * r['row_reduce_s']:.2f}",
                f"{1e3 * r.get('first_launch_s', float('nan')):.2f}",
                f"{1e3 * r['imports_s']:.0f}",
            ]
        )
    hit = runs[-1]
    ok = max(hit["vector_add_s"], hit["row_reduce_s"]) <= 0.010
    table(
        "disk cache, fresh processes (ms; target: a hit <= 10 ms -> "
        f"{'yes' if ok else 'NO'}; imports are paid once per process either way)",
        ["process", "vector_add", "ms", "row_reduce", "ms", "first launch (GPU)", "imports"],
        rows,
    )


# ---------------------------------------------------------------------------- launch


def host_per_call(fn: Any, n: int = 10_000, depth: int = 64) -> float:
    """Host time of one call (seconds), the GPU's queue kept shallow: a synchronize
    every ``depth`` calls, outside the timed region, so no call waits for queue space.
    The median over ``n`` calls of the mean of each run of ``depth``."""
    from tylo.backend import driver

    times = []
    for _ in range(n // depth):
        driver.synchronize()
        t = time.perf_counter()
        for _ in range(depth):
            fn()
        times.append((time.perf_counter() - t) / depth)
    return statistics.median(times)


def back_to_back(fn: Any, n: int = 10_000, chunk: int = 100) -> float:
    """Wall time of one call (seconds) with no synchronize: once the queue is full a
    call also waits for the GPU to retire a kernel. Median over chunks of ``chunk``."""
    times = []
    for _ in range(n // chunk):
        t = time.perf_counter()
        for _ in range(chunk):
            fn()
        times.append((time.perf_counter() - t) / chunk)
    return statistics.median(times)


def c_floor(entry: Any, n: int = 10_000) -> list[list[str]]:
    """The driver's own cost per launch, from C (benchmarks/launch_floor.c, built with
    the system C compiler), on the same cubin and entry as the Python rows."""
    import shutil

    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return [["C: cuLaunchKernel (driver floor)", "no C compiler here: skipped", "", ""]]
    with tempfile.TemporaryDirectory() as tmp:
        exe, cubin = os.path.join(tmp, "launch_floor"), os.path.join(tmp, "k.cubin")
        src = os.path.join(ROOT, "benchmarks", "launch_floor.c")
        subprocess.run([cc, "-O2", "-o", exe, src, "-ldl"], check=True)
        with open(cubin, "wb") as f:
            f.write(entry.cubin)
        int_bytes = 8 if entry.index_bits == 64 else 4
        out = subprocess.run(
            [exe, cubin, entry.entry, "3", str(int_bytes), str(n)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    rows = []
    for line in out.splitlines():
        name, med, p10, p90 = line.split()
        how = "back to back" if name.endswith("back_to_back") else "queue shallow"
        rows.append(
            [
                f"C: {name.removesuffix('_back_to_back')} alone, {how} (driver floor)",
                f"{float(med):.2f}",
                f"p10 {float(p10):.2f}, p90 {float(p90):.2f}",
                "",
            ]
        )
    return rows


def launch_overhead(gpu: bool) -> None:
    from tylo.backend import driver, launchex

    rows = []
    n = 1
    if gpu:
        from cuda.bindings import driver as cu

        from tylo.arrays import DeviceBuffer

        a = DeviceBuffer.from_numpy(np.ones(256, np.float32))
        c = DeviceBuffer.empty(256, F32)
        launcher = vector_add[1, VA_BLOCK]
        for _ in range(3):  # checked, then the reader path, then the inline path
            launcher(c, a, a, n)
        hot = next(iter(vector_add.cache.values()))
        record = next(iter(hot.records.values()))
        ex, handle = launchex.launch_ex(), hot.handle
        pack = hot.entry.argpack().pack(c.ptr, a.ptr, a.ptr, n)
        fn = hot.entry.function(0).handle
        cases: dict[str, Any] = {
            "tylo vector_add, DeviceBuffers": lambda: launcher(c, a, a, n),
            "  same, kern[grid, block] spelled each time": lambda: vector_add[1, VA_BLOCK](
                c, a, a, n
            ),
            "cuLaunchKernelEx alone, ctypes (tylo's driver call)": lambda: ex(
                record.config, handle, record.params, None
            ),
            "cuLaunchKernel alone, cuda.bindings": lambda: cu.cuLaunchKernel(
                fn, 1, 1, 1, VA_BLOCK, 1, 1, 0, 0, pack.address, 0
            ),
        }
        try:
            import torch
        except ImportError:
            torch = None
        if torch is not None and torch.cuda.is_available():
            ta = torch.ones(256, device="cuda")
            tc = torch.empty(256, device="cuda")
            for _ in range(3):
                launcher(tc, ta, ta, n)
            cases["tylo vector_add, torch tensors"] = lambda: launcher(tc, ta, ta, n)
            cases["torch.add(a, b, out=c) (reference)"] = lambda: torch.add(ta, ta, out=tc)
        results: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in cases}
        for _ in range(3):  # rounds, interleaved; the median of the rounds is reported
            for name, fn_ in cases.items():
                results[name][0].append(host_per_call(fn_, n=3_392))
                driver.synchronize()
                results[name][1].append(back_to_back(fn_, n=3_400))
                driver.synchronize()
        for name, (shallow, deep) in results.items():
            per = statistics.median(shallow)
            ok = ("yes" if per <= 5e-6 else "NO") if name.startswith("tylo") else ""
            rows.append([name, f"{1e6 * per:.2f}", f"{1e6 * statistics.median(deep):.2f}", ok])
        rows += c_floor(hot.entry)
    # the host path alone: everything up to the driver call, which a Python no-op replaces
    from types import SimpleNamespace

    from tylo.arrays import DeviceArray
    from tylo.kernel import launch as launch_mod

    fake = DeviceArray(0x7F0000000000, (256,), (1,), F32, 0)
    k = tylo.kernel(vector_add.fn)
    entry = k.compile(F32, F32, F32, int, block=VA_BLOCK, target="sm_90a")
    launch_mod._targets.setdefault(0, tylo.Target.parse("sm_90a"))
    entry._functions[0] = SimpleNamespace(handle=0)
    ordinal = getattr(driver._tls, "ordinal", None)

    def checked(*args: Any, **kwargs: Any) -> None:
        driver._tls.ordinal = 0  # as the real one: the device's context is current

    # A C function that takes no time and returns 0 (CUDA_SUCCESS) when called with the
    # GIL released, as both inline paths call the driver: PyGILState_Check. Extra
    # arguments are ignored under the C calling convention.
    noop = ctypes.cast(ctypes.pythonapi.PyGILState_Check, ctypes.c_void_p).value
    real = driver.launch, launchex._launch_ex
    driver.launch, launchex._launch_ex = checked, launchex.LAUNCH_EX_TYPE(noop)
    try:
        launcher = k[1, VA_BLOCK]
        for _ in range(3):
            launcher(fake, fake, fake, n)
        per = back_to_back(lambda: launcher(fake, fake, fake, n))
    finally:
        driver.launch, launchex._launch_ex = real
        driver._tls.ordinal = ordinal
    rows.append(["tylo host path (the driver call a C no-op)", f"{1e6 * per:.2f}", "", ""])
    title = (
        "per-launch host overhead (us; median over ~10,000 launches in 3 interleaved rounds; "
        "target <= 5 us). 'queue shallow': host time per call with a synchronize every 64 "
        "calls, outside the timed region; 'back to back': no synchronize, so a call may also "
        "wait for queue space"
    )
    if not gpu:
        title += " -- no GPU here: real launches need one"
    table(title, ["what", "queue shallow", "back to back", "ok"], rows)


# ---------------------------------------------------------------------------- bandwidth


def row_reduce_bandwidth(rows_n: int, cols: int, reps: int) -> None:
    try:
        import torch
    except ImportError:
        print("\n## row_reduce: needs torch for the baselines (torch.sum, copy_); skipped")
        return
    x = torch.randn(rows_n, cols, device="cuda")
    out = torch.empty(rows_n, device="cuda")
    dst = torch.empty_like(x)
    for op in ("sum", "max"):
        row_reduce(out, x, op)
        want = x.double().sum(1) if op == "sum" else x.double().amax(1)
        err = ((out.double() - want).abs() / x.double().abs().sum(1)).max().item()
        assert err < 1e-5, f"row_reduce {op} is wrong (max relative error {err})"
    base = {
        "sum": lambda: torch.sum(x, dim=1, out=out),
        "max": lambda: torch.amax(x, dim=1, out=out),
    }
    cases = {
        "tylo row sum": lambda: row_reduce(out, x, "sum"),
        "torch.sum(x, 1)": base["sum"],
        "tylo row max": lambda: row_reduce(out, x, "max"),
        "torch.amax(x, 1)": base["max"],
        "copy (dst.copy_(x))": lambda: dst.copy_(x),
    }
    times: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(20):  # warm up: clocks up, every kernel loaded and cached
        for fn in cases.values():
            fn()
    torch.cuda.synchronize()
    events = [
        (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in cases
    ]
    # Before each sample, read a buffer twice the L2's size: a preceding copy would
    # otherwise leave dirty lines whose write-back the next kernel pays for. A sample is
    # BATCH back-to-back calls between two events, so the host's time to issue a call
    # (argument conversion, launch) overlaps the previous kernel instead of being timed
    # as idle GPU time.
    flush = torch.empty(2 * 64 * 2**20 // 4, device="cuda")
    for _ in range(reps):  # interleaved: A, B, C, ... each repetition
        for (name, fn), (start, end) in zip(cases.items(), events):
            flush.amax()
            start.record()
            for _ in range(BATCH):
                fn()
            end.record()
            end.synchronize()
            times[name].append(start.elapsed_time(end) * 1e-3 / BATCH)
    med = {k: statistics.median(v) for k, v in times.items()}
    nbytes = rows_n * cols * 4
    copy_bw = 2 * nbytes / med["copy (dst.copy_(x))"]
    rows = []
    for name, t in med.items():
        moved = 2 * nbytes if name.startswith("copy") else nbytes + rows_n * 4
        bw = moved / t
        rows.append([name, f"{1e6 * t:.1f}", f"{bw / 1e12:.2f}", f"{bw / copy_bw:.2f}"])
    table(
        f"row_reduce {rows_n} x {cols} f32 (CUDA events, median of {reps} interleaved samples "
        f"of {BATCH} calls)",
        ["kernel", "us", "TB/s", "x copy bandwidth"],
        rows,
    )
    for op, tylo_name, torch_name in (
        ("sum", "tylo row sum", "torch.sum(x, 1)"),
        ("max", "tylo row max", "torch.amax(x, 1)"),
    ):
        vs_torch = med[torch_name] / med[tylo_name]
        vs_copy = (nbytes + rows_n * 4) / med[tylo_name] / copy_bw
        print(
            f"row {op}: {vs_torch:.2f}x torch (target >= 1.0: "
            f"{'yes' if vs_torch >= 1.0 else 'NO'}), {vs_copy:.2f}x copy bandwidth "
            f"(target >= 0.85: {'yes' if vs_copy >= 0.85 else 'NO'})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--target", default=None, help="compile target (default: the GPU's)")
    parser.add_argument("--rows", type=int, default=8192)
    parser.add_argument("--cols", type=int, default=8192)
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument(
        "--only",
        choices=["compile", "cache", "launch", "bandwidth"],
        action="append",
        help="run only these sections (repeatable; default: all)",
    )
    parser.add_argument("--json", default=None, help="also write every table's rows here")
    from benchmarks import provenance

    provenance.add_arguments(parser)
    args = parser.parse_args()
    only = set(args.only or ["compile", "cache", "launch", "bandwidth"])
    gpu = have_gpu()
    target = args.target or (tylo.Target.from_device(0).sm if gpu else "sm_90a")
    from tylo.kernel import fastpath

    path = "C (tylo._launch)" if fastpath.ACCELERATED else "Python"
    print(
        f"# tylo launch benchmark: target {target}, GPU: {'yes' if gpu else 'none'}, "
        f"inline launch path: {path}"
    )
    if "compile" in only:
        cold_compile(target)
    if "cache" in only:
        cache_hit(target, gpu)
    if "launch" in only:
        launch_overhead(gpu)
    if "bandwidth" not in only:
        pass
    elif gpu:
        row_reduce_bandwidth(args.rows, args.cols, args.reps)
    else:
        print("\n## row_reduce bandwidth: needs a GPU; skipped")
    if args.json:
        meta = provenance.run_metadata(
            ("torch",), script="benchmarks/launch.py", commit=args.commit, dirty=args.dirty
        )
        provenance.write_json(args.json, TABLES, meta)


if __name__ == "__main__":
    main()
