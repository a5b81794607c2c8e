"""The size budget: the most elements any layout operation enumerates (private).

Static proofs that no rule settles, the cosize of a swizzled or composed layout, and the
exact checks a guard runs all enumerate offsets. Each checks the count against
:data:`ENUMERATION_LIMIT` *before* allocating anything and refuses with
:class:`~tylo.layouts.errors.SizeBudgetError` naming the limit, so a hostile size
(``2**40`` elements) costs microseconds, never a hang or gigabytes of memory.

Offsets are exact: arrays use int32 or int64 only while every offset provably fits
(:data:`INT64_SAFE`), Python integers beyond.
"""

from __future__ import annotations

from tylo.layouts.errors import SizeBudgetError

__all__ = ["ENUMERATION_LIMIT", "INT64_SAFE", "SMALL_ENUMERATION", "check_budget"]

ENUMERATION_LIMIT = 1 << 22
"""The most elements (offsets) one operation enumerates: 4,194,304 (24 ms on Python 3.11,
2-core x86, 2026-12-07: ``tools/claims.py``)."""

INT64_SAFE = 1 << 62
"""Offsets (and sums of two of them) below this in magnitude are exact in int64."""

SMALL_ENUMERATION = 1 << 12
"""Up to this many elements, enumerating in Python (about 1 us an offset) is faster than
importing numpy (60-110 ms), so the cosize of a small swizzled tile and ``tylo prove equal``
of small static layouts answer without numpy."""


def check_budget(count: int, operation: str, fix: str) -> None:
    """Raise SizeBudgetError when ``count`` elements exceed :data:`ENUMERATION_LIMIT`.

    >>> check_budget(1 << 10, "cosize(S<3,3,3> o 1024:1)", "use a smaller layout")
    >>> check_budget(1 << 40, "cosize(S<3,3,3> o 1099511627776:1)", "use a smaller layout")
    Traceback (most recent call last):
    ...
    tylo.layouts.errors.SizeBudgetError: cosize(...): would enumerate 1099511627776 elements, ...
    """
    if count > ENUMERATION_LIMIT:
        raise SizeBudgetError(
            f"{operation}: would enumerate {count} elements, over the size budget of "
            f"{ENUMERATION_LIMIT} (ENUMERATION_LIMIT); {fix}",
            operation=operation,
            count=count,
            limit=ENUMERATION_LIMIT,
        )
