"""The nesting limit of shapes, strides and tilers (no other tylo imports, so every module
may use it without an import cycle)."""

from __future__ import annotations

from typing import Any

from tylo.layouts.errors import ShapeError

__all__ = ["MAX_DEPTH", "check_depth"]


#: Deepest nesting of a shape or stride that tylo accepts (CuTe layouts rarely nest more
#: than 4 deep); deeper input raises ShapeError instead of exhausting Python's stack.
MAX_DEPTH = 64


def check_depth(t: Any, what: str, op: str) -> None:
    """Raise ShapeError when the (nested tuple or list) ``t`` nests deeper than
    ``MAX_DEPTH``; iterative, so any input is safe to check."""
    stack = [(t, 0)]
    while stack:
        e, d = stack.pop()
        if isinstance(e, (tuple, list)):
            if d >= MAX_DEPTH:
                raise ShapeError(
                    f"{op}: {what} nests deeper than {MAX_DEPTH} levels (tylo's limit, "
                    "tylo.layouts.layout.MAX_DEPTH); flatten it"
                )
            stack.extend((c, d + 1) for c in e)
