"""Sparse multivariate polynomials with exact rational coefficients (private).

The fact engine in :mod:`tylo.layouts._facts` rewrites every expression into a polynomial
over fresh variables and reads signs and residues off its coefficients (docs/proofs.md: "expand
as a polynomial and read coefficient signs"). sympy's general expression machinery costs
hundreds of microseconds per check; these plain dicts cost a few.

A polynomial is a ``dict`` mapping a monomial to a nonzero coefficient (``int`` or
``Fraction``). A monomial is a tuple of ``(variable id, exponent)`` pairs sorted by id;
the constant monomial is ``()``. Polynomials are never mutated after construction.
"""

from __future__ import annotations

from fractions import Fraction
from math import gcd, lcm

Mono = tuple[tuple[int, int], ...]
Coeff = int | Fraction
Poly = dict[Mono, Coeff]

ONE: Poly = {(): 1}
ZERO: Poly = {}


def const(c: int | Fraction) -> Poly:
    return {(): c} if c else {}


def var(v: int) -> Poly:
    return {((v, 1),): 1}


def _clean(c: int | Fraction) -> int | Fraction:
    if type(c) is Fraction and c.denominator == 1:
        return c.numerator
    return c


def add(p: Poly, q: Poly) -> Poly:
    if len(p) < len(q):
        p, q = q, p
    r = dict(p)
    for m, c in q.items():
        s = r.get(m, 0) + c
        if s:
            r[m] = _clean(s)
        else:
            r.pop(m, None)
    return r


def scale(p: Poly, k: int | Fraction) -> Poly:
    if not k:
        return {}
    return {m: _clean(c * k) for m, c in p.items()}


def sub(p: Poly, q: Poly) -> Poly:
    return add(p, scale(q, -1))


def _mono_mul(a: Mono, b: Mono) -> Mono:
    if not a:
        return b
    if not b:
        return a
    d = dict(a)
    for v, e in b:
        d[v] = d.get(v, 0) + e
    return tuple(sorted(d.items()))


def mul(p: Poly, q: Poly) -> Poly:
    r: Poly = {}
    for ma, ca in p.items():
        for mb, cb in q.items():
            m = _mono_mul(ma, mb)
            s = r.get(m, 0) + ca * cb
            if s:
                r[m] = _clean(s)
            else:
                r.pop(m, None)
    return r


def power(p: Poly, n: int) -> Poly:
    r = ONE
    base = p
    while n:
        if n & 1:
            r = mul(r, base)
        n >>= 1
        if n:
            base = mul(base, base)
    return r


def variables(p: Poly) -> set[int]:
    return {v for m in p for v, _ in m}


def substitute(p: Poly, v: int, q: Poly) -> Poly:
    """Replace variable ``v`` by polynomial ``q``."""
    if not any(w == v for m in p for w, _ in m):
        return p
    r: Poly = {}
    powers: dict[int, Poly] = {}
    for m, c in p.items():
        e = 0
        rest = []
        for w, k in m:
            if w == v:
                e = k
            else:
                rest.append((w, k))
        term = {tuple(rest): c}
        if e:
            qe = powers.get(e)
            if qe is None:
                qe = powers[e] = power(q, e)
            term = mul(term, qe)
        r = add(r, term)
    return r


def is_const(p: Poly) -> bool:
    return not p or (len(p) == 1 and () in p)


def const_value(p: Poly) -> int | Fraction:
    return p.get((), 0)


def denominator(p: Poly) -> int:
    """The least common multiple of the coefficients' denominators."""
    d = 1
    for c in p.values():
        if type(c) is Fraction:
            d = lcm(d, c.denominator)
    return d


def integer_content(p: Poly) -> int:
    """gcd of the (integer) coefficients of the non-constant monomials (0 if none)."""
    g = 0
    for m, c in p.items():
        if m:
            g = gcd(g, int(c))
    return g


def evaluate(p: Poly, values: dict[int, int]) -> int | Fraction:
    total: int | Fraction = 0
    for m, c in p.items():
        t = c
        for v, e in m:
            t *= values[v] ** e
        total += t
    return _clean(total)


def linear_isolated(p: Poly, v: int) -> int | Fraction | None:
    """The coefficient of ``v`` if ``v`` occurs only in the degree-1 monomial ``v``."""
    coeff = None
    for m, c in p.items():
        for w, e in m:
            if w == v:
                if m != ((v, 1),):
                    return None
                coeff = c
    return coeff


def _lex_key(m: Mono, order: dict[int, int], n: int) -> tuple[int, ...]:
    key = [0] * n
    for v, e in m:
        key[order[v]] = e
    return tuple(key)


def exact_quotient(p: Poly, q: Poly) -> Poly | None:
    """``p / q`` if ``q`` divides ``p`` exactly as polynomials, else None (lex division)."""
    if not q:
        return None
    vs = sorted(variables(p) | variables(q))
    order = {v: i for i, v in enumerate(vs)}
    n = len(vs)
    lead_q = max(q, key=lambda m: _lex_key(m, order, n))
    lq = dict(lead_q)
    cq = q[lead_q]
    rem = p
    quot: Poly = {}
    for _ in range(10000):
        if not rem:
            return quot
        lead = max(rem, key=lambda m: _lex_key(m, order, n))
        ld = dict(lead)
        if any(ld.get(v, 0) < e for v, e in lq.items()):
            return None
        m = tuple(sorted((v, e - lq.get(v, 0)) for v, e in ld.items() if e - lq.get(v, 0)))
        c = Fraction(rem[lead]) / cq
        t = {m: _clean(c)}
        quot = add(quot, t)
        rem = sub(rem, mul(t, q))
    return None
