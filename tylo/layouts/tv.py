"""Thread-value (TV) layouts: which thread holds which elements of a tile.

A TV layout maps ``(thread, value)`` to the *column-major index* of an element of a tile
of a given shape; ``idx2crd(index, tile_shape)`` turns the index into ``(row, col, ...)``.
Mode 0 is the thread mode, mode 1 the value mode (both may be nested).

The warp-MMA operand layouts of PTX ``mma.m16n8k16`` (bf16/f16 inputs, f32 accumulators)
are named constants below, each with its lane map (PTX ISA, "Matrix Fragments for
mma.m16n8k16 with floating point type"). In those maps ``lane = t0 + 4*t1``: ``t0 =
lane % 4`` is PTX's ``threadID_in_group`` and ``t1 = lane // 4`` its ``groupID``.
"""

from __future__ import annotations

import reprlib
from typing import Any

from tylo.layouts._lazy import sympy
from tylo.layouts.compose import composition
from tylo.layouts.errors import LayoutError, ShapeError
from tylo.layouts.inttuple import IntTuple, fmt, idx2crd, product_each, vmul
from tylo.layouts.inverse import right_inverse
from tylo.layouts.layout import Layout, _as_layout, size
from tylo.layouts.product import raked_product
from tylo.layouts.symbolic import decide_cmp, require_static

__all__ = [
    "LDMATRIX_X4_DST_TV",
    "LDMATRIX_X4_SRC_TV",
    "MMA_M16N8K16_A_TV",
    "MMA_M16N8K16_B_TV",
    "MMA_M16N8K16_C_TV",
    "WARPGROUP_SIZE",
    "WARP_SIZE",
    "make_tv_layout",
    "tv_coords",
    "tv_owners",
    "wgmma_m64_c_tv",
]

WARP_SIZE = 32
WARPGROUP_SIZE = 128

# A: 16x16 (M x K), 32 threads x 8 values, index m + 16*k. Value v = v0 + 2*v1 + 4*v2
# (registers a0..a7, two bf16 per 32-bit register): m = groupID + 8*v1,
# k = 2*threadID_in_group + v0 + 8*v2.
#            k=0,1  k=2,3  k=4,5  k=6,7 | k=8,9  ...   k=14,15
#   m=0      T0     T1     T2     T3    | T0     ...   T3      (a0,a1 | a4,a5)
#   m=1      T4     T5     T6     T7    | T4     ...   T7
#   ...
#   m=7      T28    T29    T30    T31   | T28    ...   T31
#   m=8..15  as m=0..7, values a2,a3 | a6,a7
MMA_M16N8K16_A_TV = Layout(((4, 8), (2, 2, 2)), ((32, 1), (16, 8, 128)))

# B: 8x16 viewed as N x K, 32 threads x 4 values, index n + 8*k. Value v = v0 + 2*v1:
# n = groupID, k = 2*threadID_in_group + v0 + 8*v1 (registers b0,b1 | b2,b3).
#            k=0,1  k=2,3  k=4,5  k=6,7 | k=8..15
#   n=0      T0     T1     T2     T3    | same lanes, b2,b3
#   n=1      T4     T5     T6     T7    |
#   ...
#   n=7      T28    T29    T30    T31   |
MMA_M16N8K16_B_TV = Layout(((4, 8), (2, 2)), ((16, 1), (8, 64)))

# C/D: 16x8 (M x N), 32 threads x 4 f32 values, index m + 16*n. Value v = v0 + 2*v1:
# m = groupID + 8*v1, n = 2*threadID_in_group + v0 (c0,c1 rows 0..7; c2,c3 rows 8..15).
#            n=0,1  n=2,3  n=4,5  n=6,7
#   m=0      T0     T1     T2     T3     (c0,c1)
#   m=1      T4     T5     T6     T7
#   ...
#   m=8..15  as m=0..7 (c2,c3)
MMA_M16N8K16_C_TV = Layout(((4, 8), (2, 2)), ((32, 1), (16, 8)))

# ldmatrix .x4 (16-bit elements, PTX ISA "ldmatrix"): thread t supplies the address of
# row t of the four stacked 8x8 matrices (row-major 32x8, index 8*row + col)...
LDMATRIX_X4_SRC_TV = Layout((32, 8), (8, 1))
# ...and receives, for matrix j, row t // 4, columns 2*(t % 4) + (0, 1): index
# 64*j + 8*(t // 4) + 2*(t % 4) + v0 = 2*t + v0 + 64*j.
LDMATRIX_X4_DST_TV = Layout((32, (2, 4)), (2, (1, 64)))


def wgmma_m64_c_tv(n: Any) -> Layout:
    """The accumulator TV layout of a Hopper ``wgmma`` 64xNx16 (128 threads), index
    ``m + 64*n``: ``((4,8,4),(2,2,N/8)):((128,1,16),(64,8,512))`` (``m = 16*warp +
    groupID + 8*v1``, ``n = 2*threadID_in_group + v0 + 8*v2``).

    >>> str(wgmma_m64_c_tv(64))
    '((4,8,4),(2,2,8)):((128,1,16),(64,8,512))'
    """
    from tylo.layouts.symbolic import exact_div

    return Layout(
        ((4, 8, 4), (2, 2, exact_div(n, 8, op="wgmma_m64_c_tv"))), ((128, 1, 16), (64, 8, 512))
    )


def make_tv_layout(thr_layout: Any, val_layout: Any) -> tuple[tuple[int, ...], Layout]:
    """CuTe's ``make_layout_tv``: threads arranged by ``thr_layout`` each own a block of
    values arranged by ``val_layout``; returns ``(tile_shape, tv)`` where ``tv`` maps
    ``(thread, value)`` to the column-major index in ``tile_shape``. Defining property:
    ``raked_product(thr, val)`` applied to ``tv(t, v)`` is ``t + size(thr)*v``.

    >>> tile, tv = make_tv_layout(Layout((16, 8), (8, 1)), Layout((1, 8)))
    >>> tile, str(tv)
    ((16, 64), '((8,16),8):((128,1),16)')
    """
    thr = _as_layout(thr_layout, "make_tv_layout")
    val = _as_layout(val_layout, "make_tv_layout")
    if not (isinstance(thr, Layout) and isinstance(val, Layout)):
        raise ShapeError(
            f"make_tv_layout({thr}, {val}): the thread and value arrangements must be plain "
            "layouts (a swizzle belongs on the memory layout, not on the TV map)"
        )
    layout_mn = raked_product(thr, val)
    tile = product_each(layout_mn.shape)
    inv = right_inverse(layout_mn)
    n = vmul(size(thr), size(val))
    if decide_cmp(size(inv), "==", n) is not True:
        raise ShapeError(
            f"make_tv_layout({thr}, {val}): raked_product(thr, val) = {layout_mn} is not a "
            f"bijection onto [0, {n}) (its right inverse {inv} covers only {size(inv)} "
            "offsets, or that depends on the symbols); give compact thread and value "
            "layouts (each a bijection onto [0, size))"
        )
    tv = composition(inv, Layout((size(thr), size(val))))
    return tile, tv


def _tv_operand(tv: Any, op: str) -> Layout:
    if not isinstance(tv, Layout) or type(tv.shape) is not tuple or len(tv.shape) != 2:
        raise ShapeError(f"{op}: {reprlib.repr(tv)} is not a (thread, value) Layout of rank 2")
    return tv


def _tile_shape(tile_shape: Any, op: str) -> Any:
    try:
        return Layout(tile_shape).shape
    except LayoutError as e:
        raise e.within(f"{op}: tile shape {reprlib.repr(tile_shape)}") from None


def tv_coords(tv: Layout, tile_shape: Any, thread: Any) -> list[IntTuple]:
    """The tile coordinates thread ``thread`` owns, in value order (``thread`` may be a
    symbolic index; the coordinates are then expressions).

    >>> tv_coords(MMA_M16N8K16_C_TV, (16, 8), 5)
    [(1, 2), (1, 3), (9, 2), (9, 3)]
    """
    tv = _tv_operand(tv, "tv_coords")
    tile_shape = _tile_shape(tile_shape, "tv_coords")
    if type(thread) is not int and not isinstance(thread, sympy.Expr):
        raise ShapeError(
            f"tv_coords: thread {reprlib.repr(thread)} is not an int or a sympy integer "
            "expression (a thread index)"
        )
    nval = require_static(size(tv[1]), what="the number of values per thread")
    nthr = size(tv[0])
    if type(thread) is int and type(nthr) is int and not 0 <= thread < nthr:
        raise ShapeError(f"tv_coords({tv}, ...): thread {thread} is outside [0, {nthr})")
    return [idx2crd(tv(thread, v), tile_shape) for v in range(nval)]


def tv_owners(tv: Layout, tile_shape: Any) -> dict[tuple[int, ...], list[tuple[int, int]]]:
    """Map every coordinate of the tile to the ``(thread, value)`` pairs that hold it
    (static layouts). A TV layout that covers its tile once has exactly one per element.

    >>> own = tv_owners(MMA_M16N8K16_A_TV, (16, 16))
    >>> own[(0, 0)], own[(8, 9)], len(own)
    ([(0, 0)], [(0, 7)], 256)
    """
    tv = _tv_operand(tv, "tv_owners")
    tile_shape = _tile_shape(tile_shape, "tv_owners")
    nthr = require_static(size(tv[0]), what="the number of threads")
    nval = require_static(size(tv[1]), what="the number of values per thread")
    n = require_static(size(tile_shape), what="the tile size")
    out: dict[tuple[int, ...], list[tuple[int, int]]] = {}
    for t in range(nthr):
        for v in range(nval):
            i = require_static(tv(t, v), what="a TV layout index")
            if not 0 <= i < n:
                raise ShapeError(
                    f"tv_owners({tv}, {fmt(tile_shape)}): thread {t}, value {v} holds index "
                    f"{i}, outside the tile's [0, {n}); give the tile this TV layout covers"
                )
            out.setdefault(idx2crd(i, tile_shape), []).append((t, v))
    return out
