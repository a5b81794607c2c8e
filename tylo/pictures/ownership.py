"""Pictures of thread-value layouts, fragment ownerships and MMA operands: ``T0V1`` cells.

A TV layout maps ``(thread, value)`` to the column-major index of a tile element (the
convention of :mod:`tylo.layouts.tv`). The picture is the tile: the element of index
``i`` is drawn in row ``i % rows``, column ``i // rows`` (``rows`` is the tile's first
extent; a rank-1 tile is one row), labelled ``T{thread}V{value}`` with the first holder
(in thread, then value order) and filled with ``index_colour(thread)``, as CuTe's printed
TV pictures. A replicated element lists every holder in ``data-owners`` and its label
adds ``+k`` for the ``k`` other holders; an element no thread holds is left white.
"""

from __future__ import annotations

from math import prod
from typing import Any

from tylo.layouts import Layout, size
from tylo.pictures.errors import PictureError
from tylo.pictures.layouts import MAX_CELLS
from tylo.pictures.svg import EMPTY, Cell, Panel, index_colour, render

__all__ = ["mma_svg", "ownership_svg", "tv_owner_table", "tv_svg"]


def _static_shape(tile_shape: Any, what: str) -> tuple[int, ...]:
    shape = tile_shape if isinstance(tile_shape, tuple) else (tile_shape,)
    flat: list[int] = []
    for s in shape:
        n = size(s) if isinstance(s, tuple) else s
        if type(n) is not int or n < 1:
            raise PictureError(
                f"{what}: the tile shape {tile_shape!r} must be static positive ints, got {s!r}"
            )
        flat.append(n)
    return tuple(flat)


def tv_owner_table(
    tv: object, tile_shape: Any, *, what: str = "tv_svg"
) -> dict[int, list[tuple[int, int]]]:
    """Every tile index held by ``tv``, mapped to its holders ``[(thread, value), ...]``
    in thread-then-value order. Refuses (PictureError) a layout that is not a static
    rank-2 Layout, and an index outside the tile."""
    if not isinstance(tv, Layout) or type(tv.shape) is not tuple or len(tv.shape) != 2:
        raise PictureError(
            f"{what}: expected a (thread, value) Layout of rank 2, got {type(tv).__name__} {tv}"
        )
    if not tv.is_static:
        raise PictureError(
            f"{what}: {tv} is symbolic; substitute values first (tylo.layouts.substitute)"
        )
    n = prod(_static_shape(tile_shape, what))
    threads, values = size(tv[0]), size(tv[1])
    if threads * values > MAX_CELLS or n > MAX_CELLS:
        raise PictureError(
            f"{what}: {tv} over {tile_shape} has {threads * values} (thread, value) pairs "
            f"and {n} elements, more than the {MAX_CELLS} a picture shows; draw one atom"
        )
    owners: dict[int, list[tuple[int, int]]] = {}
    for t in range(threads):
        for v in range(values):
            i = int(tv(t, v))
            if not 0 <= i < n:
                raise PictureError(
                    f"{what}: {tv} maps thread {t}, value {v} to index {i}, outside the "
                    f"tile {tile_shape} of {n} elements; check the tile shape"
                )
            owners.setdefault(i, []).append((t, v))
    return owners


def _tv_panel(tv: Any, tile_shape: Any, title: str, what: str) -> Panel:
    owners = tv_owner_table(tv, tile_shape, what=what)
    flat = _static_shape(tile_shape, what)
    rows = flat[0] if len(flat) >= 2 else 1
    n = prod(flat)
    cells = []
    for i in range(n):
        held = owners.get(i, [])
        data = {"index": str(i), "owners": " ".join(f"T{t}V{v}" for t, v in held)}
        if held:
            t, v = held[0]
            label = f"T{t}V{v}" + (f"+{len(held) - 1}" if len(held) > 1 else "")
            data.update(thread=str(t), value=str(v))
            cells.append(Cell(i % rows, i // rows, label, index_colour(t), data))
        else:
            cells.append(Cell(i % rows, i // rows, "", EMPTY, data))
    return Panel(title, rows, n // rows, cells, {"tv": str(tv)})


def tv_svg(tv: Any, tile_shape: Any, *, title: str | None = None) -> str:
    """An SVG picture of a thread-value layout over a tile: the cell of tile index ``i``
    is labelled ``T{t}V{v}`` where ``tv(t, v) == i`` (the first such pair; see the module
    docstring for replicated and unheld elements).

    >>> from tylo.layouts.tv import MMA_M16N8K16_C_TV
    >>> svg = tv_svg(MMA_M16N8K16_C_TV, (16, 8))
    >>> svg.count('class="cell"'), ">T5V2<" in svg
    (128, True)
    """
    return render([_tv_panel(tv, tile_shape, title or f"{tv} over {tile_shape}", "tv_svg")])


def _check_ownership(own: Any, what: str) -> None:
    if not (hasattr(own, "tv") and hasattr(own, "shape")):
        raise PictureError(
            f"{what}: expected a tylo.tile.ownership.Ownership (with .tv and .shape), got "
            f"{type(own).__name__}"
        )


def ownership_svg(own: Any, *, title: str | None = None) -> str:
    """An SVG picture of a fragment ownership (:class:`tylo.tile.ownership.Ownership`): the
    :func:`tv_svg` of ``own.tv`` over ``own.shape``, titled with its name."""
    _check_ownership(own, "ownership_svg")
    name = title or getattr(own, "label", "") or f"{own.tv} over {own.shape}"
    return render([_tv_panel(own.tv, own.shape, name, "ownership_svg")])


def mma_svg(atom: Any, *, title: str | None = None) -> str:
    """An SVG picture of an MMA atom's three operand ownerships side by side: A over
    (M, K), B over (N, K) and C over (M, N), each as :func:`ownership_svg` draws it.
    ``atom`` is anything with ownerships ``.a``, ``.b`` and ``.c``
    (``tylo.nvgpu.warp.mma.MMAAtom``).
    """
    panels = []
    for part, axes in (("a", "M x K"), ("b", "N x K"), ("c", "M x N")):
        own = getattr(atom, part, None)
        if own is None:
            raise PictureError(
                f"mma_svg: expected an MMA atom with ownerships .a, .b and .c "
                f"(tylo.nvgpu.warp.mma.MMAAtom), got {type(atom).__name__} without .{part}"
            )
        _check_ownership(own, "mma_svg")
        name = f"{part.upper()} ({axes})"
        panel = _tv_panel(own.tv, own.shape, name, "mma_svg")
        panels.append(Panel(panel.title, panel.rows, panel.cols, panel.cells, {"operand": part}))
    caption = title or getattr(atom, "instruction", "") or type(atom).__name__
    return render(panels, caption)
