"""A bounded table of values made on demand: what launch paths keep of their preparation
(argument checks, configuration, tensor maps) per argument combination, so that a repeated
call costs a dictionary lookup instead of the preparation.

This module imports nothing but :mod:`tylo.errors`, so every layer may use it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any

from tylo.errors import TyloError

__all__ = ["Remembered", "RememberedError"]


class RememberedError(TyloError, ValueError):
    """A :class:`Remembered` table asked for with a limit that is not a positive int."""


class Remembered:
    """At most ``limit`` values, each made once per key by :meth:`get`.

    Defining property: ``get(key, make)`` returns the value kept for ``key`` if there is
    one (``make`` not called), else calls ``make()`` and returns its value, kept for
    ``key``; when ``make`` raises nothing is kept and the error propagates. Once ``limit``
    values are kept, keeping another drops the one made earliest (first in, first out:
    a hit does not reorder, so it costs one dictionary lookup). Keys are compared as
    dictionary keys: the caller makes them say everything the value depends on.
    """

    __slots__ = ("_lock", "limit", "table")

    def __init__(self, limit: int = 64) -> None:
        if type(limit) is not int or limit < 1:
            raise RememberedError(f"Remembered: limit must be a positive int, got {limit!r}")
        self.limit = limit
        self.table: dict[Hashable, Any] = {}
        self._lock = threading.Lock()

    def get(self, key: Hashable, make: Callable[[], Any]) -> Any:
        """The value kept for ``key``, else ``make()``'s, kept (see the class). Safe from
        several threads: a hit is one dictionary lookup; the table changes only under a
        lock; two threads missing one key at once may both call ``make`` (the first value
        made is kept and returned to both)."""
        try:
            return self.table[key]
        except KeyError:
            pass
        value = make()
        with self._lock:
            table = self.table
            if key in table:  # another thread made it meanwhile
                return table[key]
            if len(table) >= self.limit:
                del table[next(iter(table))]
            table[key] = value
        return value

    def clear(self) -> None:
        """Drop every kept value."""
        with self._lock:
            self.table.clear()

    def __len__(self) -> int:
        return len(self.table)

    def __contains__(self, key: Hashable) -> bool:
        return key in self.table

    def __repr__(self) -> str:
        return f"Remembered({len(self.table)} of {self.limit})"
