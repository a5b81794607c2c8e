"""Symbol classes carrying facts: :class:`Dim`, :class:`IndexSymbol` (sympy symbols).

Private module: the public names are re-exported by :mod:`tylo.layouts.symbolic`.
A fact that belongs to one symbol (``N`` is a multiple of 16, ``tid < 128``) lives on the
symbol itself, so it travels with every expression built from it, survives pickling and
needs no registry. Two symbols with the same name and different facts are different
symbols (the fact is part of the hashable content).
"""

from __future__ import annotations

import threading
from typing import Any

import sympy

from tylo.layouts._fact_data import Divisible, _text, check_nonempty  # noqa: F401 - re-exported
from tylo.layouts.errors import AssumptionError

_LOCK = threading.Lock()
_DIM_CACHE: dict[tuple[str, int], Dim] = {}
_INDEX_CACHE: dict[tuple[str, Any], IndexSymbol] = {}


class Dim(sympy.Symbol):  # type: ignore[misc]  # sympy ships no type information
    """A positive integer symbol (a runtime extent or stride) with a divisibility fact.

    ``Dim("N", multiple_of=16)`` stands for a value in {16, 32, 48, ...}. Instances are
    cached, so ``Dim("N") is Dim("N")``; ``Dim("N", multiple_of=16) != Dim("N")``.

    >>> n = Dim("N", multiple_of=16)
    >>> n, n.multiple_of, n.is_positive, n.is_integer
    (N, 16, True, True)
    """

    __slots__ = ("multiple_of",)
    multiple_of: int

    def __new__(cls, name: str, multiple_of: int = 1) -> Dim:
        key = (name, multiple_of)
        obj = _DIM_CACHE.get(key)
        if obj is not None:
            return obj
        if not isinstance(name, str) or not name.isidentifier():
            raise AssumptionError(
                f"dim: name {name!r} is not an identifier; use a name such as 'M' or 'lda'"
            )
        if type(multiple_of) is not int or multiple_of < 1:
            raise AssumptionError(
                f"dim({name!r}, multiple_of={multiple_of!r}): multiple_of must be an int >= 1"
            )
        with _LOCK:
            obj = _DIM_CACHE.get(key)
            if obj is None:
                obj = sympy.Symbol.__xnew__(cls, name, integer=True, positive=True)
                obj.multiple_of = multiple_of
                _DIM_CACHE[key] = obj
        return obj

    def __getnewargs_ex__(self) -> tuple[tuple[str], dict[str, int]]:
        return ((self.name,), {"multiple_of": self.multiple_of})

    def _hashable_content(self) -> tuple[object, ...]:
        return (*super()._hashable_content(), ("multiple_of", self.multiple_of))

    def __repr__(self) -> str:
        return str(self.name)


class IndexSymbol(sympy.Symbol):  # type: ignore[misc]  # as Dim
    """A non-negative integer symbol (thread, block or loop index) with an optional
    exclusive upper bound ``upper`` (an int or an expression over other symbols).

    >>> t = IndexSymbol("tid", upper=128)
    >>> t, t.upper, t.is_nonnegative
    (tid, 128, True)
    """

    __slots__ = ("upper",)
    upper: Any

    def __new__(cls, name: str, upper: Any = None) -> IndexSymbol:
        if isinstance(upper, sympy.Integer):
            upper = int(upper)
        key = (name, upper)
        obj = _INDEX_CACHE.get(key)
        if obj is not None:
            return obj
        if not isinstance(name, str) or not name.isidentifier():
            raise AssumptionError(
                f"index_symbol: name {name!r} is not an identifier; use a name such as 'tid'"
            )
        if upper is not None:
            if type(upper) is int:
                if upper < 1:
                    raise AssumptionError(
                        f"index_symbol({name!r}, upper={upper}): the exclusive upper bound "
                        "must be >= 1 (an index needs at least the value 0)"
                    )
            elif not isinstance(upper, sympy.Expr):
                raise AssumptionError(
                    f"index_symbol({name!r}, upper={upper!r}): upper must be an int or a "
                    "sympy expression over dims"
                )
            else:
                check_nonempty(name, upper)
        with _LOCK:
            obj = _INDEX_CACHE.get(key)
            if obj is None:
                obj = sympy.Symbol.__xnew__(cls, name, integer=True, nonnegative=True)
                obj.upper = upper
                _INDEX_CACHE[key] = obj
        return obj

    def __getnewargs_ex__(self) -> tuple[tuple[str], dict[str, Any]]:
        return ((self.name,), {"upper": self.upper})

    def _hashable_content(self) -> tuple[object, ...]:
        return (*super()._hashable_content(), ("upper", self.upper))

    def __repr__(self) -> str:
        return str(self.name)
