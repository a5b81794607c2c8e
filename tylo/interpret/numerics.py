"""Bit-exact conversions between f32 and the 16-bit float formats, and the flush of
subnormals, as the hardware does them (PTX ISA, ``cvt``).

``f32 -> bf16`` and ``f32 -> f16`` round to nearest, ties to even, keep subnormals and
give the canonical NaN ``0x7FFF``; ``bf16/f16 -> f32`` are exact. Values travel as the
integer types the IR uses for 16-bit floats (``i16``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["bf16_to_f32", "f16_to_f32", "f32_to_bf16", "f32_to_f16", "flush_subnormals"]

CANONICAL_NAN16 = 0x7FFF


def f32_to_bf16(x: Any) -> np.ndarray:
    """f32 values rounded to bf16 (nearest even), as int16 bit patterns."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    nan = np.isnan(np.asarray(x, dtype=np.float32))
    out = np.where(nan, CANONICAL_NAN16, rounded & 0xFFFF).astype(np.uint16)
    return out.view(np.int16)


def bf16_to_f32(h: Any) -> np.ndarray:
    """bf16 bit patterns (any 16-bit integer array) widened exactly to f32."""
    bits = np.asarray(h).astype(np.int64) & 0xFFFF
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)


def f32_to_f16(x: Any) -> np.ndarray:
    """f32 values rounded to f16 (nearest even, subnormals kept), as int16 bit patterns."""
    xf = np.asarray(x, dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        h = xf.astype(np.float16).view(np.uint16)
    return np.where(np.isnan(xf), CANONICAL_NAN16, h).astype(np.uint16).view(np.int16)


def f16_to_f32(h: Any) -> np.ndarray:
    """f16 bit patterns widened exactly to f32."""
    return (
        (np.asarray(h).astype(np.int64) & 0xFFFF)
        .astype(np.uint16)
        .view(np.float16)
        .astype(np.float32)
    )


def flush_subnormals(x: Any) -> Any:
    """``x`` with subnormal values replaced by zero of the same sign (``.ftz``)."""
    x = np.asarray(x)
    tiny = np.finfo(x.dtype).tiny
    return np.where(np.abs(x) < tiny, np.copysign(np.zeros_like(x), x), x).astype(x.dtype)
