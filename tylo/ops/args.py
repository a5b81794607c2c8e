"""Argument checks every op shares, so that each refusal reads the same way everywhere.

A boolean option takes only ``True`` or ``False`` (``relu="no"`` is not false), a size only
an ``int`` (numpy integers included, ``bool`` excluded), and a float that a kernel narrows
to f32 only a real number whose f32 rounding is finite: ``alpha=1e39`` would become ``inf``
inside the kernel and every output ``inf`` or NaN, so it is refused, naming the argument.

>>> f32_scalar("gemm", "alpha", 0.5)
0.5
>>> f32_scalar("gemm", "alpha", 1e39)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
tylo.ops.args.OpArgumentError: gemm: alpha = 1e+39 does not fit in f32 (|alpha| <= ...
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from tylo.constants import F32_MAX, LOG2E
from tylo.errors import TyloError

__all__ = [
    "F32_MAX",
    "OpArgumentError",
    "check_scale",
    "f32_scalar",
    "refuse_shared_over",
    "require_bool",
    "require_int",
]


class OpArgumentError(TyloError, ValueError):
    """An op's argument of the wrong kind or outside what the kernel can represent."""


def require_bool(op: str, what: str, value: Any) -> bool:
    """``value`` when it is a bool (numpy's ``bool_`` too), else :class:`OpArgumentError`."""
    if isinstance(value, bool):
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    raise OpArgumentError(
        f"{op}: {what} must be True or False, got {value!r} ({type(value).__name__})"
    )


def require_int(op: str, what: str, value: Any, *, minimum: int | None = None) -> int:
    """``value`` as an int when it is an integer (numpy's too, never a bool) of at least
    ``minimum``, else :class:`OpArgumentError`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise OpArgumentError(
            f"{op}: {what} must be an integer, got {value!r} ({type(value).__name__})"
        )
    v = int(value)
    if minimum is not None and v < minimum:
        raise OpArgumentError(f"{op}: {what} must be >= {minimum}, got {v}")
    return v


def f32_scalar(op: str, what: str, value: Any) -> float:
    """``value`` as a Python float when it is a real number (not a bool) whose f32 rounding
    is finite: ``|value| <= F32_MAX`` up to rounding (values that round to ``F32_MAX`` pass),
    else :class:`OpArgumentError` naming ``what`` and the accepted range."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise OpArgumentError(
            f"{op}: {what} must be a real number, got {value!r} ({type(value).__name__})"
        )
    try:
        v = float(value)
    except (OverflowError, ValueError):  # an int past the float range
        v = math.inf if value > 0 else -math.inf
    # binary32 rounds to nearest even: values below F32_MAX + half an ulp (2**103) round to
    # F32_MAX; anything at or past that rounds to inf
    if not math.isfinite(v) or abs(v) >= F32_MAX + 2.0**103:
        raise OpArgumentError(
            f"{op}: {what} = {value!r} does not fit in f32 (|{what}| <= {F32_MAX!r} and "
            "finite); the kernel would compute with inf"
        )
    return v


def refuse_shared_over(op: str, nbytes: int, target: Any) -> None:
    """Refuse (:class:`~tylo.nvgpu.errors.PlanError`) a kernel of ``nbytes`` of shared
    memory per block for a ``target`` whose blocks may use less
    (:attr:`tylo.target.Target.max_shared_bytes`: 163 KiB on sm_80, 99 KiB on sm_86 and
    sm_89, 227 KiB on sm_90): it would compile, and every launch would fail."""
    from tylo.nvgpu.errors import PlanError
    from tylo.target import Target

    t = Target.parse(target)
    if nbytes > t.max_shared_bytes:
        raise PlanError(
            f"{op}: the configuration needs {nbytes} B of shared memory per block, over the "
            f"{t.max_shared_bytes // 1024} KiB a block may use on {t.sm}; use fewer stages "
            "or a smaller tile"
        )


def check_scale(op: str, scale: Any) -> float | None:
    """``scale`` of an ``exp(scale * x)`` as a float (None stays None: the op's default),
    refused (:class:`OpArgumentError`) unless it and the exponent scale the kernels use,
    ``scale * log2(e)``, are real numbers finite in f32: ``|scale| <= F32_MAX / log2(e)``,
    about 2.3585e38."""
    if scale is None:
        return None
    s = f32_scalar(op, "scale", scale)
    f32_scalar(op, "scale * log2(e)", s * LOG2E)
    return s
