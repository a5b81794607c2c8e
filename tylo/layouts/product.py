"""Products of layouts: repeat a block layout over a tiling layout.

``logical_product(A, B) == make_layout(A, composition(complement(A, size(A)*cosize(B)),
B))``: mode 0 is A itself, mode 1 places copies of A at the offsets B selects among the
holes A leaves. Blocked and raked products interleave the modes of A and the tiles;
``tile_to_shape`` repeats a block until it covers a shape.
"""

from __future__ import annotations

from typing import Any

from tylo.layouts._depth import check_depth
from tylo.layouts._scope import Value
from tylo.layouts.algebra import coalesce, complement
from tylo.layouts.compose import composition
from tylo.layouts.divide import _by_mode, _modes, unzip_modes
from tylo.layouts.errors import CompositionError, LayoutError, ShapeError
from tylo.layouts.inttuple import flatten_tuple, fmt, product, product_each, vmul
from tylo.layouts.layout import (
    Layout,
    _as_layout,
    cosize,
    make_layout,
    rank,
    size,
)
from tylo.layouts.swizzle import ComposedLayout
from tylo.layouts.symbolic import exact_div

__all__ = [
    "blocked_product",
    "flat_product",
    "logical_product",
    "make_ordered_layout",
    "raked_product",
    "tile_to_shape",
    "tiled_product",
    "zipped_product",
]


def logical_product(a: Any, tiler: Any) -> Any:
    """``(A, complement(A, size(A)*cosize(B)) o B)``. Defining property: mode 0 of the
    result equals A, and mode 1 equals ``composition(complement(A, size(A)*cosize(B)),
    B)``. A tuple tiler applies by mode.

    >>> str(logical_product(Layout((2, 2), (4, 1)), Layout(6, 1)))
    '((2,2),(2,3)):((4,1),(2,8))'
    """
    if tiler is None:
        return a
    if isinstance(a, ComposedLayout):
        return ComposedLayout(a.outer, a.offset, logical_product(a.inner, tiler))
    a = _as_layout(a, "logical_product")
    if type(tiler) is tuple:
        return _by_mode(logical_product, "logical_product", a, tiler)
    b = _as_layout(tiler, "logical_product")
    try:
        return make_layout(a, composition(complement(a, vmul(size(a), cosize(b))), b))
    except LayoutError as e:
        raise e.within(f"logical_product({a}, {b})") from None


def zipped_product(a: Any, tiler: Any) -> Any:
    """``logical_product`` with block modes in mode 0 and tile modes in mode 1. With a
    tuple tiler each mode is multiplied on its own (as in CuTe), so the repeats of mode i
    are laid out in the holes of mode i only.

    >>> str(zipped_product(Layout((2, 2), (4, 1)), (Layout(3, 1), Layout(2, 1))))
    '((2,2),(3,2)):((4,1),(1,2))'
    """
    check_depth(tiler, "the tiler", "zipped_product")
    return unzip_modes(logical_product, a, tiler)


def _unwrap(z: Any) -> tuple[Any, Layout]:
    """(wrap, layout) of a product's result: a composed result keeps its outer function
    and offset around the rearranged inner layout."""
    if isinstance(z, ComposedLayout):
        return (lambda r: ComposedLayout(z.outer, z.offset, r)), z.inner
    return (lambda r: r), z


def tiled_product(a: Any, tiler: Any) -> Any:
    """``zipped_product`` with the tile modes unpacked: ``((block...), t0, t1, ...)``,
    the same function as ``zipped_product(a, tiler)`` on every index. A composed ``a``
    (``S o L``) gives ``S o tiled_product(L, tiler)``.

    >>> str(tiled_product(Layout((2, 2), (4, 1)), (Layout(3, 1), Layout(2, 1))))
    '((2,2),3,2):((4,1),1,2)'
    """
    check_depth(tiler, "the tiler", "tiled_product")
    wrap, z = _unwrap(zipped_product(a, tiler))
    return wrap(make_layout(z[0], *_modes(z[1])))


def flat_product(a: Any, tiler: Any) -> Any:
    """``zipped_product`` with both modes unpacked: ``(b0, b1, ..., t0, t1, ...)``, the
    same function as ``zipped_product(a, tiler)`` on every index. A composed ``a`` (``S o
    L``) gives ``S o flat_product(L, tiler)``.

    >>> str(flat_product(Layout((2, 2), (4, 1)), (Layout(3, 1), Layout(2, 1))))
    '(2,2,3,2):(4,1,1,2)'
    """
    check_depth(tiler, "the tiler", "flat_product")
    wrap, z = _unwrap(zipped_product(a, tiler))
    return wrap(make_layout(*_modes(z[0]), *_modes(z[1])))


def _append(x: Layout, r: int) -> Layout:
    shape = x.shape if type(x.shape) is tuple else (x.shape,)
    stride = x.stride if type(x.stride) is tuple else (x.stride,)
    pad = r - len(shape)
    return Layout._make(shape + (1,) * pad, stride + (0,) * pad)


def _zip_product(block: Any, tiles: Any, op: str, block_first: bool) -> Any:
    a = _as_layout(block, op)
    if isinstance(a, ComposedLayout):
        inner = _zip_product(a.inner, tiles, op, block_first)
        return ComposedLayout(a.outer, a.offset, inner)
    b = _as_layout(tiles, op)
    if isinstance(b, ComposedLayout):
        raise CompositionError(
            f"{op}({a}, {b}): the tiling layout is composed ({b}); a product repeats a block "
            "at the offsets of a plain layout; swizzle the block (or the result) instead"
        )
    r = max(rank(a), rank(b))
    a, b = _append(a, r), _append(b, r)
    try:
        res = logical_product(a, b)
    except LayoutError as e:
        raise e.within(f"{op}({a}, {b})") from None
    first, second = (res[0], res[1]) if block_first else (res[1], res[0])
    shape = tuple((first[i].shape, second[i].shape) for i in range(r))
    stride = tuple((first[i].stride, second[i].stride) for i in range(r))
    return Layout._make(shape, stride)


def blocked_product(block: Any, tiles: Any) -> Any:
    """The tiles of ``block`` laid out by ``tiles``, mode by mode: mode i of the result is
    ``(block_i, tiles_i)`` of ``logical_product(block, tiles)`` (ranks padded with 1:0), so
    each block stays contiguous in coordinates. A composed block (``S o L``) gives ``S o
    blocked_product(L, tiles)``; a composed ``tiles`` raises CompositionError.

    >>> str(blocked_product(Layout((3, 4), (4, 1)), Layout((2, 5), (1, 2))))
    '((3,2),(4,5)):((4,12),(1,24))'
    """
    return _zip_product(block, tiles, "blocked_product", True)


def raked_product(block: Any, tiles: Any) -> Any:
    """Like ``blocked_product`` with the tile mode innermost: mode i is ``(tiles_i,
    block_i)`` of ``logical_product(block, tiles)``, so the copies of the block interleave
    (rake) across the result. A composed block (``S o L``) gives ``S o raked_product(L,
    tiles)``.

    >>> str(raked_product(Layout((3, 4), (4, 1)), Layout((2, 5), (1, 2))))
    '((2,3),(5,4)):((12,4),(24,1))'
    """
    return _zip_product(block, tiles, "raked_product", False)


def make_ordered_layout(shape: Any, order: Any = None) -> Layout:
    """A compact layout of a flat ``shape`` whose strides increase in the order given by
    ``order`` (default: column-major, mode 0 fastest): mode i has stride ``prod(shape[j]
    for the modes j before i in the order)``, ties broken by mode index, so the layout is
    a bijection onto ``[0, size(shape))``. Extents must be positive; ``order`` entries
    must be ints.

    >>> str(make_ordered_layout((4, 8), (1, 0)))
    '(4,8):(8,1)'
    """
    check_depth(shape, "the shape", "make_ordered_layout")
    shape = Layout(shape).shape  # validates the extents (positive integers); lists -> tuples
    shape = tuple(flatten_tuple(shape)) if type(shape) is tuple else (shape,)
    if order is None:
        return Layout(shape)
    check_depth(order, "the order", "make_ordered_layout")
    if isinstance(order, list):
        order = tuple(order)
    order = tuple(flatten_tuple(order)) if type(order) is tuple else (order,)
    if len(order) != len(shape):
        raise ShapeError(
            f"make_ordered_layout({fmt(shape)}, {fmt(order)}): give one order entry per mode"
        )
    if any(type(o) is not int for o in order):
        raise ShapeError(
            f"make_ordered_layout({fmt(shape)}, {order!r}): order entries must be ints (the "
            "rank of each mode's stride)"
        )
    stride: list[Value] = [0] * len(shape)
    acc: Any = 1
    for i in sorted(range(len(shape)), key=lambda k: (order[k], k)):
        stride[i] = acc
        acc = vmul(acc, shape[i])
    return Layout._make(shape, tuple(stride))


def tile_to_shape(block: Any, target_shape: Any, order: Any = None) -> Any:
    """Repeat ``block`` (by ``blocked_product``) until it covers ``target_shape``: the
    result has ``product_each`` of its shape equal to the target's extents, and its
    restriction to the first block (coordinates below the block's extents) equals
    ``block``. The copies are ordered by ``order`` (default column-major). Needs every
    target extent to be a multiple of the block's; the result is coalesced mode by mode.
    A composed block (``S o L``) gives ``S o tile_to_shape(L, target_shape, order)``.

    >>> str(tile_to_shape(Layout((2, 2), (1, 2)), (8, 8)))
    '((2,4),(2,4)):((1,4),(2,16))'
    """
    b = _as_layout(block, "tile_to_shape")
    if isinstance(b, ComposedLayout):
        return ComposedLayout(b.outer, b.offset, tile_to_shape(b.inner, target_shape, order))
    check_depth(target_shape, "the target shape", "tile_to_shape")
    try:
        Layout(target_shape)
    except LayoutError as e:
        raise e.within(f"tile_to_shape({b}, {fmt(target_shape)})") from None
    target = target_shape if type(target_shape) is tuple else (target_shape,)
    r = len(target)
    if rank(b) > r:
        raise ShapeError(
            f"tile_to_shape({b}, {fmt(target_shape)}): the block has rank {rank(b)}, more "
            f"than the target's {r}"
        )
    b = _append(b, r)
    block_shape = product_each(b.shape)
    reps = tuple(
        exact_div(product(t), s, op=f"tile_to_shape({b}, {fmt(target_shape)})")
        for t, s in zip(target, block_shape)
    )
    tiled = blocked_product(b, make_ordered_layout(reps, order))
    return coalesce(tiled, (1,) * r)
