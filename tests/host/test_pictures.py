"""Layout pictures read back with xml.etree: one cell per index, each labelled with the
offset a brute-force dot product gives for that cell's coordinate, coloured by offset or by
shared-memory bank ``(offset*elem_bytes//4) % 32``; refusals for what cannot be drawn."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from math import prod

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tylo.layouts import ComposedLayout, Layout, Swizzle, dim, flatten, idx2crd, size
from tylo.layouts.strategies import layouts, swizzled_layouts
from tylo.pictures import (
    MAX_CELLS,
    PictureError,
    bank_colour,
    bank_svg,
    index_colour,
    layout_svg,
    repr_svg,
)

NS = "{http://www.w3.org/2000/svg}"


def cells(svg: str) -> list[ET.Element]:
    root = ET.fromstring(svg)
    assert root.tag == f"{NS}svg"
    return [g for g in root.iter(f"{NS}g") if g.get("class") == "cell"]


def dot_offset(layout: Layout, index: int) -> int:
    """The offset of 1-D index ``index``, by colexicographic digits of the flat shape."""
    fs, fd = flatten(layout).flat()
    off = 0
    for s, d in zip(fs, fd):
        off += (index % s) * d
        index //= s
    return off


def brute_offset(obj: Layout | ComposedLayout, index: int) -> int:
    if isinstance(obj, ComposedLayout):
        return int(obj.outer(obj.offset + dot_offset(obj.inner, index)))
    return dot_offset(obj, index)


def rows_of(obj: Layout | ComposedLayout) -> int:
    inner = obj.inner if isinstance(obj, ComposedLayout) else obj
    return size(inner[0]) if isinstance(inner.shape, tuple) and len(inner.shape) >= 2 else 1


def crd_text(c: object) -> str:
    return "(" + ",".join(crd_text(e) for e in c) + ")" if isinstance(c, tuple) else str(c)


def check_layout_picture(obj: Layout | ComposedLayout, svg: str) -> list[ET.Element]:
    got = cells(svg)
    n = size(obj)
    assert len(got) == n
    rows = rows_of(obj)
    seen = set()
    for g in got:
        r, c = int(g.get("data-row")), int(g.get("data-col"))
        i = r + rows * c
        assert 0 <= r < rows and 0 <= c < n // rows and (r, c) not in seen
        seen.add((r, c))
        assert int(g.get("data-index")) == i
        assert g.get("data-coord") == crd_text(idx2crd(i, obj.shape))
        assert int(g.get("data-offset")) == brute_offset(obj, i)
    return got


@settings(max_examples=60, deadline=None)
@given(layouts(max_size=64))
def test_layout_cells_are_labelled_and_coloured_by_offset(lay: Layout) -> None:
    for g in check_layout_picture(lay, layout_svg(lay)):
        off = int(g.get("data-offset"))
        assert g.find(f"{NS}text").text == str(off)
        assert g.find(f"{NS}rect").get("fill") == index_colour(off)


@settings(max_examples=30, deadline=None)
@given(swizzled_layouts(max_size=128), st.sampled_from([1, 2, 4, 8, 16]))
def test_bank_colours_follow_the_bank_formula(lay: ComposedLayout, elem_bytes: int) -> None:
    svg = bank_svg(lay, elem_bytes)
    for g in check_layout_picture(lay, svg):
        off = int(g.get("data-offset"))
        bank = (off * elem_bytes // 4) % 32
        assert int(g.get("data-bank")) == bank
        assert g.find(f"{NS}rect").get("fill") == bank_colour(bank)
        assert g.find(f"{NS}text").text == f"{off}:b{bank}"


def test_bank_colours_are_distinct_and_a_conflict_shows() -> None:
    assert len({bank_colour(b) for b in range(32)}) == 32
    # a column of a row-major 32x32 f32 tile: every element in bank 0 (a 32-way conflict)...
    col = [g for g in cells(bank_svg(Layout((32, 32), (32, 1)), 4)) if g.get("data-col") == "0"]
    assert {g.get("data-bank") for g in col} == {"0"}
    # ...and the swizzled tile spreads each column over 8 banks (S<3,2,3> on 4-byte words)
    swz = ComposedLayout(Swizzle(3, 2, 3), 0, Layout((8, 32), (32, 1)))
    col = [g for g in cells(bank_svg(swz, 4)) if g.get("data-col") == "0"]
    assert len({g.get("data-bank") for g in col}) == 8


def test_hostile_layouts() -> None:
    # a negative stride, a stride near 2**63, a deeply nested shape, one element
    for lay in (
        Layout((4, 2), (-1, 4)),
        Layout((2, 2), (1, 2**62)),
        Layout(((((2,),),), 3), ((((5,),),), 1)),
        Layout(1, 0),
        Layout((3, 1, 2), (0, 0, 7)),
    ):
        check_layout_picture(lay, layout_svg(lay))
        check_layout_picture(lay, bank_svg(lay, 2))
    big = Layout((2, 2), (1, 2**62))
    svg = bank_svg(big, 8)
    assert {int(g.get("data-bank")) for g in cells(svg)} == {
        (o * 8 // 4) % 32 for o in (0, 1, 2**62, 2**62 + 1)
    }


def test_refusals_say_what_and_how() -> None:
    M = dim("M")
    with pytest.raises(PictureError, match="symbolic.*--set M=16"):
        layout_svg(Layout((M, 2), (1, M)))
    with pytest.raises(PictureError, match="more than the"):
        layout_svg(Layout((MAX_CELLS + 1,), (1,)))
    with pytest.raises(PictureError, match="expected a tylo.layouts Layout"):
        layout_svg("(4,8):(1,4)")
    for bad in (0, -1, True, 2.5, "2"):
        with pytest.raises(PictureError, match="elem_bytes must be a positive int"):
            bank_svg(Layout(4, 1), bad)
    with pytest.raises(PictureError, match="banks must be"):
        bank_svg(Layout(4, 1), 4, banks=0)
    # exactly MAX_CELLS is drawn
    assert len(cells(layout_svg(Layout((64, MAX_CELLS // 64), (1, 64))))) == MAX_CELLS


def test_repr_svg_hook_answers_or_declines() -> None:
    lay = Layout((4, 8), (8, 1))
    assert repr_svg(lay) == layout_svg(lay)
    swz = ComposedLayout(Swizzle(2, 0, 3), 0, Layout((4, 8), (8, 1)))
    assert repr_svg(swz) == layout_svg(swz)
    assert repr_svg(Layout((dim("N"), 2), (2, 1))) is None
    assert repr_svg(Layout(MAX_CELLS * 2, 1)) is None
    assert repr_svg(42) is None and repr_svg("x") is None


def test_titles_and_text_are_escaped() -> None:
    svg = layout_svg(Layout((2, 2), (1, 2)), title="<a & b>")
    root = ET.fromstring(svg)
    titles = [t.text for t in root.iter(f"{NS}text") if t.get("class") == "title"]
    assert titles == ["<a & b>"]
    assert prod((2, 2)) == len(cells(svg))
