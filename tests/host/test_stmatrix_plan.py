"""stmatrix plans derived from ownership, checked by simulating the instruction.

The simulator below implements PTX's stmatrix (ISA 9.7.14.5.16) on its own: for a store
``x{num}{.trans}`` and every lane ``L`` and half ``h`` of register ``j``, the element sits at
row ``L // 4``, column ``2*(L % 4) + h`` of matrix ``j``; stored plainly at (that row, that
column), or transposed at (column, row); the stored row ``i`` goes to the address lane
``8j + i`` gives. A plan is right when every (thread, slot) of the fragment lands exactly on
its ownership coordinate, and every tile element is written once. Existence is checked
against a brute-force statement of when a register can be stored (written without the
plan's row loop), and every refusal's claim is checked the same way.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tylo.layouts import Layout
from tylo.layouts.tv import (
    MMA_M16N8K16_A_TV,
    MMA_M16N8K16_B_TV,
    MMA_M16N8K16_C_TV,
    wgmma_m64_c_tv,
)
from tylo.nvgpu.warp.stmatrix import StmatrixError, StmatrixPlan, stmatrix_plan
from tylo.tile.ownership import Ownership


def simulate(plan: StmatrixPlan) -> dict:
    """(thread, slot) -> the coordinate stmatrix writes it to, with the plan's addresses."""
    own = plan.ownership
    unit = (0, 1) if plan.axis == 1 else (1, 0)
    out = {}
    for g, s in enumerate(plan.stores):
        for w in range(own.threads // 32):
            for j, r in enumerate(s.registers):
                for lane in range(32):
                    for h in (0, 1):
                        row, col = lane // 4, 2 * (lane % 4) + h
                        srow, scol = (col, row) if s.trans else (row, col)
                        start = plan.tables[g][32 * w + 8 * j + srow]
                        where = tuple(a + scol * u for a, u in zip(start, unit))
                        key = (32 * w + lane, 2 * r + h)
                        assert key not in out
                        out[key] = where
    return out


def assert_stores_by_ownership(plan: StmatrixPlan) -> None:
    own = plan.ownership
    got = simulate(plan)
    assert len(got) == own.threads * own.values
    table = own.table()
    for (t, v), where in got.items():
        assert where == tuple(int(x) for x in table[t, v]), (t, v)
    if own.covers_once:
        assert len(set(got.values())) == len(got)


def storable(own: Ownership, warp: int, reg: int, axis: int, trans: bool) -> bool:
    """Brute force: register ``reg`` of ``warp`` is one stmatrix matrix in form ``trans``:
    every element sits at its stored row's start plus its stored column along ``axis``."""
    unit = (0, 1) if axis == 1 else (1, 0)
    base = 32 * warp
    table = own.table()

    def coord(t, v):
        return tuple(int(x) for x in table[t, v])

    for lane in range(32):
        for h in (0, 1):
            row, col = lane // 4, 2 * (lane % 4) + h
            srow, scol = (col, row) if trans else (row, col)
            # the start of stored row srow: its column 0
            if trans:  # stored (srow, 0) is matrix (0, srow): lane srow // 2, half srow % 2
                start = coord(base + srow // 2, 2 * reg + srow % 2)
            else:  # stored (srow, 0) is matrix (srow, 0): lane 4 * srow, half 0
                start = coord(base + 4 * srow, 2 * reg)
            want = tuple(a + scol * u for a, u in zip(start, unit))
            if coord(base + lane, 2 * reg + h) != want:
                return False
    return True


def plan_exists(own: Ownership, axis: int) -> bool:
    regs = own.values // 2
    warps = own.threads // 32
    return any(
        all(storable(own, w, r, axis, trans) for w in range(warps) for r in range(regs))
        for trans in (False, True)
    )


@pytest.mark.parametrize("n", [8, 16, 24, 64, 256])
@pytest.mark.parametrize("axis", [0, 1])
def test_wgmma_accumulator_plans(n, axis):
    own = Ownership(wgmma_m64_c_tv(n), (64, n), f"wgmma m64n{n} C")
    plan = stmatrix_plan(own, axis)
    assert plan.trans == (axis == 0)
    regs = n // 4
    num = 4 if regs % 4 == 0 else 2 if regs % 2 == 0 else 1
    assert [s.num for s in plan.stores] == [num] * (regs // num)
    assert_stores_by_ownership(plan)


@settings(max_examples=12, deadline=None)
@given(st.integers(1, 32).map(lambda k: 8 * k), st.sampled_from([0, 1]))
def test_every_wgmma_width_stores_by_ownership(n, axis):
    assert_stores_by_ownership(stmatrix_plan(Ownership(wgmma_m64_c_tv(n), (64, n)), axis))


@pytest.mark.parametrize("tv,shape", [(MMA_M16N8K16_C_TV, (16, 8)), (MMA_M16N8K16_A_TV, (16, 16))])
@pytest.mark.parametrize("axis", [0, 1])
def test_mma_sync_fragments(tv, shape, axis):
    own = Ownership(tv, shape)
    plan = StmatrixPlan(own, axis)
    assert_stores_by_ownership(plan)


def test_b_operand_along_k_is_plain_and_transposed_along_n():
    own = Ownership(MMA_M16N8K16_B_TV, (8, 16))  # (n, k): registers hold k pairs
    assert not StmatrixPlan(own, 1).trans and StmatrixPlan(own, 0).trans


@pytest.mark.parametrize(
    "own",
    [
        Ownership(MMA_M16N8K16_C_TV, (16, 8)),
        Ownership(MMA_M16N8K16_A_TV, (16, 16)),
        Ownership(wgmma_m64_c_tv(32), (64, 32)),
    ],
)
@pytest.mark.parametrize("axis", [0, 1])
def test_address_expressions_match_the_tables(own, axis):
    """The address a thread computes from its index expression is the table's, for every
    thread (the kernel path uses the expression, the simulation the table)."""
    import sympy

    plan = StmatrixPlan(own, axis)
    tid = sympy.Symbol("tid", integer=True, nonnegative=True)
    for g in range(len(plan.stores)):
        expr = plan.address_coord(g, tid)
        fns = [sympy.lambdify(tid, sympy.sympify(e), "math") for e in expr]
        for t in range(own.threads):
            assert plan.address_coord(g, t) == plan.tables[g][t]
            assert tuple(int(f(t)) for f in fns) == plan.tables[g][t]


def bit_ownership(draw, shape):
    """An ownership whose thread and value indices each move one coordinate bit per index
    bit: lanes and values are a split of a permutation of the tile's coordinate bits."""
    rows, cols = shape
    bits = [(0, 1 << k) for k in range(rows.bit_length() - 1)]
    bits += [(1, 1 << k) for k in range(cols.bit_length() - 1)]
    if draw(st.booleans()):  # an MMA-like start: value bit 0 and lane bits 0, 1 on columns
        lane = [(1, 2), (1, 4)]
        rest = [b for b in bits if b not in lane and b != (1, 1)]
        rest = draw(st.permutations(rest))
        lane += rest[:3]
        value = [(1, 1)] + rest[3:]
    else:
        perm = draw(st.permutations(bits))
        lane, value = perm[:5], perm[5:]
    lane_modes = [(2, a, s) for a, s in lane]
    value_modes = [(2, a, s) for a, s in value]
    return Ownership.from_modes(shape, lane_modes, value_modes, "drawn")


@settings(max_examples=60, deadline=None)
@given(st.data(), st.sampled_from([(16, 16), (8, 32), (32, 16), (16, 64)]), st.sampled_from([0, 1]))
def test_plans_exist_exactly_when_brute_force_says(data, shape, axis):
    own = bit_ownership(data.draw, shape)
    exists = plan_exists(own, axis)
    if exists:
        assert_stores_by_ownership(StmatrixPlan(own, axis))
        return
    with pytest.raises(StmatrixError) as err:
        StmatrixPlan(own, axis)
    text = str(err.value)
    if "packed register" in text:  # that register has neither form, by brute force
        reg = int(text.split("packed register ")[1].split()[0])
        warp = int(text.split(" of warp ")[1].split()[0])
        assert not storable(own, warp, reg, axis, False)
        assert not storable(own, warp, reg, axis, True)
    else:  # every register has a form, but not one common form
        regs = own.values // 2
        assert all(
            storable(own, 0, r, axis, False) or storable(own, 0, r, axis, True) for r in range(regs)
        )


@pytest.mark.parametrize(
    "own,axis,match",
    [
        (Ownership(Layout((32, 3), (1, 32)), (32, 3)), 1, "pairs of 16-bit slots"),
        (Ownership(Layout((16, 2), (1, 16)), (16, 2)), 1, "whole warps"),
        (Ownership(MMA_M16N8K16_C_TV, (16, 8)), 2, "axis 0 or 1"),
        (Ownership(MMA_M16N8K16_C_TV, (16, 8)), True, "axis 0 or 1"),
        (Ownership(Layout((32, 4), (4, 1)), (32, 4)), 1, "packed register 0"),
    ],
)
def test_refusals(own, axis, match):
    with pytest.raises(StmatrixError, match=match):
        StmatrixPlan(own, axis)


def test_not_an_ownership():
    with pytest.raises(StmatrixError, match="expected an Ownership"):
        StmatrixPlan("C", 1)
