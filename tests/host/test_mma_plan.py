"""MMA plans on the host: sizes and counts, invalid plans rejected with typed errors, proofs,
and the ldmatrix loads derived from ownership, checked by simulating ``ldmatrix`` (PTX ISA
semantics, decoded independently) on a shared tile whose elements hold their coordinates."""

from __future__ import annotations

import pytest

from tylo import dtypes as dt
from tylo.layouts import Layout, Swizzle, composition
from tylo.nvgpu.warp.ldmatrix import OperandLoads, operand_loads
from tylo.nvgpu.warp.mma import MMAAtom, PlanError, TiledMMA, size, threads

SEED = TiledMMA(MMAAtom((16, 8, 16), dt.bf16), warps=(2, 2), repeat=(2, 4), k=32)
BIG = TiledMMA(MMAAtom((16, 8, 16), dt.bf16), warps=(2, 4), repeat=(4, 8), k=32)


def test_seed_plan_sizes():
    assert size(SEED) == (64, 64, 32)
    assert threads(SEED) == 128
    assert SEED.acc_ownership.values == 32
    assert SEED.registers == {"acc": 32, "a": 8, "b": 8}
    assert SEED.k_steps == 2 and SEED.warp_tile == (32, 32)
    assert size(BIG) == (128, 256, 32) and threads(BIG) == 256
    assert BIG.registers["acc"] == 128


def test_atom():
    atom = MMAAtom((16, 8, 16), dt.f16)
    assert atom.instruction == "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
    assert atom.a.shape == (16, 16) and atom.b.shape == (8, 16) and atom.c.shape == (16, 8)
    assert all(o.covers_once for o in (atom.a, atom.b, atom.c))
    assert hash(SEED) == hash(TiledMMA(MMAAtom((16, 8, 16), dt.bf16), (2, 2), (2, 4), 32))


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: MMAAtom((16, 8, 8), dt.bf16), "not supported"),
        (lambda: MMAAtom((16, 8, 16), dt.f32), "bf16 or f16"),
        (lambda: MMAAtom((16, 8, 16), dt.bf16, dt.f16), "accumulator"),
        (lambda: TiledMMA("atom"), "MMAAtom"),
        (lambda: TiledMMA(MMAAtom(), warps=(0, 2)), "warps"),
        (lambda: TiledMMA(MMAAtom(), repeat=(2,)), "repeat"),
        (lambda: TiledMMA(MMAAtom(), k=24), "multiple"),
        (lambda: TiledMMA(MMAAtom(), warps=(8, 8)), "1024"),
    ],
)
def test_invalid_plans(make, match):
    with pytest.raises(PlanError, match=match):
        make()


def test_proofs_on_construction():
    assert set(SEED.proofs) == {
        "accumulator ownership is a bijection",
        "A ownership covers its tile once per warp",
        "B ownership covers its tile once per warp",
    }
    assert all(bool(v) for v in SEED.proofs.values())
    acc = SEED.acc_ownership
    assert acc.covers_once and acc.shape == (64, 64)
    # warp 1 is the second warp along M: its first row is 32
    assert acc.coord(32, 0) == (32, 0)
    assert acc.coord(64, 0) == (0, 32)


def _simulate_ldmatrix(loads: OperandLoads, layout, k_step: int) -> dict:
    """Run every ldmatrix of ``k_step`` as PTX defines it, on a shared tile whose element
    at offset ``layout(c)`` holds coordinate ``c``; returns {(thread, register): pair}."""
    rows, cols = loads.source.shape
    smem = {}
    for r in range(rows):
        for c in range(cols):
            smem[layout(r, c)] = (r, c)
    out = {}
    own = loads.source
    for w in range(own.threads // 32):
        for g, ld in enumerate(loads.loads):
            addr = [layout(*own.coord(32 * w + lane, loads.slot(g, k_step))) for lane in range(32)]
            for t in range(32):
                for j, reg in enumerate(ld.registers):
                    if ld.trans:  # element (row 2*(t%4)+v, column t//4) of the stored matrix
                        pair = tuple(smem[addr[8 * j + 2 * (t % 4) + v] + t // 4] for v in (0, 1))
                    else:  # row t//4, columns 2*(t%4) + v
                        pair = tuple(smem[addr[8 * j + t // 4] + 2 * (t % 4) + v] for v in (0, 1))
                    out[(32 * w + t, reg)] = pair
    return out


@pytest.mark.parametrize(
    "plan",
    [SEED, BIG, TiledMMA(MMAAtom(), (1, 1), (1, 1), 16), TiledMMA(MMAAtom(), (4, 1), (1, 3), 48)],
)
@pytest.mark.parametrize("operand", ["a", "b"])
@pytest.mark.parametrize("swizzle", [False, True])
def test_ldmatrix_registers_hold_the_ownership(plan, operand, swizzle):
    m, n, k = size(plan)
    rows = m if operand == "a" else n
    layout = Layout((rows, k), (k, 1))
    if swizzle and k >= 16:
        layout = composition(Swizzle(1 if k == 16 else 2, 3, 3), layout)
    loads = operand_loads(plan, operand)
    assert not loads.trans
    loads.prove(layout)
    frag = plan.operand_ownership(operand, k_steps=1)
    for ks in range(plan.k_steps):
        got = _simulate_ldmatrix(loads, layout, ks)
        for (t, reg), pair in got.items():
            want = tuple((r, c + 16 * ks) for r, c in (frag.coord(t, 2 * reg + v) for v in (0, 1)))
            assert pair == want, (t, reg, ks)


def test_transposed_operand_uses_trans():
    # B stored N-contiguous (e.g. attention's V): the loads must use ldmatrix .trans
    plan = SEED
    loads = OperandLoads(plan, "b", axis=0)
    assert loads.trans
    layout = Layout((64, 32), (1, 64))
    loads.prove(layout)
    frag = plan.operand_ownership("b", k_steps=1)
    got = _simulate_ldmatrix(loads, layout, 1)
    for (t, reg), pair in got.items():
        want = tuple((r, c + 16) for r, c in (frag.coord(t, 2 * reg + v) for v in (0, 1)))
        assert pair == want


def test_bank_conflicts():
    plain = Layout((64, 32), (32, 1))
    swz = composition(Swizzle(2, 3, 3), plain)
    loads = operand_loads(SEED, "a")
    assert loads.bank_conflicts(plain) == 3  # 8 rows of 64 bytes: 4-way on 2 lines
    assert loads.bank_conflicts(swz) == 0


def test_unaligned_shared_layout_is_rejected():
    loads = operand_loads(SEED, "a")
    padded = Layout((64, 32), (36, 1))  # 72-byte rows: rows are not 16-byte aligned
    with pytest.raises(PlanError, match="aligned"):
        loads.prove(padded)
    with pytest.raises(PlanError, match="contiguous"):
        loads.prove(composition(Swizzle(2, 2, 3), Layout((64, 32), (32, 1))))


def test_size_serves_plans_and_layouts():
    assert size(Layout((4, 8))) == 32 and size((2, 3)) == 6
    with pytest.raises(PlanError, match="neither"):
        size("x")
