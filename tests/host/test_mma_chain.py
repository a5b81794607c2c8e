"""Chaining an ``mma.sync`` accumulator into the next MMA's A operand
(:mod:`tylo.nvgpu.warp.chain`).

The proof's defining property is checked three independent ways: against the ownerships'
own coordinates (``Ownership.coords``), against the fragments the PTX ISA defines for
m16n8k16 (9.7.14.5.8: group ``g = lane >> 2``, thread-in-group ``c = lane & 3``), decoded
here by hand, and against a brute-force search for a static slot map, which also decides
every refusal: the proof refuses exactly when no map exists.
"""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tylo import dtypes as dt
from tylo.layouts import Layout
from tylo.layouts.tv import LDMATRIX_X4_DST_TV, MMA_M16N8K16_B_TV
from tylo.nvgpu.warp.chain import ChainProof, accumulator_as_a_operand, prove_chain
from tylo.nvgpu.warp.mma import MMAAtom, PlanError, TiledMMA
from tylo.tile.fragment import Fragment
from tylo.tile.ownership import Ownership

DTYPES = [dt.bf16, dt.f16]


def plan(wm=1, wn=1, rm=1, rn=1, k=16, d=dt.bf16):
    return TiledMMA(MMAAtom((16, 8, 16), d), warps=(wm, wn), repeat=(rm, rn), k=k)


def brute_force_map(acc: Ownership, nxt: TiledMMA):
    """For each k-step, the accumulator slot of each A slot that holds its coordinate in
    every thread, found by trying every slot with ``coords``; None when some A slot has none
    (or the shapes / thread counts differ)."""
    m, _, k = nxt.size
    a = nxt.operand_ownership("a", k_steps=1)
    if acc.shape != (m, k) or acc.threads != a.threads:
        return None
    held = [acc.coords(t) for t in range(acc.threads)]
    need = [a.coords(t) for t in range(a.threads)]
    out = []
    for s in range(nxt.k_steps):
        row = []
        for v in range(a.values):
            hit = [
                u
                for u in range(acc.values)
                if all(
                    held[t][u] == (need[t][v][0], need[t][v][1] + 16 * s)
                    for t in range(acc.threads)
                )
            ]
            if not hit:
                return None
            row.append(hit[0])
        out.append(tuple(row))
    return tuple(out)


def isa_acc(lane_tid: int, first: TiledMMA) -> dict[tuple[int, int], int]:
    """Coordinate -> slot of thread ``lane_tid``'s accumulator, from the PTX ISA picture and
    the plan's documented order (values: atom, then repeats along M, then along N)."""
    wm, _ = first.warps
    rm, rn = first.repeat
    lane, w = lane_tid % 32, lane_tid // 32
    g, c = lane >> 2, lane & 3
    row0 = (w % wm) * 16 * rm
    col0 = (w // wm) * 8 * rn
    out = {}
    for j, i, q in itertools.product(range(rn), range(rm), range(4)):
        coord = (row0 + 16 * i + g + 8 * (q >> 1), col0 + 8 * j + 2 * c + (q & 1))
        out[coord] = q + 4 * (i + rm * j)
    return out


def isa_a(lane_tid: int, nxt: TiledMMA, s: int) -> list[tuple[int, int]]:
    """Thread ``lane_tid``'s A operand coordinates for k-step ``s``, in slot order (a0..a7
    of each M repeat), from the PTX ISA picture."""
    wm, _ = nxt.warps
    lane, w = lane_tid % 32, lane_tid // 32
    g, c = lane >> 2, lane & 3
    row0 = (w % wm) * 16 * nxt.repeat[0]
    return [
        (row0 + 16 * i + g + 8 * ((q >> 1) & 1), 16 * s + 2 * c + (q & 1) + 8 * (q >> 2))
        for i in range(nxt.repeat[0])
        for q in range(8)
    ]


chains = st.builds(
    lambda wm, rm, half, rn2, k1, d: (
        plan(wm, 1, rm, 2 * half, 16 * k1, d),
        plan(wm, 1, rm, rn2, 16 * half, d),
    ),
    wm=st.sampled_from([1, 2, 4]),
    rm=st.integers(1, 3),
    half=st.integers(1, 4),  # the first MMA's N is 16 * half: an even number of n8 atoms
    rn2=st.integers(1, 4),
    k1=st.integers(1, 2),
    d=st.sampled_from(DTYPES),
)


@settings(max_examples=15, deadline=None)
@given(chains)
def test_proof_property_against_ownership_coords(pair):
    first, nxt = pair
    acc = first.acc_ownership
    proof = prove_chain(acc, nxt)
    a = proof.a
    assert isinstance(proof, ChainProof) and len(proof.slots) == nxt.k_steps
    for t in range(nxt.threads):
        held, need = acc.coords(t), a.coords(t)
        for s, row in enumerate(proof.slots):
            for v, u in enumerate(row):
                assert held[u] == (need[v][0], need[v][1] + 16 * s)
    # every accumulator register is used exactly once over the k-steps
    used = sorted(u for row in proof.slots for u in row)
    assert used == list(range(acc.values))
    # "packed in pairs": each A register is two adjacent accumulator slots, low first
    for s in range(nxt.k_steps):
        for lo, hi in proof.registers(s):
            assert hi == lo + 1 and lo % 2 == 0
    assert proof.slots == brute_force_map(acc, nxt)


@settings(max_examples=25, deadline=None)
@given(chains)
def test_proof_agrees_with_the_ptx_isa_fragments(pair):
    """A simulated warp: thread t holds S at its ISA accumulator coordinates; the slots the
    proof picks give, in every A slot, S at the ISA A coordinate of the next MMA."""
    first, nxt = pair
    proof = prove_chain(first.acc_ownership, nxt)
    for t in range(nxt.threads):
        slot_of = isa_acc(t, first)
        for s in range(nxt.k_steps):
            assert [slot_of[c] for c in isa_a(t, nxt, s)] == list(proof.slots[s])


def test_two_n8_atoms_make_one_k16_operand():
    """The streaming-attention case: S over (16 * wm, 16) of two n8 atoms side by side."""
    for wm in (1, 4):
        first = plan(wm, 1, 1, 2, 64)
        nxt = plan(wm, 1, 1, 8, 16)
        proof = prove_chain(first.acc_ownership, nxt)
        assert proof.registers(0) == ((0, 1), (2, 3), (4, 5), (6, 7))
        table = first.acc_ownership.table()[:, list(proof.slots[0])]
        np.testing.assert_array_equal(table, proof.a.table())


@settings(max_examples=40, deadline=None)
@given(
    wm=st.sampled_from([1, 2, 4]),
    rm=st.integers(1, 3),
    rn1=st.integers(1, 6),
    change=st.sets(st.sampled_from(["wm", "wn1", "wn2", "rm", "transpose"])),
)
def test_accepts_exactly_when_a_static_map_exists(wm, rm, rn1, change):
    """Pairs of plans with any subset of mismatches (warps along M, warps along N of either,
    M repeats, a transposed accumulator, odd widths): the proof succeeds iff brute force
    finds a map, and every refusal is a typed PlanError."""
    first = plan(wm, 2 if "wn1" in change else 1, rm, rn1, 16)
    acc = first.acc_ownership.transpose() if "transpose" in change else first.acc_ownership
    wm2 = 2 * wm if "wm" in change else wm
    rm2 = rm + 1 if "rm" in change else rm
    wn2 = 2 if "wn2" in change else 1
    cols = acc.shape[1]
    if cols % 16:
        with pytest.raises(PlanError, match="not a multiple of the atom's K"):
            prove_chain(acc, plan(wm2, wn2, rm2, 1, 16))
        return
    nxt = plan(wm2, wn2, rm2, 1, cols)
    want = brute_force_map(acc, nxt)
    if want is None:
        with pytest.raises(PlanError, match="prove_chain"):
            prove_chain(acc, nxt)
    else:
        assert prove_chain(acc, nxt).slots == want
        assert not change and rn1 % 2 == 0  # only matching plans chain


def test_transposed_accumulator_refused_with_a_true_witness():
    first = plan(1, 1, 1, 2, 16)  # (16, 16): transposing keeps the shape
    acc = first.acc_ownership.transpose()
    nxt = plan(1, 1, 1, 1, 16)
    assert brute_force_map(acc, nxt) is None
    with pytest.raises(PlanError, match=r"thread (\d+) needs \((\d+), (\d+)\)") as err:
        prove_chain(acc, nxt)
    found = re.search(r"thread (\d+) needs \((\d+), (\d+)\)", str(err.value))
    t, r, c = (int(x) for x in found.groups())
    assert (r, c) in nxt.operand_ownership("a", k_steps=1).coords(t)
    assert (r, c) not in acc.coords(t)  # the witness is true: thread t does not hold it


def test_accumulator_of_other_atoms_refused():
    nxt = plan(1, 1, 1, 1, 16)
    others = [
        Ownership(MMA_M16N8K16_B_TV, (16, 16), "B atom seen as (16, 16)"),
        Ownership(LDMATRIX_X4_DST_TV, (16, 16), "ldmatrix destination"),
        Ownership(Layout((32, 8), (8, 1)), (16, 16), "row-major lanes"),
    ]
    for acc in others:
        assert brute_force_map(acc, nxt) is None
        with pytest.raises(PlanError, match="is not the A operand|threads"):
            prove_chain(acc, nxt)


def test_witness_names_threads_whose_slots_differ():
    """Every thread holds what it needs but in a slot that depends on the thread: no static
    register map exists, and the message names two threads that disagree. (A layout cannot
    express this, so the tables are built by hand and given to the witness directly.)"""
    from tylo.nvgpu.warp.chain import _witness

    a = plan().operand_ownership("a", k_steps=1)
    want = a.table()
    tc = want.copy()
    tc[1] = want[1][[1, 0, 2, 3, 4, 5, 6, 7]]  # thread 1 holds slots 0 and 1 swapped
    msg = _witness(tc, want, 0, "head", "")
    assert "A slot 0 is accumulator slot 0 in thread 0 but slot 1 in thread 1" in msg
    msg = _witness(tc[:, 1:], want, 0, "head", "")
    assert "thread 0 needs (0, 0) in A slot 0 but does not hold it" in msg


@pytest.mark.parametrize(
    ("acc", "nxt", "match"),
    [
        (lambda: plan(1, 1, 1, 3).acc_ownership, plan(), "24 columns wide, not a multiple"),
        (lambda: plan(1, 1, 1, 2).acc_ownership, plan(1, 1, 2, 1, 16), r"covers \(16, 16\)"),
        (lambda: plan(1, 1, 1, 4).acc_ownership, plan(1, 1, 1, 1, 16), "k = 32"),
        (lambda: plan(2, 1, 1, 2).acc_ownership, plan(1, 1, 2, 1, 16), "64 threads"),
        (lambda: plan(1, 1, 1, 2).acc_ownership, plan(1, 2, 1, 1, 16), "replicates A"),
        (lambda: plan(1, 2, 2, 1).acc_ownership, plan(2, 1, 1, 1, 16), "is not the A operand"),
        (lambda: plan().acc_ownership.reduced(1), plan(), "not a multiple"),
        (lambda: Layout((32, 8)), plan(), "must be an Ownership"),
        (lambda: Ownership(Layout((32, 8)), (256,)), plan(), "rank 1"),
        (lambda: Ownership(Layout((32, 8)), (16, 4, 4)), plan(), "rank 3"),
    ],
)
def test_refusals(acc, nxt, match):
    a = acc()
    with pytest.raises(PlanError, match=match):
        prove_chain(a, nxt)
    if isinstance(a, Ownership) and a.rank == 2:
        assert brute_force_map(a, nxt) is None


def test_plan_type_refused():
    acc = plan(1, 1, 1, 2).acc_ownership
    for bad in (None, "plan", MMAAtom((16, 8, 16), dt.bf16)):
        with pytest.raises(PlanError, match="must be a TiledMMA"):
            prove_chain(acc, bad)
        with pytest.raises(PlanError, match="must be a TiledMMA"):
            accumulator_as_a_operand(Fragment([0.0] * 8, acc), bad)


def test_conversion_refusals_before_any_code():
    first = plan(1, 1, 1, 2)
    acc = Fragment([0.0] * 8, first.acc_ownership)
    with pytest.raises(PlanError, match="dtype f16 is not the A operand's dtype bf16"):
        accumulator_as_a_operand(acc, first, dt.f16)
    with pytest.raises(PlanError, match="accumulator_as_a_operand"):
        accumulator_as_a_operand(acc, first, "not a dtype")
    with pytest.raises(PlanError, match="acc must be a Fragment"):
        accumulator_as_a_operand([0.0] * 8, first)
    packed = Fragment([0] * 4, first.acc_ownership, packed=dt.bf16)
    with pytest.raises(PlanError, match="already packed"):
        accumulator_as_a_operand(packed, first)
    wrong = Fragment([0.0] * 8, first.acc_ownership.transpose())
    with pytest.raises(PlanError, match="is not the A operand"):
        accumulator_as_a_operand(wrong, first)


def test_registers_range_checked():
    proof = prove_chain(plan(1, 1, 1, 4).acc_ownership, plan(1, 1, 1, 1, 32))
    assert len(proof.registers(1)) == 4
    for bad in (-1, 2, 1.0, None):
        with pytest.raises(PlanError, match="out of range"):
            proof.registers(bad)


def test_module_doctests_and_all():
    import doctest

    import tylo.nvgpu.warp.chain as mod

    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0
    assert all(hasattr(mod, n) for n in mod.__all__) and mod.__all__ == sorted(mod.__all__)


def test_equivalent_layouts_chain_by_coordinates_not_by_form():
    """The proof compares coordinates: the accumulator written with split, nested modes and
    another name chains exactly like the plan's own; the same name over other coordinates
    does not."""
    first, nxt = plan(2, 1, 2, 4, 16), plan(2, 1, 2, 2, 32)
    own = first.acc_ownership
    th, va = own._as_mode_lists()
    split = []
    for e, ax, step in th:  # every thread mode of extent 4 or 8 as two nested digits
        if e in (4, 8) and ax is not None:
            split += [(2, ax, step), (e // 2, ax, 2 * step)]
        else:
            split.append((e, ax, step))
    same = Ownership.from_modes(own.shape, split, va, "S, written differently")
    assert same.tv != own.tv and np.array_equal(same.table(), own.table())
    assert prove_chain(same, nxt).slots == prove_chain(own, nxt).slots
    swapped = Ownership.from_modes(own.shape, th, [va[1], va[0]] + va[2:], own.name)
    assert swapped.name == own.name and brute_force_map(swapped, nxt) is not None
    proof = prove_chain(swapped, nxt)  # a different register map, derived, not assumed
    assert proof.slots != prove_chain(own, nxt).slots
    assert proof.registers(0)[0] == (0, 2)
