"""Chaining a wgmma accumulator into the next wgmma's register A operand.

In streaming attention on Hopper, ``S = Q Kᵀ`` is a ``wgmma`` m64nN f32 accumulator and
``P = f(S)`` is the A operand of ``O += P V``, taken from registers (the register-A form of
``wgmma.mma_async``, PTX ISA 9.7.15.5.1.1). No shared memory is needed when every thread
already holds, for each register-A slot of every k16 step, the accumulator element at the
same coordinate: then the registers only need converting and packing in pairs.

:func:`prove_register_a` decides this from the two ownerships alone, by brute force over all
128 threads and every slot (no register order is assumed): for k-step ``s``, A slot ``v`` is
fed by accumulator slot ``u`` exactly when, for every thread ``t``,
``acc.coord(t, u) == a.coord(t, v) + (0, 16 s)``. Anything else is refused with a
:class:`~tylo.nvgpu.errors.PlanError` naming a thread, slot and coordinate that witness the
mismatch. :func:`accumulator_as_register_a` is the conversion it justifies. The warp-MMA
counterpart is :mod:`tylo.nvgpu.warp.chain`.

>>> from tylo import dtypes as dt
>>> from tylo.nvgpu.warpgroup.mma import WarpgroupMMAAtom
>>> s_atom = WarpgroupMMAAtom((64, 64, 16), dt.bf16)
>>> o_atom = WarpgroupMMAAtom((64, 64, 16), dt.bf16, a="registers")
>>> proof = prove_register_a(s_atom.c, o_atom)
>>> len(proof.slots), proof.slots[0]
(4, (0, 1, 2, 3, 4, 5, 6, 7))
"""

from __future__ import annotations

from dataclasses import dataclass

from tylo.nvgpu.errors import PlanError, memoized
from tylo.nvgpu.warp.chain import match_slots
from tylo.nvgpu.warpgroup.mma import WarpgroupMMAAtom
from tylo.tile.fragment import Fragment
from tylo.tile.ownership import Ownership

__all__ = ["RegisterAProof", "accumulator_as_register_a", "prove_register_a"]


@dataclass(frozen=True)
class RegisterAProof:
    """The proof that accumulator ownership ``acc`` over (64, K), packed in pairs, is the
    register-A operand ``atom.a_registers`` of ``K / 16`` k-steps of ``atom``.

    ``slots[s][v]`` is the accumulator slot that holds, in every thread, the coordinate A
    slot ``v`` of k-step ``s`` needs; packed register ``r`` of k-step ``s`` is the pair
    ``slots[s][2r]`` (low half), ``slots[s][2r + 1]`` (high half). Defining property: for
    every thread ``t``, k-step ``s`` and A slot ``v``,
    ``acc.coord(t, slots[s][v]) == a.coord(t, v) + (0, 16 s)`` with ``a = atom.a_registers``.
    """

    acc: Ownership
    atom: WarpgroupMMAAtom
    slots: tuple[tuple[int, ...], ...]

    def registers(self, k_step: int) -> tuple[tuple[int, int], ...]:
        """The (low, high) accumulator slots of each packed A register of ``k_step``."""
        if type(k_step) is not int or not 0 <= k_step < len(self.slots):
            raise PlanError(
                f"RegisterAProof.registers: k_step {k_step!r} out of range 0..{len(self.slots) - 1}"
            )
        s = self.slots[k_step]
        return tuple((s[i], s[i + 1]) for i in range(0, len(s), 2))


@memoized(64)
def prove_register_a(acc: Ownership, atom: WarpgroupMMAAtom) -> RegisterAProof:
    """Prove that the accumulator ownership ``acc`` over (64, K) feeds, packed in pairs,
    the register A (``atom.a_registers``, (64, 16) per k-step) of ``K / 16`` wgmma k-steps,
    and derive which accumulator slot feeds each A slot, by brute force over every thread
    and slot (no register order is assumed).

    Defining property: ``acc.coord(t, slots[s][v]) == a.coord(t, v) + (0, 16 s)`` for every
    thread ``t``, k-step ``s`` and A slot ``v``; each A register pairs two slots; raises
    :class:`~tylo.nvgpu.errors.PlanError` naming a witness thread, slot and coordinate when
    some A slot has no such accumulator slot.

    >>> from tylo import bf16
    >>> s_atom = WarpgroupMMAAtom((64, 32, 16), bf16)
    >>> o_atom = WarpgroupMMAAtom((64, 64, 16), bf16, a="registers")
    >>> prove_register_a(s_atom.c, o_atom).slots
    ((0, 1, 2, 3, 4, 5, 6, 7), (8, 9, 10, 11, 12, 13, 14, 15))
    """

    if not isinstance(acc, Ownership):
        raise PlanError(f"prove_register_a: acc must be an Ownership, got {type(acc).__name__}")
    if not isinstance(atom, WarpgroupMMAAtom) or atom.a != "registers":
        raise PlanError(
            f"prove_register_a: atom must be a WarpgroupMMAAtom with a='registers', got {atom!r}"
        )
    a = atom.a_registers
    ak = a.shape[1]
    if acc.rank != 2 or acc.shape[0] != a.shape[0] or acc.shape[1] % ak:
        raise PlanError(
            f"prove_register_a: the accumulator {acc.label} covers {acc.shape}; the register "
            f"A of {atom} takes (64, K) with K a multiple of {ak} (one k-step per {ak} columns)"
        )
    if acc.threads != a.threads:
        raise PlanError(
            f"prove_register_a: the accumulator spans {acc.threads} threads, the register A "
            f"of a warpgroup {a.threads}; chain the accumulator of a warpgroup MMA"
        )

    def head(s: int) -> str:
        return (
            f"prove_register_a: the accumulator {acc.label} is not the register A "
            f"{a.label} of k-step {s}, packed in pairs"
        )

    fix = "; chain the accumulator of a wgmma m64nNk16 (its ownership atom.c) into K = N"
    return RegisterAProof(acc, atom, match_slots(acc, a, ak, acc.shape[1] // ak, head, fix))


# --8<-- [start:convert]
def accumulator_as_register_a(acc: Fragment, atom: WarpgroupMMAAtom) -> tuple[Fragment, ...]:
    """The f32 accumulator fragment ``acc`` over (64, K) as ``K / 16`` packed register-A
    fragments of ``atom`` (its dtype, rounded to nearest even), with no shared memory.

    Defining property: element ``(i, j)`` of the fragment of k-step ``s`` is element
    ``(i, j + 16 s)`` of ``acc``, converted; the register holding it follows from
    :func:`prove_register_a`, which refuses any ownership for which this is not true."""
    if not isinstance(acc, Fragment) or acc.packed is not None:
        raise PlanError(f"accumulator_as_register_a: acc must be an unpacked Fragment, got {acc!r}")
    proof = prove_register_a(acc.ownership, atom)
    a = atom.a_registers
    return tuple(Fragment([acc.values[u] for u in row], a).pack(atom.dtype) for row in proof.slots)


# --8<-- [end:convert]
