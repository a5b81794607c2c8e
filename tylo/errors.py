"""The root of tylo's typed errors.

Every error tylo raises on purpose derives from :class:`TyloError`, so a caller can catch
them all at once; each subsystem adds its own subclass (``LayoutError`` in
:mod:`tylo.layouts`, ``CompileError`` and ``CudaError`` in :mod:`tylo.backend`, ...).
This module imports nothing, so every layer may depend on it.
"""

from __future__ import annotations

__all__ = ["ArrayError", "TyloError"]


class TyloError(Exception):
    """Base class of every error tylo raises deliberately."""


class ArrayError(TyloError, TypeError):
    """An array that cannot be passed to a kernel (wrong device, dtype or strides); raised
    by :mod:`tylo.arrays` and by the driver's host-buffer copies, so it lives below both."""
