"""Loads and stores through tile views (:mod:`tylo.tile.views`), and the shared-address
classes the copy and ldmatrix operations share.

:func:`store` writes a fragment to a global tile by its ownership: each thread stores the
elements it holds; with ``origin=`` the tile is the full matrix and stores outside its
shape are skipped (the bounded form for edge tiles). :func:`load` reads one element of a
tile, with a fill value outside a bounded region.
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir

from tylo.layouts import ComposedLayout
from tylo.layouts._lazy import sympy
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
    "access_offsets",
    "address_classes",
    "class_addresses",
    "class_base",
    "load",
    "relate",
    "shared_address",
    "shared_base",
    "store",
]


def _static_offsets(layout: Any, table: tuple) -> tuple[int, ...]:
    return tuple(layout(*c) if len(c) > 1 else layout(c[0]) for c in table)


def address_classes(
    tile: SharedTile, tables: list[tuple], *, xor: bool = False
) -> list[tuple[int, int, int]]:
    """Group accesses that share a per-thread base: ``tables[j][t]`` is the static
    coordinate (of ``tile``) thread ``t`` accesses in access ``j``. Returns, per access,
    ``(representative access, d, x)`` such that, in every thread ``t``,
    ``offset_j[t] == (offset_rep[t] ^ x) + d`` (element offsets in ``tile``'s layout, its
    runtime base excluded): accesses of one class share one per-thread base register and
    differ by an immediate offset (``x == 0``: nothing, or the address mode's immediate)
    or by one XOR with a constant (``d == 0``, ``x != 0``).

    This is how a swizzled layout keeps the main loop lean: the swizzle's own XOR is paid
    once per class (per thread, before the loop), never per access. Two accesses whose
    offsets differ by the same amount in every thread share a base; so do two whose
    offsets differ by the same XOR in every thread, which is what a swizzle makes of steps
    along its swizzled bits (the k-steps of an operand through a swizzled row: a swizzle
    is XOR-linear, ``swz(a ^ c) == swz(a) ^ swz(c)``). Both are proved here by enumeration
    over all threads, not assumed. Representatives are matched by a constant difference
    first (free), then, with ``xor``, by a constant XOR (one instruction; without it every
    ``x`` is 0). :func:`class_addresses` with ``share`` does the same against every base the
    kernel has made so far for the same storage and layout."""
    offsets = access_offsets(tile, tables)
    reps: list[int] = []  # the accesses that start a class, in order
    out: list[tuple[int, int, int]] = []
    for j, hit in enumerate(_assign(offsets, [], xor)):
        if hit is None:
            reps.append(j)
            out.append((j, 0, 0))
        else:
            i, d, x = hit
            out.append((reps[i], d, x))
    return out


def _assign(offsets: tuple, pool: list[tuple], xor: bool):
    """For each access in turn, :func:`relate` against ``pool`` (bases made before, then the
    accesses that started a class here, appended as they come): ``(i, d, x)`` into the pool,
    or None where the access starts a class (and joins the pool)."""
    for off in offsets:
        hit = relate(off, pool, xor=xor)
        if hit is None:
            pool.append(off)
        yield hit


def relate(off: tuple, bases: list[tuple], *, xor: bool = True) -> tuple[int, int, int] | None:
    """``(i, d, x)`` with ``off[t] == (bases[i][t] ^ x) + d`` for every ``t``: a constant
    difference (``x == 0``) from any of ``bases`` if there is one, else (with ``xor``) a
    constant XOR (``d == 0``); None if neither holds for any base."""
    for i, b in enumerate(bases):
        d = off[0] - b[0]
        if all(p - q == d for p, q in zip(off, b)):
            return (i, d, 0)
    if not xor:
        return None
    for i, b in enumerate(bases):
        x = off[0] ^ b[0]
        if all(p ^ q == x for p, q in zip(off, b)):
            return (i, 0, x)
    return None


def access_offsets(tile: SharedTile, tables: list[tuple]) -> tuple[tuple, ...]:
    """Per access ``j`` and thread ``t``, the element offset of ``tables[j][t]`` in
    ``tile``'s layout (its runtime base excluded)."""
    tables = tuple(map(tuple, tables))
    origin = tile.origin
    if all(type(o) is int for o in origin):
        # the offsets depend only on the layout, the view's modes and (plain int) origin
        # and the tables: a layout is an immutable value, so they are memoized (a k-step
        # or pipeline stage of one tile repeats them; ~22k layout evaluations per trace)
        key = (tile.layout, tile.modes, origin, tables)
        try:
            got = _OFFSETS.get(key)
        except TypeError:  # an unhashable coordinate: no memo
            return _access_offsets(tile, tables)
        if got is None:
            got = _access_offsets(tile, tables)
            if len(_OFFSETS) >= _OFFSETS_MAX:
                _OFFSETS.clear()
            _OFFSETS[key] = got
        return got
    return _access_offsets(tile, tables)


_OFFSETS: dict = {}
_OFFSETS_MAX = 1024


def _access_offsets(tile: SharedTile, tables: tuple) -> tuple[tuple, ...]:
    return tuple(
        _static_offsets(tile.layout, tuple(tile.coordinate(c) for c in tab)) for tab in tables
    )


def class_base(tile: SharedTile, coord: tuple) -> Any:
    """A 32-bit index symbol bound to the element offset of ``coord`` (expressions over
    thread indices only, lowered once in the kernel's entry block) in ``tile``'s layout,
    excluding the tile's runtime base."""
    return _class_base(tile, coord)[0]


def _class_base(tile: SharedTile, coord: tuple) -> tuple[Any, bool]:
    """:func:`class_base`, and whether its value is bound in the kernel's entry block
    (so that any later access may use it)."""
    from tylo.kernel import facts
    from tylo.kernel.context import current
    from tylo.kernel.lower import lower_int

    ctx = current()
    memo = ctx.__dict__.setdefault("_tylo_class_bases", {})
    full = tile.coordinate(coord)
    expr = _expr(tile.layout(*full) if len(full) > 1 else tile.layout(full[0]))
    if expr.is_Integer:
        return int(expr), True
    key = (id(tile.storage), tile.layout, expr)
    got = memo.get(key)
    if got is not None and not got[1] and ctx.lookup(got[0]) is None:
        # bound in a region (a loop body, a branch) that does not enclose this point: its
        # value does not reach here, so bind the offset again
        got = None
    if got is None:
        value = lower_int(ctx, expr, 32)
        sym = facts.integer_symbol(ctx.unique("smem_off"), nonnegative=True)
        prologue = expr.free_symbols <= ctx.prologue_symbols
        ctx.bind(sym, value, prologue=prologue)
        ctx.symbol_bounds[sym] = (0, _SHARED_LIMIT)
        got = memo[key] = (sym, prologue)
    return got


def class_addresses(
    tile: SharedTile, tables: list[tuple], coords: list[tuple], *, share: bool = False
) -> list:
    """The i32 shared addresses of accesses ``j`` of ``tile`` for the current thread:
    ``coords[j]`` is the access's coordinate as an expression of the thread index and
    ``tables[j]`` its static value for every thread. Each access is its own base or a
    constant difference from a base made before it in this call (:func:`address_classes`,
    proved over every thread).

    ``share``: also a constant XOR, and from a base made by an earlier call on the same
    storage and layout (:func:`relate`): the k-steps of an operand, loaded one call per
    k-step, then share one base, at the price of one XOR per access and of that base's
    register, live from its first use to its last. Whether that is a gain depends on the
    kernel's register pressure (ptxas otherwise recomputes each k-step's base where it is
    needed): the caller chooses."""
    from tylo.kernel.context import current
    from tylo.kernel.lower import lower_int

    ctx = current()
    b = ctx.builder
    nbytes = tile.dtype.nbytes
    assert nbytes & (nbytes - 1) == 0, tile.dtype  # (a ^ x) * 2**k == (a * 2**k) ^ (x * 2**k)
    base = shared_base(tile.storage)
    offsets = access_offsets(tile, tables)
    width = len(offsets[0]) if offsets else 0
    kept: tuple[list, list] = ([], [])  # bases earlier calls made (share), in the entry block
    if share:
        registry = ctx.__dict__.setdefault("_tylo_class_registry", {})
        kept = registry.setdefault((id(tile.storage), tile.layout, width), kept)
    pool, syms = list(kept[0]), list(kept[1])  # the bases this call may use, as it goes
    out = []
    for j, hit in enumerate(_assign(offsets, pool, share)):
        if hit is None:  # _assign put the access's offsets in the pool
            sym, entry = _class_base(tile, coords[j])
            syms.append(sym)
            d = x = 0
            if share and entry:  # bound in the entry block: later calls may use it
                kept[0].append(offsets[j])
                kept[1].append(sym)
        else:
            i, d, x = hit
            sym = syms[i]
        if x and not isinstance(sym, int):  # one XOR with a constant on the base
            # (in bytes: nbytes is a power of 2)
            moved = b.xor(lower_int(ctx, nbytes * sym, 32), ir.IntType(32)(nbytes * x))
            rest = lower_int(ctx, nbytes * (_expr(tile.base) + d), 32)
            out.append(b.add(base, b.add(moved, rest)))
        else:  # a constant difference (a static base: the XOR, if any, folds here)
            off_expr = nbytes * ((sym ^ x if x else sym) + _expr(tile.base) + d)
            out.append(b.add(base, lower_int(ctx, off_expr, 32)))
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
    from tylo.kernel.context import current, require_threads
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
    require_threads(own.threads, f"{plan}'s accumulator ({own.label})")
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
    from tylo.kernel.context import require_threads
    from tylo.kernel.values import Value, as_value
    from tylo.tile.fragment import Fragment
    from tylo.tile.ownership import Ownership

    if not isinstance(ownership, Ownership):
        raise TileError(f"load: expected an Ownership, got {ownership!r}")
    if len(ownership.shape) != tile.rank:
        raise TileError(f"load: a {len(ownership.shape)}-D ownership from a {tile.rank}-D tile")
    require_threads(ownership.threads, ownership.label)  # the block must hold its threads
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
