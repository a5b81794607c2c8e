"""filter_ of a composed (swizzled) layout ``S o offset o L`` is ``S o offset o filter_(L)``,
as coalesce is (it raised AttributeError before: found by typing tylo.layouts strictly).

Oracle: the definition, by brute force: the coordinates of L's flat modes in colexicographic
order, holding every stride-0 (and extent-1) mode at 0; the i-th of them, mapped through
``S(offset + sum(c_k * d_k))``, is what ``filter_(C)(i)`` must give."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from tylo.layouts import Layout, filter_, size
from tylo.layouts.swizzle import ComposedLayout, Swizzle


def _expected(sw: Swizzle, offset: int, extents: list[int], strides: list[int]) -> list[int]:
    ranges = [range(e) if d != 0 else range(1) for e, d in zip(extents, strides)]
    # colexicographic: the first mode varies fastest
    coords = [c[::-1] for c in itertools.product(*reversed(ranges))]
    return [sw(offset + sum(c * d for c, d in zip(cs, strides))) for cs in coords]


def test_filter_of_a_swizzled_layout_with_a_broadcast_mode() -> None:
    c = ComposedLayout(Swizzle(3, 3, 3), 0, Layout((8, 4, 64), (64, 0, 1)))
    f = filter_(c)
    assert isinstance(f, ComposedLayout) and f.outer == Swizzle(3, 3, 3)
    assert str(f.inner) == str(filter_(Layout((8, 4, 64), (64, 0, 1))))
    assert [f(i) for i in range(size(f))] == _expected(Swizzle(3, 3, 3), 0, [8, 4, 64],
                                                        [64, 0, 1])  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(
    st.builds(Swizzle, st.integers(0, 3), st.integers(0, 3), st.integers(3, 5)),
    st.integers(0, 64),
    st.lists(st.tuples(st.integers(1, 4), st.integers(0, 9)), min_size=1, max_size=4),
)
def test_filter_of_a_composed_layout_is_the_function_on_the_kept_coordinates(
    sw: Swizzle, offset: int, modes: list[tuple[int, int]]
) -> None:
    extents, strides = [e for e, _ in modes], [d for _, d in modes]
    c = ComposedLayout(sw, offset, Layout(tuple(extents), tuple(strides)))
    f = filter_(c)
    assert isinstance(f, ComposedLayout)
    want = _expected(sw, offset, extents, strides)
    assert size(f) == len(want)
    assert [f(i) for i in range(size(f))] == want
