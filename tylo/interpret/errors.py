"""Typed errors of the CPU interpreter (:mod:`tylo.interpret`).

Every report names the kernel and the IR instruction it concerns (the traced IR carries no
debug locations, so the instruction's text stands for the source line), and, for a fault
of one thread, its block and thread indices.
"""

from __future__ import annotations

from tylo.errors import TyloError

__all__ = [
    "AsyncMisuse",
    "BarrierDivergence",
    "InterpretError",
    "OutOfBounds",
    "SharedRace",
    "Trap",
    "UninitializedRead",
    "UnsupportedOperation",
    "WarpDivergence",
]


class InterpretError(TyloError):
    """Base class of every error the interpreter raises on purpose."""


class UnsupportedOperation(InterpretError):
    """The kernel uses an IR instruction, intrinsic or PTX instruction the interpreter does
    not implement; ``operation`` names it (e.g. ``'wgmma.mma_async'``)."""

    def __init__(self, operation: str, message: str) -> None:
        super().__init__(message)
        self.operation = operation


class OutOfBounds(InterpretError):
    """A load or store outside its array, outside shared memory or outside a local array."""


class SharedRace(InterpretError):
    """Two threads touched the same shared-memory byte between two barriers, at least one
    of them writing, outside atomics."""


class UninitializedRead(InterpretError):
    """A read of shared or local memory never written (``TYLO_INTERPRET_STRICT=1``)."""


class BarrierDivergence(InterpretError):
    """A CTA-wide barrier reached by some threads of a CTA but not by all of them."""


class WarpDivergence(InterpretError):
    """A ``.sync`` warp operation (shuffle, vote, ldmatrix, mma) whose member lanes did not
    all execute it together."""


class AsyncMisuse(InterpretError):
    """A read of a ``cp.async`` destination before the copying thread waited for it."""


class Trap(InterpretError):
    """The kernel executed ``trap`` (a failed device-side check)."""
