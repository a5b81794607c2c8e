"""Swizzles and composed layouts: ``S<b,m,s> o L``.

A swizzle ``S<b,m,s>`` XORs the ``b`` bits at bit positions ``[m+s, m+s+b)`` of an
offset into positions ``[m, m+b)`` (``s < 0`` moves bits the other way). It is a
bijection on every aligned block of ``2**(m + b + |s|)`` offsets whenever ``|s| >= b``.

**Unit.** A swizzle acts on whatever integers it is given: composed with a layout of
element offsets it permutes elements; applied to byte addresses it permutes bytes. The
Hopper tensor-core shared-memory atoms swizzle *byte* addresses with ``S<3,4,3>`` (the
128-byte swizzle; for bf16 that is ``S<3,3,3>`` on element offsets), while Ampere-style
kernels usually compose ``S<3,3,3>`` on *element* offsets. Pick the unit of the layout
you compose with.

A :class:`ComposedLayout` ``outer o offset o inner`` evaluates
``outer(offset + inner(c))``; its shape is ``inner``'s.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tylo.layouts._budget import INT64_SAFE, SMALL_ENUMERATION, check_budget
from tylo.layouts._lazy import is_sympy, lazy, sympy
from tylo.layouts._scope import Value
from tylo.layouts._swizzle_bits import _apply
from tylo.layouts.errors import LayoutError, SwizzleError
from tylo.layouts.inttuple import fmt
from tylo.layouts.layout import Layout, size
from tylo.layouts.symbolic import require_static, to_value

_xor = lazy("tylo.layouts._swizzle_xor")  # SwizzleXor, a sympy function: imported on use

if TYPE_CHECKING:
    from tylo.layouts._swizzle_xor import SwizzleXor

__all__ = ["ComposedLayout", "SWIZZLE_MAX_BITS", "Swizzle", "SwizzleXor", "byte_swizzle"]

SWIZZLE_MAX_BITS = 64
"""Swizzles act on 64-bit offsets: ``bits + base + |shift|`` is at most this."""


class Swizzle:
    """``S<bits,base,shift>``: XOR ``bits`` bits from position ``base+shift`` into position
    ``base``. A bijection (its own inverse) when ``|shift| >= bits``.

    >>> sw = Swizzle(3, 3, 3)
    >>> str(sw), [sw(64 * r) for r in range(4)], sw(sw(100)) == 100
    ('S<3,3,3>', [0, 72, 144, 216], True)
    """

    __slots__ = ("base", "bits", "shift")

    def __init__(self, bits: int, base: int, shift: int) -> None:
        try:
            b = require_static(bits, what="Swizzle bits")
            m = require_static(base, what="Swizzle base")
            s = require_static(shift, what="Swizzle shift")
        except LayoutError as e:
            raise SwizzleError(str(e)) from None
        if b < 0 or m < 0:
            raise SwizzleError(
                f"Swizzle({bits}, {base}, {shift}): bits and base must be >= 0 "
                "(S<bits,base,shift> XORs bits at base+shift into base)"
            )
        if b + m + abs(s) > SWIZZLE_MAX_BITS:
            raise SwizzleError(
                f"Swizzle({bits}, {base}, {shift}): bits + base + |shift| = {b + m + abs(s)} "
                f"exceeds {SWIZZLE_MAX_BITS}, the width of an offset; a swizzle moves bits "
                "of 64-bit offsets, so keep every bit position below 64"
            )
        if b and abs(s) < b:
            raise SwizzleError(
                f"Swizzle({bits}, {base}, {shift}): |shift| must be >= bits, otherwise the "
                "source and destination bit ranges overlap and it is not a bijection"
            )
        self.bits, self.base, self.shift = b, m, s

    def __call__(self, offset: Any) -> Any:
        """The swizzled offset (a SwizzleXor expression for a symbolic offset)."""
        if type(offset) is int:
            return _apply(offset, self.bits, self.base, self.shift)
        v = to_value(offset)
        if type(v) is int:
            return _apply(v, self.bits, self.base, self.shift)
        return _xor.SwizzleXor(v, self.bits, self.base, self.shift)

    @property
    def yyy_mask(self) -> int:
        """The source bits (moved)."""
        return ((1 << self.bits) - 1) << (self.base + max(0, self.shift))

    @property
    def zzz_mask(self) -> int:
        """The destination bits (XORed into)."""
        return ((1 << self.bits) - 1) << (self.base - min(0, self.shift))

    def size(self) -> int:
        """The period: the swizzle permutes each aligned block of this many offsets."""
        return 1 << (self.bits + self.base + abs(self.shift))

    def map_values(self, fn: Callable[[Value], Value]) -> Swizzle:
        return self

    def __eq__(self, other: object) -> bool:
        if type(other) is not Swizzle:
            return NotImplemented
        return (self.bits, self.base, self.shift) == (other.bits, other.base, other.shift)

    def __hash__(self) -> int:
        return hash((Swizzle, self.bits, self.base, self.shift))

    def __str__(self) -> str:
        return f"S<{self.bits},{self.base},{self.shift}>"

    def __repr__(self) -> str:
        return f"Swizzle({self.bits}, {self.base}, {self.shift})"

    def __reduce__(self) -> tuple[type[Swizzle], tuple[int, int, int]]:
        return (Swizzle, (self.bits, self.base, self.shift))


# the hardware's swizzle widths (TMA's CU_TENSOR_MAP_SWIZZLE_*, wgmma's descriptor modes):
# width in bytes -> the swizzle's bits (16-byte chunks XORed by the row within 8 rows)
_BYTE_SWIZZLE_BITS = {32: 1, 64: 2, 128: 3}


def byte_swizzle(width: int, element_bytes: int = 1) -> Swizzle:
    """The hardware's ``width``-byte swizzle (32, 64 or 128: TMA's and wgmma's
    ``SWIZZLE_32B/64B/128B``), acting on offsets in units of ``element_bytes``-byte
    elements (a power of two, at most 16).

    On byte addresses the hardware swizzles with ``S<b,4,3>`` (``b`` = 1, 2, 3): the 16-byte
    chunk index (bits 4 and up) is XORed with the 128-byte row index within 8 rows (bits 7
    and up). On element offsets the chunk starts ``log2(element_bytes)`` bits lower, so a
    layout of bf16 element offsets composes with ``S<3,3,3>``.

    >>> byte_swizzle(128), byte_swizzle(128, 2), byte_swizzle(64, 4)
    (Swizzle(3, 4, 3), Swizzle(3, 3, 3), Swizzle(2, 2, 3))
    """
    bits = _BYTE_SWIZZLE_BITS.get(width) if type(width) is int else None
    if bits is None:
        raise SwizzleError(f"byte_swizzle: width must be 32, 64 or 128 (bytes), got {width!r}")
    if type(element_bytes) is not int or element_bytes not in (1, 2, 4, 8, 16):
        raise SwizzleError(
            "byte_swizzle: element_bytes must be 1, 2, 4, 8 or 16 (a 16-byte chunk holds a "
            f"whole number of elements), got {element_bytes!r}"
        )
    return Swizzle(bits, 4 - (element_bytes.bit_length() - 1), 3)


class ComposedLayout:
    """``outer o offset o inner``: evaluates ``outer(offset + inner(c))``. ``outer`` is a
    :class:`Swizzle` or a :class:`Layout` (applied to the flat offset); the shape, size and
    coordinates are ``inner``'s. Build one with ``composition(Swizzle(...), layout)``.

    >>> c = ComposedLayout(Swizzle(3, 3, 3), 0, Layout((8, 64), (64, 1)))
    >>> str(c), [c(r, 0) for r in range(8)]
    ('S<3,3,3> o (8,64):(64,1)', [0, 72, 144, 216, 288, 360, 432, 504])
    """

    __slots__ = ("inner", "offset", "outer")

    # tylo.layouts.layout's functions recognize composed layouts by this marker (they sit
    # below this module and do not import it)
    is_composed = True

    def __init__(self, outer: Any, offset: Any, inner: Any) -> None:
        if not isinstance(outer, (Swizzle, Layout)):
            raise LayoutError(f"ComposedLayout: outer {outer!r} must be a Swizzle or a Layout")
        if not isinstance(inner, Layout):
            raise LayoutError(f"ComposedLayout: inner {inner!r} must be a Layout")
        self.outer = outer
        self.offset = to_value(offset)
        self.inner = inner

    def with_inner(self, inner: Any) -> ComposedLayout:
        """The same outer function and offset over another inner layout."""
        return ComposedLayout(self.outer, self.offset, inner)

    @property
    def shape(self) -> Any:
        return self.inner.shape

    @property
    def is_static(self) -> bool:
        outer_static = isinstance(self.outer, Swizzle) or self.outer.is_static
        return outer_static and self.inner.is_static and type(self.offset) is int

    @property
    def free_symbols(self) -> set[sympy.Symbol]:
        out = set(self.inner.free_symbols)
        if isinstance(self.outer, Layout):
            out |= self.outer.free_symbols
        if is_sympy(self.offset):
            out |= self.offset.free_symbols
        return out

    def __call__(self, *args: Any) -> Any:
        v = self.inner(*args)
        outer, offset = self.outer, self.offset
        if type(v) is int and type(offset) is int and type(outer) is Swizzle:
            # static: the common case of enumerating a swizzled shared tile
            return _apply(v + offset, outer.bits, outer.base, outer.shift)
        if self.offset != 0:
            v = (
                v + self.offset
                if type(v) is int and type(self.offset) is int
                else to_value(v + self.offset)
            )
        return self.outer(v)

    def __getitem__(self, i: int) -> ComposedLayout:
        return ComposedLayout(self.outer, self.offset, self.inner[i])

    def size(self) -> Any:
        return size(self.inner)

    def cosize(self) -> int:
        """One past the largest offset (static layouts; computed by enumeration within
        the size budget, else SizeBudgetError).

        >>> ComposedLayout(Swizzle(3, 3, 3), 0, Layout((8, 64), (64, 1))).cosize()
        512
        """
        if not self.is_static:
            raise LayoutError(
                f"cosize({self}): only static composed layouts have a computed cosize; "
                "substitute values first"
            )
        n = size(self.inner)
        check_budget(
            n,
            f"cosize({self})",
            "the cosize of a composed layout is found by enumeration; use a smaller inner "
            "layout, or the cosize of the inner layout widened by the swizzle's bits",
        )
        return _max_offset(self) + 1

    def map_values(self, fn: Callable[[Value], Value]) -> ComposedLayout:
        return ComposedLayout(self.outer.map_values(fn), fn(self.offset), self.inner.map_values(fn))

    def __eq__(self, other: object) -> bool:
        if type(other) is not ComposedLayout:
            return NotImplemented
        return (self.outer, self.offset, self.inner) == (other.outer, other.offset, other.inner)

    def __hash__(self) -> int:
        return hash((ComposedLayout, self.outer, self.offset, self.inner))

    def __str__(self) -> str:
        mid = "" if self.offset == 0 else f"{fmt(self.offset)} o "
        return f"{self.outer} o {mid}{self.inner}"

    def __repr__(self) -> str:
        return f"ComposedLayout({self.outer!r}, {self.offset!r}, {self.inner!r})"

    def _repr_svg_(self) -> str | None:
        """IPython's display hook, as ``Layout._repr_svg_``: the picture, or None."""
        from tylo import _notebook_svg

        return _notebook_svg(self)

    def __reduce__(self) -> tuple[type[ComposedLayout], tuple[Any, int, Any]]:
        return (ComposedLayout, (self.outer, self.offset, self.inner))


def _max_offset(c: ComposedLayout) -> int:
    """The largest offset of a static composed layout, by exact enumeration: in Python for
    at most :data:`SMALL_ENUMERATION` elements, else vectorized with numpy."""
    n = size(c.inner)
    if n <= SMALL_ENUMERATION:
        largest: int = max(c(i) for i in range(n))
        return largest
    return _max_offset_numpy(c)


def _max_offset_numpy(c: ComposedLayout) -> int:
    """:func:`_max_offset` by vectorized exact enumeration (int64 while every
    intermediate value fits, Python ints beyond)."""
    import numpy as np

    fs, fd = c.inner.flat()
    bound = abs(c.offset) + sum((e - 1) * abs(d) for e, d in zip(fs, fd))
    bound += max(abs(d) for d in fd)  # every stride must fit too (even of an extent-1 mode)
    if isinstance(c.outer, Swizzle):
        bound |= c.outer.zzz_mask | c.outer.yyy_mask
        bound *= 2
    else:
        ofs, ofd = c.outer.flat()
        bound = (bound + 1) * sum(abs(d) for d in ofd) + sum(abs(d) * e for e, d in zip(ofs, ofd))
    dt: Any = np.int64 if bound < INT64_SAFE else object
    x = np.zeros(1, dtype=dt)
    for e, d in zip(fs, fd):
        x = (np.arange(e).astype(dt) * d)[:, None] + x[None, :]
        x = x.reshape(-1)
    x = x + c.offset
    outer = c.outer
    if isinstance(outer, Swizzle):
        y = x & outer.yyy_mask
        x = x ^ (y >> outer.shift if outer.shift >= 0 else y << -outer.shift)
    else:
        ofs, ofd = outer.flat()
        r = np.zeros_like(x)
        for i, (e, d) in enumerate(zip(ofs, ofd)):
            if i == len(ofs) - 1:
                r = r + x * d
            else:
                r = r + (x % e) * d
                x = x // e
        x = r
    return int(x.max())


def __getattr__(name: str) -> Any:
    # SwizzleXor is a sympy function class: sympy is imported when it is first named
    if name == "SwizzleXor":
        return _xor.SwizzleXor
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
