"""Reduction plans derived from ownership: the recipe (in-thread groups folded pairwise,
butterfly masks, the two-level cross-warp step through scratch) is checked by simulating
it on the host against a direct reduction over coordinates, for MMA layouts, tiled
accumulators, warp-striped rows and random ownerships of up to 1024 threads; the pairwise
fold's dependency depth is measured on host values."""

from __future__ import annotations

import operator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tylo.layouts.tv import MMA_M16N8K16_C_TV
from tylo.nvgpu.warp.mma import MMAAtom, TiledMMA
from tylo.tile.fragment import Fragment
from tylo.tile.ownership import Ownership
from tylo.tile.reduce import ReductionError, ReductionPlan, fold_pairwise, reduction_plan

C = Ownership(MMA_M16N8K16_C_TV, (16, 8))


def _check(own: Ownership, axis: int, op=operator.add) -> ReductionPlan:
    plan = reduction_plan(own, axis)
    rng = np.random.default_rng(0)
    values = {c: int(rng.integers(-50, 50)) for c in own.owners()}
    data = [[values[c] for c in own.coords(t)] for t in range(own.threads)]
    got = plan.simulate(op, data)
    rows: dict = {}
    for k, v in sorted(values.items()):
        key = tuple(0 if a == axis else x for a, x in enumerate(k))
        rows[key] = v if key not in rows else op(rows[key], v)
    for t in range(own.threads):
        for j, c in enumerate(plan.result.coords(t)):
            assert got[t][j] == rows[c], (t, j, c)
    return plan


def test_mma_rows_take_two_shuffles():
    plan = _check(C, 1)
    assert plan.lane_masks == (1, 2) and plan.warps == 1 and plan.scratch_elements == 0
    assert plan.groups == ((0, 1), (2, 3))
    assert plan.result.values == 2


def test_mma_columns_take_three_shuffles():
    plan = _check(C, 0, max)
    assert plan.lane_masks == (4, 8, 16) and plan.groups == ((0, 2), (1, 3))


def test_tiled_accumulator_rows_across_warps():
    tiled = TiledMMA(MMAAtom((16, 8, 16)), warps=(2, 2), repeat=(2, 4), k=32)
    plan = _check(tiled.acc_ownership, 1)
    assert plan.lane_masks == (1, 2) and plan.warps == 2
    assert plan.scratch_elements == 64 * 2
    # two warps share a row: each lane of a quad pair reads one warp's partial, one more
    # butterfly (lane bit 1) combines them
    assert plan.exchange_masks == (1,) and plan.partials_per_lane == 1
    cols = _check(tiled.acc_ownership, 0, max)
    assert cols.lane_masks == (4, 8, 16) and cols.exchange_masks == (4,)


def test_lane_local_rows_need_no_communication():
    # each of 64 threads owns one whole row of 16
    own = Ownership.from_modes((64, 16), [(64, 0, 1)], [(16, 1, 1)])
    plan = _check(own, 1)
    assert plan.lane_masks == () and plan.warps == 1 and plan.groups == (tuple(range(16)),)


def test_warp_striped_rows():
    # 4 warps per row of 1024, each lane 8 strided values, 2 rows of warps
    own = Ownership.from_modes((2, 1024), [(32, 1, 1), (4, 1, 32), (2, 0, 1)], [(8, 1, 128)])
    plan = _check(own, 1)
    assert plan.lane_masks == (1, 2, 4, 8, 16) and plan.warps == 4
    assert plan.scratch_elements == 2 * 4
    # lane l reads warp l % 4's partial (slot row * 4 + l % 4), then 2 butterflies
    assert plan.exchange_masks == (1, 2) and plan.partials_per_lane == 1
    assert plan.scratch_slots(32 * 5 + 7, 0) == (4 + 1, [4 + 3])


@pytest.mark.parametrize("warps,rows", [(2, 4), (4, 2), (8, 1), (8, 4), (16, 2), (32, 1)])
def test_rows_over_warps_take_one_partial_per_lane(warps, rows):
    """A softmax row over ``warps`` whole warps: one shared slot per warp, one load per
    lane, log2(warps) more butterflies; the write slot of a thread is its warp's index."""
    t = 32 * warps
    own = Ownership.from_modes((rows, 4 * t), [(t, 1, 4), (rows, 0, 1)], [(4, 1, 1)])
    plan = _check(own, 1)
    _check(own, 1, max)
    assert plan.warps == warps and plan.partials_per_lane == 1
    assert plan.exchange_masks == tuple(1 << b for b in range(warps.bit_length() - 1))
    for tid in (0, 33, t - 1, rows * t - 1):
        at, reads = plan.scratch_slots(tid, 0)
        assert at == tid // 32 and reads == [(tid // t) * warps + tid % warps]


def test_fewer_lane_bits_than_warps_read_several_partials():
    # the MMA accumulator with 8 warps along its rows: a row spans 2 lane bits (a quad), so
    # each lane reads 2 of the 8 partials and the quad combines them with 2 butterflies
    tiled = TiledMMA(MMAAtom((16, 8, 16)), warps=(1, 8), repeat=(1, 1), k=16)
    plan = _check(tiled.acc_ownership, 1)
    assert plan.warps == 8 and plan.exchange_masks == (1, 2) and plan.partials_per_lane == 2
    assert plan.scratch_slots(1, 0)[1] == [1, 5]  # row 0: warps 1 and 5


def test_warps_not_a_power_of_two_read_every_partial():
    own = Ownership.from_modes((2, 96), [(32, 1, 1), (3, 1, 32), (2, 0, 1)], [])
    plan = _check(own, 1)
    assert plan.warps == 3 and plan.exchange_masks == () and plan.partials_per_lane == 3


# ---------------------------------------------------------------------------- pairwise folds


class Depth:
    """A host value that records the longest chain of operations that produced it."""

    def __init__(self, depth: int = 0, leaves: int = 1) -> None:
        self.depth, self.leaves = depth, leaves

    def __add__(self, other: Depth) -> Depth:
        return Depth(max(self.depth, other.depth) + 1, self.leaves + other.leaves)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 13, 32, 33, 100])
def test_fold_pairwise_depth_is_logarithmic(n):
    out = fold_pairwise(operator.add, [Depth() for _ in range(n)])
    assert out.leaves == n  # every value exactly once
    assert out.depth == (n - 1).bit_length()  # ceil(log2(n)), not n - 1


def test_fold_pairwise_order_and_errors():
    assert fold_pairwise(lambda a, b: f"({a}{b})", "abcdef") == "(((ab)(cd))(ef))"
    with pytest.raises(ReductionError, match="no values"):
        fold_pairwise(operator.add, [])


@pytest.mark.parametrize("values", [4, 12, 32, 128])
def test_fragment_reduce_folds_pairwise(values):
    """Fragment.reduce (every fragment reduction) folds a thread's own values pairwise:
    the dependency chain of a row of ``values`` in one thread is ceil(log2(values))."""
    own = Ownership.from_modes((32, values), [(32, 0, 1)], [(values, 1, 1)])
    f = Fragment([Depth() for _ in range(values)], own)
    (row,) = f.sum(axis=1).values
    assert row.leaves == values
    assert row.depth == reduction_plan(own, 1).fold_depth == (values - 1).bit_length()
    # two rows per thread (the MMA accumulator): each pair folded on its own
    assert reduction_plan(C, 1).fold_depth == 1


def test_reduce_typed_errors_on_the_host():
    f = Fragment([1.0, 2.0, 3.0, 4.0], C)
    with pytest.raises(ReductionError, match="op must be one of"):
        f.reduce("mean", 1)
    with pytest.raises(ReductionError, match="out of range"):
        f.reduce("add", 2)
    tiled = TiledMMA(MMAAtom((16, 8, 16)), warps=(2, 2), repeat=(2, 4), k=32).acc_ownership
    g = Fragment([1.0] * tiled.values, tiled)
    with pytest.raises(ReductionError, match="inside a kernel"):
        g.sum(axis=1, scratch=object())  # shuffles and shared memory need a kernel


def test_no_recipe_for_non_power_of_two_lanes():
    own = Ownership.from_modes((3, 8), [(3, 0, 1), (8, 1, 1)], [(1, None, 0)])
    with pytest.raises(ReductionError, match="whole lane bits"):
        reduction_plan(own, 0)
    partial = Ownership.from_modes((4, 6), [(4, 0, 1), (6, 1, 1)], [(1, None, 0)])
    with pytest.raises(ReductionError, match="whole warps"):
        reduction_plan(partial, 0)


def test_bad_axis():
    with pytest.raises(ReductionError, match="axis"):
        ReductionPlan(C, 2)


@st.composite
def warp_ownerships(draw):
    """Random power-of-two ownerships over whole warps (32 or 64 threads)."""
    shape = (draw(st.sampled_from([4, 8, 16, 32])), draw(st.sampled_from([4, 8, 16, 32])))
    pieces = []
    for axis, ext in enumerate(shape):
        step = 1
        while step < ext:
            e = min(draw(st.sampled_from([2, 4])), ext // step)
            pieces.append((e, axis, step))
            step *= e
    pieces = draw(st.permutations(pieces))
    threads, values, count = [], [], 1
    for p in pieces:
        if count < 64 and draw(st.booleans()):
            threads.append(p)
            count *= p[0]
        else:
            values.append(p)
    while count < 32:
        threads.append((2, None, 0))
        count *= 2
    return Ownership.from_modes(shape, threads, values)


@settings(max_examples=60, deadline=None)
@given(warp_ownerships(), st.sampled_from([0, 1]), st.sampled_from([operator.add, max]))
def test_random_ownerships_reduce_correctly(own, axis, op):
    _check(own, axis, op)


@st.composite
def block_ownerships(draw):
    """Random power-of-two ownerships of 32 to 1024 threads (up to 32 warps sharing a
    row or column), with replicated thread modes."""
    shape = (draw(st.sampled_from([2, 8, 32, 64])), draw(st.sampled_from([4, 32, 128])))
    pieces = []
    for axis, ext in enumerate(shape):
        step = 1
        while step < ext:
            e = min(draw(st.sampled_from([2, 4, 8])), ext // step)
            pieces.append((e, axis, step))
            step *= e
    pieces = draw(st.permutations(pieces))
    limit = draw(st.sampled_from([32, 256, 1024]))
    threads, values, count = [], [], 1
    for p in pieces:
        if count * p[0] <= limit and draw(st.booleans()):
            threads.append(p)
            count *= p[0]
        else:
            values.append(p)
    while count < 32:
        threads.insert(draw(st.integers(0, len(threads))), (2, None, 0))
        count *= 2
    return Ownership.from_modes(shape, threads, values)


@settings(max_examples=40, deadline=None)
@given(block_ownerships(), st.sampled_from([0, 1]), st.sampled_from([operator.add, max]))
def test_random_block_ownerships_reduce_across_warps(own, axis, op):
    try:
        plan = reduction_plan(own, axis)
    except ReductionError:
        return  # no butterfly recipe (e.g. the lanes of a row are not whole lane bits)
    _check(own, axis, op)
    assert len(plan.exchange_masks) <= len(plan.lane_masks)
    if plan.warps > 1:
        assert plan.partials_per_lane << len(plan.exchange_masks) == plan.warps
