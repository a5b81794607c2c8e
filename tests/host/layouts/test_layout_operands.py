"""Every public function of layout.py, product.py, inverse.py and tv.py refuses a hostile
operand with a typed LayoutError (never AttributeError, TypeError, RecursionError or a
wrong result), and accepts composed (swizzled) layouts where an answer exists."""

from __future__ import annotations

import pytest

from tylo.layouts import (
    Layout,
    blocked_product,
    cosize,
    depth,
    flat_product,
    flatten,
    group_modes,
    left_inverse,
    make_layout,
    make_tv_layout,
    raked_product,
    rank,
    right_inverse,
    select,
    size,
    tile_to_shape,
    tiled_product,
    tv_coords,
    tv_owners,
    zipped_product,
)
from tylo.layouts.errors import LayoutError
from tylo.layouts.product import make_ordered_layout
from tylo.layouts.swizzle import ComposedLayout, Swizzle

L = Layout((4, 2), (1, 4))
TV = Layout((4, 2), (1, 4))
C = ComposedLayout(Swizzle(1, 0, 1), 0, Layout((2, 2)))


def _deep():
    d: object = 2
    for _ in range(10_000):
        d = (d,)
    return d


HOSTILE = [None, "4:1", 2.5, True, object(), -3, 0, (), (4, ()), {}, _deep()]

ONE = {
    "flatten": flatten,
    "size": size,
    "cosize": cosize,
    "rank": rank,
    "depth": depth,
    "left_inverse": left_inverse,
    "right_inverse": right_inverse,
    "make_layout": make_layout,
    "select": lambda x: select(x, 0),
    "group_modes": lambda x: group_modes(x, 0, 1),
    "make_ordered_layout": make_ordered_layout,
    "tile_to_shape(block)": lambda x: tile_to_shape(x, (8, 8)),
    "tile_to_shape(target)": lambda x: tile_to_shape(L, x),
    "make_ordered_layout(order)": lambda x: make_ordered_layout((4, 2), x if x is not None else 1),
    "make_layout(L, x)": lambda x: make_layout(L, x),
    "select(L, x)": lambda x: select(L, x),
    "group_modes(L, x)": lambda x: group_modes(L, x, 2),
    "blocked_product(L, x)": lambda x: blocked_product(L, x),
    "raked_product(x, L)": lambda x: raked_product(x, L),
    "zipped_product(x, L)": lambda x: zipped_product(x, L),
    "tiled_product(x, L)": lambda x: tiled_product(x, L),
    "flat_product(x, L)": lambda x: flat_product(x, L),
    "make_tv_layout(x, L)": lambda x: make_tv_layout(x, L),
    "make_tv_layout(L, x)": lambda x: make_tv_layout(L, x),
    "tv_coords(x)": lambda x: tv_coords(x, (4, 2), 0),
    "tv_coords(shape)": lambda x: tv_coords(TV, x, 0),
    "tv_coords(thread)": lambda x: tv_coords(TV, (4, 2), x),
    "tv_owners(x)": lambda x: tv_owners(x, (4, 2)),
    "tv_owners(shape)": lambda x: tv_owners(TV, x),
}


@pytest.mark.parametrize("name", sorted(ONE))
def test_hostile_operands_are_typed(name):
    fn = ONE[name]
    for bad in HOSTILE:
        if (
            type(bad) is int
            and bad == 0
            and name
            in (
                "select(L, x)",
                "group_modes(L, x)",
                "tv_coords(thread)",
            )
        ):
            continue  # mode index 0 is valid
        with pytest.raises(LayoutError):
            fn(bad)


def test_composed_operands():
    assert flatten(C).outer == C.outer
    assert size(C) == 4 and rank(C) == 2 and depth(C) == 1
    with pytest.raises(LayoutError, match="composed layout"):
        make_layout(L, C)
    assert make_layout(C) is C
    with pytest.raises(LayoutError, match="outside"):
        tv_coords(TV, (4, 2), 4)
    with pytest.raises(LayoutError, match="outside the tile"):
        tv_owners(TV, (2, 2))
