"""Deep nesting everywhere in the public API: every function of ``tylo.layouts.__all__``
that takes a layout, a shape or a tiler, given an operand nested far past ``MAX_DEPTH``
(600 to 10,000 levels) in any such position, raises a typed LayoutError (ShapeError
naming the limit), never RecursionError or another untyped error.

The table of calls must list every public function (or name why it takes no layout), so
a new function cannot escape the sweep.
"""

from __future__ import annotations

import inspect
import sys

import pytest

import tylo.layouts as tl
from tylo.layouts import Layout, LayoutError, ShapeError
from tylo.layouts.layout import MAX_DEPTH


def nested(depth: int, leaf: object = 2) -> object:
    t = leaf
    for _ in range(depth):
        t = (t,)
    return t


L = Layout((4, 2), (1, 4))

# name -> calls, each taking the deep operand D (one layout/shape/tiler position at a time)
CALLS = {
    "blocked_product": [lambda D: tl.blocked_product(D, L), lambda D: tl.blocked_product(L, D)],
    "coalesce": [lambda D: tl.coalesce(D), lambda D: tl.coalesce(L, D)],
    "complement": [lambda D: tl.complement(D), lambda D: tl.complement(L, D)],
    "composition": [lambda D: tl.composition(D, L), lambda D: tl.composition(L, D)],
    "cosize": [lambda D: tl.cosize(D)],
    "crd2idx": [
        lambda D: tl.crd2idx(D, (4, 2)),
        lambda D: tl.crd2idx(0, D),
        lambda D: tl.crd2idx(0, (4, 2), D),
    ],
    "depth": [lambda D: tl.depth(D)],
    "filter_": [lambda D: tl.filter_(D), lambda D: tl.filter_(L, D)],
    "flat_divide": [lambda D: tl.flat_divide(D, L), lambda D: tl.flat_divide(L, D)],
    "flat_product": [lambda D: tl.flat_product(D, L), lambda D: tl.flat_product(L, D)],
    "flatten": [lambda D: tl.flatten(D)],
    "group_modes": [lambda D: tl.group_modes(D, 0)],
    "idx2crd": [lambda D: tl.idx2crd(0, D), lambda D: tl.idx2crd(0, (4, 2), D)],
    "left_inverse": [lambda D: tl.left_inverse(D)],
    "logical_divide": [lambda D: tl.logical_divide(D, L), lambda D: tl.logical_divide(L, D)],
    "logical_product": [
        lambda D: tl.logical_product(D, L),
        lambda D: tl.logical_product(L, D),
    ],
    "make_layout": [
        lambda D: tl.make_layout(D),
        lambda D: tl.make_layout(L, D),
        lambda D: tl.make_layout(D, stride=D),
    ],
    "make_ordered_layout": [
        lambda D: tl.make_ordered_layout(D),
        lambda D: tl.make_ordered_layout((4, 2), D),
    ],
    "make_tv_layout": [lambda D: tl.make_tv_layout(D, L), lambda D: tl.make_tv_layout(L, D)],
    "prove_aligned": [lambda D: tl.prove_aligned(D, vector=2, elem_bytes=4)],
    "prove_bounded": [
        lambda D: tl.prove_bounded(D, extent=8),
        lambda D: tl.prove_bounded(L, extent=D),
    ],
    "prove_contiguous": [lambda D: tl.prove_contiguous(D, vector=2)],
    "prove_equal": [lambda D: tl.prove_equal(D, L), lambda D: tl.prove_equal(L, D)],
    "prove_injective": [lambda D: tl.prove_injective(D)],
    "raked_product": [lambda D: tl.raked_product(D, L), lambda D: tl.raked_product(L, D)],
    "rank": [lambda D: tl.rank(D)],
    "right_inverse": [lambda D: tl.right_inverse(D)],
    "sample_assignment": [lambda D: tl.sample_assignment([D], 0)],
    "select": [lambda D: tl.select(D, 0), lambda D: tl.select(L, D)],
    "size": [lambda D: tl.size(D)],
    "substitute": [lambda D: tl.substitute(D, {"N": 2})],
    "tile_to_shape": [
        lambda D: tl.tile_to_shape(D, (8, 8)),
        lambda D: tl.tile_to_shape(L, D),
        lambda D: tl.tile_to_shape(L, (8, 8), D),
    ],
    "tiled_divide": [lambda D: tl.tiled_divide(D, L), lambda D: tl.tiled_divide(L, D)],
    "tiled_product": [lambda D: tl.tiled_product(D, L), lambda D: tl.tiled_product(L, D)],
    "tv_coords": [
        lambda D: tl.tv_coords(D, (4, 2), 0),
        lambda D: tl.tv_coords(L, D, 0),
    ],
    "tv_owners": [lambda D: tl.tv_owners(D, (4, 2)), lambda D: tl.tv_owners(L, D)],
    "zipped_divide": [lambda D: tl.zipped_divide(D, L), lambda D: tl.zipped_divide(L, D)],
    "zipped_product": [lambda D: tl.zipped_product(D, L), lambda D: tl.zipped_product(L, D)],
}

# public functions that take no layout, shape or tiler (symbols, facts, text, verdicts)
NO_LAYOUT = {
    "assuming",
    "byte_swizzle",  # takes a width and an element size, no layout
    "current_assumptions",
    "decide",
    "dim",
    "divides",
    "divisible",
    "index_symbol",
    "parse",
    "require",
}


def test_the_sweep_covers_every_public_function():
    funcs = {n for n in tl.__all__ if inspect.isfunction(getattr(tl, n))}
    assert funcs == set(CALLS) | NO_LAYOUT, (funcs - set(CALLS) - NO_LAYOUT, set(CALLS) - funcs)


@pytest.mark.parametrize(
    "name,k", [(n, k) for n, calls in CALLS.items() for k in range(len(calls))]
)
def test_deep_operand_is_a_typed_refusal(name: str, k: int) -> None:
    call = CALLS[name][k]
    limit = sys.getrecursionlimit()
    for depth in (MAX_DEPTH + 1, 600, 10_000):
        with pytest.raises(LayoutError) as info:
            call(nested(depth))
        assert sys.getrecursionlimit() == limit
        assert str(info.value).strip()


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 600, 1000, 10_000])
def test_layout_of_a_deep_shape_or_stride_is_a_shape_error(depth: int) -> None:
    deep = nested(depth)
    for make in (
        lambda: Layout(deep),
        lambda: Layout(deep, nested(depth, 1)),
        lambda: Layout(2, deep),
        lambda: Layout((2, deep), (1, 2)),
    ):
        with pytest.raises(ShapeError, match="MAX_DEPTH"):
            make()


def test_nesting_at_the_limit_is_accepted():
    """The refusal is about the limit, not about nesting as such."""
    x = Layout(nested(MAX_DEPTH - 1), nested(MAX_DEPTH - 1, 1))
    assert tl.size(x) == 2 and tl.coalesce(x) == Layout(2, 1)
    assert tl.size(tl.zipped_divide(Layout(8, 1), nested(MAX_DEPTH - 1))) == 8
