"""``SwizzleXor``: a swizzle applied to a symbolic offset, as a sympy function.

Private module: :class:`SwizzleXor` is re-exported by :mod:`tylo.layouts.swizzle`, which
imports this module (and sympy) only when a swizzle is applied to a symbolic offset.
"""

from __future__ import annotations

from typing import Any

import sympy

from tylo.layouts._swizzle_bits import _apply

__all__ = ["SwizzleXor"]


class SwizzleXor(sympy.Function):  # type: ignore[misc]  # sympy ships no type information
    """The symbolic value of a swizzle applied to an offset: ``SwizzleXor(x, b, m, s)`` is
    ``x ^ ((x & (((1 << b) - 1) << (m + max(0, s)))) >> s)``. It evaluates when ``x`` is an
    integer; code generators lower it to and/shift/xor.

    >>> SwizzleXor(64, 3, 3, 3)
    72
    """

    nargs = 4
    is_integer = True

    @classmethod
    def eval(cls, x: Any, bits: Any, base: Any, shift: Any) -> Any:
        if bits == 0:
            return x
        if x.is_Integer:
            return sympy.Integer(_apply(int(x), int(bits), int(base), int(shift)))
        return None

    def _eval_is_nonnegative(self) -> Any:
        return self.args[0].is_nonnegative
