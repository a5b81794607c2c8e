"""A chained product ``(A Bᵀ) Cᵀ`` through registers, compiled for sm_80 and sm_90a without a
GPU: both MMAs are tensor-core ``HMMA``, the accumulator reaches the second MMA as packed
``cvt`` registers (``F2FP``), and nothing between them touches shared or local memory (no
STS, LDS, LDL or STL anywhere: the tiles arrive by ``cp.async`` and the operands leave
shared memory by ``ldmatrix``). ``tests/gpu/test_mma_chain_gpu.py`` runs this kernel."""

from __future__ import annotations

import re
from collections import Counter

import pytest

import tylo
from tylo.kernel.errors import TraceError
from tylo.layouts import Layout
from tylo.nvgpu.cpasync import CopyPlan, commit_copies, copy_async, wait_copies
from tylo.nvgpu.warp.chain import accumulator_as_a_operand
from tylo.nvgpu.warp.ldmatrix import load_operand
from tylo.nvgpu.warp.mma import (
    MMAAtom,
    TiledMMA,
    mma,
    mma_atoms,
    size,
    zero_accumulator,
)
from tylo.tile.access import GlobalTile, SharedTile, store


def chain_plans(wm, rm, n1, n2, k1, dtype):
    """The first MMA (M, n1, k1) and the second (M, n2, k = n1), both with warps (wm, 1)."""
    atom = MMAAtom((16, 8, 16), dtype)
    first = TiledMMA(atom, warps=(wm, 1), repeat=(rm, n1 // 8), k=k1)
    second = TiledMMA(atom, warps=(wm, 1), repeat=(rm, n2 // 8), k=n1)
    return first, second


PLANS = {
    "atoms": chain_plans(1, 1, 16, 8, 16, tylo.bf16),
    "attention": chain_plans(4, 1, 64, 64, 64, tylo.bf16),
    "repeats": chain_plans(2, 2, 32, 24, 32, tylo.f16),
}


def _stage(threads, src, rows, cols, tid):
    """Copy a (rows, cols) row-major global tile to shared memory with cp.async."""
    layout = Layout((rows, cols), (cols, 1))
    dst = SharedTile(tylo.shared(src.dtype, rows * cols), layout)
    nbytes = rows * cols * src.dtype.nbytes
    vec = next(v for v in (16, 8, 4) if nbytes % (v * threads) == 0)
    copy_async(
        CopyPlan((rows, cols), src.dtype, threads, layout, vector_bytes=vec),
        GlobalTile(src, Layout((rows, cols), (cols, 1))),
        dst,
        tid,
    )
    return dst


# --8<-- [start:chain]
@tylo.kernel
def chained(
    d,
    a: tylo.Ptr(align=16),
    b: tylo.Ptr(align=16),
    c: tylo.Ptr(align=16),
    first: tylo.Static,
    second: tylo.Static,
    bad: tylo.Static = False,
):
    """d (M, n2), column-major = (a (M, k1) @ b (n1, k1)ᵀ) @ c (n2, n1)ᵀ, the first
    product's accumulator fed to the second MMA in registers."""
    tid = tylo.thread_idx.x
    m, n1, k1 = size(first)
    _, n2, _ = size(second)
    sa = _stage(first.threads, a, m, k1, tid)
    sb = _stage(first.threads, b, n1, k1, tid)
    sc = _stage(first.threads, c, n2, n1, tid)
    commit_copies()
    wait_copies(0)
    tylo.sync_threads()
    s = mma(first, sa, sb, zero_accumulator(first), tid)  # S over (M, n1), f32
    p = accumulator_as_a_operand(s, second)  # one packed A fragment per k-step of 16
    acc = zero_accumulator(second)
    for ks in range(second.k_steps):
        pa = p[ks].transpose() if bad else p[ks]
        acc = mma_atoms(second, pa, load_operand(second, "b", sc, tid, ks), acc)
    store(second, GlobalTile(d, Layout((m, n2), (1, m))), acc, tid)


# --8<-- [end:chain]


_LINE = re.compile(r"^\s*/\*[0-9a-f]+\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]+)", re.MULTILINE)


def executed(sass: str) -> list[str]:
    """The opcodes in program order, without ptxas's never-executed ``@!PT`` padding (it
    pads with ``@!PT LDS RZ, [RZ]``, which touches no memory)."""
    return [op for pred, op in _LINE.findall(sass) if pred.strip() != "@!PT"]


def families(ops: list[str]) -> Counter:
    return Counter(op.split(".")[0] for op in ops)


def compile_chain(name, target, bad=False):
    first, second = PLANS[name]
    ptr = tylo.pointer(first.atom.dtype, align=16)
    return chained.compile(
        tylo.f32, ptr, ptr, ptr, first, second, bad, block=first.threads, target=target
    )


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("name", ["atoms", "attention"])
def test_chain_assembly(name, target):
    first, second = PLANS[name]
    k = compile_chain(name, target)
    seq = executed(k.sass)
    ops = families(seq)
    d = first.atom.dtype
    hmma = [p.repeat[0] * p.repeat[1] * p.k_steps for p in (first, second)]  # per thread, per plan
    assert k.ptx.count(f"mma.sync.aligned.m16n8k16.row.col.f32.{d}.{d}.f32") == sum(hmma)
    assert ops["HMMA"] == sum(hmma) and f"HMMA.16816.F32.{str(d).upper()}" in k.sass
    # the chain: one cvt pack per A register, no shared or local memory round trip
    packs = 4 * second.repeat[0] * second.k_steps
    assert k.ptx.count(f"cvt.rn.{d}x2.f32") == packs and ops["F2FP"] == packs
    assert ops["STS"] == 0 and ops["LDS"] == 0, ops
    assert ops["LDL"] == 0 and ops["STL"] == 0, ops
    hm = [i for i, op in enumerate(seq) if op.startswith("HMMA")]
    between = families(seq[hm[0] : hm[-1]])
    assert between["F2FP"] >= 1  # the packing happens between the two MMAs' HMMAs
    # (finished results may already be stored to global memory: STG is no round trip)
    assert all(between[f] == 0 for f in ("STS", "LDS", "LDL", "STL", "BAR", "LDG")), between
    r = k.resources
    assert (r.spill_stores, r.spill_loads, r.stack_bytes) == (0, 0, 0)
    assert ops["LDSM"] >= 1 and ops["LDGSTS"] >= 1  # the operands' own way in


def test_f16_repeats_compile():
    k = compile_chain("repeats", "sm_80")
    ops = families(executed(k.sass))
    assert "HMMA.16816.F32" in k.sass and ops["STS"] == 0 and ops["LDS"] == 0
    assert k.ptx.count("cvt.rn.f16x2.f32") == 4 * 2 * 2


def test_wrong_operand_ownership_refused_by_mma_atoms():
    """The converted fragment seen through the transposed ownership has the right register
    count but the wrong coordinates: mma_atoms refuses it."""
    with pytest.raises(TraceError, match="PlanError: mma: operand A has the ownership"):
        compile_chain("atoms", "sm_80", bad=True)
