"""The driver every prover shares (private): assumptions, cache, layering, verdicts.

A prover describes its question as a :class:`Problem` (the forms, the exact check of a
concrete instance, the symbolic rules, the replay predicate); :func:`prove` runs the
layers described in docs/proofs.md ("How it works"):

1. assumptions: the ``assuming=`` facts plus every ``assuming(...)`` context in force,
   validated by the fact engine (unsatisfiable sets raise ``AssumptionError``);
2. static layouts: the exact static check, done;
3. symbolic layouts: the rules (which use the fact engine's exact decisions); proved, or
   an obligation;
4. smallest-first counterexample search respecting the assumptions; a counterexample is
   replayed on the concrete layout (the layouts package's own evaluation) before it is
   reported, with a hint naming the failed condition;
5. otherwise unknown, with the obligation and a guard.

Verdicts are cached by (property, forms, parameters, assumptions).
"""

from __future__ import annotations

import operator
import reprlib
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple, SupportsIndex

from tylo.layouts._fact_data import Divisible
from tylo.layouts._facts import facts_for
from tylo.layouts._lazy import is_sympy, lazy, sympy
from tylo.layouts._scope import Fact, Value
from tylo.layouts.errors import AssumptionError, LayoutError, SizeBudgetError
from tylo.layouts.proofs.errors import ProofArgumentError, ProofInternalError
from tylo.layouts.proofs.guards import Guard
from tylo.layouts.proofs.normalize import Concrete, Form
from tylo.layouts.proofs.obligation import Atom, Env, Obligation, compile_expr, text
from tylo.layouts.proofs.search import candidates, first_assignment
from tylo.layouts.proofs.static import Outcome
from tylo.layouts.proofs.verdict import DISPROVED, PROVED, UNKNOWN, FrozenDict, Verdict
from tylo.layouts.symbolic import assuming, current_assumptions, substitute

_symbols = lazy("tylo.layouts._symbols")  # sympy's symbol classes, imported on first use

__all__ = [
    "Problem",
    "RuleResult",
    "check_mode",
    "clear_cache",
    "normalize_assumptions",
    "positive_int",
    "prove",
    "symbolic_value",
]


class RuleResult(NamedTuple):
    """What the symbolic rules concluded: ``proved`` with ``rule``; otherwise the
    ``obligation`` that would suffice (None when no rule applied)."""

    proved: bool
    rule: str
    obligation: Obligation | None = None
    hints: tuple[Atom, ...] = ()  # atoms worth naming when they fail at a counterexample


class Problem:
    """One question: ``prop`` about ``forms`` with parameters.

    ``params`` maps parameter names (``"base"``, ``"extent"``) to ints or expressions;
    ``static`` holds the static parameters (part of the cache key); ``check(concretes,
    pvals)`` decides a concrete instance exactly; ``rules(extra)`` returns a
    :class:`RuleResult`; ``replay(objs, coords, offsets, pvals)`` re-checks a failure on
    the substituted layouts.
    """

    def __init__(
        self,
        prop: str,
        forms: tuple[Form, ...],
        *,
        check: Callable[[tuple[Concrete, ...], dict[str, int]], Outcome],
        rules: Callable[[tuple[Fact, ...]], RuleResult],
        replay: Callable[..., bool],
        params: dict[str, Value] | None = None,
        static: tuple[object, ...] = (),
        subject: str = "",
    ) -> None:
        self.prop = prop
        self.forms = forms
        self.check = check
        self.rules = rules
        self.replay = replay
        self.params = dict(params or {})
        self.static = static
        self.subject = subject or " and ".join(str(f) for f in forms)
        syms: set[sympy.Symbol] = set()
        for f in forms:
            syms |= f.symbols
        for v in self.params.values():
            if is_sympy(v):
                syms |= v.free_symbols
        self.symbols = frozenset(syms)
        self._pcomp = {k: compile_expr(v) for k, v in self.params.items()}
        self.key = (prop, tuple(f.key for f in forms), static, tuple(sorted(self.params.items())))

    def __getstate__(self) -> dict[str, object]:
        """The problem without its compiled parameter closures (rebuilt on unpickling):
        a verdict's guard keeps its problem, and must pickle."""
        state = dict(self.__dict__)
        state.pop("_pcomp", None)
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self._pcomp = {k: compile_expr(v) for k, v in self.params.items()}

    def param_values(self, env: Env) -> dict[str, int]:
        """The parameters at concrete symbol values."""
        out: dict[str, int] = {}
        for k, fn in self._pcomp.items():
            v = fn(env)
            if type(v) is not int:
                raise ValueError(f"parameter {k} is not an integer: {v}")
            out[k] = v
        return out

    def concretes(self, env: Env) -> tuple[Concrete, ...]:
        return tuple(f.instantiate(env) for f in self.forms)


# -- arguments --------------------------------------------------------------------------------


def _index(x: object) -> int | None:
    """``operator.index(x)``, or None where ``x`` is not an integer."""
    if not isinstance(x, SupportsIndex):
        return None
    try:
        return operator.index(x)
    except TypeError:
        return None


def positive_int(x: object, name: str, what: str) -> int:
    """``x`` as a positive static int, or ProofArgumentError.

    >>> positive_int(8, "vector", "prove_contiguous")
    8
    >>> positive_int(0, "vector", "prove_contiguous")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    tylo.layouts.proofs.errors.ProofArgumentError: prove_contiguous: vector must be ...
    """
    v = _index(x)
    if isinstance(x, bool) or v is None or v < 1:
        raise ProofArgumentError(f"{what}: {name} must be a positive static int, got {x!r}")
    return v


def check_mode(form: Form, mode: object, what: str) -> int:
    """A top-level mode index of ``form`` (negative counts from the end).

    >>> from tylo.layouts import Layout
    >>> from tylo.layouts.proofs.normalize import to_form
    >>> check_mode(to_form(Layout((4, 8), (1, 4)), ""), -1, "prove_contiguous")
    1
    """
    m = _index(mode)
    r = form.rank
    if isinstance(mode, bool) or m is None or not -r <= m < r:
        raise ProofArgumentError(
            f"{what}: mode {mode!r} does not exist in {form}, which has {r} top-level "
            f"mode{'s' if r > 1 else ''}; give 0 <= mode < {r}"
        )
    return m % r


def symbolic_value(x: object, name: str, what: str) -> Value:
    """An int or a sympy integer expression (``base``, ``extent``)."""
    from tylo.layouts.symbolic import to_value

    try:
        return to_value(x)
    except LayoutError:
        raise ProofArgumentError(
            f"{what}: {name} must be an int or a sympy integer expression, got {reprlib.repr(x)}"
        ) from None


# -- assumptions ------------------------------------------------------------------------------


def normalize_assumptions(assuming: object, what: str) -> tuple[Fact, ...]:
    """The ``assuming=`` argument as a flat tuple of relations and divisibility facts.

    >>> from tylo.layouts.symbolic import dim, divisible
    >>> M, lda = dim("M"), dim("lda")
    >>> normalize_assumptions([lda >= M, [divisible(lda, 8)]], "prove")
    (lda >= M, divisible(lda, 8))
    """
    if assuming is None:
        return ()
    items = list(assuming) if isinstance(assuming, (list, tuple, set, frozenset)) else [assuming]
    out: list[Fact] = []
    for a in items:
        if isinstance(a, (list, tuple)):
            out.extend(normalize_assumptions(a, what))
            continue
        if isinstance(a, bool):
            a = sympy.true if a else sympy.false
        if not isinstance(a, (Divisible, sympy.logic.boolalg.Boolean)):
            raise ProofArgumentError(
                f"{what}: assumption {a!r} is not a relation or a divisibility fact; give "
                "sympy relations over the layout's symbols (lda >= M, sympy.Eq(lda, M)) or "
                "divisible(expr, d)"
            )
        if isinstance(a, sympy.logic.boolalg.And):
            out.extend(a.args)
        else:
            out.append(a)
    return tuple(out)


def _describe(a: Any) -> str:
    if isinstance(a, sympy.core.relational.Relational):
        return f"{text(a.lhs)} {a.rel_op} {text(a.rhs)}"
    return str(a) if isinstance(a, Divisible) else text(a)


def _relied(symbols: Iterable[sympy.Symbol], assumptions: tuple[Fact, ...]) -> str:
    facts = [_describe(a) for a in assumptions if a is not sympy.true]
    for s in sorted(symbols, key=lambda s: s.name):
        if isinstance(s, _symbols.Dim) and s.multiple_of > 1:
            facts.append(f"{s.multiple_of} | {s.name}")
    return "; relied on: " + ", ".join(facts) if facts else ""


def _check_names(
    symbols: frozenset[sympy.Symbol], assumptions: tuple[Fact, ...], what: str
) -> None:
    """Distinct symbols must have distinct names: counterexamples and guards key values
    by name (a kernel argument ``M`` has one value)."""
    every = set(symbols)
    for a in assumptions:
        if isinstance(a, Divisible):
            for x in (a.expr, a.divisor):
                every |= getattr(x, "free_symbols", set())
        elif is_sympy(a):
            every |= a.free_symbols
    seen: dict[str, Any] = {}
    for s in sorted(every, key=lambda s: (s.name, str(s.assumptions0))):
        other = seen.setdefault(s.name, s)
        if other is not s and other != s:
            raise ProofArgumentError(
                f"{what}: two different symbols are named {s.name} ({_symbol_text(other)} and "
                f"{_symbol_text(s)}); counterexamples and guards key values by name, so use "
                "one symbol per runtime value"
            )


def _symbol_text(s: Any) -> str:
    if isinstance(s, _symbols.Dim):
        return f"dim({s.name!r}, multiple_of={s.multiple_of})"
    upper = getattr(s, "upper", None)
    if upper is not None:
        return f"index_symbol({s.name!r}, upper={upper})"
    return f"{type(s).__name__}({s.name!r})"


_SAT: dict[tuple[frozenset[sympy.Symbol], tuple[Fact, ...]], bool] = {}


def _check_satisfiable(
    symbols: frozenset[sympy.Symbol], assumptions: tuple[Fact, ...], what: str
) -> None:
    if assumptions:
        try:
            facts_for(assumptions)
        except AssumptionError as e:
            raise e.within(what) from None
    key = (symbols, assumptions)
    if key in _SAT:
        return
    if (symbols or assumptions) and first_assignment(symbols, assumptions) is None:
        listed = ", ".join(_describe(a) for a in assumptions) or "none"
        raise AssumptionError(
            f"{what}: found no values of the symbols satisfying the assumptions [{listed}] "
            "and the symbols' own facts; the assumptions look unsatisfiable (nothing is "
            "proved under them): remove or correct the contradicting assumption"
        )
    if len(_SAT) > 4096:
        _SAT.clear()
    _SAT[key] = True


# -- verdicts ---------------------------------------------------------------------------------

_CACHE: dict[tuple[object, ...], Verdict] = {}


def clear_cache() -> None:
    """Forget every cached verdict (benchmarks measure cold proofs)."""
    _CACHE.clear()
    _SAT.clear()


def prove(problem: Problem, assuming: object, what: str) -> Verdict:
    """Run the layers for ``problem`` under ``assuming`` plus the assumptions in force."""
    extra = normalize_assumptions(assuming, what)
    allf = current_assumptions() + extra
    key = (problem.key, allf)
    hit = _CACHE.get(key)
    if hit is not None:
        return hit
    _check_names(problem.symbols, allf, what)
    _check_satisfiable(problem.symbols, allf, what)
    try:
        if not problem.symbols:
            verdict = _static(problem, allf)
        else:
            verdict = _symbolic(problem, extra, allf)
    except SizeBudgetError as e:
        raise e.within(what) from None
    if len(_CACHE) > 8192:
        _CACHE.clear()
    _CACHE[key] = verdict
    return verdict


def _static(problem: Problem, allf: tuple[Fact, ...]) -> Verdict:
    out = problem.check(problem.concretes({}), problem.param_values({}))
    if out.ok:
        return Verdict(PROVED, problem.prop, out.rule, subject=problem.subject, assumptions=allf)
    if out.ok is None:
        ob = Obligation(residual=f"{problem.prop} (checked by enumeration)")
        return Verdict(
            UNKNOWN,
            problem.prop,
            out.rule,
            obligation=ob,
            guard=Guard(problem, ob, allf),
            subject=problem.subject,
            assumptions=allf,
        )
    cex = _counterexample(problem, {}, out)
    ob = Obligation(residual=problem.prop)
    return Verdict(
        DISPROVED,
        problem.prop,
        f"{out.rule}; counterexample replayed",
        counterexample=cex,
        obligation=ob,
        guard=Guard(problem, ob, allf),
        subject=problem.subject,
        assumptions=allf,
    )


def _symbolic(problem: Problem, extra: tuple[Fact, ...], allf: tuple[Fact, ...]) -> Verdict:
    # The rules decide under the full assumption stack (the layouts package's own
    # coalesce reads only the stack), so ``extra`` is pushed rather than passed.
    with assuming(*extra):
        rr = problem.rules(())
    relied = _relied(problem.symbols, allf)
    if rr.proved:
        return Verdict(
            PROVED, problem.prop, rr.rule + relied, subject=problem.subject, assumptions=allf
        )
    ob = rr.obligation if rr.obligation is not None else Obligation(residual=problem.prop)
    guard = Guard(problem, ob, allf)
    found = _search(problem, allf)
    if found is not None:
        env, out = found
        cex = _counterexample(problem, env, out)
        values = ", ".join(f"{k}={v}" for k, v in cex.items() if k != "witness")
        return Verdict(
            DISPROVED,
            problem.prop,
            f"counterexample {values} found by smallest-first search and replayed",
            counterexample=cex,
            hint=_hint(ob, env, rr.hints),
            obligation=ob,
            guard=guard,
            subject=problem.subject,
            assumptions=allf,
        )
    return Verdict(
        UNKNOWN,
        problem.prop,
        f"{rr.rule}; no counterexample among the instances searched{relied}",
        hint=None if ob.residual else f"needs {ob}",
        obligation=ob,
        guard=guard,
        subject=problem.subject,
        assumptions=allf,
    )


SEARCH_SIZE_LIMIT = 1 << 16


def _search(problem: Problem, allf: tuple[Fact, ...]) -> tuple[Env, Outcome] | None:
    for env in candidates(problem.symbols, allf):
        try:
            cfs = problem.concretes(env)
            pvals = problem.param_values(env)
        except (ValueError, ZeroDivisionError):
            continue
        if any(c.size > SEARCH_SIZE_LIMIT for c in cfs):
            continue
        out = problem.check(cfs, pvals)
        if out.ok is False:
            return env, out
    return None


def _hint(ob: Obligation, env: Env, extra_atoms: tuple[Atom, ...] = ()) -> str | None:
    if not ob.residual:
        for clause in ob.clauses:
            if not any(a.holds(env) for a in clause):
                # name a condition on the symbols (``8 | 12 or M <= 4`` reads "M <= 4")
                symbolic = [a for a in clause if _has_symbols(a)]
                return f"needs {(symbolic or list(clause))[0].hint()}"
    for a in extra_atoms:
        if not a.holds(env):
            return f"needs {a.hint()}"
    return None


def _has_symbols(a: Any) -> bool:
    return any(is_sympy(x) and x.free_symbols for x in (a.lhs, a.rhs))


def _counterexample(problem: Problem, env: Env, out: Outcome) -> FrozenDict:
    """The counterexample dict (symbol values plus the witness), replayed first."""
    cfs = problem.concretes(env)
    pvals = problem.param_values(env)
    raw = out.witness
    if raw is None:
        raise ProofInternalError(f"{problem.prop}: a failed check without a witness; a bug in tylo")
    idx = raw["indices"]
    if len(cfs) == 1:
        coords = tuple(cfs[0].coordinate(i) for i in idx)
    else:
        coords = tuple(c.coordinate(idx[0]) if idx[0] < c.size else None for c in cfs)
    by_symbol = {s: env[s] for s in problem.symbols}
    objs = tuple(substitute(f.source, by_symbol) if by_symbol else f.source for f in problem.forms)
    try:
        ok = problem.replay(objs, coords, raw["offsets"], pvals, idx)
    except LayoutError as e:
        ok = False
        raw = dict(raw, replay_error=str(e))
    if not ok:
        raise ProofInternalError(
            f"{problem.prop}: the counterexample {raw} at {_names(env)} for {problem.subject} "
            "did not replay on the concrete layout; this is a bug in tylo.layouts.proofs"
        )
    witness = FrozenDict(
        coordinates=coords,
        indices=tuple(idx),
        offsets=tuple(raw["offsets"]),
        why=raw["why"],
        **{k: v for k, v in pvals.items()},
    )
    return FrozenDict({**_names(env), "witness": witness})


def _names(env: Env) -> dict[str, int]:
    return {s.name: v for s, v in sorted(env.items(), key=lambda kv: kv[0].name)}
