"""Tiles: logical views of global and shared memory, windows, and stores by ownership.

A :class:`GlobalTile` or :class:`SharedTile` *borrows* storage (a pointer parameter, or a
shared tensor from ``tylo.shared`` / ``tylo.dynamic_shared``) and sees it through a layout
mapping logical coordinates to element offsets: ``GlobalTile(a, Layout((m, k), (lda, 1)))``
is the (M, K) matrix A stored K-contiguous with a runtime leading dimension. Layouts of
global tiles may be symbolic; shared layouts are static and may be swizzled
(``composition(Swizzle(2, 3, 3), Layout((128, 32), (32, 1)))``, element offsets).

Views never copy. :meth:`window` selects a rectangular region (``origin``, ``shape``);
:meth:`select` fixes one mode (a pipeline stage, say) and drops it. A dynamic selection
is accepted where it is exact: for a swizzled shared layout, only along a mode whose
stride is a multiple of the swizzle's period (so the offset commutes with the swizzle).

:func:`store` writes a fragment to a global tile by its ownership: each thread stores the
elements it holds; with ``origin=`` the tile is the full matrix and stores outside its
shape are skipped (the bounded form for edge tiles).
"""

from __future__ import annotations

from typing import Any

import sympy
from llvmlite import ir

from tylo import dtypes as dt
from tylo.errors import TyloError
from tylo.layouts import ComposedLayout, Layout, Swizzle
from tylo.layouts.swizzle import SwizzleXor

__all__ = ["GlobalTile", "SharedTile", "TileError", "load", "shared_address", "store"]

I32 = ir.IntType(32)
# shared memory addresses fit comfortably in 31 bits (228 KB per SM on sm_90)
_SHARED_LIMIT = 1 << 24


class TileError(TyloError):
    """A tile view, window or store that does not fit its storage or its operands."""


def _rank(layout: Any) -> int:
    shape = layout.shape
    return len(shape) if type(shape) is tuple else 1


def _mode_shape(layout: Any) -> tuple:
    shape = layout.shape
    return shape if type(shape) is tuple else (shape,)


class _Tile:
    """Common part of global and shared tiles (see the module docstring)."""

    __slots__ = ("base", "layout", "modes", "origin", "shape", "storage")
    space = "memory"

    def __init__(
        self,
        storage: Any,
        layout: Any,
        *,
        base: Any = 0,
        modes: tuple | None = None,
        origin: tuple | None = None,
        shape: tuple | None = None,
    ) -> None:
        self.storage = storage
        self.layout = layout
        full = _mode_shape(layout)
        self.modes = tuple(range(len(full))) if modes is None else tuple(modes)
        self.origin = tuple(0 for _ in self.modes) if origin is None else tuple(origin)
        self.shape = tuple(full[i] for i in self.modes) if shape is None else tuple(shape)
        self.base = base

    @property
    def dtype(self) -> Any:
        return self.storage.dtype

    @property
    def rank(self) -> int:
        return len(self.modes)

    def _new(self, **kw: Any) -> Any:
        args = {"base": self.base, "modes": self.modes, "origin": self.origin, "shape": self.shape}
        args.update(kw)
        return type(self)(self.storage, self.layout, **args)

    def window(self, origin: tuple, shape: tuple | None = None) -> Any:
        """The region of ``shape`` starting at ``origin`` (coordinates of this view)."""
        origin = tuple(origin)
        if len(origin) != self.rank:
            raise TileError(f"{self!r}.window: origin {origin} has rank != {self.rank}")
        shape = self.shape if shape is None else tuple(shape)
        if len(shape) != self.rank:
            raise TileError(f"{self!r}.window: shape {shape} has rank != {self.rank}")
        new_origin = tuple(a + b for a, b in zip(self.origin, origin))
        return self._new(origin=new_origin, shape=shape)

    def select(self, mode: int, index: Any) -> Any:
        """This view with mode ``mode`` fixed at ``index`` (static or runtime) and dropped."""
        if not 0 <= mode < self.rank:
            raise TileError(f"{self!r}.select: mode {mode} out of range for rank {self.rank}")
        m = self.modes[mode]
        stride = self._flat_stride(m, "select")
        self._check_linear(m, stride, index)
        keep = [i for i in range(self.rank) if i != mode]
        return self._new(
            base=self.base + (index + self.origin[mode]) * stride,
            modes=tuple(self.modes[i] for i in keep),
            origin=tuple(self.origin[i] for i in keep),
            shape=tuple(self.shape[i] for i in keep),
        )

    def _inner(self) -> Layout:
        return self.layout.inner if isinstance(self.layout, ComposedLayout) else self.layout

    def _flat_stride(self, m: int, what: str) -> Any:
        inner = self._inner()
        sub = inner[m] if _rank(inner) > 1 else inner
        if type(sub.shape) is tuple:
            raise TileError(
                f"{self!r}.{what}: mode {m} of {self.layout} is nested; only a flat mode "
                "(one extent, one stride) can be selected"
            )
        return sub.stride

    def _check_linear(self, m: int, stride: Any, index: Any) -> None:
        if isinstance(self.layout, ComposedLayout):
            outer = self.layout.outer
            if isinstance(outer, Swizzle) and outer.bits and type(index) is not int:
                period = outer.size()
                if type(stride) is not int or stride % period:
                    raise TileError(
                        f"{self!r}: a runtime index along mode {m} (stride {stride}) does "
                        f"not commute with {outer} (period {period} elements); choose a "
                        "layout whose stride there is a multiple of the period"
                    )

    def coordinate(self, coord: tuple) -> tuple:
        """The full coordinate of the underlying layout for a coordinate of this view."""
        coord = tuple(coord)
        if len(coord) != self.rank:
            raise TileError(f"{self!r}: coordinate {coord} has rank != {self.rank}")
        full: list[Any] = [0] * _rank(self.layout)
        for i, m in enumerate(self.modes):
            full[m] = self.origin[i] + coord[i]
        return tuple(full)

    def offset(self, coord: tuple) -> Any:
        """The element offset (from the storage's base) of ``coord`` of this view."""
        c = self.coordinate(coord)
        inner = self.layout(*c) if len(c) > 1 else self.layout(c[0])
        return self.base + inner

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.layout}, shape={self.shape})"


class GlobalTile(_Tile):
    """A view of global memory (a pointer parameter) through a (possibly symbolic) layout.

    ``GlobalTile(a, Layout((m, k), (lda, 1)))``: logical (M, K), K-contiguous.
    """

    __slots__ = ()
    space = "global"

    def __init__(self, storage: Any, layout: Any, **kw: Any) -> None:
        from tylo.backend.ir import ADDRSPACE_GLOBAL

        if getattr(storage, "addrspace", None) != ADDRSPACE_GLOBAL:
            raise TileError(
                f"GlobalTile: storage must be a global pointer (a kernel's pointer "
                f"parameter), got {storage!r}"
            )
        if not isinstance(layout, (Layout, ComposedLayout)):
            raise TileError(f"GlobalTile: layout must be a Layout, got {layout!r}")
        super().__init__(storage, layout, **kw)

    def pointer(self, coord: tuple) -> ir.Value:
        """The typed global pointer of element ``coord`` (lowered at the point of use)."""
        return self.storage._pointer(_expr(self.offset(coord)))


class SharedTile(_Tile):
    """A view of shared memory through a static (possibly swizzled) layout.

    ``SharedTile(smem, composition(Swizzle(2, 3, 3), Layout((128, 32), (32, 1))))``.
    """

    __slots__ = ()
    space = "shared"

    def __init__(self, storage: Any, layout: Any, **kw: Any) -> None:
        from tylo.backend.ir import ADDRSPACE_SHARED

        if getattr(storage, "addrspace", None) != ADDRSPACE_SHARED:
            raise TileError(
                f"SharedTile: storage must be shared memory (tylo.shared or "
                f"tylo.dynamic_shared), got {storage!r}"
            )
        if not isinstance(layout, (Layout, ComposedLayout)) or not layout.is_static:
            raise TileError(f"SharedTile: layout must be a static Layout, got {layout!r}")
        super().__init__(storage, layout, **kw)

    def address(self, coord: tuple) -> Any:
        """The 32-bit shared address of ``coord`` (an i32 IR value)."""
        return shared_address(self.storage, self.offset(coord), self.dtype)

    def static_offsets(self, coords: list) -> list[int]:
        """Element offsets of static coordinates, without the (possibly runtime) base."""
        out = []
        for c in coords:
            full = self.coordinate(c)
            out.append(self.layout(*full) if len(full) > 1 else self.layout(full[0]))
        return out


def _expr(x: Any) -> Any:
    return sympy.Integer(x) if isinstance(x, int) else x


def shared_base(storage: Any) -> ir.Value:
    """The 32-bit shared address of a shared tensor's first element (a constant)."""
    return (
        storage.base.ptrtoint(I32)
        if isinstance(storage.base, ir.Constant)
        else (_builder().ptrtoint(storage.base, I32))
    )


def _builder() -> ir.IRBuilder:
    from tylo.kernel.context import current

    return current().builder


def shared_address(storage: Any, offset: Any, dtype: Any = None) -> ir.Value:
    """The i32 shared address of element ``offset`` (an index expression) of ``storage``
    (a shared tensor, or a :class:`SharedTile` whose offsets ``offset`` is in)."""
    from tylo.kernel.context import current
    from tylo.kernel.lower import lower_int

    if isinstance(storage, SharedTile):
        storage = storage.storage
    d = dt.dtype_of(dtype) if dtype is not None else storage.dtype
    ctx = current()
    nbytes = storage.dtype.nbytes
    if d.nbytes != nbytes:
        raise TileError(
            f"shared scratch holds {storage.dtype} elements, but {d} values go through it; "
            f"allocate the scratch as {d}"
        )
    base = shared_base(storage)
    off = _expr(offset) * nbytes
    if off == 0:
        return base
    return ctx.builder.add(base, lower_int(ctx, off, 32))


# ---------------------------------------------------------------------------- address classes


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


# ---------------------------------------------------------------------------- lowering


def _lower_swizzle(ctx: Any, b: ir.IRBuilder, e: Any) -> ir.Value:
    """``SwizzleXor(x, bits, base, shift)`` -> ``x ^ ((x & mask) >> shift)``."""
    from tylo.kernel.lower import bounds, lower_int

    x, bits, base, shift = e.args
    bits, base, shift = int(bits), int(base), int(shift)
    lo, hi = bounds(ctx, x)
    width = 32 if lo is not None and hi is not None and lo >= 0 and hi < 2**31 else 64
    t = ir.IntType(width)
    v = lower_int(ctx, x, width)
    mask = ((1 << bits) - 1) << (base + max(0, shift))
    moved = b.and_(v, t(mask))
    moved = b.lshr(moved, t(shift)) if shift >= 0 else b.shl(moved, t(-shift))
    return b.xor(v, moved)


def _register() -> None:
    from tylo.kernel.lower import register_lowering

    register_lowering(SwizzleXor.__name__, _lower_swizzle)


_register()


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
    from tylo.tile.fragment import Fragment
    from tylo.kernel import facts
    from tylo.kernel.context import current
    from tylo.kernel.lower import lower_bool, lower_int
    from tylo.kernel.values import convert
    from tylo.nvgpu.instructions import st_global

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
    from tylo.tile.fragment import Fragment
    from tylo.kernel.values import Value, as_value
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
