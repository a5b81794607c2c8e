"""Coalesce, filter and complement: the algebra's normalizing operations.

All three keep exact semantics on symbolic layouts: a merge or a drop happens only when
its condition is *decided* true, so an undecidable condition leaves a layout less
simplified but never wrong; complement raises when admissibility depends on the values.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar, overload

from tylo.layouts._depth import check_depth
from tylo.layouts._lazy import sympy
from tylo.layouts._scope import Value
from tylo.layouts.errors import ComplementError, ShapeError
from tylo.layouts.inttuple import IntTuple, flatten_tuple, fmt, product, vmul
from tylo.layouts.layout import Layout, _as_layout, cosize, make_layout, size
from tylo.layouts.swizzle import ComposedLayout
from tylo.layouts.symbolic import (
    ceil_div,
    decide_cmp,
    divides,
    exact_div,
    undecidable_cmp,
    undecidable_divides,
)

__all__ = ["coalesce", "complement", "filter_", "undecided_simplification"]

_M = TypeVar("_M", bound=tuple[Any, ...])  # a mode tuple, its stride first


def is_one(x: Any) -> bool:
    """True when ``x == 1`` is decided (static or symbolic)."""
    if type(x) is int:
        return x == 1
    return decide_cmp(x, "==", 1) is True


def is_zero(x: Any) -> bool:
    """True when ``x == 0`` is decided."""
    if type(x) is int:
        return x == 0
    return decide_cmp(x, "==", 0) is True


def same(a: Any, b: Any) -> bool:
    """True when ``a == b`` is decided."""
    if type(a) is int and type(b) is int:
        return a == b
    return decide_cmp(a, "==", b) is True


def _static_coalesced(fs: Sequence[Value], fd: Sequence[Value]) -> tuple[list[Value], list[Value]]:
    """Merge adjacent static modes (``s1:d1, s2:s1*d1`` -> ``s1*s2:d1``), dropping extent-1
    modes; never empty (``[1], [0]`` for a layout of size 1)."""
    rs: list[Value] = []
    rd: list[Value] = []
    for s, d in zip(fs, fd):
        if s == 1:
            continue
        if rs and rs[-1] * rd[-1] == d:
            rs[-1] *= s
        else:
            rs.append(s)
            rd.append(d)
    return (rs, rd) if rs else ([1], [0])


def _coalesce_flat(fs: Sequence[Value], fd: Sequence[Value], static: bool) -> tuple[Any, Any]:
    rs: list[Value] = []
    rd: list[Value] = []
    if static:
        rs, rd = _static_coalesced(fs, fd)
    else:
        for s, d in zip(fs, fd):
            if is_one(s):
                continue
            if rs and same(vmul(rs[-1], rd[-1]), d):
                rs[-1] = vmul(rs[-1], s)
            else:
                rs.append(s)
                rd.append(d)
    if not rs:
        return 1, 0
    if len(rs) == 1:
        return rs[0], rd[0]
    return tuple(rs), tuple(rd)


def _coalesce(x: Layout, profile: Any) -> tuple[Any, Any]:
    if profile is None or type(profile) is not tuple:
        fs, fd = x.flat()
        return _coalesce_flat(fs, fd, x.is_static)
    shape = x.shape if type(x.shape) is tuple else (x.shape,)
    stride = x.stride if type(x.stride) is tuple else (x.stride,)
    if len(profile) > len(shape):
        raise ShapeError(
            f"coalesce({x}, profile {fmt(profile)}): the profile has more modes "
            f"({len(profile)}) than the layout ({len(shape)})"
        )
    rs, rd = [], []
    for i, p in enumerate(profile):
        s, d = _coalesce(Layout._make(shape[i], stride[i]), p)
        rs.append(s)
        rd.append(d)
    return tuple(rs) + shape[len(profile) :], tuple(rd) + stride[len(profile) :]


@overload
def coalesce(layout: ComposedLayout, profile: IntTuple = None) -> ComposedLayout: ...
@overload
def coalesce(layout: Layout | int, profile: IntTuple = None) -> Layout: ...
def coalesce(
    layout: Layout | ComposedLayout | int, profile: IntTuple = None
) -> Layout | ComposedLayout:
    """The same function with the fewest modes: drop extent-1 modes, merge mode pairs
    ``s0:d0, s1:d1`` with ``d1 == s0*d0``. With ``profile`` (a tuple), coalesce each
    top-level mode separately, keeping the rank. Defining property: ``coalesce(L)(i) ==
    L(i)`` for every index ``i < size(L)``.

    >>> a = Layout((2, (1, 6)), (1, (6, 2)))
    >>> str(coalesce(a)), str(coalesce(a, (1, 1)))
    ('12:1', '(2,6):(1,2)')
    """
    if type(layout) is Layout and profile is None:
        fs, fd = layout.flat()
        if layout.is_static:
            s, d = _coalesce_flat(fs, fd, True)
            return Layout._make(s, d)
    if type(profile) is tuple:
        check_depth(profile, "the profile", "coalesce")
    x = _as_layout(layout, "coalesce")
    if isinstance(x, ComposedLayout):
        return ComposedLayout(x.outer, x.offset, coalesce(x.inner, profile))
    s, d = _coalesce(x, profile)
    return Layout._make(s, d)


def undecided_simplification(x: Layout) -> str | None:
    """A condition (as text) on which the coalesced form of ``x`` depends, or None when
    every drop and merge coalesce considered was decided. A failure judged on a form that
    depends on such a condition is not a failure for every value of the symbols."""
    if x.is_static:
        return None
    for s in x.flat()[0]:
        if type(s) is not int and decide_cmp(s, "==", 1) is None:
            return f"{fmt(s)} == 1"
    cs, cd = coalesce(x).flat()
    for i in range(len(cs) - 1):
        reach = vmul(cs[i], cd[i])
        if decide_cmp(cd[i + 1], "==", reach) is None:
            return f"{fmt(cd[i + 1])} == {fmt(reach)}"
    return None


def _drop_zero_strides(shape: Any, stride: Any) -> Any:
    if type(shape) is tuple:
        return tuple(_drop_zero_strides(s, d) for s, d in zip(shape, stride))
    return 1 if is_zero(stride) else shape


@overload
def filter_(layout: ComposedLayout, profile: IntTuple = None) -> ComposedLayout: ...
@overload
def filter_(layout: Layout | int, profile: IntTuple = None) -> Layout: ...
def filter_(
    layout: Layout | ComposedLayout | int, profile: IntTuple = None
) -> Layout | ComposedLayout:
    """CuTe's ``filter``: drop stride-0 modes and extent-1 modes, then coalesce. The
    result is the function on the remaining coordinates: ``filter_(L)(i) == L'(i)`` where
    ``L'`` is ``L`` with every stride-0 extent replaced by 1. A composed layout
    ``S o offset o L`` gives ``S o offset o filter_(L)``, as :func:`coalesce` does.

    >>> str(filter_(Layout((4, 2, 3), (1, 0, 4))))
    '12:1'
    """
    if type(profile) is tuple:
        check_depth(profile, "the profile", "filter_")
    x = _as_layout(layout, "filter_")
    if isinstance(x, ComposedLayout):
        return ComposedLayout(x.outer, x.offset, filter_(x.inner, profile))
    return coalesce(Layout._make(_drop_zero_strides(x.shape, x.stride), x.stride), profile)


class _Text:
    """A message part formatted only if an error is raised (printing sympy is slow)."""

    __slots__ = ("make",)

    def __init__(self, make: Callable[[], str]) -> None:
        self.make = make

    def __str__(self) -> str:
        return self.make()

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)


def sorted_modes(modes: list[_M], what: object, op: str = "complement") -> list[_M]:
    """Sort mode tuples by their first item, the stride (stable), deciding symbolic
    comparisons exactly; an undecidable comparison raises for operation ``op``, naming
    ``what``."""
    if all(type(m[0]) is int for m in modes):
        return sorted(modes, key=lambda m: m[0])
    out: list[_M] = []
    for m in modes:
        pos = len(out)
        while pos > 0:
            r = decide_cmp(out[pos - 1][0], "<=", m[0])
            if r is None:
                raise undecidable_cmp(op, out[pos - 1][0], "<=", m[0], what)
            if r:
                break
            pos -= 1
        out.insert(pos, m)
    return out


def _static_complement(x: Layout, cotarget: int) -> Layout | None:
    """Plain-int complement; None when not admissible (the general path raises)."""
    fs, fd = x.flat()
    modes = sorted((d, s) for s, d in zip(fs, fd) if s != 1 and d != 0)
    rs = []
    rd = []
    cur = 1
    for d, s in modes:
        if d < 0 or d % cur:
            return None
        rs.append(d // cur)
        rd.append(cur)
        cur = s * d
    rs.append(-(-cotarget // cur))
    rd.append(cur)
    shape, stride = _coalesce_flat(rs, rd, True)
    return Layout._make(shape, stride)


def _check_cotarget(x: Any, cotarget: Any) -> Any:
    """The cotarget as a size: a positive int or a symbolic value decided ``>= 1``."""
    if type(cotarget) is tuple:
        check_depth(cotarget, "the cotarget", "complement")
        for e in flatten_tuple(cotarget):
            _check_cotarget(x, e)
        return product(cotarget)
    if type(cotarget) is int:
        if cotarget < 1:
            raise ShapeError(
                f"complement({x}, {cotarget}): the cotarget is the size of the codomain to "
                "cover and must be a positive integer (>= 1); give the number of offsets"
            )
        return cotarget
    if not isinstance(cotarget, sympy.Expr) or divides(1, cotarget) is not True:
        raise ShapeError(
            f"complement({x}, {cotarget!r}): the cotarget must be a positive integer, a "
            "symbolic integer (tylo.layouts.dim) or a shape"
        )
    pos = decide_cmp(cotarget, ">=", 1)
    if pos is False:
        raise ShapeError(f"complement({x}, {fmt(cotarget)}): the cotarget is never >= 1")
    if pos is None:
        raise undecidable_cmp("complement", cotarget, ">=", 1, f"the cotarget of {x}")
    return cotarget


def _offsets(layout: Layout, limit: int) -> list[int] | None:
    """Every offset of a static layout, or None when it has more than ``limit``."""
    n = 1
    for s in layout.flat()[0]:
        n *= s
    if n > limit:
        return None
    return [layout(i) for i in range(n)]


def _inadmissible(
    x: Layout, what: Any, rs: list[Value], rd: list[Value], cur: Any, cotarget: Any, d: Any, s: Any
) -> Layout:
    """A mode of stride ``d`` is not a multiple of ``cur``, the reach of the modes with
    smaller strides. When the cotarget is within that reach, the gaps ``rs:rd`` of the
    fewest smaller-stride modes whose reach covers it are a valid answer if (A, them) is
    injective, which is checked for static layouts (fewer gaps collide less: any larger
    answer of this kind contains it); otherwise refuse, claiming non-existence only for a
    non-injective A (then (A, R) is injective for no R)."""
    head = (
        f"{what}: {x} is not admissible: stride {fmt(d)} (extent {fmt(s)}) is not a multiple "
        f"of {fmt(cur)}, the reach of the modes with smaller strides"
    )
    filtered = filter_(x)
    if x.is_static and type(cotarget) is int:
        if cotarget <= cur:
            # rd[j] is the reach of the j smallest-stride modes with their gaps
            j = 0
            while j < len(rd) and rd[j] < cotarget:
                j += 1
            cand = coalesce(Layout._make(tuple(rs[:j]) or 1, tuple(rd[:j]) or 0))
            both = _offsets(make_layout(filtered, cand), _ENUMERATION_LIMIT)
            if both is not None and len(set(both)) == len(both):
                return cand
        floor = _floor_candidate(filtered, cotarget)
        if floor is not None:
            return floor
        image = _offsets(filtered, _ENUMERATION_LIMIT)
        if image is not None and len(set(image)) < len(image):
            raise ComplementError(
                f"{head}, and {filtered} (A without its stride-0 and extent-1 modes) is not "
                "injective, so (A, R) is injective for no layout R: no complement exists; "
                "use an injective layout whose sorted strides divide each other"
            )
    raise ComplementError(
        f"{head}; tylo builds the complement of admissible layouts only (or, for a static "
        "layout, the gaps below the cotarget or CuTe's construction with gaps rounded "
        "down, each checked by enumeration), and did not decide whether another layout R "
        "makes (A, R) injective and covering the cotarget; use an injective layout whose "
        "sorted strides divide each other"
    )


def _floor_candidate(filtered: Layout, cotarget: int) -> Layout | None:
    """CuTe's construction for a static layout, gaps rounded down (``d_k // reach``), when
    it has the defining property, checked by enumeration: R ordered, ``(A, R)`` injective,
    its image covering ``[0, cotarget)``. None otherwise (or past the enumeration limit)."""
    fs, fd = filtered.flat()
    modes = sorted((d, sz) for sz, d in zip(fs, fd) if sz != 1 and d != 0)
    rs, rd, cur = [], [], 1
    for d, sz in modes:
        if d // cur < 1:
            return None
        rs.append(d // cur)
        rd.append(cur)
        cur = sz * d
    rs.append(-(-cotarget // cur))
    rd.append(cur)
    cand = coalesce(Layout._make(tuple(rs), tuple(rd)))
    n = 1
    for e in (*fs, *cand.flat()[0]):
        n *= e
    if n > _ENUMERATION_LIMIT:
        return None
    rv = [cand(i) for i in range(size(cand))]
    if any(a >= b for a, b in zip(rv, rv[1:])):
        return None
    both = _offsets(make_layout(filtered, cand), _ENUMERATION_LIMIT)
    if both is None or len(set(both)) != len(both) or not set(range(cotarget)) <= set(both):
        return None
    return cand


_ENUMERATION_LIMIT = 1 << 14
"""Most offsets complement enumerates to check a candidate or a non-injectivity claim."""


def complement(layout: Layout | ComposedLayout | int, cotarget: IntTuple = None) -> Layout:
    """The layout ``R`` of the offsets ``layout`` does not reach, up to ``cotarget`` (an
    int ``n >= 1``, a shape meaning its size, or a symbolic size; default
    ``cosize(layout)``). Stride-0 and extent-1 modes are ignored (CuTe filters them first);
    with ``A' = filter_(layout)``, the defining property is: ``(A', R)`` is injective (the
    images of A' and R meet only at 0), its image covers ``[0, n)``, R is ordered
    (``R(i-1) < R(i)``), so ``size(A') * size(R) >= n``.

    Needs *admissibility*: sorted by stride, each stride is a multiple of the reach
    ``extent*stride`` of the previous mode. An inadmissible static layout still gets the
    complement of its admissible prefix when ``n`` is within that prefix's reach and the
    result is checked injective (``complement((4,6):(1,6), 1) == 1:0``), or CuTe's
    construction with gaps rounded down when enumeration shows it has the defining
    property (``complement((2,2):(1,5), 3) == 2:2``); otherwise
    ComplementError, which says no complement exists only when A' is not injective. A
    cotarget below 1 raises ShapeError.

    >>> str(complement(Layout(4, 2), 24)), str(complement(Layout((2, 2), (1, 6)), 24))
    ('(2,3):(1,8)', '(3,2):(2,12)')
    >>> str(complement(Layout(2, 0), 4))  # the stride-0 mode is dropped first
    '4:1'
    """
    if type(layout) is Layout and layout.is_static and type(cotarget) is int and cotarget >= 1:
        fast = _static_complement(layout, cotarget)
        if fast is not None:
            return fast
    x = _as_layout(layout, "complement")
    if not isinstance(x, Layout):
        raise ComplementError(f"complement({x}, ...): a composed layout has no complement")
    if cotarget is None:
        cotarget = cosize(x)
    else:
        cotarget = _check_cotarget(x, cotarget)
    fs, fd = x.flat()
    what = _Text(lambda: f"complement({x}, {fmt(cotarget)})")
    modes = []
    for s, d in zip(fs, fd):
        if is_one(s) or is_zero(d):
            continue
        pos = decide_cmp(d, ">=", 1)
        if pos is False:
            raise ComplementError(
                f"{what}: stride {fmt(d)} is negative; complement needs non-negative strides "
                "(reverse the mode first)"
            )
        if pos is None:
            raise undecidable_cmp("complement", d, ">=", 1, f"a stride of {x}")
        modes.append((d, s))
    modes = sorted_modes(modes, _Text(lambda: f"strides of {x}"))
    rs: list[Value] = []
    rd: list[Value] = []
    cur: Any = 1
    maybe_trivial = None
    for d, s in modes:
        ok = divides(cur, d)
        if ok is not True:
            if ok is None or (type(s) is not int and decide_cmp(s, "==", 1) is None):
                raise undecidable_divides("complement", cur, d, f"admissibility of {x}")
            return _inadmissible(x, what, rs, rd, cur, cotarget, d, s)
        gap = exact_div(d, cur, op="complement")
        if type(s) is not int and not is_one(gap) and decide_cmp(s, "==", 1) is None:
            # Were s == 1 the mode would be skipped. Keeping it gives the same function
            # provided the later strides and the cotarget are exact multiples (checked below).
            maybe_trivial = (s, d)
        rs.append(gap)
        rd.append(cur)
        cur = vmul(s, d)
    if type(cur) is int and type(cotarget) is int:
        rest = -(-cotarget // cur)
    elif divides(cur, cotarget) is True:
        rest = ceil_div(cotarget, cur)
    elif maybe_trivial is not None:
        # were s == 1, the last mode would start at a smaller reach and round up differently
        s, d = maybe_trivial
        raise undecidable_cmp("complement", s, "==", 1, f"mode {fmt(s)}:{fmt(d)} of {x}")
    elif decide_cmp(cotarget, "<=", cur) is True:
        rest = 1
    else:
        # CuTe's last extent ceil(cotarget / reach), as the static path rounds up
        rest = ceil_div(cotarget, cur)
    rs.append(rest)
    rd.append(cur)
    return coalesce(Layout._make(tuple(rs), tuple(rd)))
