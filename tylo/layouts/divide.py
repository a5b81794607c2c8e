"""Division of a layout by a tiler: logical, zipped, tiled and flat divides.

``logical_divide(A, B) == composition(A, make_layout(B, complement(B, size(A))))``:
mode 0 is A restricted to the tile B; mode 1 enumerates the tiles. A tuple tiler applies
by mode. The zipped, tiled and flat variants only regroup the same modes.
"""

from __future__ import annotations

from typing import Any

from tylo.layouts._depth import check_depth
from tylo.layouts.algebra import complement
from tylo.layouts.compose import by_mode, composition
from tylo.layouts.errors import ComplementError, LayoutError, ShapeError
from tylo.layouts.layout import Layout, _as_layout, make_layout, size
from tylo.layouts.swizzle import ComposedLayout

__all__ = ["flat_divide", "logical_divide", "tiled_divide", "unzip_modes", "zipped_divide"]


def _modes(x: Any) -> list[Layout]:
    if type(x.shape) is tuple:
        return [x[i] for i in range(len(x.shape))]
    return [x]


def _tiler_layout(b: object, op: str) -> Layout | ComposedLayout:
    if isinstance(b, Layout):
        return b
    got: Layout | ComposedLayout = _as_layout(b, op)
    return got


def logical_divide(a: Any, tiler: Any) -> Any:
    """Split ``a`` into (tile, rest): ``composition(a, make_layout(B, complement(B,
    size(a))))``. Defining property: mode 0 of the result equals ``composition(a, B)``.
    A tuple tiler divides mode by mode (``None`` keeps a mode). As in CuTe the number of
    tiles is ``ceil(size(a) / reach)``, also for symbolic sizes: ``logical_divide(N:1,
    32:1)`` is ``(32,ceiling(N/32)):(1,32)``, whatever N is.

    >>> str(logical_divide(Layout((4, 2, 3), (2, 1, 8)), Layout(4, 2)))
    '((2,2),(2,3)):((4,1),(2,8))'
    >>> str(logical_divide(Layout(1000), 128))
    '(128,8):(1,128)'
    >>> from tylo.layouts.symbolic import dim
    >>> str(logical_divide(Layout(dim("N")), 32))
    '(32,ceiling(N/32)):(1,32)'
    """
    if tiler is None:
        return a
    if isinstance(a, ComposedLayout):
        return ComposedLayout(a.outer, a.offset, logical_divide(a.inner, tiler))
    if type(a) is not Layout:
        a = _as_layout(a, "logical_divide")
    if type(tiler) is tuple:
        return _by_mode(logical_divide, "logical_divide", a, tiler)
    if type(tiler) is int and tiler < 1:
        raise ShapeError(
            f"logical_divide({a}, {tiler}): the tile size must be a positive int, got "
            f"{tiler}; a tile holds at least one element"
        )
    b = Layout._make(tiler, 1) if type(tiler) is int else _tiler_layout(tiler, "logical_divide")
    try:
        if not isinstance(b, Layout):
            raise ComplementError(f"complement({b}, ...): a composed layout has no complement")
        c = complement(b, size(a))
        return composition(a, Layout._make((b.shape, c.shape), (b.stride, c.stride)))
    except LayoutError as e:
        raise e.within(f"logical_divide({a}, {b})") from None


def _by_mode(fn: Any, op: str, a: Layout, tiler: tuple[Any, ...]) -> Layout:
    return by_mode(fn, op, a, tiler)


def unzip_modes(fn: Any, a: Any, tiler: Any) -> Any:
    """Apply a rank-2 splitter ``fn`` (logical_divide or logical_product) by mode and
    gather the results into ``((tiles...), (rests..., untouched modes...))``."""
    check_depth(tiler, "the tiler", getattr(fn, "__name__", "unzip_modes"))
    if isinstance(a, ComposedLayout):
        return ComposedLayout(a.outer, a.offset, unzip_modes(fn, a.inner, tiler))
    a = _as_layout(a, "zipped")
    if tiler is None:
        return make_layout(Layout._make(1, 0), a)
    if type(tiler) is not tuple:
        return fn(a, tiler)
    modes = _modes(a)
    if len(tiler) > len(modes):
        raise ShapeError(
            f"{fn.__name__}({a}, {tiler}): the tiler has {len(tiler)} modes but the layout "
            f"only {len(modes)}; give at most one tiler entry per mode"
        )
    split = [unzip_modes(fn, modes[i], t) for i, t in enumerate(tiler)]
    tiles = [s[0] for s in split]
    rests = [s[1] for s in split] + modes[len(tiler) :]
    return make_layout(_group(tiles), _group(rests))


def _group(layouts: list[Layout]) -> Layout:
    if len(layouts) == 1:
        return layouts[0]
    return make_layout(*layouts)


def zipped_divide(a: Any, tiler: Any) -> Any:
    """``logical_divide`` with the tile modes gathered in mode 0 and the rest in mode 1:
    ``((tile...), (rest...))``.

    >>> str(zipped_divide(Layout((6, 8), (8, 1)), (3, 4)))
    '((3,4),(2,2)):((8,1),(24,4))'
    """
    return unzip_modes(logical_divide, a, tiler)


def _split_rest(z: Any) -> Any:
    if isinstance(z, ComposedLayout):
        return z.outer, z.offset, z.inner
    return None, 0, z


def _wrap(outer: Any, offset: Any, inner: Layout) -> Any:
    return inner if outer is None else ComposedLayout(outer, offset, inner)


def tiled_divide(a: Any, tiler: Any) -> Any:
    """``zipped_divide`` with the rest modes unpacked: ``((tile...), rest0, rest1, ...)``.

    >>> str(tiled_divide(Layout((6, 8), (8, 1)), (3, 4)))
    '((3,4),2,2):((8,1),24,4)'
    """
    outer, off, z = _split_rest(zipped_divide(a, tiler))
    return _wrap(outer, off, make_layout(z[0], *_modes(z[1])))


def flat_divide(a: Any, tiler: Any) -> Any:
    """``zipped_divide`` with both modes unpacked: ``(tile0, tile1, ..., rest0, ...)``.

    >>> str(flat_divide(Layout((6, 8), (8, 1)), (3, 4)))
    '(3,4,2,2):(8,1,24,4)'
    """
    outer, off, z = _split_rest(zipped_divide(a, tiler))
    return _wrap(outer, off, make_layout(*_modes(z[0]), *_modes(z[1])))
