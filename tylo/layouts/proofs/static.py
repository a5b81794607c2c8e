"""Exact checks of every property on a concrete (all-int) form (private).

Each check answers ``Outcome(ok, rule, witness)``: ``ok`` True or False (None only when
the layout is too large to enumerate and no rule settles it), the rule that decided, and
for a failure a raw witness: the 1-D (colexicographic) ``indices`` of the coordinates
that show it, their ``offsets`` and a ``why`` sentence. Rules first (sorted span, the
two-mode gcd test, coalesced contiguity, alignment of generators, corner bounds, normal
forms), numpy enumeration only when no rule decides.
"""

from __future__ import annotations

from math import gcd
from typing import TYPE_CHECKING, Any, NamedTuple

from tylo.layouts._budget import ENUMERATION_LIMIT, INT64_SAFE, SMALL_ENUMERATION, check_budget
from tylo.layouts._lazy import lazy
from tylo.layouts.proofs.normalize import (
    Concrete,
    Pairs,
    simplify,
    swizzle_bits,
    swizzle_block_bits,
)

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy("numpy")  # imported when a check enumerates (the rules above need none)

__all__ = [
    "ENUM_LIMIT",
    "Outcome",
    "check_aligned",
    "check_bounded",
    "check_contiguous",
    "check_equal",
    "check_injective",
]

ENUM_LIMIT = ENUMERATION_LIMIT  # the size budget (tylo.layouts._budget), about 100 ms
_INT32_SAFE = 1 << 29  # offsets (plus offset, base, swizzle bits) stay far from 2^31
# Offsets are exact: int32/int64 while every value provably fits, Python ints (numpy
# object arrays, slower) beyond INT64_SAFE, so no proof is decided by a wrapped offset.


_Live = tuple[int, int, int]  # a mode that moves: (|stride|, extent, flat index)


class Outcome(NamedTuple):
    ok: bool | None
    rule: str
    witness: dict[str, Any] | None = None


def _dtype(bound: int) -> Any:
    """The narrowest exact dtype for values of magnitude below ``bound``."""
    if bound < _INT32_SAFE:
        return np.int32  # half the memory traffic
    return np.int64 if bound < INT64_SAFE else object


def _reach(pairs: Pairs) -> int:
    """A bound on every offset of the pairs and on every stride (each must fit the dtype,
    even one of an extent-1 mode)."""
    return int(sum((e - 1) * abs(d) for e, d in pairs) + max((abs(d) for _, d in pairs), default=0))


def _np_offsets(pairs: Pairs, dt: Any = None) -> np.ndarray:
    """Offsets of the pairs' coordinates in colexicographic order (first pair fastest)."""
    if dt is None:
        dt = _dtype(_reach(pairs))
    a = np.zeros(1, dtype=dt)
    for e, d in pairs:
        if dt is object:
            step = np.arange(e).astype(object) * d
        else:
            step = np.arange(e, dtype=dt) * dt(d)
        a = step[:, None] + a[None, :]
        a = a.reshape(-1)
    return a


def _np_outer(c: Concrete, x: np.ndarray) -> np.ndarray:
    if c.swizzle is not None:
        sw = c.form.outer
        y = x & sw.yyy_mask
        out: np.ndarray = x ^ (y >> sw.shift if sw.shift >= 0 else y << -sw.shift)
        return out
    if c.outer is not None:
        r = np.zeros_like(x)
        n = len(c.outer)
        for i, (e, d) in enumerate(c.outer):
            if i == n - 1:
                last: np.ndarray = r + x * d
                return last
            r = r + (x % e) * d
            x = x // e
    return x


def _all_offsets(c: Concrete, base: int = 0) -> np.ndarray:
    """``base + outer(offset + inner)`` at every index, in a dtype where every
    intermediate value is exact (int32, int64, or Python ints)."""
    check_budget(c.size, f"enumerating the offsets of {c.form}", _BUDGET_FIX)
    inner = _reach(c.flat) + abs(c.offset)
    bound = inner + abs(base)
    if c.swizzle is not None:
        sw = c.form.outer
        bound = 2 * (inner | sw.zzz_mask | sw.yyy_mask) + abs(base)
    elif c.outer is not None:
        reach = sum(abs(d) * e for e, d in c.outer)
        bound = (inner + 1) * reach + abs(base) + 1
    dt = _dtype(bound)
    if c.outer is not None and dt is np.int32:
        dt = np.int64
    off = _np_offsets(c.flat, dt)
    return _np_outer(c, off + c.offset) + base


_BUDGET_FIX = (
    "no exact rule settles this layout, so it would be enumerated; prove the property on a "
    "smaller tile (the property of a tile usually carries over by the layout's structure)"
)


def _weights(c: Concrete) -> list[int]:
    w, out = 1, []
    for e, _ in c.flat:
        out.append(w)
        w *= e
    return out


def _too_large(c: Concrete, n: int) -> Outcome:
    check_budget(n, f"enumerating the offsets of {c.form}", _BUDGET_FIX)
    return Outcome(None, "unreachable: check_budget raises")  # pragma: no cover


# -- injective ---------------------------------------------------------------------------------


def check_injective(c: Concrete) -> Outcome:
    """Exact injectivity of a concrete form (a swizzle is a bijection: it never matters).

    >>> from tylo.layouts import Layout
    >>> from tylo.layouts.proofs.normalize import to_form
    >>> check_injective(to_form(Layout((3, 2), (2, 3)), "").static_concrete)
    Outcome(ok=True, rule='two-mode gcd rule', witness=None)
    >>> check_injective(to_form(Layout((4, 8), (1, 2)), "").static_concrete).witness["indices"]
    (2, 4)
    """
    w = _weights(c)
    if c.outer is None:
        live = [(abs(d), e, k) for k, (e, d) in enumerate(c.flat) if e > 1]
        for ad, _, k in live:
            if ad == 0:
                o = c.offset_of(0)
                why = f"flat mode {k} has stride 0 and extent >= 2"
                return Outcome(False, "stride-0 collision", _pair(c, 0, w[k], why, o))
        live.sort()
        reach = 0
        for ad, e, _ in live:
            if ad <= reach:
                break
            reach += (e - 1) * ad
        else:
            return Outcome(True, "sorted-span rule")
        hit = _pair_collision(c, live, w)
        if hit is not None:
            return hit
        if len(live) == 2:
            return Outcome(True, "two-mode gcd rule")
        got = _blocked_span(c, live, w)
        if got is not None:
            return got
    return _enumerate_injective(c)


def _blocked_span(c: Concrete, live: list[_Live], w: list[int]) -> Outcome | None:
    """Sorted span with enumerated blocks: where the chain breaks, enumerate the modes up
    to the breaking one (with ``|stride|``); if they are injective their reach continues
    the chain. None when a block is too large (then the whole layout is enumerated)."""
    reach = 0
    for i, (ad, e, _) in enumerate(live):
        if ad > reach:
            reach += (e - 1) * ad
            continue
        block = live[: i + 1]
        n = 1
        for _, be, _ in block:
            n *= be
        if n > ENUM_LIMIT or 2 * n > c.size:
            return None
        dup = _find_duplicate(_np_offsets(tuple((be, bd) for bd, be, _ in block)))
        if dup is not None:
            return _block_collision(c, block, w, dup)
        reach += (e - 1) * ad
    return Outcome(True, "sorted-span rule with enumerated blocks")


def _block_collision(
    c: Concrete, block: list[_Live], w: list[int], dup: tuple[int, int]
) -> Outcome:
    """Map two colliding block indices (``|stride|`` offsets) to layout indices: reflect
    the coordinates of negative-stride modes, which shifts both offsets alike."""
    idx = []
    for x in dup:
        full = 0
        for _, be, k in block:
            cx = x % be
            x //= be
            if c.flat[k][1] < 0:
                cx = be - 1 - cx
            full += cx * w[k]
        idx.append(full)
    i, j = sorted(idx)
    return Outcome(False, "enumerated block", _pair(c, i, j, "two coordinates share an offset"))


def _pair(c: Concrete, i: int, j: int, why: str, o: int | None = None) -> dict[str, Any]:
    oi = c.offset_of(i) if o is None else o
    return {"indices": (i, j), "offsets": (oi, c.offset_of(j)), "why": why}


def _pair_collision(c: Concrete, live: list[_Live], w: list[int]) -> Outcome | None:
    """A collision within some pair of modes (the exact two-mode gcd test on every pair:
    with ``|d1| = g*p``, ``|d2| = g*q``, the pair collides iff ``q < s1`` and ``p < s2``),
    the one with the smallest indices; None when no pair collides."""
    best = None
    for x in range(len(live)):
        for y in range(x + 1, len(live)):
            (a1, e1, k1), (a2, e2, k2) = sorted((live[x], live[y]), key=lambda t: t[2])
            g = gcd(a1, a2)
            p, q = a1 // g, a2 // g
            if q >= e1 or p >= e2:
                continue
            d1, d2 = c.flat[k1][1], c.flat[k2][1]
            if (d1 > 0) == (d2 > 0):
                i, j = q * w[k1], p * w[k2]
            else:
                i, j = 0, q * w[k1] + p * w[k2]
            i, j = min(i, j), max(i, j)
            if best is None or (j, i) < best[:2]:
                best = (j, i, f"{q}*{d1} == {p}*{d2}: two coordinates share an offset")
    if best is None:
        return None
    j, i, why = best
    return Outcome(False, "two-mode gcd rule", _pair(c, i, j, why))


def _first_duplicate(off: np.ndarray) -> tuple[int, int] | None:
    order = np.argsort(off, kind="stable")
    s = off[order]
    eq = np.nonzero(s[1:] == s[:-1])[0]
    if eq.size == 0:
        return None
    js = order[eq + 1]
    k = int(eq[int(np.argmin(js))])
    start = k
    while start > 0 and s[start - 1] == s[k]:
        start -= 1
    return int(order[start]), int(order[k + 1])


def _find_duplicate(off: np.ndarray) -> tuple[int, int] | None:
    """Two indices with the same offset (the smallest repeated offset), or None: a count
    per offset for dense offsets, a sort for sparse ones."""
    n = off.size
    lo = int(off.min())
    span = int(off.max()) - lo + 1
    if span <= 8 * n + 4096:
        o = (off - lo).astype(np.intp, copy=False)
        counts = np.bincount(o, minlength=span)
        if int(counts.max()) <= 1:
            return None
        v = int(np.argmax(counts > 1))
        i, j = (int(x) for x in np.flatnonzero(o == v)[:2])
        return i, j
    return _first_duplicate(off)


def _enumerate_injective(c: Concrete) -> Outcome:
    n = c.size
    if n > ENUM_LIMIT:
        return _too_large(c, n)
    dup = _find_duplicate(_all_offsets(c))
    if dup is None:
        return Outcome(True, "enumeration")
    i, j = dup
    return Outcome(False, "enumeration", _pair(c, i, j, "two coordinates share an offset"))


# -- contiguous --------------------------------------------------------------------------------


def _mode_geometry(c: Concrete, mode: int) -> tuple[int, int, int]:
    sizes = c.sizes
    a = 1
    for s in sizes[:mode]:
        a *= s
    b = 1
    for s in sizes[mode + 1 :]:
        b *= s
    return a, sizes[mode], b


def _vector(c: Concrete, idx: list[int], why: str) -> dict[str, Any]:
    return {
        "indices": tuple(idx),
        "offsets": tuple(c.offset_of(i) for i in idx),
        "why": why,
    }


def check_contiguous(c: Concrete, v: int, mode: int) -> Outcome:
    """Every run of ``v`` consecutive indices of ``mode`` (starting at multiples of ``v``),
    for every coordinate of the other modes, has consecutive offsets; ``v`` divides the
    mode's size.

    >>> from tylo.layouts import Layout
    >>> from tylo.layouts.proofs.normalize import to_form
    >>> c = to_form(Layout((8, 4), (1, 10)), "").static_concrete
    >>> check_contiguous(c, 8, 0).ok, check_contiguous(c, 2, 1).witness["offsets"]
    (True, (0, 10))
    """
    a, n, b = _mode_geometry(c, mode)
    if v == 1:
        return Outcome(True, "vector width 1")
    if n % v:
        start = (n // v) * v
        idx = [a * j for j in range(start, n)]
        plural = "s" if n != 1 else ""
        why = f"mode {mode} has {n} element{plural}, not a multiple of the vector width {v}"
        return Outcome(False, "mode size", _vector(c, idx, why))
    pairs = simplify(c.mode_pairs(mode))
    e0, d0 = pairs[0] if pairs else (1, 0)
    first_ok = d0 == 1 and e0 % v == 0
    if c.plain:
        if first_ok:
            return Outcome(True, "coalesced mode has stride 1 and an extent divisible by v")
        check_budget(n, f"enumerating mode {mode} of {c.form}", _BUDGET_FIX)
        mid = _np_offsets(c.mode_pairs(mode)).reshape(n // v, v)
        bad = np.argwhere(np.diff(mid, axis=1) != 1)
        if bad.size == 0:  # cannot happen for a normal form; stay exact regardless
            return Outcome(True, "enumeration of the mode")
        j = int(bad[0][0]) * v
        idx = [a * (j + t) for t in range(v)]
        return Outcome(False, "coalesced mode", _vector(c, idx, _not_consecutive(v)))
    if first_ok and c.swizzle is not None and (1 << swizzle_block_bits(c.form.outer)) % v == 0:
        starts = _start_generators_ok(c, v, mode, v, c.offset)
        if starts:
            return Outcome(True, "contiguous and v-aligned runs survive the swizzle")
    n_all = c.size
    if n_all > ENUM_LIMIT:
        return _too_large(c, n_all)
    off = _all_offsets(c).reshape(b, n // v, v, a)
    bad = np.argwhere(np.diff(off, axis=2) != 1)
    if bad.size == 0:
        return Outcome(True, "enumeration")
    pb, pj, _, pa = (int(x) for x in bad[0])
    idx = [pa + a * (pj * v + t + n * pb) for t in range(v)]
    return Outcome(False, "enumeration", _vector(c, idx, _not_consecutive(v)))


def _not_consecutive(v: int) -> str:
    return f"the {v} offsets of this vector are not consecutive"


# -- aligned -------------------------------------------------------------------------------------


def _start_generators_ok(c: Concrete, v: int, mode: int, a_e: int, base: int) -> bool:
    return _first_misaligned_start(c, v, mode, a_e, base) is None


def _first_misaligned_start(c: Concrete, v: int, mode: int, a_e: int, base: int) -> int | None:
    """Index of a misaligned vector start of the pre-outer offsets ``base + inner``, using
    generators: 0, each other flat mode's coordinate 1, each start of ``mode`` (exact)."""
    if base % a_e:
        return 0
    w = _weights(c)
    lo, hi = c.mode_range(mode)
    for k, (e, d) in enumerate(c.flat):
        if (k < lo or k >= hi) and e > 1 and d % a_e:
            return w[k]
    a, n, _ = _mode_geometry(c, mode)
    pairs = simplify(c.mode_pairs(mode))
    if not pairs:
        return None
    if pairs[0][0] % v == 0:
        # coalesced, the starts are sums of generators v*d0 (count e0/v) and d_k (count
        # e_k), each occurring alone: exact without enumerating the mode
        reach = 1
        for k, (e, d) in enumerate(pairs):
            g, count, at = (v * d, e // v, v) if k == 0 else (d, e, reach)
            if count >= 2 and g % a_e:
                return int(a * at)
            reach *= e
        return None
    check_budget(n, f"enumerating the vector starts of mode {mode} of {c.form}", _BUDGET_FIX)
    mid = _np_offsets(c.mode_pairs(mode))[::v]
    bad = np.nonzero(mid % a_e)[0]
    if bad.size:
        return a * int(bad[0]) * v
    return None


def check_aligned(c: Concrete, v: int, a_e: int, mode: int, base: int) -> Outcome:
    """Every vector start (indices multiple of ``v`` along ``mode``, every coordinate of the
    other modes) lies at an address ``base + L(c)`` that is a multiple of ``a_e``.

    >>> from tylo.layouts import Layout
    >>> from tylo.layouts.proofs.normalize import to_form
    >>> c = to_form(Layout((8, 4), (1, 12)), "").static_concrete
    >>> check_aligned(c, 8, 4, 0, 0).ok, check_aligned(c, 8, 8, 0, 0).witness["offsets"]
    (True, (12,))
    """
    residue_kept = c.plain or (
        c.swizzle is not None and (1 << swizzle_bits(c.form.outer)[0]) % a_e == 0
    )
    if a_e == 1:
        return Outcome(True, "alignment of one element")
    if residue_kept:
        i = _first_misaligned_start(c, v, mode, a_e, base + c.offset)
        rule = "alignment of the generating strides"
        if c.swizzle is not None:
            rule += " (the swizzle keeps residues modulo 2^m)"
        if i is None:
            return Outcome(True, rule)
        return Outcome(False, rule, _start(c, i, base, a_e))
    a, n, b = _mode_geometry(c, mode)
    if c.size > ENUM_LIMIT:
        return _too_large(c, c.size)
    off = _all_offsets(c, base).reshape(b, n, a)[:, ::v, :] % a_e
    bad = np.argwhere(off != 0)
    if bad.size == 0:
        return Outcome(True, "enumeration")
    pb, pj, pa = (int(x) for x in bad[0])
    return Outcome(False, "enumeration", _start(c, pa + a * (pj * v + n * pb), base, a_e))


def _start(c: Concrete, i: int, base: int, a_e: int) -> dict[str, Any]:
    o = c.offset_of(i)
    return {
        "indices": (i,),
        "offsets": (o,),
        "why": f"the vector starting at offset {o} (address base + {o} = {base + o} elements) "
        f"is not a multiple of {a_e} elements",
    }


# -- bounded -------------------------------------------------------------------------------------


def check_bounded(c: Concrete, extent: int, base: int) -> Outcome:
    """Every address ``base + L(c)`` lies in ``[0, extent)``.

    >>> from tylo.layouts import Layout
    >>> from tylo.layouts.proofs.normalize import to_form
    >>> c = to_form(Layout((4, 2), (1, -4)), "").static_concrete
    >>> check_bounded(c, 8, 4).ok, check_bounded(c, 8, 3).witness["offsets"]
    (True, (-4,))
    """
    w = _weights(c)
    lo_i = sum(w[k] * (e - 1) for k, (e, d) in enumerate(c.flat) if d < 0)
    hi_i = sum(w[k] * (e - 1) for k, (e, d) in enumerate(c.flat) if d > 0)
    lo = c.offset + sum((e - 1) * d for e, d in c.flat if d < 0)
    hi = c.offset + sum((e - 1) * d for e, d in c.flat if d > 0)
    if c.plain:
        if base + lo < 0:
            return Outcome(False, "corner bounds", _outside(c, lo_i, base, extent))
        if base + hi >= extent:
            return Outcome(False, "corner bounds", _outside(c, hi_i, base, extent))
        return Outcome(True, "corner bounds")
    if c.swizzle is not None:
        zmask = c.form.outer.zzz_mask
        blk = 1 << swizzle_bits(c.form.outer)[1]
        low = max(lo - zmask, (lo // blk) * blk)
        high = min(hi + zmask, (hi // blk + 1) * blk - 1)
        if base + low >= 0 and base + high < extent:
            return Outcome(True, "corner bounds widened by the bits the swizzle may flip")
    if c.size > ENUM_LIMIT:
        return _too_large(c, c.size)
    off = _all_offsets(c, base)
    i_lo, i_hi = int(np.argmin(off)), int(np.argmax(off))
    if int(off[i_lo]) < 0:
        return Outcome(False, "enumeration", _outside(c, i_lo, base, extent))
    if int(off[i_hi]) >= extent:
        return Outcome(False, "enumeration", _outside(c, i_hi, base, extent))
    return Outcome(True, "enumeration")


def _outside(c: Concrete, i: int, base: int, extent: int) -> dict[str, Any]:
    o = c.offset_of(i)
    return {
        "indices": (i,),
        "offsets": (o,),
        "why": f"offset {o} (address base + {o} = {base + o}) is outside [0, {extent})",
    }


# -- equal ---------------------------------------------------------------------------------------


def _outer_key(c: Concrete) -> Any:
    return (c.swizzle, c.outer, c.offset)


def check_equal(ca: Concrete, cb: Concrete) -> Outcome:
    """Same size and the same offset at every 1-D index.

    >>> from tylo.layouts import Layout
    >>> from tylo.layouts.proofs.normalize import to_form
    >>> a = to_form(Layout((4, 2), (1, 4)), "").static_concrete
    >>> b = to_form(Layout(8, 1), "").static_concrete
    >>> t = to_form(Layout((4, 2), (2, 1)), "").static_concrete
    >>> check_equal(a, b).rule, check_equal(a, t).ok
    ('equal normal forms', False)
    """
    na, nb = ca.size, cb.size
    if na != nb:
        i = min(na, nb)
        offsets = (None, cb.offset_of(i)) if na < nb else (ca.offset_of(i), None)
        why = f"the sizes differ ({na} and {nb}): index {i} exists in only one"
        return Outcome(False, "sizes", {"indices": (i,), "offsets": offsets, "why": why})
    if _outer_key(ca) == _outer_key(cb) and simplify(ca.flat) == simplify(cb.flat):
        return Outcome(True, "equal normal forms")
    if na > ENUM_LIMIT:
        return _too_large(ca, na)
    if na <= SMALL_ENUMERATION:  # in Python: faster than importing numpy
        first = next((i for i in range(na) if ca.offset_of(i) != cb.offset_of(i)), None)
        if first is None:
            return Outcome(True, "enumeration")
        i = first
    else:
        diff = np.nonzero(_all_offsets(ca) != _all_offsets(cb))[0]
        if diff.size == 0:
            return Outcome(True, "enumeration")
        i = int(diff[0])
    oa, ob = ca.offset_of(i), cb.offset_of(i)
    why = f"index {i} maps to {oa} in the first layout and {ob} in the second"
    return Outcome(False, "enumeration", {"indices": (i,), "offsets": (oa, ob), "why": why})
