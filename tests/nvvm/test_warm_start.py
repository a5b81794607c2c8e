"""A disk-cache hit in a fresh process imports no sympy and loads no compiler (issue 35).

Kernels: the vector_add example, a user kernel with launch guards, and the shipped softmax
and attention (warp path) through their command lines (``--compile-only``). The warp and
Hopper GEMMs and Hopper attention are not here: their host plans build layouts over
symbolic leading dimensions on every call (the GEMM's global-side proofs, the Hopper
plans that are part of the specialization key), so they still import sympy.

The first process compiles (libNVVM, no GPU) and fills a private cache; the second finds
each kernel at the first cache level (no trace) and reports what it imported and loaded:
sympy and the tracer's modules must be absent, and neither libNVVM nor nvJitLink may be
mapped into the process (``/proc/self/maps``) or loaded by tylo's own loader
(``tylo.backend.nvvm._loaded``). Guards read back from the cache are evaluated in that
process, without sympy, and compared with the facts computed here by brute force.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# modules a hit must not import: the symbolic algebra and the tracer built on it
FORBIDDEN = ("sympy", "tylo.kernel.trace", "tylo.kernel.control", "tylo.kernel.facts")

GUARDED = """
import tylo


@tylo.kernel
def guarded(c, a, n, m):
    tylo.assume(tylo.divisible(n, 4), n <= 2 * m + 3)
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    if i < n:
        c[i] = a[i]
"""

# argv: repo root, user directory, then the cases to compile
SCRIPT = """
import json, sys, time
start = time.perf_counter()
sys.path.insert(0, sys.argv[1])
sys.path.insert(0, sys.argv[2])
import tylo
out = {}
for case in sys.argv[3:]:
    if case == "vector_add":
        from examples.vector_add.kernel import vector_add as kern
        k = kern.compile(tylo.f32, tylo.f32, tylo.f32, int, block=256, target="sm_90a")
    elif case == "guarded":
        from user_guarded import guarded as kern
        k = kern.compile(tylo.f32, tylo.f32, int, int, block=128, target="sm_90a")
        from tylo.kernel.guards import check_guards, compile_guards
        ok = compile_guards(k.guards)
        out["guard"] = {f"{n},{m}": ok((None, None, n, m))
                        for n in range(-9, 40) for m in range(-9, 20)}
        try:
            check_guards([(g, g.compile()) for g in k.guards], (None, None, 6, 9), "guarded")
        except tylo.KernelArgumentError as err:
            out["refusal"] = str(err)
    out[case] = [k.timings["cache"], kern.stats.traces, kern.stats.disk_hits]
out["seconds"] = time.perf_counter() - start
nvvm = sys.modules.get("tylo.backend.nvvm")
out["nvvm_loaded"] = nvvm is not None and nvvm._loaded is not None
try:
    maps = open("/proc/self/maps").read().lower()
except OSError:
    maps = None
out["mapped"] = None if maps is None else [x for x in ("nvvm", "nvjitlink") if x in maps]
out["modules"] = [m for m in FORBIDDEN if m in sys.modules]
print(json.dumps(out))
""".replace("FORBIDDEN", repr(FORBIDDEN))


def run(tmp: Path, *cases: str) -> dict:
    env = {**os.environ, "TYLO_CACHE_DIR": str(tmp / "cache")}
    env.pop("TYLO_CACHE", None)
    env.pop("TYLO_DEBUG_BOUNDS", None)
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(ROOT), str(tmp), *cases],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture
def user_dir(tmp_path: Path) -> Path:
    (tmp_path / "user_guarded.py").write_text(textwrap.dedent(GUARDED))
    return tmp_path


def test_first_process_compiles_and_loads_the_compiler(user_dir: Path) -> None:
    """The check can fail: a process that compiles does load libNVVM and the tracer."""
    first = run(user_dir, "vector_add", "guarded")
    assert first["vector_add"][0] == "miss" and first["vector_add"][1] == 1
    assert first["nvvm_loaded"] is True
    assert "sympy" in first["modules"] and "tylo.kernel.trace" in first["modules"]
    if first["mapped"] is not None:
        assert "nvvm" in first["mapped"]


def test_a_hit_imports_no_sympy_and_loads_no_compiler(user_dir: Path) -> None:
    run(user_dir, "vector_add", "guarded")
    second = run(user_dir, "vector_add", "guarded")
    assert second["vector_add"] == ["kernel-hit", 0, 1]
    assert second["guarded"] == ["kernel-hit", 0, 1]
    assert second["modules"] == [], f"a cache hit imported {second['modules']}"
    assert second["nvvm_loaded"] is False
    if second["mapped"] is not None:
        assert second["mapped"] == [], f"a cache hit loaded {second['mapped']}"


def test_guards_read_back_hold_exactly_where_the_facts_do(user_dir: Path) -> None:
    """The cached guards, evaluated with no sympy in the process, against brute force."""
    run(user_dir, "guarded")
    second = run(user_dir, "guarded")
    assert second["guarded"] == ["kernel-hit", 0, 1] and "sympy" not in second["modules"]
    for nm, got in second["guard"].items():
        n, m = map(int, nm.split(","))
        assert got == (n % 4 == 0 and n <= 2 * m + 3), nm
    assert "guarded: the kernel was compiled assuming" in second["refusal"]
    assert "4" in second["refusal"]  # 6 is not a multiple of 4


# the shipped ops' command lines, as a user runs them; what the process imported is
# written to stderr at exit
OPS = {
    "softmax": ["tylo.ops.softmax", "256", "1024"],
    "attention warp": ["tylo.ops.attention", "1", "2", "256", "64", "--path", "warp"],
}

OP_SCRIPT = """
import atexit, runpy, sys
def report():
    nvvm = sys.modules.get("tylo.backend.nvvm")
    maps = open("/proc/self/maps").read().lower() if sys.platform == "linux" else ""
    print("REPORT", [m for m in FORBIDDEN if m in sys.modules],
          nvvm is not None and nvvm._loaded is not None,
          [x for x in ("nvvm", "nvjitlink") if x in maps], file=sys.stderr)
atexit.register(report)
sys.argv = [sys.argv[1], *sys.argv[2:], "--target", "sm_90a", "--compile-only"]
runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
""".replace("FORBIDDEN", repr(("sympy",)))  # tile helpers import tracer modules (no sympy)


def run_op(tmp: Path, args: list[str]) -> tuple[str, str]:
    env = {**os.environ, "TYLO_CACHE_DIR": str(tmp / "cache"), "PYTHONPATH": str(ROOT)}
    env.pop("TYLO_CACHE", None)
    env.pop("TYLO_DEBUG_BOUNDS", None)
    proc = subprocess.run(
        [sys.executable, "-c", OP_SCRIPT, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=False,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    report = [line for line in proc.stderr.splitlines() if line.startswith("REPORT ")]
    return proc.stdout, report[-1]


@pytest.mark.parametrize("op", sorted(OPS))
def test_a_shipped_op_hit_imports_no_sympy_and_loads_no_compiler(tmp_path: Path, op: str) -> None:
    first_out, first = run_op(tmp_path, OPS[op])
    assert "(cache miss)" in first_out and "'sympy'" in first and "True" in first
    second_out, second = run_op(tmp_path, OPS[op])
    assert "(cache kernel-hit)" in second_out and "(cache miss)" not in second_out
    assert second == "REPORT [] False []", f"{op}: a cache hit imported or loaded {second}"
