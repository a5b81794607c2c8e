"""The error every hardware-operation plan raises (:mod:`tylo.nvgpu`): one class, below the
plans, so that each unit's module can raise it without importing another unit."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from tylo.errors import TyloError

__all__ = ["PlanError", "TileBoundsError", "as_int", "memoized", "mma_dtypes"]


class PlanError(TyloError):
    """An operation plan (MMA, copy) that is invalid or cannot be proved sound."""


class TileBoundsError(PlanError):
    """An instruction that would touch shared memory outside the tile it names: its region
    past the tile's extents, the tile (a window) past its layout, or the layout's offsets
    past the shared allocation. The message names the instruction, the region, the tile's
    extents and the offset (:mod:`tylo.nvgpu.bounds`)."""


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


def as_int(x: Any) -> int | None:
    """``x`` as an int where it is a static integer: an int or a numpy integer, never a bool
    (a bool is an int in Python, but never a size, offset or count); None otherwise, for
    the caller to refuse naming its argument.

    >>> as_int(3), as_int(np.int64(3)), as_int(True), as_int(3.0)
    (3, 3, None, None)
    """
    if type(x) is int:
        return x
    if isinstance(x, np.integer):
        return int(x)
    return None


def memoized(maxsize: int) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``functools.lru_cache(maxsize)`` for plan derivations whose arguments are values:
    arguments that cannot be hashed (a list where an Ownership belongs, say) bypass the
    cache, so that the function's own checks refuse them with a typed error instead of the
    cache raising ``TypeError``."""

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        cached = functools.lru_cache(maxsize=maxsize)(fn)

        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                hash((args, tuple(kwargs.items())))
            except TypeError:
                return fn(*args, **kwargs)
            return cached(*args, **kwargs)

        call.cache_clear = cached.cache_clear  # type: ignore[attr-defined]
        call.cache_info = cached.cache_info  # type: ignore[attr-defined]
        return call

    return wrap
