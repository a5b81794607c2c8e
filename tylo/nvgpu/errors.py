"""The error every hardware-operation plan raises (:mod:`tylo.nvgpu`): one class, below the
plans, so that each unit's module can raise it without importing another unit."""

from __future__ import annotations

from tylo.errors import TyloError

__all__ = ["PlanError"]


class PlanError(TyloError):
    """An operation plan (MMA, copy) that is invalid or cannot be proved sound."""
