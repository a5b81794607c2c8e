"""Reduction plans derived from ownership: the recipe (in-thread groups, butterfly masks,
cross-warp scratch) is checked by simulating it on the host against a direct reduction
over coordinates, for MMA layouts, tiled accumulators and random ownerships."""

from __future__ import annotations

import operator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tylo.layouts.tv import MMA_M16N8K16_C_TV
from tylo.mma import MMAAtom, TiledMMA
from tylo.ownership import Ownership
from tylo.reduce import ReductionError, ReductionPlan, reduction_plan

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
    assert plan.writer_mask == 3
    _check(tiled.acc_ownership, 0, max)


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
