"""Open conditions of a proof (obligations) and exact evaluation of index expressions.

An :class:`Obligation` is a conjunction of clauses, each a disjunction of :class:`Atom`
comparisons (``lda >= M``) or divisibility facts (``8 | lda``). A rule that cannot settle
its conditions returns them as an obligation: it is *sufficient* for the property (if it
holds, the property holds), it names the hint a user needs ("needs lda >= M"), and a guard
evaluates it first at launch before falling back to an exact check of the instance.

:func:`compile_expr` turns an extent or stride (an int or a sympy expression) into a
closure that evaluates it exactly (integers and fractions, ``floor``/``ceiling``/``Mod``
included) from a ``{symbol: int}`` map, a few microseconds per call: no sympy in the loop.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from tylo.layouts._lazy import is_sympy, sympy
from tylo.layouts._scope import Fact
from tylo.layouts.symbolic import decide_cmp, divides, to_value

__all__ = ["Atom", "Obligation", "compile_expr", "text"]

Value = Any  # int | sympy.Expr
Env = Mapping[Any, int]


def text(x: Value) -> str:
    """CuTe-style text of a value: ints as digits, expressions in sympy's plain syntax.

    >>> from tylo.layouts.symbolic import dim
    >>> text(4), text(dim("lda") * (dim("K") - 1) + dim("M"))
    ('4', 'M + lda*(K - 1)')
    """
    if is_sympy(x):
        return str(sympy.sstr(x))
    return str(x)


def _clean(x: Any) -> Any:
    if type(x) is Fraction and x.denominator == 1:
        return x.numerator
    return x


@functools.lru_cache(maxsize=8192)
def compile_expr(x: Value) -> Callable[[Env], Any]:
    """A closure evaluating ``x`` exactly at a ``{symbol: int}`` map (int or Fraction).

    >>> from tylo.layouts.symbolic import dim
    >>> N, M = dim("N"), dim("M")
    >>> f = compile_expr(sympy.ceiling(N / 64) * 64 + sympy.Mod(M, 3))
    >>> f({N: 100, M: 7})
    129
    """
    if type(x) is int:
        return lambda env: x
    if not is_sympy(x):
        v = to_value(x)
        return lambda env: v
    if x.is_Integer:
        c = int(x)
        return lambda env: c
    if x.is_Rational:
        r = Fraction(int(x.p), int(x.q))
        return lambda env: r
    if x.is_Symbol:
        return lambda env: env[x]
    if x.is_Add:
        parts = [compile_expr(a) for a in x.args]
        return lambda env: _clean(sum(p(env) for p in parts))
    if x.is_Mul:
        parts = [compile_expr(a) for a in x.args]

        def mul(env: Env) -> Any:
            r: Any = 1
            for p in parts:
                r = r * p(env)
            return _clean(r)

        return mul
    if x.is_Pow and x.exp.is_Integer:
        base, e = compile_expr(x.base), int(x.exp)
        if e >= 0:
            return lambda env: base(env) ** e
        return lambda env: _clean(Fraction(1) / Fraction(base(env)) ** (-e))
    if x.func is sympy.floor:
        arg = compile_expr(x.args[0])
        return lambda env: math.floor(arg(env))
    if x.func is sympy.ceiling:
        arg = compile_expr(x.args[0])
        return lambda env: math.ceil(arg(env))
    if isinstance(x, sympy.Mod):
        a, b = compile_expr(x.args[0]), compile_expr(x.args[1])
        return lambda env: _clean(Fraction(a(env)) % Fraction(b(env)))
    if x.func in (sympy.Max, sympy.Min):
        parts = [compile_expr(a) for a in x.args]
        pick = max if x.func is sympy.Max else min
        return lambda env: pick(p(env) for p in parts)
    free = sorted(x.free_symbols, key=lambda s: s.name)

    def generic(env: Env) -> Any:
        v = x.xreplace({s: sympy.Integer(env[s]) for s in free})
        if v.is_Rational:
            return _clean(Fraction(int(v.p), int(v.q)))
        raise TypeError(f"cannot evaluate {text(x)} at {dict(env)}")

    return generic


_NEGATE = {">=": "<", "<=": ">", ">": "<=", "<": ">=", "==": "!=", "!=": "=="}


@dataclass(frozen=True)
class Atom:
    """One condition: ``lhs op rhs`` for a comparison op, or ``lhs | rhs`` (``lhs`` divides
    ``rhs``) for op ``"|"``.

    >>> from tylo.layouts.symbolic import dim
    >>> a = Atom(">=", dim("lda"), dim("M"))
    >>> str(a), a.holds({dim("lda"): 3, dim("M"): 4}), a.decide(())
    ('lda >= M', False, None)
    """

    op: str
    lhs: Value
    rhs: Value

    def __str__(self) -> str:
        return f"{text(self.lhs)} {self.op} {text(self.rhs)}"

    def decide(self, assumptions: Iterable[Fact] = ()) -> bool | None:
        """Decide the atom exactly under the assumptions in force plus ``assumptions``."""
        if self.op == "|":
            return divides(self.lhs, self.rhs, assumptions=tuple(assumptions))
        return decide_cmp(self.lhs, self.op, self.rhs, assumptions=tuple(assumptions))

    def holds(self, env: Env) -> bool:
        """Evaluate the atom at concrete symbol values (``{symbol: int}``)."""
        a, b = compile_expr(self.lhs)(env), compile_expr(self.rhs)(env)
        if self.op == "|":
            return (b == 0) if a == 0 else (Fraction(b) / Fraction(a)).denominator == 1
        return bool(
            {
                ">=": a >= b,
                "<=": a <= b,
                ">": a > b,
                "<": a < b,
                "==": a == b,
                "!=": a != b,
            }[self.op]
        )

    def as_sympy(self) -> Any:
        """The atom as a sympy boolean (``Eq(Mod(rhs, lhs), 0)`` for divisibility)."""
        if self.op == "|":
            return sympy.Eq(sympy.Mod(self.rhs, self.lhs), 0)
        return sympy.core.relational.Relational(
            sympy.sympify(self.lhs), sympy.sympify(self.rhs), self.op
        )

    def hint(self) -> str:
        """The atom phrased as the assumption a user would add."""
        if self.op == "|":
            return (
                f"{text(self.lhs)} | {text(self.rhs)} "
                f"(assume divisible({text(self.rhs)}, {text(self.lhs)}))"
            )
        return str(self)


@dataclass(frozen=True)
class Obligation:
    """A conjunction of clauses (each a disjunction of atoms) that suffices for a property.

    ``residual`` is set when no rule applied: then the obligation can only be settled by
    checking the property on the concrete instance (``holds`` returns False for it, so a
    guard falls back to its exact check).

    >>> from tylo.layouts.symbolic import dim
    >>> M, lda, K = dim("M"), dim("lda"), dim("K")
    >>> ob = Obligation(((Atom(">=", lda, M),), (Atom("|", 8, lda), Atom("<=", K, 1))))
    >>> str(ob)
    'lda >= M and (8 | lda or K <= 1)'
    >>> ob.holds({M: 4, lda: 8, K: 3}), ob.holds({M: 4, lda: 4, K: 3})
    (True, False)
    """

    clauses: tuple[tuple[Atom, ...], ...] = ()
    residual: str | None = None

    def __str__(self) -> str:
        parts = []
        for c in self.clauses:
            inner = " or ".join(str(a) for a in c)
            parts.append(f"({inner})" if len(c) > 1 and len(self.clauses) > 1 else inner)
        if self.residual:
            parts.append(self.residual)
        return " and ".join(parts) if parts else "True"

    def holds(self, env: Env) -> bool:
        """True when every clause has a true atom at these values (False if residual)."""
        if self.residual:
            return False
        return all(any(a.holds(env) for a in c) for c in self.clauses)

    def atoms(self) -> tuple[Atom, ...]:
        """Every atom, clause by clause."""
        return tuple(a for c in self.clauses for a in c)

    def as_sympy(self) -> Any:
        """The conjunction as a sympy boolean (None when a residual check is needed)."""
        if self.residual:
            return None
        return sympy.And(*(sympy.Or(*(a.as_sympy() for a in c)) for c in self.clauses))
