"""``sympy.Min`` / ``sympy.Max`` of index expressions, built as sympy builds them, faster.

sympy evaluates ``Min(a, b)`` by asking whether ``a - b`` has a known sign: relational
evaluation through the assumption system, then ``factor_terms`` and again. On the index
expressions of a bounded tile copy (``Min(m0 + r, m - 1)``, ``Min(Max(k - c, 0), 8)``) that
is several milliseconds per call, and a bounded GEMM's trace builds ~150 of them.

Two shortcuts, both exact (the result is the expression sympy would return):

- a memo on the arguments: the result depends only on their structure (a symbol's facts
  are part of its identity), never on the facts in force;
- a *sign witness*: when ``a - b`` is positive for one assignment of its symbols and
  negative for another (each assignment satisfying the symbols' sympy assumptions), sympy,
  which is sound, cannot settle ``a <= b`` either way, so ``Min(a, b)`` stays as it is:
  the unevaluated node, with the same ordered arguments. Only argument shapes whose
  evaluation provably changes nothing else take this path (see :func:`_shape_is_kept`);
  everything else is left to sympy.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import Any

from tylo.kernel.freesyms import free_symbols
from tylo.layouts._lazy import sympy

__all__ = ["maximum", "minimum", "relation"]

_MAX_SYMBOLS = 12
# candidate values for a symbol, small to large; each is checked against its assumptions
_SMALL = (0, 1, 2, -1, -2)
_LARGE = (1_000_003, 1_000_000, -1_000_003, -1_000_000)


def minimum(*args: Any) -> Any:
    """``sympy.Min(*args)``.

    >>> m, r = sympy.symbols("m r", integer=True, positive=True)
    >>> minimum(r, m - 1) == sympy.Min(r, m - 1), minimum(r, r + 1)
    (True, r)
    """
    return _extreme(sympy.Min, tuple(map(sympy.sympify, args)))


def maximum(*args: Any) -> Any:
    """``sympy.Max(*args)``."""
    return _extreme(sympy.Max, tuple(map(sympy.sympify, args)))


@functools.lru_cache(maxsize=4096)
def _extreme(cls: Any, args: tuple[Any, ...]) -> Any:
    if len(args) == 2 and _shape_is_kept(cls, *args) and _sign_changes(*args):
        return cls(*args, evaluate=False)
    return cls(*args)


def relation(cls: Any, a: Any, b: Any) -> Any:
    """``cls(a, b)`` for ``cls`` one of ``sympy.Lt``, ``Le``, ``Gt``, ``Ge``: sympy
    evaluates an inequality to true or false when its assumptions settle the sign of
    ``a - b``, else keeps ``cls(a, b, evaluate=False)``; a sign witness shows the latter.

    >>> m, r = sympy.symbols("m r", integer=True, positive=True)
    >>> relation(sympy.Lt, r, m) == sympy.Lt(r, m), relation(sympy.Lt, r, r + 1)
    (True, True)
    """
    if cls not in (sympy.Lt, sympy.Le, sympy.Gt, sympy.Ge):
        raise TypeError(f"relation: {cls!r} is not an inequality class")
    return _relation(cls, sympy.sympify(a), sympy.sympify(b))


@functools.lru_cache(maxsize=4096)
def _relation(cls: Any, a: Any, b: Any) -> Any:
    if (
        isinstance(a, sympy.Expr)
        and isinstance(b, sympy.Expr)
        and not (a.is_number and b.is_number)
        and _sign_changes(a, b)
    ):
        return cls(a, b, evaluate=False)
    return cls(a, b)


def _plain(x: Any) -> bool:
    """An expression that sympy's Min/Max argument filters pass through untouched: not a
    number, not itself a Min or Max (those inside a sum or product are not looked at)."""
    return (
        isinstance(x, sympy.Expr) and not x.is_number and not isinstance(x, (sympy.Min, sympy.Max))
    )


def _shape_is_kept(cls: Any, a: Any, b: Any) -> bool:
    """Whether ``cls(a, b)``'s argument filters (flattening, identities, numeric and
    symbolic redundancy, factoring; sympy's ``MinMaxBase.__new__``) keep both arguments as
    they are, so that the outcome rests on the comparison of ``a`` and ``b`` alone.

    Kept: two plain expressions; an integer and a plain expression; an integer ``c`` and
    ``Max(d, x)`` (for Min; ``Min(d, x)`` for Max) with an integer ``d`` on the near side of
    ``c`` and ``x`` plain (``Min(8, Max(0, k - c))``)."""
    if _plain(a) and _plain(b):
        return True
    if b.is_Integer:
        a, b = b, a
    if not a.is_Integer:
        return False
    if _plain(b):
        return True
    other = sympy.Max if cls is sympy.Min else sympy.Min
    if not isinstance(b, other) or len(b.args) != 2:
        return False
    d, x = b.args
    if not d.is_Integer or not _plain(x):
        return False
    return d < a if cls is sympy.Min else d > a


def _sign_changes(a: Any, b: Any) -> bool:
    """Whether ``a - b`` is positive at one assignment of the symbols and negative at
    another, each value allowed by its symbol's assumptions (a sufficient test; False
    means "not shown")."""
    symbols = sorted(free_symbols(a) | free_symbols(b), key=sympy.default_sort_key)
    if not symbols or len(symbols) > _MAX_SYMBOLS:
        return False
    small, large = [], []
    for s in symbols:
        allowed = _values(s)
        lo = [v for v in allowed if v in _SMALL]
        hi = [v for v in allowed if v in _LARGE]
        if not lo or not hi:
            return False
        small.append(lo[0])
        large.append(hi[0])
    trials = [small, large]
    for k in range(len(symbols)):  # one symbol large, the others small; and the reverse
        trials.append(small[:k] + [large[k]] + small[k + 1 :])
        trials.append(large[:k] + [small[k]] + large[k + 1 :])
    seen = set()
    for values in trials:
        env, memo = dict(zip(symbols, values)), {}
        va, vb = _value(a, env, memo), _value(b, env, memo)
        if va is None or vb is None:
            return False
        v = va - vb
        seen.add((v > 0) - (v < 0))
        if 1 in seen and -1 in seen:
            return True
    return False


def _value(e: Any, env: dict, memo: dict) -> Fraction | int | None:
    """The exact value of ``e`` with its symbols set to the ints in ``env``: sympy's value
    (``e.xreplace(...)`` evaluates to it), computed in Python; None where ``e`` has a node
    this does not know, or is undefined (a zero divisor)."""
    got = memo.get(e, memo)
    if got is not memo:
        return got  # type: ignore[return-value]
    if e.is_Symbol:
        out = env.get(e)
    elif e.is_Rational:
        out = int(e) if e.is_Integer else Fraction(int(e.p), int(e.q))
    else:
        args = [_value(a, env, memo) for a in e.args]
        if None in args:
            out = None
        elif e.is_Add:
            out = sum(args)
        elif e.is_Mul:
            out = 1
            for a in args:
                out *= a
        elif e.is_Pow and type(args[1]) is int and (args[1] >= 0 or args[0] != 0):
            out = Fraction(args[0]) ** args[1]
        elif isinstance(e, (sympy.floor, sympy.ceiling)):
            out = math.floor(args[0]) if isinstance(e, sympy.floor) else math.ceil(args[0])
        elif isinstance(e, sympy.Mod) and args[1] != 0:
            out = args[0] % args[1]
        elif isinstance(e, sympy.Min):
            out = min(args)
        elif isinstance(e, sympy.Max):
            out = max(args)
        else:
            out = None
    if isinstance(out, Fraction) and out.denominator == 1:
        out = int(out)
    memo[e] = out
    return out


@functools.lru_cache(maxsize=1024)
def _values(symbol: Any) -> tuple[int, ...]:
    """The candidate values that satisfy every assumption of ``symbol``."""
    facts = symbol.assumptions0
    if facts.get("integer") is not True:
        return ()
    ok = []
    for v in _SMALL + _LARGE:
        n = sympy.Integer(v)
        if all(getattr(n, f"is_{key}") == want for key, want in facts.items()):
            ok.append(v)
    return tuple(ok)
