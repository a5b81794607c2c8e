"""A minimal SVG grid writer: coloured, labelled cells in panels (stdlib only).

Every picture in :mod:`tylo.pictures` is one or more *panels*, each a grid of cells. A
cell is an SVG ``<g class="cell">`` holding a ``<rect>`` and a ``<text>`` label, and it
carries its meaning in ``data-*`` attributes (``data-row``, ``data-col``, ``data-offset``,
``data-thread``, ...), so a test or a tool can read a picture back with ``xml.etree``
instead of trusting its colours.
"""

from __future__ import annotations

import colorsys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from xml.sax.saxutils import escape, quoteattr

__all__ = ["Cell", "Panel", "bank_colour", "index_colour", "render"]

CELL_W = 44  # px; wide enough for a label such as "T31V7" at FONT px
CELL_H = 24
FONT = 11
MARGIN = 28  # room for the row and column indices
TITLE_H = 22
GAP = 36  # between panels

# CuTe's printed pictures colour by thread with eight light tones; offsets and threads
# here cycle through the same number of tones, so neighbours differ.
_EIGHT = (
    "#ffd6d6",
    "#ffe9c7",
    "#fff7b8",
    "#d9f5c4",
    "#c7eef5",
    "#cbd8ff",
    "#e3d1ff",
    "#f7d0ec",
)
EMPTY = "#ffffff"


def index_colour(i: int) -> str:
    """The fill of index ``i`` (an offset or a thread): one of eight tones, ``i mod 8``."""
    return _EIGHT[i % len(_EIGHT)]


def bank_colour(bank: int, banks: int = 32) -> str:
    """The fill of shared-memory bank ``bank``: ``banks`` hues evenly spaced around the
    colour wheel, so every bank has its own colour and equal colours mean equal banks."""
    r, g, b = colorsys.hls_to_rgb((bank % banks) / banks, 0.82, 0.75)
    return f"#{round(r * 255):02x}{round(g * 255):02x}{round(b * 255):02x}"


@dataclass(frozen=True)
class Cell:
    """One grid cell: its position, label, fill and ``data-*`` attributes."""

    row: int
    col: int
    label: str
    fill: str
    data: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Panel:
    """A titled grid of ``rows`` x ``cols`` cells (cells not listed are left blank)."""

    title: str
    rows: int
    cols: int
    cells: Sequence[Cell]
    data: Mapping[str, str] = field(default_factory=dict)

    @property
    def cell_w(self) -> int:
        """The cell width: wide enough for the longest label (monospace, ~0.62 em/char)."""
        longest = max((len(c.label) for c in self.cells), default=0)
        return max(CELL_W, int(longest * FONT * 0.62) + 8)

    @property
    def width(self) -> int:
        """Pixels across: the row-index margin plus ``cols`` cells."""
        return MARGIN + self.cols * self.cell_w

    @property
    def height(self) -> int:
        """Pixels down: the title, the column-index margin and ``rows`` cells."""
        return TITLE_H + MARGIN + self.rows * CELL_H


def _attrs(data: Mapping[str, str]) -> str:
    return "".join(f" data-{k}={quoteattr(str(v))}" for k, v in data.items())


def _panel(p: Panel, x0: int, y0: int) -> list[str]:
    out = [f'<g class="panel" transform="translate({x0},{y0})"{_attrs(p.data)}>']
    out.append(
        f'<text class="title" x="0" y="{TITLE_H - 8}" font-size="{FONT + 2}" '
        f'font-weight="bold">{escape(p.title)}</text>'
    )
    gy = TITLE_H + MARGIN
    cw = p.cell_w
    for c in range(p.cols):
        x = MARGIN + c * cw + cw // 2
        out.append(
            f'<text class="col-index" x="{x}" y="{gy - 8}" font-size="{FONT}" '
            f'text-anchor="middle">{c}</text>'
        )
    for r in range(p.rows):
        y = gy + r * CELL_H + CELL_H // 2 + FONT // 3
        out.append(
            f'<text class="row-index" x="{MARGIN - 6}" y="{y}" font-size="{FONT}" '
            f'text-anchor="end">{r}</text>'
        )
    for cell in p.cells:
        x = MARGIN + cell.col * cw
        y = gy + cell.row * CELL_H
        data = {"row": str(cell.row), "col": str(cell.col), **cell.data}
        out.append(
            f'<g class="cell"{_attrs(data)}><rect x="{x}" y="{y}" width="{cw}" '
            f'height="{CELL_H}" fill="{cell.fill}" stroke="#444" stroke-width="0.5"/>'
            f'<text x="{x + cw // 2}" y="{y + CELL_H // 2 + FONT // 3}" '
            f'font-size="{FONT}" text-anchor="middle">{escape(cell.label)}</text></g>'
        )
    out.append("</g>")
    return out


def render(panels: Sequence[Panel], caption: str = "") -> str:
    """One SVG document with ``panels`` side by side and an optional caption below."""
    width = sum(p.width for p in panels) + GAP * (len(panels) - 1) + 2 * 8
    height = max(p.height for p in panels) + (TITLE_H if caption else 0) + 2 * 8
    body = []
    x = 8
    for p in panels:
        body += _panel(p, x, 8)
        x += p.width + GAP
    if caption:
        body.append(
            f'<text class="caption" x="8" y="{height - 10}" font-size="{FONT}">'
            f"{escape(caption)}</text>"
        )
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="monospace">'
    )
    return "\n".join([head, *body, "</svg>"]) + "\n"
