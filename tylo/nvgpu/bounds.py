"""Proofs that an instruction touches only the shared tile it names.

Every shared-memory instruction of :mod:`tylo.nvgpu` (``wgmma`` operand reads, ``ldmatrix``,
``stmatrix``, the ``cp.async`` destination, TMA loads and stores) names a
:class:`~tylo.tile.views.SharedTile` and touches a box of its coordinates: the *region*, one
half-open range ``[lo, hi)`` per axis of the view. Before anything is emitted,
:func:`check_region` proves three inclusions, each exact (the layouts are static):

1. the region lies inside the view's extents (``tile.shape``): a ``wgmma`` m64n128k16 whose B
   tile has 64 rows, or a k-step at ``k_offset + 16 > K``, is refused here;
2. the view, where the region lies, lies inside its layout's domain (a window or a selection
   past the layout's last row would read the layout's linear extension, which is some other
   element, or none);
3. the layout's offsets over the region, plus the tile's base, lie inside the shared
   allocation (``tylo.shared`` / ``tylo.dynamic_shared`` record how many elements they
   hold), for a static base exactly.

Anything else raises :class:`~tylo.nvgpu.errors.TileBoundsError` naming the instruction, the
region, the extents and the offset. A *runtime* base (a pipeline stage's offset, a consumer
warpgroup's rows) is bounded with the facts in force, and where those say nothing, only by
its integer type; so it is treated as every shared access with a runtime offset is
(:class:`tylo.kernel.memory.Tensor`): refused where every base in its range puts part of the
region outside the allocation, and otherwise checked at run time with
``TYLO_DEBUG_BOUNDS=1``.
"""

from __future__ import annotations

import functools
import itertools
import numbers
from typing import Any

from tylo.nvgpu.errors import TileBoundsError

# shared memory per CTA is at most 227 KiB (CUDA C++ Programming Guide, compute capability
# 9.0); a region larger than 256 KiB cannot be inside any allocation
SHARED_LIMIT = 256 * 1024

__all__ = ["check_region", "layout_extents", "region_text", "view_extents"]


def layout_extents(layout: Any) -> tuple[int, ...]:
    """The number of coordinates of each top-level mode of a static layout: its domain.

    >>> from tylo.layouts import Layout
    >>> layout_extents(Layout(((8, 2), 64), ((64, 512), 1)))
    (16, 64)
    """
    from tylo.layouts import ComposedLayout, Layout, size

    if not isinstance(layout, (Layout, ComposedLayout)) or not layout.is_static:
        raise TileBoundsError(f"layout_extents: expected a static layout, got {layout!r}")
    shape = layout.shape
    modes = shape if type(shape) is tuple else (shape,)
    return tuple(int(size(m)) for m in modes)


def view_extents(tile: Any) -> tuple[int, ...]:
    """The number of coordinates along each axis of a view (a nested mode counts its
    size), where static; a runtime extent stays as it is."""
    from tylo.layouts import size
    from tylo.tile.views import GlobalTile, SharedTile

    if not isinstance(tile, (SharedTile, GlobalTile)):
        raise TileBoundsError(f"view_extents: expected a tile view, got {tile!r}")
    out = []
    for e in tile.shape:
        n = size(e) if type(e) is tuple else e
        out.append(_int(n))
    return tuple(out)


def region_text(region: tuple[tuple[int, int], ...]) -> str:
    """``rows 0..63 x columns 16..31`` for a 2-D region, ``axis i lo..hi-1 x ...``
    otherwise."""
    region = _region(region, "region_text")
    names = ("rows", "columns") if len(region) == 2 else None
    parts = []
    for i, (lo, hi) in enumerate(region):
        span = f"{lo}..{hi - 1}" if hi > lo else "(none)"
        parts.append(f"{names[i]} {span}" if names else f"axis {i} {span}")
    return " x ".join(parts)


def _region(region: Any, what: str) -> tuple[tuple[int, int], ...]:
    """``region`` checked: a non-empty tuple of ``(lo, hi)`` int pairs."""
    from tylo.nvgpu.errors import as_int

    out = []
    if isinstance(region, (tuple, list)) and region:
        for r in region:
            pair = tuple(as_int(v) for v in r) if isinstance(r, (tuple, list)) else ()
            if len(pair) != 2 or None in pair:
                break
            out.append(pair)
        else:
            return tuple(out)  # type: ignore[arg-type]
    raise TileBoundsError(f"{what}: a region is a tuple of (lo, hi) int pairs, got {region!r}")


def _static(x: Any) -> bool:
    return type(x) is int


def _int(x: Any) -> Any:
    """``x`` as an int where it is a static integer (a sympy Integer, a numpy integer)."""
    if type(x) is int:
        return x
    if getattr(x, "is_Integer", False) or isinstance(x, numbers.Integral):
        return int(x)
    return x


@functools.lru_cache(maxsize=512)
def _offset_range(
    layout: Any,
    modes: tuple[int, ...],
    origin: tuple[int, ...],
    region: tuple[tuple[int, int], ...],
) -> tuple[int, int]:
    """(min, max) of the layout's offsets over the region of the view (static origin)."""
    rank = len(layout_extents(layout))
    lo = hi = None
    for c in itertools.product(*(range(a, b) for a, b in region)):
        full = [0] * rank
        for i, m in enumerate(modes):
            full[m] = origin[i] + c[i]
        v = int(layout(*full) if rank > 1 else layout(full[0]))
        lo = v if lo is None or v < lo else lo
        hi = v if hi is None or v > hi else hi
    assert lo is not None and hi is not None  # a region is never empty here
    return lo, hi


@functools.lru_cache(maxsize=256)
def _domain_range(layout: Any) -> tuple[int, int]:
    ext = layout_extents(layout)
    return _offset_range(
        layout, tuple(range(len(ext))), (0,) * len(ext), tuple((0, e) for e in ext)
    )


def _bounds(x: Any) -> tuple[Any, Any]:
    if _static(x):
        return x, x
    from tylo.kernel.context import current
    from tylo.kernel.lower import bounds

    return bounds(current(), x)


def check_region(
    op: str, tile: Any, region: tuple[tuple[int, int], ...], *, access: str = "touches"
) -> None:
    """Prove that instruction ``op``, which ``access``-es (``"reads"``, ``"writes"``) the
    ``region`` of shared view ``tile`` (per axis ``(lo, hi)``, half open), stays inside the
    view, the view inside its layout's domain, and the offsets inside the allocation (the
    module docstring); :class:`TileBoundsError` naming what lies outside otherwise."""
    from tylo.tile.views import SharedTile

    if type(op) is not str or type(access) is not str:
        raise TileBoundsError(f"check_region: op and access must be strs, got {op!r}, {access!r}")
    if not isinstance(tile, SharedTile):
        raise TileBoundsError(f"{op}: the shared side must be a SharedTile, got {tile!r}")
    region = _region(region, op)
    shape = view_extents(tile)
    what = f"{op} {access} {region_text(region)} of {tile!r}"
    if len(region) != len(shape):
        raise TileBoundsError(f"{what}: the tile has rank {len(shape)}, the region {len(region)}")
    for i, ((lo, hi), e) in enumerate(zip(region, shape)):
        if not _static(e) or lo < 0 or hi > e or hi <= lo:
            raise TileBoundsError(
                f"{what}, whose extents are {shape}: axis {i} needs [{lo}, {hi}), the tile "
                f"has [0, {e}); give the instruction a tile of at least that extent"
            )
    count = 1
    for lo, hi in region:
        count *= hi - lo
    nbytes = getattr(getattr(tile, "dtype", None), "nbytes", 1)
    if count * nbytes > SHARED_LIMIT:
        raise TileBoundsError(
            f"{what}: {count} elements ({count * nbytes} bytes) are more than any CTA's shared "
            f"memory ({SHARED_LIMIT} bytes)"
        )
    ext = layout_extents(tile.layout)
    origin = tuple(_int(o) for o in tile.origin)
    static_origin = all(_static(o) for o in origin)
    for i, m in enumerate(tile.modes):
        (lo, hi), o = region[i], _int(tile.origin[i])
        olo, ohi = _bounds(o)
        if _static(o):
            bad = o + lo < 0 or o + hi > ext[m]
        else:  # a runtime origin: as a runtime base below
            bad = (olo is not None and olo + hi > ext[m]) or (ohi is not None and ohi + lo < 0)
        if bad:
            at = f"{o}" if _static(o) else f"{o} (in [{olo}, {ohi}])"
            raise TileBoundsError(
                f"{what}: the window at origin {at} along axis {i} reaches coordinate "
                f"[{olo if olo is None else olo + lo}, {ohi if ohi is None else ohi + hi}) of "
                f"mode {m} of the layout {tile.layout}, whose extents are {ext}; the window "
                "must lie inside the layout"
            )
    extent = getattr(tile.storage, "extent", None)
    if extent is None:
        return
    if static_origin:
        lo_off, hi_off = _offset_range(tile.layout, tuple(tile.modes), origin, region)
    else:
        lo_off, hi_off = _domain_range(tile.layout)
    tbase = _int(tile.base)
    blo, bhi = _bounds(tbase)
    name = getattr(tile.storage, "name", "shared memory")
    if not _static(tbase):
        # a runtime base: its range comes from the facts in force, or only from its type;
        # refused where every base in the range puts part of the region outside, otherwise
        # checked at run time in the bounds-debug mode, as every shared access with a
        # runtime offset is (tylo.kernel.memory.Tensor)
        outside = (blo is not None and blo + hi_off >= extent) or (
            bhi is not None and bhi + lo_off < 0
        )
        if not outside:
            _debug_check(tile, lo_off, hi_off, what)
            return
    elif blo + lo_off >= 0 and bhi + hi_off < extent:
        return
    base = f"{tbase}" if _static(tbase) else f"{tile.base} (in [{blo}, {bhi}])"
    raise TileBoundsError(
        f"{what}: its layout offsets {lo_off}..{hi_off} from the tile's base {base} reach "
        f"elements [{_add(blo, lo_off)}, {_add(bhi, hi_off)}] of {name}, which holds "
        f"{extent} elements (0..{extent - 1}); allocate more, or bound the base "
        "(tylo.assume, a static or modular stage index)"
    )


def _add(a: Any, b: int) -> Any:
    return None if a is None else a + b


def _debug_check(tile: Any, lo_off: int, hi_off: int, what: str) -> None:
    from tylo.kernel import debug

    if debug.enabled():
        debug.check_access(tile.storage, tile.base + lo_off, hi_off - lo_off + 1, what)
