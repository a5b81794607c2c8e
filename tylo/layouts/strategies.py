"""Hypothesis strategies for layouts (imports hypothesis; ``tylo.layouts`` never does).

Each strategy's docstring states exactly what its values guarantee. All sizes are kept
small (``max_size``) so properties can be checked over the whole domain, except
:func:`huge_layouts` (values near and past ``2**63``, for sampled checks).

The *wide* strategies generate the operands the algebra must refuse or handle with care:
:func:`non_injective_layouts`, :func:`interleaving_layouts` (injective, not admissible),
:func:`negative_stride_layouts`, :func:`huge_layouts`, :func:`composed_layouts`,
:func:`right_operands` / :func:`wide_composition_pairs` (right operands of composition
that overlap, interleave, repeat, reach past ``size(A)``, have negative strides or are
swizzled) and :func:`fact_symbols` (symbols with every kind of fact tylo records).

>>> from hypothesis import given, settings
>>> from tylo.layouts import size
>>> @settings(max_examples=20, deadline=None)
... @given(injective_layouts())
... def check(layout):
...     assert len({layout(i) for i in range(size(layout))}) == size(layout)
>>> check()
"""

from __future__ import annotations

from math import prod
from typing import Any

from hypothesis import strategies as st

from tylo.layouts._lazy import sympy
from tylo.layouts._scope import Fact, Value
from tylo.layouts._strategies_symbols import assignments_for, fact_symbols
from tylo.layouts.inttuple import IntTuple
from tylo.layouts.layout import Layout
from tylo.layouts.swizzle import ComposedLayout, Swizzle
from tylo.layouts.symbolic import dim, divisible

__all__ = [
    "RIGHT_OPERAND_KINDS",
    "assignments_for",
    "compact_layouts",
    "composable_pairs",
    "composed_layouts",
    "deep_layouts",
    "divisible_pairs",
    "fact_symbols",
    "huge_layouts",
    "injective_layouts",
    "int_tuples",
    "interleaving_layouts",
    "layouts",
    "negative_stride_layouts",
    "nest",
    "non_injective_layouts",
    "right_operands",
    "shapes",
    "strided_layouts",
    "swizzled_layouts",
    "symbolic_layouts",
    "wide_composition_pairs",
]


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


@st.composite
def nest(draw: st.DrawFn, flat: tuple[Value, ...], max_depth: int = 2) -> IntTuple:
    """A random nesting of the sequence ``flat`` into a tuple whose leaves in order are
    ``flat`` (a scalar when ``flat`` has one element and no nesting is drawn)."""
    flat = tuple(flat)
    if len(flat) == 1 and (max_depth == 0 or draw(st.booleans())):
        return flat[0]
    if max_depth == 0:
        return flat
    cuts = (
        sorted(draw(st.sets(st.integers(1, len(flat) - 1), max_size=len(flat) - 1)))
        if len(flat) > 1
        else []
    )
    groups = [flat[a:b] for a, b in zip([0, *cuts], [*cuts, len(flat)])]
    out: list[IntTuple] = []
    for g in groups:
        if len(g) == 1 and draw(st.integers(0, 3)) > 0:
            out.append(g[0])
        else:
            out.append(draw(nest(g, max_depth - 1)) if len(g) > 1 else (g[0],))
    return tuple(out)


def _regroup(shape: Any, like: Any) -> Any:
    """Arrange flat ``shape`` values with the nesting of ``like``."""
    it = iter(shape)

    def go(t: Any) -> Any:
        return tuple(go(e) for e in t) if type(t) is tuple else next(it)

    return go(like)


@st.composite
def int_tuples(
    draw: st.DrawFn, max_leaf: int = 8, max_leaves: int = 4, max_depth: int = 2
) -> IntTuple:
    """A positive int (1..max_leaf) or a nested tuple of them: at most ``max_leaves``
    leaves, at most ``max_depth`` levels of nesting."""
    n = draw(st.integers(1, max_leaves))
    leaves = tuple(draw(st.lists(st.integers(1, max_leaf), min_size=n, max_size=n)))
    return draw(nest(leaves, max_depth))


@st.composite
def _flat_extents(
    draw: st.DrawFn, max_size: int, max_leaves: int, min_extent: int = 1
) -> tuple[int, ...]:
    n = draw(st.integers(1, max_leaves))
    out: list[int] = []
    budget = max_size
    for _ in range(n):
        if budget < max(2, min_extent):
            break
        e = draw(st.integers(min_extent, min(budget, 8)))
        out.append(e)
        budget //= e
    return tuple(out) or (1,)


@st.composite
def shapes(
    draw: st.DrawFn, max_size: int = 64, max_leaves: int = 4, max_depth: int = 2
) -> IntTuple:
    """A shape (positive int or nested tuple of them) whose size is at most ``max_size``."""
    return draw(nest(draw(_flat_extents(max_size, max_leaves)), max_depth))


@st.composite
def compact_layouts(draw: st.DrawFn, max_size: int = 64, max_leaves: int = 4) -> Layout:
    """A compact layout: a bijection from [0, size) onto [0, size); the modes are
    column-major in a random order (so row-major and mixed orders appear), then nested."""
    flat = draw(_flat_extents(max_size, max_leaves))
    order = draw(st.permutations(range(len(flat))))
    strides = [0] * len(flat)
    acc = 1
    for i in order:
        strides[i] = acc
        acc *= flat[i]
    shape = draw(nest(flat))
    return Layout(shape, _regroup(strides, shape))


@st.composite
def strided_layouts(
    draw: st.DrawFn, max_size: int = 64, max_leaves: int = 4, max_stride: int = 24
) -> Layout:
    """Any layout: random extents (size <= max_size) and random strides in
    [0, max_stride] (zero and repeated strides included, so it may not be injective)."""
    flat = draw(_flat_extents(max_size, max_leaves))
    strides = draw(st.lists(st.integers(0, max_stride), min_size=len(flat), max_size=len(flat)))
    shape = draw(nest(flat))
    return Layout(shape, _regroup(strides, shape))


@st.composite
def injective_layouts(
    draw: st.DrawFn, max_size: int = 64, max_leaves: int = 4, max_gap: int = 3
) -> Layout:
    """An injective, *admissible* layout: sorted by stride, each stride is a multiple of
    the previous mode's ``extent*stride`` (gaps up to ``max_gap``), in a random mode order
    and nesting. Its complement and left inverse exist."""
    flat = draw(_flat_extents(max_size, max_leaves, min_extent=1))
    order = draw(st.permutations(range(len(flat))))
    strides = [0] * len(flat)
    acc = draw(st.integers(1, max_gap))
    for i in order:
        strides[i] = acc
        acc *= flat[i] * draw(st.integers(1, max_gap))
    shape = draw(nest(flat))
    return Layout(shape, _regroup(strides, shape))


def layouts(max_size: int = 64) -> st.SearchStrategy:
    """Compact, injective or arbitrary strided layouts, mixed."""
    return st.one_of(
        compact_layouts(max_size), injective_layouts(max_size), strided_layouts(max_size)
    )


@st.composite
def swizzled_layouts(draw: st.DrawFn, max_size: int = 256) -> ComposedLayout:
    """``S<b,m,s> o L`` with a valid swizzle (``|s| >= b``) and an injective ``L``: a
    bijection from L's domain onto its (swizzled) image."""
    b = draw(st.integers(0, 3))
    m = draw(st.integers(0, 4))
    s = draw(st.integers(b, b + 3)) * draw(st.sampled_from([1, -1]))
    if s < 0 and m < -s:
        s = -s
    return ComposedLayout(Swizzle(b, m, s), 0, draw(injective_layouts(max_size)))


@st.composite
def _digit_mode(draw: st.DrawFn, flat: tuple[int, ...]) -> tuple[int, int]:
    """One mode s:d that composes with a layout whose (coalesced) flat extents are
    ``flat`` and stays inside its domain."""
    n = len(flat)
    if draw(st.integers(0, 9)) == 0:
        return draw(st.integers(1, 4)), 0
    k = draw(st.integers(0, n - 1))
    t = draw(st.sampled_from(_divisors(flat[k])))
    d = prod(flat[:k]) * t
    q = flat[k] // t
    s = draw(st.sampled_from(_divisors(q)))
    if s == q and k + 1 < n and draw(st.booleans()):
        j = draw(st.integers(k + 1, n - 1))
        s = q * prod(flat[k + 1 : j]) * draw(st.sampled_from(_divisors(flat[j])))
    return s, d


@st.composite
def _refined_digits(draw: st.DrawFn, flat: tuple[int, ...]) -> list[tuple[int, int]]:
    """Split each extent of ``flat`` into factors: the (extent, index stride) digits of
    the mixed-radix index space of a layout with flat extents ``flat``."""
    digits: list[tuple[int, int]] = []
    acc = 1
    for e in flat:
        rest = e
        while rest > 1:
            r = draw(st.sampled_from([x for x in _divisors(rest) if x > 1]))
            digits.append((r, acc))
            acc *= r
            rest //= r
    return digits


@st.composite
def _digit_runs(
    draw: st.DrawFn, flat: tuple[int, ...], max_modes: int = 3
) -> list[tuple[int, int]]:
    """Disjoint runs of refined digits, as modes (extent, stride), in random order."""
    digits = draw(_refined_digits(flat))
    if not digits:
        return [(1, 0)]
    picked = sorted(
        draw(st.sets(st.integers(0, len(digits) - 1), min_size=1, max_size=len(digits)))
    )
    runs: list[list[int]] = []
    for i in picked:
        if runs and runs[-1][-1] == i - 1 and draw(st.booleans()):
            runs[-1].append(i)
        else:
            runs.append([i])
    modes = [(prod(digits[i][0] for i in run), digits[run[0]][1]) for run in runs]
    return list(draw(st.permutations(modes)))[:max_modes]


@st.composite
def composable_pairs(draw: st.DrawFn, max_size: int = 64) -> tuple[Layout, Layout]:
    """``(A, B)`` such that ``composition(A, B)`` is defined (both divisibility conditions
    hold at every step) and ``composition(A, B)(c) == A(B(c))`` for every coordinate of
    B: B maps into ``[0, size(A))`` and its modes occupy disjoint digits of A's
    mixed-radix index space (or have stride 0). A is any layout with positive strides
    whose adjacent flat modes never merge; B has 1 to 4 modes."""
    flat = draw(_flat_extents(max_size, 4, min_extent=2))
    strides: list[int] = []
    for i in range(len(flat)):
        choices = [x for x in range(1, 40) if i == 0 or x != flat[i - 1] * strides[i - 1]]
        strides.append(draw(st.sampled_from(choices)))
    shape = draw(nest(flat))
    a = Layout(shape, _regroup(strides, shape))
    modes = [draw(_digit_mode(flat))] if draw(st.booleans()) else draw(_digit_runs(flat))
    if draw(st.integers(0, 5)) == 0:
        modes.insert(draw(st.integers(0, len(modes))), (draw(st.integers(2, 3)), 0))
    bshape = tuple(m[0] for m in modes) if len(modes) > 1 else modes[0][0]
    bstride = tuple(m[1] for m in modes) if len(modes) > 1 else modes[0][1]
    return a, Layout(bshape, bstride)


@st.composite
def _digit_tiler(draw: st.DrawFn, flat: tuple[int, ...]) -> Layout:
    """An injective layout made of disjoint digit runs of the index space with extents
    ``flat``; dividing by it is always defined."""
    modes = draw(_digit_runs(flat))
    if len(modes) == 1:
        return Layout(modes[0][0], modes[0][1])
    return Layout(tuple(m[0] for m in modes), tuple(m[1] for m in modes))


@st.composite
def divisible_pairs(draw: st.DrawFn, max_size: int = 64) -> tuple[Layout, Any]:
    """``(A, tiler)`` such that ``logical_divide(A, tiler)`` (and the zipped, tiled and
    flat divides) are defined: the tiler is a Layout, an int, or a tuple with one entry
    per leading mode of A; each picks digits of the index space of A (or of its mode)
    aligned to A's extents."""
    a = draw(
        st.one_of(
            compact_layouts(max_size),
            injective_layouts(max_size),
            composable_pairs(max_size).map(lambda p: p[0]),
        )
    )
    kind = draw(st.integers(0, 2))
    if kind == 0 or type(a.shape) is not tuple:
        from tylo.layouts.inttuple import flatten_tuple

        t = draw(_digit_tiler(flatten_tuple(a.shape)))
        if kind == 1 and type(t.stride) is int and t.stride == 1:
            return a, t.shape
        return a, t
    from tylo.layouts.inttuple import flatten_tuple

    n = draw(st.integers(1, len(a.shape)))
    tiler = []
    for i in range(n):
        t = draw(_digit_tiler(flatten_tuple(a.shape[i])))
        tiler.append(t.shape if type(t.stride) is int and t.stride == 1 else t)
    return a, tuple(tiler)


_NAMES = ("M", "N", "K", "P", "Q")
_MULTIPLES = (1, 1, 1, 2, 4, 8, 16)  # 1 most often: such a symbol may take the value 1


@st.composite
def symbolic_layouts(draw: st.DrawFn, max_leaves: int = 3) -> tuple[Layout, tuple[Fact, ...]]:
    """``(layout, assumptions)``: a layout whose extents are ints or :func:`dim` symbols
    (``multiple_of`` in {1, 2, 4, 8, 16}) and whose strides are compact products of the
    extents, possibly with a leading-dimension symbol ``ld`` in place of a product
    together with the assumption ``ld >= product`` (and sometimes ``divisible(ld, 8)``).
    The assumptions are satisfiable; every symbol is positive."""
    n = draw(st.integers(1, max_leaves))
    extents: list[Any] = []
    used = 0
    for _ in range(n):
        if used < len(_NAMES) and draw(st.booleans()):
            extents.append(dim(_NAMES[used], multiple_of=draw(st.sampled_from(_MULTIPLES))))
            used += 1
        else:
            extents.append(draw(st.integers(1, 6)))
    order = draw(st.permutations(range(n)))
    strides: list[Any] = [0] * n
    assumptions: list[Any] = []
    acc: Any = draw(st.sampled_from([1, 1, 2]))
    for pos, i in enumerate(order):
        if pos > 0 and not assumptions and draw(st.integers(0, 2)) == 0:
            ld = dim("ld", multiple_of=1)
            assumptions.append(ld >= acc)
            if draw(st.booleans()):
                assumptions.append(divisible(ld, 8))
            acc = ld
        strides[i] = acc
        acc = acc * extents[i]
    if draw(st.integers(0, 4)) == 0:
        strides[draw(st.integers(0, n - 1))] = 0
    shape = draw(nest(tuple(extents)))
    return Layout(
        shape, _regroup([sympy.sympify(s) if not isinstance(s, int) else s for s in strides], shape)
    ), tuple(assumptions)


# ---- wide strategies: operands the algebra must refuse or handle with care -----------


def _flat_layout(extents: list[Value], strides: list[Value], draw: st.DrawFn) -> Layout:
    shape = draw(nest(tuple(extents)))
    return Layout(shape, _regroup(strides, shape))


@st.composite
def non_injective_layouts(draw: st.DrawFn, max_size: int = 64, max_leaves: int = 4) -> Layout:
    """A layout that is *not* injective: some mode has extent >= 2 and stride 0, or two
    modes overlap (mode j's stride is ``m * d_i`` with ``0 < m < s_i`` for another mode
    i, so coordinate m of mode i and coordinate 1 of mode j meet). Nested at random."""
    flat = list(draw(_flat_extents(max_size, max_leaves, min_extent=1)))
    if all(e < 2 for e in flat) or (len(flat) < 2 and draw(st.booleans())):
        flat = [*flat, 2] if len(flat) < max_leaves else [2, *flat[1:]]
    strides = [draw(st.integers(0, 12)) for _ in flat]
    big = [k for k, e in enumerate(flat) if e >= 2]
    i = draw(st.sampled_from(big))
    others = [k for k in big if k != i]
    if not others or draw(st.integers(0, 2)) == 0:
        strides[i] = 0
    else:
        j = draw(st.sampled_from(others))
        strides[i] = draw(st.integers(1, 6))
        strides[j] = strides[i] * draw(st.integers(1, flat[i] - 1))
    return _flat_layout(flat, strides, draw)


@st.composite
def interleaving_layouts(draw: st.DrawFn, max_leaves: int = 3, max_stride: int = 40) -> Layout:
    """An injective layout that is *not admissible*: sorted by stride, each stride exceeds
    the reach ``sum((s-1)*d)`` of the smaller ones (so it is injective), and at least one
    is not a multiple of the previous mode's ``extent*stride`` (so the modes interleave and
    no complement covers the gaps exactly). Two to ``max_leaves`` modes with extents >= 2,
    in a random order and nesting."""
    n = draw(st.integers(2, max(2, max_leaves)))
    extents = [draw(st.integers(2, 5)) for _ in range(n)]
    bad = draw(st.integers(1, n - 1))
    strides = [draw(st.integers(1, 3))]
    reach = (extents[0] - 1) * strides[0]
    for k in range(1, n):
        unit = extents[k - 1] * strides[k - 1]
        lo = reach + 1
        if k == bad:
            cands = [d for d in range(lo, lo + 2 * unit + 2) if d % unit]
        else:
            cands = [unit * m for m in range(1, 4) if unit * m >= lo] + [lo, lo + 1]
        d = min(draw(st.sampled_from(cands)), max(max_stride, lo + 1))
        if k == bad and d % unit == 0:
            d += 1
        strides.append(d)
        reach += (extents[k] - 1) * d
    order = draw(st.permutations(range(n)))
    return _flat_layout([extents[i] for i in order], [strides[i] for i in order], draw)


@st.composite
def negative_stride_layouts(draw: st.DrawFn, max_size: int = 64, injective: bool = False) -> Layout:
    """A layout with at least one negative stride: an :func:`injective_layouts` value
    (``injective=True``; negating strides keeps it injective) or a
    :func:`strided_layouts` one, with a non-empty random subset of its non-zero strides
    negated (a stride is made non-zero first when all are zero), among the modes of extent
    >= 2 when there are such (so the layout reaches a negative offset). Half the time a negated
    mode ``s:d`` of composite extent ``s = a*b`` is split into ``a:d, b:a*d`` (the same
    function, and a pair that coalesce must merge), then the modes are nested anew."""
    base = draw(injective_layouts(max_size) if injective else strided_layouts(max_size))
    fs, fd = list(_flat(base.shape)), list(_flat(base.stride))
    nonzero = [k for k, d in enumerate(fd) if d != 0]
    if not nonzero:
        fd[0] = draw(st.integers(1, 8))
        nonzero = [0]
    nonzero = [k for k in nonzero if fs[k] > 1] or nonzero
    negated = sorted(draw(st.sets(st.sampled_from(nonzero), min_size=1)))
    for k in negated:
        fd[k] = -fd[k]
    split = [k for k in negated if len(_divisors(fs[k])) > 2]
    if not split or draw(st.booleans()):
        return Layout(base.shape, _regroup(fd, base.shape))
    k = draw(st.sampled_from(split))
    a = draw(st.sampled_from(_divisors(fs[k])[1:-1]))
    fs[k : k + 1], fd[k : k + 1] = [a, fs[k] // a], [fd[k], a * fd[k]]
    return _flat_layout(fs, fd, draw)


_NEAR_63 = (2**62, 2**63 - 1, 2**63, 2**63 + 1, 2**64, 3 * 2**62, 2**70)
_EDGES = (2**31 - 1, 2**31, 2**31 + 1, 2**63 - 1, 2**63, 2**63 + 1)


@st.composite
def huge_layouts(draw: st.DrawFn, max_leaves: int = 3) -> Layout:
    """A layout whose extents reach ``2**40`` and the edges of 32- and 64-bit integers
    (``2**31 - 1 .. 2**31 + 1``, ``2**63 - 1 .. 2**63 + 1``) and whose strides or offsets
    are near and past ``2**63`` (some stride is one of ``2**62, 2**63-1, 2**63, 2**63+1,
    2**64, ...`` or a product that crosses ``2**63``): for checks on sampled coordinates
    (the domain is too large to enumerate) of exact, overflow-free integer arithmetic."""
    n = draw(st.integers(1, max_leaves))
    small = st.sampled_from([1, 2, 3, 7, 2**20, 2**32 + 1, 2**40])
    extents = [draw(st.one_of(small, st.sampled_from(_EDGES))) for _ in range(n)]
    strides = [
        draw(st.one_of(st.sampled_from(_NEAR_63), st.integers(-(2**64), 2**64))) for _ in range(n)
    ]
    k = draw(st.integers(0, n - 1))
    strides[k] = draw(st.sampled_from(_NEAR_63))
    return _flat_layout(extents, strides, draw)


@st.composite
def composed_layouts(draw: st.DrawFn, max_size: int = 128) -> ComposedLayout:
    """``outer o offset o inner``: outer a valid Swizzle (the identity ``S<0,m,s>``
    included) or a compact 1-D Layout long enough for every offset, ``offset`` in
    ``[0, 64]``, ``inner`` an injective or arbitrary strided layout. A bijection onto its
    image when the outer is a swizzle and the inner is injective."""
    inner = draw(st.one_of(injective_layouts(max_size), strided_layouts(max_size)))
    offset = draw(st.integers(0, 64))
    if draw(st.booleans()):
        b = draw(st.integers(0, 3))
        outer: Any = Swizzle(b, draw(st.integers(0, 4)), draw(st.integers(max(b, 1), b + 3)))
    else:
        span = (
            1
            + offset
            + sum((s - 1) * d for s, d in zip(*(_flat(inner.shape), _flat(inner.stride))))
        )
        outer = Layout(span, draw(st.integers(1, 4)))
    return ComposedLayout(outer, offset, inner)


def _flat(t: IntTuple) -> tuple[Value, ...]:
    return tuple(x for e in t for x in _flat(e)) if type(t) is tuple else (t,)


#: the kinds :func:`right_operands` draws from
RIGHT_OPERAND_KINDS = (
    "composable",
    "non_injective",
    "interleaving",
    "past_size",
    "negative",
    "swizzled",
)


@st.composite
def right_operands(draw: st.DrawFn, a: Layout, kinds: tuple[str, ...] = RIGHT_OPERAND_KINDS) -> Any:
    """A right operand B for ``composition(a, B)``, of one of ``kinds``: ``composable``
    (injective, picks disjoint digits of a's index space aligned to a's flat extents, so
    it maps into ``[0, size(a))``), ``non_injective`` (a stride-0 mode or two overlapping
    modes), ``interleaving`` (injective, not admissible), ``past_size`` (``cosize(B) >
    size(a)``: B reaches past a's domain, where CuTe extends a's last mode), ``negative``
    (a negative stride) or ``swizzled`` (a ComposedLayout). Whether the composition is a
    layout is left to the property under test (``composable_pairs`` is the strategy that
    guarantees it)."""
    from tylo.layouts.inttuple import flatten_tuple
    from tylo.layouts.layout import size

    kind = draw(st.sampled_from(kinds))
    n = size(a)
    if kind == "composable":
        modes = draw(_digit_runs(flatten_tuple(a.shape)))
        if len(modes) == 1:
            return Layout(*modes[0])
        return Layout(tuple(m[0] for m in modes), tuple(m[1] for m in modes))
    if kind == "non_injective":
        return draw(non_injective_layouts(max(4, n), max_leaves=3))
    if kind == "interleaving":
        return draw(interleaving_layouts(max_leaves=2, max_stride=max(4, n)))
    if kind == "past_size":
        s = draw(st.integers(2, 6))
        d = draw(st.integers(-(-n // (s - 1)), n + 2))  # (s-1)*d >= n: past size(a)
        return Layout(s, d) if draw(st.booleans()) else Layout((2, s), (1, d))
    if kind == "negative":
        return draw(negative_stride_layouts(max(4, n)))
    return draw(composed_layouts(max(4, n)))


@st.composite
def wide_composition_pairs(draw: st.DrawFn, max_size: int = 32) -> tuple[Layout, Any]:
    """``(A, B)``: A any layout (compact, injective or strided, size <= max_size) and B a
    :func:`right_operands` value of any kind (so ``composition(A, B)`` may or may not
    exist)."""
    a = draw(layouts(max_size))
    return a, draw(right_operands(a))


@st.composite
def deep_layouts(draw: st.DrawFn, max_depth: int = 6, max_leaves: int = 6) -> Layout:
    """A :func:`layouts` value (compact, injective or strided, size <= 64) re-nested to
    depth up to ``max_depth``, with extent-1 modes (stride 0 or not) spliced in at random:
    the same function as the flat layout on its domain (past it, an extent-1 mode spliced
    in last changes CuTe's extension), in the deep forms CuTe's tests use."""
    base = draw(layouts(64))
    fs, fd = list(_flat(base.shape)), list(_flat(base.stride))
    for _ in range(draw(st.integers(0, max(0, max_leaves - len(fs))))):
        k = draw(st.integers(0, len(fs)))
        fs.insert(k, 1)
        fd.insert(k, draw(st.sampled_from([0, 1, 7])))
    shape = draw(nest(tuple(fs), max_depth))
    return Layout(shape, _regroup(fd, shape))
