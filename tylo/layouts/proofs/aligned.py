"""Alignment: every vector of a mode starts at an aligned address.

The vectors of ``mode`` are the runs of ``vector`` consecutive indices of that mode that
start at multiples of ``vector``, for every coordinate of the other modes. The address of a
start is ``base + L(c)`` elements; it is aligned when ``align`` divides ``elem_bytes *
(base + L(c))``, i.e. when ``a = align / gcd(align, elem_bytes)`` divides ``base + L(c)``.

Rule (docs/proofs.md, exact): the starts are ``base`` plus non-negative combinations of
*generators*: every stride of another mode, and the strides of the start coordinates of
``mode`` itself (``vector * d0`` when ``vector`` divides the first extent after
coalescing, ...). Each generator occurs alone with coefficient 1, so every start is aligned
iff ``a | base`` and ``a | g`` for every generator ``g`` that occurs (its count ``>= 2``).
Each condition is decided by residue enumeration in the fact engine. A swizzle
``S<b,m,s>`` changes no bit below its destination bits (``m``, or ``m+|s|`` for ``s < 0``),
so the rule carries over when ``a`` divides ``2^m``.
"""

from __future__ import annotations

from functools import partial
from math import gcd
from typing import Any

from tylo.layouts._scope import Fact, Value
from tylo.layouts.inttuple import IntTuple, product
from tylo.layouts.layout import Layout
from tylo.layouts.proofs.engine import (
    Problem,
    RuleResult,
    check_mode,
    positive_int,
    prove,
    symbolic_value,
)
from tylo.layouts.proofs.normalize import Concrete, Form, Source, simplify, swizzle_bits, to_form
from tylo.layouts.proofs.obligation import Atom, Obligation
from tylo.layouts.proofs.static import Outcome, check_aligned
from tylo.layouts.proofs.verdict import Verdict
from tylo.layouts.symbolic import divides

__all__ = ["prove_aligned", "start_clauses"]


def prove_aligned(
    layout: Source,
    *,
    vector: int,
    elem_bytes: int,
    mode: int = 0,
    base: Value = 0,
    align: int = 16,
    assuming: object = (),
) -> Verdict:
    """Prove that every ``vector``-wide vector of ``mode`` starts ``align``-byte aligned.

    ``base`` (elements, int or symbolic) is added to every offset: the tensor's start
    relative to an ``align``-aligned allocation. ``elem_bytes`` is the element size.

    >>> from tylo.layouts import Layout, dim, divisible
    >>> M, K, lda = dim("M"), dim("K"), dim("lda")
    >>> A = Layout((M, K), (1, lda))
    >>> prove_aligned(
    ...     A, vector=8, elem_bytes=2, assuming=[divisible(M, 8), divisible(lda, 8)]
    ... ).status
    'proved'
    >>> v = prove_aligned(
    ...     A, vector=8, elem_bytes=2, assuming=[divisible(M, 8), divisible(lda, 4), lda >= M]
    ... )
    >>> v.status, v.values, v.hint
    ('disproved', {'K': 2, 'M': 8, 'lda': 12}, 'needs 8 | lda (assume divisible(lda, 8))')
    """
    what = "prove_aligned"
    form = to_form(layout, what)
    v = positive_int(vector, "vector", what)
    eb = positive_int(elem_bytes, "elem_bytes", what)
    al = positive_int(align, "align", what)
    m = check_mode(form, mode, what)
    b = symbolic_value(base, "base", what)
    a_e = al // gcd(al, eb)

    problem = Problem(
        "aligned",
        (form,),
        check=partial(_check, v, a_e, m),
        rules=partial(_rules, form, v, a_e, m, b),
        replay=partial(_replay, a_e),
        params={"base": b},
        static=(v, eb, al, m),
        subject=f"{form} (vector {v}, {eb}-byte elements, {al}-byte alignment, mode {m})",
    )
    return prove(problem, assuming, what)


def start_clauses(
    form: Form, v: int, mode: int, a_e: int, base: Any, extra: tuple[Fact, ...]
) -> list[tuple[Atom, ...]] | None:
    """Clauses (each ``a | g`` or ``count <= 1``) under which every vector start of
    ``mode``, plus ``base``, is a multiple of ``a_e`` (before any outer map); None when
    the start coordinates of ``mode`` are not regular (neither of the vector width and
    an extent is known to divide the other)."""
    clauses: list[tuple[Atom, ...]] = []

    def need(g: Any, extent: Any, per: Any = 1) -> None:
        """Generator ``g`` occurs when ``extent > per`` (a second start exists)."""
        if divides(a_e, g, assumptions=extra) is True:
            return
        absent = Atom("<=", extent, per)
        never = absent.decide(extra)
        if never is True:
            return
        atoms: tuple[Atom, ...] = (Atom("|", a_e, g),)
        if never is None:
            atoms += (absent,)
        clauses.append(atoms)

    if divides(a_e, base, assumptions=extra) is not True:
        clauses.append((Atom("|", a_e, base),))
    for k, top in enumerate(form.modes):
        if k != mode:
            for e, d in top:
                need(d, e)
    rem: Any = v
    pairs = simplify(form.modes[mode])
    for k, (e, d) in enumerate(pairs):
        if rem == 1:
            need(d, e)
        elif divides(rem, e, assumptions=extra) is True or k == len(pairs) - 1:
            # starts at coordinates 0, rem, 2*rem, ... of this pair (the last pair of the
            # mode need not be divisible: nothing wraps into a later pair)
            need(rem * d, e, rem)
            rem = 1
        elif type(e) is int and rem % e == 0:
            rem //= e
        else:
            return None
    return clauses


# module-level functions (partials of them), not closures: a verdict's guard keeps its
# problem, and a guard must pickle (to be sent to a process pool)
def _check(v: int, a_e: int, m: int, cfs: tuple[Concrete, ...], p: dict[str, int]) -> Outcome:
    return check_aligned(cfs[0], v, a_e, m, p["base"])


def _replay(
    a_e: int,
    objs: tuple[Source, ...],
    coords: tuple[IntTuple, ...],
    offsets: tuple[int, ...],
    pvals: dict[str, int],
    idx: tuple[int, ...],
) -> bool:
    o = objs[0](coords[0])
    return bool(o == offsets[0] and (pvals["base"] + o) % a_e != 0)


def _rules(
    form: Form, v: int, a_e: int, mode: int, base: Any, extra: tuple[Fact, ...]
) -> RuleResult:
    if a_e == 1:
        return RuleResult(True, "alignment of one element")
    if isinstance(form.outer, Layout):
        return RuleResult(False, "no symbolic rule for an outer layout")
    note = ""
    if form.swizzle is not None:
        low = swizzle_bits(form.outer)[0]
        if (1 << low) % a_e:
            return RuleResult(False, f"the swizzle {form.outer} moves bits below the alignment")
        note = f" ({form.outer} keeps residues modulo {1 << low})"
    clauses = start_clauses(form, v, mode, a_e, base + form.offset, extra)
    if clauses is None:
        return RuleResult(False, "the vector starts of the mode are not regular")
    if not clauses:
        return RuleResult(
            True,
            f"alignment of the generating strides: {a_e} divides the base and every "
            f"stride between vector starts{note}",
        )
    return RuleResult(
        False, "alignment of the generating strides not settled", Obligation(tuple(clauses))
    )


def mode_size(obj: Any, mode: int) -> Any:
    """The size of top-level mode ``mode`` of a (substituted) layout."""
    shape = obj.shape
    return product(shape[mode] if type(shape) is tuple else shape)
