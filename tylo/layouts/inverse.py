"""Right and left inverses of layouts and of swizzled layouts.

``right_inverse(L)`` is a layout ``R`` with ``L(R(i)) == i`` for every ``i < size(R)``:
it follows the modes of ``L`` whose strides chain ``1, s0, s0*s1, ...`` (CuTe's
construction). ``left_inverse(L)`` is a layout ``R`` with ``R(L(c)) == c`` for every index
``c < size(L)``, where every offset ``L(c)`` lies in R's domain ``[0, size(R))``.

For a swizzled layout ``S o L`` (a :class:`ComposedLayout` with a swizzle outside and
offset 0) the inverses are ``inv(L) o S`` (a swizzle is its own inverse), returned as
``S' o inv(L)`` with the swizzle ``S'`` that ``inv(L)`` maps ``S``'s bits to, when that
rewrite is exact; otherwise a typed refusal says which condition tylo needs.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import Any, overload

from tylo.layouts._lazy import sympy
from tylo.layouts._scope import Value
from tylo.layouts.algebra import coalesce, is_one, is_zero, sorted_modes
from tylo.layouts.errors import InverseError, LayoutError, SwizzleError
from tylo.layouts.inttuple import fmt, vmul
from tylo.layouts.layout import Layout, _as_layout, cosize, size
from tylo.layouts.swizzle import ComposedLayout, Swizzle
from tylo.layouts.symbolic import (
    decide_cmp,
    divides,
    exact_div,
    substitute,
    undecidable_cmp,
    undecidable_divides,
)

__all__ = ["left_inverse", "right_inverse"]

_Mode = tuple[Value, Value, Value]  # (stride, extent, index stride) of a moving mode

#: Largest number of indices tylo enumerates to prove that a swizzle commutes with a
#: layout (``inv(L) o S == S' o inv(L)``) when the bitwise argument does not apply.
ENUMERATION_LIMIT = 1 << 16
#: Most symbolic extents that may be 1 a left inverse keeps (each subset of them set to 1
#: is checked once: 2**6 layouts); past it, tylo asks for the first to be >= 2.
MAYBE_ONE_LIMIT = 6


@overload
def right_inverse(layout: ComposedLayout) -> Layout | ComposedLayout: ...
@overload
def right_inverse(layout: Layout | int) -> Layout: ...
def right_inverse(layout: Layout | ComposedLayout | int) -> Layout | ComposedLayout:
    """A layout ``R`` with ``layout(R(i)) == i`` for every ``i < size(R)``, and every
    ``R(i)`` an index of ``layout`` (``0 <= R(i) < size(layout)``). ``R`` follows the
    modes of ``coalesce(layout)`` whose strides chain ``1, s0, s0*s1, ...`` from stride 1
    (CuTe's construction; modes with negative or zero strides are not followed), so
    ``size(R)`` is the length of the prefix ``[0, n)`` of offsets that chain covers;
    ``1:0`` when no mode has stride 1.

    For a swizzled layout ``S o L`` (offset 0) the result is ``right_inverse(L) o S``,
    returned as the composed layout ``S' o right_inverse(L)``; raises InverseError when
    that rewrite is not exact or not proved (the message names the condition).

    >>> str(right_inverse(Layout((2, 4, 6), (4, 1, 8)))), str(right_inverse(Layout((2, 4), (4, 1))))
    ('(4,2,6):(2,1,8)', '(4,2):(2,1)')
    >>> str(right_inverse(ComposedLayout(Swizzle(3, 3, 3), 0, Layout((8, 64), (64, 1)))))
    'S<3,0,-6> o (64,8):(8,1)'
    """
    x = _as_layout(layout, "right_inverse")
    if isinstance(x, ComposedLayout):
        return _swizzled_inverse(x, "right_inverse")
    return _right_inverse(x)


def _right_inverse(x: Layout) -> Layout:
    c = coalesce(x)
    fs, fd = c.flat()
    # index strides of the coalesced modes (colexicographic)
    idx_strides = []
    acc: Any = 1
    for s in fs:
        idx_strides.append(acc)
        acc = vmul(acc, s)
    remaining = [k for k in range(len(fs)) if not is_one(fs[k])]
    rs: list[Value] = []
    rd: list[Value] = []
    cur: Any = 1
    while remaining:
        found = None
        unknown = None
        for k in remaining:
            d = fd[k]
            if type(d) is int and type(cur) is int:
                if d == cur:
                    found = k
                    break
                continue
            r = decide_cmp(d, "==", cur)
            if r is True:
                found = k
                break
            if r is None and unknown is None:
                unknown = k
        if found is None:
            if unknown is not None:
                raise undecidable_cmp(
                    "right_inverse",
                    fd[unknown],
                    "==",
                    cur,
                    f"does a mode of {x} continue the inverse",
                )
            break
        remaining.remove(found)
        rs.append(fs[found])
        rd.append(idx_strides[found])
        cur = vmul(fs[found], fd[found])
    if not rs:
        return Layout._make(1, 0)
    return coalesce(Layout._make(tuple(rs), tuple(rd)))


@overload
def left_inverse(layout: ComposedLayout) -> Layout | ComposedLayout: ...
@overload
def left_inverse(layout: Layout | int) -> Layout: ...
def left_inverse(layout: Layout | ComposedLayout | int) -> Layout | ComposedLayout:
    """A layout ``R`` with ``R(layout(c)) == c`` for every index ``c < size(layout)``,
    every offset ``layout(c)`` lying in R's domain ``[0, size(R))``.

    tylo builds R when the modes of extent > 1, sorted by stride, have strides
    ``0 < d0 < d1 < ...`` with ``d_k`` dividing ``d_{k+1}`` and reach ``s_k*d_k <=
    d_{k+1}``: then ``R = (d0, d1/d0, ..., s_last):(0, e0, e1, ...)`` with ``e_k`` the
    index stride of mode k (CuTe's ``right_inverse((layout, complement(layout)))`` for a
    bijection onto ``[0, size)``; on offsets the layout does not reach R's values are
    unspecified, and the same for static and symbolic extents). A mode of symbolic extent
    that may be 1 (the static construction then drops it) is kept only where the result
    is the same layout with that extent 1 (at most ``MAYBE_ONE_LIMIT`` such extents);
    otherwise UndecidableError asks for ``extent >= 2``. Raises InverseError
    saying "no layout exists" only when that is so (two coordinates share an offset);
    otherwise the error names the condition tylo needs (e.g. no negative stride: R is
    defined on offsets ``[0, size(R))`` only, stricter than CuTe).

    For a swizzled layout ``S o L`` (offset 0) the result is ``left_inverse(L) o S``, as
    the composed layout ``S' o left_inverse(L)`` (its last extent widened, if needed, so
    that ``S`` permutes its domain).

    >>> str(left_inverse(Layout((2, 3), (1, 2)))), str(left_inverse(Layout((2, 4, 6), (4, 1, 8))))
    ('6:1', '(4,2,6):(2,1,8)')
    >>> str(left_inverse(Layout((4, 2), (1, 5))))
    '(5,2):(1,4)'
    """
    x = _as_layout(layout, "left_inverse")
    if isinstance(x, ComposedLayout):
        return _swizzled_inverse(x, "left_inverse")
    return _left_inverse(x)


def _index_strides(fs: Sequence[Value]) -> list[Value]:
    out = []
    acc: Any = 1
    for s in fs:
        out.append(acc)
        acc = vmul(acc, s)
    return out


def _collision(x: Layout) -> tuple[int, int] | None:
    """Two indices with the same offset (static layouts small enough to enumerate)."""
    n = size(x)
    if n > ENUMERATION_LIMIT:
        return None
    seen: dict[int, int] = {}
    for i in range(n):
        o = x(i)
        if o in seen:
            return seen[o], i
        seen[o] = i
    return None


def _left_modes(x: Layout, maybe_one: list[Value]) -> list[_Mode]:
    """The (stride, extent, index stride) of each mode that moves, sorted by stride;
    raises when a mode shows that no left inverse exists. A mode with a positive stride
    whose extent may be 1 is kept, and its extent is listed in ``maybe_one``: where it is
    1 the static construction drops the mode, which :func:`_left_inverse` checks."""
    fs, fd = x.flat()
    es = _index_strides(fs)
    modes = []
    for s, d, e in zip(fs, fd, es):
        if is_one(s):
            continue
        if (d > 0 if type(d) is int else decide_cmp(d, ">=", 1)) is True:
            if type(s) is not int:
                big = decide_cmp(s, ">=", 2)
                if big is False:  # a positive extent below 2: 1, no mode
                    continue
                if big is None:
                    maybe_one.append(s)
            modes.append((d, s, e))
            continue
        big = decide_cmp(s, ">=", 2)
        if big is None:
            raise undecidable_cmp("left_inverse", s, ">=", 2, f"an extent of {x}")
        if not big:
            continue
        if is_zero(d):
            raise InverseError(
                f"left_inverse({x}): the layout is not injective (mode {fmt(s)}:0 maps "
                f"{fmt(s)} coordinates to one offset), so no left inverse layout exists"
            )
        if decide_cmp(d, "<=", -1) is True:
            raise InverseError(
                f"left_inverse({x}): stride {fmt(d)} is negative, so the layout reaches the "
                f"negative offset {fmt(d)}; tylo's left inverse R is defined on the offsets "
                "[0, size(R)) and needs every stride >= 0 (CuTe, which evaluates R at "
                "negative offsets, may give one); reverse the mode (a positive stride) first"
            )
        raise undecidable_cmp("left_inverse", d, ">=", 1, f"a stride of {x}")
    return sorted_modes(modes, f"{x}", "left_inverse")


def _pair_collision(modes: list[_Mode]) -> tuple[int, int] | None:
    """Two indices with one offset, from two modes alone: ``a*d_i == b*d_j`` with
    ``0 < a < s_i``, ``0 < b < s_j`` (smallest such a, b: ``d_j/g``, ``d_i/g``)."""
    for i, (di, si, ei) in enumerate(modes):
        for dj, sj, ej in modes[i + 1 :]:
            g = _gcd(di, dj)
            a, b = dj // g, di // g
            if a < si and b < sj:
                return a * ei, b * ej
    return None


def _refuse_chain(x: Layout, modes: list[_Mode], why: str) -> InverseError:
    if x.is_static:
        hit = _pair_collision(modes) or _collision(x)
        if hit is not None:
            i, j = hit
            return InverseError(
                f"left_inverse({x}): the layout is not injective (indices {i} and {j} both "
                f"map to offset {x(i)}), so no left inverse layout exists"
            )
    return InverseError(
        f"left_inverse({x}): {why}; tylo builds a left inverse only when the strides of the "
        "modes, sorted, divide each other and each mode's reach extent*stride is at most "
        "the next stride (a left inverse layout may still exist: tylo does not search for "
        "one); to get one from tylo, use a layout whose sorted strides divide each other"
    )


def _left_inverse(x: Layout, memo: dict[Layout, Layout | LayoutError] | None = None) -> Layout:
    """The left inverse of ``x``; ``memo`` holds the layouts with some extents set to 1
    already checked (each subset of them once, not once per order)."""
    memo = {} if memo is None else memo
    if x in memo:
        got = memo[x]
        if isinstance(got, LayoutError):
            raise got
        return got
    try:
        maybe_one: list[Value] = []
        r = _left_chain(x, _left_modes(x, maybe_one))
        if len(maybe_one) > MAYBE_ONE_LIMIT:  # 2**n layouts to check: ask instead
            raise undecidable_cmp(
                "left_inverse", maybe_one[0], ">=", 2,
                f"{len(maybe_one)} extents of {x} may be 1; tylo checks at most "
                f"{MAYBE_ONE_LIMIT}",
            )  # fmt: skip
        for s in maybe_one:
            _check_at_one(x, r, s, memo)
    except LayoutError as err:
        memo[x] = err
        raise
    memo[x] = r
    return r


def _check_at_one(x: Layout, r: Layout, s: Any, memo: dict[Layout, Layout | LayoutError]) -> None:
    """Raise unless ``r``, built with the mode of extent ``s`` kept, is also what the
    construction gives where ``s`` is 1 (the mode then dropped): the same layout after
    coalescing, with ``s``'s symbols set to 1 in both. Only extents that are 1 at exactly
    one point are checked (a product of symbols, every factor then 1); otherwise, or when
    the two differ, the extent must be known to be >= 2 (the error says so)."""
    refuse = undecidable_cmp("left_inverse", s, ">=", 2, f"an extent of {x}")
    factors = sympy.Mul.make_args(s)
    if not all(isinstance(f, sympy.Symbol) for f in factors):
        raise refuse
    at_one = {f: 1 for f in factors}
    try:
        want = coalesce(_left_inverse(substitute(x, at_one), memo))
    except LayoutError:  # undecided or refused where s is 1: r is not shown to hold there
        raise refuse from None
    if coalesce(substitute(r, at_one)) != want:
        raise refuse


def _left_chain(x: Layout, modes: list[_Mode]) -> Layout:
    if not modes:
        return Layout._make(1, 0)
    for (d0, s0, _), (d1, s1, _) in pairwise(modes):
        reach = vmul(s0, d0)
        fits = decide_cmp(reach, "<=", d1)
        if fits is None:
            raise undecidable_cmp("left_inverse", reach, "<=", d1, f"modes of {x}")
        if not fits:
            if decide_cmp(d0, "==", d1) is True:
                big = s1 > 1 if type(s1) is int else decide_cmp(s1, ">=", 2)
                if big is not True:
                    raise undecidable_cmp("left_inverse", s1, ">=", 2, f"an extent of {x}")
                raise InverseError(
                    f"left_inverse({x}): the layout is not injective (modes {fmt(s0)}:{fmt(d0)} "
                    f"and {fmt(s1)}:{fmt(d1)} both reach offset {fmt(d0)}), so no left inverse "
                    "layout exists"
                )
            raise _refuse_chain(
                x,
                modes,
                f"mode {fmt(s0)}:{fmt(d0)} reaches {fmt(reach)}, past the next stride {fmt(d1)}",
            )
        ok = divides(d0, d1)
        if ok is None:
            raise undecidable_divides("left_inverse", d0, d1, f"sorted strides of {x}")
        if not ok:
            raise _refuse_chain(
                x, modes, f"stride {fmt(d0)} does not divide the next stride {fmt(d1)}"
            )
    rs: list[Value] = [modes[0][0]]
    rd: list[Value] = [0]
    for (d0, _, e0), (d1, _, _) in pairwise(modes):
        rs.append(exact_div(d1, d0, op=f"left_inverse({x})"))
        rd.append(e0)
    rs.append(modes[-1][1])
    rd.append(modes[-1][2])
    return coalesce(Layout._make(tuple(rs), tuple(rd)))


# -- swizzled layouts ------------------------------------------------------------------------


def _bit_range(mask: int) -> tuple[int, int]:
    """(lowest set bit, one past the highest) of a non-zero mask."""
    return (mask & -mask).bit_length() - 1, mask.bit_length()


def _split_at(q: Layout, n: int) -> tuple[Layout, list[tuple[Value, Value]]] | None:
    """``q`` split into the modes below index ``n`` and the (extent, stride) pairs above,
    or None when no mode boundary (after splitting one mode) falls at ``n``."""
    fs, fd = q.flat()
    low_s: list[Value] = []
    low_d: list[Value] = []
    acc = 1
    for k, (s, d) in enumerate(zip(fs, fd)):
        if acc == n:
            return Layout._make(tuple(low_s) or 1, tuple(low_d) or 0), list(zip(fs[k:], fd[k:]))
        f = n // acc
        if n % acc:
            return None
        if f < s:
            if s % f:
                return None
            low_s.append(f)
            low_d.append(d)
            rest = [(s // f, f * d)] + list(zip(fs[k + 1 :], fd[k + 1 :]))
            return Layout._make(tuple(low_s), tuple(low_d)), rest
        low_s.append(s)
        low_d.append(d)
        acc *= s
    if acc == n:
        return Layout._make(tuple(low_s), tuple(low_d)), []
    return None


def _support(modes: list[tuple[int, int]]) -> int | None:
    """A mask of every bit that ``sum(c_k * d_k)``, ``0 <= c_k < s_k``, may set (None when
    a stride is negative): the OR of the modes' masks when those are disjoint (the sum is
    then an OR), else every bit from the lowest stride bit to the largest sum's top bit."""
    masks = []
    lows = []
    total = 0
    for s, d in modes:
        if d < 0:
            return None
        if s == 1 or d == 0:
            continue
        lo = (d & -d).bit_length() - 1
        masks.append(((1 << ((s - 1) * d).bit_length()) - 1) >> lo << lo)
        lows.append(lo)
        total += (s - 1) * d
    union = 0
    for m in masks:
        if union & m:
            low = min(lows)
            return ((1 << total.bit_length()) - 1) >> low << low
        union |= m
    return union


def _commuted_swizzle(q: Layout, sw: Swizzle) -> Swizzle | None:
    """The swizzle ``S'`` with ``q(sw(x)) == S'(q(x))`` for every ``x < size(q)``, or None
    when ``q`` does not map ``sw``'s bits to the bits of a swizzle or it is not proved.
    Needs ``sw`` to map ``[0, size(q))`` onto itself."""
    n = size(q)
    ylo, yhi = _bit_range(sw.yyy_mask)
    zlo, _ = _bit_range(sw.zzz_mask)
    top = max(yhi, _bit_range(sw.zzz_mask)[1])
    wy = [q(1 << (ylo + j)) for j in range(sw.bits)]
    wz = [q(1 << (zlo + j)) for j in range(sw.bits)]
    if any(w <= 0 or w & (w - 1) for w in wy + wz):
        return None
    py, pz = wy[0].bit_length() - 1, wz[0].bit_length() - 1
    if wy != [1 << (py + j) for j in range(sw.bits)] or wz != [
        1 << (pz + j) for j in range(sw.bits)
    ]:
        return None
    try:
        out = Swizzle(sw.bits, min(py, pz), py - pz)
    except SwizzleError:
        return None
    # Exactness. sw reads and writes only bits below 2**top, so with x = lo + 2**top*hi,
    # q(sw(x)) = q_lo(sw(lo)) + q_hi(hi). Checking q_lo(sw(lo)) == out(q_lo(lo)) for every
    # lo < 2**top suffices when the bits q_hi can set are disjoint from those q_lo sets and
    # from out's: then each sum is an OR and out commutes with OR-ing in q_hi(hi).
    # Otherwise enumerate the whole domain when it is small.
    period = 1 << top
    split = _split_at(q, period) if n % period == 0 else None
    high = _support(split[1]) if split is not None else None
    if high is not None and period <= ENUMERATION_LIMIT:
        low = 0
        for i in range(period):
            v = q(i)
            if v < 0 or q(sw(i)) != out(v):
                return None
            low |= v
        if high & (low | out.yyy_mask | out.zzz_mask) == 0:
            return out
    if n > ENUMERATION_LIMIT:
        return None
    for i in range(n):
        if q(sw(i)) != out(q(i)):
            return None
    return out


def _swizzled_inverse(x: ComposedLayout, op: str) -> Layout | ComposedLayout:
    sw = x.outer
    if not isinstance(sw, Swizzle):
        raise InverseError(
            f"{op}({x}): tylo inverts composed layouts only when the outer function is a "
            "Swizzle; compose the two layouts into one (composition(outer, inner)) first"
        )
    if not (type(x.offset) is int and x.offset == 0):
        raise InverseError(
            f"{op}({x}): tylo inverts swizzled layouts only with offset 0 (as CuTe); this "
            f"one has offset {fmt(x.offset)}; invert the swizzle at offset 0 and shift the "
            "result"
        )
    inner = x.inner
    try:
        q = _right_inverse(inner) if op == "right_inverse" else _left_inverse(inner)
    except LayoutError as e:
        raise e.within(f"{op}({x})") from None
    if sw.bits == 0:
        return q
    if not q.is_static:
        raise InverseError(
            f"{op}({x}): a swizzled layout's inverse needs static extents and strides; "
            f"{inner} is symbolic: substitute values first"
        )
    n = size(q)
    ylo, _ = _bit_range(sw.yyy_mask)
    top = max(_bit_range(sw.yyy_mask)[1], _bit_range(sw.zzz_mask)[1])
    period = 1 << top
    if op == "left_inverse":
        if cosize(inner) <= 1 << ylo:
            return q  # the swizzle moves no bit of any offset inner reaches
        if n % period:
            # widen the last extent (keeping its stride) so that sw permutes the domain;
            # inputs past size(q) are never offsets of inner, so R's values there are free
            fs, fd = q.flat()
            grow = period // _gcd(n, period)
            q = (
                Layout._make(fs[:-1] + (fs[-1] * grow,), fd)
                if len(fs) > 1
                else Layout._make(fs[0] * grow, fd[0])
            )
            n = size(q)
    elif n <= 1 << ylo:
        return q  # the swizzle is the identity on [0, size(q))
    elif n % period:
        # sw permutes each aligned block of `period` offsets; a partial last block may or
        # may not be mapped into [0, n): enumerate it when it is small enough
        escape = next((i for i in range(n) if sw(i) >= n), None) if n <= ENUMERATION_LIMIT else -1
        if escape is not None:
            where = (
                f"{sw} maps index {escape} to {sw(escape)}, past it"
                if escape >= 0
                else f"tylo does not enumerate more than {ENUMERATION_LIMIT} indices"
            )
            raise InverseError(
                f"{op}({x}): right_inverse({inner}) = {q} has size {n}, which is not a "
                f"multiple of {period}, the block {sw} permutes, and {where}; tylo needs "
                f"{sw} to map [0, {n}) onto itself (a size that is a multiple of {period}, "
                f"or at most {1 << ylo}, where {sw} moves no bit)"
            )
    out = _commuted_swizzle(q, sw)
    if out is None:
        raise InverseError(
            f"{op}({x}): the inverse is {op}({inner}) o {sw} = {q} o {sw}, and tylo represents "
            f"it only as S' o {q} for a swizzle S'; that needs {q} to map each bit {sw} reads "
            "and writes to one bit, in order, without carries from the other modes (proved "
            f"bitwise, or by enumerating up to {ENUMERATION_LIMIT} indices), which does not "
            "hold or is not proved here"
        )
    return ComposedLayout(out, 0, q)


def _gcd(a: int, b: int) -> int:
    while b:
        a, b = b, a % b
    return a
