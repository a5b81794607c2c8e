"""The warpgroup roles of the Hopper attention kernels (:mod:`tylo.ops.attention.hopper_kernel`,
:mod:`tylo.ops.attention.hopper_persistent`; walk-through: docs/attention_hopper.md, "Three
consumer warpgroups"): how many consumer warpgroups a CTA runs, the registers each role
keeps (``setmaxnreg``) and the named barriers they meet on.

- A CTA runs one producer warpgroup and ``consumers`` (2 or 3) consumer warpgroups of 128
  threads, consumer ``c`` in warpgroup ``1 + c`` owning query rows ``64c ..``.
- Registers: an SM has :data:`REGISTER_FILE` 32-bit registers, so the roles' counts after
  ``setmaxnreg`` must satisfy ``128 * (producer + consumers * consumer) <= 65536``, each a
  multiple of 8 in [24, 256] (PTX ISA, ``setmaxnreg``). Two consumers keep 40 and 232;
  three keep FlashAttention-3's 32 and 160 (``32 + 3 * 160 = 512``: the whole file).
- Named barriers (PTX ISA, ``bar.sync``/``bar.arrive``: ids 0 to 15, a thread count that is
  a multiple of 32 and the same for every participant of a phase): 0 is ``sync_threads``;
  ``1 + c`` is consumer ``c``'s *turn* barrier of the ping-pong schedule, which completes
  with 256 threads: consumer ``c`` waiting (``bar.sync``, 128) and the consumer before it
  in the rotation arriving (``bar.arrive``, 128) once it has issued its ``S = Q Kᵀ``;
  ``1 + consumers + c`` is consumer ``c``'s epilogue barrier (its own 128 threads,
  :mod:`tylo.ops.attention.hopper_epilogue`). :func:`barrier_ids` lists them.
"""

from __future__ import annotations

from typing import Any

import tylo
from tylo.kernel.values import to_index
from tylo.nvgpu.errors import PlanError

__all__ = [
    "CONSUMER_COUNTS",
    "REGISTERS",
    "REGISTER_FILE",
    "TURN_THREADS",
    "barrier_ids",
    "consumer_rows",
    "epilogue_barrier",
    "named_barrier",
    "next_turn",
    "registers",
    "turn_barrier",
]

CONSUMER_COUNTS = (2, 3)
REGISTER_FILE = 65536  # 32-bit registers per SM
# consumers -> (producer's, each consumer's) registers per thread after setmaxnreg
REGISTERS = {2: (40, 232), 3: (32, 160)}
TURN_THREADS = 256  # a turn barrier's phase: the waiting consumer's 128 and the giver's 128
WARPGROUP = 128


def registers(consumers: int) -> tuple[int, int]:
    """``(producer, consumer)``: the registers per thread each role keeps after
    ``setmaxnreg`` with ``consumers`` consumer warpgroups.

    Defining property: ``128 * (producer + consumers * consumer) <= REGISTER_FILE``, both
    multiples of 8 in [24, 256]. Raises :class:`PlanError` for a count other than
    :data:`CONSUMER_COUNTS`'s."""
    if type(consumers) is not int or consumers not in REGISTERS:
        raise PlanError(
            f"hopper_roles.registers: consumers must be an int in {CONSUMER_COUNTS}, got "
            f"{consumers!r}"
        )
    return REGISTERS[consumers]


def next_turn(consumers: int, wg: Any) -> Any:
    """The turn barrier consumer warpgroup ``wg`` (``1 ..  consumers``, a runtime value)
    arrives on after issuing its ``S = Q Kᵀ``: the next consumer's in the rotation (the
    last gives the first its turn). ``3 - wg`` with two consumers, ``wg % 3 + 1`` with
    three."""
    if consumers == 2:
        return 3 - wg
    return wg % consumers + 1


def epilogue_barrier(consumers: int, c: Any) -> Any:
    """Consumer ``c``'s epilogue barrier id (``c`` may be a runtime value): after the turn
    barriers ``1 .. consumers``."""
    return 1 + consumers + c


def barrier_ids(consumers: int) -> dict[str, int]:
    """Every named barrier id a CTA with ``consumers`` consumer warpgroups uses, by use:
    ``sync_threads``, ``turn c`` and ``epilogue c`` for each consumer ``c``.

    Defining property: the ids are distinct and in [0, 15]."""
    ids = {"sync_threads": 0}
    for c in range(consumers):
        ids[f"turn {c}"] = 1 + c
        ids[f"epilogue {c}"] = epilogue_barrier(consumers, c)
    return ids


def named_barrier(op: str, bar: Any, threads: int = TURN_THREADS) -> None:
    """``bar.sync`` / ``bar.arrive`` on named barrier ``bar`` (a runtime value) for a phase
    of ``threads`` threads (PTX ISA, parallel synchronization: ``bar.arrive`` must name the
    count, and every participant of a phase names the same one)."""
    tylo.ptx(f"bar.{op} $0, {threads};", tylo.value(bar, tylo.i32))


def turn_barrier(op: str, bar: Any) -> None:
    """``bar.sync`` / ``bar.arrive`` on turn barrier ``bar`` (``1 .. consumers``, a runtime
    value), completed by :data:`TURN_THREADS`: the consumer whose turn it is (``sync``) and
    the one giving it (``arrive``)."""
    named_barrier(op, bar, TURN_THREADS)


def consumer_rows(cfg: Any, wg: Any, tid: Any) -> tuple[Any, tuple[Any, Any], Any]:
    """For consumer warpgroup ``wg`` (``1 .. cfg.consumers``, a runtime value) and thread
    ``tid``: ``c`` (the consumer owns rows ``64c ..`` of each item's tile), its turn
    barriers ``(own, next's)`` (consumer ``c``'s is ``1 + c``; it gives the next consumer of
    the rotation its turn: :func:`next_turn`) and the thread's index in its warpgroup."""
    c = to_index(wg - 1, "consumer")
    return c, (wg, next_turn(cfg.consumers, wg)), tid - 128 * (1 + c)
