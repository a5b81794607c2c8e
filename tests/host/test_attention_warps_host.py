"""tylo/ops/attention's warp path with a CTA of 8 warps (``AttentionConfig.warps``): the
typed refusals of every hostile ``warps`` / ``block_m`` / ``block_n`` (each refusal's claim
checked by brute force against the plans it stands for), the proofs for the new shapes
(the chain, the rows each warp owns, every copy covering its tile once, the bank
conflicts), ``threads == 32 * warps`` everywhere a thread count appears, and ``warps``
passed from ``attention()`` through ``plan_attention`` to the launch (and its remembered
plan) on the host."""

from __future__ import annotations

import math
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tylo

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from attention_arrays import attention_args, device_array  # noqa: E402

from tylo.layouts import Layout, composition  # noqa: E402
from tylo.nvgpu.cpasync import CopyPlan  # noqa: E402
from tylo.nvgpu.errors import PlanError  # noqa: E402
from tylo.ops.attention import host  # noqa: E402
from tylo.ops.attention.config import (  # noqa: E402
    BLOCK_NS,
    HEAD_DIMS,
    WARP_COUNTS,
    WARPS,
    AttentionConfig,
    _swizzle,
    attention_config,
    default_blocks,
)
from tylo.ops.attention.kernel import key_blocks, partial_ownership, thread_partials  # noqa: E402
from tylo.ops.attention.reference import visible  # noqa: E402
from tylo.remembered import Remembered  # noqa: E402
from tylo.tile.fragment import Fragment  # noqa: E402

# the 8-warp shapes the brief asks for (D: Bc), Br = 128 (16 rows per warp), and Br = 256
EIGHT = [(64, 128, 64), (64, 128, 128), (128, 128, 32), (128, 128, 64), (64, 256, 64)]

# ---------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    "warps", [0, 3, 16, -8, 2**63, True, False, 8.0, 4.0, "8", None, [8], (8, 1)]
)
def test_hostile_warps_are_typed_refusals_that_say_what_is_allowed(warps):
    with pytest.raises(PlanError, match=r"AttentionConfig: warps = .*use 4 or 8"):
        AttentionConfig(d=64, warps=warps)
    if warps is not None:  # attention_config's None is the default CTA
        with pytest.raises(PlanError, match=r"warps = .*use 4 or 8"):
            attention_config(64, "bf16", warps=warps)


def test_the_allowed_warps_are_exactly_the_ones_that_plan():
    """The refusal says "use 4 or 8": 4 and 8 plan (with their default blocks), and no other
    int from -2 to 40 makes any configuration at all."""
    for w in range(-2, 41):
        made = []
        for bm in (16 * w, 32 * w, 64, 128):
            try:
                made.append(AttentionConfig(d=64, block_m=bm, block_n=64, warps=w))
            except PlanError:
                pass
        assert bool(made) == (w in WARP_COUNTS), w
    assert WARP_COUNTS == (4, 8) and WARPS == 4 and AttentionConfig().warps == 4


@settings(max_examples=120, deadline=None)
@given(
    warps=st.sampled_from(WARP_COUNTS),
    block_m=st.one_of(
        st.integers(-(2**64), 2**64),
        st.integers(-1, 600),
        st.sampled_from([0, 16, 32, 64, 128, 256, 512, 2**63 - 1, 2**63]),
    ),
)
def test_block_m_is_16_or_32_rows_per_warp(warps, block_m):
    """Accepted exactly when ``block_m`` is 16 or 32 rows times ``warps``; a refusal names
    the two values, and both of them plan."""
    ok = block_m in (16 * warps, 32 * warps)
    try:
        cfg = AttentionConfig(d=64, block_m=block_m, block_n=64, warps=warps)
    except PlanError as err:
        assert not ok, err
        msg = str(err)
        assert f"block_m = {block_m}" in msg and f"{warps} warps own 16 or 32 rows" in msg
        allowed = [int(x) for x in msg.rsplit("use ", 1)[1].split(" or ")]
        assert allowed == [16 * warps, 32 * warps]
        for bm in allowed:
            assert AttentionConfig(d=64, block_m=bm, block_n=64, warps=warps).block_m == bm
    else:
        assert ok and cfg.rows_per_warp in (16, 32) and cfg.rows_per_warp * warps == block_m


@pytest.mark.parametrize("block_m", [True, 128.0, "128", None, (128,)])
def test_block_m_of_the_wrong_type_is_refused(block_m):
    with pytest.raises(PlanError, match="block_m = .*use 128 or 256"):
        AttentionConfig(d=64, block_m=block_m, block_n=64, warps=8)


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
@pytest.mark.parametrize("d", HEAD_DIMS)
@pytest.mark.parametrize("warps", WARP_COUNTS)
def test_block_n_refusal_is_exactly_the_copy_plan_that_cannot_exist(warps, d, dtype):
    """A (Bc, D) K / V block is refused exactly where ``cp.async`` of 16-byte vectors cannot
    be shared by the CTA's threads (the copy plan itself, built by brute force, refuses),
    and every block_n the refusal proposes plans."""
    bm = 16 * warps
    for bn in BLOCK_NS:
        stage = composition(_swizzle(d), Layout((bn, d), (d, 1)))  # one K / V stage
        try:
            CopyPlan((bn, d), tylo.bf16 if dtype == "bf16" else tylo.f16, 32 * warps, stage)
            copy_ok = True
        except PlanError:
            copy_ok = False
        try:
            AttentionConfig(d=d, dtype=dtype, block_m=bm, block_n=bn, warps=warps)
        except PlanError as err:
            assert not copy_ok and "cannot share evenly" in str(err)
            proposed = str(err).split("block_n in (", 1)[1].split(")", 1)[0]
            for alt in (int(x) for x in proposed.split(",")):
                attention_config(d, dtype, block_m=bm, block_n=alt, warps=warps)
        else:
            assert copy_ok, (warps, d, bn)
    # the refusal is not vacuous: 8 warps at D = 64 cannot copy 16 keys, 4 warps can
    assert AttentionConfig(d=64, block_m=64, block_n=16).block_n == 16
    with pytest.raises(PlanError, match="128 16-byte vectors.*256 threads of 8 warps"):
        AttentionConfig(d=64, block_m=128, block_n=16, warps=8)


# ---------------------------------------------------------------- the plans follow the field


@pytest.mark.parametrize(("d", "bm", "bn"), EIGHT)
def test_every_thread_count_is_32_per_warp(d, bm, bn):
    cfg = attention_config(d, "bf16", block_m=bm, block_n=bn, warps=8)
    assert cfg.threads == 32 * cfg.warps == 256
    for plan in (cfg.s_plan, cfg.pv_plan):
        assert plan.warps == (8, 1) and plan.threads == cfg.threads
        assert plan.repeat[0] == cfg.rm == bm // 128
    assert cfg.copy_q.threads == cfg.copy_kv.threads == cfg.threads
    assert cfg.s_plan.acc_ownership.threads == cfg.threads
    assert cfg.grid(3, 5, 1000) == (math.ceil(1000 / bm), 5, 3)
    assert cfg.shared_bytes == (bm * d + 4 * bn * d) * 2
    assert "8 warps" in cfg.describe() and "warps" not in attention_config(d).describe()


@pytest.mark.parametrize(("d", "bm", "bn"), EIGHT)
def test_proofs_of_the_eight_warp_shapes(d, bm, bn):
    """Every verdict holds and every load and copy is free of bank conflicts; the chain
    holds by brute force (each thread's S accumulator slot is the A-operand slot the proof
    names); each warp owns its own ``rows_per_warp`` rows, S's rows of a thread are its rows
    of O; the copies cover Q and a K / V block exactly once."""
    for causal in (False, True):
        cfg = attention_config(d, "f16", causal=causal, block_m=bm, block_n=bn, warps=8)
        p = cfg.proofs
        for what, v in p.items():
            if "conflicts" in what:
                assert v == 0, what
            elif not what.startswith("chain"):
                assert bool(v), what
        assert len([w for w in p if "conflicts" in w]) == 5
    acc, out = cfg.s_plan.acc_ownership, cfg.pv_plan.acc_ownership
    a = cfg.pv_plan.operand_ownership("a", k_steps=1)
    proof = cfg.chain
    assert len(proof.slots) == bn // 16 == cfg.pv_plan.k_steps
    rpw = cfg.rows_per_warp
    rows_seen = Counter()
    for t in range(cfg.threads):
        held, need = acc.coords(t), a.coords(t)
        for s, row in enumerate(proof.slots):
            for slot, u in enumerate(row):
                assert held[u] == (need[slot][0], need[slot][1] + 16 * s)
        rows = {r for r, _ in held}
        w = t // 32
        assert all(w * rpw <= r < (w + 1) * rpw for r in rows), (t, rows)
        assert rows == {r for r, _ in out.coords(t)}
        rows_seen.update(rows)
    assert sorted(rows_seen) == list(range(bm)) and set(rows_seen.values()) == {4}
    assert sorted(u for row in proof.slots for u in row) == list(range(acc.values))
    for cp, shape in ((cfg.copy_q, (bm, d)), (cfg.copy_kv, (bn, d))):
        hits = Counter(c for t in range(cp.threads) for c in cp.ownership.coords(t))
        assert len(hits) == shape[0] * shape[1] and set(hits.values()) == {1}


def test_default_cta_is_unchanged():
    for d in HEAD_DIMS:
        four, default = attention_config(d, warps=4), attention_config(d)
        assert four is default and default.warps == 4
        assert (default.block_m, default.block_n) == default_blocks(d)
        eight = attention_config(d, warps=8)
        assert (eight.block_m, eight.block_n) == (2 * default_blocks(d)[0], default_blocks(d)[1])
        assert eight.rows_per_warp == default.rows_per_warp == 16
        assert eight != default and eight.threads == 2 * default.threads


@settings(max_examples=60, deadline=None)
@given(
    lq=st.integers(1, 900),
    lk=st.integers(1, 900),
    kv_frac=st.floats(0, 1),
    causal=st.booleans(),
    shape=st.sampled_from(EIGHT),
    data=st.data(),
)
def test_key_blocks_of_eight_warp_ctas_split_exactly_by_visibility(
    lq, lk, kv_frac, causal, shape, data
):
    d, bm, bn = shape
    cfg = attention_config(d, "bf16", causal=causal, block_m=bm, block_n=bn, warps=8)
    kv = int(round(kv_frac * lk))
    m0 = data.draw(st.integers(0, (lq - 1) // bm)) * bm
    unmasked, total = key_blocks(cfg, m0, lq, kv)
    mask = visible(lq, lk, causal=causal, kv_len=kv)[m0 : m0 + bm]
    assert 0 <= unmasked <= total <= -(-lk // bn)
    for n in range(-(-lk // bn)):
        block = mask[:, n * bn : (n + 1) * bn]
        if n < unmasked:
            assert block.shape[1] == bn and block.all(), (n, unmasked)
        if n >= total:
            assert not block.any(), (n, total)
    if total:
        assert mask[:, (total - 1) * bn : total * bn].any()


@pytest.mark.parametrize("bm", [128, 256])
def test_thread_partials_of_eight_warps_sum_to_the_row_sums(bm):
    cfg = attention_config(64, "bf16", block_m=bm, block_n=64, warps=8)
    acc = cfg.s_plan.acc_ownership
    part = partial_ownership(acc, 1)
    x = np.random.default_rng(1).integers(-50, 50, size=acc.shape).astype(float)
    grid = np.full(part.shape, np.nan)
    for t in range(acc.threads):
        p = thread_partials(Fragment([x[c] for c in acc.coords(t)], acc))
        for c, val in zip(part.coords(t), p.values):
            assert np.isnan(grid[c]) or grid[c] == val
            grid[c] = val
    assert not np.isnan(grid).any() and part.shape == (bm, 4)
    np.testing.assert_array_equal(grid.sum(axis=1), x.sum(axis=1))


# ---------------------------------------------------------------- plan_attention and attention()


_arr, _args = device_array, attention_args  # tests/host/attention_arrays.py


@pytest.mark.parametrize("d", HEAD_DIMS)
@pytest.mark.parametrize("causal", [False, True])
def test_plan_attention_takes_warps(d, causal):
    args = _args(d)
    none, _ = host.plan_attention(*args, causal=causal)
    four, _ = host.plan_attention(*args, causal=causal, warps=4)
    assert none == four and none.warps == 4  # launch_blocks for the default CTA
    eight, val = host.plan_attention(*args, causal=causal, warps=8)
    assert eight.warps == 8 and eight.threads == 256
    assert (eight.block_m, eight.block_n) == (128, default_blocks(d)[1])
    assert eight.grid(*val["shape"][:3]) == (math.ceil(300 / 128), 3, 2)
    given_, _ = host.plan_attention(*args, causal=causal, warps=8, block_m=256, block_n=32)
    assert (given_.block_m, given_.block_n, given_.rows_per_warp) == (256, 32, 32)
    for bad in (3, True, 8.0, 4.0, "8", [4], np.array([4, 4]), np.int64(8)):
        with pytest.raises(PlanError, match="warps = "):
            host.plan_attention(*args, causal=causal, warps=bad)
    with pytest.raises(PlanError, match="block_m = 64; 8 warps own 16 or 32 rows"):
        host.plan_attention(*args, causal=causal, warps=8, block_m=64, block_n=64)


_CALLS = st.tuples(
    st.sampled_from([64, 128]),  # D
    st.sampled_from([False, True]),  # causal
    st.sampled_from([None, 4, 8]),  # warps
    st.sampled_from([None, 128]),  # block_m (with block_n 64)
)


@settings(max_examples=25, deadline=None)
@given(calls=st.lists(_CALLS, min_size=1, max_size=8))
def test_attention_passes_warps_to_the_launch_and_its_remembered_plan(calls):
    """Every launch gets the plan of its own ``warps`` (a remembered plan of another CTA
    would launch the wrong thread count); with ``warps`` given, path='auto' is the warp
    path without asking which."""
    with pytest.MonkeyPatch.context() as mp:
        log = []
        mp.setattr(host, "launch", lambda cfg, val, *a: log.append((cfg, val)))
        mp.setattr(host, "_PLANS", Remembered(64))
        mp.setattr(host, "_auto_path_of", lambda *a: pytest.fail("asked for the auto path"))
        for d, causal, warps, bm in calls:
            q, k, v, out, lse = _args(d)
            blocks = {} if bm is None else {"block_m": bm, "block_n": 64}
            if warps is None and bm is None:
                path = "warp"
            else:
                path = "auto"
            host.attention(q, k, v, out=out, lse=lse, causal=causal, warps=warps, path=path,
                           **blocks)  # fmt: skip
            want = host.plan_attention(q, k, v, out, lse, causal=causal, warps=warps, **blocks)
            assert log[-1] == want and log[-1][0].warps == (warps or 4)
            assert log[-1][0].threads == 32 * (warps or 4)


def test_the_benchmarks_eight_warp_variants_plan():
    """``benchmarks/attention.py --variants`` passes each entry to plan_attention: every
    8-warp one plans, as named (Br x Bc, 8 warps)."""
    from benchmarks.attention import VARIANTS

    eight = [(d, name, kw) for d, vs in VARIANTS.items() for name, kw in vs.items()
             if kw.get("warps") == 8]  # fmt: skip
    assert {(d, name) for d, name, _ in eight} == {
        (64, "128x64-8w"),
        (64, "128x128-8w"),
        (128, "128x64-8w"),
        (128, "128x32-8w"),
    }
    for d, name, kw in eight:
        cfg, _ = host.plan_attention(*_args(d), **kw)
        assert f"{cfg.block_m}x{cfg.block_n}-8w" == name and cfg.threads == 256


def test_causal_launches_number_their_ctas_in_32_bits():
    """kernel.longest_first numbers a causal launch's CTAs in 32 bits: a causal grid past
    2**31 - 1 CTAs is refused with a typed error; the same shape without the mask, and the
    largest causal grid that fits, are planned."""
    from tylo.ops.attention.host import CAUSAL_CTAS, AttentionInputError

    b, h = 65535, 64

    def plan(lq, causal):
        q = _arr((b, h, lq, 64), 1 << 46)
        o = _arr((b, h, lq, 64), 1 << 48)
        lse = _arr((b, h, lq), 1 << 50, tylo.f32)
        return host.plan_attention(q, q, q, o, lse, causal=causal)[0]

    bm = plan(1, True).block_m
    lq = bm * (CAUSAL_CTAS // (b * h))  # the most query blocks that fit
    assert math.prod(plan(lq, True).grid(b, h, lq)) <= CAUSAL_CTAS
    assert math.prod(plan(lq + 1, False).grid(b, h, lq + 1)) > CAUSAL_CTAS
    with pytest.raises(AttentionInputError, match="causal launch of .* CTAs"):
        plan(lq + 1, True)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 40), st.integers(1, 40), st.integers(1, 50))
def test_causal_order_is_a_longest_first_bijection(blocks, nbh, group):
    """kernel.causal_order over every linear CTA index: a bijection onto (query block from
    the longest, (batch, head)); within a group of ``group`` (batch, head)s the index goes
    query-block-slowest (all the longest blocks first); group 1 is each (batch, head)'s
    blocks in a row (the order before groups), a group past B * H orders the whole launch."""
    from tylo.ops.attention.kernel import causal_order

    got = [causal_order(lin, blocks, nbh, group) for lin in range(blocks * nbh)]
    assert sorted(got) == [(x, bh) for x in range(blocks) for bh in range(nbh)]
    g = min(group, nbh)
    for lin, (xq, bh) in enumerate(got):
        assert bh // g == lin // (g * blocks)  # its group's CTAs are contiguous
        if lin and got[lin - 1][1] // g == bh // g:
            assert got[lin - 1][0] <= xq  # longest first within the group
    if group == 1:
        assert got == [(lin % blocks, lin // blocks) for lin in range(blocks * nbh)]
    if group >= nbh:
        assert got == [(lin // nbh, lin % nbh) for lin in range(blocks * nbh)]
