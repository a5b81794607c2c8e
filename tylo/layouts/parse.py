"""Parsing CuTe notation: ``"((2,2),8):((1,16),2)"``, ``"S<3,3,3> o (8,64):(64,1)"``.

Grammar (whitespace ignored)::

    text     := [swizzle " o " [offset " o "]] layout | swizzle
    layout   := item [":" item]           (a bare shape means compact column-major)
    item     := "(" item ("," item)* ")" | expr
    expr     := integer arithmetic over ints and names: + - * / ** and parentheses,
                floor(..), ceiling(..), Mod(.., ..)
    swizzle  := "S<" int "," int "," int ">"

A parenthesized single item is a 1-tuple unless an operator follows it (then it is a
parenthesized expression): ``"(4):(1)"`` is rank 1 with a tuple shape, ``"(N+1)*2"`` is
an expression.
"""

from __future__ import annotations

import re
from typing import Any

from tylo.layouts._lazy import sympy
from tylo.layouts._notation import (  # noqa: F401 - the limits are public here too
    _SWIZZLE,
    MAX_INT_BITS,
    MAX_NESTING,
    MAX_SYMBOLIC_EXPONENT,
    _Parser,
    _symbol_table,
    read_layout,
)
from tylo.layouts.errors import NotationError
from tylo.layouts.layout import Layout
from tylo.layouts.swizzle import ComposedLayout, Swizzle
from tylo.layouts.symbolic import dim, to_value  # noqa: F401 - dim: the doctests use it

__all__ = ["parse", "parse_layout"]


def _layout(text: str, table: dict[str, sympy.Symbol]) -> Layout:
    return Layout._from_text(text, table)


def parse(text: str, symbols: Any = None) -> Any:
    """Parse CuTe notation into a Layout, a Swizzle or a ComposedLayout.

    >>> parse("S<3,3,3> o (8,64):(64,1)")
    ComposedLayout(Swizzle(3, 3, 3), 0, Layout(shape=(8, 64), stride=(64, 1)))
    >>> str(parse("(16,N/8):(8,128)", {"N": dim("N", multiple_of=8)}))
    '(16,N/8):(8,128)'
    """
    if not isinstance(text, str):
        raise NotationError(f"Layout.parse: expected text, got {type(text).__name__}")
    table = _symbol_table(symbols)
    parts = re.split(r"\s+o\s+", text.strip())
    m = _SWIZZLE.match(parts[0])
    if len(parts) == 1:
        if m:
            return _swizzle(m)
        return _layout(parts[0], table)
    if len(parts) > 3:
        raise NotationError(
            f"Layout.parse: {text!r} composes more than outer o offset o inner; "
            "write at most 'S<b,m,s> o offset o layout'"
        )
    outer = _swizzle(m) if m else _layout(parts[0], table)
    offset: Any = 0
    if len(parts) == 3:
        p = _Parser(parts[1], table)
        offset = to_value(p.expr())
        p.done()
    return ComposedLayout(outer, offset, _layout(parts[-1], table))


def _swizzle(m: Any) -> Swizzle:
    groups = m.groups()
    if any(len(g) > 20 for g in groups):
        raise NotationError(
            f"Layout.parse: S<{','.join(g[:10] for g in groups)}...>: a swizzle parameter "
            "has more than 20 digits; swizzles act on 64-bit offsets (bits + base + |shift| "
            "<= 64)"
        )
    return Swizzle(*(int(g) for g in groups))


def parse_layout(text: str, symbols: Any = None) -> Layout:
    """Parse CuTe notation that must denote a plain Layout."""
    x = parse(text, symbols)
    if not isinstance(x, Layout):
        raise NotationError(
            f"Layout.parse({text!r}): this is a {type(x).__name__}, not a Layout; use "
            "tylo.layouts.parse.parse for swizzles and composed layouts"
        )
    return x
