"""Substitution of values and sampling of satisfying assignments (private).

The public names (``substitute``, ``sample_assignment``, ``assignments``) are re-exported
by :mod:`tylo.layouts.symbolic`; see there.
"""

from __future__ import annotations

import itertools
import operator
import random
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from tylo.layouts import _poly as P
from tylo.layouts._depth import MAX_DEPTH, check_depth
from tylo.layouts._fact_data import Divisible
from tylo.layouts._facts import facts_for
from tylo.layouts._lazy import is_sympy, lazy, sympy
from tylo.layouts._scope import _STACK, Fact, _normalize_fact, to_value
from tylo.layouts.errors import AssumptionError, ShapeError

_symbols = lazy("tylo.layouts._symbols")  # sympy's symbol classes, imported on first use

__all__ = ["assignments", "sample_assignment", "substitute"]


def substitute(obj: Any, values: Mapping[Any, int]) -> Any:
    """Replace symbols (keys: symbols or their names) by ints in an expression, a nested
    tuple, or any object with a ``map_values`` method (Layout, Swizzle, ComposedLayout).

    >>> from tylo.layouts.symbolic import dim
    >>> N = dim("N", multiple_of=16)
    >>> substitute(N / 16 + 1, {"N": 64}), substitute((N, 2 * N), {N: 32})
    (5, (32, 64))
    """
    if not isinstance(values, Mapping):
        raise AssumptionError(
            f"substitute: values must be a mapping of symbols (or their names) to ints, got "
            f"{values!r} ({type(values).__name__}); e.g. substitute(L, {{'N': 64}})"
        )
    by_name: dict[str, int] = {}
    by_sym: dict[Any, sympy.Integer] = {}
    for k, v in values.items():
        n = _exact_int(k, v)
        if isinstance(k, str):
            by_name[k] = n
        elif isinstance(k, sympy.Symbol):
            by_sym[k] = sympy.Integer(n)
        else:
            raise AssumptionError(
                f"substitute: key {k!r} ({type(k).__name__}) is not a symbol or a symbol's "
                "name; key values by dim('N') or 'N'"
            )

    def one(x: Any) -> Any:
        if type(x) is int or not is_sympy(x):
            return x
        repl = dict(by_sym)
        if by_name:
            for s in x.free_symbols:
                if s.name in by_name and s not in repl:
                    repl[s] = sympy.Integer(by_name[s.name])
        return to_value(x.xreplace(repl)) if repl else x

    return _map(obj, one)


def _exact_int(k: Any, v: Any) -> int:
    """``v`` as an int, refusing anything that is not exactly an integer (2.5, "3", True)."""
    out: int | None = None
    if isinstance(v, bool):
        pass
    elif is_sympy(v):
        out = int(v) if v.is_Integer else None
    else:
        try:
            out = operator.index(v)
        except TypeError:
            pass
    if out is None:
        raise AssumptionError(
            f"substitute: the value of {k} must be an integer, got {v!r} "
            f"({type(v).__name__}); symbols stand for integers (give an int)"
        )
    return out


def _map(obj: Any, fn: Any, depth: int = 0) -> Any:
    if type(obj) is tuple or type(obj) is list:
        if depth >= MAX_DEPTH:
            raise ShapeError(
                f"substitute: the tuple nests deeper than {MAX_DEPTH} levels (tylo's limit, "
                "tylo.layouts.layout.MAX_DEPTH); flatten it"
            )
        out = [_map(e, fn, depth + 1) for e in obj]
        return tuple(out) if type(obj) is tuple else out
    mapper = getattr(obj, "map_values", None)
    if mapper is not None and not is_sympy(obj):
        return mapper(fn)
    return fn(obj)


def _free_symbols(obj: Any) -> set[sympy.Symbol]:
    out: set[sympy.Symbol] = set()

    def grab(x: Any) -> Any:
        if is_sympy(x):
            out.update(x.free_symbols)
        return x

    _map(obj, grab)
    return out


def _closure(symbols: Iterable[sympy.Symbol], assumptions: tuple[Fact, ...]) -> list[sympy.Symbol]:
    syms = set()
    for s in symbols:
        syms |= _free_symbols(s) if not isinstance(s, sympy.Symbol) else {s}
    for a in assumptions:
        if isinstance(a, Divisible):
            syms |= _free_symbols((a.expr, a.divisor))
        elif is_sympy(a):
            syms |= a.free_symbols
    todo = list(syms)
    while todo:
        s = todo.pop()
        if isinstance(s, _symbols.IndexSymbol) and is_sympy(s.upper):
            for t in s.upper.free_symbols:
                if t not in syms:
                    syms.add(t)
                    todo.append(t)
    # index symbols last so their bounds are known; otherwise by name for determinism
    return sorted(syms, key=lambda s: (isinstance(s, _symbols.IndexSymbol), s.name, str(type(s))))


def _holds(a: Any, env: dict[sympy.Symbol, sympy.Integer]) -> bool:
    if isinstance(a, Divisible):
        e = to_value(sympy.sympify(a.expr).xreplace(env))
        d = to_value(sympy.sympify(a.divisor).xreplace(env))
        return type(e) is int and type(d) is int and d != 0 and e % d == 0
    if is_sympy(a):
        r = a.xreplace(env)
        return bool(r is sympy.true)
    return bool(a)


def _intrinsic_ok(s: Any, v: int, env: dict[sympy.Symbol, sympy.Integer]) -> bool:
    if isinstance(s, _symbols.Dim):
        return v >= 1 and v % s.multiple_of == 0
    if isinstance(s, _symbols.IndexSymbol):
        if v < 0:
            return False
        if s.upper is not None:
            u = to_value(sympy.sympify(s.upper).xreplace(env))
            return type(u) is int and v < u
        return True
    if s.is_positive and v < 1:
        return False
    return not (s.is_nonnegative and v < 0)


def sample_assignment(
    symbols: Iterable[sympy.Symbol],
    rng: random.Random | int | None = None,
    *,
    max_value: int = 64,
    assumptions: Iterable[Fact] = (),
    tries: int = 400,
) -> dict[sympy.Symbol, int]:
    """A random integer assignment satisfying every fact: each symbol's own (positivity,
    ``multiple_of``, index bounds) and the assumptions in force (plus ``assumptions``).

    ``symbols`` may hold symbols or any objects containing them (expressions, layouts).
    The result maps every symbol found, and every symbol the assumptions tie to them, to an
    int. Values stay ``<= max_value`` where the facts allow it; small values are favoured
    (boundary cases find bugs). Raises AssumptionError if none is found in ``tries``.

    >>> from tylo.layouts.symbolic import assuming, dim
    >>> lda, M = dim("lda", multiple_of=8), dim("M")
    >>> with assuming(lda >= M):
    ...     v = sample_assignment([lda], random.Random(0))
    >>> sorted(s.name for s in v), v[lda] % 8 == 0 and v[lda] >= v[M] >= 1
    (['M', 'lda'], True)
    """
    if not isinstance(rng, random.Random):
        rng = random.Random(rng)
    facts_all = _STACK.current + tuple(_normalize_fact(a) for a in assumptions)
    f = facts_for(facts_all)
    symbols = list(symbols)
    check_depth(symbols, "the objects", "sample_assignment")
    syms = _closure(symbols, facts_all)
    if not syms:
        return {}
    polys = {s: f.poly(s) for s in syms}
    fresh = sorted(set().union(*(P.variables(p) for p in polys.values())))
    # a variable scaled by k in some symbol's polynomial (N = 16 + 16*t) gets range /k
    scale = dict.fromkeys(fresh, 1)
    for p in polys.values():
        for mono, c in p.items():
            for v, _ in mono:
                scale[v] = max(scale[v], abs(int(c)) if c == int(c) else 1)
    for attempt in range(tries):
        cap = max(min(8, max_value), max_value >> (attempt // 100))
        vals = {}
        for v in fresh:
            roll = rng.random()
            top = max(1, cap // scale[v])
            hi = top if roll > 0.5 else min(top, 2)
            x = rng.randint(0, hi)
            vals[v] = x if f.kind[v] == 0 or rng.random() < 0.5 else -x
        env: dict[sympy.Symbol, sympy.Integer] = {}
        out: dict[sympy.Symbol, int] = {}
        ok = True
        for s in syms:
            val = P.evaluate(polys[s], vals)
            if not isinstance(val, int):
                ok = False
                break
            if isinstance(s, _symbols.IndexSymbol) and s.upper is not None and rng.random() < 0.7:
                u = to_value(sympy.sympify(s.upper).xreplace(env))
                if type(u) is int and u >= 1:
                    val = rng.randrange(u)
            env[s] = sympy.Integer(val)
            out[s] = val
        if not ok:
            continue
        if attempt < tries // 2 and any(v > max_value for v in out.values()):
            continue
        if all(_intrinsic_ok(s, out[s], env) for s in syms) and all(
            _holds(a, env) for a in facts_all
        ):
            return out
    # fallback: the smallest assignments, systematically
    width = 9 if len(fresh) <= 4 else 4 if len(fresh) <= 6 else 2
    for combo in itertools.islice(itertools.product(range(width), repeat=len(fresh)), 20000):
        vals = dict(zip(fresh, combo))
        out = {}
        env = {}
        for sym in syms:
            val = P.evaluate(polys[sym], vals)
            if not isinstance(val, int):
                break
            out[sym] = val
            env[sym] = sympy.Integer(val)
        else:
            if all(_intrinsic_ok(t, out[t], env) for t in syms) and all(
                _holds(a, env) for a in facts_all
            ):
                return out
    names = ", ".join(s.name for s in syms)
    raise AssumptionError(
        f"sample_assignment: found no values of {names} satisfying "
        f"{[str(a) for a in facts_all]} in {tries} tries; the assumptions may be "
        "unsatisfiable or very tight (raise max_value)"
    )


def assignments(
    symbols: Iterable[sympy.Symbol],
    rng: random.Random | int | None = None,
    *,
    count: int = 10,
    max_value: int = 64,
    assumptions: Iterable[Fact] = (),
) -> Iterator[dict[sympy.Symbol, int]]:
    """Yield ``count`` random satisfying assignments (see :func:`sample_assignment`).

    >>> from tylo.layouts.symbolic import dim
    >>> [a[dim("K")] >= 1 for a in assignments([dim("K")], 1, count=3)]
    [True, True, True]
    """
    if not isinstance(rng, random.Random):
        rng = random.Random(rng)
    symbols = list(symbols)
    for _ in range(count):
        yield sample_assignment(symbols, rng, max_value=max_value, assumptions=assumptions)
