"""Numbers every kernel and host of tylo shares, defined once.

>>> import math
>>> from tylo.constants import LOG2E, F32_MAX, INT32_MAX
>>> math.isclose(2.0 ** (3.0 * LOG2E), math.exp(3.0), rel_tol=1e-15)
True
>>> F32_MAX == (2 - 2**-23) * 2**127, INT32_MAX == 2**31 - 1
(True, True)
"""

from __future__ import annotations

import math

__all__ = ["F32_MAX", "INT32_MAX", "LN2", "LOG2E", "NEG_INF"]

LOG2E = 1.4426950408889634
"""``log2(e)``, the nearest double: kernels compute ``exp(x)`` as ``2 ** (x * LOG2E)``
(one FFMA and one ``ex2.approx``)."""

LN2 = 0.6931471805599453
"""``ln(2)``, the nearest double: ``log(x) = log2(x) * LN2``."""

NEG_INF = -math.inf
"""The identity of a running maximum (``-inf``)."""

F32_MAX = float.fromhex("0x1.fffffep+127")
"""The largest finite f32, ``(2 - 2**-23) * 2**127`` (IEEE 754 binary32)."""

INT32_MAX = 2**31 - 1
"""The largest i32: the bound of extents and offsets in 32-bit index arithmetic."""
