"""Contiguity: the vectors of a mode cover consecutive offsets.

The vectors of ``mode`` are the runs of ``vector`` consecutive indices of that mode that
start at multiples of ``vector`` (for every coordinate of the other modes); the property
holds when ``vector`` divides the mode's size and each vector's offsets are consecutive.

Rule (docs/proofs.md): coalesce the mode (drop extent-1 modes, merge ``s0:d0, s1:d1`` when
``d1 == s0*d0`` is an identity); the property holds when the first stride is 1 and
``vector`` divides the first extent (exact for static layouts). Under a swizzle
``S<b,m,s>`` a run of ``2^m`` offsets starting at a multiple of ``2^m`` moves as a block,
so a vector of width ``v | 2^m`` that is contiguous and ``v``-aligned before the swizzle
stays contiguous; the alignment of the starts is the generator rule of
:mod:`tylo.layouts.proofs.aligned`.
"""

from __future__ import annotations

import itertools
from functools import partial

from tylo.layouts._scope import Fact
from tylo.layouts.inttuple import IntTuple
from tylo.layouts.layout import Layout
from tylo.layouts.proofs.aligned import mode_size, start_clauses
from tylo.layouts.proofs.engine import Problem, RuleResult, check_mode, positive_int, prove
from tylo.layouts.proofs.normalize import (
    Concrete,
    Form,
    Source,
    simplify,
    swizzle_block_bits,
    to_form,
)
from tylo.layouts.proofs.obligation import Atom, Obligation, text
from tylo.layouts.proofs.static import Outcome, check_contiguous
from tylo.layouts.proofs.verdict import Verdict

__all__ = ["prove_contiguous"]


def prove_contiguous(
    layout: Source, *, vector: int, mode: int = 0, assuming: object = ()
) -> Verdict:
    """Prove that every ``vector``-wide vector of ``mode`` covers consecutive offsets.

    >>> from tylo.layouts import Layout, dim, divisible
    >>> M, K, lda = dim("M"), dim("K"), dim("lda")
    >>> A = Layout((M, K), (1, lda))
    >>> prove_contiguous(A, vector=8, assuming=[divisible(M, 8), lda >= M]).status
    'proved'
    >>> v = prove_contiguous(A, vector=8, assuming=[lda >= M])
    >>> v.status, v.values["M"], v.hint
    ('disproved', 1, 'needs 8 | M (assume divisible(M, 8))')
    """
    what = "prove_contiguous"
    form = to_form(layout, what)
    v = positive_int(vector, "vector", what)
    m = check_mode(form, mode, what)

    problem = Problem(
        "contiguous",
        (form,),
        check=partial(_check, v, m),
        rules=partial(_rules, form, v, m),
        replay=partial(_replay, v, m),
        static=(v, m),
        subject=f"{form} (vector {v}, mode {m})",
    )
    return prove(problem, assuming, what)


# module-level functions (partials of them), not closures: a verdict's guard keeps its
# problem, and a guard must pickle (to be sent to a process pool)
def _check(v: int, m: int, cfs: tuple[Concrete, ...], p: dict[str, int]) -> Outcome:
    return check_contiguous(cfs[0], v, m)


def _replay(
    v: int,
    m: int,
    objs: tuple[Source, ...],
    coords: tuple[IntTuple, ...],
    offsets: tuple[int, ...],
    pvals: dict[str, int],
    idx: tuple[int, ...],
) -> bool:
    obj = objs[0]
    offs = tuple(obj(c) for c in coords)
    if offs != tuple(offsets):
        return False
    if mode_size(obj, m) % v:
        return True
    return len(offs) == v and any(b - a != 1 for a, b in itertools.pairwise(offs))


def _rules(form: Form, v: int, mode: int, extra: tuple[Fact, ...]) -> RuleResult:
    if v == 1:
        return RuleResult(True, "vector width 1")
    if isinstance(form.outer, Layout):
        return RuleResult(False, "no symbolic rule for an outer layout")
    pairs = simplify(form.modes[mode])
    if not pairs:
        return RuleResult(False, f"mode {mode} has a single element, fewer than {v}")
    e0, d0 = pairs[0]
    clauses: list[tuple[Atom, ...]] = []
    for atom in (Atom("|", v, e0), Atom("==", d0, 1)):
        if atom.decide(extra) is not True:
            clauses.append((atom,))
    rule = (
        f"after coalescing, mode {mode} starts with {text(e0)}:{text(d0)}: stride 1 and "
        f"{v} divides the extent"
    )
    if form.swizzle is not None:
        low = swizzle_block_bits(form.outer)
        if (1 << low) % v:
            return RuleResult(
                False,
                f"the vector width {v} does not divide 2^{low}, the run the swizzle "
                f"{form.outer} keeps intact",
            )
        starts = start_clauses(form, v, mode, v, form.offset, extra)
        if starts is None:
            return RuleResult(False, "the vector starts of the mode are not regular")
        clauses += starts
        rule += f"; every vector starts at a multiple of {v}, so {form.outer} moves it as a block"
    if not clauses:
        return RuleResult(True, rule)
    return RuleResult(False, "contiguity not settled", Obligation(tuple(clauses)))
