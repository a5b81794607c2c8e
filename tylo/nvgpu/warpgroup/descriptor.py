"""Shared-memory matrix descriptors for ``wgmma``, derived from the tile's layout and checked
against the hardware's canonical layout at every element.

A ``wgmma.mma_async`` reads its shared operands through a 64-bit *matrix descriptor* (PTX ISA
9.7.15.5.1.2, "Matrix Descriptor Format"): the start address, a leading- and a stride-dimension
byte offset (LBO, SBO) and a swizzle mode. Together they name one *canonical layout* (PTX ISA
9.7.15.5.1.1, "Shared Memory Matrix Layout") of the operand's (rows, 16) k-step, rows = M for
A and N for B. In element offsets, with ``T = 16 / sizeof(element)`` (8 for bf16/f16) and the
byte swizzle ``S<b,4,3>`` written on element offsets as ``S<b, 4 - log2(sizeof), 3>``::

    K-major  (k contiguous)      none  ((8,m),(T,2)):((T,SBO),(1,LBO))
                                 32B   S<1> o ((8,m),(T,2)):((2T,SBO),(1,T))
                                 64B   S<2> o ((8,m),(T,2)):((4T,SBO),(1,T))
                                 128B  S<3> o ((8,m),(T,2)):((8T,SBO),(1,T))
    MN-major (rows contiguous)   none  ((T,m),(8,2)):((1,SBO),(T,LBO))
                                 32B   S<1> o ((2T,m),(8,2)):((1,LBO),(2T,SBO))
                                 64B   S<2> o ((4T,m),(8,2)):((1,LBO),(4T,SBO))
                                 128B  S<3> o ((8T,m),(8,2)):((1,LBO),(8T,SBO))

The hardware adds the linear part to the start address and then swizzles the *absolute* byte
address, so a swizzled tile must start on a multiple of its swizzle's period (8 rows of 32, 64
or 128 bytes: 256, 512 or 1024 bytes), and a k-step inside a wider swizzled row (k = 16, 32,
48 of a 64-wide bf16 row) starts at the *unswizzled* offset of its first element.

:func:`derive_descriptor` reads LBO and SBO off the tile's layout, rebuilds the canonical layout
from them and compares the two at every element of the k-step (an exact check: both are static).
A tile that matches no canonical form is refused with, for each form, the reason.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tylo import dtypes as dt
from tylo.errors import TyloError
from tylo.layouts import ComposedLayout, Layout, Swizzle
from tylo.nvgpu.errors import PlanError, TileBoundsError, as_int

__all__ = [
    "SWIZZLES",
    "MatrixDescriptor",
    "canonical_layout",
    "derive_descriptor",
    "swizzle_period_bytes",
]

# swizzle mode -> (bytes per swizzled row, descriptor code in bits 62-63; PTX ISA 9.7.15.5.1.2)
SWIZZLES: dict[str, tuple[int, int]] = {
    "none": (16, 0),
    "32B": (32, 3),
    "64B": (64, 2),
    "128B": (128, 1),
}
_SWIZZLE_BITS = {"32B": 1, "64B": 2, "128B": 3}
K_STEP = 16  # wgmma's K for 16-bit inputs (m64nNk16)

# a tile's (row, k) coordinate to its layout's own coordinate (the identity for a whole tile)
CoordinateMap = Callable[[tuple[int, int]], tuple[Any, ...]]
_FIELD_LIMIT = 1 << 18  # 14-bit fields of bytes >> 4


def _swizzle_name(swizzle: Any, what: str) -> str:
    if type(swizzle) is not str or swizzle not in SWIZZLES:
        raise PlanError(f"{what}: swizzle must be one of {list(SWIZZLES)}, got {swizzle!r}")
    return swizzle


def swizzle_period_bytes(swizzle: str) -> int:
    """The alignment a tile with this swizzle must start on: 8 rows of the swizzled width
    (16 bytes for no swizzle, the descriptor's own granularity)."""
    width, _ = SWIZZLES[_swizzle_name(swizzle, "swizzle_period_bytes")]
    return 16 if swizzle == "none" else 8 * width


def _elem_swizzle(swizzle: str, nbytes: int) -> Swizzle | None:
    """The byte swizzle ``S<b,4,3>`` of this mode, acting on element offsets."""
    if swizzle == "none":
        return None
    return Swizzle(_SWIZZLE_BITS[swizzle], 4 - (nbytes.bit_length() - 1), 3)


def canonical_layout(
    major: str, swizzle: str, dtype: Any, rows: int, lbo: int, sbo: int
) -> Layout | ComposedLayout:
    """The hardware's canonical layout of one (rows, 16) k-step, in element offsets from the
    (unswizzled) start address, for descriptor fields ``lbo`` and ``sbo`` given in *elements*
    (the module docstring's table).

    >>> str(canonical_layout("K", "128B", dt.bf16, 64, 0, 512))
    'S<3,3,3> o ((8,8),(8,2)):((64,512),(1,8))'
    """
    what = "canonical_layout"
    swizzle = _swizzle_name(swizzle, what)
    try:
        d = dt.dtype_of(dtype)
    except TyloError as err:
        raise PlanError(f"{what}: {err}") from None
    if d.nbytes not in (1, 2, 4):
        raise PlanError(f"{what}: wgmma operands are 8, 16 or 32-bit elements, got {d}")
    t = 16 // d.nbytes
    ints = [as_int(v) for v in (rows, lbo, sbo)]
    if any(v is None for v in ints) or ints[0] < 1:  # type: ignore[operator]
        raise PlanError(
            f"{what}: rows (positive), lbo and sbo must be ints, got {rows!r}, {lbo!r}, {sbo!r}"
        )
    rows, lbo, sbo = ints  # type: ignore[assignment]
    if major == "K":
        if rows % 8:
            raise PlanError(f"wgmma K-major operand: {rows} rows is not a multiple of 8")
        m = rows // 8
        if swizzle == "none":
            inner = Layout(((8, m), (t, 2)), ((t, sbo), (1, lbo)))
        else:
            x = SWIZZLES[swizzle][0] // 16
            inner = Layout(((8, m), (t, 2)), ((x * t, sbo), (1, t)))
    elif major == "MN":
        if swizzle == "none":
            if rows % t:
                raise PlanError(f"wgmma MN-major operand: {rows} rows is not a multiple of {t}")
            inner = Layout(((t, rows // t), (8, 2)), ((1, sbo), (t, lbo)))
        else:
            x = SWIZZLES[swizzle][0] // 16
            if rows % (x * t):
                raise PlanError(
                    f"wgmma MN-major operand with the {swizzle} swizzle: {rows} rows is not a "
                    f"multiple of {x * t}"
                )
            inner = Layout(((x * t, rows // (x * t)), (8, 2)), ((1, lbo), (x * t, sbo)))
    else:
        raise PlanError(f"wgmma operand: major must be 'K' or 'MN', got {major!r}")
    s = _elem_swizzle(swizzle, d.nbytes)
    return inner if s is None else ComposedLayout(s, 0, inner)


@dataclass(frozen=True)
class MatrixDescriptor:
    """The static fields of one operand's descriptor: ``major`` ('K' or 'MN'), ``swizzle``
    ('none', '32B', '64B', '128B'), ``lbo`` and ``sbo`` in bytes, ``start`` (the k-step's
    unswizzled element offset inside the tile) and ``align`` (the byte alignment the tile's
    start must have). :meth:`encode` packs the 64-bit value for a start address."""

    major: str
    swizzle: str
    lbo: int
    sbo: int
    start: int
    align: int

    def __post_init__(self) -> None:
        what = "MatrixDescriptor"
        if self.major not in ("K", "MN") or type(self.major) is not str:
            raise PlanError(f"{what}: major must be 'K' or 'MN', got {self.major!r}")
        _swizzle_name(self.swizzle, what)
        for name in ("lbo", "sbo", "start", "align"):
            v = as_int(getattr(self, name))
            if v is None or not 0 <= v < 1 << 62:
                raise PlanError(f"{what}: {name} must be a non-negative int, got {v!r}")
            object.__setattr__(self, name, v)

    @property
    def code(self) -> int:
        return SWIZZLES[self.swizzle][1]

    @property
    def high_bits(self) -> int:
        """Every field but the start address (bits 16-63)."""
        return ((self.lbo >> 4) << 16) | ((self.sbo >> 4) << 32) | (self.code << 62)

    def encode(self, address: int) -> int:
        """The descriptor for a tile whose k-step starts at shared byte ``address``."""
        a = as_int(address)
        if a is None or a % 16 or not 0 <= a < _FIELD_LIMIT:
            raise PlanError(
                f"wgmma descriptor: start address {address} must be a multiple of 16 below "
                f"{_FIELD_LIMIT} (shared memory)"
            )
        return self.high_bits | (a >> 4)

    @property
    def transposed(self) -> int:
        """wgmma's imm-trans operand: 0 for K-major, 1 for MN-major."""
        return 0 if self.major == "K" else 1


def _split(layout: Any) -> tuple[Swizzle | None, int, Any]:
    if isinstance(layout, ComposedLayout):
        if not isinstance(layout.outer, Swizzle):
            raise PlanError(f"wgmma operand: {layout} is not a swizzle over a layout")
        return layout.outer, layout.offset, layout.inner
    if isinstance(layout, Layout):
        return None, 0, layout
    raise PlanError(f"wgmma operand: expected a Layout or ComposedLayout, got {layout!r}")


def _same_swizzle(a: Swizzle | None, b: Swizzle | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return (a.bits, a.base, a.shift) == (b.bits, b.base, b.shift)


def _fields(
    major: str, swizzle: str, pre: Callable[[int, int], int], t: int, rows: int
) -> tuple[int, int]:
    """(lbo, sbo) in elements, read off the tile (coordinates relative to the k-step)."""
    x = SWIZZLES[swizzle][0] // 16

    def at(r: int, k: int) -> int:  # a local offset reader
        return pre(r, k) - pre(0, 0)

    if major == "K":
        sbo = at(8, 0) if rows > 8 else 8 * x * t
        lbo = at(0, t) if swizzle == "none" else t  # unused when swizzled: 16 bytes
    elif swizzle == "none":
        sbo = at(t, 0) if rows > t else 8 * t
        lbo = at(0, 8)
    else:
        lbo = at(x * t, 0) if rows > x * t else 8 * x * t
        sbo = at(0, 8)
    return lbo, sbo


def derive_descriptor(
    layout: Any,
    dtype: Any,
    rows: int,
    *,
    k_offset: int = 0,
    coordinate: CoordinateMap | None = None,
    what: str = "wgmma operand",
    extents: tuple[int, ...] | None = None,
) -> MatrixDescriptor:
    """The descriptor that reads the (rows, 16) k-step at column ``k_offset`` of an operand
    tile with this static ``layout`` (coordinates ``(row, k)``; ``coordinate`` maps them to
    the layout's own when the tile is a window), checked equal to the canonical layout at every
    element. Raises :class:`PlanError` naming, for each canonical form, why it does not match.

    Bounds: the k-step, rows ``0..rows-1`` by columns ``k_offset..k_offset+15``, must lie
    inside the tile's ``extents`` (default: the layout's domain, ``layout_extents``), and
    every coordinate it maps to inside the layout's domain; otherwise
    :class:`~tylo.nvgpu.errors.TileBoundsError` names the k-step, the extents and the offset
    (a 64 x 64 tile has no k-step at ``k_offset=64``: its layout's linear extension there
    is other memory).

    Defining property: for every ``(r, k)`` of the k-step, the tile's offset equals
    ``S(start + canonical_linear(r, k))`` with the returned fields.

    >>> from tylo.layouts import composition
    >>> d = derive_descriptor(composition(Swizzle(3, 3, 3), Layout((64, 64), (64, 1))), dt.bf16, 64)
    >>> (d.major, d.swizzle, d.lbo, d.sbo, d.align)
    ('K', '128B', 16, 1024, 1024)
    """
    if type(what) is not str:
        raise PlanError(f"derive_descriptor: what must be a str, got {what!r}")
    try:
        d = dt.dtype_of(dtype)
    except TyloError as err:
        raise PlanError(f"{what}: {err}") from None
    if d.nbytes != 2:
        raise PlanError(f"{what}: wgmma k16 operands are 16-bit (bf16, f16), got {d}")
    r, k = as_int(rows), as_int(k_offset)
    if r is None or not 8 <= r <= 256:
        raise PlanError(f"{what}: rows must be an int in [8, 256], got {rows!r}")
    if k is None or k < 0 or k % K_STEP or k >= 1 << 31:
        raise PlanError(
            f"{what}: k_offset must be a non-negative multiple of {K_STEP}, got {k_offset!r}"
        )
    rows, k_offset = r, k
    if coordinate is not None and not callable(coordinate):
        raise PlanError(f"{what}: coordinate must be callable, got {coordinate!r}")
    if extents is not None:
        ext = tuple(as_int(e) for e in extents) if isinstance(extents, (tuple, list)) else ()
        checked = tuple(e for e in ext if e is not None and e >= 0)
        if len(ext) != 2 or len(checked) != 2:
            raise PlanError(f"{what}: extents must be two non-negative ints, got {extents!r}")
        extents = checked
    from tylo.nvgpu.bounds import layout_extents

    if not isinstance(layout, (Layout, ComposedLayout)) or not layout.is_static:
        raise PlanError(f"{what}: the shared layout must be a static Layout, got {layout!r}")
    swz, off, inner = _split(layout)
    coord: CoordinateMap = coordinate or (lambda c: c)
    if coordinate is None and extents is None:
        extents = layout_extents(layout)
    _check_bounds(layout, rows, k_offset, coord, what, extents)
    return _derive(swz, off, inner, d, rows, k_offset, coord, what, str(layout))


def _check_bounds(
    layout: Any, rows: int, k_offset: int, coord: CoordinateMap, what: str, extents: Any
) -> None:
    """The k-step lies inside ``extents`` (the tile's) and maps inside the layout's domain."""
    from tylo.nvgpu.bounds import layout_extents, region_text

    domain = layout_extents(layout)
    region = ((0, rows), (k_offset, k_offset + K_STEP))
    step = f"the {rows} x {K_STEP} k-step at k_offset {k_offset} ({region_text(region)})"
    if extents is not None:
        ext = tuple(extents)
        if len(ext) != 2 or rows > ext[0] or k_offset + K_STEP > ext[1]:
            raise TileBoundsError(
                f"{what}: {step} does not lie inside the tile, whose extents are {ext} "
                f"({layout}); the instruction needs at least {rows} rows and "
                f"{k_offset + K_STEP} columns"
            )
    for r in range(rows):
        for k in range(k_offset, k_offset + K_STEP):
            c = tuple(coord((r, k)))
            if len(c) != len(domain) or any(
                type(x) is not int or not 0 <= x < e for x, e in zip(c, domain)
            ):
                raise TileBoundsError(
                    f"{what}: {step} reaches element ({r}, {k}) at the layout's coordinate "
                    f"{c}, outside the domain of {layout} (extents {domain}); the "
                    f"instruction needs at least {rows} rows and {k_offset + K_STEP} columns"
                )


def _derive(
    swz: Swizzle | None,
    off: int,
    inner: Any,
    d: dt.DType,
    rows: int,
    k_offset: int,
    coord: CoordinateMap,
    what: str,
    text: str,
) -> MatrixDescriptor:
    t = 16 // d.nbytes

    @functools.cache
    def pre(r: int, k: int) -> int:
        c = coord((r, k + k_offset))
        return int(off + (inner(*c) if len(c) > 1 else inner(c[0])))

    start = pre(0, 0)
    reasons: list[str] = []
    for major in ("K", "MN"):
        for swizzle in SWIZZLES:
            want = _elem_swizzle(swizzle, d.nbytes)
            if not _same_swizzle(swz, want):
                have = "no swizzle" if swz is None else f"S<{swz.bits},{swz.base},{swz.shift}>"
                reasons.append(f"{major}-major {swizzle}: the tile has {have}")
                continue
            try:
                lbo, sbo = _fields(major, swizzle, pre, t, rows)
                canon = canonical_layout(major, swizzle, d, rows, lbo, sbo)
            except PlanError as err:
                reasons.append(f"{major}-major {swizzle}: {err}")
                continue
            lin = canon.inner if isinstance(canon, ComposedLayout) else canon
            bad = _first_mismatch(pre, lin, rows, start)
            if bad is not None:
                r, k, got, exp = bad
                reasons.append(
                    f"{major}-major {swizzle} (LBO {lbo}, SBO {sbo} elements): element "
                    f"({r}, {k}) is at {got}, the canonical layout puts it at {exp}"
                )
                continue
            problem = _field_problem(start, lbo, sbo, d.nbytes)
            if problem:
                reasons.append(f"{major}-major {swizzle}: {problem}")
                continue
            return MatrixDescriptor(
                major, swizzle, lbo * d.nbytes, sbo * d.nbytes, start, swizzle_period_bytes(swizzle)
            )
    raise PlanError(
        f"{what}: the k-step at k = {k_offset} of {text} ({rows} x {K_STEP} {d}) matches no "
        "wgmma canonical layout (PTX ISA 9.7.15.5.1.1):\n  " + "\n  ".join(reasons)
    )


def _first_mismatch(
    pre: Callable[[int, int], int], lin: Layout, rows: int, start: int
) -> tuple[int, int, int, Any] | None:
    for k in range(K_STEP):
        for r in range(rows):
            got = pre(r, k) - start
            exp = lin(r, k)
            if got != exp:
                return r, k, got, exp
    return None


def _field_problem(start: int, lbo: int, sbo: int, nbytes: int) -> str | None:
    for name, v in (("the k-step's start", start), ("LBO", lbo), ("SBO", sbo)):
        b = v * nbytes
        if b % 16 or not 0 <= b < _FIELD_LIMIT:
            return (
                f"{name} is {b} bytes; the descriptor needs a multiple of 16 in [0, {_FIELD_LIMIT})"
            )
    return None
