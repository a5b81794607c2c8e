"""Loads and stores through tile views (:mod:`tylo.tile.views`), and the shared-address
classes the copy and ldmatrix operations share.

:func:`store` writes a fragment to a global tile by its ownership: each thread stores the
elements it holds; with ``origin=`` the tile is the full matrix and stores outside its
shape are skipped (the bounded form for edge tiles). :func:`load` reads one element of a
tile, with a fill value outside a bounded region.
"""

from __future__ import annotations

from typing import Any

import sympy
from llvmlite import ir

from tylo.layouts import ComposedLayout
from tylo.tile.views import (
    _SHARED_LIMIT,
    GlobalTile,
    SharedTile,
    TileError,
    _expr,
    _rank,
    _Tile,
    shared_address,
    shared_base,
)

__all__ = [
    "GlobalTile",
    "SharedTile",
    "TileError",
    "address_classes",
    "class_addresses",
    "class_base",
    "load",
    "shared_address",
    "shared_base",
    "store",
]

def _static_offsets(layout: Any, table: tuple) -> tuple[int, ...]:
    return tuple(layout(*c) if len(c) > 1 else layout(c[0]) for c in table)


def address_classes(tile: SharedTile, tables: list[tuple]) -> list[tuple[int, int]]:
    """Group accesses by constant offset difference: ``tables[j][t]`` is the static
    coordinate (of ``tile``) thread ``t`` accesses in access ``j``. Returns, per access,
    ``(representative access, constant element offset from it)``: accesses of one class
    share one per-thread base register and differ by an immediate offset.

    This is how a swizzled layout keeps the main loop lean: the XOR of the swizzle is paid
    once per class (per thread, before the loop), never per access, whenever the offsets
    of two accesses differ by the same amount in every thread (proved here by enumeration
    over all threads, not assumed)."""
    tables = tuple(map(tuple, tables))
    origin = tile.origin
    if all(type(o) is int for o in origin):
        # the classes depend only on the layout, the view's modes and (plain int) origin
        # and the tables: a layout is an immutable value, so they are memoized (a k-step
        # or pipeline stage of one tile repeats them; ~22k layout evaluations per trace)
        key = (tile.layout, tile.modes, origin, tables)
        try:
            got = _CLASSES.get(key)
        except TypeError:  # an unhashable coordinate: no memo
            return list(_address_classes(tile, tables))
        if got is None:
            got = _address_classes(tile, tables)
            if len(_CLASSES) >= _CLASSES_MAX:
                _CLASSES.clear()
            _CLASSES[key] = got
        return list(got)
    return list(_address_classes(tile, tables))


_CLASSES: dict = {}
_CLASSES_MAX = 1024


def _address_classes(tile: SharedTile, tables: tuple) -> tuple[tuple[int, int], ...]:
    offsets = [
        _static_offsets(tile.layout, tuple(tile.coordinate(c) for c in tab)) for tab in tables
    ]
    reps: list[int] = []
    out: list[tuple[int, int]] = []
    for j, off in enumerate(offsets):
        for r in reps:
            d = off[0] - offsets[r][0]
            if all(a - b == d for a, b in zip(off, offsets[r])):
                out.append((r, d))
                break
        else:
            reps.append(j)
            out.append((j, 0))
    return tuple(out)


def class_base(tile: SharedTile, coord: tuple) -> Any:
    """A 32-bit index symbol bound to the element offset of ``coord`` (expressions over
    thread indices only, lowered once in the kernel's entry block) in ``tile``'s layout,
    excluding the tile's runtime base."""
    from tylo.kernel import facts
    from tylo.kernel.context import current
    from tylo.kernel.lower import lower_int

    ctx = current()
    memo = ctx.__dict__.setdefault("_tylo_class_bases", {})
    full = tile.coordinate(coord)
    expr = _expr(tile.layout(*full) if len(full) > 1 else tile.layout(full[0]))
    key = (id(tile.storage), tile.layout, expr)
    sym = memo.get(key)
    if sym is None:
        if expr.is_Integer:
            return int(expr)
        value = lower_int(ctx, expr, 32)
        sym = facts.integer_symbol(ctx.unique("smem_off"), nonnegative=True)
        ctx.bind(sym, value, prologue=expr.free_symbols <= ctx.prologue_symbols)
        ctx.symbol_bounds[sym] = (0, _SHARED_LIMIT)
        memo[key] = sym
    return sym


def class_addresses(tile: SharedTile, tables: list[tuple], coords: list[tuple]) -> list:
    """The i32 shared addresses of accesses ``j`` of ``tile`` for the current thread:
    ``coords[j]`` is the access's coordinate as an expression of the thread index and
    ``tables[j]`` its static value for every thread (see :func:`address_classes`)."""
    from tylo.kernel.context import current
    from tylo.kernel.lower import lower_int

    ctx = current()
    b = ctx.builder
    nbytes = tile.dtype.nbytes
    base = shared_base(tile.storage)
    out = []
    for (r, d), _ in zip(address_classes(tile, tables), coords):
        sym = class_base(tile, coords[r])
        off = nbytes * (sym + _expr(tile.base) + d)
        out.append(b.add(base, lower_int(ctx, off, 32)))
    return out


# ---------------------------------------------------------------------------- stores


def store(
    plan: Any, tile: GlobalTile, fragment: Any, tid: Any, *, origin: tuple | None = None
) -> None:
    """Store ``fragment`` into ``tile`` by ownership: thread ``tid`` writes each element it
    holds at its coordinate (converted to the tile's dtype).

    ``plan`` is the fragment's producer (a :class:`~tylo.nvgpu.warp.mma.TiledMMA`) or None; it is
    used only to check the fragment's ownership. Full form: ``tile`` is the window the
    fragment covers. Bounded form (``origin=``): ``tile`` is the whole matrix, the fragment
    covers the window at ``origin``, and elements outside ``tile.shape`` are skipped
    (predicated stores, no branches).
    """
    from tylo.kernel import facts
    from tylo.kernel.context import current
    from tylo.kernel.lower import lower_bool, lower_int
    from tylo.kernel.values import convert
    from tylo.nvgpu.instructions import st_global
    from tylo.tile.fragment import Fragment

    if not isinstance(fragment, Fragment):
        raise TileError(f"store: expected a Fragment, got {type(fragment).__name__}")
    if not isinstance(tile, GlobalTile):
        raise TileError(f"store: the destination must be a GlobalTile, got {tile!r}")
    own = fragment.ownership
    if plan is not None and hasattr(plan, "acc_ownership") and plan.acc_ownership != own:
        raise TileError(
            f"store: the fragment's ownership {own.label} is not {plan}'s accumulator ownership"
        )
    if fragment.packed is not None:
        fragment = fragment.unpack()
    if len(own.shape) != tile.rank:
        raise TileError(f"store: a {len(own.shape)}-D fragment into a {tile.rank}-D tile")
    ctx = current()
    b = ctx.builder
    d = tile.dtype
    tc = own.thread_coord(tid)
    start = tuple(tc) if origin is None else tuple(o + c for o, c in zip(origin, tc))
    linear = _linear_strides(tile)
    if linear is not None:
        base_ptr = tile.pointer(start)
    # value coordinates repeat along each axis: the bounds tests and offset terms (sympy
    # expressions, immutable) are built once per (axis, coordinate)
    cond_memo: dict = {}
    term_memo: dict = {}
    for v in range(own.values):
        vc = own.value_coord(v)
        value = fragment.values[v]
        value = convert(value, d) if value.dtype is not d else value
        pred = None
        if origin is not None:
            conds = []
            for i, (s, c, n) in enumerate(zip(start, vc, tile.shape)):
                key = (i, type(c), c)
                cond = cond_memo.get(key)
                if cond is None:
                    # facts.relation builds sympy.Lt exactly, faster
                    cond = cond_memo[key] = facts.relation(sympy.Lt, s + c, n)
                conds.append(cond)
            rel = sympy.And(*conds)
            if rel is sympy.false:
                continue
            if rel is not sympy.true:
                pred = lower_bool(ctx, rel)
        if linear is not None:
            terms = []
            for i, (c, s) in enumerate(zip(vc, linear)):
                key = (i, type(c), c)
                t = term_memo.get(key)
                if t is None:
                    t = term_memo[key] = c * s
                terms.append(t)
            if all(type(t) is int for t in terms):  # the same Integer, without sympy adds
                off = sympy.Integer(sum(terms))
            else:
                off = sum(terms, sympy.Integer(0))
            ptr = base_ptr if off == 0 else b.gep(base_ptr, [lower_int(ctx, off)], inbounds=True)
        else:
            ptr = tile.pointer(tuple(s + c for s, c in zip(start, vc)))
        st_global(b, ptr, value.use(), pred=pred)




def _linear_strides(tile: _Tile) -> tuple | None:
    """Per-axis element strides when the tile's layout is linear in its coordinates (a
    plain layout whose viewed modes are flat), else None."""
    if isinstance(tile.layout, ComposedLayout):
        return None
    out = []
    for m in tile.modes:
        sub = tile.layout[m] if _rank(tile.layout) > 1 else tile.layout
        if type(sub.shape) is tuple:
            return None
        out.append(sub.stride)
    return tuple(out)


def load(
    tile: Any, ownership: Any, tid: Any, *, origin: tuple | None = None, fill: Any = 0.0
) -> Any:
    """The fragment of ``ownership`` read from ``tile`` (global or shared): thread ``tid``
    loads each element it owns. Full form: ``tile`` is the window the ownership covers.
    Bounded form (``origin=``): ``tile`` is the whole array, the ownership covers the window
    at ``origin``, and elements outside ``tile.shape`` read as ``fill`` (no access made)."""
    from tylo.kernel.values import Value, as_value
    from tylo.tile.fragment import Fragment
    from tylo.tile.ownership import Ownership

    if not isinstance(ownership, Ownership):
        raise TileError(f"load: expected an Ownership, got {ownership!r}")
    if len(ownership.shape) != tile.rank:
        raise TileError(f"load: a {len(ownership.shape)}-D ownership from a {tile.rank}-D tile")
    tc = ownership.thread_coord(tid)
    start = tuple(tc) if origin is None else tuple(o + c for o, c in zip(origin, tc))
    from tylo.kernel.memory import Tensor

    flat = Tensor(
        tile.dtype,
        tile.storage.base,
        addrspace=tile.storage.addrspace,
        align=tile.storage.align,
        name="tile",
    )
    values = []
    for v in range(ownership.values):
        c = tuple(s + x for s, x in zip(start, ownership.value_coord(v)))
        if origin is not None:
            rel = sympy.And(*(sympy.Lt(x, n) for x, n in zip(c, tile.shape)))
            if rel is sympy.false:
                values.append(as_value(fill, tile.dtype))
                continue
            if rel is not sympy.true:
                values.append(_guarded_load(flat, tile.offset(c), rel, fill))
                continue
        values.append(Value(tile.dtype, flat.load(_expr(tile.offset(c))).use()))
    return Fragment(values, ownership)


def _guarded_load(flat: Any, offset: Any, rel: Any, fill: Any) -> Any:
    """``flat[offset]`` where ``rel`` holds, else ``fill``, through a select of a clamped
    address (the load always reads a valid element: the first one)."""
    from tylo.kernel.context import current
    from tylo.kernel.lower import lower_bool, lower_int
    from tylo.kernel.values import Value, as_value

    ctx = current()
    b = ctx.builder
    ok = lower_bool(ctx, rel)
    off = b.select(ok, lower_int(ctx, _expr(offset)), ir.IntType(ctx.index_bits)(0))
    ptr = b.gep(flat.base, [off], inbounds=True)
    raw = b.load(ptr)
    return Value(flat.dtype, b.select(ok, raw, as_value(fill, flat.dtype).use()))
