"""Composition decided by evaluating ``A(B(c))`` (private to :mod:`tylo.layouts.compose`).

- :func:`search`: for small static operands whose composition condition failed, the layout
  of B's shape (leaves refined in any way) that computes ``c -> A(B(c))``, found by
  evaluating every coordinate of B, or None when no layout does.
- :func:`check_negative_reach`: a right operand that reaches *negative* indices of A.
  Below 0, A is outside its domain, and the peers extend it differently: CuTe's C++
  splits a negative index with C's truncating division (``A(-1) = 1`` for
  ``(1,(2,4)):(0,(-1,512))``), pycute and Python with floor division (``A(-1) = -513``).
  tylo composes such an operand only where the two agree at every negative index B
  reaches (then the result is the same in every convention), and otherwise refuses.
"""

from __future__ import annotations

from typing import Any

from tylo.layouts.algebra import _static_coalesced, is_one, is_zero
from tylo.layouts.errors import CompositionError
from tylo.layouts.inttuple import fmt, product
from tylo.layouts.layout import Layout, size
from tylo.layouts.symbolic import decide_cmp, divides, undecidable_divides

__all__ = ["NEGATIVE_LIMIT", "check_negative_reach", "search", "trunc_eval"]

NEGATIVE_LIMIT = 4096
"""Largest ``size(B)`` whose negative indices are checked one by one (past it, every
stride of B must be a multiple of the product of A's bounded extents)."""


# -- the exhaustive decision ------------------------------------------------------------------


def _layout_1d(g: list[int]) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """Extents and strides ``(t..), (e..)`` of a layout computing ``x -> g[x]`` on
    ``[0, len(g))``, trying every ordered factorization of ``len(g)``; None if none does."""
    n = len(g)
    if n == 1:
        return (), ()
    e = g[1]
    for t in range(2, n + 1):
        if n % t:
            continue
        if all(g[c] == (c % t) * e + g[c - c % t] for c in range(n)):
            sub = _layout_1d(g[::t])
            if sub is not None:
                return (t, *sub[0]), (e, *sub[1])
    return None


def search(a: Layout, b: Layout) -> Layout | None:
    """The layout of B's shape (leaves refined) computing ``c -> A(B(c))``, decided by
    evaluating every coordinate of B; None when no such layout exists."""
    bs, bd = b.flat()
    leaves = [[a(x * d) for x in range(s)] for s, d in zip(bs, bd)]
    n = size(b)
    crd = [0] * len(bs)
    for _ in range(n):
        idx = 0
        total = 0
        for j, c in enumerate(crd):
            idx += c * bd[j]
            total += leaves[j][c]
        if a(idx) != total:
            return None
        for j in range(len(crd)):
            crd[j] += 1
            if crd[j] < bs[j]:
                break
            crd[j] = 0
    found = []
    for g in leaves:
        r = _layout_1d(g)
        if r is None:
            return None
        ts, es = _static_coalesced(list(r[0]), list(r[1]))  # ([1], [0]) for an extent 1
        found.append((ts[0], es[0]) if len(ts) == 1 else (tuple(ts), tuple(es)))
    it = iter(found)

    def rebuild(t: Any) -> tuple[Any, Any]:
        if type(t) is tuple:
            parts = [rebuild(e) for e in t]
            return tuple(p[0] for p in parts), tuple(p[1] for p in parts)
        return next(it)

    s, d = rebuild(b.shape)
    return Layout._make(s, d)


# -- negative indices of A ----------------------------------------------------------------------


def trunc_eval(a: Layout, i: int) -> int:
    """``A(i)`` as CuTe's C++ evaluates it: ``i`` split over A's flat modes with C's
    truncating division and remainder (the sign of ``i``), the last mode unbounded. For
    ``i >= 0`` it is ``A(i)``.

    >>> trunc_eval(Layout((1, (2, 4)), (0, (-1, 512))), -1), Layout((1, (2, 4)), (0, (-1, 512)))(-1)
    (1, -513)
    """
    fs, fd = a.flat()
    total = 0
    for s, d in zip(fs[:-1], fd[:-1]):
        q, r = divmod(abs(i), s)
        if i < 0:
            q, r = -q, -r
        total += r * d
        i = q
    return int(total + i * fd[-1])


def _offsets(b: Layout) -> list[int]:
    bs, bd = b.flat()
    out = [0]
    for s, d in zip(bs, bd):
        out = [o + x * d for x in range(s) for o in out]
    return out


_FIX = (
    "use a right operand with non-negative strides, or a left operand that coalesces to "
    "one mode (whose extension below 0 every convention shares)"
)


def check_negative_reach(a: Layout, b: Layout, bounded: list[int]) -> None:
    """Refuse B when it reaches a negative index of A at which CuTe's truncating and
    floor-division evaluations of A differ. ``bounded`` are the extents of A's coalesced
    modes before its last (unbounded) one; at a multiple of their product ``P`` both
    evaluations are ``(i/P)*d_last``. Decided at each coordinate of static operands with
    ``size(B) <= NEGATIVE_LIMIT``; otherwise B passes only when every stride is a multiple
    of P. Raises CompositionError (UndecidableError when that divisibility depends on the
    symbols' values)."""
    bs, bd = b.flat()
    live = [(s, d) for s, d in zip(bs, bd) if not is_one(s) and not is_zero(d)]
    if not any(decide_cmp(d, "<", 0) is True for _, d in live):
        return  # no negative stride: every index B reaches is >= 0
    p = product(tuple(bounded)) if bounded else 1
    if is_one(p):
        return  # A is one unbounded mode: A(i) = i*d for every integer i
    multiples = [divides(p, d) for _, d in live]
    if all(m is True for m in multiples):
        return  # every index B reaches is a multiple of P
    head = (
        f"composition({a}, {b}): {b} reaches negative indices of {a}, which lie below "
        f"its domain [0, {fmt(size(a))}), where the peers extend A differently (CuTe's C++ "
        "splits a negative index with truncating division, pycute and Python with floor "
        "division)"
    )
    rule = (
        "tylo composes a right operand that reaches negative indices only where the two "
        f"agree at every such index (each one a multiple of {fmt(p)}, the product of A's "
        "extents before its last mode once coalesced, is enough)"
    )
    if a.is_static and b.is_static:
        n = size(b)
        if n <= NEGATIVE_LIMIT:
            for i in sorted(set(_offsets(b)), reverse=True):
                if i >= 0:
                    continue
                floor, trunc = a(i), trunc_eval(a, i)
                if floor != trunc:
                    raise CompositionError(
                        f"{head}: at index {i}, A({i}) is {trunc} with truncation and "
                        f"{floor} with floor division; {rule}; {_FIX}"
                    )
            return  # the conventions agree at every negative index B reaches
        raise CompositionError(
            f"{head}; {rule}, which for size(B) = {n}, past the {NEGATIVE_LIMIT} indices "
            f"tylo checks one by one, needs every stride of B to be a multiple of {fmt(p)}; "
            f"{_FIX}"
        )
    for (_, d), m in zip(live, multiples):
        if m is None:
            raise undecidable_divides(
                "composition",
                p,
                d,
                f"composing {a} with {b}, which reaches negative indices of A: CuTe's C++ "
                f"and floor division agree there at multiples of {fmt(p)}",
            )
    raise CompositionError(f"{head}; {rule}; {_FIX}")
