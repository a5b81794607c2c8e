"""Symbolic integers and the fact system every layout decision uses.

Extents and strides of a layout are plain ``int`` (static) or sympy expressions over
symbols (runtime values). Decisions about symbolic values are **tri-state and exact**:
``True`` (holds for every value allowed by the facts), ``False`` (holds for none), or
``None`` (depends on the values). A caller that gets ``None`` raises
:class:`~tylo.layouts.errors.UndecidableError` naming the fact it needs; nothing guesses.

Facts come from three places:

- the symbol itself: :func:`dim` (a positive integer, optionally a multiple of ``k``) and
  :func:`index_symbol` (a non-negative integer with an optional exclusive upper bound);
- relational assumptions in force: ``with assuming(lda >= m, divisible(lda, 8)): ...``
  (a thread-local, nestable stack; :func:`current_assumptions` lists it);
- nothing else: sympy's own assumption system is not consulted beyond a plain symbol's
  integer/positive/nonnegative flags.

Method (docs/proofs.md): symbols become polynomials over fresh non-negative variables
(``N = 16 + 16*t`` for ``multiple_of=16``; ``lda = M + z`` under ``lda >= M``); a sign
question is settled by reading coefficient signs, divisibility by a static ``d`` by
enumerating residues modulo ``d``, divisibility by a symbolic ``d`` by exact polynomial
division. Answers are memoized per (question, assumptions).

Static fast paths: every helper returns at once, without touching sympy, when its
arguments are plain ints.

>>> N = dim("N", multiple_of=16)
>>> divides(8, N), divides(32, N), decide(N >= 16), decide(N < 16)
(True, None, True, False)
>>> lda, m = dim("lda"), dim("m")
>>> with assuming(lda >= m):
...     decide(lda + 1 > m), sym_max(m, lda)
(True, lda)
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from tylo.layouts import _poly as P
from tylo.layouts import _ranges  # noqa: F401 - installs the index-range check
from tylo.layouts._fact_data import Divisible
from tylo.layouts._facts import Facts, facts_for
from tylo.layouts._lazy import is_sympy, lazy, sympy
from tylo.layouts._scope import _STACK, Fact, _normalize_fact, to_value
from tylo.layouts.errors import (
    AssumptionError,
    DivisibilityError,
    StaticRequiredError,
    UndecidableError,
)

_symbols = lazy("tylo.layouts._symbols")  # sympy's symbol classes, imported on first use

if TYPE_CHECKING:
    from tylo.layouts._symbols import Dim, IndexSymbol

__all__ = [
    "Dim",
    "Divisible",
    "IndexSymbol",
    "assignments",
    "assuming",
    "ceil_div",
    "current_assumptions",
    "decide",
    "decide_cmp",
    "dim",
    "divides",
    "divisible",
    "exact_div",
    "floor_div",
    "index_symbol",
    "is_static",
    "mod",
    "require_static",
    "sample_assignment",
    "substitute",
    "sym_max",
    "sym_min",
    "to_value",
]

Value = Any  # int | sympy.Expr

# -- symbols and facts -----------------------------------------------------------------


def dim(name: str, *, multiple_of: int = 1) -> Dim:
    """A positive integer symbol (a runtime extent, stride or leading dimension).

    ``multiple_of=k`` records the fact ``k | name``. Symbols are cached by (name, fact), so
    ``dim("N") is dim("N")``, while ``dim("N", multiple_of=16) != dim("N")``: the fact is
    part of the symbol's identity (hash and equality) and survives pickling.

    >>> N = dim("N", multiple_of=16)
    >>> N.multiple_of, N == dim("N"), N == dim("N", multiple_of=16)
    (16, False, True)
    """
    symbol: Dim = _symbols.Dim(name, multiple_of)
    return symbol


def index_symbol(name: str, *, upper: Value = None) -> IndexSymbol:
    """A non-negative integer symbol (thread, block or loop index).

    ``upper`` (an int or an expression over other symbols) is an exclusive upper bound,
    ``0 <= name < upper``, recorded on the symbol as a fact.

    >>> tid = index_symbol("tid", upper=128)
    >>> decide(tid < 128), decide(8 * tid + 7 < 1024), decide(tid >= 64)
    (True, True, None)
    """
    symbol: IndexSymbol = _symbols.IndexSymbol(name, to_value(upper) if upper is not None else None)
    return symbol


def divisible(expr: Value, divisor: Value) -> Divisible:
    """The fact ``divisor | expr``, to pass to :func:`assuming`.

    >>> K = dim("K")
    >>> with assuming(divisible(K, 8)):
    ...     divides(4, K), divides(16, K)
    (True, None)
    """
    return Divisible(to_value(expr), to_value(divisor))


@contextlib.contextmanager
def assuming(*facts: Any) -> Iterator[tuple[Fact, ...]]:
    """Put relations (``lda >= m``, ``sympy.Eq(a, b)``, ``>``, ``<=``, ``<``) and
    :func:`divisible` facts in force for the enclosed block (thread-local, nestable).

    Obviously unsatisfiable sets raise :class:`~tylo.layouts.errors.AssumptionError` at
    entry. Yields the full tuple of assumptions now in force.

    >>> lda, M = dim("lda"), dim("M")
    >>> with assuming(lda >= M):
    ...     decide(lda >= M)
    True
    >>> with assuming(lda >= M, lda <= M - 1):
    ...     pass
    Traceback (most recent call last):
    ...
    tylo.layouts.errors.AssumptionError: assuming: ...unsatisfiable...
    """
    flat: list[Fact] = []
    for f in facts:
        if isinstance(f, (list, tuple)):
            flat.extend(f)
        else:
            flat.append(f)
    previous = _STACK.current
    new = previous + tuple(_normalize_fact(f) for f in flat)
    facts_for(new)  # validates; raises AssumptionError when unsatisfiable
    _STACK.current = new
    try:
        yield new
    finally:
        _STACK.current = previous


def current_assumptions() -> tuple[Fact, ...]:
    """The assumptions in force in this thread (outermost first).

    >>> with assuming(dim("a") >= 2):
    ...     current_assumptions()
    (a >= 2,)
    """
    return _STACK.current


# -- values --------------------------------------------------------------------------------


def is_static(x: object) -> bool:
    """True when ``x`` (a scalar or a nested tuple) holds only plain integers.

    >>> is_static((4, (8, 2))), is_static((4, dim("N")))
    (True, False)
    """
    if type(x) is int:
        return True
    if type(x) is tuple:
        return all(is_static(e) for e in x)
    if is_sympy(x):
        return bool(x.is_Integer)
    static = getattr(x, "is_static", None)
    if static is not None:
        return bool(static)
    return False


def require_static(x: Any, what: str = "value") -> int:
    """Return ``x`` as an int, or raise StaticRequiredError naming ``what``.

    >>> require_static(sympy.Integer(64), what="tile_m")
    64
    >>> require_static(dim("M"), what="tile_m")
    Traceback (most recent call last):
    ...
    tylo.layouts.errors.StaticRequiredError: tile_m must be a static int, got the symbolic value
    M; ...
    """
    if type(x) is int:
        return x
    v = to_value(x)
    if type(v) is int:
        return v
    raise StaticRequiredError(
        f"{what} must be a static int, got the symbolic value {_text(v)}; "
        f"pass a Python int for {what} (runtime values cannot choose a compiled configuration)"
    )


def _text(x: Any) -> str:
    if is_sympy(x):
        return str(sympy.sstr(x)).replace(" ", "")
    return str(x)


# -- decisions -------------------------------------------------------------------------------

_MEMO: dict[tuple[object, ...], bool | None] = {}
_OPS = ("==", "!=", "<", "<=", ">", ">=")


def _facts(extra: tuple[Fact, ...] = ()) -> Facts:
    return facts_for(_STACK.current + tuple(extra) if extra else _STACK.current)


def _memo(key: tuple[object, ...], compute: Callable[[], bool | None]) -> bool | None:
    try:
        return _MEMO[key]
    except KeyError:
        pass
    r = compute()
    if len(_MEMO) > 200_000:
        _MEMO.clear()
    _MEMO[key] = r
    return r


def decide_cmp(a: Value, op: str, b: Value, *, assumptions: Iterable[Fact] = ()) -> bool | None:
    """Decide ``a op b`` (op one of ``== != < <= > >=``) exactly: True, False or None.

    Same as :func:`decide` on a relation, without building a sympy relation.

    >>> M = dim("M")
    >>> decide_cmp(2 * M, ">=", M + 1), decide_cmp(M, "==", 1)
    (True, None)
    """
    if type(a) is int and type(b) is int:
        return _static_cmp(a, op, b)
    a, b = to_value(a), to_value(b)
    if type(a) is int and type(b) is int:
        return _static_cmp(a, op, b)
    if op not in _OPS:
        raise AssumptionError(f"decide: unknown comparison {op!r}; use one of {_OPS}")
    extra = tuple(assumptions)
    key = ("cmp", op, a, b, _STACK.current, extra)
    return _memo(key, lambda: _decide_cmp(_facts(extra), a, op, b))


def _static_cmp(a: int, op: str, b: int) -> bool:
    if op == "==":
        return a == b
    if op == "!=":
        return a != b
    if op == "<":
        return a < b
    if op == "<=":
        return a <= b
    if op == ">":
        return a > b
    if op == ">=":
        return a >= b
    raise AssumptionError(f"decide: unknown comparison {op!r}; use one of {_OPS}")


def _decide_cmp(f: Facts, a: Value, op: str, b: Value) -> bool | None:
    d = P.sub(f.poly(a), f.poly(b))
    if op in ("==", "!="):
        r = f.is_zero(d)
        return r if op == "==" or r is None else not r
    if op in ("<", "<="):
        d = P.scale(d, -1)  # b - a
    if op in ("<", ">"):  # strict: d > 0
        if f.integral(d):
            return f.nonneg(P.sub(d, P.ONE))
        if f.prove(d, strict=True):
            return True
        return False if f.prove(P.scale(d, -1)) else None
    return f.nonneg(d)


def decide(rel: Any, *, assumptions: Iterable[Fact] = ()) -> bool | None:
    """Decide a relation or fact exactly: True (always), False (never), None (depends).

    ``rel`` is a sympy relation (``lda >= m``, ``sympy.Eq(a, b)``, ``sympy.Ne``, ``<``,
    ``<=``, ``>``), a Python/sympy bool, or a :func:`divisible` fact. ``assumptions`` adds
    facts to those in force.

    >>> M, lda = dim("M"), dim("lda")
    >>> decide(lda >= M), decide(lda >= M, assumptions=[sympy.Eq(lda, M)])
    (None, True)
    """
    if isinstance(rel, bool):
        return rel
    if rel is sympy.true:
        return True
    if rel is sympy.false:
        return False
    if isinstance(rel, Divisible):
        return divides(rel.divisor, rel.expr, assumptions=assumptions)
    if isinstance(rel, sympy.core.relational.Relational):
        return decide_cmp(rel.lhs, rel.rel_op, rel.rhs, assumptions=assumptions)
    raise AssumptionError(
        f"decide: {rel!r} is not a relation; give e.g. lda >= m, sympy.Eq(a, b) or "
        "divisible(expr, d)"
    )


def divides(d: Value, e: Value, *, assumptions: Iterable[Fact] = ()) -> bool | None:
    """Decide ``d | e`` (``e`` is an integer multiple of ``d``): True, False or None.

    >>> N = dim("N", multiple_of=128)
    >>> divides(16, N), divides(N, 3 * N), divides(N / 128, N), divides(3, N)
    (True, True, True, None)
    """
    if type(d) is int and type(e) is int:
        return e % d == 0 if d else e == 0
    d, e = to_value(d), to_value(e)
    if type(d) is int and type(e) is int:
        return e % d == 0 if d else e == 0
    extra = tuple(assumptions)
    key = ("div", d, e, _STACK.current, extra)
    return _memo(key, lambda: _facts(extra).divides(d, e))


def _hint_divides(d: Value, e: Value) -> str:
    if is_sympy(e) and isinstance(e, _symbols.Dim) and type(d) is int:
        return (
            f"use dim('{e.name}', multiple_of={d}) or assume it: "
            f"with assuming(divisible({e.name}, {d})): ..."
        )
    return f"assume it: with assuming(divisible({_text(e)}, {_text(d)})): ..."


def undecidable_divides(op: str, d: Value, e: Value, context: str = "") -> UndecidableError:
    """The error for an undecided ``d | e`` needed by ``op`` (``context`` names operands)."""
    cond = f"{_text(d)} | {_text(e)}"
    hint = _hint_divides(d, e)
    where = f" ({context})" if context else ""
    return UndecidableError(
        f"{op} needs {cond}{where}, which depends on the symbols' values: {hint}",
        operation=op,
        condition=cond,
        hint=hint,
    )


def undecidable_cmp(
    op: str, a: Value, rel: str, b: Value, context: object = ""
) -> UndecidableError:
    """The error for an undecided comparison ``a rel b`` needed by ``op``."""
    cond = f"{_text(a)} {rel} {_text(b)}"
    hint = f"assume it (or its negation): with assuming({cond}): ..."
    where = f" ({context})" if context else ""
    return UndecidableError(
        f"{op} needs to know whether {cond}{where}, which depends on the symbols' values: {hint}",
        operation=op,
        condition=cond,
        hint=hint,
    )


# -- arithmetic helpers ------------------------------------------------------------------------


def _quotient(a: Value, b: Value) -> Value:
    q = sympy.Integer(a) / b if type(a) is int else a / b
    if not is_sympy(q):
        return to_value(q)
    if q.is_Integer:
        return int(q)
    _, den = q.as_numer_denom()
    if not den.is_Number:
        q = sympy.cancel(q)
    return to_value(q)


def exact_div(a: Value, b: Value, *, op: str = "exact_div") -> Value:
    """``a / b`` when ``b`` divides ``a``; raises DivisibilityError when it provably does
    not and UndecidableError (naming the fact to supply) when it depends on the values.

    >>> exact_div(12, 4), exact_div(dim("N", multiple_of=16), 16)
    (3, N/16)
    >>> exact_div(dim("N"), 16, op="composition")
    Traceback (most recent call last):
    ...
    tylo.layouts.errors.UndecidableError: composition needs 16 | N, which depends on the symbols'
    values: use dim('N', multiple_of=16) or assume it: ...
    """
    if type(a) is int and type(b) is int:
        if b and a % b == 0:
            return a // b
        raise DivisibilityError(f"{op}: {b} does not divide {a}; use values where it does")
    a, b = to_value(a), to_value(b)
    r = divides(b, a)
    if r is True:
        if b == 0:
            return 0
        return _quotient(a, b)
    if r is False:
        raise DivisibilityError(
            f"{op}: {_text(b)} does not divide {_text(a)} for any allowed values of the symbols"
        )
    raise undecidable_divides(op, b, a)


def _ratio(a: Value, b: Value) -> Any:
    return sympy.Integer(a) / b if type(a) is int else a / b


def ceil_div(a: Value, b: Value) -> Value:
    """``ceil(a / b)``; exact quotient when ``b | a`` is decided, else ``sympy.ceiling``.

    >>> ceil_div(10, 4), ceil_div(dim("N", multiple_of=8), 8), ceil_div(dim("M"), 64)
    (3, N/8, ceiling(M/64))
    """
    if type(a) is int and type(b) is int:
        return -(-a // b)
    a, b = to_value(a), to_value(b)
    if type(a) is int and type(b) is int:
        return -(-a // b)
    if divides(b, a) is True:
        return _quotient(a, b)
    return sympy.ceiling(_ratio(a, b), evaluate=False)


def floor_div(a: Value, b: Value) -> Value:
    """``floor(a / b)``; exact when ``b | a`` or ``0 <= a < b`` is decided, else
    ``sympy.floor``.

    >>> tid = index_symbol("tid", upper=32)
    >>> floor_div(10, 4), floor_div(tid, 32), floor_div(tid, 4)
    (2, 0, floor(tid/4))
    """
    if type(a) is int and type(b) is int:
        return a // b
    a, b = to_value(a), to_value(b)
    if type(a) is int and type(b) is int:
        return a // b
    if divides(b, a) is True:
        return _quotient(a, b)
    if decide_cmp(a, ">=", 0) is True and decide_cmp(a, "<", b) is True:
        return 0
    return sympy.floor(_ratio(a, b), evaluate=False)


def mod(a: Value, b: Value) -> Value:
    """``a mod b``; exact when ``b | a`` or ``0 <= a < b`` is decided, else ``sympy.Mod``.

    >>> tid = index_symbol("tid", upper=32)
    >>> mod(10, 4), mod(tid, 32), mod(tid, 4)
    (2, tid, Mod(tid, 4))
    """
    if type(a) is int and type(b) is int:
        return a % b
    a, b = to_value(a), to_value(b)
    if type(a) is int and type(b) is int:
        return a % b
    if divides(b, a) is True:
        return 0
    if decide_cmp(a, ">=", 0) is True and decide_cmp(a, "<", b) is True:
        return a
    # evaluate=False: sympy 1.14 rewrites Mod(2*Mod(5, 3*M), 6) into the wrong
    # 2*Mod(Mod(5, 3*M)**2, 3); unevaluated nodes still evaluate once substituted.
    return sympy.Mod(a, b, evaluate=False)


def sym_min(*values: Value, op: str = "sym_min") -> Value:
    """The smallest value, decided exactly; raises UndecidableError when it depends.

    >>> M = dim("M")
    >>> sym_min(4, 2), sym_min(M, M + 3), sym_max(M, 2 * M)
    (2, M, 2*M)
    """
    return _extreme(values, "<=", op)


def sym_max(*values: Value, op: str = "sym_max") -> Value:
    """The largest value, decided exactly; raises UndecidableError when it depends.

    >>> sym_max(3, 7)
    7
    """
    return _extreme(values, ">=", op)


def _extreme(values: tuple[Value, ...], rel: str, op: str) -> Value:
    if not values:
        raise AssumptionError(f"{op}: needs at least one value")
    if all(type(v) is int for v in values):
        return min(values) if rel == "<=" else max(values)
    best = to_value(values[0])
    for v in values[1:]:
        v = to_value(v)
        if decide_cmp(best, rel, v) is True:
            continue
        if decide_cmp(v, rel, best) is True:
            best = v
            continue
        raise undecidable_cmp(op, best, rel, v)
    return best


# Substitution and sampling live in _sampling.py (imported last: it builds on the above).
# The private helpers are re-exported for tylo.layouts.proofs, which uses them.
from tylo.layouts._sampling import (  # noqa: E402, F401 - after the above, which it uses
    _closure,
    _holds,
    _intrinsic_ok,
    assignments,
    sample_assignment,
    substitute,
)


def __getattr__(name: str) -> Any:
    # Dim and IndexSymbol are sympy classes: sympy is imported when one is first named
    if name in ("Dim", "IndexSymbol"):
        return getattr(_symbols, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
