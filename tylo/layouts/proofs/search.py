"""Smallest-first counterexample search that respects the assumptions (private).

Candidates come from the fact engine of :mod:`tylo.layouts.symbolic`: under the
assumptions every symbol is a polynomial in fresh non-negative variables that already
encodes positivity, ``multiple_of``, divisibility facts and slack inequalities
(``lda = M + z``). Enumerating the fresh variables by increasing total (0, 1, 2, ...)
gives small instances first: the first failure found is a *smallest* counterexample in
that order (``M=2, K=2, lda=1`` for ``(M,K):(1,lda)``). Every candidate is filtered by
the symbols' own facts and by every assumption evaluated exactly, so a counterexample
always satisfies them. A seeded random phase (``sample_assignment``) then tries larger
values, after a phase that makes one variable large and keeps the others smallest
(failures that only appear for a large extent). The search is deterministic.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from tylo.layouts import _poly as P
from tylo.layouts._fact_data import Divisible
from tylo.layouts._facts import NONNEG, facts_for
from tylo.layouts._lazy import sympy
from tylo.layouts._sampling import _closure, _intrinsic_ok
from tylo.layouts._scope import Fact
from tylo.layouts.errors import AssumptionError
from tylo.layouts.proofs.obligation import compile_expr
from tylo.layouts.symbolic import sample_assignment

__all__ = ["assumption_checker", "candidates", "first_assignment"]

Env = dict[Any, int]


def assumption_checker(assumptions: tuple[Fact, ...]) -> Callable[[Env], bool]:
    """A fast exact test of every assumption at concrete values (``{symbol: int}``).

    >>> from tylo.layouts.symbolic import dim, divisible
    >>> M, lda = dim("M"), dim("lda")
    >>> ok = assumption_checker((lda >= M, divisible(lda, 4)))
    >>> ok({M: 3, lda: 4}), ok({M: 5, lda: 4}), ok({M: 1, lda: 6})
    (True, False, False)
    """
    tests: list[Callable[[Env], bool]] = []
    for a in assumptions:
        if a is True or a is sympy.true or a is None:
            continue
        if isinstance(a, Divisible):
            e, d = compile_expr(a.expr), compile_expr(a.divisor)

            def div(env: Env, e: Any = e, d: Any = d) -> bool:
                ev, dv = e(env), d(env)
                return type(ev) is int and type(dv) is int and dv != 0 and ev % dv == 0

            tests.append(div)
        elif isinstance(a, sympy.core.relational.Relational):
            lhs, rhs, op = compile_expr(a.lhs), compile_expr(a.rhs), a.rel_op
            tests.append(_relation(lhs, rhs, op))
        else:
            tests.append(lambda env: False)
    return lambda env: all(t(env) for t in tests)


def _relation(lhs: Any, rhs: Any, op: str) -> Callable[[Env], bool]:
    if op == ">=":
        return lambda env: lhs(env) >= rhs(env)
    if op == ">":
        return lambda env: lhs(env) > rhs(env)
    if op == "<=":
        return lambda env: lhs(env) <= rhs(env)
    if op == "<":
        return lambda env: lhs(env) < rhs(env)
    if op == "==":
        return lambda env: lhs(env) == rhs(env)
    return lambda env: lhs(env) != rhs(env)


def _compositions(total: int, n: int) -> Iterator[tuple[int, ...]]:
    """All n-tuples of non-negative ints summing to ``total`` (lexicographically)."""
    if n == 1:
        yield (total,)
        return
    for first in range(total, -1, -1):
        for rest in _compositions(total - first, n - 1):
            yield (first, *rest)


def candidates(
    symbols: Iterable[sympy.Symbol],
    assumptions: tuple[Fact, ...],
    *,
    smallest: int = 400,
    random_count: int = 120,
    max_total: int = 24,
    seed: int = 0,
) -> Iterator[Env]:
    """Satisfying assignments ``{symbol: int}``, deduplicated: the first 60 in
    smallest-first order, then each variable alone large, then smallest-first again up to
    ``smallest`` in all, then ``random_count`` seeded random ones (larger values).

    >>> from tylo.layouts.symbolic import dim, divisible
    >>> M, lda = dim("M"), dim("lda")
    >>> envs = candidates([M, lda], (lda >= M, divisible(lda, 4)), smallest=3, random_count=0)
    >>> [(e[M], e[lda]) for e in envs][:3]
    [(1, 4), (2, 4), (3, 4)]
    """
    f = facts_for(assumptions)
    syms = _closure(symbols, assumptions)
    if not syms:
        yield {}
        return
    ok = assumption_checker(assumptions)
    polys = {s: f.poly(s) for s in syms}
    variables = sorted(set().union(*(P.variables(p) for p in polys.values())))
    seen: set[tuple[int, ...]] = set()
    produced = 0
    tried = 0

    def accept(env: Env) -> bool:
        key = tuple(env[s] for s in syms)
        if key in seen:
            return False
        seen.add(key)
        sub = {s: sympy.Integer(v) for s, v in env.items()}
        return all(_intrinsic_ok(s, env[s], sub) for s in syms) and ok(env)

    kinds = [f.kind[v] for v in variables]

    def at(point: dict[int, int]) -> Env | None:
        env = {}
        for s in syms:
            x = P.evaluate(polys[s], point)
            if type(x) is not int:
                return None
            env[s] = x
        return env

    def small() -> Iterator[Env]:
        # by increasing total of the fresh variables; within one total, by the symbols'
        # values (smallest sum first), so the first failure is a small instance
        for total in range(max_total + 1):
            level = []
            for mags in _compositions(total, len(variables)) if variables else [()]:
                for vals in _signed(mags, kinds):
                    env = at(dict(zip(variables, vals)))
                    if env is not None:
                        level.append(env)
            level.sort(key=lambda e: (sum(abs(x) for x in e.values()), tuple(e.values())))
            yield from level
            if not variables:
                return

    def large() -> Iterator[Env | None]:
        # one variable large, the others smallest: failures that need one large value
        for v in variables:
            for big in (7, 31, 127, 1023):
                point = dict.fromkeys(variables, 0)
                point[v] = big
                yield at(point)

    envs = small()
    for phase, quota in ((envs, min(smallest, 60)), (large(), None), (envs, smallest)):
        for env in phase:
            tried += 1
            if env is not None and accept(env):
                produced += 1
                yield env
            if quota is not None and (produced >= quota or tried > 40 * smallest):
                break
    rng = random.Random(seed)
    for k in range(random_count):
        try:
            got = sample_assignment(
                syms, rng, max_value=16 if k < random_count // 2 else 96, assumptions=assumptions
            )
        except AssumptionError:
            return
        env = {s: int(got[s]) for s in syms if s in got}
        if len(env) == len(syms) and accept(env):
            yield env


def _signed(mags: tuple[int, ...], kinds: list[int]) -> Iterator[tuple[int, ...]]:
    """Both signs for variables that may be negative (kind other than NONNEG)."""
    signs = [(1,) if k == NONNEG or m == 0 else (1, -1) for m, k in zip(mags, kinds)]
    if all(len(s) == 1 for s in signs):
        yield mags
        return
    out: list[tuple[int, ...]] = [()]
    for m, s in zip(mags, signs):
        out = [o + (m * x,) for o in out for x in s]
    yield from out


def first_assignment(symbols: Iterable[sympy.Symbol], assumptions: tuple[Fact, ...]) -> Env | None:
    """One satisfying assignment (the smallest found), or None if the search finds none."""
    for env in candidates(symbols, assumptions, smallest=1, random_count=60):
        return env
    return None
