"""Hypothesis strategies for layouts (imports hypothesis; ``tylo.layouts`` never does).

Each strategy's docstring states exactly what its values guarantee. All sizes are kept
small (``max_size``) so properties can be checked over the whole domain.

>>> from hypothesis import given, settings
>>> from tylo.layouts import size
>>> @settings(max_examples=20, deadline=None)
... @given(injective_layouts())
... def check(layout):
...     assert len({layout(i) for i in range(size(layout))}) == size(layout)
>>> check()
"""

from __future__ import annotations

import random
from math import prod
from typing import Any

import sympy
from hypothesis import strategies as st

from tylo.layouts.layout import Layout
from tylo.layouts.swizzle import ComposedLayout, Swizzle
from tylo.layouts.symbolic import dim, divisible, sample_assignment

__all__ = [
    "assignments_for",
    "compact_layouts",
    "composable_pairs",
    "divisible_pairs",
    "injective_layouts",
    "int_tuples",
    "layouts",
    "nest",
    "shapes",
    "strided_layouts",
    "swizzled_layouts",
    "symbolic_layouts",
]


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


@st.composite
def nest(draw: Any, flat: tuple, max_depth: int = 2) -> Any:
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
    out = []
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
def int_tuples(draw: Any, max_leaf: int = 8, max_leaves: int = 4, max_depth: int = 2) -> Any:
    """A positive int (1..max_leaf) or a nested tuple of them: at most ``max_leaves``
    leaves, at most ``max_depth`` levels of nesting."""
    n = draw(st.integers(1, max_leaves))
    leaves = tuple(draw(st.lists(st.integers(1, max_leaf), min_size=n, max_size=n)))
    return draw(nest(leaves, max_depth))


@st.composite
def _flat_extents(draw: Any, max_size: int, max_leaves: int, min_extent: int = 1) -> tuple:
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
def shapes(draw: Any, max_size: int = 64, max_leaves: int = 4, max_depth: int = 2) -> Any:
    """A shape (positive int or nested tuple of them) whose size is at most ``max_size``."""
    return draw(nest(draw(_flat_extents(max_size, max_leaves)), max_depth))


@st.composite
def compact_layouts(draw: Any, max_size: int = 64, max_leaves: int = 4) -> Layout:
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
    draw: Any, max_size: int = 64, max_leaves: int = 4, max_stride: int = 24
) -> Layout:
    """Any layout: random extents (size <= max_size) and random strides in
    [0, max_stride] (zero and repeated strides included, so it may not be injective)."""
    flat = draw(_flat_extents(max_size, max_leaves))
    strides = draw(st.lists(st.integers(0, max_stride), min_size=len(flat), max_size=len(flat)))
    shape = draw(nest(flat))
    return Layout(shape, _regroup(strides, shape))


@st.composite
def injective_layouts(
    draw: Any, max_size: int = 64, max_leaves: int = 4, max_gap: int = 3
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
def swizzled_layouts(draw: Any, max_size: int = 256) -> ComposedLayout:
    """``S<b,m,s> o L`` with a valid swizzle (``|s| >= b``) and an injective ``L``: a
    bijection from L's domain onto its (swizzled) image."""
    b = draw(st.integers(0, 3))
    m = draw(st.integers(0, 4))
    s = draw(st.integers(b, b + 3)) * draw(st.sampled_from([1, -1]))
    if s < 0 and m < -s:
        s = -s
    return ComposedLayout(Swizzle(b, m, s), 0, draw(injective_layouts(max_size)))


@st.composite
def _digit_mode(draw: Any, flat: tuple) -> tuple[int, int]:
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
def _refined_digits(draw: Any, flat: tuple) -> list[tuple[int, int]]:
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
def _digit_runs(draw: Any, flat: tuple, max_modes: int = 3) -> list[tuple[int, int]]:
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
def composable_pairs(draw: Any, max_size: int = 64) -> tuple[Layout, Layout]:
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
def _digit_tiler(draw: Any, flat: tuple) -> Layout:
    """An injective layout made of disjoint digit runs of the index space with extents
    ``flat``; dividing by it is always defined."""
    modes = draw(_digit_runs(flat))
    if len(modes) == 1:
        return Layout(modes[0][0], modes[0][1])
    return Layout(tuple(m[0] for m in modes), tuple(m[1] for m in modes))


@st.composite
def divisible_pairs(draw: Any, max_size: int = 64) -> tuple[Layout, Any]:
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


@st.composite
def symbolic_layouts(draw: Any, max_leaves: int = 3) -> tuple[Layout, tuple]:
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
            extents.append(dim(_NAMES[used], multiple_of=draw(st.sampled_from([1, 2, 4, 8, 16]))))
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


def assignments_for(obj: Any, assumptions: tuple = (), max_value: int = 40) -> st.SearchStrategy:
    """Random integer assignments (dict symbol -> int) of the symbols in ``obj``
    satisfying their facts and ``assumptions`` (see ``symbolic.sample_assignment``)."""
    return st.randoms(use_true_random=False).map(
        lambda rng: sample_assignment(
            [obj], random.Random(rng.random()), max_value=max_value, assumptions=assumptions
        )
    )
