"""Re-measure the CPU-side timing claims of README.md and docs/*.md.

``python tools/claims.py [--repeat N] [--only NAME ...]`` runs each measurement ``N`` times
(fresh processes where a claim is about a cold start) and prints, per claim, the minimum,
median and maximum, under a header naming the Python version, the machine (processor count
and model from /proc/cpuinfo), its load average and the commit measured. The claims:

- ``gemm_trace``: the bounded warp-MMA GEMM of ``tylo/ops/gemm`` at 65x97x73, sm_90a, traced
  in a fresh process with an empty ``TYLO_CACHE_DIR`` (cold), then traced again in that
  process (warm); docs/kernels.md, "Trace cost".
- ``enumeration``: a static layout proof that no rule settles, decided by numpy
  enumeration, at 65,532 elements and at the size budget (4,194,300 elements); the provers'
  verdict cache cleared before each call; docs/proofs.md.
- ``launch_host``: the launch's host path with the driver call a C no-op
  (``benchmarks/launch.py --only launch``), with the C extension and with
  ``TYLO_PURE_PYTHON_LAUNCH=1``; README.md, docs/kernels.md.
- ``attention_plan``: the warp attention's argument checks and plan (``plan_attention``) and
  a remembered call (``attention()`` with the launch a no-op), on stand-in arrays;
  docs/attention.md.
- ``interpret``: ``python -m benchmarks.interpret`` (the CPU interpreter); docs/interpret.md.
- ``cache_hit``: a kernel found in the disk cache by a fresh process, without tracing
  (``benchmarks/launch.py --only cache``; compiles first, so it needs libNVVM);
  docs/backend.md, docs/kernels.md.

Nothing here needs a GPU; only ``cache_hit`` needs libNVVM. The machine's load is printed
because a shared machine
makes every figure slower: quote the median with the load it was taken under.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# One measurement in a fresh process: prints a JSON object of named seconds.
_GEMM_TRACE = """
import json, time, argparse
import tylo
from tylo.ops.gemm import cli
from tylo.ops.gemm.kernel import tiled_gemm_kernel
p = argparse.ArgumentParser(); cli.add_arguments(p)
cfg = cli._config(p.parse_args(["65", "97", "73"]))
d = cfg.dtype
a = tylo.pointer(d, align=16) if cfg.vector else d
o = tylo.pointer(tylo.f32, align=16) if cfg.epilogue == "staged" else tylo.f32
out = {}
for name in ("cold", "warm"):
    t = time.perf_counter()
    r = tiled_gemm_kernel.trace(cfg, o, a, a, int, int, int, int, int, int, float, False,
                                block=cfg.plan.threads, target="sm_90a")
    out[name + " (trace + IR)"] = time.perf_counter() - t
    out[name + " (trace alone)"] = r.timings["trace_s"]
print(json.dumps(out))
"""


def machine() -> dict[str, str]:
    """The Python version, processor count and model, load average, date and commit."""
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        commit = subprocess.run(
            ["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    return {
        "python": platform.python_version(),
        "cpus": str(os.cpu_count()),
        "cpu model": model,
        "load average (1, 5, 15 min)": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "date (UTC)": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "commit": commit,
    }


def summary(xs: list[float]) -> tuple[float, float, float]:
    """(min, median, max) of a non-empty list."""
    return min(xs), statistics.median(xs), max(xs)


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), **extra)
    return env


def _json_run(code: str, **extra: str) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as cache:
        res = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True,
            env=_env(TYLO_CACHE_DIR=cache, **extra), cwd=ROOT,
        )  # fmt: skip
    return json.loads(res.stdout.strip().splitlines()[-1])


def gemm_trace(repeat: int) -> dict[str, list[float]]:
    """Cold and warm traces of the 65x97x73 GEMM, each cold one in a fresh process."""
    out: dict[str, list[float]] = {}
    for _ in range(repeat):
        for k, v in _json_run(_GEMM_TRACE).items():
            out.setdefault(k, []).append(v)
    return out


def enumeration(repeat: int) -> dict[str, list[float]]:
    """prove_injective of layouts that only enumeration decides, cache cleared each call."""
    from tylo.layouts import Layout
    from tylo.layouts.proofs import prove_injective
    from tylo.layouts.proofs.engine import clear_cache

    out: dict[str, list[float]] = {}
    for n in (5461, 349525):  # 2*3*2*n elements: 65,532 and 4,194,300
        layout = Layout((2, 3, 2, n), (1, 2, 7, 11))
        name = f"{layout} ({12 * n:,} elements)"
        clear_cache()
        assert "enumeration" in prove_injective(layout).reason, "no longer decided by enumeration"
        for _ in range(repeat):
            clear_cache()
            t = time.perf_counter()
            prove_injective(layout)
            out.setdefault(name, []).append(time.perf_counter() - t)
    return out


_HOST_ROW = re.compile(r"tylo host path \(the driver call a C no-op\)\s+([0-9.]+)")


def launch_host(repeat: int) -> dict[str, list[float]]:
    """The launch host path up to a no-op driver call, C extension and pure Python."""
    out: dict[str, list[float]] = {}
    for name, extra in (("C extension", {}), ("Python", {"TYLO_PURE_PYTHON_LAUNCH": "1"})):
        for _ in range(repeat):
            res = subprocess.run(
                [sys.executable, "benchmarks/launch.py", "--only", "launch"],
                capture_output=True, text=True, check=True, env=_env(**extra), cwd=ROOT,
            )  # fmt: skip
            m = _HOST_ROW.search(res.stdout)
            if m is None:
                raise RuntimeError(f"no host-path row in:\n{res.stdout}")
            out.setdefault(f"one launch, {name}", []).append(float(m.group(1)) * 1e-6)
    return out


def attention_plan(repeat: int, calls: int = 2000) -> dict[str, list[float]]:
    """plan_attention's checks and plan, and a remembered attention() call, per call."""
    from tylo.arrays import DeviceArray
    from tylo.ops.attention import host

    def arr(shape: tuple[int, ...], ptr: int) -> DeviceArray:
        strides = tuple(math.prod(shape[i + 1 :]) for i in range(len(shape)))
        return DeviceArray(ptr, shape, strides, host.tylo.bf16, 0)

    q, k, v, o = (arr((2, 8, 1024, 128), (i + 1) << 32) for i in range(4))
    lse = DeviceArray(5 << 32, (2, 8, 1024), (8 * 1024, 1024, 1), host.tylo.f32, 0)
    real = host.launch
    host.launch = lambda *a: None
    out: dict[str, list[float]] = {}
    try:
        for _ in range(repeat):
            t = time.perf_counter()
            for _ in range(calls // 10):
                host.plan_attention(q, k, v, o, lse, causal=True)
            out.setdefault("plan_attention (checks + plan)", []).append(
                (time.perf_counter() - t) / (calls // 10)
            )
            host.attention(q, k, v, causal=True, out=o, lse=lse, path="warp")
            t = time.perf_counter()
            for _ in range(calls):
                host.attention(q, k, v, causal=True, out=o, lse=lse, path="warp")
            out.setdefault("attention(), remembered plan", []).append(
                (time.perf_counter() - t) / calls
            )
    finally:
        host.launch = real
    return out


_HIT_ROW = re.compile(r"^([23])\s+(\S+)\s+([0-9.]+)\s+(\S+)\s+([0-9.]+)\s+\S+\s+([0-9.]+)",
                      re.MULTILINE)  # fmt: skip


def cache_hit(repeat: int) -> dict[str, list[float]]:
    """``benchmarks/launch.py --only cache``: a kernel found in the disk cache by a fresh
    process (its processes 2 and 3; process 1 compiles), the first kernel of the process
    (vector_add, paying the backend's first use) and the second (row_reduce)."""
    out: dict[str, list[float]] = {}
    for _ in range(repeat):
        res = subprocess.run(
            [sys.executable, "benchmarks/launch.py", "--only", "cache", "--target", "sm_90a"],
            capture_output=True, text=True, check=True, env=_env(), cwd=ROOT,
        )  # fmt: skip
        rows = _HIT_ROW.findall(res.stdout)
        if len(rows) != 2 or any(r[1] != "kernel-hit" or r[3] != "kernel-hit" for r in rows):
            raise RuntimeError(f"no kernel-hit rows in:\n{res.stdout}")
        for _p, _a, first, _b, second, imports in rows:
            out.setdefault("hit, first kernel of the process", []).append(float(first) / 1e3)
            out.setdefault("hit, second kernel of the process", []).append(float(second) / 1e3)
            out.setdefault("imports of that process", []).append(float(imports) / 1e3)
    return out


_INTERP = re.compile(r"^(vector_add|softmax|gemm)[^:]*: ([0-9.]+) s \(first[^0-9]*([0-9.]+) s")


def interpret(repeat: int) -> dict[str, list[float]]:
    """``python -m benchmarks.interpret``: each problem's second and first launch."""
    out: dict[str, list[float]] = {}
    for _ in range(repeat):
        res = subprocess.run(
            [sys.executable, "-m", "benchmarks.interpret"],
            capture_output=True, text=True, check=True, env=_env(), cwd=ROOT,
        )  # fmt: skip
        for line in res.stdout.splitlines():
            m = _INTERP.match(line)
            if m:
                out.setdefault(f"{m.group(1)}, second launch", []).append(float(m.group(2)))
                out.setdefault(f"{m.group(1)}, first (traces)", []).append(float(m.group(3)))
    return out


CLAIMS: dict[str, Callable[[int], dict[str, list[float]]]] = {
    "gemm_trace": gemm_trace,
    "enumeration": enumeration,
    "launch_host": launch_host,
    "attention_plan": attention_plan,
    "interpret": interpret,
    "cache_hit": cache_hit,
}


def fmt(seconds: float) -> str:
    """Seconds in the unit that reads best: s, ms or us."""
    if seconds >= 0.1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-4:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.2f} us"


def main(argv: list[str] | None = None) -> int:
    """Measure the claims asked for and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs of each measurement")
    parser.add_argument("--only", choices=sorted(CLAIMS), action="append", help="repeatable")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error(f"--repeat must be >= 1, got {args.repeat}")
    sys.path.insert(0, str(ROOT))
    for k, v in machine().items():
        print(f"# {k}: {v}")
    for name in args.only or list(CLAIMS):
        t = time.perf_counter()
        results = CLAIMS[name](args.repeat)
        print(f"\n## {name} ({args.repeat} runs, {time.perf_counter() - t:.0f} s)")
        for what, xs in results.items():
            lo, med, hi = summary(xs)
            print(f"{what:52s} min {fmt(lo):>10s}  median {fmt(med):>10s}  max {fmt(hi):>10s}")
    print(f"\n# load average at the end: {machine()['load average (1, 5, 15 min)']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
