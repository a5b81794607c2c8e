"""Launch-time guards: exact checks of one concrete instance.

A verdict that is not "proved" carries a :class:`Guard`. Called with the runtime values
of the layout's symbols (a dict of name to int, or keyword arguments) it returns True
exactly when the property holds for that instance: it evaluates the verdict's obligation
first (a few comparisons; sufficient, so True ends the check) and otherwise decides the
instance exactly with the static check (rules, then enumeration). Results are memoized
per instance, so a kernel that relaunches with the same sizes pays once.

The obligation was derived under the verdict's assumptions and the symbols' own facts
(index bounds), so it is sufficient only where they hold: the guard evaluates them too,
and for values that break one it skips the obligation and decides the instance exactly.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from typing import Any, SupportsIndex

from tylo.layouts._fact_data import Divisible
from tylo.layouts._lazy import is_sympy, lazy, sympy
from tylo.layouts._scope import Fact
from tylo.layouts.proofs.errors import GuardError
from tylo.layouts.proofs.obligation import Atom, Obligation
from tylo.layouts.proofs.static import Outcome

_symbols = lazy("tylo.layouts._symbols")  # sympy's symbol classes, imported on first use

__all__ = ["Guard"]


class Guard:
    """An exact check of a property on concrete symbol values.

    ``symbols`` lists the names it needs; ``obligation`` is the sufficient condition it
    tries first. ``guard(values)`` or ``guard(**values)`` returns a bool; ``check`` also
    returns the rule and, on failure, the raw witness.

    >>> from tylo.layouts import Layout, dim
    >>> from tylo.layouts.proofs import prove_injective
    >>> M, K, lda = dim("M"), dim("K"), dim("lda")
    >>> g = prove_injective(Layout((M, K), (1, lda))).guard
    >>> g.symbols, g(M=64, K=32, lda=64), g({"M": 64, "K": 32, "lda": 63})
    (('K', 'M', 'lda'), True, False)
    """

    __slots__ = ("_by_name", "_memo", "_premises", "obligation", "problem", "symbols")

    def __init__(
        # problem: a tylo.layouts.proofs.engine.Problem (the engine imports this module, so
        # naming the class here would be an import cycle)
        self,
        problem: Any,
        obligation: Obligation,
        assumptions: tuple[Fact, ...] = (),
    ) -> None:
        self.problem = problem
        self.obligation = obligation
        by_name: dict[str, list[sympy.Symbol]] = {}
        for s in problem.symbols:
            by_name.setdefault(s.name, []).append(s)
        self._by_name = by_name
        self.symbols = tuple(sorted(by_name))
        self._memo: dict[tuple[int, ...], Outcome] = {}
        self._premises = _premises(problem.symbols, assumptions)

    def _obligation_applies(self, env: dict[sympy.Symbol, int]) -> bool:
        """True when the assumptions and symbol facts the obligation relied on hold."""
        if self._premises is None:
            return False
        return all(a.holds(env) for a in self._premises)

    def _env(
        self, values: Mapping[Any, object] | None, kwargs: dict[str, object]
    ) -> tuple[dict[sympy.Symbol, int], tuple[int, ...]]:
        given: dict[str, object] = {}
        if values is not None:
            for k, v in values.items():
                given[k if isinstance(k, str) else getattr(k, "name", str(k))] = v
        given.update(kwargs)
        env: dict[sympy.Symbol, int] = {}
        key: list[int] = []
        for name in self.symbols:
            if name not in given:
                raise GuardError(
                    f"guard for {self.problem.prop} of {self.problem.subject}: no value for "
                    f"{name}; pass every one of {', '.join(self.symbols)}"
                )
            raw = given[name]
            try:
                if not isinstance(raw, SupportsIndex):
                    raise TypeError
                v = operator.index(raw)
            except TypeError:
                raise GuardError(
                    f"guard for {self.problem.prop}: {name}={given[name]!r} is not an int"
                ) from None
            for s in self._by_name[name]:
                m = getattr(s, "multiple_of", None)
                if m is not None and (v < 1 or v % m):
                    need = "a positive integer" if m == 1 else f"a positive multiple of {m}"
                    raise GuardError(
                        f"guard for {self.problem.prop} of {self.problem.subject}: {name}={v} "
                        f"is not {need}, which the symbol {name} promises"
                    )
                env[s] = v
            key.append(v)
        return env, tuple(key)

    def check(self, values: Mapping[Any, object] | None = None, /, **kwargs: object) -> Outcome:
        """The exact outcome (``ok``, ``rule``, raw ``witness``) for these values."""
        env, key = self._env(values, kwargs)
        got = self._memo.get(key)
        if got is not None:
            return got
        try:
            cfs = self.problem.concretes(env)
            pvals = self.problem.param_values(env)
        except (ValueError, ZeroDivisionError) as e:
            raise GuardError(
                f"guard for {self.problem.prop} of {self.problem.subject}: the values "
                f"{dict(zip(self.symbols, key))} do not make a valid layout ({e})"
            ) from None
        if (
            self.obligation is not None
            and self._obligation_applies(env)
            and self.obligation.holds(env)
        ):
            out = Outcome(True, f"obligation {self.obligation} holds")
        else:
            out = self.problem.check(cfs, pvals)
            if out.ok is None:
                raise GuardError(
                    f"guard for {self.problem.prop} of {self.problem.subject}: cannot decide "
                    f"the instance {dict(zip(self.symbols, key))}: {out.rule}"
                )
        if len(self._memo) > 1024:
            self._memo.clear()
        self._memo[key] = out
        return out

    def __call__(self, values: Mapping[Any, object] | None = None, /, **kwargs: object) -> bool:
        return bool(self.check(values, **kwargs).ok)

    def __repr__(self) -> str:
        return (
            f"Guard({self.problem.prop} of {self.problem.subject}: "
            f"{self.obligation}, else an exact check)"
        )


def _premises(
    symbols: frozenset[sympy.Symbol], assumptions: tuple[Fact, ...]
) -> tuple[Atom, ...] | None:
    """The assumptions and index bounds as atoms over ``symbols``; None when one of them
    mentions a symbol the guard is not given (it cannot be checked, so the obligation is
    never trusted)."""
    out: list[Atom] = []
    for s in symbols:
        if isinstance(s, _symbols.IndexSymbol) and s.upper is not None:
            out.append(Atom("<", s, s.upper))
    for a in assumptions:
        if a is sympy.true:
            continue
        if isinstance(a, Divisible):
            atom = Atom("|", a.divisor, a.expr)
        elif isinstance(a, sympy.core.relational.Relational):
            atom = Atom(a.rel_op, a.lhs, a.rhs)
        else:
            return None
        out.append(atom)
    for atom in out:
        for x in (atom.lhs, atom.rhs):
            if is_sympy(x) and not x.free_symbols <= symbols:
                return None
    return tuple(out)
