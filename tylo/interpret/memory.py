"""The interpreter's memory: global arrays, each CTA's shared memory, each thread's local
memory, as one 64-bit address space, with the checks no GPU run makes.

Addresses (per lane, ``int64``):

- global allocation ``k`` (a kernel's array argument) starts at ``(k + 1) << 40``, so an
  access a little outside an array lands in a gap and is reported, never in a neighbour;
- a shared pointer (address space 3) is the offset in its CTA's shared memory, as on the
  GPU; the generic form adds :data:`SHARED_WINDOW`;
- a local pointer (``alloca``) is :data:`LOCAL_WINDOW` plus the offset in the thread's frame.

Shared and local memory start filled with ``0xFF`` bytes (NaN for every float type, -1 for
integers). Shared accesses are checked for races between barriers (two threads, one byte,
at least one write, outside atomics), for reads of a ``cp.async`` destination before its
thread's ``wait_group``, and, when ``strict``, for reads of bytes never written.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tylo.interpret.errors import (
    AsyncMisuse,
    OutOfBounds,
    SharedRace,
    UninitializedRead,
    UnsupportedOperation,
)

__all__ = [
    "CONSTANT_BASE",
    "GLOBAL_STRIDE",
    "LOCAL_WINDOW",
    "SHARED_WINDOW",
    "Allocation",
    "Memory",
    "cast_address",
]

GLOBAL_STRIDE = 1 << 40
CONSTANT_BASE = 4096  # window index of the module's first constant global (format strings)
SHARED_WINDOW = 1 << 60
LOCAL_WINDOW = 1 << 61
_OFFSET = GLOBAL_STRIDE - 1
GLOBAL, SHARED, LOCAL = "global", "shared", "local"


def cast_address(a: Any, src: int, dst: int) -> Any:
    """An address converted from address space ``src`` to ``dst`` (0 generic, 1 global,
    3 shared, 4 constant, 5 local), as ``cvta`` does."""
    if src == dst:
        return a
    if src in (0, 1, 4) and dst in (0, 1, 4):  # constant data lives in global windows
        return a
    if src == 3 and dst in (0, 1):
        return a + np.int64(SHARED_WINDOW)
    if src == 5 and dst in (0, 1):
        return a + np.int64(LOCAL_WINDOW)
    if src in (0, 1) and dst == 3:
        return a - np.int64(SHARED_WINDOW)
    if src in (0, 1) and dst == 5:
        return a - np.int64(LOCAL_WINDOW)
    raise UnsupportedOperation("addrspacecast", f"address space cast {src} -> {dst}")


@dataclass
class Allocation:
    """A global array: its name (the kernel parameter), its bytes (a view of the caller's
    memory) and its element dtype name."""

    name: str
    data: np.ndarray  # uint8, 1-D, shares memory with the caller's array
    skew: int = 0  # the address starts this far into its window: the caller's address % 4096
    granule: int = 1  # bytes per element, the unit of the global race check

    @staticmethod
    def address(k: int, skew: int) -> int:
        """The address of allocation ``k`` with ``skew``."""
        return (k + 1) * GLOBAL_STRIDE + skew

    def view(self, dtype: Any) -> np.ndarray:
        """The bytes as elements of ``dtype`` (the whole elements that fit)."""
        s = np.dtype(dtype).itemsize
        n = self.data.size // s * s
        return self.data[:n].view(dtype)


class Memory:
    """The memory of one batch of CTAs (see the module docstring).

    ``where(lane)`` returns the ``(block, thread)`` index triples of a lane, for reports;
    ``threads`` is the (warp-padded) number of lanes per CTA.
    """

    def __init__(
        self,
        allocations: Sequence[Allocation] | dict[int, Allocation],
        shared_bytes: int,
        local_bytes: int,
        *,
        ctas: int,
        threads: int,
        where: Callable[[int], str],
        strict: bool,
        races: bool,
        global_races: Any = None,
    ) -> None:
        # window index -> allocation (arguments first; constant data from CONSTANT_BASE)
        self.allocations = (
            dict(allocations) if isinstance(allocations, dict) else dict(enumerate(allocations))
        )
        self.shared_size = shared_bytes
        self.threads = threads
        self.where = where
        self.strict = strict
        self.races = races
        self.global_races = global_races  # a GlobalRaces tracker, or None
        self.sites: list[str] = ["?"]
        self._site_ids: dict[str, int] = {}
        padded = max(16, (shared_bytes + 15) // 16 * 16)
        lanes = ctas * threads
        self.shared = np.full((ctas, padded), 0xFF, dtype=np.uint8)
        self.local = np.full((lanes, max(16, (local_bytes + 15) // 16 * 16)), 0xFF, np.uint8)
        self.local_size = local_bytes
        self.shared_init = np.zeros(self.shared.shape, dtype=bool) if strict else None
        self.local_init = np.zeros(self.local.shape, dtype=bool) if strict else None
        if races:
            self.w_thr = np.full(self.shared.shape, -1, dtype=np.int32)
            self.w_site = np.zeros(self.shared.shape, dtype=np.int32)
            self.r_thr = np.full(self.shared.shape, -1, dtype=np.int32)
            self.r_site = np.zeros(self.shared.shape, dtype=np.int32)
        self.p_thr = np.full(self.shared.shape, -1, dtype=np.int32)  # cp.async pending
        self.p_grp = np.zeros(self.shared.shape, dtype=np.int32)
        self.any_pending = False
        self.group_open = np.zeros(lanes, dtype=np.int32)  # cp.async group being filled
        self.group_done = np.zeros(lanes, dtype=np.int32)  # groups below this are complete

    # ------------------------------------------------------------------ helpers

    def site(self, text: str) -> int:
        """A small integer naming an instruction (for race reports)."""
        k = self._site_ids.get(text)
        if k is None:
            k = self._site_ids[text] = len(self.sites)
            self.sites.append(text)
        return k

    def _split(self, lanes: np.ndarray, addr: np.ndarray, space: int) -> list[tuple]:
        """Groups ``(kind, lanes, offsets, allocation)`` of the accesses by region."""
        if space == 3:
            return [(SHARED, lanes, addr, None)]
        if space == 5:
            return [(LOCAL, lanes, addr, None)]
        if space not in (0, 1, 4):
            raise UnsupportedOperation(f"addrspace({space})", f"memory in address space {space}")
        kind = np.where(addr >= LOCAL_WINDOW, 2, np.where(addr >= SHARED_WINDOW, 1, 0))
        if space in (1, 4):
            kind[:] = 0
        groups = []
        for k, name in ((0, GLOBAL), (1, SHARED), (2, LOCAL)):
            sel = kind == k
            if not sel.any():
                continue
            a, ln = (addr, lanes) if sel.all() else (addr[sel], lanes[sel])
            if name == SHARED:
                groups.append((SHARED, ln, a - SHARED_WINDOW, None))
            elif name == LOCAL:
                groups.append((LOCAL, ln, a - LOCAL_WINDOW, None))
            else:
                which = (a >> 40) - 1
                off = a & _OFFSET
                # far past an allocation's end reads as before the next one
                neg = off > (_OFFSET >> 1)
                w0 = int(which[0]) if len(which) else 0
                if not neg.any() and bool((which == w0).all()):  # one array: the usual case
                    a_w = self.allocations.get(w0)
                    groups.append((GLOBAL, ln, off - (a_w.skew if a_w else 0), w0))
                    continue
                which = np.where(neg, which + 1, which)
                off = np.where(neg, off - GLOBAL_STRIDE, off)
                for w in np.unique(which):
                    s = which == w
                    a_w = self.allocations.get(int(w))
                    skew = a_w.skew if a_w is not None else 0
                    groups.append((GLOBAL, ln[s], off[s] - skew, int(w)))
        return groups

    def _fail(self, lane: int, what: str, site: str) -> OutOfBounds:
        return OutOfBounds(f"{what}, by {self.where(lane)}, at `{site}`")

    def _global(self, w: int, lanes: np.ndarray, off: np.ndarray, nbytes: int, item: int,
                access: str, site: str) -> Allocation:  # fmt: skip
        if w not in self.allocations:
            k = int(np.argmax(np.ones(len(lanes), bool)))
            raise self._fail(
                int(lanes[k]), f"out-of-bounds {access}: address outside every array", site
            )
        alloc = self.allocations[w]
        bad = (off < 0) | (off + nbytes > alloc.data.size)
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            o = int(off[k])
            raise self._fail(
                int(lanes[k]),
                f"out-of-bounds {access} of {nbytes} bytes from array {alloc.name!r} "
                f"({alloc.data.size} bytes) at byte offset {o} (element {o // item})",
                site,
            )
        mis = off % item != 0
        if mis.any():
            k = int(np.flatnonzero(mis)[0])
            raise self._fail(
                int(lanes[k]),
                f"misaligned {access} of array {alloc.name!r} at byte offset {int(off[k])} "
                f"(a {item}-byte element needs {item}-byte alignment)",
                site,
            )
        return alloc

    def _bounds(self, kind: str, lanes: np.ndarray, off: np.ndarray, nbytes: int, item: int,
                access: str, site: str) -> None:  # fmt: skip
        size = self.shared_size if kind == SHARED else self.local_size
        bad = (off < 0) | (off + nbytes > size)
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            raise self._fail(
                int(lanes[k]),
                f"out-of-bounds {kind} {access} of {nbytes} bytes at byte offset "
                f"{int(off[k])} ({kind} memory holds {size} bytes)",
                site,
            )
        mis = off % item != 0
        if mis.any():
            k = int(np.flatnonzero(mis)[0])
            raise self._fail(
                int(lanes[k]), f"misaligned {kind} {access} at byte offset {int(off[k])}", site
            )

    # ------------------------------------------------------------------ access

    def load(self, lanes: np.ndarray, addr: np.ndarray, space: int, dtype: Any, n: int,
             site: str, atomic: bool = False) -> np.ndarray:  # fmt: skip
        """Values of ``dtype`` (``n`` per lane when ``n > 1``) loaded by ``lanes``
        (``atomic``: part of an atomic, outside the race checks)."""
        item = np.dtype(dtype).itemsize
        out = np.empty((len(lanes), n) if n > 1 else len(lanes), dtype=dtype)
        for kind, ln, off, w in self._split(lanes, addr, space):
            sel = slice(None) if len(ln) == len(lanes) else np.isin(lanes, ln)
            if kind == GLOBAL:
                alloc = self._global(w, ln, off, item * n, item, "load", site)
                if self.global_races is not None and not atomic:
                    self.global_races.access(w, alloc.name, alloc.data.size, alloc.granule,
                                             ln, off, item * n, False, site)  # fmt: skip
                idx = off // item
                view = alloc.view(dtype)
                out[sel] = view[idx[:, None] + np.arange(n)] if n > 1 else view[idx]
                continue
            self._bounds(kind, ln, off, item * n, item, "load", site)
            if not atomic:
                self._check_read(kind, ln, off, item * n, site)
            rows = ln // self.threads if kind == SHARED else ln
            view = (self.shared if kind == SHARED else self.local).view(dtype)
            idx = off // item
            out[sel] = (
                view[rows[:, None], idx[:, None] + np.arange(n)] if n > 1 else view[rows, idx]
            )
        return out

    def store(self, lanes: np.ndarray, addr: np.ndarray, space: int, value: np.ndarray,
              site: str, atomic: bool = False) -> None:  # fmt: skip
        """Store ``value`` (one row per lane of ``lanes``; 2-D for vectors)."""
        if value.ndim == 2 and value.shape[1] == 1:  # a <1 x T> vector
            value = value[:, 0]
        dtype = value.dtype
        n = value.shape[1] if value.ndim == 2 else 1
        item = dtype.itemsize
        for kind, ln, off, w in self._split(lanes, addr, space):
            v = value if len(ln) == len(lanes) else value[np.isin(lanes, ln)]
            idx = off // item
            if kind == GLOBAL:
                alloc = self._global(w, ln, off, item * n, item, "store", site)
                if self.global_races is not None and not atomic:
                    self.global_races.access(w, alloc.name, alloc.data.size, alloc.granule,
                                             ln, off, item * n, True, site)  # fmt: skip
                view = alloc.view(dtype)
                if n > 1:
                    view[idx[:, None] + np.arange(n)] = v
                else:
                    view[idx] = v
                continue
            self._bounds(kind, ln, off, item * n, item, "store", site)
            if atomic:
                if self.strict:
                    init = self.shared_init if kind == SHARED else self.local_init
                    rows_ = ln // self.threads if kind == SHARED else ln
                    init[rows_[:, None], off[:, None] + np.arange(item * n)] = True  # type: ignore[index]
            else:
                self._note_write(kind, ln, off, item * n, site, v)
            rows = ln // self.threads if kind == SHARED else ln
            view = (self.shared if kind == SHARED else self.local).view(dtype)
            if n > 1:
                view[rows[:, None], idx[:, None] + np.arange(n)] = v
            else:
                view[rows, idx] = v

    # ------------------------------------------------------------------ checks

    def _bytes(self, ln: np.ndarray, off: np.ndarray, nbytes: int) -> tuple:
        b = (off[:, None] + np.arange(nbytes)).ravel()
        lanes = np.repeat(ln, nbytes)
        return lanes, b

    def _check_read(self, kind: str, ln: np.ndarray, off: np.ndarray, nbytes: int,
                    site: str) -> None:  # fmt: skip
        lanes, b = self._bytes(ln, off, nbytes)
        if kind == LOCAL:
            if self.strict and not self.local_init[lanes, b].all():  # type: ignore[index]
                k = int(np.flatnonzero(~self.local_init[lanes, b])[0])  # type: ignore[index]
                raise UninitializedRead(
                    f"read of a never-written local array byte {int(b[k])} by "
                    f"{self.where(int(lanes[k]))} at `{site}`"
                )
            return
        rows, thr = lanes // self.threads, lanes % self.threads
        if self.strict and not self.shared_init[rows, b].all():  # type: ignore[index]
            k = int(np.flatnonzero(~self.shared_init[rows, b])[0])  # type: ignore[index]
            raise UninitializedRead(
                f"read of never-written shared memory at byte offset {int(b[k])} by "
                f"{self.where(int(lanes[k]))} at `{site}`"
            )
        if self.any_pending:
            owner = self.p_thr[rows, b]
            pend = owner >= 0
            if pend.any():
                olane = rows * self.threads + np.where(pend, owner, 0)
                early = pend & (self.p_grp[rows, b] >= self.group_done[olane])
                if early.any():
                    k = int(np.flatnonzero(early)[0])
                    raise AsyncMisuse(
                        f"read of shared byte offset {int(b[k])} by "
                        f"{self.where(int(lanes[k]))} at `{site}` before the cp.async that "
                        f"writes it (issued by {self.where(int(olane[k]))}) was waited for "
                        "(cp.async.wait_group, then a barrier for other threads)"
                    )
        if not self.races:
            return
        w = self.w_thr[rows, b]
        clash = (w >= 0) & (w != thr)
        if clash.any():
            k = int(np.flatnonzero(clash)[0])
            self._race(int(rows[k]), int(b[k]), int(thr[k]), "read", site, int(w[k]), "write",
                       self.sites[self.w_site[rows[k], b[k]]])  # fmt: skip
        r = self.r_thr[rows, b]
        new = np.where((r == -1) | (r == thr), thr, -2).astype(np.int32)
        self.r_thr[rows, b] = new
        self.r_site[rows, b] = self.site(site)
        key = rows.astype(np.int64) * self.shared.shape[1] + b
        uniq, counts = np.unique(key, return_counts=True)
        if (counts > 1).any():
            many = uniq[counts > 1]
            self.r_thr.ravel()[many] = -2

    def _note_write(self, kind: str, ln: np.ndarray, off: np.ndarray, nbytes: int,
                    site: str, value: np.ndarray | None = None) -> None:  # fmt: skip
        """Record a write of ``nbytes`` per lane (``value``: the lanes' values, one row
        each), reporting a race with an earlier access of this epoch, or between two lanes
        of this one instruction: lanes of one warp that write the same bytes to one address
        do not race (one write takes effect, as the hardware defines), other pairs do."""
        lanes, b = self._bytes(ln, off, nbytes)
        if kind == LOCAL:
            if self.strict:
                self.local_init[lanes, b] = True  # type: ignore[index]
            return
        rows, thr = lanes // self.threads, lanes % self.threads
        if self.strict:
            self.shared_init[rows, b] = True  # type: ignore[index]
        if not self.races:
            return
        sid = self.site(site)
        w = self.w_thr[rows, b]
        clash = (w >= 0) & (w != thr)
        if clash.any():
            k = int(np.flatnonzero(clash)[0])
            self._race(int(rows[k]), int(b[k]), int(thr[k]), "write", site, int(w[k]), "write",
                       self.sites[self.w_site[rows[k], b[k]]])  # fmt: skip
        r = self.r_thr[rows, b]
        clash = (r == -2) | ((r >= 0) & (r != thr))
        if clash.any():
            k = int(np.flatnonzero(clash)[0])
            other = int(r[k])
            self._race(int(rows[k]), int(b[k]), int(thr[k]), "write", site, other, "read",
                       self.sites[self.r_site[rows[k], b[k]]])  # fmt: skip
        key = rows.astype(np.int64) * self.shared.shape[1] + b
        order = np.argsort(key, kind="stable")
        dup = np.flatnonzero(key[order][1:] == key[order][:-1])
        if len(dup) and value is not None:  # one warp writing one byte value: no race
            raw = np.ascontiguousarray(value).view(np.uint8).reshape(-1)
            i, j = order[dup], order[dup + 1]
            dup = dup[(thr[i] // 32 != thr[j] // 32) | (raw[i] != raw[j])]
        if len(dup):
            i, j = order[dup[0]], order[dup[0] + 1]
            self._race(int(rows[j]), int(b[j]), int(thr[j]), "write", site, int(thr[i]),
                       "write", site)  # fmt: skip
        self.w_thr[rows, b] = thr
        self.w_site[rows, b] = sid

    def _race(self, row: int, byte: int, thr: int, access: str, site: str, other: int,
              other_access: str, other_site: str) -> None:  # fmt: skip
        lane = row * self.threads + thr
        who = self.where(lane)
        if other >= 0:
            them = "thread " + self.where(row * self.threads + other).split(" thread ")[-1]
        else:
            them = "several other threads"
        raise SharedRace(
            f"shared-memory race at byte offset {byte}: {who} {access}s it at `{site}`, "
            f"and {them} {other_access}s it at `{other_site}`, with no barrier between "
            "(add tylo.sync_threads() between the write and the other access)"
        )

    def barrier(self, ctas: np.ndarray) -> None:
        """A CTA-wide barrier in CTAs ``ctas`` (batch rows): a new race epoch."""
        if self.global_races is not None:
            self.global_races.barrier(ctas)
        if self.races:
            self.w_thr[ctas] = -1
            self.r_thr[ctas] = -1

    def warp_barrier(self, lanes: np.ndarray) -> None:
        """``bar.warp.sync`` by ``lanes``: forget the accesses those threads' warps made (a
        later access by another warp may then go unreported, never wrongly reported)."""
        if not self.races or not len(lanes):
            return
        rows = np.unique(lanes // self.threads)
        warps = np.unique((lanes % self.threads) // 32)
        for arr in (self.w_thr, self.r_thr):
            sub = arr[rows]
            sub[np.isin(sub // 32, warps) & (sub >= 0)] = -1
            arr[rows] = sub

    # ------------------------------------------------------------------ cp.async

    def copy_async(self, lanes: np.ndarray, dst: np.ndarray, src: np.ndarray, nbytes: int,
                   src_bytes: np.ndarray, site: str) -> None:  # fmt: skip
        """``cp.async`` of ``nbytes`` per lane from global ``src`` to shared ``dst`` (bytes
        past ``src_bytes`` are zero filled); the destination stays pending until the
        issuing thread's group is waited for."""
        data = np.zeros((len(lanes), nbytes), dtype=np.uint8)
        some = src_bytes > 0
        if some.any():
            full = self.load(lanes[some], src[some], 1, np.uint8, nbytes, site)
            keep = np.arange(nbytes) < src_bytes[some][:, None]
            data[some] = np.where(keep, full, 0)
        self.store(lanes, dst, 3, data, site)
        lanes_b, b = self._bytes(lanes, dst, nbytes)
        rows = lanes_b // self.threads
        self.p_thr[rows, b] = lanes_b % self.threads
        self.p_grp[rows, b] = self.group_open[lanes_b]
        self.any_pending = True

    def commit_group(self, lanes: np.ndarray) -> None:
        """``cp.async.commit_group`` by ``lanes``."""
        self.group_open[lanes] += 1

    def wait_group(self, lanes: np.ndarray, n: int) -> None:
        """``cp.async.wait_group n`` by ``lanes``: all but the newest ``n`` groups done."""
        self.group_done[lanes] = np.maximum(self.group_done[lanes], self.group_open[lanes] - n)
