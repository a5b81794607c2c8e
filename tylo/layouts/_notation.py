"""The tokenizer and grammar of CuTe notation (private): text to nested tuples of ints and
sympy expressions, with the parser's size limits. Below :mod:`tylo.layouts.layout` (whose
``Layout.parse`` reads plain layouts with it) and :mod:`tylo.layouts.parse` (which also builds
swizzles and composed layouts); see parse.py for the grammar."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from tylo.layouts._lazy import is_sympy, sympy
from tylo.layouts.errors import NotationError
from tylo.layouts.symbolic import dim, to_value

__all__ = ["MAX_INT_BITS", "MAX_NESTING", "MAX_SYMBOLIC_EXPONENT", "read_layout", "symbol_table"]

_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_][A-Za-z_0-9]*)|(\*\*|[(),:+\-*/]))")
_SWIZZLE = re.compile(r"^\s*S<\s*(-?\d+)\s*,\s*(-?\d+)\s*,\s*(-?\d+)\s*>\s*$")
_FUNCS = ("floor", "ceiling", "Mod")  # sympy functions the notation may call
_ARITY = {"floor": 1, "ceiling": 1, "Mod": 2}
MAX_NESTING = 64
"""Deepest nesting of parentheses, function calls and unary minus the parser accepts."""
MAX_INT_BITS = 1024
"""Largest magnitude (in bits) of an integer literal or of a static power ``a**b``."""
MAX_SYMBOLIC_EXPONENT = 64
"""Largest exponent of a symbolic power (``N**e``): larger ones blow up every decision."""


class _Parser:
    def __init__(self, text: str, symbols: dict[str, sympy.Symbol]) -> None:
        self.text = text
        self.symbols = symbols
        self.tokens: list[tuple[str, str, int]] = []
        self.depth = 0
        pos = 0
        end = len(text.rstrip())  # linear: never re-slice the remaining text
        while pos < end:
            m = _TOKEN.match(text, pos)
            if m is None or m.end() == pos:
                col = pos + len(text[pos:]) - len(text[pos:].lstrip())
                raise self.error(f"unexpected character {text[col]!r}", col)
            kind = "int" if m.group(1) else "name" if m.group(2) else "op"
            start = m.start(m.lastindex or 0)
            self.tokens.append((kind, m.group(m.lastindex or 0), start))
            pos = m.end()
        self.i = 0

    def error(self, what: str, col: int | None = None) -> NotationError:
        if col is None:
            col = self.tokens[self.i][2] if self.i < len(self.tokens) else len(self.text)
        shown = self.text if len(self.text) <= 120 else self.text[:100] + "..."
        return NotationError(
            f"Layout.parse: {what} at column {col} of {shown!r}; expected CuTe "
            "notation such as '((2,2),8):((1,16),2)'"
        )

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise self.error(f"nesting deeper than {MAX_NESTING} levels (MAX_NESTING)")

    def leave(self) -> None:
        self.depth -= 1

    def peek(self) -> str | None:
        return self.tokens[self.i][1] if self.i < len(self.tokens) else None

    def take(self, expected: str | None = None) -> tuple[str, str, int]:
        if self.i >= len(self.tokens):
            raise self.error(
                "unexpected end of text" + (f" (wanted {expected!r})" if expected else "")
            )
        tok = self.tokens[self.i]
        if expected is not None and tok[1] != expected:
            raise self.error(f"found {tok[1]!r} where {expected!r} belongs")
        self.i += 1
        return tok

    def item(self) -> Any:
        if self.peek() == "(":
            self.take("(")
            self.enter()
            items = [self.item()]
            while self.peek() == ",":
                self.take(",")
                items.append(self.item())
            self.take(")")
            self.leave()
            if len(items) == 1 and type(items[0]) is not tuple and self.peek() in _BINOPS:
                return self.expr(items[0])
            return tuple(items)
        return self.expr()

    def expr(self, first: Any = None) -> Any:
        left = self.term(first)
        while self.peek() in ("+", "-"):
            op = self.take()[1]
            right = self.term()
            left = left + right if op == "+" else left - right
        return left

    def term(self, first: Any = None) -> Any:
        left = self.power(first)
        while self.peek() in ("*", "/"):
            tok = self.take()
            right = self.power()
            if tok[1] == "/" and _is_zero(right):
                raise self.error("division by zero", tok[2])
            left = self.checked(
                lambda: (
                    left * right
                    if tok[1] == "*"
                    else sympy.Integer(left) / right
                    if type(left) is int
                    else left / right
                ),
                tok[2],
            )
        return left

    def checked(self, make: Any, col: int) -> Any:
        """Build a value, turning sympy's failures and undefined results into errors."""
        try:
            v = make()
        except (ArithmeticError, TypeError, ValueError) as e:
            raise self.error(f"invalid arithmetic ({type(e).__name__}: {e})", col) from None
        if is_sympy(v) and v.has(sympy.zoo, sympy.nan, sympy.oo, -sympy.oo):
            raise self.error("the expression is undefined (division by zero)", col)
        if type(v) is int and v.bit_length() > MAX_INT_BITS:
            raise self.error(f"an integer larger than 2**{MAX_INT_BITS} (MAX_INT_BITS)", col)
        return v

    def power(self, first: Any = None) -> Any:
        base = first if first is not None else self.unary()
        if self.peek() == "**":
            col = self.take()[2]
            exp = self.unary()
            return self.checked(lambda: _power(base, exp, self.error, col), col)
        return base

    def unary(self) -> Any:
        if self.peek() == "-":
            self.take()
            self.enter()
            v = -self.unary()
            self.leave()
            return v
        return self.atom()

    def atom(self) -> Any:
        kind, val, col = self.take()
        if kind == "int":
            digits = val.lstrip("0")
            if len(digits) > MAX_INT_BITS // 3 or int(val).bit_length() > MAX_INT_BITS:
                raise self.error(f"an integer larger than 2**{MAX_INT_BITS} (MAX_INT_BITS)", col)
            return int(val)
        if kind == "name":
            if val in _FUNCS and self.peek() == "(":
                self.take("(")
                self.enter()
                args = [self.expr()]
                while self.peek() == ",":
                    self.take(",")
                    args.append(self.expr())
                self.take(")")
                self.leave()
                if len(args) != _ARITY[val]:
                    raise self.error(
                        f"{val} takes {_ARITY[val]} argument{'s' if _ARITY[val] > 1 else ''}, "
                        f"got {len(args)}",
                        col,
                    )
                if val == "Mod" and _is_zero(args[1]):
                    raise self.error("Mod(.., 0): modulus zero", col)
                return self.checked(lambda: getattr(sympy, val)(*args), col)
            sym = self.symbols.get(val)
            if sym is None:
                sym = self.symbols[val] = dim(val)
            return sym
        if val == "(":
            self.enter()
            e = self.expr()
            self.take(")")
            self.leave()
            return e
        raise self.error(f"found {val!r} where a number, a name or '(' belongs", col)

    def done(self) -> None:
        if self.i != len(self.tokens):
            raise self.error(f"unexpected {self.peek()!r} after the end")


_BINOPS = ("+", "-", "*", "/", "**")


def _is_zero(x: Any) -> bool:
    return (type(x) is int and x == 0) or (is_sympy(x) and x.is_zero is True)


def _power(base: Any, exp: Any, error: Any, col: int) -> Any:
    """``base ** exp`` within the parser's size limits (no huge or undefined powers)."""
    if not (type(exp) is int or (is_sympy(exp) and exp.is_Integer)):
        raise error("the exponent of ** must be an integer", col)
    e = int(exp)
    if type(base) is int or (is_sympy(base) and base.is_Integer):
        b = int(base)
        if b == 0 and e < 0:
            raise error("0 ** negative exponent (division by zero)", col)
        if abs(b) > 1 and abs(e) * (abs(b).bit_length() - 1) > MAX_INT_BITS:
            raise error(f"a power larger than 2**{MAX_INT_BITS} (MAX_INT_BITS)", col)
        return b**e if e >= 0 else sympy.Rational(1, b ** (-e))
    if abs(e) > MAX_SYMBOLIC_EXPONENT:
        raise error(
            f"a symbolic power with exponent {e}, over {MAX_SYMBOLIC_EXPONENT} "
            "(MAX_SYMBOLIC_EXPONENT)",
            col,
        )
    return base**e


def _symbol_table(symbols: Any) -> dict[str, sympy.Symbol]:
    if symbols is None:
        return {}
    if isinstance(symbols, Mapping):
        return dict(symbols)
    if isinstance(symbols, Iterable):
        return {s.name: s for s in symbols}
    raise NotationError(f"Layout.parse: symbols= must be a mapping or an iterable, not {symbols!r}")


def _values(t: Any) -> Any:
    return tuple(_values(e) for e in t) if type(t) is tuple else to_value(t)


def symbol_table(symbols: Any) -> dict[str, sympy.Symbol]:
    return _symbol_table(symbols)


def read_layout(text: str, table: dict[str, sympy.Symbol]) -> tuple[Any, Any]:
    """``(shape, stride)`` of a plain layout's text (stride None: compact column-major)."""
    p = _Parser(text, table)
    if not p.tokens:
        raise p.error("empty text", 0)
    shape = p.item()
    stride = None
    if p.peek() == ":":
        p.take(":")
        stride = p.item()
    p.done()
    return _values(shape), None if stride is None else _values(stride)
