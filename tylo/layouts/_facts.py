"""The fact engine behind every symbolic decision (private; see ``symbolic.py``).

A :class:`Facts` object is built once per assumption set. It rewrites each symbol as a
polynomial in fresh integer variables that encodes what is known about it (docs/proofs.md):

- a :class:`Dim` ``N`` with ``multiple_of=16`` becomes ``16 + 16*t`` (``t >= 0``);
- an index symbol becomes a variable ``t >= 0``; its bound ``t <= U - 1`` is kept as a
  fact, and tried as the alternative substitution ``t = U - 1 - w``;
- ``lda >= M`` rebinds ``lda``'s variable so that ``lda = M + z`` (``z >= 0``);
- ``Eq(lda, M)`` substitutes; ``divisible(N, 8)`` rebinds ``N``'s variable to a residue
  class ``r + 8*w``.

Questions are then polynomial: ``P >= 0`` is proved when every coefficient is
non-negative (all variables are non-negative), possibly after subtracting a multiple of a
stored fact; disproved when ``-P - 1 >= 0`` is proved. Divisibility by a static ``d`` is
decided by enumerating the variables' residues modulo ``d`` (exact for integer
polynomials), divisibility by a symbolic ``d`` by exact polynomial division. Anything else
is "unknown" (None): callers raise an error naming the missing fact.
"""

from __future__ import annotations

import itertools
import threading
from fractions import Fraction
from math import gcd, lcm, prod
from typing import Any

from tylo.layouts import _poly as P
from tylo.layouts._fact_data import Divisible
from tylo.layouts._lazy import is_sympy, lazy, sympy
from tylo.layouts._scope import Fact
from tylo.layouts.errors import AssumptionError

_symbols = lazy("tylo.layouts._symbols")  # sympy's symbol classes, imported on first use

NONNEG, INT, REAL = 0, 1, 2
_LOCK = threading.RLock()
_ENUM_LIMIT = 1 << 16


def _text(x: Any) -> str:
    return sympy.sstr(x) if is_sympy(x) else str(x)


class Facts:
    """Everything known under one tuple of assumptions, as polynomial rewrites."""

    def __init__(self, assumptions: tuple[Fact, ...]) -> None:
        self.assumptions = assumptions
        self.bind: dict[Any, P.Poly] = {}  # symbol or opaque atom -> polynomial
        self.kind: list[int] = []  # variable id -> NONNEG / INT / REAL
        self.names: list[Any] = []  # what each variable stands for (see name())
        self.ge: list[P.Poly] = []  # polynomials known to be >= 0
        # owner of each ge fact: the variable whose own range it states (an index symbol's
        # bound, a Mod's residue range), or None for an assumption. An owned fact is used
        # only for questions that mention its owner: a possibly empty range (a loop index
        # ``k < trips`` with ``trips`` maybe 0) then cannot leak into unrelated decisions.
        self.ge_owner: list[frozenset[int] | None] = []
        self.eq: list[P.Poly] = []  # polynomials known to be == 0 (not solved)
        self.div: list[tuple[P.Poly, int]] = []  # (integer polynomial, modulus): modulus | poly
        self.sdiv: list[tuple[P.Poly, P.Poly]] = []  # (d, e) with symbolic d: d | e
        self.upper: dict[int, P.Poly] = {}  # variable -> its inclusive upper bound
        self.alt: dict[int, int] = {}  # variable -> slack variable of the upper bound
        self._cache: dict[Any, P.Poly] = {}
        for a in assumptions:
            self._add(a)

    # -- variables and conversion ---------------------------------------------------------

    def _new(self, kind: int, name: Any) -> int:
        self.kind.append(kind)
        self.names.append(name)
        return len(self.kind) - 1

    def name(self, v: int) -> str:
        """The readable name of variable ``v``: its atom, with a suffix for variables
        derived from another (``x+`` after a substitution, ``x/4`` after a division).
        Rendered on demand: printing a large atom costs more than the proof uses it."""
        n = self.names[v]
        if type(n) is tuple:
            base, suffix = n
            return f"{self.name(base) if type(base) is int else _text(base)}{suffix}"
        return n if type(n) is str else _text(n)

    def poly(self, x: Any) -> P.Poly:
        """The polynomial (over fresh variables) equal to the expression ``x``."""
        if type(x) is int:
            return P.const(x)
        got = self._cache.get(x)
        if got is None:
            got = self._cache[x] = self._convert(x)
        return got

    def _convert(self, x: Any) -> P.Poly:
        if isinstance(x, (bool, sympy.logic.boolalg.BooleanAtom, sympy.core.relational.Relational)):
            raise AssumptionError(f"expected an integer expression, got the condition {x}")
        if not is_sympy(x):
            return P.const(int(x))
        if x.is_Integer:
            return P.const(int(x))
        if x.is_Rational:
            return P.const(Fraction(int(x.p), int(x.q)))
        if x.is_Symbol:
            return self._leaf(x)
        if x.is_Add:
            r: P.Poly = {}
            for a in x.args:
                r = P.add(r, self.poly(a))
            return r
        if x.is_Mul:
            r = P.ONE
            for a in x.args:
                r = P.mul(r, self.poly(a))
            return r
        if x.is_Pow and x.exp.is_Integer and x.exp >= 0:
            return P.power(self.poly(x.base), int(x.exp))
        return self._leaf(x)

    def _leaf(self, atom: Any) -> P.Poly:
        got = self.bind.get(atom)
        if got is not None:
            return got
        with _LOCK:  # Facts objects are shared between threads; binding mutates them
            got = self.bind.get(atom)
            return got if got is not None else self._bind_new(atom)

    def _bind_new(self, atom: Any) -> P.Poly:
        name = atom
        if isinstance(atom, _symbols.Dim):
            v = self._new(NONNEG, name)
            m = atom.multiple_of
            p: P.Poly = {(): m, ((v, 1),): m}
        elif isinstance(atom, _symbols.IndexSymbol):
            v = self._new(NONNEG, name)
            p = P.var(v)
            if atom.upper is not None:
                ub = P.sub(self.poly(atom.upper), P.ONE)
                self.upper[v] = ub
                self.alt[v] = self._new(NONNEG, (v, "'"))
                self._fact(P.sub(ub, p), v)
        elif atom.is_Symbol:
            if atom.is_integer:
                if atom.is_positive:
                    p = P.add(P.ONE, P.var(self._new(NONNEG, name)))
                elif atom.is_nonnegative:
                    p = P.var(self._new(NONNEG, name))
                elif atom.is_negative:
                    p = P.sub(P.const(-1), P.var(self._new(NONNEG, name)))
                else:
                    p = P.var(self._new(INT, name))
            else:
                p = P.var(self._new(REAL, name))
        elif atom.func in (sympy.floor, sympy.ceiling):
            arg = self.poly(atom.args[0])
            p = P.var(self._new(NONNEG if self.prove(arg) else INT, name))
        elif isinstance(atom, sympy.Mod):
            b = self.poly(atom.args[1])
            if self.prove(P.sub(b, P.ONE)):
                v = self._new(NONNEG, name)
                p = P.var(v)
                self.upper[v] = P.sub(b, P.ONE)
                self.alt[v] = self._new(NONNEG, (v, "'"))
                self._fact(P.sub(self.upper[v], p), v)
            else:
                p = P.var(self._new(INT, name))
        elif atom.is_integer:
            p = P.var(self._new(NONNEG if atom.is_nonnegative else INT, name))
        else:
            p = P.var(self._new(REAL, name))
        self.bind[atom] = p
        return p

    def _fact(self, g: P.Poly, owner: int | None) -> None:
        self.ge.append(g)
        self.ge_owner.append(None if owner is None else frozenset((owner,)))

    def integral(self, p: P.Poly) -> bool:
        """True when ``p`` is integer-valued: integer coefficients, integer variables."""
        kind = self.kind
        for m, c in p.items():
            if type(c) is not int:
                return False
            for v, _ in m:
                if kind[v] == REAL:
                    return False
        return True

    # -- proving signs --------------------------------------------------------------------

    def _coeffs_nonneg(self, p: P.Poly, strict: bool) -> bool:
        c0 = p.get((), 0)
        if c0 < 0 or (strict and c0 == 0):
            return False
        kind = self.kind
        for m, c in p.items():
            if not m:
                continue
            if c < 0:
                return False
            for v, e in m:
                if kind[v] != NONNEG and e % 2:
                    return False
        return True

    def _with_facts(self, p: P.Poly, strict: bool) -> bool:
        if self._coeffs_nonneg(p, strict):
            return True
        mentioned = None
        for g, owner in zip(self.ge, self.ge_owner):
            if owner is not None:
                if mentioned is None:
                    mentioned = P.variables(p)
                if owner.isdisjoint(mentioned):
                    continue
            k = None
            for m, c in p.items():
                if c < 0:
                    gc = g.get(m, 0)
                    if gc >= 0:
                        k = None
                        break
                    r = Fraction(c) / gc
                    k = r if k is None or r > k else k
            if k is not None and self._coeffs_nonneg(P.sub(p, P.scale(g, k)), strict):
                return True
        return False

    def prove(self, p: P.Poly, strict: bool = False) -> bool:
        """True when ``p >= 0`` (``> 0`` if strict) holds for all values of the variables."""
        if self._with_facts(p, strict):
            return True
        bounded = [v for v in P.variables(p) if v in self.upper]
        if not bounded:
            return False
        choices = [bounded] + ([[v] for v in bounded] if len(bounded) > 1 else [])
        for chosen in choices:
            q = p
            for v in chosen:
                q = P.substitute(q, v, P.sub(self.upper[v], P.var(self.alt[v])))
            if self._coeffs_nonneg(q, strict):
                return True
        return False

    def nonneg(self, p: P.Poly) -> bool | None:
        """Decide ``p >= 0``: True (always), False (never), None (depends on the values)."""
        if self.prove(p):
            return True
        neg = P.scale(p, -1)
        if self.integral(p):
            if self.prove(P.sub(neg, P.ONE)):
                return False
        elif self.prove(neg, strict=True):
            return False
        return None

    def is_zero(self, p: P.Poly) -> bool | None:
        """Decide ``p == 0``."""
        if not p:
            return True
        if P.is_const(p):
            return False
        if self.integral(p):
            if self.prove(P.sub(p, P.ONE)) or self.prove(P.sub(P.scale(p, -1), P.ONE)):
                return False
            g = P.integer_content(p)
            if g > 1 and P.const_value(p) % g:
                return False  # g divides every value of p - p(0) but not p(0)
        elif self.prove(p, strict=True) or self.prove(P.scale(p, -1), strict=True):
            return False
        for e in self.eq:
            q = P.exact_quotient(p, e)
            if q is not None and P.is_const(q):
                return True
        return None

    # -- divisibility ---------------------------------------------------------------------

    def divides_static(self, m: int, p: P.Poly) -> bool | None:
        """Decide ``m | p`` for a static ``m >= 1`` by residue enumeration."""
        if any(self.kind[v] == REAL for v in P.variables(p)):
            return None
        den = P.denominator(p)
        mod = m * den
        q: P.Poly = {mono: int(c * den) % mod for mono, c in p.items()}
        q = {mono: c for mono, c in q.items() if c}
        if not q:
            return True
        vs = sorted(P.variables(q))
        if not vs:
            return False
        # Divisibility facts constrain the residues of the question's variables even when
        # they mention other variables too (``4 | lda`` with ``lda = 2*M + z``): take every
        # fact connected to the question, enumerating its extra variables as well.
        vset = set(vs)
        modulus = mod
        facts: list[tuple[P.Poly, int]] = []
        pending = [(g, dm) for g, dm in self.div]
        grew = True
        while grew:
            grew = False
            for g, dm in list(pending):
                gv = P.variables(g)
                if gv & vset and lcm(modulus, dm) <= 4096:
                    modulus = lcm(modulus, dm)
                    facts.append((g, dm))
                    pending.remove((g, dm))
                    vset |= gv
                    grew = True
        vs = sorted(vset)
        ranges = []
        for v in vs:
            ub = self.upper.get(v)
            n = modulus
            if ub is not None and P.is_const(ub):
                n = max(0, min(n, int(P.const_value(ub)) + 1))
            ranges.append(n)
        count = prod(ranges)
        if count == 0:
            return True
        if count > _ENUM_LIMIT:
            return None
        if count > 512:
            return _enumerate_numpy(q, mod, vs, ranges, facts)
        seen_div = seen_not = False
        for vals in itertools.product(*(range(n) for n in ranges)):
            env = dict(zip(vs, vals))
            if any(P.evaluate(g, env) % dm for g, dm in facts):
                continue
            if P.evaluate(q, env) % mod:
                seen_not = True
            else:
                seen_div = True
            if seen_div and seen_not:
                return None
        if seen_div == seen_not:
            return True  # no residue satisfies the facts: vacuous
        return seen_div

    def divides(self, d: Any, e: Any) -> bool | None:
        """Decide ``d | e`` for integer expressions."""
        pe = self.poly(e)
        if not pe:
            return True
        pd = self.poly(d)
        if P.is_const(pd):
            c = P.const_value(pd)
            if c == 0:
                z = self.is_zero(pe)
                return z
            if type(c) is not int:
                return None
            return self.divides_static(abs(c), pe)
        q = P.exact_quotient(pe, pd)
        if q is not None:
            if self.integral(q):
                return True
            if self.divides_static(1, q):
                return True
        for fd, fe in self.sdiv:
            if self._implied_by(pd, pe, fd, fe):
                return True
        # 0 < e < d (both positive) means d cannot divide e.
        if self.prove(P.sub(pe, P.ONE)) and self.prove(P.sub(P.sub(pd, pe), P.ONE)):
            return False
        return None

    def _implied_by(self, qd: P.Poly, qe: P.Poly, fd: P.Poly, fe: P.Poly) -> bool:
        """Does the fact ``fd | fe`` give ``qd | qe``? (``qd | fd | fe | qe``, or the
        fact scaled by a constant.)"""
        k = P.exact_quotient(fd, qd)
        if k is None:
            return False
        if P.is_const(k) and P.sub(fe, P.scale(qe, P.const_value(k))) == {}:
            return True
        if not self.integral(k):
            return False
        q = P.exact_quotient(qe, fe) if fe else None
        return q is not None and self.integral(q)

    # -- adding assumptions ---------------------------------------------------------------

    def _rebind(self, v: int, q: P.Poly) -> None:
        def s(p: P.Poly) -> P.Poly:
            return P.substitute(p, v, q)

        self.bind = {a: s(p) for a, p in self.bind.items()}
        self.ge = [s(g) for g in self.ge]
        qv = P.variables(q)  # a rebound owner passes ownership to its replacement's variables
        self.ge_owner = [o if o is None or v not in o else (o - {v}) | qv for o in self.ge_owner]
        self.eq = [s(g) for g in self.eq]
        self.div = [(s(g), m) for g, m in self.div]
        self.upper = {w: s(u) for w, u in self.upper.items() if w != v}
        self._cache.clear()

    def _unsat(self, fact: Any, why: str) -> AssumptionError:
        listed = ", ".join(
            _text(a) if not isinstance(a, Divisible) else str(a) for a in self.assumptions
        )
        return AssumptionError(
            f"assuming: the assumptions [{listed}] are unsatisfiable: {fact} {why}; "
            "remove or correct the contradicting assumption"
        )

    def _pick(
        self, e: P.Poly, preferred: set[int], coeffs: tuple[int, ...]
    ) -> tuple[int, Any] | None:
        best = None
        for m, c in e.items():
            if len(m) != 1 or m[0][1] != 1 or c not in coeffs:
                continue
            v = m[0][0]
            if self.kind[v] == REAL or P.linear_isolated(e, v) is None:
                continue
            rank = (v in preferred, v)
            if best is None or rank > best[0]:
                best = (rank, v, c)
        return None if best is None else (best[1], best[2])

    def _add(self, a: Any) -> None:
        if a is True or a is sympy.true or a is None:
            return
        if a is False or a is sympy.false:
            raise self._unsat(a, "is false")
        if isinstance(a, Divisible):
            self._add_divisible(a)
            return
        if not isinstance(a, sympy.core.relational.Relational):
            raise AssumptionError(
                f"assuming: {a!r} is not a fact; give sympy relations over the symbols "
                "(lda >= m, sympy.Eq(lda, m)) or divisible(expr, d)"
            )
        op = a.rel_op
        if op == "!=":
            return  # only checked when sampling values
        lhs, rhs = a.lhs, a.rhs
        preferred = P.variables(self.poly(lhs))
        if op in (">=", ">"):
            e = P.sub(self.poly(lhs), self.poly(rhs))
        elif op in ("<=", "<"):
            e = P.sub(self.poly(rhs), self.poly(lhs))
            preferred = P.variables(self.poly(rhs))
        else:
            self._add_eq(a, P.sub(self.poly(lhs), self.poly(rhs)), preferred)
            return
        den = P.denominator(e)
        e = P.scale(e, den)
        if op in (">", "<"):
            e = P.sub(e, P.ONE) if self.integral(e) else e
        self._add_ge(a, e, preferred, strict=op in (">", "<") and not self.integral(e))

    def _add_ge(self, a: Any, e: P.Poly, preferred: set[int], strict: bool) -> None:
        if self.integral(e):
            g = P.integer_content(e)
            if g > 1:
                e = {m: c // g for m, c in e.items()}
                e = {m: c for m, c in e.items() if c}
        if self.prove(e, strict):
            return
        neg = P.scale(e, -1)
        if self.integral(e):
            contradicted = self.prove(P.sub(neg, P.ONE))
        else:  # e >= 0 fails when e < 0 everywhere; e > 0 fails when e <= 0 everywhere
            contradicted = self.prove(neg, strict=not strict)
        if contradicted:
            raise self._unsat(a, "contradicts the symbols' own facts or an earlier assumption")
        picked = None if strict else self._pick(e, preferred, (1,))
        if picked is None:
            self._fact(e, None)
            return
        v, _ = picked
        rest = P.sub(e, P.var(v))
        z = self._new(self.kind[v], (v, "+"))
        newv = P.sub(P.var(z), rest)
        needs_fact = self.kind[v] == NONNEG and not self.prove(newv)
        self._rebind(v, newv)
        if needs_fact:
            self._fact(newv, None)

    def _add_eq(self, a: Any, e: P.Poly, preferred: set[int]) -> None:
        if not e:
            return
        if self.is_zero(e) is False:
            raise self._unsat(a, "can never hold")
        picked = self._pick(e, preferred, (1, -1))
        if picked is None:
            self.eq.append(P.scale(e, P.denominator(e)))
            return
        v, c = picked
        newv = P.scale(P.sub(e, P.scale(P.var(v), c)), -Fraction(1) / c)
        needs_fact = self.kind[v] == NONNEG and not self.prove(newv)
        self._rebind(v, newv)
        if needs_fact:
            self._fact(newv, None)

    def _add_divisible(self, a: Divisible) -> None:
        d = a.divisor
        if isinstance(d, sympy.Integer):
            d = int(d)
        if type(d) is not int:
            self.sdiv.append((self.poly(d), self.poly(a.expr)))
            return
        if d == 0:
            raise AssumptionError(f"assuming: {a!r} has divisor 0; a divisor must be nonzero")
        m = abs(d)
        p = self.poly(a.expr)
        known = self.divides_static(m, p)
        if known is True:
            return
        if known is False:
            raise self._unsat(a, "can never hold")
        den = P.denominator(p)
        q = P.scale(p, den)
        mod = m * den
        linear = [mono for mono in q if mono]
        if len(linear) == 1 and len(linear[0]) == 1 and linear[0][0][1] == 1:
            v = linear[0][0][0]
            coeff = int(q[linear[0]]) % mod
            c0 = int(q.get((), 0))
            g = gcd(coeff, mod)
            if self.kind[v] != REAL and g and c0 % g == 0:
                mod_g = mod // g
                r0 = (-(c0 // g) * pow(coeff // g, -1, mod_g)) % mod_g if mod_g > 1 else 0
                w = self._new(self.kind[v], (v, f"/{mod_g}"))
                self._rebind(v, P.add(P.const(r0), P.scale(P.var(w), mod_g)))
                return
        self.div.append((q, mod))


def _enumerate_numpy(
    q: P.Poly, mod: int, vs: list[int], ranges: list[int], facts: list[tuple[P.Poly, int]]
) -> bool | None:
    import numpy as np

    # residues below 2**31 keep every product below 2**62 in int64; larger moduli use
    # Python ints (a wrapped product would change the residue)
    dt: Any = np.int64 if max([mod] + [dm for _, dm in facts]) < 1 << 31 else object
    grids = np.meshgrid(*(np.arange(n).astype(dt) for n in ranges), indexing="ij")
    env = {v: g.ravel() for v, g in zip(vs, grids)}

    def ev(p: P.Poly, m: int) -> Any:
        total = np.zeros(grids[0].size, dtype=dt)
        for mono, c in p.items():
            t = np.full(total.shape, int(c) % m, dtype=dt)
            for v, e in mono:
                for _ in range(e):
                    t = (t * (env[v] % m)) % m
            total = (total + t) % m
        return total

    keep = np.ones(grids[0].size, dtype=bool)
    for g, dm in facts:
        keep &= ev(g, dm) == 0
    vals = ev(q, mod)[keep]
    if vals.size == 0:
        return True
    zero = vals == 0
    if bool(zero.all()):
        return True
    if not bool(zero.any()):
        return False
    return None


_FACTS: dict[tuple[Fact, ...], Facts] = {}


def facts_for(assumptions: tuple[Fact, ...]) -> Facts:
    """The (cached) :class:`Facts` of an assumption tuple; raises if unsatisfiable."""
    f = _FACTS.get(assumptions)
    if f is None:
        f = Facts(assumptions)
        if len(_FACTS) > 512:
            _FACTS.clear()
        _FACTS[assumptions] = f
    return f
