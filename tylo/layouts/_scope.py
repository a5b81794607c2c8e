"""The thread's assumption stack and the normalization of scalars (private): below
:mod:`tylo.layouts.symbolic` (which re-exports ``to_value``) and
:mod:`tylo.layouts._sampling`, which both use them."""

from __future__ import annotations

import operator
import reprlib
import threading
from typing import Any

from tylo.layouts._lazy import is_sympy, sympy
from tylo.layouts.errors import AssumptionError

__all__ = ["to_value"]

Value = Any  # an int or a sympy integer expression
Fact = Any  # an assumption: a sympy relation (>=, <=, ==, ...) or a Divisible


class _Stack(threading.local):
    def __init__(self) -> None:
        self.current: tuple[Fact, ...] = ()


_STACK = _Stack()


def _normalize_fact(f: Any) -> Any:
    if isinstance(f, bool):
        return sympy.true if f else sympy.false
    return f


def to_value(x: Any) -> Value:
    """Normalize a scalar to ``int`` (for any static integer, sympy or numpy) or a sympy
    expression (symbolic). Raises StaticRequiredError-free: only non-integers are rejected.

    >>> to_value(sympy.Integer(4)), type(to_value(sympy.Integer(4))).__name__
    (4, 'int')
    """
    if type(x) is int:
        return x
    if is_sympy(x):
        if x.is_Integer:
            return int(x)
        return x
    if isinstance(x, bool):
        raise AssumptionError(f"expected an integer value, got the bool {x}")
    try:
        return operator.index(x)
    except TypeError:
        raise AssumptionError(
            f"expected an int or a sympy integer expression, got {reprlib.repr(x)} "
            f"({type(x).__name__})"
        ) from None
