"""Chaining an MMA's accumulator into the next MMA's A operand through registers.

In streaming attention, ``S = Q Kᵀ`` is an ``mma.sync`` f32 accumulator over (M, N) and
``P = f(S)`` is the A operand of ``P V``, whose contracted dimension K is S's N. The
conversion needs no shared memory when every thread already holds, for each A operand slot
of the next MMA, the accumulator element at the same coordinate: then the registers only
need converting and packing in pairs (``cvt.rn.bf16x2.f32``, PTX ISA 9.7.9.21).

:func:`prove_chain` decides this from the two :class:`~tylo.tile.ownership.Ownership`
objects alone, by brute force over every thread and value slot (no register order is
assumed): for k-step ``s`` of the next plan, A slot ``v`` is fed by accumulator slot ``u``
exactly when, for every thread ``t``, ``acc.coord(t, u) == a.coord(t, v) + (0, 16 s)``.
With m16n8k16 both sides agree (PTX ISA 9.7.14.5.8): the A fragment's pairs ``a0 a1``
(row ``g``, columns ``2c, 2c+1``) are the accumulator's ``c0 c1`` of the n8 atom covering
those columns, so two n8 accumulator atoms side by side are one k16 A operand::

    acc atoms j = 2s, 2s+1 (rows g, g+8; columns 2c, 2c+1 of each)
      -> A k-step s: a0 a1 = c0 c1 (atom 2s)    a2 a3 = c2 c3 (atom 2s)
                     a4 a5 = c0 c1 (atom 2s+1)  a6 a7 = c2 c3 (atom 2s+1)

The map is *derived* by :func:`prove_chain`, not taken from this picture, and anything
else (an accumulator of a different atom or warp arrangement, a transposed one, a width
that is not the next plan's ``k``, warps of the next plan that replicate A) is refused
with a :class:`~tylo.nvgpu.errors.PlanError` naming a thread, slot and coordinate that
witness the mismatch.

>>> from tylo import dtypes as dt
>>> from tylo.nvgpu.warp.mma import MMAAtom, TiledMMA
>>> s_plan = TiledMMA(MMAAtom((16, 8, 16), dt.bf16), warps=(4, 1), repeat=(1, 4), k=64)
>>> pv_plan = TiledMMA(MMAAtom((16, 8, 16), dt.bf16), warps=(4, 1), repeat=(1, 8), k=32)
>>> proof = prove_chain(s_plan.acc_ownership, pv_plan)
>>> proof.slots
((0, 1, 2, 3, 4, 5, 6, 7), (8, 9, 10, 11, 12, 13, 14, 15))
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tylo import dtypes as dt
from tylo.errors import TyloError
from tylo.nvgpu.errors import PlanError, memoized
from tylo.nvgpu.warp.mma import TiledMMA
from tylo.tile.ownership import Ownership

__all__ = ["ChainProof", "accumulator_as_a_operand", "prove_chain"]


@dataclass(frozen=True)
class ChainProof:
    """The proof that accumulator ownership ``acc`` feeds ``plan``'s A operand.

    ``slots[s][v]`` is the accumulator value slot that holds, in every thread, the
    coordinate A slot ``v`` of k-step ``s`` needs (columns offset by ``16 s``); packed
    register ``r`` of k-step ``s`` is slots ``slots[s][2r]`` (low half) and
    ``slots[s][2r + 1]`` (high half). Defining property: for every thread ``t``, k-step
    ``s`` and A slot ``v``, ``acc.coord(t, slots[s][v]) == a.coord(t, v) + (0, 16 s)``
    where ``a = plan.operand_ownership("a", k_steps=1)``.
    """

    acc: Ownership
    plan: TiledMMA
    slots: tuple[tuple[int, ...], ...]

    @property
    def a(self) -> Ownership:
        """The A operand ownership of one k-step, which each converted fragment carries."""
        return self.plan.operand_ownership("a", k_steps=1)

    def registers(self, k_step: int) -> tuple[tuple[int, int], ...]:
        """The (low, high) accumulator slots of each packed A register of ``k_step``."""
        if type(k_step) is not int or not 0 <= k_step < len(self.slots):
            raise PlanError(
                f"ChainProof.registers: k_step {k_step!r} out of range 0..{len(self.slots) - 1}"
            )
        s = self.slots[k_step]
        return tuple((s[i], s[i + 1]) for i in range(0, len(s), 2))


def _describe(acc: Ownership) -> str:
    return acc.name or str(acc)


def _check_shapes(acc: Ownership, plan: TiledMMA) -> None:
    m, _, k = plan.size
    ak = plan.atom.shape[2]
    if acc.rank != 2:
        raise PlanError(
            f"prove_chain: the accumulator {_describe(acc)} has rank {acc.rank}; an (M, N) "
            "accumulator of rank 2 is chained into an A operand over (M, K)"
        )
    rows, cols = acc.shape
    if cols % ak:
        raise PlanError(
            f"prove_chain: the accumulator is {cols} columns wide, not a multiple of the "
            f"atom's K ({ak}), so no k-step of the next MMA lines up with it; make the first "
            f"MMA's N a multiple of {ak} (an even number of n8 repeats)"
        )
    if (rows, cols) != (m, k):
        raise PlanError(
            f"prove_chain: the accumulator covers {acc.shape}, but {plan}'s A operand covers "
            f"(M, k) = {(m, k)}; the next plan needs M = {rows} rows and k = {cols}"
        )
    if acc.threads != plan.threads:
        raise PlanError(
            f"prove_chain: the accumulator spans {acc.threads} threads, {plan} has "
            f"{plan.threads}; they must be the same threads (with warps = (wm, wn), wn > 1 "
            "replicates A over warps that do not hold the accumulator's columns)"
        )


@memoized(128)
def prove_chain(acc: Ownership, plan: TiledMMA) -> ChainProof:
    """Prove that the accumulator ownership ``acc`` over (M, N), packed in pairs, is
    ``plan``'s A operand ownership over (M, K = N), k-step by k-step, and derive which
    accumulator slot feeds each A slot.

    Defining property (checked here for every thread, k-step and slot, by brute force):
    ``acc.coord(t, proof.slots[s][v]) == a.coord(t, v) + (0, 16 s)``. Raises
    :class:`PlanError` when no such slot exists for some A slot, naming a witness.

    >>> from tylo import dtypes as dt
    >>> from tylo.nvgpu.warp.mma import MMAAtom, TiledMMA
    >>> first = TiledMMA(MMAAtom((16, 8, 16), dt.f16), warps=(1, 1), repeat=(1, 2), k=16)
    >>> prove_chain(first.acc_ownership, first).registers(0)
    ((0, 1), (2, 3), (4, 5), (6, 7))
    """

    if not isinstance(acc, Ownership):
        raise PlanError(f"prove_chain: acc must be an Ownership, got {type(acc).__name__}")
    if not isinstance(plan, TiledMMA):
        raise PlanError(f"prove_chain: plan must be a TiledMMA, got {type(plan).__name__}")
    _check_shapes(acc, plan)
    a = plan.operand_ownership("a", k_steps=1)

    def head(s: int) -> str:
        return (
            f"prove_chain: the accumulator {_describe(acc)} is not the A operand "
            f"{a.name or a} of k-step {s}, packed in pairs"
        )

    fix = (
        "; chain an accumulator of the same atom and the same warps along M into a plan "
        "with warps (wm, 1) whose k is the accumulator's width (acc_ownership of "
        "TiledMMA(atom, warps=(wm, 1), repeat=(rm, ...)))"
    )
    slots = match_slots(acc, a, plan.atom.shape[2], plan.k_steps, head, fix)
    return ChainProof(acc, plan, slots)


def match_slots(
    acc: Ownership, a: Ownership, step: int, steps: int, head: Any, fix: str
) -> tuple[tuple[int, ...], ...]:
    """For each k-step ``s < steps``, which slot of ``acc`` feeds each slot ``v`` of the A
    ownership ``a``: the slot ``u`` with ``acc.coord(t, u) == a.coord(t, v) + (0, step*s)``
    in every thread ``t`` (brute force over the ownerships' tables). Raises
    :class:`PlanError` naming a witness when A slot ``v`` has no such slot: ``head(s)``
    starts the message and ``fix`` ends it. Shared by :func:`prove_chain` and
    :func:`tylo.nvgpu.warpgroup.chain.prove_register_a`."""
    import numpy as np

    ta = a.table()  # [thread, A slot, axis]
    tc = acc.table()  # [thread, acc slot, axis]
    slots: list[tuple[int, ...]] = []
    for s in range(steps):
        want = ta + np.array([0, step * s])
        # hit[v, u]: accumulator slot u holds A slot v's coordinate in every thread
        hit = np.all(tc[:, None, :, :] == want[:, :, None, :], axis=(0, 3))
        row: list[int] = []
        for v in range(a.values):
            us = np.flatnonzero(hit[v])
            if len(us) == 0:
                raise PlanError(_witness(tc, want, v, head(s), fix))
            row.append(int(us[0]))
        slots.append(tuple(row))
    return tuple(slots)


def _witness(tc: Any, want: Any, v: int, head: str, fix: str) -> str:
    """Why A slot ``v`` has no accumulator slot: a thread that does not hold the
    coordinate at all, or two threads that hold it in different slots."""
    import numpy as np

    where: dict[int, int] = {}
    for t in range(tc.shape[0]):
        c = tuple(int(x) for x in want[t, v])
        us = np.flatnonzero(np.all(tc[t] == want[t, v], axis=1))
        if len(us) == 0:
            return f"{head}: thread {t} needs {c} in A slot {v} but does not hold it{fix}"
        where[t] = int(us[0])
    t1 = next(t for t in where if where[t] != where[0])
    return (
        f"{head}: A slot {v} is accumulator slot {where[0]} in thread 0 but slot "
        f"{where[t1]} in thread {t1}; one register cannot serve both{fix}"
    )


def accumulator_as_a_operand(acc: Any, plan: TiledMMA, dtype: Any = None) -> tuple[Any, ...]:
    """The accumulator fragment ``acc`` over (M, N) as ``plan``'s A operand over (M, K = N),
    without shared memory: one packed fragment per k-step of ``plan`` (``dtype``, default
    the atom's, rounded to nearest even), each with ``plan.operand_ownership("a",
    k_steps=1)`` and ready for :func:`~tylo.nvgpu.warp.mma.mma_atoms`.

    Defining property: element ``(i, j)`` of the result of k-step ``s`` is element
    ``(i, j + 16 s)`` of ``acc``, converted; which register holds it follows from
    :func:`prove_chain`, which refuses any ownership for which this is not true.
    """
    from tylo.tile.fragment import Fragment

    if not isinstance(plan, TiledMMA):
        raise PlanError(
            f"accumulator_as_a_operand: plan must be a TiledMMA, got {type(plan).__name__}"
        )
    want = plan.atom.dtype
    try:
        d = want if dtype is None else dt.dtype_of(dtype)
    except TyloError as err:
        raise PlanError(f"accumulator_as_a_operand: {err}") from None
    if d is not want:
        raise PlanError(
            f"accumulator_as_a_operand: dtype {d} is not the A operand's dtype {want} of "
            f"{plan}; pass dtype={want} or a plan of {d}"
        )
    if not isinstance(acc, Fragment):
        raise PlanError(
            f"accumulator_as_a_operand: acc must be a Fragment, got {type(acc).__name__}"
        )
    if acc.packed is not None:
        raise PlanError(
            f"accumulator_as_a_operand: {acc!r} is already packed; pass the f32 accumulator"
        )
    proof = prove_chain(acc.ownership, plan)
    a = proof.a
    return tuple(Fragment([acc.values[u] for u in row], a).pack(d) for row in proof.slots)
