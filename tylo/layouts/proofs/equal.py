"""Equality: two layouts are the same function of the 1-D index.

Rule (docs/proofs.md): the fully coalesced form of a layout (extent-1 modes dropped, mergeable
neighbours merged) is unique per function, so two static layouts are equal iff their
normal forms are. Symbolically, equal normal forms (extents and strides equal as decided
identities, the same outer map and offset) prove equality for every value; otherwise a
smallest-first search looks for the first index where they differ.
"""

from __future__ import annotations

import itertools
from functools import partial
from typing import Any

from tylo.layouts._scope import Fact
from tylo.layouts.inttuple import IntTuple
from tylo.layouts.layout import size
from tylo.layouts.proofs.engine import Problem, RuleResult, prove
from tylo.layouts.proofs.normalize import Concrete, Form, Pairs, Source, simplify, to_form
from tylo.layouts.proofs.obligation import Atom, Obligation
from tylo.layouts.proofs.static import Outcome, check_equal
from tylo.layouts.proofs.verdict import Verdict

__all__ = ["prove_equal"]


def prove_equal(a: Source, b: Source, *, assuming: object = ()) -> Verdict:
    """Prove that ``a`` and ``b`` have the same size and the same offset at every index.

    >>> import sympy
    >>> from tylo.layouts import Layout, dim
    >>> M, N, lda = dim("M"), dim("N"), dim("lda")
    >>> prove_equal(Layout((M, N), (1, M)), Layout(M * N, 1)).status
    'proved'
    >>> prove_equal(Layout((M, N), (1, lda)), Layout(M * N, 1), assuming=[sympy.Eq(lda, M)]).status
    'proved'
    >>> v = prove_equal(Layout((M, N), (1, lda)), Layout(M * N, 1))
    >>> v.status, v.values, v.hint
    ('disproved', {'M': 1, 'N': 2, 'lda': 2}, 'needs lda == M')
    """
    what = "prove_equal"
    fa, fb = to_form(a, what), to_form(b, what)
    problem = Problem(
        "equal",
        (fa, fb),
        check=_check,
        rules=partial(_rules, fa, fb),
        replay=_replay,
    )
    return prove(problem, assuming, what)


def _check(cfs: tuple[Concrete, ...], p: dict[str, int]) -> Outcome:
    return check_equal(cfs[0], cfs[1])


def _replay(
    objs: tuple[Source, ...],
    coords: tuple[IntTuple, ...],
    offsets: tuple[int, ...],
    pvals: dict[str, int],
    idx: tuple[int, ...],
) -> bool:
    oa, ob = objs
    i = idx[0]
    na, nb = size(oa), size(ob)
    if na != nb:
        return bool(i == min(na, nb))
    va, vb = oa(i), ob(i)
    return va != vb and (va, vb) == tuple(offsets) and (oa(coords[0]), ob(coords[1])) == (va, vb)


def _same(x: Any, y: Any, extra: tuple[Fact, ...]) -> Atom | None:
    atom = Atom("==", x, y)
    return None if atom.decide(extra) is True else atom


def _merge_hints(pairs: Pairs, extra: tuple[Fact, ...]) -> list[Atom]:
    out = []
    for (e0, d0), (_, d1) in itertools.pairwise(pairs):
        atom = Atom("==", d1, e0 * d0)
        if atom.decide(extra) is None:
            out.append(atom)
    return out


def _rules(fa: Form, fb: Form, extra: tuple[Fact, ...]) -> RuleResult:
    pa, pb = simplify(fa.flat), simplify(fb.flat)
    hints = tuple(_merge_hints(pa, extra) + _merge_hints(pb, extra))
    if fa.outer != fb.outer or type(fa.outer) is not type(fb.outer):
        return RuleResult(False, "the outer maps differ", hints=hints)
    clauses: list[tuple[Atom, ...]] = []
    atom = _same(fa.offset, fb.offset, extra)
    if atom is not None:
        clauses.append((atom,))
    if len(pa) != len(pb):
        return RuleResult(False, "the normal forms have different numbers of modes", hints=hints)
    for (ea, da), (eb, db) in zip(pa, pb):
        for atom in (_same(ea, eb, extra), _same(da, db, extra)):
            if atom is not None:
                clauses.append((atom,))
    if not clauses:
        return RuleResult(True, "equal normal forms (coalesced, extent-1 modes dropped)")
    return RuleResult(False, "normal forms not settled", Obligation(tuple(clauses)), hints=hints)
