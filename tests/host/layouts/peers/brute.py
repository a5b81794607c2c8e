"""Brute-force ground truth for the peer tier, independent of tylo's own evaluation.

Layouts are evaluated here from their shape and stride alone (colexicographic index, the
last flat mode unbounded, as CuTe extends a layout past its domain); swizzles from the
``S<bits,base,shift>`` definition. Existence searches answer "does any layout with the
defining property exist?" for the small operands a refusal is checked on.
"""

from __future__ import annotations

from fractions import Fraction
from functools import cache
from typing import Any

from tylo.layouts import ComposedLayout, Layout, Swizzle

__all__ = [
    "compatible",
    "complement_candidates",
    "cosize_of",
    "ev",
    "flat",
    "is_1d_layout",
    "is_injective",
    "layout_with_shape_exists",
    "left_inverse_exists",
    "size_of",
    "values",
]

MAX_SEARCH = 4096  # refusals on operands larger than this are not brute-forced
NODE_BUDGET = 5000  # layouts an existence search may visit before it gives up


class _TooLarge(Exception):
    """A search ran out of its budget (the answer is then 'unknown')."""


def flat(t: Any) -> tuple:
    """The leaves of a nested tuple (an int is one leaf)."""
    if type(t) is tuple:
        return tuple(x for e in t for x in flat(e))
    return (t,)


def size_of(x: Any) -> int:
    shape = x.inner.shape if isinstance(x, ComposedLayout) else x.shape
    n = 1
    for s in flat(shape):
        n *= s
    return n


def _divmod(a: int, b: int, trunc: bool) -> tuple[int, int]:
    if not trunc:
        return divmod(a, b)
    q = abs(a) // b * (1 if a >= 0 else -1)
    return q, a - q * b


def _swizzle(sw: Swizzle, x: int) -> int:
    # S<b,m,s>: the b bits at position m + max(0, s) are XORed, shifted right by s, into x.
    mask = ((1 << sw.bits) - 1) << (sw.base + max(0, sw.shift))
    moved = x & mask
    moved = moved >> sw.shift if sw.shift >= 0 else moved << -sw.shift
    return x ^ moved


def ev(x: Any, i: int, trunc: bool = False) -> int:
    """``x(i)`` for a 1-D index ``i`` (any int; past the domain the last flat mode extends;
    ``trunc`` splits negative indices with C's truncating division, as CuTe's C++ does)."""
    if isinstance(x, ComposedLayout):
        v = ev(x.inner, i, trunc) + x.offset
        return _swizzle(x.outer, v) if isinstance(x.outer, Swizzle) else ev(x.outer, v, trunc)
    fs, fd = flat(x.shape), flat(x.stride)
    r = 0
    for s, d in zip(fs[:-1], fd[:-1]):
        i, c = _divmod(i, s, trunc)
        r += c * d
    return r + i * fd[-1]


def values(x: Any, n: int | None = None) -> list[int]:
    """``[x(i) for i < n]`` (default ``n = size(x)``)."""
    return [ev(x, i) for i in range(size_of(x) if n is None else n)]


def cosize_of(x: Any) -> int:
    """One past the largest offset (at least 1)."""
    return max(values(x)) + 1 if size_of(x) else 1


def is_injective(x: Any) -> bool:
    v = values(x)
    return len(set(v)) == len(v)


def compatible(a: Any, b: Any) -> bool:
    """CuTe's ``compatible(A, B)`` on shapes: equal sizes, and each leaf of ``a`` stands
    for a mode (leaf or tuple) of ``b``."""
    if type(a) is not tuple:
        return size_of(Layout(b)) == a
    return type(b) is tuple and len(a) == len(b) and all(compatible(x, y) for x, y in zip(a, b))


def _divisors(n: int) -> list[int]:
    return [d for d in range(2, n + 1) if n % d == 0]


@cache
def is_1d_layout(h: tuple) -> bool:
    """Whether some layout with size ``len(h)`` (any factorization of it) maps index ``i``
    to ``h[i]`` for every ``i``."""
    s = len(h)
    if s == 1:
        return h[0] == 0
    for n1 in _divisors(s):
        d1 = h[1]
        if any(h[i] != i * d1 for i in range(n1)):
            continue
        if any(h[j * n1 + i] != h[j * n1] + h[i] for j in range(s // n1) for i in range(n1)):
            continue
        if is_1d_layout(tuple(h[j * n1] for j in range(s // n1))):
            return True
    return False


def layout_with_shape_exists(shape: Any, f: list[int]) -> bool:
    """Whether a layout whose shape refines ``shape`` (each leaf split into factors) maps
    index ``i`` to ``f[i]``: ``f`` must be additive over the leaves of ``shape`` and a
    1-D layout along each leaf."""
    fs = flat(shape)
    if f[0] != 0:
        return False
    strides = []
    acc = 1
    for s in fs:
        strides.append(acc)
        acc *= s
    for i in range(len(f)):
        rest, total = i, 0
        for s, e in zip(fs, strides):
            rest, c = divmod(rest, s)
            total += f[c * e]
        if total != f[i]:
            return False
    return all(is_1d_layout(tuple(f[j * e] for j in range(s))) for s, e in zip(fs, strides))


def _ordered_layouts(bound: int, base: set[int]) -> list[Layout]:
    """Every flat layout ``R`` (``1:0`` included) with extents >= 2 whose values strictly
    increase with the index, whose cosize is at most ``bound``, and whose sum with the
    offsets ``base`` is injective (``{b + R(j)}`` all distinct)."""
    out: list[Layout] = []
    budget = [NODE_BUDGET]

    def grow(modes: list, reach: int, sums: set[int]) -> None:
        budget[0] -= 1
        if budget[0] < 0:
            raise _TooLarge
        if len(modes) < 2:
            out.append(Layout(*(modes[0] if modes else (1, 0))))
        else:
            out.append(Layout(tuple(m[0] for m in modes), tuple(m[1] for m in modes)))
        for d in range(reach + 1, bound):
            if reach + d + 1 > bound:
                break
            new = set(sums)
            for k in range(1, bound):
                r = reach + k * d
                if r + 1 > bound:
                    break
                shifted = {v + k * d for v in sums}
                if shifted & new:
                    break
                new |= shifted
                grow([*modes, (k + 1, d)], r, new)

    grow([], 0, set(base))
    return out


def complement_candidates(
    layout: Any, cotarget: int, limit: int = MAX_SEARCH
) -> list[Layout] | None:
    """Every ordered flat layout ``R`` with the complement's defining property for
    ``layout`` and ``cotarget`` (see ``judge.complement_ok``); None when the search space
    (cosize up to ``round_up(cotarget, cosize(layout))``) is too large to enumerate."""
    from tests.host.layouts.peers.judge import complement_ok, without_zero_strides

    cl = cosize_of(layout)
    bound = -(-cotarget // cl) * cl
    if bound > limit:
        return None
    base = set(values(without_zero_strides(layout)))
    try:
        cands = _ordered_layouts(bound, base)
    except _TooLarge:
        return None
    return [r for r in cands if complement_ok(layout, cotarget, r)[0]]


def _factorizations(n: int) -> list[tuple]:
    if n == 1:
        return [()]
    return [(d, *rest) for d in _divisors(n) for rest in _factorizations(n // d)]


def _solve(rows: list[list[int]], rhs: list[int]) -> list[Fraction] | None:
    """A rational solution of ``rows @ x == rhs`` (free unknowns set to 0), or None."""
    m = [[Fraction(v) for v in r] + [Fraction(b)] for r, b in zip(rows, rhs)]
    n = len(rows[0]) if rows else 0
    piv_cols = []
    row = 0
    for col in range(n):
        p = next((r for r in range(row, len(m)) if m[r][col] != 0), None)
        if p is None:
            continue
        m[row], m[p] = m[p], m[row]
        m[row] = [v / m[row][col] for v in m[row]]
        for r in range(len(m)):
            if r != row and m[r][col] != 0:
                f = m[r][col]
                m[r] = [a - f * b for a, b in zip(m[r], m[row])]
        piv_cols.append(col)
        row += 1
    if any(all(v == 0 for v in r[:-1]) and r[-1] != 0 for r in m):
        return None
    x = [Fraction(0)] * n
    for r, col in enumerate(piv_cols):
        x[col] = m[r][-1]
    return x


def _sorted_stride_inverse(layout: Any) -> Layout | None:
    """A candidate left inverse of a layout with positive strides: its modes sorted by
    stride, each given the extent up to the next stride (``d_{k+1}/d_k``, which must be
    exact and at least the mode's extent) and the mode's index stride."""
    if isinstance(layout, ComposedLayout):
        return None
    fs, fd = flat(layout.shape), flat(layout.stride)
    idx = []
    acc = 1
    for s in fs:
        idx.append(acc)
        acc *= s
    modes = sorted((d, s, e) for s, d, e in zip(fs, fd, idx) if s != 1)
    if not modes or modes[0][0] <= 0:
        return None
    shape, stride = [], []
    if modes[0][0] > 1:
        shape.append(modes[0][0])
        stride.append(0)
    for k, (d, s, e) in enumerate(modes):
        if k + 1 < len(modes):
            nxt = modes[k + 1][0]
            if nxt % d or nxt // d < s:
                return None
            shape.append(nxt // d)
        else:
            shape.append(s)
        stride.append(e)
    return Layout(tuple(shape), tuple(stride))


def left_inverse_exists(layout: Any, limit: int = MAX_SEARCH) -> bool | None:
    """Whether a flat layout ``R`` with ``R(layout(i)) == i`` for every index exists, among
    layouts of size in ``[span, 2*span]`` (span: the width of the image); None when the
    image is too wide to search. Non-injective layouts have none."""
    img = values(layout)
    if len(set(img)) != len(img):
        return False
    built = _sorted_stride_inverse(layout)
    if built is not None and all(ev(built, x) == i for i, x in enumerate(img)):
        return True
    lo, hi = min(img), max(img)
    span = hi - lo + 1
    if span > min(limit, 96):
        return None
    for p in range(max(span, 1), 2 * span + 1):
        for shape in _factorizations(p) or [()]:
            if not shape:
                shape = (1,)
            probe = Layout(shape, (0,) * len(shape))
            rows = []
            for x in img:
                crd = []
                rest = x
                for s in shape[:-1]:
                    rest, c = divmod(rest, s)
                    crd.append(c)
                crd.append(rest)
                rows.append(crd)
            sol = _solve(rows, list(range(len(img))))
            if sol is not None and all(v.denominator == 1 for v in sol):
                cand = Layout(probe.shape, tuple(int(v) for v in sol))
                if all(ev(cand, x) == i for i, x in enumerate(img)):
                    return True
    return False
