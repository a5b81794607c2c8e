"""Compile times: each shipped kernel's command line as a whole process, cold (an empty
cache) and warm (the cache the cold run filled: a hit in a fresh process), beside Triton
compiling its matmul tutorial kernel when triton is installed.

    PYTHONPATH=$PWD python3 benchmarks/compile.py [--runs 3] [--only REGEX]
        [--python PYTHON ...] [--json FILE] [--list]

Each command runs ``--runs`` times per mode with ``TYLO_CACHE_DIR`` pointing at a directory
of its own (emptied before every cold run, kept for the warm runs); the table gives the
median wall time and the median CPU time of the process (user + system, children included),
for every interpreter given with ``--python`` (default: this one), so that Python 3.11 and
3.12 can be compared in one run. No GPU is needed: every command compiles for sm_90a.
Timings on a shared machine vary from run to run: compare numbers from one run only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TARGET = "sm_90a"

# name -> the command line after the interpreter
COMMANDS: dict[str, list[str]] = {
    "vector_add": [
        "-m", "tylo.cli", "compile", "examples/vector_add/kernel.py:vector_add",
        "--arg", "a=ptr:f32", "--arg", "b=ptr:f32", "--arg", "c=ptr:f32:16", "--arg", "n=int",
        "--block", "256", "--target", TARGET, "--emit", "resources",
    ],
    "softmax 4096x4096": ["-m", "tylo.ops.softmax", "4096", "4096", "--target", TARGET,
                          "--compile-only"],
    "warp-MMA GEMM 4096^3": ["-m", "tylo.ops.gemm", "4096", "4096", "4096", "--target", TARGET,
                             "--compile-only"],
    "Hopper GEMM 4096^3": ["-m", "tylo.ops.gemm.hopper_cli", "4096", "4096", "4096",
                           "--target", TARGET, "--compile-only"],
    "attention D=128, warp": ["-m", "tylo.ops.attention", "1", "16", "4096", "128",
                              "--path", "warp", "--target", TARGET, "--compile-only"],
    "attention D=128, Hopper": ["-m", "tylo.ops.attention", "1", "16", "4096", "128",
                                "--path", "hopper", "--target", TARGET, "--compile-only"],
}  # fmt: skip

TRITON = """
import sys, time
import triton, triton.language as tl
from triton.backends.compiler import GPUTarget

@triton.jit
def matmul(a, b, c, M, N, K, sam, sak, sbk, sbn, scm, scn,
           BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        x = tl.load(a + rm[:, None] * sam + (k + rk)[None, :] * sak)
        y = tl.load(b + (k + rk)[:, None] * sbk + rn[None, :] * sbn)
        acc += tl.dot(x, y)
    tl.store(c + rm[:, None] * scm + rn[None, :] * scn, acc)

sig = {"a": "*bf16", "b": "*bf16", "c": "*fp32", **{n: "i32" for n in
       ("M", "N", "K", "sam", "sak", "sbk", "sbn", "scm", "scn")}}
src = triton.compiler.ASTSource(matmul, sig, constexprs={"BM": 128, "BN": 128, "BK": 64})
triton.compile(src, target=GPUTarget("cuda", 90, 32))
"""


def run_once(python: str, args: Sequence[str], cache: Path, cold: bool) -> tuple[float, float]:
    """Run one command; (wall seconds, CPU seconds of the process and its children)."""
    if cold:
        shutil.rmtree(cache, ignore_errors=True)
    env = {**os.environ, "TYLO_CACHE_DIR": str(cache), "TRITON_CACHE_DIR": str(cache / "tr")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(
        [python, *args], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise RuntimeError(f"{' '.join(args)} exited {proc.returncode}: {' | '.join(tail)}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def measure(
    python: str,
    args: Sequence[str],
    runs: int,
    runner: Callable[[str, Sequence[str], Path, bool], tuple[float, float]] = run_once,
) -> dict[str, Any]:
    """Median wall and CPU seconds of ``runs`` cold then ``runs`` warm runs of ``args``."""
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="tylo-compile-bench-") as tmp:
        cache = Path(tmp) / "cache"
        for mode in ("cold", "warm"):
            # the last cold run leaves the filled cache that the warm runs hit
            samples = [runner(python, args, cache, mode == "cold") for _ in range(runs)]
            out[mode] = {
                "wall_s": statistics.median(s[0] for s in samples),
                "cpu_s": statistics.median(s[1] for s in samples),
            }
    return out


def table(results: dict[str, dict[str, Any]]) -> str:
    """The results as a Markdown table, one row per (interpreter, command)."""
    rows = [
        "| python | command | cold wall | cold CPU | warm wall | warm CPU |",
        "|---|---|---|---|---|---|",
    ]
    for (version, name), r in results.items():
        if "error" in r:
            rows.append(f"| {version} | {name} | {r['error']} | | | |")
            continue
        c, w = r["cold"], r["warm"]
        rows.append(
            f"| {version} | {name} | {c['wall_s']:.2f} s | {c['cpu_s']:.2f} s | "
            f"{w['wall_s']:.2f} s | {w['cpu_s']:.2f} s |"
        )
    return "\n".join(rows)


def _version(python: str) -> str:
    out = subprocess.run(
        [python, "-c", "import sys; print(sys.version.split()[0])"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return out.stdout.strip()


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line, time every command, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per mode (>= 1)")
    parser.add_argument("--only", default=None, help="commands whose name matches REGEX")
    parser.add_argument("--python", action="append", default=None, help="interpreters")
    parser.add_argument("--json", default=None, help="also write the results here")
    parser.add_argument("--list", action="store_true", help="print the commands and exit")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error(f"--runs: at least 1, not {args.runs}")
    try:
        only = re.compile(args.only) if args.only is not None else None
    except re.error as err:
        parser.error(f"--only: not a regular expression ({err})")
    commands = {n: c for n, c in COMMANDS.items() if only is None or only.search(n)}
    if not commands:
        parser.error(f"--only {args.only!r} matches none of {sorted(COMMANDS)}")
    if args.list:
        for name, cmd in commands.items():
            print(f"{name}: python {' '.join(cmd)}")
        return 0
    results: dict[tuple[str, str], dict[str, Any]] = {}
    for python in args.python or [sys.executable]:
        version = _version(python)
        for name, cmd in commands.items():
            try:
                results[(version, name)] = measure(python, cmd, args.runs)
            except RuntimeError as err:
                results[(version, name)] = {"error": str(err)}
            print(f"{version} {name}: {results[(version, name)]}", file=sys.stderr)
        try:
            triton = measure(python, ["-c", TRITON], args.runs)
        except RuntimeError as err:
            triton = {"error": f"Triton not timed ({str(err).rsplit(' | ', 1)[-1]})"}
        results[(version, "Triton matmul tutorial kernel")] = triton
    print(table(results))
    if args.json:
        data = [{"python": v, "command": n, **r} for (v, n), r in results.items()]
        Path(args.json).write_text(json.dumps(data, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
