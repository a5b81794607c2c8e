"""Injectivity: no two coordinates of a layout share an offset.

Rules (docs/proofs.md), after dropping extent-1 modes and coalescing:

- *stride 0*: a stride-0 mode of extent >= 2 is a collision (obligation: its extent <= 1);
- *sorted span*: order the modes by ``|stride|``; if each ``|stride|`` is at least the reach
  ``sum((s-1)*|d|)`` of the smaller modes plus one, the layout is injective. A failed
  inequality is exactly the assumption the user is missing (``lda >= M``);
- *two modes*: with static strides ``d1 = g*p``, ``d2 = g*q`` (``g = gcd``), the layout is
  injective iff ``q >= s1`` or ``p >= s2`` (exact; it proves ``(3,2):(2,3)``);
- a swizzle (``|shift| >= bits``) is a bijection: it never changes injectivity.

The sign of a stride does not matter (reflect the coordinate), so strides enter as
``|d|`` once their sign is decided.
"""

from __future__ import annotations

from functools import partial
from math import gcd
from typing import Any

from tylo.layouts._scope import Fact
from tylo.layouts.inttuple import IntTuple
from tylo.layouts.layout import Layout
from tylo.layouts.proofs.engine import Problem, RuleResult, prove
from tylo.layouts.proofs.normalize import Concrete, Form, Source, simplify, to_form
from tylo.layouts.proofs.obligation import Atom, Obligation, text
from tylo.layouts.proofs.static import Outcome, check_injective
from tylo.layouts.proofs.verdict import Verdict
from tylo.layouts.symbolic import decide_cmp

__all__ = ["prove_injective"]


def prove_injective(layout: Source, *, assuming: object = ()) -> Verdict:
    """Prove that ``layout`` maps distinct coordinates to distinct offsets.

    ``layout`` is a Layout or a ComposedLayout (swizzles never affect injectivity);
    ``assuming`` adds relations and divisibility facts to the ``assuming(...)`` context.

    >>> from tylo.layouts import Layout, dim
    >>> M, K, lda = dim("M"), dim("K"), dim("lda")
    >>> prove_injective(Layout((M, K), (1, lda)), assuming=[lda >= M]).status
    'proved'
    >>> v = prove_injective(Layout((M, K), (1, lda)))
    >>> v.status, v.values, v.hint
    ('disproved', {'K': 2, 'M': 2, 'lda': 1}, 'needs lda >= M')
    >>> v.witness["coordinates"], v.witness["offsets"]
    (((1, 0), (0, 1)), (1, 1))
    """
    form = to_form(layout, "prove_injective")
    problem = Problem(
        "injective",
        (form,),
        check=_check,
        rules=partial(_rules, form),
        replay=_replay,
    )
    return prove(problem, assuming, "prove_injective")


def _check(cfs: tuple[Concrete, ...], p: dict[str, int]) -> Outcome:
    return check_injective(cfs[0])


def _replay(
    objs: tuple[Source, ...],
    coords: tuple[IntTuple, ...],
    offsets: tuple[int, ...],
    pvals: dict[str, int],
    idx: tuple[int, ...],
) -> bool:
    obj = objs[0]
    c1, c2 = coords
    o1, o2 = obj(c1), obj(c2)
    return bool(c1 != c2 and o1 == o2 == offsets[0] == offsets[1])


def _sorted_by_stride(live: list[tuple[Any, Any]], extra: tuple[Fact, ...]) -> list[int]:
    """Mode indices ordered by |stride| where the order is decided, else kept in the
    layout's order (so a failed chain inequality reads as the natural missing assumption,
    ``bs >= M + ldm*(N - 1)`` rather than a condition on a reordered mode)."""
    order = list(range(len(live)))
    changed = True
    while changed:
        changed = False
        for k in range(len(order) - 1):
            a, b = live[order[k]][1], live[order[k + 1]][1]
            if (
                decide_cmp(b, "<=", a, assumptions=extra) is True
                and decide_cmp(a, "<=", b, assumptions=extra) is not True
            ):
                order[k], order[k + 1] = order[k + 1], order[k]
                changed = True
    return order


def _static_block_injective(block: list[tuple[Any, Any]]) -> bool:
    """True when the modes (static extents and |strides|) are injective by enumeration:
    where the chain breaks inside a static block, the block's reach continues it."""
    if not all(type(e) is int and type(d) is int for e, d in block):
        return False
    n = 1
    for e, _ in block:
        n *= e
    if n > 1 << 16:
        return False
    c = Form(Layout(tuple(e for e, _ in block), tuple(d for _, d in block))).static_concrete
    return bool(check_injective(c).ok)


def _block_text(block: list[tuple[Any, Any]]) -> str:
    shape = ",".join(str(e) for e, _ in block)
    stride = ",".join(str(d) for _, d in block)
    return f"({shape}):({stride}) is injective"


def _rules(form: Form, extra: tuple[Fact, ...]) -> RuleResult:
    if isinstance(form.outer, Layout):
        return RuleResult(False, "no symbolic rule for an outer layout")
    pairs = simplify(form.flat)
    clauses: list[tuple[Atom, ...]] = []
    live: list[tuple[Any, Any]] = []
    for e, d in pairs:
        if decide_cmp(d, "==", 0, assumptions=extra) is True:
            clauses.append((Atom("<=", e, 1),))
            continue
        if decide_cmp(d, ">", 0, assumptions=extra) is True:
            live.append((e, d))
        elif decide_cmp(d, "<", 0, assumptions=extra) is True:
            live.append((e, -d))
        else:
            return RuleResult(False, f"the sign of stride {text(d)} is not decided")
    order = _sorted_by_stride(live, extra)
    chain: list[tuple[Atom, ...]] = []
    proved_steps: list[str] = []
    reach: Any = 0
    for pos, k in enumerate(order):
        e, d = live[k]
        atom = Atom(">=", d, reach + 1)
        if atom.decide(extra) is True:
            proved_steps.append(str(atom))
        elif _static_block_injective([live[j] for j in order[: pos + 1]]):
            proved_steps.append(f"block {_block_text([live[j] for j in order[: pos + 1]])}")
        else:
            chain.append((atom,))
        reach = reach + (e - 1) * d
    if not clauses and not chain:
        steps = "; ".join(proved_steps) or "at most one mode"
        return RuleResult(
            True, f"sorted-span rule: every stride exceeds the reach of the smaller modes ({steps})"
        )
    if len(live) == 2 and all(type(d) is int for _, d in live):
        (e1, d1), (e2, d2) = live
        g = gcd(d1, d2)
        p, q = d1 // g, d2 // g
        exact = (Atom("<=", e1, q), Atom("<=", e2, p))
        if any(a.decide(extra) is True for a in exact):
            if not clauses:
                return RuleResult(True, f"two-mode gcd rule ({d1}, {d2}: gcd {g})")
        else:
            chain = [exact]
    return RuleResult(False, "sorted-span rule not settled", Obligation(tuple(clauses + chain)))
