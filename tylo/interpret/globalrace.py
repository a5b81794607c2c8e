"""Races in global memory: two threads touching one element of a global array, at least
one writing, outside atomics, with no barrier between them (threads of different CTAs
are never ordered: a kernel has no grid-wide barrier).

Each array is tracked per element of its own dtype (a granule: an access covers the
granules it overlaps), for the whole launch, across CTA batches: the last writer and its
epoch (the count of barriers its CTA had passed), the readers since (one thread, several
threads of one CTA, or threads of several CTAs) and their epoch, and the instructions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tylo.interpret.errors import SharedRace

__all__ = ["GlobalRace", "GlobalRaces"]


class GlobalRace(SharedRace):
    """Two threads raced on a global array element (a :class:`SharedRace` subclass, so
    one ``except`` catches every race)."""


class GlobalRaces:
    """The launch-wide tracker; ``describe(gid)`` names thread ``gid`` (CTA-major)."""

    def __init__(self, threads: int, describe: Callable[[int], str]) -> None:
        self.threads = threads
        self.describe = describe
        self.tracks: dict[int, tuple[int, dict[str, np.ndarray]]] = {}
        self.sites: list[str] = ["?"]
        self._site_ids: dict[str, int] = {}
        self.first = 0
        self.epoch = np.zeros(1, np.int32)

    def batch(self, first_cta: int, ctas: int) -> None:
        """A new batch of CTAs ``first_cta ..`` starts (each at epoch 0)."""
        self.first = first_cta
        self.epoch = np.zeros(ctas, np.int32)

    def barrier(self, rows: np.ndarray) -> None:
        """CTAs ``rows`` (of the batch) passed a barrier."""
        self.epoch[rows] += 1

    def _site(self, text: str) -> int:
        k = self._site_ids.get(text)
        if k is None:
            k = self._site_ids[text] = len(self.sites)
            self.sites.append(text)
        return k

    def _track(self, w: int, size: int, granule: int) -> tuple[int, dict[str, np.ndarray]]:
        t = self.tracks.get(w)
        if t is None:
            n = (size + granule - 1) // granule
            arrays = {k: np.full(n, -1, np.int32) for k in ("w", "r")}
            arrays.update({k: np.zeros(n, np.int32) for k in ("we", "ws", "re", "rs")})
            t = self.tracks[w] = (granule, arrays)
        return t

    def access(self, w: int, name: str, size: int, granule: int, lanes: np.ndarray,
               off: np.ndarray, nbytes: int, write: bool, site: str) -> None:  # fmt: skip
        """Check and record ``lanes``' accesses of ``nbytes`` at byte offsets ``off`` of
        global array ``w`` (``name``, ``size`` bytes)."""
        g, a = self._track(w, size, granule)
        per = (nbytes + g - 1) // g
        first = off // g
        gran = (first[:, None] + np.arange(per)).ravel()
        lanes = np.repeat(lanes, per)
        row = lanes // self.threads
        cta = (row + self.first).astype(np.int32)
        gid = (cta.astype(np.int64) * self.threads + lanes % self.threads).astype(np.int32)
        ep = self.epoch[row]
        wr = a["w"][gran]
        clash = (wr >= 0) & (wr != gid) & ((wr // self.threads != cta) | (a["we"][gran] == ep))
        if clash.any():
            k = int(np.flatnonzero(clash)[0])
            self._report(name, g, gran[k], int(gid[k]), "write" if write else "read", site,
                         int(wr[k]), "write", self.sites[a["ws"][gran[k]]])  # fmt: skip
        r = a["r"][gran]
        rcta = np.where(r >= 0, r // self.threads, np.where(r <= -3, -r - 3, -1))
        stale = (rcta == cta) & (a["re"][gran] != ep)
        if len(gran) < 2 or bool((gran[1:] > gran[:-1]).all()):  # ascending: no repeats
            key_order, dup_pos = None, np.zeros(0, np.int64)
        else:
            key_order = np.argsort(gran, kind="stable")
            sg = gran[key_order]
            dup_pos = np.flatnonzero(sg[1:] == sg[:-1])
        if write:
            bad = (r != -1) & (r != gid) & ~stale
            if bad.any():
                k = int(np.flatnonzero(bad)[0])
                other = int(r[k]) if r[k] >= 0 else -1
                self._report(name, g, gran[k], int(gid[k]), "write", site, other, "read",
                             self.sites[a["rs"][gran[k]]])  # fmt: skip
            if len(dup_pos):
                assert key_order is not None
                i, j = key_order[dup_pos[0]], key_order[dup_pos[0] + 1]
                if gid[i] != gid[j]:
                    self._report(name, g, gran[j], int(gid[j]), "write", site, int(gid[i]),
                                 "write", site)  # fmt: skip
            a["w"][gran] = gid
            a["we"][gran] = ep
            a["ws"][gran] = self._site(site)
            return
        new = np.where((r == -1) | (r == gid) | stale, gid,
                       np.where(rcta == cta, -cta - 3, -2)).astype(np.int32)  # fmt: skip
        a["r"][gran] = new
        a["re"][gran] = ep
        a["rs"][gran] = self._site(site)
        if len(dup_pos):
            assert key_order is not None
            i, j = key_order[dup_pos], key_order[dup_pos + 1]
            many = gid[i] != gid[j]
            same = cta[i] == cta[j]
            a["r"][gran[j[many & same]]] = -cta[j[many & same]] - 3
            a["r"][gran[j[many & ~same]]] = -2

    def _report(self, name: str, granule: int, index: Any, gid: int, access: str, site: str,
                other: int, other_access: str, other_site: str) -> None:  # fmt: skip
        them = self.describe(other) if other >= 0 else "other threads"
        raise GlobalRace(
            f"global-memory race on array {name!r} at byte offset {int(index) * granule}: "
            f"{self.describe(gid)} {access}s it at `{site}`, and {them} "
            f"{other_access}s it at `{other_site}`, with no barrier between (threads of "
            "different blocks are never ordered; use atomics or separate launches)"
        )
