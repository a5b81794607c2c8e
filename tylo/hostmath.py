"""Plain-Python meanings of tylo's math functions, for values outside a trace.

Inside a kernel ``tylo.exp`` and friends emit IR; on plain numbers (host emulation of
fragments, static folding) they compute with :mod:`math` through this one table.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

__all__ = ["HOST_MATH"]

HOST_MATH: dict[str, Callable[..., Any]] = {
    "exp": math.exp,
    "exp2": lambda x: 2.0**x,
    "log": math.log,
    "log2": math.log2,
    "sqrt": math.sqrt,
    "rsqrt": lambda x: 1.0 / math.sqrt(x),
}
