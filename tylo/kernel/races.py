"""Shared-memory races between two barriers, as a first step: proved absent, proved, or
not proved (docs/accesses.md, "Races").

Between two ``tylo.sync_threads()``, two different threads of a block writing the same
shared byte, or one writing what another reads, is a race (atomics aside). Every shared
access of a ``tylo.shared`` allocation is recorded with its *epoch* (how many block
barriers precede it in the trace) by :func:`note`; :func:`check` then takes each pair of
accesses of one allocation in one epoch, at least one of them a write, and decides it:

- when both offsets depend on the thread index alone (``tid_x``, ``tid_y``, ``tid_z``
  and constants) and the path condition of each is a relation over the thread index or
  nothing, every thread of the (static) block is enumerated: the pair is **race-free**
  when no byte is touched by two different threads with a write among them, and a
  **race** otherwise, reported with both threads and the byte address (a claim made only
  when the kernel synchronizes by ``tylo.sync_threads`` alone and both accesses surely
  run: no branch on a runtime value, no ``tylo.ptx`` barrier or mbarrier in the kernel);
- anything else (an offset over a loop index or a runtime value, an access inside a
  dynamic loop, whose iterations the barriers of the body do not separate from the next
  one's, a dynamic shared-memory view) is **not proved**, with the reason.

``cp.async`` and TMA destinations are not recorded yet: their writes complete at their
wait, which the first step does not model.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

from tylo.layouts._lazy import sympy

__all__ = ["RaceCheck", "check", "note"]

RACE_FREE, RACE, NOT_PROVED = "race-free", "race", "not proved"
_WRITES = ("store", "atomic", "address")  # an address may be written through
_TID = ("tid_x", "tid_y", "tid_z")
MAX_PAIRS = 4096  # pairs decided per kernel; the rest are not proved (said so)


@dataclass(frozen=True)
class RaceCheck:
    """One pair of shared accesses in one epoch: its ``state`` (race-free, race, not
    proved), the two accesses' ``first`` and ``second`` (``file:line kind``), and for a
    race the two ``threads`` ((x, y, z) each) and the byte ``address`` (from the
    allocation's start); ``reason`` says why a pair is not proved."""

    state: str
    array: str
    first: str
    second: str
    threads: tuple[tuple[int, int, int], tuple[int, int, int]] | None = None
    address: int | None = None
    reason: str = ""

    def describe(self) -> str:
        """One line for the report."""
        head = f"{self.state:<10}  {self.array}: {self.first} / {self.second}"
        if self.state == RACE:
            a, b = self.threads  # type: ignore[misc]
            return f"{head}  threads {a} and {b} at byte {self.address}"
        return head + (f"  ({self.reason})" if self.reason else "")


@dataclass(frozen=True)
class _Shared:
    alloc: str | None  # the tylo.shared allocation, None for other shared memory
    offset: Any
    width: int
    nbytes: int
    kind: str
    epoch: int
    in_loop: bool
    surely_runs: bool
    relations: tuple[Any, ...]
    where: str


def note(ctx: Any, base: Any, offset: Any, width: int, nbytes: int, kind: str,
         relations: tuple[Any, ...], where: str) -> None:  # fmt: skip
    """Record a shared access for :func:`check` (``base``: the tensor's base pointer)."""
    alloc = ctx.shared_allocs.get(id(base))
    s = ctx.scope
    in_loop = False
    while s is not None:
        if s.kind == "loop":
            in_loop = True
            break
        s = s.parent
    ctx.shared_accesses.append(
        _Shared(
            alloc,
            sympy.sympify(offset),
            width,
            nbytes,
            kind,
            ctx.barrier_epoch,
            in_loop,
            not ctx.opaque_branches,
            relations,
            where,
        )  # fmt: skip
    )


def check(ctx: Any) -> tuple[RaceCheck, ...]:
    """Decide every pair of a finished trace's shared accesses (module docstring)."""
    out: list[RaceCheck] = []
    claims = not ctx.other_sync
    groups: dict[tuple[Any, int], list[_Shared]] = {}
    for a in ctx.shared_accesses:
        groups.setdefault((a.alloc, a.epoch), []).append(a)
    threads = _threads(ctx.block)
    decided = 0
    for (alloc, _), accs in groups.items():
        for a, b in itertools.combinations_with_replacement(accs, 2):
            if a.kind not in _WRITES and b.kind not in _WRITES:
                continue
            if a.kind == "atomic" and b.kind == "atomic":
                continue
            name = alloc or "dynamic shared memory"
            first, second = f"{a.where} {a.kind}", f"{b.where} {b.kind}"
            reason = _why_not(a) or _why_not(b)
            if decided >= MAX_PAIRS:
                reason = reason or f"more than {MAX_PAIRS} pairs in the kernel"
            if reason:
                out.append(RaceCheck(NOT_PROVED, name, first, second, reason=reason))
                continue
            decided += 1
            try:
                found = _first_race(a, b, threads)
            except Exception as err:  # noqa: BLE001 - the check never breaks a trace
                out.append(
                    RaceCheck(NOT_PROVED, name, first, second,
                              reason=f"the offsets could not be evaluated ({type(err).__name__})")
                )  # fmt: skip
                continue
            if found is None:
                out.append(RaceCheck(RACE_FREE, name, first, second))
            elif claims and a.surely_runs and b.surely_runs and a.kind != "address" != b.kind:
                t1, t2, byte = found
                out.append(RaceCheck(RACE, name, first, second, (t1, t2), byte))
            else:
                out.append(
                    RaceCheck(
                        NOT_PROVED,
                        name,
                        first,
                        second,
                        reason="two threads may touch one byte, but the kernel has "
                        "other synchronization or the accesses may not run",
                    )  # fmt: skip
                )
    return tuple(out)


def _why_not(a: _Shared) -> str:
    if a.alloc is None:
        return "not a tylo.shared allocation (dynamic shared memory views may overlap)"
    if a.in_loop:
        return "inside a dynamic loop (its iterations are not separated by the body's barriers)"
    free = {str(s) for s in a.offset.free_symbols} | {
        str(s) for r in a.relations for s in r.free_symbols
    }
    other = sorted(free - set(_TID))
    if other:
        return f"the offset or the path condition depends on {', '.join(other)}"
    return ""


def _threads(block: tuple[int, int, int]) -> list[tuple[int, int, int]]:
    bx, by, bz = block
    return [(x, y, z) for z in range(bz) for y in range(by) for x in range(bx)]


def _bytes(a: _Shared, threads: list[tuple[int, int, int]]) -> dict[int, list[int]]:
    """byte address -> the threads (indexes into ``threads``) that touch it."""
    syms = sorted(a.offset.free_symbols | {s for r in a.relations for s in r.free_symbols},
                  key=str)  # fmt: skip
    names = [str(s) for s in syms]
    offset = _function(syms, a.offset) if syms else (lambda: int(a.offset))
    conds = [_function(syms, r) if syms else (lambda r=r: bool(r)) for r in a.relations]
    out: dict[int, list[int]] = {}
    for k, t in enumerate(threads):
        env = [t[_TID.index(n)] for n in names]
        if not all(c(*env) for c in conds):
            continue
        start = int(offset(*env)) * a.nbytes
        for byte in range(start, start + a.width * a.nbytes):
            out.setdefault(byte, []).append(k)
    return out


def _function(syms: list[Any], expr: Any) -> Any:
    """``expr`` as a Python function of ``syms``: ``math`` for the arithmetic, and each
    other function it applies (tylo's ``SwizzleXor``, say) by its own evaluation on ints."""
    applied = {
        type(f).__name__: (lambda *xs, F=type(f): F(*xs))
        for f in expr.atoms(sympy.Function)
        if not hasattr(math, type(f).__name__)
    }
    return sympy.lambdify(syms, expr, modules=[applied, "math"])


def _first_race(
    a: _Shared, b: _Shared, threads: list[tuple[int, int, int]]
) -> tuple[tuple[int, int, int], tuple[int, int, int], int] | None:
    """Two different threads and a byte both touch, with a write among them; None if none."""
    ta, tb = _bytes(a, threads), _bytes(b, threads)
    for byte in sorted(ta.keys() & tb.keys()):
        for i in ta[byte]:
            for j in tb[byte]:
                if i != j:
                    return threads[i], threads[j], byte
    return None
