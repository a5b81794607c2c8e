"""Symbolic bounds of an access's offset over every thread, block and loop iteration.

An access's element offset is an integer expression over three kinds of symbols:

- *launch symbols*: the kernel's runtime integer parameters and the grid's extents
  (``grid_dim_x``...), known when the launch is made;
- *index symbols*: thread, block and loop indices, each in ``[0, upper)`` where ``upper``
  is an int or an expression over launch symbols (and outer indices);
- anything else: a value read from memory or carried through a loop, which no launch
  value determines.

:func:`offset_range` eliminates the index symbols and returns ``(lo, hi)``, expressions
over launch symbols alone with ``lo <= offset <= hi`` for every index value the facts
allow. Two sources give bounds and the tighter one is kept:

- *interval arithmetic* over the expression tree (sums, products of terms of known
  sign, ``floor`` by a positive constant, ``Mod``, ``Min``/``Max``): an index symbol
  contributes ``[0, upper - 1]``;
- *the path condition*: a relation in force such as ``i < n`` (from ``if i < n:``)
  bounds every offset ``i + c`` by ``n - 1 + c``, whatever ``i`` is built from.

:func:`exact_minimum` says when the interval's low end is attained by a thread that exists
in every launch (the expression is a sum of distinct index symbols with constant
coefficients), which is what makes a negative offset an error at compile time rather
than a launch check.

The functions return None where no bound follows (a value read from memory, a product of
terms of unknown sign); the caller reports the access as unproved with the reason
:func:`unbounded_reason` gives.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

from tylo.layouts._lazy import sympy
from tylo.layouts._symbols import Dim, IndexSymbol

__all__ = ["exact_minimum", "is_launch_symbol", "offset_range", "unbounded_reason"]

Expr = Any
Range = tuple[Expr, Expr] | None
Decide = Callable[[Any], bool | None]


def is_launch_symbol(s: sympy.Symbol, params: Iterable[sympy.Symbol]) -> bool:
    """Whether ``s`` is known at launch: a runtime integer parameter (``params``) or a
    grid extent (``grid_dim_*``)."""
    return s in params or (isinstance(s, Dim) and str(s).startswith("grid_dim_"))


def unbounded_reason(expr: Expr, params: Iterable[sympy.Symbol]) -> str:
    """Why :func:`offset_range` found no bound of ``expr``: the symbols that are neither
    launch values nor bounded indices, or the shape of the expression."""
    params = set(params)
    free = sorted(
        str(s)
        for s in sympy.sympify(expr).free_symbols
        if not is_launch_symbol(s, params)
        and not (isinstance(s, IndexSymbol) and s.upper is not None)
    )
    if free:
        return (
            f"the offset depends on {', '.join(free)}, a value no launch argument "
            "determines (read from memory or carried through a loop)"
        )
    return "the offset's bounds do not follow from interval arithmetic or the path condition"


def offset_range(
    expr: Expr,
    params: Iterable[sympy.Symbol],
    relations: Iterable[Any],
    decide: Decide,
    divides: Callable[[int, Any], bool | None] | None = None,
    facts_key: Any = None,
) -> tuple[Expr | None, Expr | None]:
    """``(lo, hi)`` over launch symbols with ``lo <= expr <= hi`` for all index values;
    ``None`` for an end that cannot be bounded. ``relations``: the path condition's
    relations in force; ``decide``: the fact engine's decision of a relation;
    ``divides(d, x)``: whether the facts make ``d`` divide ``x`` (sharpens ``A < B`` to
    ``A <= B - d`` when ``d`` divides both sides); ``facts_key``: the facts in force, as a
    hashable value, when the caller has it: the bounds of a relation's sides are then
    remembered for later accesses under the same facts (only under the same facts: a
    sign the facts settle in one branch is not settled outside it)."""
    params = frozenset(params)
    e = sympy.sympify(expr)
    iv = _interval(e, params, decide, 0)
    lo, hi = (None, None) if iv is None else iv
    memo = None if facts_key is None else _side_memo(params, facts_key)
    for rel_lo, rel_hi in _from_relations(e, params, relations, decide, divides, memo):
        if rel_hi is not None:
            hi = rel_hi if hi is None else _tighter(hi, rel_hi, decide, upper=True)
        if rel_lo is not None:
            lo = rel_lo if lo is None else _tighter(lo, rel_lo, decide, upper=False)
    # the offset is an integer: a fractional bound rounds inwards (floor / -floor(-x))
    if hi is not None and _fractional(hi):
        hi = sympy.floor(hi)
    if lo is not None and _fractional(lo):
        lo = -sympy.floor(-lo)
    return lo, hi


def _fractional(x: Expr) -> bool:
    return any(not r.is_Integer for r in sympy.sympify(x).atoms(sympy.Rational))


def exact_minimum(expr: Expr) -> bool:
    """Whether the smallest value of ``expr`` over its index symbols' boxes is attained by
    index values that every launch has: ``expr`` is a constant plus distinct index symbols
    with integer coefficients (each box ``[0, upper)`` is non-empty, so every corner
    exists) and no other symbol."""
    e = sympy.expand(sympy.sympify(expr))
    seen: set[sympy.Symbol] = set()
    for term in sympy.Add.make_args(e):
        if term.is_Integer:
            continue
        coeff, rest = term.as_coeff_Mul()
        if not (coeff.is_Integer and isinstance(rest, IndexSymbol) and rest.upper is not None):
            return False
        if rest in seen:
            return False
        seen.add(rest)
    return True


# ---------------------------------------------------------------------------- intervals

_MAX_DEPTH = 64


def _interval(
    e: Expr, params: frozenset[Any], decide: Decide, depth: int, ranges: Any = None
) -> Range:
    if depth > _MAX_DEPTH:
        return None
    if e.is_Integer:
        return e, e
    if e.is_Symbol:
        if ranges and e in ranges:
            return ranges[e]
        if is_launch_symbol(e, params):
            return e, e
        if isinstance(e, IndexSymbol) and e.upper is not None:
            up = _interval(sympy.sympify(e.upper), params, decide, depth + 1, ranges)
            return None if up is None else (sympy.Integer(0), up[1] - 1)
        return None
    if e.is_Add:
        lo, hi = sympy.Integer(0), sympy.Integer(0)
        for a in e.args:
            r = _interval(a, params, decide, depth + 1, ranges)
            if r is None:
                return None
            lo, hi = lo + r[0], hi + r[1]
        return lo, hi
    if e.is_Mul:
        return _product(e.args, params, decide, depth, ranges)
    if e.is_Pow and e.exp.is_Integer and int(e.exp) > 0:
        return _product([e.base] * int(e.exp), params, decide, depth, ranges)
    if isinstance(e, sympy.floor):
        return _floor(e.args[0], params, decide, depth, ranges)
    if isinstance(e, sympy.Mod):
        return _mod(e, params, decide, depth, ranges)
    if isinstance(e, (sympy.Min, sympy.Max)):
        parts = [_interval(a, params, decide, depth + 1, ranges) for a in e.args]
        if any(p is None for p in parts):
            return None
        f = sympy.Min if isinstance(e, sympy.Min) else sympy.Max
        lo_, hi_ = [p[0] for p in parts], [p[1] for p in parts]  # type: ignore[index]
        return f(*lo_, evaluate=False), f(*hi_, evaluate=False)
    return None


def _sign(x: Expr, decide: Decide) -> int | None:
    """1 if ``x >= 0`` is decided, -1 if ``x <= 0``, None otherwise."""
    if x.is_Integer:
        return 1 if x >= 0 else -1
    if decide(x >= 0) is True:
        return 1
    if decide(x <= 0) is True:
        return -1
    return None


def _product(
    args: Any, params: frozenset[Any], decide: Decide, depth: int, ranges: Any = None
) -> Range:
    """The interval of a product: constant factors scale; the other factors must be
    non-negative over their interval (indices and sizes are), so the corners bound it."""
    const = sympy.Integer(1)
    lo, hi = sympy.Integer(1), sympy.Integer(1)
    for a in args:
        if a.is_Integer:
            const *= a
            continue
        r = _interval(a, params, decide, depth + 1, ranges)
        if r is None:
            return None
        if _sign(r[0], decide) != 1:
            return None  # a factor that may be negative: no bound by corners
        lo, hi = lo * r[0], hi * r[1]
    if const >= 0:
        return const * lo, const * hi
    return const * hi, const * lo


def _floor(
    x: Expr, params: frozenset[Any], decide: Decide, depth: int, ranges: Any = None
) -> Range:
    num, den = sympy.fraction(sympy.together(x))
    if not (den.is_Integer and den > 0):
        return None
    r = _interval(sympy.expand(num), params, decide, depth + 1, ranges)
    if r is None:
        return None
    return sympy.floor(r[0] / den), sympy.floor(r[1] / den)


def _mod(e: Expr, params: frozenset[Any], decide: Decide, depth: int, ranges: Any = None) -> Range:
    a, m = e.args
    rm = _interval(m, params, decide, depth + 1, ranges)
    if rm is None or _sign(rm[0] - 1, decide) != 1:
        return None  # a modulus that may be zero or negative
    ra = _interval(a, params, decide, depth + 1, ranges)
    if ra is not None and _sign(ra[0], decide) == 1 and decide(ra[1] < rm[0]) is True:
        return ra  # a % m == a
    return sympy.Integer(0), rm[1] - 1


def _tighter(a: Expr, b: Expr, decide: Decide, *, upper: bool) -> Expr:
    """The tighter of two valid bounds (both hold, so either is sound; Min/Max where they
    are not ordered cheaply: by a constant difference, or by the facts for bounds
    without Min/Max, whose decisions cost too much to ask at every access)."""
    if not (a.has(sympy.Min, sympy.Max) or b.has(sympy.Min, sympy.Max)):
        diff = sympy.expand(a - b)
        if diff.is_Integer:
            return a if (diff <= 0) == upper else b
        if decide(diff <= 0) is True:
            return a if upper else b
        if decide(diff >= 0) is True:
            return b if upper else a
    f = sympy.Min if upper else sympy.Max
    return f(a, b, evaluate=False)


# ---------------------------------------------------------------------------- relations


def _from_relations(
    e: Expr,
    params: frozenset[Any],
    relations: Iterable[Any],
    decide: Decide,
    divides: Callable[[int, Any], bool | None] | None = None,
    memo: dict[Any, Any] | None = None,
) -> list[tuple[Expr | None, Expr | None]]:
    """Bounds of ``e`` from relations ``A < B`` (``<=``, ``>``, ``>=``) in force.

    A side of a relation that holds index symbols is treated as one variable ``u``: the
    smaller side ``A`` ranges over ``[lo(A), hi(B) - 1]``, the larger ``B`` over
    ``[lo(A) + 1, hi(B)]``. Where ``e = lam * A + rest`` with ``rest`` free of ``A``'s
    indices (``cols * r + k`` under ``r < rows``: ``lam = cols``), ``e`` is rewritten over
    ``u``; relations are applied one after another (``r * cols + c`` under ``r < rows``
    and ``c < cols``), and interval arithmetic over the ``u`` s bounds the result (the
    plain interval of ``e`` is the other candidate, :func:`offset_range`)."""
    sides = []
    for rel in relations:
        if not isinstance(rel, sympy.core.relational.Relational):
            continue
        op = rel.rel_op
        if op in (">", ">="):
            small, big, strict = rel.rhs, rel.lhs, op == ">"
        elif op in ("<", "<="):
            small, big, strict = rel.lhs, rel.rhs, op == "<"
        else:
            continue
        key = (rel, strict)
        known = None if memo is None else memo.get(key)
        if known is None:
            known = memo_entry = _sides(small, big, strict, params, decide, divides)
            if memo is not None:
                memo[key] = memo_entry
        small, big, gap, r_small, r_big = known
        if r_small is None or r_big is None:
            continue
        sides.append((small, (r_small[0], r_big[1] - gap)))
        sides.append((big, (r_small[0] + gap, r_big[1])))
    out: list[tuple[Expr | None, Expr | None]] = []
    current, ranges = sympy.expand(e), {}
    for side, span in sides:
        if not side.free_symbols & current.free_symbols - params:
            continue  # a relation over other indices says nothing of this offset
        u = sympy.Dummy("u", integer=True)
        rewritten = _rewrite(current, side, u, params, decide)
        if rewritten is None:
            continue
        current, ranges = rewritten, {**ranges, u: span}
    if ranges:
        combined = _interval(current, params, decide, 0, ranges)
        if combined is not None:
            out.append(combined)
    return out


def _sides(
    small: Expr,
    big: Expr,
    strict: bool,
    params: frozenset[Any],
    decide: Decide,
    divides: Callable[[int, Any], bool | None] | None,
) -> tuple[Expr, Expr, int, Range, Range]:
    """A relation ``small < big`` (``<=`` unless ``strict``) prepared: both sides expanded,
    the gap (1, or ``g`` when ``g`` divides both sides) and each side's interval."""
    small, big = sympy.expand(small), sympy.expand(big)
    gap = 1 if strict else 0
    if strict and divides is not None:  # g | A and g | B: A < B means A <= B - g
        g = _content(small)
        if g > 1 and divides(g, big) is True:
            gap = g
    return small, big, gap, _interval(small, params, decide, 0), _interval(big, params, decide, 0)


_MEMOS: dict[Any, dict[Any, Any]] = {}


def _side_memo(params: frozenset[Any], facts_key: Any) -> dict[Any, Any]:
    """The remembered relation sides for ``params`` under the facts ``facts_key``."""
    key = (params, facts_key)
    memo = _MEMOS.get(key)
    if memo is None:
        if len(_MEMOS) > 4096:
            _MEMOS.clear()
        memo = _MEMOS[key] = {}
    return memo


def _rewrite(e: Expr, side: Expr, u: Any, params: frozenset[Any], decide: Decide) -> Any:
    """``e`` as ``lam * u + rest`` with ``rest = e - lam * side`` (an identity, so sound
    whatever ``rest`` holds; bounding ``u`` and ``rest`` apart over-approximates at most),
    ``lam`` a positive multiple over launch symbols chosen to cancel one term of ``side``
    that holds indices (``bid``, ``floor(tid/32)``, ``Mod(tid, 32)``: a term is an atom),
    preferring a ``lam`` that leaves none of ``side``'s terms in ``rest``; None when no
    term gives such a ``lam``."""
    terms = []
    for t in sympy.Add.make_args(side):
        coeff, atom = t.as_coeff_Mul()
        if coeff.is_Integer and coeff != 0 and not _launch_only(atom, params):
            terms.append((coeff, atom))
    best = None
    for coeff, atom in terms:
        lam = sympy.expand(e.coeff(atom) / coeff)
        if lam == 0 or not _launch_only(lam, params):
            continue
        if not (lam.is_Rational and lam > 0) and _sign(lam, decide) != 1:
            continue
        rest = sympy.expand(e - lam * side)
        candidate = lam * u + rest
        if not any(rest.has(a) for _, a in terms):
            return candidate
        best = best if best is not None else candidate
    return best


def _content(e: Expr) -> int:
    """The gcd of ``e``'s integer coefficients and constant term (1 when one is not an
    integer): every value of ``e`` is a multiple of it."""
    g = 0
    for t in sympy.Add.make_args(e):
        coeff, _ = t.as_coeff_Mul()
        if not coeff.is_Integer:
            return 1
        g = math.gcd(g, int(coeff))
    return g or 1


def _launch_only(e: Expr, params: frozenset[Any]) -> bool:
    return all(is_launch_symbol(s, params) for s in e.free_symbols)
