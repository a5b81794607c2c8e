"""Ownership (thread-value layouts over tiles) and fragments, on the host: coordinates agree
with the TV layouts' definition, transposition and reduction keep the values' meaning,
broadcasting finds the right slots, and fragment arithmetic emulates on plain numbers."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tylo.kernel.tree import flatten, unflatten
from tylo.layouts import Layout, idx2crd, index_symbol
from tylo.layouts.tv import (
    LDMATRIX_X4_DST_TV,
    MMA_M16N8K16_A_TV,
    MMA_M16N8K16_B_TV,
    MMA_M16N8K16_C_TV,
    make_tv_layout,
)
from tylo.tile.fragment import Fragment, FragmentError, full, zeros
from tylo.tile.ownership import Ownership, OwnershipError, broadcast_map, fit_modes

MMA = [
    (MMA_M16N8K16_A_TV, (16, 16)),
    (MMA_M16N8K16_B_TV, (8, 16)),
    (MMA_M16N8K16_C_TV, (16, 8)),
    (LDMATRIX_X4_DST_TV, (8, 32)),
]


@pytest.mark.parametrize(("tv", "shape"), MMA)
def test_coords_are_the_tv_layout(tv, shape):
    own = Ownership(tv, shape)
    table = own.table()
    for t in range(own.threads):
        for v in range(own.values):
            want = idx2crd(tv(t, v), shape)
            assert own.coord(t, v) == want
            assert tuple(table[t, v]) == want
    assert own.covers_once


def test_mma_c_lane_map():
    own = Ownership(MMA_M16N8K16_C_TV, (16, 8))
    # PTX ISA fragment of mma.m16n8k16 C: row groupID (+8), columns 2*threadID_in_group (+1)
    for lane in range(32):
        g, t = lane // 4, lane % 4
        assert own.coords(lane) == [(g, 2 * t), (g, 2 * t + 1), (g + 8, 2 * t), (g + 8, 2 * t + 1)]


def test_symbolic_thread_coords_agree():
    own = Ownership(MMA_M16N8K16_A_TV, (16, 16))
    tid = index_symbol("tid", upper=32)
    sym = own.coords(tid)
    for t in (0, 5, 17, 31):
        got = [tuple(int(c.subs(tid, t)) if hasattr(c, "subs") else c for c in crd) for crd in sym]
        assert got == own.coords(t)


@st.composite
def ownerships(draw):
    """Random static ownerships built from modes: threads and values along random axes."""
    shape = tuple(draw(st.sampled_from([2, 4, 8])) for _ in range(2))
    # split each axis into power-of-two pieces assigned to threads or values
    thread_modes, value_modes = [], []
    for axis, ext in enumerate(shape):
        step = 1
        while step < ext:
            e = draw(st.sampled_from([p for p in (2, 4) if step * p <= ext] or [2]))
            e = min(e, ext // step)
            (thread_modes if draw(st.booleans()) else value_modes).append((e, axis, step))
            step *= e
    if draw(st.booleans()):
        thread_modes.append((2, None, 0))  # replicated
    order = draw(st.permutations(thread_modes))
    return Ownership.from_modes(shape, list(order), value_modes)


@settings(max_examples=60, deadline=None)
@given(ownerships())
def test_transpose_moves_coordinates(own):
    tr = own.transpose()
    for t in range(own.threads):
        assert [c[::-1] for c in own.coords(t)] == tr.coords(t)
    assert tr.transpose() == Ownership.from_modes(own.shape, *own._as_mode_lists())


@settings(max_examples=60, deadline=None)
@given(ownerships(), st.sampled_from([0, 1]))
def test_reduced_broadcasts_back(own, axis):
    red = own.reduced(axis)
    assert red.shape[axis] == 1
    vmap = broadcast_map(own, red)
    for t in range(own.threads):
        for v, c in enumerate(own.coords(t)):
            want = tuple(0 if a == axis else x for a, x in enumerate(c))
            assert red.coord(t, vmap[v]) == want


def test_broadcast_incompatible():
    c = Ownership(MMA_M16N8K16_C_TV, (16, 8))
    a = Ownership(MMA_M16N8K16_A_TV, (16, 16))
    with pytest.raises(OwnershipError, match="do not broadcast"):
        broadcast_map(c, a)
    t = c.transpose()
    with pytest.raises(OwnershipError):
        broadcast_map(c, Ownership(t.tv, (16, 8)))


def test_tiled_and_from_modes():
    c = Ownership(MMA_M16N8K16_C_TV, (16, 8))
    big = c.tiled((32, 16), threads=[(2, 0, 16)], values=[(2, 1, 8)])
    assert big.threads == 64 and big.values == 8 and big.covers_once
    assert big.coord(32 + 5, 4) == (16 + 1, 8 + 2)


def test_invalid_ownerships():
    with pytest.raises(OwnershipError, match="outside the tile"):
        Ownership(Layout((32, 8), (1, 32)), (16, 8))
    with pytest.raises(OwnershipError, match="rank 2"):
        Ownership(Layout(32), (32,))
    with pytest.raises(OwnershipError, match="static"):
        Ownership(Layout((32, 4), (1, 32)), (index_symbol("n"), 8))


def test_wrapping_mode_is_refined():
    # 64 threads walking a (32, 2) tile column-major: one mode crosses the axis boundary
    own = Ownership(Layout((64, 1), (1, 0)), (32, 2))
    assert [m.axis for m in own.thread_modes] == [0, 1]
    assert own.coord(33, 0) == (1, 1)


def test_copy_tv_matches_make_tv_layout():
    tile, tv = make_tv_layout(Layout((16, 8), (8, 1)), Layout((1, 8)))
    own = Ownership(tv, tile)
    assert own.coords(9)[:2] == [(1, 8), (1, 9)]


def test_fit_modes():
    assert fit_modes([(0, 0), (1, 0), (2, 0)], 2) == [(3, 0, 1)]
    assert fit_modes([(0, 0), (0, 8), (16, 0), (16, 8)], 2) == [(2, 1, 8), (2, 0, 16)]
    with pytest.raises(OwnershipError):
        fit_modes([(0, 0), (1, 1)], 2)
    with pytest.raises(OwnershipError):
        fit_modes([(0, 0), (1, 0), (5, 0), (3, 0)], 2)


# ---------------------------------------------------------------------------- fragments

C = Ownership(MMA_M16N8K16_C_TV, (16, 8))


def test_fragment_arithmetic_host():
    f = Fragment([1.0, 2.0, 3.0, 4.0], C)
    g = Fragment([10.0, 20.0, 30.0, 40.0], C)
    assert (f + g).values == [11.0, 22.0, 33.0, 44.0]
    assert (1 - f).values == [0.0, -1.0, -2.0, -3.0]
    assert (f / 2).values == [0.5, 1.0, 1.5, 2.0]
    assert (-f).values == [-1.0, -2.0, -3.0, -4.0]
    assert (f > 2).values == [False, False, True, True]
    assert (f > 2).where(f, 0.0).values == [0.0, 0.0, 3.0, 4.0]
    assert f.map(lambda x: x * x).values == [1.0, 4.0, 9.0, 16.0]
    assert (f + g).ownership is C


def test_fragment_broadcast_reduced_row():
    f = Fragment([1.0, 2.0, 3.0, 4.0], C)
    row = Fragment([100.0, 200.0], C.reduced(1))  # rows g and g+8
    assert (f - row).values == [-99.0, -98.0, -197.0, -196.0]
    assert (row - f).ownership == C


def test_fragment_mismatch_and_truth():
    f = Fragment([1.0, 2.0, 3.0, 4.0], C)
    a = Fragment([0.0] * 8, Ownership(MMA_M16N8K16_A_TV, (16, 16)))
    with pytest.raises(OwnershipError):
        f + a
    with pytest.raises(FragmentError, match="truth value"):
        bool(f)
    with pytest.raises(FragmentError, match="4 slots"):
        Fragment([1.0], C)
    with pytest.raises(FragmentError, match="packed"):
        Fragment([1.0], C, packed="f32")


def test_fragment_flatten_protocol():
    f = Fragment([1.0, 2.0, 3.0, 4.0], C)
    leaves, tree = flatten((f, 5))
    assert leaves == [1.0, 2.0, 3.0, 4.0, 5]
    back = unflatten(tree, [9.0, 8.0, 7.0, 6.0, 5])
    assert isinstance(back[0], Fragment) and back[0].values == [9.0, 8.0, 7.0, 6.0]
    assert back[0].ownership == C
    assert flatten(f.transpose())[1] != tree[1][0]


def test_fragment_constructors_and_queries():
    assert zeros(C).values == [0.0] * 4
    assert full(C, 2.5).values == [2.5] * 4
    f = Fragment([1, 2, 3, 4], C)
    assert f.coords(5) == [(1, 2), (1, 3), (9, 2), (9, 3)]
    assert f.transpose().coords(5) == [(2, 1), (3, 1), (2, 9), (3, 9)]
    assert f.shape == (16, 8) and len(f) == 4 and list(f) == [1, 2, 3, 4] and f[2] == 3
    assert f.dtype is int
