"""The error every hardware-operation plan raises (:mod:`tylo.nvgpu`): one class, below the
plans, so that each unit's module can raise it without importing another unit."""

from __future__ import annotations

from typing import Any

from tylo.errors import TyloError

__all__ = ["PlanError", "mma_dtypes"]


class PlanError(TyloError):
    """An operation plan (MMA, copy) that is invalid or cannot be proved sound."""


def mma_dtypes(what: str, dtype: Any, acc: Any) -> tuple[Any, Any]:
    """The (input, accumulator) dtypes of a 16-bit MMA atom (warp or warpgroup): inputs bf16
    or f16, an f32 accumulator; a PlanError naming ``what`` otherwise."""
    from tylo import dtypes as dt

    try:
        d, a = dt.dtype_of(dtype), dt.dtype_of(acc)
    except TyloError as err:
        raise PlanError(f"{what}: {err}") from None
    if d not in (dt.bf16, dt.f16):
        raise PlanError(f"{what}: inputs must be bf16 or f16, got {d}")
    if a is not dt.f32:
        raise PlanError(f"{what}: the accumulator must be f32, got {a}")
    return d, a
