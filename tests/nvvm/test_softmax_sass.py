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

from tylo.ops.softmax.host import compile_softmax
from tylo.ops.softmax.plan import SoftmaxError, make_config, vector_width

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
    # the next row streamed into shared memory (sm_90 and newer only)
    ("warp", 32768, "bf16", "none", {"prefetch": True}),
    ("warp", 30000, "bf16", "length", {"prefetch": True}),
    ("warp", 32768, "bf16", "bool", {"prefetch": True, "stages": 2}),
    ("warp", 1000, "f32", "none", {"threads_per_row": 64, "rows_per_block": 1, "prefetch": True}),
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("style,cols,dtype,mask,kw", CASES)
def test_no_local_memory(target, style, cols, dtype, mask, kw):
    cfg = cfg_for(style, cols, dtype, mask, **kw)
    if cfg.prefetch and target == "sm_80":
        with pytest.raises(SoftmaxError, match="sm_90 and newer"):
            compile_softmax(cfg, dtype, target=target)
        return
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
    assert ops["LDG.E.128"] == cfg.chunks
    assert ops["STG.E.128"] == cfg.chunks
    assert ops["MUFU.EX2"] == per_thread
    # 5 lane bits, max and sum; warps sharing a row: log2(warps) more on their partials
    warps = cfg.threads_per_row // 32
    assert ops["SHFL.BFLY"] == 2 * (5 + max(warps, 1).bit_length() - 1)
    assert family(ops, "BAR") == (0 if warps <= 1 else 2)  # one per reduction
    assert family(ops, "LDS") == (0 if warps <= 1 else 2)  # one partial read per reduction
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
    run = [sys.executable, "-m", "tylo.ops.softmax", *argv]
    r = subprocess.run(run, check=False, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    if "--compile-only" in argv:
        assert "spills 0/0 B" in r.stdout
    else:
        assert ".visible .entry online_softmax_kernel" in r.stdout


@pytest.mark.parametrize("target", ["sm_90a", "sm_90"])
def test_prefetch_streams_the_next_row_through_shared_memory(target):
    """bf16 rows of 32,768: while one row is normalized the next arrives by cp.async
    (LDGSTS, 16 bytes, bypassing L1), read back with 16-byte shared loads; the copies need
    no barrier (each thread reads what it copied): the only two are the reductions'."""
    cfg = make_config("warp", 32768, vec=8, prefetch=True)
    k = compile_softmax(cfg, "bf16", target=target)
    ops = opcodes(k)
    check_no_local_memory(k, ops)
    # the prologue's rows, and the loop's (bounded: a row past the last reads nothing)
    assert family(ops, "LDGSTS") == cfg.stages * cfg.chunks
    assert all(".128" in op for op in ops if op.startswith("LDGSTS"))
    assert ops["LDS.128"] == cfg.chunks and ops["STG.E.128"] == cfg.chunks
    assert family(ops, "LDG") == 0  # every input byte arrives through shared memory
    assert family(ops, "BAR") == 2
    assert k.resources.registers <= 64 and k.dynamic_shared_bytes == cfg.stages * 32768 * 2
