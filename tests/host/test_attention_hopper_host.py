"""The Hopper attention kernel's host-side facts, without a GPU.

- The register-A conversion (``prove_register_a``): the wgmma m64nN f32 accumulator, packed
  in pairs, is the register A of N/16 k-steps; checked against the PTX ISA's fragment
  pictures decoded independently here, and every refusal's witness checked by brute force
  over hostile ownerships (permuted thread and value modes, transposed, warp-sized).
- The shared tiles: the TMA box layout and the wgmma operand layouts name the same bytes;
  the descriptors derive (K-major Q and K, MN-major V with the block stride as LBO).
- Configuration and argument refusals are typed and say what to do.
"""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tylo
from tylo.arrays import DeviceArray
from tylo.layouts import Layout
from tylo.layouts.tv import MMA_M16N8K16_C_TV, wgmma_m64_c_tv
from tylo.nvgpu.errors import PlanError
from tylo.nvgpu.warpgroup.chain import prove_register_a
from tylo.nvgpu.warpgroup.descriptor import derive_descriptor
from tylo.nvgpu.warpgroup.mma import WarpgroupMMAAtom
from tylo.ops.args import OpArgumentError
from tylo.ops.attention.hopper_host import check_inputs, choose_config, plans
from tylo.ops.attention.hopper_kernel import (
    BLOCK,
    HopperAttentionConfig,
    block_layout,
    box_layout,
    v_operand_layout,
)
from tylo.ops.attention.reference import AttentionInputError
from tylo.tile.ownership import Ownership

O_ATOM = WarpgroupMMAAtom((64, 64, 16), tylo.bf16, a="registers")


def ptx_c_coord(t: int, v: int) -> tuple[int, int]:
    """PTX ISA 9.7.15.5.1.2, the m64nNk16 D fragment: register d[v] of thread t."""
    warp, lane = divmod(t, 32)
    group, tig = divmod(lane, 4)
    return 16 * warp + group + 8 * ((v >> 1) & 1), 8 * (v >> 2) + 2 * tig + (v & 1)


def ptx_a_coord(t: int, v: int) -> tuple[int, int]:
    """PTX ISA 9.7.15.5.1.1, the m64k16 register A fragment: element v (a[v // 2], half
    v % 2) of thread t: rows 16*warp + group (+8 for a1, a3), columns 2*tig (+8 for a2, a3)."""
    warp, lane = divmod(t, 32)
    group, tig = divmod(lane, 4)
    reg, half = divmod(v, 2)
    return 16 * warp + group + 8 * (reg & 1), 2 * tig + half + 8 * (reg >> 1)


@pytest.mark.parametrize("n", [16, 32, 64, 128, 176, 256])
def test_accumulator_is_register_a_by_the_isa_pictures(n):
    proof = prove_register_a(WarpgroupMMAAtom((64, n, 16), tylo.bf16).c, O_ATOM)
    assert len(proof.slots) == n // 16
    for s, row in enumerate(proof.slots):
        for t in range(128):
            for v in range(8):
                r, c = ptx_a_coord(t, v)
                assert ptx_c_coord(t, row[v]) == (r, c + 16 * s), (n, s, t, v)
        # the packed pairs are consecutive accumulator registers: one cvt.rn.bf16x2 each
        assert all(hi == lo + 1 for lo, hi in proof.registers(s))


def test_register_a_ownership_is_the_isa_picture():
    own = O_ATOM.a_registers
    for t in range(128):
        assert own.coords(t) == [ptx_a_coord(t, v) for v in range(8)]


def _brute_force(acc: Ownership) -> list | None:
    """The slot map if one exists (every A slot fed by one accumulator slot in every
    thread), computed without the prover: None where none exists."""
    a = O_ATOM.a_registers
    out = []
    for s in range(acc.shape[1] // 16):
        row = []
        for v in range(a.values):
            found = [
                u
                for u in range(acc.values)
                if all(
                    acc.coord(t, u) == (a.coord(t, v)[0], a.coord(t, v)[1] + 16 * s)
                    for t in range(128)
                )
            ]
            if not found:
                return None
            row.append(found[0])
        out.append(tuple(row))
    return out


def _check_witness(acc: Ownership, message: str) -> None:
    """The refusal names a true witness: a thread lacking a coordinate, or two threads
    holding it in different slots."""
    a = O_ATOM.a_registers
    m = re.search(r"k-step (\d+).*thread (\d+) needs \((\d+), (\d+)\) in A slot (\d+)", message)
    if m:
        s, t, r, c, v = map(int, m.groups())
        assert (r, c) == (a.coord(t, v)[0], a.coord(t, v)[1] + 16 * s)
        assert (r, c) not in acc.coords(t)
        return
    m = re.search(
        r"k-step (\d+).*A slot (\d+) is accumulator slot (\d+) in thread (\d+) but slot (\d+) "
        r"in thread (\d+)",
        message,
    )
    assert m, message
    s, v, u0, t0, u1, t1 = map(int, m.groups())
    for t, u in ((t0, u0), (t1, u1)):
        want = (a.coord(t, v)[0], a.coord(t, v)[1] + 16 * s)
        assert acc.coord(t, u) == want
        assert [i for i, c in enumerate(acc.coords(t)) if c == want] == [u]
    assert u0 != u1


def test_slots_are_derived_not_assumed_consecutive():
    """Value modes swapped (v0 steps rows, v1 columns): still the register A, but each
    packed register pairs slots two apart; the prover finds them."""
    acc = Ownership(Layout(((4, 8, 4), (2, 2, 4)), ((128, 1, 16), (8, 64, 512))), (64, 32))
    proof = prove_register_a(acc, O_ATOM)
    assert list(proof.slots) == _brute_force(acc)
    assert proof.registers(0)[0] == (0, 2)


# the accumulator's modes: threads (4, 8, 4) and values (2, 2, N/8) over index m + 64 n
_T_STRIDES = (128, 1, 16)
_V_STRIDES = (64, 8, 512)


@settings(max_examples=40, deadline=None)
@given(
    perm_t=st.permutations(range(3)),
    perm_v=st.permutations(range(3)),
    n8=st.sampled_from([2, 4, 8]),
)
def test_prover_agrees_with_brute_force_on_permuted_ownerships(perm_t, perm_v, n8):
    """Permuting which strides the thread and value modes carry gives ownerships that may
    or may not be the register A; the prover accepts exactly those the brute force does,
    with the same slots, and every refusal's witness is true."""
    shape = ((4, 8, 4), (2, 2, n8))
    ts = tuple(_T_STRIDES[i] for i in perm_t)
    vs = tuple(_V_STRIDES[i] for i in perm_v)
    try:
        acc = Ownership(Layout(shape, (ts, vs)), (64, 8 * n8))
    except tylo.TyloError:
        return  # the strides reach outside the tile: not an ownership at all
    want = _brute_force(acc)
    if want is None:
        with pytest.raises(PlanError) as err:
            prove_register_a(acc, O_ATOM)
        _check_witness(acc, str(err.value))
    else:
        assert list(prove_register_a(acc, O_ATOM).slots) == want


@pytest.mark.parametrize(
    "acc",
    [
        WarpgroupMMAAtom((64, 64, 16), tylo.bf16).c.transpose(),
        Ownership(Layout(((32, 4), 16), ((1, 512), 32)), (64, 32)),  # rows by lane
    ],
    ids=["transposed", "rows-by-lane"],
)
def test_hostile_accumulators_are_refused_with_a_true_witness(acc):
    assert _brute_force(acc) is None
    with pytest.raises(PlanError, match="not the register A") as err:
        prove_register_a(acc, O_ATOM)
    _check_witness(acc, str(err.value))


@pytest.mark.parametrize(
    "acc, match",
    [
        (Ownership(MMA_M16N8K16_C_TV, (16, 8)), "covers"),
        (Ownership(wgmma_m64_c_tv(24), (64, 24)), "multiple of 16"),
        (Ownership(Layout((64, 32), (1, 64)), (64, 32)), "threads"),
    ],
    ids=["warp-mma", "n24", "other-threads"],
)
def test_shape_refusals(acc, match):
    with pytest.raises(PlanError, match=match):
        prove_register_a(acc, O_ATOM)


def test_atom_and_type_refusals():
    acc = WarpgroupMMAAtom((64, 64, 16), tylo.bf16).c
    with pytest.raises(PlanError, match="a='registers'"):
        prove_register_a(acc, WarpgroupMMAAtom((64, 64, 16), tylo.bf16))
    with pytest.raises(PlanError, match="Ownership"):
        prove_register_a(acc.tv, O_ATOM)
    with pytest.raises(PlanError, match="k_step"):
        prove_register_a(acc, O_ATOM).registers(4)


# -- the shared tiles ---------------------------------------------------------------------


@pytest.mark.parametrize("rows", [64, 128])
def test_tma_box_and_wgmma_block_are_the_same_bytes(rows):
    box, blk = box_layout(rows, tylo.bf16), block_layout(rows, tylo.bf16)
    for r, c in itertools.product(range(rows), range(BLOCK)):
        assert box(r, 0, 0, c) == blk(r, c)
    # a permutation of the block: every byte of the box written once
    assert sorted(blk(r, c) for r in range(rows) for c in range(BLOCK)) == list(range(rows * 64))


@pytest.mark.parametrize("d,bn", [(64, 128), (128, 64), (128, 128), (64, 32)])
def test_v_operand_is_v_tile_transposed(d, bn):
    """(n = d, k = key) of the B operand is V's element (key, d) in its column block."""
    cfg = HopperAttentionConfig(d=d, bn=bn, stages=1)
    lay, blk = v_operand_layout(cfg), block_layout(bn, tylo.bf16)
    for n, kv in itertools.product(range(d), range(bn)):
        j, c = divmod(n, BLOCK)
        assert lay(n, kv) == j * bn * BLOCK + blk(kv, c)


@pytest.mark.parametrize("d,bn", [(64, 128), (128, 64), (128, 128), (64, 16)])
def test_descriptors_derive(d, bn):
    cfg = HopperAttentionConfig(d=d, bn=bn, stages=1)
    for k16 in range(0, BLOCK, 16):
        dk = derive_descriptor(block_layout(bn, tylo.bf16), tylo.bf16, bn, k_offset=k16)
        assert (dk.major, dk.swizzle, dk.sbo) == ("K", "128B", 1024)
    for k16 in range(0, bn, 16):
        dv = derive_descriptor(v_operand_layout(cfg), tylo.bf16, d, k_offset=k16)
        assert (dv.major, dv.swizzle, dv.sbo, dv.start) == ("MN", "128B", 1024, 64 * k16)
        if d > BLOCK:  # the second 64-column block of V, bn * 64 elements on
            assert dv.lbo == bn * BLOCK * 2


@pytest.mark.parametrize("d, bn", [(64, 128), (128, 64), (128, 128)])
@pytest.mark.parametrize("dtype", [tylo.bf16, tylo.f16])
def test_plans_prove_the_boxes(d, bn, dtype):
    cfg = HopperAttentionConfig(d=d, dtype=dtype, bn=bn, stages=2)
    pq, pk, pv = plans(cfg)
    assert pq.box == (cfg.bm, 1, 1, 64) and pk.box == pv.box == (cfg.bn, 1, 1, 64)
    # TMA's dimensions D, L, H, B: a contiguous (B, H, L, D) tensor's strides increase
    assert pq.order == (3, 0, 1, 2) and pq.conditions == ()  # 16-byte strides, proved
    assert pq.box_bytes * cfg.blocks == cfg.q_elements() * dtype.nbytes


@pytest.mark.parametrize(
    "bad, match",
    [
        (dict(d=96), "64 or 128"),
        (dict(d=256), "64 or 128"),
        (dict(dtype=tylo.f32), "bf16 or f16"),
        (dict(dtype="int8"), "bf16 or f16"),
        (dict(bn=24), "multiple of 16"),
        (dict(bn=0), "multiple of 16"),
        (dict(bn=272), "multiple of 16"),
        (dict(stages=0), "stages"),
        (dict(causal=1), "bool"),
        (dict(pingpong="yes"), "bool"),
        (dict(overlap=None), "bool"),
        (dict(overlap=True, stages=1), "stages >= 2"),
        (dict(d=128, bn=176, overlap=True), "registers"),
        (dict(d=128, bn=192), "registers"),
        (dict(d=128, bn=256, stages=1), "registers"),
        (dict(d=128, bn=128, stages=4), "shared memory"),
    ],
)
def test_configs_that_do_not_fit_are_refused(bad, match):
    with pytest.raises(PlanError, match=match):
        HopperAttentionConfig(**bad)


def test_default_configs_fit():
    """d = 64 needs no compile to choose; d = 128's two candidates both fit (which one runs
    depends on whether the linker keeps setmaxnreg: tests/gpu checks both)."""
    for dtype, causal, pp in itertools.product((tylo.bf16, tylo.f16), (False, True), (0, 1)):
        cfg = choose_config(64, dtype, causal, pingpong=bool(pp))
        assert (cfg.bn, cfg.stages, cfg.pingpong) == (128, 4, bool(pp))
        assert cfg.shared_bytes() <= 227 * 1024 and cfg.bm == 128
    for bn, stages in ((128, 2), (64, 3)):
        cfg = HopperAttentionConfig(d=128, bn=bn, stages=stages)
        assert cfg.shared_bytes() <= 227 * 1024


# -- argument checks (fake device arrays: nothing is launched) ----------------------------


def _arr(shape, strides=None, dtype=tylo.bf16, ptr=1 << 20):
    if strides is None:
        strides = tuple(int(np.prod(shape[i + 1 :])) for i in range(len(shape)))
    return DeviceArray(ptr, tuple(shape), tuple(strides), dtype, 0)


def test_good_inputs_pass_and_unit_extents_get_legal_strides():
    q, k = _arr((1, 1, 5, 64), (7, 3, 64, 1)), _arr((1, 1, 9, 64))
    qv, kv, vv = check_inputs(q, k, k)
    assert qv.shape == (5, 1, 1, 64) and qv.strides == (64, 320, 320, 1)  # (L, H, B, D)
    assert kv.shape == (9, 1, 1, 64) and kv.strides == (64, 576, 576, 1)
    big = _arr((2, 3, 16, 64), (3 * 16 * 64 + 64, 16 * 64, 64, 1))  # a padded batch stride
    assert check_inputs(big, big, big)[0].strides == (64, 1024, 3136, 1)


@pytest.mark.parametrize(
    "q, k, match",
    [
        (_arr((2, 3, 16, 96)), _arr((2, 3, 16, 96)), "path='warp'"),
        (_arr((2, 3, 16, 64)), _arr((2, 3, 16, 128)), "disagree"),
        (_arr((2, 3, 16, 64)), _arr((2, 4, 16, 64)), "disagree"),
        (_arr((3, 16, 64)), _arr((3, 16, 64)), "4-D"),
        (_arr((2, 3, 16, 64), dtype=tylo.f32), _arr((2, 3, 16, 64), dtype=tylo.f32), "bf16"),
        (_arr((2, 3, 16, 64)), _arr((2, 3, 16, 64), dtype=tylo.f16), "bf16"),
        (_arr((2, 3, 16, 64), (3 * 16 * 68, 16 * 68, 68, 1)), _arr((2, 3, 16, 64)), "16 bytes"),
        (_arr((2, 3, 16, 64), (3 * 16 * 64 + 4, 16 * 64, 64, 1)), _arr((2, 3, 16, 64)), "batch"),
        (_arr((2, 3, 16, 64), (3 * 16 * 64, 16 * 64, 64, 2)), _arr((2, 3, 16, 64)), "contiguous"),
        (_arr((2, 3, 16, 64), ptr=(1 << 20) + 8), _arr((2, 3, 16, 64)), "aligned"),
    ],
    ids=[
        "d96",
        "d-mismatch",
        "h-mismatch",
        "3d",
        "f32",
        "mixed",
        "l-stride",
        "b-stride",
        "last-stride",
        "misaligned",
    ],
)
def test_inputs_the_kernel_does_not_take_are_refused(q, k, match):
    with pytest.raises(AttentionInputError, match=match):
        check_inputs(q, k, k)


def test_doc_page_example_and_snippets():
    """docs/attention_hopper.md: its example says what the code does, and every snippet it
    includes exists."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    text = (root / "docs" / "attention_hopper.md").read_text()
    s_atom = WarpgroupMMAAtom((64, 128, 16), tylo.bf16)
    proof = prove_register_a(s_atom.c, O_ATOM)
    assert f"# {(len(proof.slots), proof.registers(1))}" in text
    with pytest.raises(PlanError) as err:
        prove_register_a(WarpgroupMMAAtom((64, 64, 16), tylo.bf16).c.transpose(), O_ATOM)
    assert "thread 1 needs (0, 2) in A slot 0 but does not hold it" in str(err.value)
    assert "thread 1 needs (0, 2) in A slot 0 but does not hold it" in text
    for path, name in re.findall(r'--8<-- "([^":]+):([^"]+)"', text):
        src = (root / path).read_text()
        assert f"--8<-- [start:{name}]" in src and f"--8<-- [end:{name}]" in src, (path, name)


@pytest.mark.parametrize(
    "lens, match",
    [([3, 4, 5], "B = 2"), ([1.0, 2.0], "integer"), (np.zeros((2, 1), dtype=np.int32), "B = 2")],
    ids=["three", "floats", "2-d"],
)
def test_key_lengths_that_do_not_fit_are_refused_before_launch(lens, match):
    from tylo.ops.attention.hopper_host import hopper_attention

    q = _arr((2, 1, 8, 64))
    with pytest.raises(AttentionInputError, match=match):
        hopper_attention(q, q, q, kv_lens=lens)


def test_options_that_do_not_fit_are_refused_before_launch():
    from tylo.ops.attention.hopper_host import hopper_attention

    q = _arr((2, 1, 8, 64))
    wide = _arr((70000, 1, 8, 64))
    for kwargs, match in [
        (dict(causal=1), "bool"),
        (dict(scale=0.0), "finite positive"),
        (dict(scale=-0.125), "path='warp'"),
        (dict(cfg={"bn": 64}), "HopperAttentionConfig"),
        (dict(cfg=HopperAttentionConfig(d=128)), "does not match"),
        (dict(cfg=HopperAttentionConfig(d=64, causal=True)), "does not match"),
    ]:
        with pytest.raises(AttentionInputError, match=match):
            hopper_attention(q, q, q, **kwargs)
    # a scale f32 cannot hold is the argument error of every op (tylo.ops.args.check_scale)
    with pytest.raises(OpArgumentError, match="scale = nan does not fit in f32"):
        hopper_attention(q, q, q, scale=float("nan"))
    with pytest.raises(AttentionInputError, match="65535"):  # by default: the persistent one
        hopper_attention(wide, wide, wide, cfg=HopperAttentionConfig(d=64))


# the masks' random shapes: lengths, key counts (a fraction of Lk: none, all, past it), the
# causal mask, key tiles
MASK_CASES = dict(
    lq=st.integers(1, 700), lk=st.integers(1, 700),
    kv_frac=st.sampled_from([None, 0.0, 0.3, 1.0, 1.5]), causal=st.booleans(),
    bn=st.sampled_from([16, 64, 128]),
)  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(**MASK_CASES, overlap=st.booleans(), consumers=st.sampled_from([2, 3]))
def test_key_tiles_cover_exactly_what_the_rows_see(lq, lk, kv_frac, causal, overlap, bn,
                                                   consumers):  # fmt: skip
    """The kernel's loop bounds against the reference's mask (tylo/ops/attention/reference.py):
    tiles past n_tiles hold no visible key of any row of the CTA, tiles before n_full are
    visible whole to every row, and n_full <= n_tiles."""
    from tylo.ops.attention.hopper_kernel import key_tiles
    from tylo.ops.attention.reference import visible

    kv = lk if kv_frac is None else min(int(kv_frac * lk), lk)
    cfg = HopperAttentionConfig(d=64, bn=bn, stages=2, causal=causal, overlap=overlap,
                                consumers=consumers)  # fmt: skip
    assert cfg.bm == 64 * consumers
    mask = visible(lq, lk, causal=causal, kv_len=kv)
    for row0 in range(0, lq, cfg.bm):
        n_full, n_tiles = key_tiles(cfg, row0, kv, lq)
        rows = mask[row0 : row0 + cfg.bm]
        assert 0 <= n_full <= n_tiles
        assert not rows[:, n_tiles * bn :].any()
        assert rows[:, : n_full * bn].all()
        assert n_tiles >= (1 if overlap else 0)
        if rows.any():  # and not one tile more than needed
            last = int(np.flatnonzero(rows.any(axis=0)).max())
            assert n_tiles == last // bn + 1


@settings(max_examples=80, deadline=None)
@given(**MASK_CASES, tc=st.integers(0, 7))
def test_the_score_mask_is_the_references(lq, lk, kv_frac, causal, bn, tc):
    """The kernels' mask (``tylo.ops.attention.mask.score_mask``): per row a limit
    (``row_limit``), taken relative to a thread's first column ``base`` of key tile ``it``
    and clamped (``tile_limit``), against
    each slot's column offset ``c``; ``c < tile_limit`` is the reference's mask at key
    ``base + c`` for every row below Lq, every tile and offset, by brute force (``tc``:
    the thread's first column within the tile)."""
    from tylo.ops.attention.mask import row_limit, split_limit, tile_limit
    from tylo.ops.attention.reference import visible

    kv = lk if kv_frac is None else min(int(kv_frac * lk), lk)
    want = visible(lq, lk, causal=causal, kv_len=kv)
    rows = np.arange(lq)
    for it in range(-(-lk // bn)):
        base = it * bn + tc
        offsets = np.arange(bn - tc)  # the columns of the tile from the thread's first
        keys = base + offsets
        limit = np.array([row_limit(causal, int(r), kv, lq) for r in rows])
        one = np.array([tile_limit(x, base, bn) for x in limit])
        # the warp kernel's two-step form (score_mask(split=True)) is the same limit
        assert (one == np.array([split_limit(x, it * bn, tc, bn) for x in limit])).all()
        got = offsets[None, :] < one[:, None]
        inside = keys < lk
        assert (got[:, inside] == want[:, keys[inside]]).all()
        assert not got[:, ~inside].any()  # past Lk nothing is visible (kv <= Lk)


def test_the_clamp_keeps_any_limit_in_i32():
    """``tile_limit`` is in [0, bn] for limits and bases anywhere in i64, so the kernel's
    conversion to i32 loses nothing; the predicate ``c < tile_limit`` is ``c < limit - base``
    for every offset ``0 <= c < bn``."""
    from tylo.ops.attention.mask import tile_limit

    for limit in (-(2**63), -(2**31) - 5, -1, 0, 1, 63, 64, 65, 2**31 + 7, 2**63 - 1):
        for base in (0, 1, 64, 2**31 - 1, 2**32):
            got = tile_limit(limit, base, 64)
            assert 0 <= got <= 64
            assert [c < got for c in range(64)] == [c < limit - base for c in range(64)]


I32 = (-(2**31), 2**31 - 1)


def _i32(x: int) -> int:
    assert I32[0] <= x <= I32[1], f"{x} overflows i32"
    return x


@settings(max_examples=400, deadline=None)
@given(kv=st.integers(1, 2**31 - 1), lq=st.integers(1, 2**31 - 1), row=st.integers(0, 2**31 - 2),
       c0=st.integers(0, 2**31 - 1), col=st.integers(0, 127),
       width=st.sampled_from([16, 32, 64, 128]), causal=st.booleans())  # fmt: skip
def test_the_split_limit_is_the_one_step_limit(kv, lq, row, c0, col, width, causal):
    """``score_mask(split=True)``'s arithmetic (``tylo.ops.attention.mask.split_limit``),
    emulated step by step with every 32-bit intermediate checked for overflow, equals the
    one-step ``tile_limit(limit, c0 + col, width)`` over the kernel's whole domain: lengths
    and keys below 2**31 (``kernel.Dim``), any row, any first key and first column."""
    from tylo.ops.attention.mask import row_limit, split_limit, tile_limit

    col %= width
    limit = row_limit(causal, row, kv, lq)
    want = tile_limit(limit, c0 + col, width)
    if causal:  # the row limit clamped to [-1, 2**31 - 1], i32, then the i32 difference
        narrow = _i32(max(min(limit, 2**31 - 1), -1))
        tile = min(max(_i32(narrow - _i32(c0)), 0), 2 * width)
    else:  # the difference in 64 bits, clamped, then i32
        tile = _i32(min(max(limit - c0, 0), 2 * width))
    got = min(max(_i32(tile - _i32(col)), 0), width)
    assert got == want
    assert split_limit(limit, c0, col, width) == want
    assert split_limit(limit, c0, col, width, narrow=_i32) == want


def test_the_split_limit_at_the_edges():
    """The cases hypothesis may miss: a limit exactly ``width`` and ``2 * width`` past the
    first key or column, negative limits (a causal row before the diagonal's start), and
    the largest first keys; each against the one-step form."""
    from tylo.ops.attention.mask import split_limit, tile_limit

    width = 64
    for c0 in (0, 64, 2**31 - 65, 2**31 - 1):
        for col in (0, 1, 31, 63):
            for delta in (-(2**31), -2, -1, 0, 1, 63, 64, 65, 127, 128, 129, 2**31):
                limit = c0 + col + delta
                assert split_limit(limit, c0, col, width) == tile_limit(limit, c0 + col, width)


@settings(max_examples=60, deadline=None)
@given(**MASK_CASES, overlap=st.booleans(), consumers=st.sampled_from([2, 3]))
def test_a_consumers_key_tiles_are_what_its_rows_see(lq, lk, kv_frac, causal, overlap, bn,
                                                     consumers):  # fmt: skip
    """``key_tiles(rows=64)``, a consumer's own bounds (``key_loop`` where ``own_tiles``),
    against the reference's mask: tiles past them hold no visible key of the consumer's
    rows below Lq, tiles before ``n_full`` are visible whole to them, a consumer whose rows
    all lie past Lq has no tile (one masked tile with overlap), and the bounds never pass
    the CTA's (the kernel clamps to them anyway)."""
    from tylo.ops.attention.hopper_kernel import key_tiles
    from tylo.ops.attention.reference import visible

    kv = lk if kv_frac is None else min(int(kv_frac * lk), lk)
    cfg = HopperAttentionConfig(d=64, bn=bn, stages=2, causal=causal, overlap=overlap,
                                consumers=consumers)  # fmt: skip
    mask = visible(lq, lk, causal=causal, kv_len=kv)
    for row0 in range(0, lq, cfg.bm):
        cta_full, cta_tiles = key_tiles(cfg, row0, kv, lq)
        for c in range(consumers):
            r0 = row0 + 64 * c
            n_full, n_tiles = key_tiles(cfg, r0, kv, lq, rows=64)
            rows = mask[r0 : r0 + 64]  # empty past lq
            assert 0 <= n_full <= n_tiles <= cta_tiles
            assert n_full >= cta_full or r0 >= lq  # an empty consumer's n_full is 0
            assert not rows[:, n_tiles * bn :].any()
            assert rows[:, : n_full * bn].all()
            last = int(np.flatnonzero(rows.any(axis=0)).max()) if rows.any() else -1
            assert n_tiles == max(last // bn + 1 if last >= 0 else 0, 1 if overlap else 0)


def test_choose_config_takes_a_tile():
    """``bn``/``stages`` given replace the default tile's (and are validated as any config);
    with overlap but without split_release at d = 128 the default is the 64-key tile while
    WIDE_OVERLAP is off, though the 128-key tile fits (S, O and one packed P: 160
    registers)."""
    from tylo.ops.attention import hopper_host

    for d, causal in itertools.product((64, 128), (False, True)):
        base = choose_config(d, tylo.bf16, causal, overlap=True, split_release=False)
        if d == 128 and not hopper_host.WIDE_OVERLAP:
            assert (base.bn, base.stages) == (64, 3)
        got = choose_config(d, tylo.bf16, causal, overlap=True, split_release=False, bn=128,
                            stages=2)  # fmt: skip
        assert got == HopperAttentionConfig(**{**base.__dict__, "bn": 128, "stages": 2})
        two = choose_config(d, tylo.bf16, causal, overlap=True, split_release=False, stages=2)
        assert two.bn == base.bn
        with pytest.raises(PlanError, match="multiple of 16"):
            choose_config(d, tylo.bf16, causal, bn=24)
        with pytest.raises(PlanError, match="shared memory"):
            choose_config(d, tylo.bf16, causal, bn=128, stages=8)
