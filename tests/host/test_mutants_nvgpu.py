"""tylo.nvgpu behaviour pinned by tests written to kill mutants that survived tools/mutate.py
(traced to NVVM IR only: no libNVVM, no GPU).

- ``tma.wait_stores`` waits for the group count it is given (0 by default: every store) with
  ``.read`` unless told otherwise, and refuses counts PTX cannot encode (PTX ISA
  ``cp.async.bulk.wait_group``: an integer constant; tylo allows 0..63).
- A TMA box's shared tile must start where the swizzle's pattern starts: 1024, 512 and 256
  bytes for 128B, 64B and 32B (PTX ISA 5.5.7, "Swizzling Modes"), 128 bytes without one
  (CUDA driver API: the shared address of a bulk tensor copy is 128-byte aligned).
"""

from __future__ import annotations

import pytest

import tylo
from tylo.layouts import ComposedLayout, Layout, Swizzle, dim
from tylo.nvgpu import tma
from tylo.nvgpu.mbarrier import Barriers
from tylo.tile.views import SharedTile

Coord = tylo.Int(min=0, max=2**20)
Inner = tylo.Int(min=0, max=2**20, multiple_of=8)
M, K, LD = dim("M"), dim("K"), dim("ld", multiple_of=8)


def plan_for(swizzle: str):
    cols = {"none": 16, "32B": 16, "64B": 32, "128B": 64}[swizzle]  # bf16: one swizzled row
    box = (8, cols)
    smem = Layout(box, (cols, 1))
    if swizzle != "none":
        bits = {"32B": 1, "64B": 2, "128B": 3}[swizzle]
        smem = ComposedLayout(Swizzle(bits, 3, 3), 0, smem)
    return tma.TensorMapPlan(tylo.bf16, Layout((M, K), (LD, 1)), box, swizzle, smem)


@tylo.kernel
def load_at(out, tm, r0: Coord, c0: Inner, align: tylo.Static):
    plan = tm.plan
    rows, cols = plan.box
    tile = SharedTile(tylo.shared(plan.dtype, rows * cols, align=align), plan.smem_layout)
    bars = Barriers(1)
    if tylo.thread_idx.x == 0:
        bars.init(0, 1)
    tylo.sync_threads()
    if tylo.thread_idx.x == 0:
        bars.arrive_expect_tx(0, plan.box_bytes)
        tma.load(tm, tile, (r0, c0), bars, 0)
    bars.wait(0, 0)
    out[tylo.thread_idx.x] = tile.storage[tylo.thread_idx.x]


ISA_ALIGN = {"none": 128, "32B": 256, "64B": 512, "128B": 1024}


@pytest.mark.parametrize("swizzle", sorted(ISA_ALIGN))
def test_box_tiles_start_where_the_swizzle_pattern_does(swizzle):
    plan = plan_for(swizzle)
    need = ISA_ALIGN[swizzle]
    ir = load_at.trace(tylo.bf16, plan, Coord, Inner, need, block=128).llvm
    assert "cp.async.bulk.tensor.2d" in ir
    with pytest.raises(tylo.TraceError, match=f"align={need}") as info:
        load_at.trace(tylo.bf16, plan, Coord, Inner, need // 2, block=128)
    assert isinstance(info.value.original, tma.TMAError)


@tylo.kernel
def waits(out, n: tylo.Static, read: tylo.Static):
    if tylo.thread_idx.x == 0:
        tma.commit_stores()
        if n is None:
            tma.wait_stores()
        else:
            tma.wait_stores(n, read=read)
    out[tylo.thread_idx.x] = 1.0


@pytest.mark.parametrize(
    "n,read,text",
    [
        (None, True, "cp.async.bulk.wait_group.read 0;"),
        (0, False, "cp.async.bulk.wait_group 0;"),
        (5, True, "cp.async.bulk.wait_group.read 5;"),
        (63, False, "cp.async.bulk.wait_group 63;"),
    ],
)
def test_wait_stores_waits_for_the_count_given(n, read, text):
    ir = waits.trace(tylo.f32, n, read, block=32).llvm
    assert text in ir and "cp.async.bulk.commit_group;" in ir
    assert ir.count("cp.async.bulk.wait_group") == 1


@pytest.mark.parametrize("n", [-1, 64, 2**31, 1.0, "0"])
def test_wait_stores_refuses_counts_ptx_cannot_encode(n):
    with pytest.raises(tylo.TraceError, match=r"\[0, 63\]") as info:
        waits.trace(tylo.f32, n, True, block=32)
    assert isinstance(info.value.original, tma.TMAError)


def test_a_one_dimensional_box_is_written_contiguously():
    plan = tma.TensorMapPlan(tylo.f32, Layout(M, 1), (64,), "none", Layout(64, 1))
    assert plan.box_layout() == Layout(64, 1) and plan.order == (0,)
    with pytest.raises(tma.TMAError):
        tma.TensorMapPlan(tylo.f32, Layout(M, 1), (64,), "none", Layout(64, 2))


@tylo.kernel
def load_u8(out, tm, c0: tylo.Static):
    plan = tm.plan
    tile = SharedTile(tylo.shared(plan.dtype, plan.box[0] * plan.box[1], align=128),
                      plan.smem_layout)  # fmt: skip
    bars = Barriers(1)
    if tylo.thread_idx.x == 0:
        bars.init(0, 1)
        bars.arrive_expect_tx(0, plan.box_bytes)
        tma.load(tm, tile, (0, c0), bars, 0)
    bars.wait(0, 0)
    out[tylo.thread_idx.x] = tile.storage[tylo.thread_idx.x]


@pytest.mark.parametrize("c0,ok", [(0, True), (16, True), (32, True), (8, False), (17, False)])
def test_a_box_starts_on_16_bytes_of_one_byte_elements(c0, ok):
    """u8: the contiguous coordinate must be a multiple of 16 elements (16 bytes)."""
    plan = tma.TensorMapPlan(tylo.u8, Layout((M, K), (LD * 2, 1)), (8, 16), "none",
                             Layout((8, 16), (16, 1)))  # fmt: skip
    if ok:
        assert "cp.async.bulk.tensor.2d" in load_u8.trace(tylo.u8, plan, c0, block=32).llvm
    else:
        with pytest.raises(tylo.TraceError, match="multiple of 16 elements"):
            load_u8.trace(tylo.u8, plan, c0, block=32)


def test_ldmatrix_matrix_rows_of_the_mma_a_operand():
    """PTX ISA mma.m16n8k16 A: register r holds a_{2r}, a_{2r+1}; its 8x8 matrix has row i
    at (row i + 8 * (r % 2), column 8 * (r // 2)), read by lanes 4i..4i+3; transposed or
    along the other axis it is no 8-contiguous matrix."""
    from tylo.nvgpu.warp.ldmatrix import matrix_rows
    from tylo.nvgpu.warp.mma import MMAAtom

    a = MMAAtom((16, 8, 16), tylo.bf16).a
    for r in range(4):
        want = [(i + 8 * (r % 2), 8 * (r // 2)) for i in range(8)]
        assert matrix_rows(a, 0, r, 1, False) == want
        assert matrix_rows(a, 0, r, 0, False) is None
        assert matrix_rows(a, 0, r, 1, True) is None


def _mma_plan():
    from tylo.nvgpu.warp.mma import MMAAtom, TiledMMA

    return TiledMMA(MMAAtom((16, 8, 16), tylo.bf16), warps=(1, 1), repeat=(1, 1), k=16)


@tylo.kernel
def load_a(out, what: tylo.Static):
    from tylo.nvgpu.warp.ldmatrix import load_operand

    plan = _mma_plan()
    buf = tylo.shared(tylo.bf16 if what != "dtype" else tylo.f16, 256)
    shape = (16, 16) if what != "shape" else (16, 8)
    stride = {"colmajor": (1, 16), "neither": (32, 2)}.get(what, (shape[1], 1))
    if what == "neither":
        buf = tylo.shared(tylo.bf16, 512)
    tile = buf if what == "storage" else SharedTile(buf, Layout(shape, stride))
    load_operand(plan, "a", tile, tylo.thread_idx.x, 0)
    out[tylo.thread_idx.x] = 1


@pytest.mark.parametrize(
    "what,match",
    [("storage", "must be a SharedTile"), ("shape", r"tile has shape \(16, 8\)"),
     ("dtype", "holds f16, the atom takes bf16"), ("neither", "contiguous along neither")],
)  # fmt: skip
def test_operand_loads_refuse_what_the_plan_cannot_read(what, match):
    from tylo.nvgpu.errors import PlanError

    assert "ldmatrix" in load_a.trace(tylo.u32, "ok", block=32).llvm
    with pytest.raises(tylo.TraceError, match=match) as info:
        load_a.trace(tylo.u32, what, block=32)
    assert isinstance(info.value.original, PlanError)


def test_operand_tiles_contiguous_along_m_load_transposed():
    """A tile contiguous along K loads plainly; one contiguous along M (column-major)
    through ldmatrix .trans."""
    plain = load_a.trace(tylo.u32, "ok", block=32).llvm
    trans = load_a.trace(tylo.u32, "colmajor", block=32).llvm
    assert "ldmatrix" in plain and ".trans" not in plain
    assert "ldmatrix" in trans and ".trans" in trans


@pytest.mark.parametrize(
    "layout,extra",
    [
        (Layout((16, 64), (64, 1)), 7),  # 128-byte rows: eight rows in one 16-byte bank group
        (Layout((16, 64), (72, 1)), 0),  # rows padded to 144 bytes: eight different groups
        (Layout((16, 64), (32, 1)), 3),  # 64-byte rows: pairs of rows share a group
        (ComposedLayout(Swizzle(3, 3, 3), 0, Layout((16, 64), (64, 1))), 0),  # 128B swizzle
        # rows 0-7 in one group, rows 8-15 in another: each phase's eight rows (not nine)
        (Layout(((8, 2), 64), ((64, 16), 1)), 7),
    ],
    ids=["row128", "padded", "row64", "swizzled", "two-halves"],
)
def test_ldmatrix_bank_conflicts_count_16_byte_groups_of_128_bytes(layout, extra):
    """Shared memory serves 128 bytes (eight 16-byte groups) per wavefront; eight ldmatrix
    row addresses falling into g distinct groups cost 8 // g - 1 extra wavefronts."""
    from tylo.nvgpu.warp.ldmatrix import operand_loads
    from tylo.nvgpu.warp.mma import MMAAtom, TiledMMA

    plan = TiledMMA(MMAAtom((16, 8, 16), tylo.bf16), warps=(1, 1), repeat=(1, 1), k=64)
    assert operand_loads(plan, "a").bank_conflicts(layout) == extra


def test_mma_plan_defaults_and_list_shapes():
    from tylo.nvgpu.warp.mma import MMAAtom, TiledMMA

    atom = MMAAtom([16, 8, 16], tylo.bf16)  # a list names the same atom
    assert atom.shape == (16, 8, 16) and atom == MMAAtom((16, 8, 16), tylo.bf16)
    plan = TiledMMA(atom)
    assert (plan.warps, plan.repeat) == ((1, 1), (1, 1))
    assert plan.size == (16, 8, 16) and plan.threads == 32


def test_a_plans_operand_ownerships_are_its_atoms_for_one_warp():
    from tylo.nvgpu.warp.mma import MMAAtom, TiledMMA

    atom = MMAAtom((16, 8, 16), tylo.bf16)
    plan = TiledMMA(atom, warps=(1, 1), repeat=(1, 1), k=16)
    for own, ref in ((plan.a_ownership, atom.a), (plan.b_ownership, atom.b)):
        assert own.values == ref.values and own.threads == 32
        assert [own.coord(t, v) for t in range(32) for v in range(own.values)] == [
            ref.coord(t, v) for t in range(32) for v in range(ref.values)
        ]


@tylo.kernel
def load_step(out, step: tylo.Static):
    from tylo.nvgpu.warp.mma import load_operands

    plan = _mma_plan()
    a = SharedTile(tylo.shared(tylo.bf16, 256), Layout((16, 16), (16, 1)))
    b = SharedTile(tylo.shared(tylo.bf16, 128), Layout((8, 16), (16, 1)))
    load_operands(plan, a, b, tylo.thread_idx.x, step)
    out[tylo.thread_idx.x] = 1


@pytest.mark.parametrize("step", [-1, 1, 2])
def test_load_operands_refuses_k_steps_outside_the_plan(step):
    assert "ldmatrix" in load_step.trace(tylo.u32, 0, block=32).llvm
    with pytest.raises(
        tylo.TraceError, match=r"k_step -?\d+ (is )?(out of range|not an int in) 0\.\.0"
    ):
        load_step.trace(tylo.u32, step, block=32)


@tylo.kernel
def mma_once(out, swap: tylo.Static):
    from tylo.nvgpu.warp.mma import load_operands, mma_atoms, zero_accumulator

    plan = _mma_plan()
    a = SharedTile(tylo.shared(tylo.bf16, 256), Layout((16, 16), (16, 1)))
    b = SharedTile(tylo.shared(tylo.bf16, 128), Layout((8, 16), (16, 1)))
    fa, fb = load_operands(plan, a, b, tylo.thread_idx.x, 0)
    if swap:  # B's fragment (2 registers) where A's (4) belongs
        fa = fb
    acc = mma_atoms(plan, fa, fb, zero_accumulator(plan))
    out[tylo.thread_idx.x] = acc.values[0]


def test_mma_atoms_take_the_operands_load_operands_made():
    ir = mma_once.trace(tylo.f32, False, block=32).llvm
    assert "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32" in ir
    with pytest.raises(tylo.TraceError, match="operand A must be a packed fragment of 4"):
        mma_once.trace(tylo.f32, True, block=32)


@tylo.kernel
def mma_repeats(out, rm: tylo.Static, rn: tylo.Static):
    from tylo.nvgpu.warp.mma import MMAAtom, TiledMMA, mma, zero_accumulator

    plan = TiledMMA(MMAAtom((16, 8, 16), tylo.bf16), warps=(1, 1), repeat=(rm, rn), k=32)
    a = SharedTile(tylo.shared(tylo.bf16, 16 * rm * 32), Layout((16 * rm, 32), (32, 1)))
    b = SharedTile(tylo.shared(tylo.bf16, 8 * rn * 32), Layout((8 * rn, 32), (32, 1)))
    acc = mma(plan, a, b, zero_accumulator(plan), tylo.thread_idx.x)
    for v in acc.values:
        out[tylo.thread_idx.x] = v


@pytest.mark.parametrize("rm,rn", [(1, 1), (2, 1), (1, 2), (2, 2), (3, 2), (2, 3)])
def test_mma_issues_every_atom_of_every_k_step_once(rm, rn):
    """rm * rn mma.sync per k-step (two k-steps here), whatever order they are issued in."""
    ir = mma_repeats.trace(tylo.f32, rm, rn, block=32).llvm
    assert ir.count("mma.sync.aligned.m16n8k16") == 2 * rm * rn


@tylo.kernel
def store_c(out, what: tylo.Static):
    from tylo.nvgpu.warp.mma import zero_accumulator
    from tylo.nvgpu.warp.stmatrix import store_fragment

    frag = zero_accumulator(_mma_plan())  # f32 C fragment over (16, 8)
    dtype = tylo.f32 if what == "dtype" else tylo.bf16
    shape = (16, 16) if what == "shape" else (16, 8)
    stride = {"colmajor": (1, 16), "neither": (16, 2), "misaligned": (12, 1)}.get(
        what, (shape[1], 1)
    )
    buf = tylo.shared(dtype, 512)
    tile = buf if what == "storage" else SharedTile(buf, Layout(shape, stride))
    store_fragment(frag if what != "values" else [1.0], tile, tylo.thread_idx.x)
    out[tylo.thread_idx.x] = 1


@pytest.mark.parametrize(
    "what,match",
    [("storage", "must be a SharedTile"), ("values", "expected a Fragment"),
     ("dtype", "stores 16-bit elements"), ("shape", r"covers \(16, 8\), the tile is \(16, 16\)"),
     ("neither", "contiguous along neither"),
     ("misaligned", "8 consecutive elements from a 16-byte boundary")],
)  # fmt: skip
def test_stmatrix_stores_refuse_what_they_cannot_write(what, match):
    ok = store_c.trace(tylo.u32, "ok", block=32, target="sm_90a").llvm
    assert "stmatrix" in ok and ".trans" not in ok
    assert ".trans" in store_c.trace(tylo.u32, "colmajor", block=32, target="sm_90a").llvm
    with pytest.raises(tylo.TraceError, match=match):
        store_c.trace(tylo.u32, what, block=32, target="sm_90a")


def test_stmatrix_plans_store_along_k_by_default():
    from tylo.layouts.tv import MMA_M16N8K16_C_TV
    from tylo.nvgpu.warp.stmatrix import StmatrixPlan
    from tylo.tile.ownership import Ownership

    plan = StmatrixPlan(Ownership(MMA_M16N8K16_C_TV, (16, 8)))
    assert plan.axis == 1 and not plan.trans


def test_a_one_register_fragment_is_one_x1_store():
    """An 8x8 bf16 matrix held the ldmatrix/stmatrix way (lane l: row l // 4, columns
    2 * (l % 4) + 0, 1): one packed register, one stmatrix.x1."""
    from tylo.nvgpu.warp.stmatrix import StmatrixPlan
    from tylo.tile.ownership import Ownership

    own = Ownership(Layout(((4, 8), 2), ((16, 1), 8)), (8, 8))
    plan = StmatrixPlan(own)
    assert [(s.registers, s.trans) for s in plan.stores] == [((0,), False)]
    assert [plan.row_coords(0, t)[0] for t in range(8)] == [(i, 0) for i in range(8)]
