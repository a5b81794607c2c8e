"""Barriers and the warp-level operations: ``bar.sync``, ``bar.warp.sync``,
``shfl.sync``, ``vote.sync``, ``ldmatrix``, ``stmatrix`` and ``mma.sync`` m16n8k16.

The fragment layouts are the PTX ISA's (section "Matrix Fragments for mma.m16n8k16", and
"Warp-level matrix load instruction: ldmatrix"): lane ``l`` has ``group = l // 4`` and
``t = l % 4``; an 8x8 b16 matrix gives lane ``l`` the pair ``(row group, cols 2t, 2t+1)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tylo.interpret.errors import BarrierDivergence, WarpDivergence
from tylo.interpret.memory import SHARED_WINDOW
from tylo.interpret.numerics import bf16_to_f32, f16_to_f32

__all__ = ["barrier", "ldmatrix", "mma_m16n8k16", "shuffle", "stmatrix", "vote", "warp_sync"]


def barrier(st: Any, site: str) -> None:
    """``bar.sync 0``: every live thread of each CTA taking part must be here."""
    threads = st.memory.threads
    here = st.mask.reshape(-1, threads)
    live = st.live.reshape(-1, threads)
    ctas = np.flatnonzero(here.any(axis=1))
    missing = live[ctas] & ~here[ctas]
    if missing.any():
        row, thr = np.argwhere(missing)[0]
        cta = ctas[row]
        lane = cta * threads + thr
        at = int(np.flatnonzero(here[cta])[0]) + cta * threads
        block = st.program.order[int(st.pc[lane])].name
        raise BarrierDivergence(
            f"barrier divergence: {st.where(at)} waits at `{site}`, but "
            f"thread {st.where(int(lane)).split(' thread ')[-1]} of the same block is live and "
            "does not "
            f"reach it (it is at block {block!r}); every thread of a block must reach each "
            "sync_threads() (hoist it out of the condition)"
        )
    st.memory.barrier(ctas)


def _warp_masks(st: Any) -> np.ndarray:
    act = st.mask.reshape(-1, 32).astype(np.uint64)
    return (act << np.arange(32, dtype=np.uint64)).sum(axis=1).astype(np.uint32)


def check_members(st: Any, member: Any, what: str, site: str) -> None:
    """Raise :class:`WarpDivergence` unless, for every active lane, every lane of its
    ``member`` mask is executing this instruction too (the ``.sync`` requirement)."""
    lanes = st.idx
    have = _warp_masks(st)[lanes // 32]
    mm = np.asarray(st.lane_values(member)).astype(np.int64).astype(np.uint32)
    lane_bit = np.uint32(1) << (lanes % 32).astype(np.uint32)
    bad = ((mm & ~have) != 0) | ((mm & lane_bit) == 0)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise WarpDivergence(
            f"{what}: {st.where(int(lanes[k]))} executes `{site}` with member mask "
            f"0x{int(mm[k]):08x}, but the lanes executing it are 0x{int(have[k]):08x}; every "
            "lane of the mask must execute it together"
        )


def check_full_warps(st: Any, what: str, site: str) -> None:
    """Raise unless every warp with an active lane is active in all 32 lanes
    (``.aligned`` warp instructions)."""
    check_members(st, np.uint32(0xFFFFFFFF), what, site)


def warp_sync(st: Any, member: Any, site: str) -> None:
    """``bar.warp.sync member``."""
    check_members(st, member, "bar.warp.sync", site)
    st.memory.warp_barrier(st.idx)


def shuffle(st: Any, mode: str, x: Any, b: Any, c: Any, member: Any, site: str) -> Any:
    """``shfl.sync.mode`` (PTX ISA pseudocode) of ``x`` over all lanes; the result is
    defined in the active lanes."""
    check_members(st, member, f"shfl.sync.{mode}", site)
    n = st.lanes
    lane = np.arange(n) % 32
    xb = np.broadcast_to(np.asarray(x), (n,))
    bb = np.broadcast_to(np.asarray(b).astype(np.int64), (n,))
    cc = np.broadcast_to(np.asarray(c).astype(np.int64), (n,))
    seg = (cc >> 8) & 0x1F
    clamp = cc & 0x1F
    lo = lane & seg
    hi = lo | (clamp & ~seg)
    if mode == "up":
        j = lane - bb
        ok = j >= hi
    elif mode == "down":
        j = lane + bb
        ok = j <= hi
    elif mode == "bfly":
        j = lane ^ bb
        ok = j <= hi
    else:
        j = lo | (bb & 0x1F & ~seg)
        ok = j <= hi
    j = np.where(ok, j, lane)
    src = np.arange(n) - lane + j
    return xb[src]


def vote(st: Any, mode: str, pred: Any, member: Any, site: str) -> Any:
    """``vote.sync.{all,any,uni,ballot}`` over the member lanes."""
    check_members(st, member, f"vote.sync.{mode}", site)
    n = st.lanes
    p = np.broadcast_to(np.asarray(pred).astype(bool), (n,)) & st.mask
    bits = (p.reshape(-1, 32).astype(np.uint64) << np.arange(32, dtype=np.uint64)).sum(1)
    mm = np.broadcast_to(np.asarray(member).astype(np.int64), (n,)).astype(np.uint64)
    ballot = np.repeat(bits, 32) & mm
    if mode == "ballot":
        return ballot.astype(np.uint32).view(np.int32)
    if mode == "any":
        return ballot != 0
    if mode == "all":
        return ballot == mm
    return (ballot == 0) | (ballot == mm)


def _shared(addr: Any) -> np.ndarray:
    a = np.asarray(addr).astype(np.int64)
    return np.where(a >= SHARED_WINDOW, a - SHARED_WINDOW, a)


def ldmatrix(st: Any, num: int, trans: bool, addr: Any, site: str) -> list[np.ndarray]:
    """``ldmatrix.sync.aligned.m8n8.x{num}[.trans].shared.b16``: ``num`` registers (int32
    per active lane)."""
    check_full_warps(st, "ldmatrix", site)
    lanes = st.idx
    a = _shared(st.lane_values(addr))
    giving = (lanes % 32) < 8 * num
    rows = st.memory.load(lanes[giving], a[giving], 3, np.int16, 8, site)
    warps = len(lanes) // 32
    mats = rows.reshape(warps, num, 8, 8).astype(np.int64) & 0xFFFF
    ln = np.arange(32)
    g, c = ln // 4, 2 * (ln % 4)
    out = []
    for i in range(num):
        m = mats[:, i]
        lo, hi = (m[:, c, g], m[:, c + 1, g]) if trans else (m[:, g, c], m[:, g, c + 1])
        out.append(((hi << 16) | lo).astype(np.uint32).view(np.int32).reshape(-1))
    return out


def stmatrix(st: Any, trans: bool, addr: Any, regs: list[Any], site: str) -> None:
    """``stmatrix.sync.aligned.m8n8.x{n}[.trans].shared.b16``."""
    check_full_warps(st, "stmatrix", site)
    lanes = st.idx
    num = len(regs)
    warps = len(lanes) // 32
    a = _shared(st.lane_values(addr))
    ln = np.arange(32)
    g, c = ln // 4, 2 * (ln % 4)
    mats = np.zeros((warps, num, 8, 8), dtype=np.int64)
    for i, r in enumerate(regs):
        v = np.asarray(st.lane_values(r)).astype(np.int64).reshape(warps, 32) & 0xFFFFFFFF
        lo, hi = v & 0xFFFF, v >> 16
        if trans:
            mats[:, i, c, g], mats[:, i, c + 1, g] = lo, hi
        else:
            mats[:, i, g, c], mats[:, i, g, c + 1] = lo, hi
    giving = (lanes % 32) < 8 * num
    data = mats.reshape(-1, 8).astype(np.uint16).view(np.int16)
    st.memory.store(lanes[giving], a[giving], 3, np.ascontiguousarray(data), site)


def _halves(regs: list[Any], st: Any, kind: str) -> np.ndarray:
    """Registers of packed 16-bit floats as f64 ``[warps, 32, len(regs), 2]``."""
    vals = []
    for r in regs:
        v = np.asarray(st.lane_values(r)).astype(np.int64) & 0xFFFFFFFF
        pair = np.stack([v & 0xFFFF, v >> 16], axis=-1)
        f = bf16_to_f32(pair) if kind == "bf16" else f16_to_f32(pair)
        vals.append(f.astype(np.float64))
    return np.stack(vals, axis=1).reshape(-1, 32, len(regs), 2)


def mma_m16n8k16(st: Any, kind: str, a: list[Any], b: list[Any], c: list[Any],
                 site: str) -> list[np.ndarray]:  # fmt: skip
    """``mma.sync.aligned.m16n8k16.row.col.f32.{kind}.{kind}.f32``: ``D = A B + C`` with
    the products exact, summed in f64 and rounded once to f32."""
    check_full_warps(st, "mma.sync", site)
    av = _halves(a, st, kind)  # [W, 32, 4, 2]
    bv = _halves(b, st, kind)  # [W, 32, 2, 2]
    warps = av.shape[0]
    ln = np.arange(32)
    g, t = ln // 4, ln % 4
    A = np.zeros((warps, 16, 16))
    B = np.zeros((warps, 16, 8))
    for r in range(4):
        row = g + (8 if r in (1, 3) else 0)
        col = 2 * t + (8 if r >= 2 else 0)
        A[:, row, col] = av[:, :, r, 0]
        A[:, row, col + 1] = av[:, :, r, 1]
    for r in range(2):
        k = 2 * t + 8 * r
        B[:, k, g] = bv[:, :, r, 0]
        B[:, k + 1, g] = bv[:, :, r, 1]
    D = A @ B  # [W, 16, 8]
    out = []
    for r in range(4):
        row = g + (8 if r >= 2 else 0)
        col = 2 * t + (r & 1)
        cv = np.asarray(st.lane_values(c[r])).astype(np.float64).reshape(warps, 32)
        out.append((D[:, row, col] + cv).astype(np.float32).reshape(-1))
    return out
