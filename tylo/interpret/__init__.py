"""Run tylo kernels on the CPU: an interpreter of the traced NVVM IR.

``kern.interpret[grid, block](*args)`` (or ``kern[grid, block](*args)`` with
``TYLO_INTERPRET=1``) traces the kernel as a GPU launch would and runs its IR, lanes of a
CTA in lockstep over numpy arrays, reporting out-of-bounds accesses, shared-memory races,
barrier divergence, ``cp.async`` misuse and (``TYLO_INTERPRET_STRICT=1``) reads of
uninitialized shared or local memory. ``docs/interpret.md`` says what is covered.

Modules: :mod:`~tylo.interpret.errors` (the typed reports), :mod:`~tylo.interpret.numerics`
(16-bit float conversions), :mod:`~tylo.interpret.irtypes` (IR types and constants),
:mod:`~tylo.interpret.cfg` (block order), :mod:`~tylo.interpret.ops` (instruction
semantics), :mod:`~tylo.interpret.memory` (memory and its checks), :mod:`~tylo.interpret.globalrace`
(races in global arrays),
:mod:`~tylo.interpret.pool` (CTAs in a pool of processes), :mod:`~tylo.interpret.source`
(source lines, pdb at a line),
:mod:`~tylo.interpret.machine` (compiled program, scheduler), :mod:`~tylo.interpret.calls`
(intrinsics, atomics), :mod:`~tylo.interpret.warp` (barriers and warp operations),
:mod:`~tylo.interpret.ptx` (inline PTX), :mod:`~tylo.interpret.launch` (entry points).
"""

from __future__ import annotations

from tylo.interpret.errors import (
    AsyncMisuse,
    BarrierDivergence,
    InterpretError,
    OutOfBounds,
    SharedRace,
    Trap,
    UninitializedRead,
    UnsupportedOperation,
    WarpDivergence,
)
from tylo.interpret.launch import HostArray, Interpreted, InterpretedLaunch

__all__ = [
    "AsyncMisuse",
    "BarrierDivergence",
    "HostArray",
    "InterpretError",
    "Interpreted",
    "InterpretedLaunch",
    "OutOfBounds",
    "SharedRace",
    "Trap",
    "UninitializedRead",
    "UnsupportedOperation",
    "WarpDivergence",
]
