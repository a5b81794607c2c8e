"""The softmax kernels' assembly, compiled for sm_80 and sm_90a without a GPU: butterfly
shuffles where rows span lanes (none for lane-local rows), no local memory for any style,
16-byte accesses, one ``ex2.approx`` per element, barriers only where warps share a row,
and few enough registers for the planned occupancy."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from examples.softmax.host import compile_softmax
from examples.softmax.plan import make_config, vector_width

TARGETS = ["sm_80", "sm_90a"]
_OPCODE = re.compile(r"^\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]+)", re.MULTILINE)


def opcodes(k) -> Counter:
    return Counter(_OPCODE.findall(k.sass))


def family(ops: Counter, name: str) -> int:
    return sum(n for op, n in ops.items() if op.split(".")[0] == name)


def check_no_local_memory(k, ops: Counter) -> None:
    assert family(ops, "LDL") == 0 and family(ops, "STL") == 0
    r = k.resources
    assert (r.spill_stores, r.spill_loads, r.stack_bytes) == (0, 0, 0)


def cfg_for(style, cols, dtype, mask="none", **kw):
    itemsize = 4 if dtype == "f32" else 2
    return make_config(style, cols, vec=vector_width(itemsize, cols, True), mask=mask, **kw)


# every style, pass count and mask kind: no local memory on either target
CASES = [
    ("lane", 12, "f32", "none", {}),
    ("lane", 16, "bf16", "length", {}),
    ("lane", 7, "f32", "bool", {}),
    ("warp", 1024, "f32", "none", {}),
    ("warp", 1000, "bf16", "bool", {}),
    ("warp", 8192, "f32", "length", {}),
    ("warp", 32768, "bf16", "none", {}),
    ("warp", 70000, "f32", "bool", {}),  # online
    ("warp", 4096, "bf16", "length", {"threads_per_row": 32, "passes": 2}),
    ("mma", 64, "f32", "none", {}),
    ("mma", 64, "bf16", "bool", {}),
    ("mma", 1000, "f32", "length", {}),  # two-pass
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("style,cols,dtype,mask,kw", CASES)
def test_no_local_memory(target, style, cols, dtype, mask, kw):
    cfg = cfg_for(style, cols, dtype, mask, **kw)
    k = compile_softmax(cfg, dtype, target=target)
    ops = opcodes(k)
    check_no_local_memory(k, ops)
    assert family(ops, "MUFU") >= cfg.ownership.values  # one ex2 per element at least
    if style == "lane":
        assert family(ops, "SHFL") == 0  # whole rows in one thread: no communication
    else:
        assert family(ops, "SHFL") > 0 and "SHFL.BFLY" in k.sass


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("cols", [1024, 8192, 32768])
def test_issue_shapes(target, dtype, cols):
    """The benchmark's kernels: 16-byte loads and stores, all issued before the first use
    (one pass: read once, write once), one ex2.approx per element, shuffles 5 per reduction,
    barriers only when several warps share a row, registers for full occupancy."""
    cfg = cfg_for("warp", cols, dtype)
    k = compile_softmax(cfg, dtype, target=target)
    ops = opcodes(k)
    check_no_local_memory(k, ops)
    per_thread = cfg.vec * cfg.chunks
    assert ops["LDG.E.128"] + ops.get("LDG.E.128.CONSTANT", 0) == cfg.chunks
    assert ops["STG.E.128"] == cfg.chunks
    assert ops["MUFU.EX2"] == per_thread
    assert ops["SHFL.BFLY"] == 10  # 5 lane bits, max and sum
    assert family(ops, "BAR") == (0 if cfg.threads_per_row <= 32 else 2)
    assert k.resources.registers <= 64  # 256-thread blocks: 4 per SM; 1024: one
    sass = k.sass
    loads = [m.start() for m in re.finditer(r"LDG\.E\.128", sass)]
    first_math = sass.find("FMNMX")
    assert max(loads) < first_math  # every load in flight before the first use


@pytest.mark.parametrize("target", TARGETS)
def test_mma_quads_shuffle_twice_per_reduction(target):
    cfg = cfg_for("mma", 64, "f32")
    k = compile_softmax(cfg, "f32", target=target)
    ops = opcodes(k)
    check_no_local_memory(k, ops)
    # each thread holds 2 rows; max and sum; 2 shuffles each (the 4 lanes of a quad)
    assert ops["SHFL.BFLY"] == 8
    assert ops["LDG.E.64"] == 16 and ops["STG.E.64"] == 16  # element pairs, 8 bytes
    assert family(ops, "BAR") == 0


def test_ptx_uses_ex2_approx_and_vectors():
    cfg = cfg_for("warp", 1024, "bf16")
    ptx = compile_softmax(cfg, "bf16", target="sm_90a").ptx
    assert "ex2.approx.ftz.f32" in ptx
    assert "ld.global.v4.u32" in ptx or "ld.global.v4.b32" in ptx
    assert "shfl.sync.bfly.b32" in ptx
    assert "cvt.rn.bf16" in ptx


@pytest.mark.parametrize(
    "argv",
    [
        ["4096", "1024", "--target", "sm_80", "--compile-only"],
        ["100", "12", "--style", "lane", "--mask", "bool", "--target", "sm_90a", "--compile-only"],
        ["100", "64", "--style", "mma", "--dtype", "bf16", "--mask", "length", "--compile-only"],
        ["3", "40000", "--style", "warp", "--target", "sm_90a", "--emit", "ptx"],
    ],
)
def test_command_line_compiles_without_a_gpu(argv):
    run = [sys.executable, str(ROOT / "examples" / "softmax" / "run.py"), *argv]
    r = subprocess.run(run, check=False, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    if "--compile-only" in argv:
        assert "spills 0/0 B" in r.stdout
    else:
        assert ".visible .entry online_softmax_kernel" in r.stdout
