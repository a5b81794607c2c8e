"""The bit arithmetic of a swizzle on an integer offset (private), shared by
:class:`~tylo.layouts.swizzle.Swizzle` (static offsets) and
:class:`~tylo.layouts.swizzle.SwizzleXor` (symbolic ones, once they become integers)."""

from __future__ import annotations

__all__ = ["_apply", "_shiftr"]


def _shiftr(x: int, s: int) -> int:
    return x >> s if s >= 0 else x << -s


def _apply(x: int, bits: int, base: int, shift: int) -> int:
    mask = ((1 << bits) - 1) << (base + max(0, shift))
    return x ^ _shiftr(x & mask, shift)
