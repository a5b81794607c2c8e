"""Tile views on the host: windows and selections compute the right offsets, dynamic
selections are accepted only where they commute with a swizzle, and the address classes
that keep the main loop lean agree with direct evaluation for every thread."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tylo import dtypes as dt
from tylo.backend.ir import ADDRSPACE_GLOBAL, ADDRSPACE_SHARED
from tylo.kernel.memory import Tensor
from tylo.layouts import Layout, Swizzle, composition, dim, index_symbol
from tylo.nvgpu.warp.ldmatrix import operand_loads
from tylo.nvgpu.warp.mma import MMAAtom, TiledMMA
from tylo.tile.access import GlobalTile, SharedTile, TileError, address_classes


def _shared(layout) -> SharedTile:
    return SharedTile(Tensor(dt.bf16, None, addrspace=ADDRSPACE_SHARED, align=16), layout)


def _global(layout) -> GlobalTile:
    return GlobalTile(Tensor(dt.bf16, None, addrspace=ADDRSPACE_GLOBAL, align=16), layout)


STAGED = composition(Swizzle(2, 3, 3), Layout((64, 32, 3), (32, 1, 2048)))


def test_windows_and_selects():
    t = _shared(STAGED)
    assert t.shape == (64, 32, 3)
    s1 = t.select(2, 1)
    assert s1.shape == (64, 32)
    for r, c in [(0, 0), (5, 9), (63, 31)]:
        assert s1.offset((r, c)) == 2048 + STAGED(r, c, 0)
    w = s1.window((16, 8), (16, 16))
    assert w.shape == (16, 16) and w.offset((1, 2)) == 2048 + STAGED(17, 10, 0)
    kt = index_symbol("kt")
    dyn = t.select(2, kt)
    assert dyn.offset((3, 4)) == 2048 * kt + STAGED(3, 4, 0)


def test_dynamic_select_must_commute_with_the_swizzle():
    bad = composition(Swizzle(2, 3, 3), Layout((64, 32, 3), (32, 1, 2040)))
    t = _shared(bad)
    t.select(2, 1)  # a static index is exact
    with pytest.raises(TileError, match="commute"):
        t.select(2, index_symbol("kt"))
    with pytest.raises(TileError, match="nested"):
        _shared(Layout(((8, 8), 32), ((32, 256), 1))).select(0, 1)


def test_global_tiles_are_symbolic():
    m, k, lda = dim("m"), dim("k"), dim("lda")
    a = _global(Layout((m, k), (lda, 1)))
    w = a.window((64, 32), (64, 32))
    assert w.offset((1, 2)) == 65 * lda + 34
    assert w.shape == (64, 32) and a.shape == (m, k)
    with pytest.raises(TileError, match="rank"):
        a.window((1,))


def test_tiles_check_their_storage():
    with pytest.raises(TileError, match="shared"):
        SharedTile(Tensor(dt.bf16, None, addrspace=ADDRSPACE_GLOBAL, align=16), STAGED)
    with pytest.raises(TileError, match="global"):
        GlobalTile(Tensor(dt.bf16, None, addrspace=ADDRSPACE_SHARED, align=16), STAGED)
    with pytest.raises(TileError, match="static"):
        _shared(Layout((dim("m"), 32), (32, 1)))


@pytest.mark.parametrize("swizzle", [False, True])
@pytest.mark.parametrize("xor", [False, True])
def test_address_classes_agree_with_direct_offsets(swizzle, xor):
    plan = TiledMMA(MMAAtom((16, 8, 16), dt.bf16), (2, 4), (4, 8), 32)
    layout = Layout((128, 32, 4), (32, 1, 4096))
    if swizzle:
        layout = composition(Swizzle(2, 3, 3), layout)
    tile = _shared(layout).select(2, 2)
    loads = operand_loads(plan, "a")
    own = loads.source
    tables = [
        tuple(own.coord(t, loads.slot(g, ks)) for t in range(plan.threads))
        for ks in range(plan.k_steps)
        for g in range(len(loads.loads))
    ]
    classes = address_classes(tile, tables, xor=xor)
    base = tile.base
    for j, (rep, diff, x) in enumerate(classes):
        assert rep <= j and (x == 0 or (xor and diff == 0))
        for t in range(plan.threads):
            want = tile.offset(tables[j][t]) - base
            assert want == ((tile.offset(tables[rep][t]) - base) ^ x) + diff
    reps = {r for r, _, _ in classes}
    # the 4 row groups of a k-step share a base; a swizzle needs one base per k-step,
    # unless its k-steps may differ by a XOR (the swizzle is XOR-linear)
    assert len(reps) == (plan.k_steps if swizzle and not xor else 1)


def _brute_relation(off, bases, xor):
    """Every (i, d, x) relating ``off`` to ``bases`` (by enumeration of every d and x the
    first thread allows)."""
    found = []
    for i, b in enumerate(bases):
        d = off[0] - b[0]
        if all(p == q + d for p, q in zip(off, b)):
            found.append((i, d, 0))
        x = off[0] ^ b[0]
        if xor and all(p == q ^ x for p, q in zip(off, b)):
            found.append((i, 0, x))
    return found


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(0, 2**20), min_size=1, max_size=8),
    st.lists(st.lists(st.integers(0, 2**20), min_size=1, max_size=8), max_size=4),
    st.integers(-(2**12), 2**12),
    st.integers(0, 2**12),
    st.booleans(),
)
def test_relate_is_exact(off, raw_bases, d, x, xor):
    """``relate``'s defining property over arbitrary offset tables: a result satisfies
    ``off[t] == (bases[i][t] ^ x) + d`` in every thread, a constant difference is preferred
    to a XOR, and None is returned only when no base relates either way (checked by brute
    force), including tables built to relate by construction."""
    from tylo.tile.access import relate

    n = len(off)
    bases = [tuple((b * n)[:n]) for b in raw_bases]
    if bases:  # one base related by construction: (base ^ x) + d, kept non-negative
        made = tuple((v ^ x) + d for v in bases[0])
        if min(made) >= 0:
            off = made if xor or x == 0 else off
    off = tuple(off)
    got = relate(off, bases, xor=xor)
    brute = _brute_relation(off, bases, xor)
    if got is None:
        assert brute == []
        return
    i, dd, xx = got
    assert all(p == (q ^ xx) + dd for p, q in zip(off, bases[i]))
    assert xx == 0 or (xor and dd == 0)
    if any(b[2] == 0 for b in brute):  # a free relation exists: it is the one taken
        assert xx == 0


def test_relate_refuses_what_does_not_relate():
    from tylo.tile.access import relate

    assert relate((0, 1, 2), [(0, 2, 4)]) is None  # neither a constant difference nor XOR
    assert relate((5, 6), []) is None
    assert relate((1, 0), [(0, 1)], xor=False) is None
    assert relate((1, 0), [(0, 1)]) == (0, 0, 1)
    assert relate((8, 9), [(0, 1), (3, 4)]) == (0, 8, 0)  # the difference, not the XOR


def test_symbolic_addresses_agree_with_static_ones():
    """What a kernel evaluates per thread (coordinates of the ldmatrix and cp.async sources
    as expressions of the thread index, through the swizzled layout) equals, for every
    thread, what the host proved and grouped."""
    from tylo.nvgpu.cpasync import CopyPlan

    plan = TiledMMA(MMAAtom((16, 8, 16), dt.bf16), (2, 4), (4, 8), 32)
    layout = composition(Swizzle(2, 3, 3), Layout((128, 32, 3), (32, 1, 4096)))
    tile = _shared(layout).select(2, 1)
    tid = index_symbol("tid", upper=plan.threads)
    loads = operand_loads(plan, "a")
    own = loads.source
    copy = CopyPlan(
        (128, 32), dt.bf16, plan.threads, composition(Swizzle(2, 3, 3), Layout((128, 32), (32, 1)))
    )
    accesses = [
        lambda t, g=g, ks=ks: own.coord(t, loads.slot(g, ks))
        for ks in range(plan.k_steps)
        for g in range(len(loads.loads))
    ]
    accesses += [lambda t, j=j: copy.vector_coord(t, j) for j in range(copy.vectors_per_thread)]
    for access in accesses:
        expr = tile.offset(access(tid))
        for t in range(0, plan.threads, 7):
            assert int(expr.subs(tid, t)) == tile.offset(access(t))


def test_access_offsets_memo_keys_on_the_view():
    """The memoized offsets are those of a direct evaluation (each coordinate through the
    view's layout), for views of one layout that differ in origin, in selected stage and in
    the (window) coordinates given."""
    from tylo.tile.access import access_offsets

    plan = TiledMMA(MMAAtom((16, 8, 16), dt.bf16), (2, 4), (4, 8), 32)
    layout = composition(Swizzle(2, 3, 3), Layout((128, 32, 4), (32, 1, 4096)))
    loads = operand_loads(plan, "a")
    own = loads.source
    tables = [
        tuple(own.coord(t, loads.slot(g, ks)) for t in range(plan.threads))
        for ks in range(plan.k_steps)
        for g in range(len(loads.loads))
    ]
    small = [tuple((r % 8, c % 8) for r, c in tab) for tab in tables]
    for stage in range(4):
        base = _shared(layout).select(2, stage)
        for tile, tabs in [
            (base, tables),
            (base.window((8, 8), (16, 16)), small),
            (base.window((0, 4), (16, 16)), small),
            (base.window((8, 8), (16, 16)), small),
        ]:
            want = tuple(tuple(tile.offset(c) - tile.base for c in tab) for tab in tabs)
            assert access_offsets(tile, tabs) == want
            assert access_offsets(tile, [list(t) for t in tabs]) == want  # cached
