"""The CTAs of one launch in a pool of processes (``TYLO_INTERPRET_PROCESSES=N``).

A kernel's CTAs are independent when no CTA reads or writes what another writes: a kernel
has no grid-wide barrier, so anything else is a race. Where a launch may be split (more than
one CTA, no atomics, no ``vprintf``, no watched thread: see :func:`splittable`), the grid is
cut into ``N`` contiguous ranges of CTAs, each run by a forked process on its own copy of the
global arrays. Each process sends back the bytes it changed and, with the race check on, the
elements it wrote and read (bit masks); where two ranges touched one element, one writing,
the parent runs the CTAs from the first range to the end of the second itself, so that the
race check reports both threads and both instructions as one process does (a
:class:`~tylo.interpret.globalrace.GlobalRace`); otherwise it writes the changes into the
caller's arrays. An error raised in a range is raised again
in the parent, the first range's first. Without the race check (``TYLO_INTERPRET_RACES=0``)
two ranges writing one element are not detected: the later range's bytes win.

Forking needs the ``fork`` start method (Linux, macOS with care); elsewhere, or with ``N``
of 1, the launch runs in this process as before.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from tylo.interpret.errors import InterpretError
from tylo.interpret.globalrace import GlobalRace, GlobalRaces
from tylo.interpret.memory import CONSTANT_BASE, Allocation

__all__ = ["processes", "run_split", "splittable"]

_SERIAL_MARKERS = ("atomicrmw", "cmpxchg", "atom.", "red.", "@vprintf")


def processes() -> int:
    """``TYLO_INTERPRET_PROCESSES`` (default 1: no pool); :class:`InterpretError` for a
    value that is not an int from 1 to 256."""
    text = os.environ.get("TYLO_INTERPRET_PROCESSES", "1").strip()
    try:
        n = int(text, 10)
    except ValueError:
        n = 0
    if not 1 <= n <= 256:
        raise InterpretError(
            f"TYLO_INTERPRET_PROCESSES={text!r}: give the number of processes, an int from 1 "
            "to 256 (1: run every CTA in this process)"
        )
    return n


def splittable(fn_text: str, ctas: int, watched: bool) -> bool:
    """Whether a launch may run in several processes: more than one CTA, the kernel's IR
    (``fn_text``) without atomics (they would not be atomic across copies) or ``vprintf``
    (its lines would interleave), and no thread watched (``TYLO_INTERPRET_THREAD``)."""
    if ctas < 2 or watched or "fork" not in multiprocessing.get_all_start_methods():
        return False
    return not any(m in fn_text for m in _SERIAL_MARKERS)


def _ranges(ctas: int, n: int) -> list[tuple[int, int]]:
    n = min(n, ctas)
    cuts = [ctas * k // n for k in range(n + 1)]
    return [(a, b) for a, b in zip(cuts, cuts[1:]) if b > a]


def _summary(tracker: GlobalRaces | None) -> dict[int, tuple[int, Any, Any]]:
    """Per array window: (granules, the written ones, the read ones), as packed bit masks."""
    if tracker is None:
        return {}
    return {
        w: (len(a["w"]), np.packbits(a["w"] >= 0), np.packbits(a["r"] != -1))
        for w, (_, a) in tracker.tracks.items()
    }


def _worker(run_range: Callable[[int, int], GlobalRaces | None], first: int, last: int,
            allocs: dict[int, Allocation], conn: Any) -> None:  # fmt: skip
    code = 0
    try:
        before = {w: a.data.copy() for w, a in allocs.items() if w < CONSTANT_BASE}
        tracker = run_range(first, last)
        diffs = {}
        for w, old in before.items():
            cur = allocs[w].data
            changed = cur != old
            if changed.any():
                diffs[w] = (np.packbits(changed), cur[changed])
        conn.send(("ok", diffs, _summary(tracker)))
    except BaseException as err:  # noqa: BLE001 - every error goes back to the parent
        conn.send(("error", type(err), str(err), dict(getattr(err, "__dict__", {}))))
        code = 1
    finally:
        conn.close()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)  # a forked child: no atexit handlers, no test-runner teardown


def _raise_again(cls: type, message: str, attrs: dict) -> None:
    try:
        err = cls.__new__(cls)
        Exception.__init__(err, message)
        err.__dict__.update(attrs)
    except Exception:  # noqa: BLE001 - an exception class that cannot be rebuilt
        err = InterpretError(f"{cls.__name__}: {message}")
    raise err


def _clash(results: list[tuple]) -> tuple[int, int, int, int] | None:
    """(range i, range j, window, granule) of the first element two ranges touched, one
    of them writing; None when the ranges are independent."""
    for i, (_, _, si) in enumerate(results):
        for j in range(i + 1, len(results)):
            sj = results[j][2]
            for w, (n, wi, ri) in si.items():
                if w not in sj:
                    continue
                _, wj, rj = sj[w]
                hit = (wi & wj) | (wi & rj) | (ri & wj)
                if hit.any():
                    k = int(np.flatnonzero(np.unpackbits(hit, count=n))[0])
                    return i, j, w, k
    return None


def run_split(run_range: Callable[[int, int], GlobalRaces | None], ctas: int, n: int,
              allocs: dict[int, Allocation]) -> None:  # fmt: skip
    """Run CTAs ``0 .. ctas - 1`` in ``n`` forked processes (see the module docstring):
    ``run_range(first, last)`` interprets CTAs ``first .. last - 1`` in the calling process
    and returns its global race tracker (or None)."""
    ctx = multiprocessing.get_context("fork")
    sys.stdout.flush()
    sys.stderr.flush()
    jobs = []
    ranges = _ranges(ctas, n)
    for first, last in ranges:
        recv, send = ctx.Pipe(duplex=False)
        p = ctx.Process(target=_worker, args=(run_range, first, last, allocs, send))
        p.start()
        send.close()
        jobs.append((p, recv))
    results = []
    for p, recv in jobs:
        try:
            results.append(recv.recv())
        except EOFError:
            results.append(("error", InterpretError, "an interpreter process died", {}))
        p.join()
    for r in results:
        if r[0] == "error":
            _raise_again(*r[1:])
    clash = _clash(results)
    if clash is not None:
        # the caller's arrays are as they were: run the CTAs from the first range of the
        # pair to the end of the second here, where the race check names both threads
        i, j, w, k = clash
        run_range(ranges[i][0], ranges[j][1])
        raise GlobalRace(
            f"global-memory race on array {allocs[w].name!r} (element {k}): CTAs "
            f"{ranges[i][0]}..{ranges[i][1] - 1} and {ranges[j][0]}..{ranges[j][1] - 1} "
            "touch it, one writing, with no order between them"
        )
    for _, diffs, _ in results:
        for w, (packed, vals) in diffs.items():
            data = allocs[w].data
            data[np.unpackbits(packed, count=data.size).astype(bool)] = vals
