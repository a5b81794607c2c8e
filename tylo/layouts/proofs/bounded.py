"""Bounds: every address ``base + L(c)`` lies in ``[0, extent)``.

Rule (docs/proofs.md): once every stride's sign is decided, the smallest offset is
``offset + sum((s-1)*d)`` over the negative strides and the largest the same over the
positive ones (both attained at corners), so the property is ``base + lo >= 0`` and
``extent >= base + hi + 1``: polynomial inequalities settled by slack substitution and
coefficient signs. A swizzle ``S<b,m,s>`` flips only its ``b`` destination bits, so every
offset stays inside its aligned block of ``2^(m+b)`` (``2^(m+|s|+b)`` for ``s < 0``): the
bounds hold as they are when the ends are block-aligned, else they widen by the flipped
bits.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from tylo.layouts._scope import Fact, Value
from tylo.layouts.inttuple import IntTuple
from tylo.layouts.layout import Layout
from tylo.layouts.proofs.engine import Problem, RuleResult, prove, symbolic_value
from tylo.layouts.proofs.normalize import Concrete, Form, Source, swizzle_bits, to_form
from tylo.layouts.proofs.obligation import Atom, Obligation, text
from tylo.layouts.proofs.static import Outcome, check_bounded
from tylo.layouts.proofs.verdict import Verdict
from tylo.layouts.symbolic import decide_cmp, divides

__all__ = ["prove_bounded"]


def prove_bounded(
    layout: Source, *, extent: Value, base: Value = 0, assuming: object = ()
) -> Verdict:
    """Prove that every offset plus ``base`` lies in ``[0, extent)`` (elements).

    >>> from tylo.layouts import Layout, dim
    >>> M, K, lda = dim("M"), dim("K"), dim("lda")
    >>> A = Layout((M, K), (1, lda))
    >>> prove_bounded(A, extent=lda * (K - 1) + M, assuming=[lda >= M]).status
    'proved'
    >>> v = prove_bounded(A, extent=M * K, assuming=[lda >= M])
    >>> v.status, v.values
    ('disproved', {'K': 2, 'M': 1, 'lda': 2})
    """
    what = "prove_bounded"
    form = to_form(layout, what)
    ext = symbolic_value(extent, "extent", what)
    b = symbolic_value(base, "base", what)

    problem = Problem(
        "bounded",
        (form,),
        check=_check,
        rules=partial(_rules, form, ext, b),
        replay=_replay,
        params={"base": b, "extent": ext},
        subject=f"{form} in [0, {text(ext)})" + (f" from base {text(b)}" if b != 0 else ""),
    )
    return prove(problem, assuming, what)


# module-level functions (partials of them), not closures: a verdict's guard keeps its
# problem, and a guard must pickle (to be sent to a process pool)
def _check(cfs: tuple[Concrete, ...], p: dict[str, int]) -> Outcome:
    return check_bounded(cfs[0], p["extent"], p["base"])


def _replay(
    objs: tuple[Source, ...],
    coords: tuple[IntTuple, ...],
    offsets: tuple[int, ...],
    pvals: dict[str, int],
    idx: tuple[int, ...],
) -> bool:
    o = objs[0](coords[0])
    return bool(o == offsets[0] and not 0 <= pvals["base"] + o < pvals["extent"])


def _rules(form: Form, extent: Any, base: Any, extra: tuple[Fact, ...]) -> RuleResult:
    if isinstance(form.outer, Layout):
        return RuleResult(False, "no symbolic rule for an outer layout")
    lo: Any = form.offset
    hi: Any = form.offset
    for e, d in form.flat:
        if type(e) is int and e == 1:
            continue
        if decide_cmp(d, ">=", 0, assumptions=extra) is True:
            hi = hi + (e - 1) * d
        elif decide_cmp(d, "<=", 0, assumptions=extra) is True:
            lo = lo + (e - 1) * d
        else:
            return RuleResult(False, f"the sign of stride {text(d)} is not decided")
    if form.swizzle is None:
        lower: tuple[Atom, ...] = (Atom(">=", base + lo, 0),)
        upper: tuple[Atom, ...] = (Atom(">=", extent, base + hi + 1),)
        rule = "corner bounds"
    else:
        # S<b,m,s> changes only the destination bits (zmask): |S(x) - x| <= zmask, and
        # S(x) stays in x's aligned block of 2^(top destination bit + 1) offsets, so
        # block-aligned ends stay ends.
        zmask = form.outer.zzz_mask
        blk = 1 << swizzle_bits(form.outer)[1]
        lower = (Atom(">=", base + lo - zmask, 0),)
        if divides(blk, lo, assumptions=extra) is True:
            lower += (Atom(">=", base + lo, 0),)
        elif decide_cmp(lo, ">=", 0, assumptions=extra) is True:
            lower += (Atom(">=", base, 0),)
        upper = (Atom(">=", extent, base + hi + zmask + 1),)
        if divides(blk, hi + 1, assumptions=extra) is True:
            upper += (Atom(">=", extent, base + hi + 1),)
        rule = f"corner bounds widened by the bits {form.outer} may flip"
    clauses = [c for c in (lower, upper) if not any(a.decide(extra) is True for a in c)]
    if not clauses:
        return RuleResult(
            True, f"{rule}: {text(base + lo)} >= 0 and {text(base + hi)} < {text(extent)}"
        )
    return RuleResult(False, f"{rule} not settled", Obligation(tuple(clauses)))
