"""Thread-value pictures read back with xml.etree: every (thread, value) pair appears in
exactly the cell of the tile index it maps to (a brute-force dot product), labels are
``T{t}V{v}`` of the first holder, and the MMA atom's A, B and C cells match the lane maps
of the PTX ISA's mma.m16n8k16 fragment figures, written out here from the ISA's formulas."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from math import prod

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tylo.layouts import Layout, dim, flatten
from tylo.layouts.strategies import layouts
from tylo.layouts.tv import MMA_M16N8K16_C_TV
from tylo.nvgpu.warp.mma import MMAAtom
from tylo.pictures import PictureError, index_colour, mma_svg, ownership_svg, repr_svg, tv_svg
from tylo.tile.ownership import Ownership

NS = "{http://www.w3.org/2000/svg}"


def panels(svg: str) -> list[ET.Element]:
    return [g for g in ET.fromstring(svg).iter(f"{NS}g") if g.get("class") == "panel"]


def cells(node: ET.Element | str) -> list[ET.Element]:
    root = ET.fromstring(node) if isinstance(node, str) else node
    return [g for g in root.iter(f"{NS}g") if g.get("class") == "cell"]


def dot(layout: Layout, coords: tuple[int, ...]) -> int:
    """``layout(t, v)`` by the flat strides of each mode, without Layout.__call__."""
    off = 0
    fs0, fd0 = flatten(Layout(layout.shape[0], layout.stride[0])).flat()
    fs1, fd1 = flatten(Layout(layout.shape[1], layout.stride[1])).flat()
    for (fs, fd), c in (((fs0, fd0), coords[0]), ((fs1, fd1), coords[1])):
        for s, d in zip(fs, fd):
            off += (c % s) * d
            c //= s
    return off


def check_tv_picture(tv: Layout, tile: tuple[int, ...], node: ET.Element | str) -> None:
    rows = tile[0] if len(tile) >= 2 else 1
    threads = prod(flatten(Layout(tv.shape[0], tv.stride[0])).flat()[0])
    values = prod(flatten(Layout(tv.shape[1], tv.stride[1])).flat()[0])
    got = cells(node)
    assert len(got) == prod(tile)
    listed = []
    for g in got:
        i = int(g.get("data-row")) + rows * int(g.get("data-col"))
        assert int(g.get("data-index")) == i
        owners = g.get("data-owners").split()
        label = g.find(f"{NS}text").text or ""
        if not owners:
            assert label == "" and g.find(f"{NS}rect").get("fill") == "#ffffff"
            continue
        pairs = [tuple(int(x) for x in o[1:].split("V")) for o in owners]
        assert pairs == sorted(pairs)  # thread, then value order
        for t, v in pairs:
            assert dot(tv, (t, v)) == i
        t, v = pairs[0]
        more = f"+{len(pairs) - 1}" if len(pairs) > 1 else ""
        assert label == f"T{t}V{v}{more}"
        assert g.find(f"{NS}rect").get("fill") == index_colour(t)
        listed += pairs
    assert sorted(listed) == [(t, v) for t in range(threads) for v in range(values)]


@st.composite
def tv_over_tile(draw: st.DrawFn) -> tuple[Layout, tuple[int, ...]]:
    """Any layout, its flat modes split into a thread part and a value part, over a tile
    just large enough (replicated and unheld elements included)."""
    lay = draw(layouts(max_size=48))
    fs, fd = flatten(lay).flat()
    k = draw(st.integers(0, len(fs)))
    tv = Layout((fs[:k] or 1, fs[k:] or 1), (fd[:k] or 0, fd[k:] or 0))
    n = 1 + sum((s - 1) * d for s, d in zip(fs, fd))
    a = draw(st.sampled_from([d for d in range(1, n + 1) if n % d == 0]))
    return tv, ((a, n // a) if draw(st.booleans()) else (n,))


@settings(max_examples=60, deadline=None)
@given(tv_over_tile())
def test_every_pair_is_drawn_in_its_cell(case: tuple[Layout, tuple[int, ...]]) -> None:
    tv, tile = case
    check_tv_picture(tv, tile, tv_svg(tv, tile))


def ptx_a(lane: int, v: int) -> tuple[int, int]:
    """PTX ISA, mma.m16n8k16 A fragment (.bf16/.f16): row = groupID (+8 for a2,a3,a6,a7),
    col = threadID_in_group*2 + (i & 1) (+8 for a4..a7)."""
    g, t = lane // 4, lane % 4
    return g + 8 * ((v >> 1) & 1), 2 * t + (v & 1) + 8 * (v >> 2)


def ptx_b(lane: int, v: int) -> tuple[int, int]:
    """B fragment as (N, K): col n = groupID, row k = threadID_in_group*2 + (i & 1) (+8 for
    b2,b3)."""
    g, t = lane // 4, lane % 4
    return g, 2 * t + (v & 1) + 8 * (v >> 1)


def ptx_c(lane: int, v: int) -> tuple[int, int]:
    """C/D fragment: row = groupID (+8 for c2,c3), col = threadID_in_group*2 + (i & 1)."""
    g, t = lane // 4, lane % 4
    return g + 8 * (v >> 1), 2 * t + (v & 1)


def test_mma_atom_picture_matches_the_ptx_lane_maps() -> None:
    svg = mma_svg(MMAAtom())
    got = panels(svg)
    assert [p.get("data-operand") for p in got] == ["a", "b", "c"]
    for panel, fmap, (rows, cols), nval in zip(
        got, (ptx_a, ptx_b, ptx_c), ((16, 16), (8, 16), (16, 8)), (8, 4, 4)
    ):
        want = {fmap(lane, v): f"T{lane}V{v}" for lane in range(32) for v in range(nval)}
        cs = cells(panel)
        assert len(cs) == rows * cols == len(want)
        for g in cs:
            rc = (int(g.get("data-row")), int(g.get("data-col")))
            assert g.find(f"{NS}text").text == want[rc], rc
    assert "mma.sync.aligned.m16n8k16" in svg


def test_ownership_picture_and_hook() -> None:
    own = Ownership(MMA_M16N8K16_C_TV, (16, 8), "acc")
    svg = ownership_svg(own)
    check_tv_picture(own.tv, own.shape, svg)
    assert "acc" in svg and repr_svg(own) == svg
    assert repr_svg(MMAAtom()) == mma_svg(MMAAtom())
    # replicated: a row ownership held by 4 lanes of a quad
    rep = Ownership(Layout((4, 8), (0, 1)), (8,), "row max")
    svg = ownership_svg(rep)
    check_tv_picture(rep.tv, rep.shape, svg)
    assert all(g.get("data-owners").count("T") == 4 for g in cells(svg))


def test_refusals() -> None:
    with pytest.raises(PictureError, match="rank 2"):
        tv_svg(Layout(8, 1), (8,))
    with pytest.raises(PictureError, match="symbolic"):
        tv_svg(Layout((dim("T"), 2), (2, 1)), (64,))
    with pytest.raises(PictureError, match="outside the tile"):
        tv_svg(Layout((4, 2), (1, 4)), (2, 2))
    for bad in ((0, 4), (-1,), (dim("M"), 2), 2.5):
        with pytest.raises(PictureError, match="static positive ints"):
            tv_svg(Layout((2, 2), (1, 2)), bad)
    with pytest.raises(PictureError, match="expected a tylo.tile.ownership.Ownership"):
        ownership_svg(Layout((2, 2), (1, 2)))
    with pytest.raises(PictureError, match="without .b"):
        mma_svg(type("Half", (), {"a": Ownership(MMA_M16N8K16_C_TV, (16, 8))})())
    assert repr_svg(object()) is None
