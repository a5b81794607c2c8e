# TEST_TARGET: cc>=9.0a
"""Warpgroup MMA (wgmma) alone, decoded independently of tylo's layouts.

The A (64 x K) and B (N x K) operands hold small integers (exact in bf16/f16 and f32). A
warpgroup stages them into shared tiles of the layout under test with plain stores, fences
them to the async proxy, issues one ``wgmma.mma_async`` per k-step through descriptors that
tylo derives from the tiles' layouts, waits, and dumps every accumulator register. The host
checks each thread's register ``v`` against the float64 product at the coordinate the atom's
accumulator ownership names. Layouts cover K-major with no swizzle, 32, 64 and 128 bytes, and
MN-major B, and k-steps inside a 128-byte swizzled row.
"""

from __future__ import annotations

import numpy as np
import pytest

import tylo
from tylo.layouts import Layout, Swizzle, composition
from tylo.nvgpu.warpgroup.mma import (
    WarpgroupMMAAtom,
    commit_group,
    fence,
    fence_shared_to_async,
    mma_async,
    wait_group,
)
from tylo.tile.fragment import zeros
from tylo.tile.views import SharedTile

INTERPRET_SKIP = (  # the interpreter tier (tests/interp_tier.py)
    "sm_90a kernels (wgmma, TMA, mbarrier, setmaxnreg, clusters): the interpreter refuses "
    "these instructions by name (UnsupportedOperation; docs/interpret.md)"
)


def k_major(rows: int, k: int, swizzle: str):
    """A (rows, k) K-major tile in the canonical form of ``swizzle`` (bf16)."""
    if swizzle == "none":  # 8x8 core matrices: rows 16 B apart, row groups 128 B apart
        return Layout(((8, rows // 8), (8, k // 8)), ((8, 64), (1, 8 * rows)))
    bits = {"32B": 1, "64B": 2, "128B": 3}[swizzle]
    width = 8 << bits  # elements per swizzled row
    assert k % width == 0
    # rows of `width` elements, k-blocks of width after all rows
    return composition(
        Swizzle(bits, 3, 3), Layout((rows, (width, k // width)), (width, (1, rows * width)))
    )


def mn_major_128(rows: int, k: int):
    """A (rows, k) tile with rows contiguous, 128-byte swizzle (64-row atoms)."""
    return composition(Swizzle(3, 3, 3), Layout(((64, rows // 64), k), ((1, 64 * k), 64)))


CASES = {
    "K none n64 k32": (64, 32, "none", "K"),
    "K 32B n64 k32": (64, 32, "32B", "K"),
    "K 64B n128 k64": (128, 64, "64B", "K"),
    "K 128B n128 k64": (128, 64, "128B", "K"),
    "K 128B n256 k64": (256, 64, "128B", "K"),
    "K 128B n8 k64": (8, 64, "128B", "K"),
    "B MN 128B n64 k64": (64, 64, "128B", "MN"),
}


def _layouts(n, k, swizzle, b_major):
    la = k_major(64, k, swizzle)
    lb = k_major(n, k, swizzle) if b_major == "K" else mn_major_128(n, k)
    return la, lb


@tylo.kernel
def wgmma_dump(raw, a: tylo.Ptr(align=16), b: tylo.Ptr(align=16), case: tylo.Static):
    n, k, swizzle, b_major = case
    atom = WarpgroupMMAAtom((64, n, 16), a.dtype)
    la, lb = _layouts(n, k, swizzle, b_major)
    tid = tylo.thread_idx.x
    sa = SharedTile(tylo.shared(a.dtype, 64 * k, align=1024), la)
    sb = SharedTile(tylo.shared(b.dtype, n * k, align=1024), lb)
    for rows, src, dst in ((64, a, sa), (n, b, sb)):
        for i in range(rows * k // 128):
            e = tid + 128 * i
            r = e // k
            c = e % k
            dst.storage[dst.offset((r, c))] = src[e]
    fence_shared_to_async()
    tylo.sync_threads()
    fence()
    acc = zeros(atom.c)
    for ks in range(k // 16):
        acc = mma_async(atom, sa, sb, acc, k_offset=16 * ks, accumulate=ks > 0)
    commit_group()
    acc = wait_group(0, acc)
    for v in range(len(acc)):
        raw[tid * len(acc) + v] = acc[v]


def _compile(case, target="sm_90a"):
    return wgmma_dump.compile(
        tylo.f32,
        tylo.pointer(tylo.bf16, align=16),
        tylo.pointer(tylo.bf16, align=16),
        CASES[case],
        block=128,
        target=target,
    )


@pytest.mark.parametrize("case", ["K 128B n128 k64", "B MN 128B n64 k64", "K none n64 k32"])
def test_assembly(case):
    kern = _compile(case)
    n, k, _, _ = CASES[case]
    assert kern.ptx.count(f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.bf16.bf16") == k // 16
    assert f"HGMMA.64x{n}x16.F32.BF16" in kern.sass
    for op in ("LDL", "STL"):
        assert op not in kern.sass, f"{op} in the SASS of {case}"


def test_wgmma_needs_sm90a():
    with pytest.raises(tylo.TyloError, match="sm_90a"):
        _compile("K 32B n64 k32", target="sm_90")


@pytest.mark.parametrize("case", sorted(CASES))
def test_accumulators_match_ownership(gpu_runtime, case):
    import torch

    n, k, _, _ = CASES[case]
    rng = np.random.default_rng()
    a = rng.integers(-3, 4, size=(64, k)).astype(np.float32)
    b = rng.integers(-3, 4, size=(n, k)).astype(np.float32)
    ta = torch.tensor(a, dtype=torch.bfloat16, device="cuda")
    tb = torch.tensor(b, dtype=torch.bfloat16, device="cuda")
    raw = torch.full((128 * n // 2,), float("nan"), dtype=torch.float32, device="cuda")
    wgmma_dump[1, 128](raw, ta, tb, CASES[case])
    torch.cuda.synchronize()
    got = raw.cpu().numpy().reshape(128, n // 2)
    want = a.astype(np.float64) @ b.astype(np.float64).T
    for t in range(128):
        for v in range(n // 2):
            m, j = _ptx_d_coord(t, v)
            assert got[t, v] == want[m, j], (case, t, v, (m, j))


def _ptx_d_coord(t: int, v: int) -> tuple[int, int]:
    """PTX ISA 9.7.15.5.1.2 (m64nNk16 D fragment), written out: register d[v] of thread t."""
    warp, lane = divmod(t, 32)
    group, tig = divmod(lane, 4)
    return 16 * warp + group + 8 * ((v >> 1) & 1), 8 * (v >> 2) + 2 * tig + (v & 1)


@pytest.mark.parametrize("n", [8, 64, 136, 256])
def test_accumulator_ownership_is_the_ptx_fragment(n):
    own = WarpgroupMMAAtom((64, n, 16), tylo.bf16).c
    assert own.covers_once
    for t in range(128):
        assert own.coords(t) == [_ptx_d_coord(t, v) for v in range(n // 2)]


@tylo.kernel
def read_pending(raw, a: tylo.Ptr(align=16), b: tylo.Ptr(align=16), wait: tylo.Static):
    atom = WarpgroupMMAAtom((64, 64, 16), a.dtype)
    la, lb = _layouts(64, 16 * 2, "32B", "K")
    sa = SharedTile(tylo.shared(a.dtype, 64 * 32, align=1024), la)
    sb = SharedTile(tylo.shared(b.dtype, 64 * 32, align=1024), lb)
    fence()
    acc = mma_async(atom, sa, sb, zeros(atom.c), accumulate=False)
    commit_group()
    if wait:
        acc = wait_group(0, acc)
    raw[tylo.thread_idx.x] = acc[0]


@tylo.kernel
def wait_too_little(raw, a: tylo.Ptr(align=16), b: tylo.Ptr(align=16), commit: tylo.Static):
    atom = WarpgroupMMAAtom((64, 64, 16), a.dtype)
    la, lb = _layouts(64, 32, "32B", "K")
    sa = SharedTile(tylo.shared(a.dtype, 64 * 32, align=1024), la)
    sb = SharedTile(tylo.shared(b.dtype, 64 * 32, align=1024), lb)
    fence()
    acc = mma_async(atom, sa, sb, zeros(atom.c), accumulate=False)
    if commit:
        commit_group()
    acc = wait_group(1, acc)  # its own group is the most recent: not complete
    raw[tylo.thread_idx.x] = acc[0]


def test_waiting_with_n_too_large_or_before_commit_is_a_trace_error():
    args = (tylo.f32, tylo.pointer(tylo.bf16, align=16), tylo.pointer(tylo.bf16, align=16))
    with pytest.raises(tylo.TyloError, match="most recent"):
        wait_too_little.compile(*args, True, block=128, target="sm_90a")
    with pytest.raises(tylo.TyloError, match="never committed"):
        wait_too_little.compile(*args, False, block=128, target="sm_90a")


def test_reading_a_pending_accumulator_is_a_trace_error():
    args = (tylo.f32, tylo.pointer(tylo.bf16, align=16), tylo.pointer(tylo.bf16, align=16))
    with pytest.raises(tylo.TyloError, match="pending") as err:
        read_pending.compile(*args, False, block=128, target="sm_90a")
    assert "test_wgmma.py" in str(err.value) or "raw[tylo.thread_idx.x]" in str(err.value)
    kern = read_pending.compile(*args, True, block=128, target="sm_90a")
    assert "wgmma.wait_group.sync.aligned 0" in kern.ptx


@tylo.kernel
def carried(
    raw, a: tylo.Ptr(align=16), b: tylo.Ptr(align=16), steps: tylo.Int(min=1), mode: tylo.Static
):
    """A pending accumulator carried by a loop: the first group is issued before the loop,
    each iteration issues one more and waits for the previous one (mode "behind"), or
    commits one more (empty) group, so the accumulator's position relative to the latest
    commit changes (mode "drift"), or reads the still pending accumulator (mode "read")."""
    atom = WarpgroupMMAAtom((64, 64, 16), a.dtype)
    la, lb = _layouts(64, 32, "32B", "K")
    sa = SharedTile(tylo.shared(a.dtype, 64 * 32, align=1024), la)
    sb = SharedTile(tylo.shared(b.dtype, 64 * 32, align=1024), lb)
    fence()
    acc = mma_async(atom, sa, sb, zeros(atom.c), accumulate=False)
    commit_group()
    for _ in tylo.range(steps):
        fence()
        acc = mma_async(atom, sa, sb, acc)
        commit_group()
        if mode == "drift":
            commit_group()  # an empty group: acc ends two commits back, not one
        wait_group(1)
        if mode == "read":
            raw[tylo.thread_idx.x] = acc[0]
    acc = wait_group(0, acc)
    raw[tylo.thread_idx.x] = acc[0]


def test_a_pending_accumulator_is_carried_by_a_loop():
    args = (tylo.f32, tylo.pointer(tylo.bf16, align=16), tylo.pointer(tylo.bf16, align=16), int)
    kern = carried.compile(*args, "behind", block=128, target="sm_90a")
    assert "wgmma.wait_group.sync.aligned 1" in kern.ptx
    # ptxas keeps the group in flight across the back edge (no serializing wait 0 there)
    assert "WARPGROUP.DEPBAR.LE gsb0, 0x1" in kern.sass
    with pytest.raises(tylo.TyloError, match="pending"):
        carried.compile(*args, "read", block=128, target="sm_90a")


def test_a_loop_that_changes_the_pending_position_is_refused():
    args = (tylo.f32, tylo.pointer(tylo.bf16, align=16), tylo.pointer(tylo.bf16, align=16), int)
    with pytest.raises(tylo.TyloError, match="changes structure"):
        carried.compile(*args, "drift", block=128, target="sm_90a")


@tylo.kernel
def commits_elsewhere(
    raw, a: tylo.Ptr(align=16), b: tylo.Ptr(align=16), steps: tylo.Int(min=0), where: tylo.Static
):
    """An accumulator committed, then more groups committed inside a loop (which may run
    no time) or a branch (which may not run) or straight after; then wait_group(1, acc)."""
    atom = WarpgroupMMAAtom((64, 64, 16), a.dtype)
    la, lb = _layouts(64, 32, "32B", "K")
    sa = SharedTile(tylo.shared(a.dtype, 64 * 32, align=1024), la)
    sb = SharedTile(tylo.shared(b.dtype, 64 * 32, align=1024), lb)
    fence()
    acc = mma_async(atom, sa, sb, zeros(atom.c), accumulate=False)
    commit_group()
    other = zeros(atom.c)
    if where == "loop":
        for _ in tylo.range(steps):
            p = mma_async(atom, sa, sb, other)
            commit_group()
            other = wait_group(0, p)
    elif where == "branch":
        if steps > 3:
            commit_group()
    else:
        commit_group()
    acc = wait_group(1, acc)
    raw[tylo.thread_idx.x] = acc[0]


@pytest.mark.parametrize("where", ["loop", "branch"])
def test_commits_that_may_not_have_run_do_not_count(where):
    # at run time the loop may run 0 times and the branch not at all: acc would then be the
    # most recent group, still in flight after wait_group(1)
    args = (tylo.f32, tylo.pointer(tylo.bf16, align=16), tylo.pointer(tylo.bf16, align=16), int)
    with pytest.raises(tylo.TyloError, match="surely ran"):
        commits_elsewhere.compile(*args, where, block=128, target="sm_90a")
    kern = commits_elsewhere.compile(*args, "straight", block=128, target="sm_90a")
    assert "wgmma.wait_group.sync.aligned 1" in kern.ptx
