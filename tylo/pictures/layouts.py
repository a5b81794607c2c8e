"""Pictures of layouts: cells coloured and labelled by offset, or coloured by bank.

A layout of rank >= 2 is drawn as a ``size(mode 0)`` x ``size(other modes)`` grid (CuTe's
``print_layout`` arrangement): the cell in row ``r``, column ``c`` is the layout's 1-D
(colexicographic) index ``r + rows*c``, so a nested mode is drawn flattened in the order
CuTe iterates it. A rank-1 layout is one row.
"""

from __future__ import annotations

from typing import Any

from tylo.layouts import ComposedLayout, Layout, idx2crd, rank, size
from tylo.pictures.errors import PictureError
from tylo.pictures.svg import Cell, Panel, bank_colour, index_colour, render

__all__ = ["MAX_CELLS", "bank_of", "bank_svg", "grid_of", "layout_offsets", "layout_svg"]

MAX_CELLS = 16384  # larger pictures are unreadable and slow to render
SHARED_BANKS = 32  # shared memory: 32 banks of 4 bytes (CUDA C++ Programming Guide, "Shared
BANK_BYTES = 4  # Memory" of the compute capability 5.x+ sections)


def _static_int(x: Any, what: str, subject: Any) -> int:
    try:
        return int(x)
    except TypeError:
        raise PictureError(
            f"{what}: {subject} is symbolic ({x}); substitute values first "
            "(tylo.layouts.substitute(layout, {'M': 16}) or `tylo layout ... --set M=16`)"
        ) from None


def grid_of(layout: Any, *, what: str = "layout_svg") -> tuple[int, int]:
    """``(rows, cols)`` of the picture of ``layout``: ``rows * cols == size(layout)``, rows
    is ``size(mode 0)`` for rank >= 2 and 1 for rank 1."""
    if not isinstance(layout, (Layout, ComposedLayout)):
        raise PictureError(
            f"{what}: expected a tylo.layouts Layout or ComposedLayout, got "
            f"{type(layout).__name__} {layout!r}"
        )
    n = _static_int(size(layout), what, layout)
    if n > MAX_CELLS:
        raise PictureError(
            f"{what}: {layout} has {n} elements, more than the {MAX_CELLS} a picture shows; "
            "draw a tile of it (tylo.layouts.logical_divide / a slice)"
        )
    inner = layout.inner if isinstance(layout, ComposedLayout) else layout
    rows = _static_int(size(inner[0]), what, layout) if rank(inner) >= 2 else 1
    return rows, n // rows


def layout_offsets(layout: Any, *, what: str = "layout_svg") -> list[int]:
    """The offset of every 1-D index of a static ``layout``, in index order."""
    rows, cols = grid_of(layout, what=what)
    return [_static_int(layout(i), what, layout) for i in range(rows * cols)]


def _cells(layout: Any, what: str, colour: Any, label: Any, extra: Any) -> list[Cell]:
    rows, _ = grid_of(layout, what=what)
    shape = layout.shape
    cells = []
    for i, off in enumerate(layout_offsets(layout, what=what)):
        data = {"index": str(i), "coord": _crd_text(idx2crd(i, shape)), "offset": str(off)}
        data.update(extra(off))
        cells.append(Cell(i % rows, i // rows, label(off), colour(off), data))
    return cells


def _crd_text(c: Any) -> str:
    if isinstance(c, tuple):
        return "(" + ",".join(_crd_text(e) for e in c) + ")"
    return str(c)


def layout_svg(layout: Any, *, title: str | None = None) -> str:
    """An SVG picture of a static Layout or ComposedLayout: one cell per 1-D index ``i``
    (row ``i % rows``, column ``i // rows``, see :func:`grid_of`), labelled with the
    offset ``layout(i)`` and filled with ``index_colour(layout(i))``.

    >>> svg = layout_svg(Layout((2, 3), (3, 1)))
    >>> svg.count('class="cell"'), 'data-offset="5"' in svg
    (6, True)
    """
    cells = _cells(layout, "layout_svg", index_colour, str, lambda off: {})
    rows, cols = grid_of(layout)
    panel = Panel(title if title is not None else str(layout), rows, cols, cells)
    return render([panel])


def bank_of(offset: int, elem_bytes: int, banks: int = SHARED_BANKS) -> int:
    """The shared-memory bank of the element at ``offset``: ``(offset*elem_bytes // 4) %
    banks`` (the bank of its first byte; 4-byte banks)."""
    return (offset * elem_bytes // BANK_BYTES) % banks


def bank_svg(
    layout: Any, elem_bytes: int, *, banks: int = SHARED_BANKS, title: str | None = None
) -> str:
    """An SVG picture of a static shared-memory layout coloured by bank: the cell of index
    ``i`` is filled with ``bank_colour(bank_of(layout(i), elem_bytes))`` and labelled with
    its offset and bank, so that two cells of one colour in a warp's access are a bank
    conflict (the elements share a bank but not a 4-byte word).

    >>> svg = bank_svg(Layout((8, 8), (8, 1)), 4)
    >>> 'data-bank="8"' in svg
    True
    """
    if type(elem_bytes) is not int or elem_bytes < 1:
        raise PictureError(
            f"bank_svg: elem_bytes must be a positive int (the element size in bytes, e.g. 2 "
            f"for bf16), got {elem_bytes!r}"
        )
    if type(banks) is not int or banks < 1:
        raise PictureError(
            f"bank_svg: banks must be a positive int (32 on NVIDIA GPUs), got {banks!r}"
        )
    cells = _cells(
        layout,
        "bank_svg",
        lambda off: bank_colour(bank_of(off, elem_bytes, banks), banks),
        lambda off: f"{off}:b{bank_of(off, elem_bytes, banks)}",
        lambda off: {"bank": str(bank_of(off, elem_bytes, banks))},
    )
    rows, cols = grid_of(layout, what="bank_svg")
    panel = Panel(
        title if title is not None else f"{layout}  ({elem_bytes}-byte elements)",
        rows,
        cols,
        cells,
        {"elem-bytes": str(elem_bytes), "banks": str(banks)},
    )
    caption = f"label offset:bN; bank = (offset*{elem_bytes} // {BANK_BYTES}) mod {banks}"
    return render([panel], caption)
