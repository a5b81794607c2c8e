# TEST_TARGET: cc>=8.0
"""The disk cache across processes: a second process finds a kernel's cubin without tracing,
and an edit to the kernel, to a helper module it calls, or to a module constant it reads is
never served a stale cubin; nor is a changed value the trace read without any file changing
(a module-level dict entry, another module's attribute); a forged guard in the cache never
runs. The compile-only half needs no GPU; the runtime half launches from two processes and
checks the results."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

KERNEL = """
import tylo
import helper

SCALE = {scale}


INTERPRET_SKIP = (  # the interpreter tier (tests/interp_tier.py)
    "tests the disk cache of compiled cubins across processes; the interpreter loads no cubin"
)


@tylo.kernel
def scaled_add(c, a, b, n):
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    if i < n:
        c[i] = helper.combine(a[i], b[i]) * SCALE
"""

HELPER = """
def combine(x, y):
    return x {op} y
"""

SCRIPT = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
sys.path.insert(0, sys.argv[2])
import tylo
import user_kernel
start = time.perf_counter()
if sys.argv[3] == "compile":
    k = user_kernel.scaled_add.compile(tylo.f32, tylo.f32, tylo.f32, int, block=128,
                                       target="sm_90a")
    result = None
else:
    import numpy as np
    from tylo.arrays import DeviceBuffer
    from tylo.backend import driver
    n = 1000
    a = np.arange(n, dtype=np.float32)
    b = np.full(n, 2.0, np.float32)
    dc = DeviceBuffer.empty(n, tylo.f32).fill_bytes(0xFF)
    user_kernel.scaled_add[(n + 127) // 128, 128](dc, DeviceBuffer.from_numpy(a),
                                                 DeviceBuffer.from_numpy(b), n)
    driver.synchronize()
    result = dc.to_numpy()[:4].tolist()
    k = next(iter(user_kernel.scaled_add._built.values()))
elapsed = time.perf_counter() - start
s = user_kernel.scaled_add.stats
print(json.dumps({"traces": s.traces, "compiles": s.compiles, "disk_hits": s.disk_hits,
                  "cache": k.timings["cache"], "ptx": k.ptx, "result": result,
                  "elapsed": elapsed, "sympy": "sympy" in sys.modules}))
"""


def write_project(path: Path, *, scale: str = "3.0", op: str = "+") -> None:
    (path / "user_kernel.py").write_text(textwrap.dedent(KERNEL.format(scale=scale)))
    (path / "helper.py").write_text(textwrap.dedent(HELPER.format(op=op)))


def run(tmp: Path, mode: str) -> dict:
    env = {**os.environ, "TYLO_CACHE_DIR": str(tmp / "cache")}
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp / "src"), str(ROOT), mode],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("TYLO_CACHE", raising=False)
    (tmp_path / "src").mkdir()
    write_project(tmp_path / "src")
    return tmp_path


def test_second_process_hits_without_tracing(project: Path):
    first = run(project, "compile")
    assert first["traces"] == 1 and first["disk_hits"] == 0
    second = run(project, "compile")
    assert second["traces"] == 0 and second["disk_hits"] == 1
    assert second["cache"] == "kernel-hit"
    assert second["ptx"] == first["ptx"]
    assert first["sympy"] and not second["sympy"]  # a hit imports no sympy (issue 35)


def test_edits_are_never_served_stale(project: Path):
    base = run(project, "compile")
    assert "mul.f32" in base["ptx"] or "mul.rn.f32" in base["ptx"]
    write_project(project / "src", op="-")  # the helper module the kernel calls
    helper_edit = run(project, "compile")
    assert helper_edit["traces"] == 1 and "sub.f32" in helper_edit["ptx"]
    write_project(project / "src", op="-", scale="5.0")  # a module constant it reads
    constant_edit = run(project, "compile")
    assert constant_edit["traces"] == 1
    assert constant_edit["ptx"] != helper_edit["ptx"] and "0f40A00000" in constant_edit["ptx"]
    again = run(project, "compile")
    assert again["traces"] == 0 and again["ptx"] == constant_edit["ptx"]
    write_project(project / "src")  # back to the first version: one entry per key, so
    back = run(project, "compile")  # a trace, then the IR-keyed cache has its cubin
    assert back["traces"] == 1 and back["cache"] == "hit" and back["ptx"] == base["ptx"]


def test_cache_can_be_disabled(project: Path, monkeypatch):
    run(project, "compile")
    monkeypatch.setenv("TYLO_CACHE", "0")
    env_off = run(project, "compile")
    assert env_off["traces"] == 1 and env_off["disk_hits"] == 0


def test_corrupt_entry_is_recompiled(project: Path):
    run(project, "compile")
    for entry in (project / "cache").rglob("*.tylo"):
        entry.write_bytes(entry.read_bytes()[:100])  # truncate every entry
    again = run(project, "compile")
    assert again["traces"] == 1 and again["disk_hits"] == 0


def test_second_process_launch_hits(gpu_runtime, project: Path):
    first = run(project, "launch")
    second = run(project, "launch")
    assert second["disk_hits"] == 1 and second["traces"] == 0
    assert not second["sympy"]  # the launch path of a hit imports no sympy (issue 35)
    want = [(i + 2.0) * 3.0 for i in range(4)]
    assert first["result"] == want and second["result"] == want


# ------------------------------------------- values read by the trace, set at run time

READS_KERNEL = """
import tylo
import othermod

CONST = {"a": 3.0}


@tylo.kernel
def axpb(c, a, n):
    tylo.assume(tylo.divisible(n, 4))
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    if i < n:
        c[i] = a[i] * CONST["a"] + othermod.ATTR
"""

READS_SCRIPT = """
import json, sys
sys.path.insert(0, sys.argv[1])
sys.path.insert(0, sys.argv[2])
import tylo
import othermod, reads_kernel
reads_kernel.CONST["a"] = float(sys.argv[3])  # the same files, other values
othermod.ATTR = float(sys.argv[4])
result = None
if len(sys.argv) > 5:  # launch with n = argv[5]: the guard (4 | n) is checked
    import numpy as np
    from tylo.arrays import DeviceBuffer
    from tylo.backend import driver
    n = int(sys.argv[5])
    dc = DeviceBuffer.empty(n, tylo.f32).fill_bytes(0xFF)
    a = DeviceBuffer.from_numpy(np.arange(n, dtype=np.float32))
    try:
        reads_kernel.axpb[(n + 127) // 128, 128](dc, a, n)
        driver.synchronize()
        result = dc.to_numpy()[:4].tolist()
    except tylo.KernelArgumentError as err:
        result = str(err)
    k = next(iter(reads_kernel.axpb._built.values()))
else:
    k = reads_kernel.axpb.compile(tylo.f32, tylo.f32, int, block=128, target="sm_90a")
s = reads_kernel.axpb.stats
print(json.dumps({"traces": s.traces, "disk_hits": s.disk_hits, "ptx": k.ptx,
                  "guards": [g.to_data() for g in k.guards], "result": result}))
"""


def run_reads(tmp: Path, a: str, attr: str, *launch_n: str) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", READS_SCRIPT, str(tmp / "src"), str(ROOT), a, attr, *launch_n],
        capture_output=True,
        text=True,
        env={**os.environ, "TYLO_CACHE_DIR": str(tmp / "cache")},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture
def reads_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("TYLO_CACHE", raising=False)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "reads_kernel.py").write_text(textwrap.dedent(READS_KERNEL))
    (tmp_path / "src" / "othermod.py").write_text("ATTR = 0.25\n")
    return tmp_path


def test_values_the_trace_read_are_rechecked_across_processes(reads_project: Path):
    first = run_reads(reads_project, "3.0", "0.25")  # CONST = {'a': 3.0}
    assert first["traces"] == 1 and "0f40400000" in first["ptx"]  # 3.0
    dict_entry = run_reads(reads_project, "5.0", "0.25")  # {'a': 5.0}: no stale hit
    assert dict_entry["traces"] == 1 and dict_entry["disk_hits"] == 0
    assert "0f40A00000" in dict_entry["ptx"] and "0f40400000" not in dict_entry["ptx"]
    same = run_reads(reads_project, "5.0", "0.25")  # nothing changed: a hit
    assert same["traces"] == 0 and same["disk_hits"] == 1 and same["ptx"] == dict_entry["ptx"]
    attr = run_reads(reads_project, "5.0", "0.75")  # othermod.ATTR: no stale hit
    assert attr["traces"] == 1 and attr["disk_hits"] == 0
    assert "0f3F400000" in attr["ptx"] and "0f3E800000" not in attr["ptx"]


def test_a_forged_guard_in_the_cache_never_runs(reads_project: Path):
    from tylo.backend import cache as C
    from tylo.kernel import diskcache

    first = run_reads(reads_project, "3.0", "0.25")
    assert first["guards"] == [["4 | n", ["==", ["%", ["v", 2], 4], 0]]]
    marker = reads_project / "pwned"
    payload = f"__import__('pathlib').Path({str(marker)!r}).touch() or True"
    forged = 0
    for path in (reads_project / "cache").rglob("*.tylo"):
        e = C._decode(path.read_bytes(), path.stem)
        if e is not None and e.meta.get("format") == diskcache.FORMAT:
            meta = {**e.meta, "guards": [["4 | n", payload]]}  # the old form: text to eval
            path.write_bytes(C._encode(path.stem, C.CacheEntry(e.ptx, e.cubin, e.info_log, meta)))
            forged += 1
    assert forged == 1
    second = run_reads(reads_project, "3.0", "0.25")
    assert not marker.exists()
    assert second["traces"] == 1 and second["disk_hits"] == 0  # refused, recompiled
    assert second["guards"] == first["guards"] and second["ptx"] == first["ptx"]


def test_guards_from_the_cache_are_checked_at_launch(gpu_runtime, reads_project: Path):
    """A second process launches from the first-level entry; the guard it read back (as
    data) still refuses arguments that violate it, and the results are right."""
    first = run_reads(reads_project, "3.0", "0.25", "1000")
    assert first["traces"] == 1 and first["result"] == [0.25, 3.25, 6.25, 9.25]
    second = run_reads(reads_project, "3.0", "0.25", "1000")
    assert second["traces"] == 0 and second["disk_hits"] == 1
    assert second["result"] == first["result"]
    refused = run_reads(reads_project, "3.0", "0.25", "1002")  # 4 does not divide 1002
    assert refused["traces"] == 0 and refused["disk_hits"] == 1
    assert "compiled assuming 4 | n" in refused["result"]
