"""Tiles: logical views of global and shared memory, and their windows.

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

The loads and stores through these views are in :mod:`tylo.tile.access`.
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir

from tylo import dtypes as dt
from tylo.errors import TyloError
from tylo.layouts import ComposedLayout, Layout, Swizzle
from tylo.layouts._lazy import sympy

__all__ = ["GlobalTile", "SharedTile", "TileError", "shared_address", "shared_base"]

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


# ---------------------------------------------------------------------------- lowering
# Registered where the offsets that contain SwizzleXor are made, so that any kernel that
# reads a swizzled tile's offsets can lower them.


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

    register_lowering("SwizzleXor", _lower_swizzle)  # tylo.layouts.swizzle.SwizzleXor


_register()
