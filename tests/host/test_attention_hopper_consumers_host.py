"""Three consumer warpgroups (``HopperAttentionConfig(consumers=3)``, 192 query rows per CTA;
tylo/ops/attention/hopper_roles.py) without a GPU: the count's refusals (brute force over
hostile values), the tile's rows, threads and shared bytes, the register budget of every
accepted configuration against the SM's register file, the named barriers' ids (distinct,
below 16) and the rotation of the ping-pong turns, ``choose_config(consumers=...)``, the
host's plans and item checks at 192 rows, and the PTX's role-dependent constants (the
two-consumer kernels keep theirs). ``tests/gpu/test_attention_hopper_consumers.py`` runs the
kernels."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest

import tylo
from tylo.nvgpu.errors import PlanError
from tylo.ops.attention import hopper_host
from tylo.ops.attention.hopper_host import (
    SCHEDULES,
    THREE_CONSUMER_SCHEDULES,
    THREE_CONSUMER_TILES,
    Schedule,
    choose_config,
    hopper_attention,
    o_plan,
    persistent_grid,
    plans,
)
from tylo.ops.attention.hopper_kernel import (
    CONSUMER_REGISTERS,
    CONSUMERS,
    HEADROOM,
    PRODUCER_REGISTERS,
    SHARED_LIMIT,
    THREADS,
    HopperAttentionConfig,
)
from tylo.ops.attention.hopper_roles import (
    CONSUMER_COUNTS,
    REGISTER_FILE,
    TURN_THREADS,
    barrier_ids,
    consumer_rows,
    epilogue_barrier,
    next_turn,
    registers,
)
from tylo.ops.attention.reference import AttentionInputError

HOSTILE = (0, 1, 4, -1, -3, 2**63, -(2**63), True, False, 2.0, 3.0, "3", None, np.int64(3),
           (3,), 1 + 2j)  # fmt: skip


@pytest.mark.parametrize("value", [*HOSTILE, 2, 3])
def test_consumer_count_is_an_int_of_two_or_three(value):
    """Accepted exactly when an int (not a bool, a float or a numpy scalar) in {2, 3}."""
    takes = type(value) is int and value in (2, 3)
    if takes:
        cfg = HopperAttentionConfig(consumers=value)
        assert (cfg.consumers, cfg.bm, cfg.threads) == (value, 64 * value, 128 * (1 + value))
        assert f"{value} consumer warpgroups" in cfg.describe()
    else:
        with pytest.raises(PlanError, match="consumers must be an int in"):
            HopperAttentionConfig(consumers=value)
    if value is None:  # the default count: 3 at d = 64 without a mask where they fit
        got = choose_config(64, tylo.bf16, False, consumers=None)
        assert got == choose_config(64, tylo.bf16, False) and got.consumers in (2, 3)
    elif type(value) is not int:
        with pytest.raises(PlanError, match="consumers must be an int"):
            choose_config(64, tylo.bf16, False, consumers=value)
    elif not takes:
        with pytest.raises(PlanError, match="consumers must be an int in"):
            choose_config(64, tylo.bf16, False, consumers=value)


@pytest.mark.parametrize("value", HOSTILE)
def test_registers_refuse_other_counts(value):
    with pytest.raises(PlanError, match="consumers must be an int in"):
        registers(value)


def test_defaults_keep_two_consumers_where_three_spill():
    """The config's and the module constants' defaults are two consumers (the two-consumer
    values). ``choose_config`` takes three only where ``THREE_CONSUMER_SCHEDULES`` names the
    case and the three-consumer one-item kernel links without spilling for the target: on a
    linker that drops ``setmaxnreg`` (nvJitLink: 128 registers per thread of 512) it spills,
    and every default keeps two."""
    assert HopperAttentionConfig().consumers == CONSUMERS == 2
    assert HopperAttentionConfig().threads == THREADS == 384
    assert (PRODUCER_REGISTERS, CONSUMER_REGISTERS) == (40, 232) == registers(CONSUMERS)
    for d, causal, long in SCHEDULES:
        if d != 64:
            continue
        cfg = choose_config(d, tylo.bf16, causal, lk=16384 if long else 1024)
        three = choose_config(d, tylo.bf16, causal, lk=16384 if long else 1024, consumers=3)
        fits = not hopper_host._one_item_spills(three, "sm_90a")
        assert cfg.consumers == (3 if fits and (d, causal, long) in THREE_CONSUMER_SCHEDULES
                                 else 2)  # fmt: skip


@pytest.mark.parametrize("spills", [False, True], ids=["fits", "spills"])
def test_the_default_takes_three_where_measured_and_fitting(monkeypatch, spills):
    """With the link's verdict replaced (``_one_item_spills``): where three fit, the cases
    of ``THREE_CONSUMER_SCHEDULES`` (d = 64 without a mask, both sides of its key-length
    boundary, 2048; d = 64 causal past 4096) take three consumers and its schedule, on
    ``THREE_CONSUMER_TILES``'s tile; every other case, and every case where three spill,
    takes two and ``SCHEDULES``'. Options given override the schedule's as before;
    ``consumers=2`` gives the two-consumer default, ``consumers=3`` the three-consumer
    schedule even where it spills."""
    monkeypatch.setattr(hopper_host, "_choose_config", hopper_host._choose_config.__wrapped__)
    # the verdict d = 128's tile choice reads too
    monkeypatch.setattr(hopper_host, "_one_item_spills", lambda cfg, target: spills)
    assert hopper_host.LONG_KEYS == 4096
    for d, causal in itertools.product((64, 128), (False, True)):  # only d = 64 unmasked moves
        want = 2048 if (d, causal) == (64, False) else 4096
        assert hopper_host.long_keys(d, causal) == want
    for (d, causal, long), lk in itertools.product(SCHEDULES, (None, 1024, 2048, 2049, 4096,
                                                               4097, 16384)):  # fmt: skip
        if long != (lk is not None and lk > hopper_host.long_keys(d, causal)):
            continue
        cfg = choose_config(d, tylo.bf16, causal, lk=lk)
        case = (d, causal, long)
        three = case in THREE_CONSUMER_SCHEDULES and not spills
        want = THREE_CONSUMER_SCHEDULES[case] if three else SCHEDULES[case]
        got = Schedule(
            pingpong=cfg.pingpong,
            overlap=cfg.overlap,
            tma_store=cfg.tma_store,
            persistent=cfg.persistent,
            split_release=cfg.split_release,
        )
        assert (cfg.consumers, got) == (3 if three else 2, want), (case, lk)
        if three:
            assert (cfg.bn, cfg.stages) == THREE_CONSUMER_TILES[d]
            assert choose_config(d, tylo.bf16, causal, lk=lk, pingpong=False).pingpong is False
        two = choose_config(d, tylo.bf16, causal, lk=lk, consumers=2)
        assert two.consumers == 2
        s2 = SCHEDULES[case]
        assert (two.pingpong, two.overlap, two.persistent) == (s2.pingpong, s2.overlap,
                                                               s2.persistent)  # fmt: skip
        if case in THREE_CONSUMER_SCHEDULES:
            forced = choose_config(d, tylo.bf16, causal, lk=lk, consumers=3)
            assert (
                forced.consumers == 3 and forced.pingpong == THREE_CONSUMER_SCHEDULES[case].pingpong
            )
        if d == 64:  # a tile given that three cannot hold (160 keys: S, O and P take
            # 80 + 32 + 40 registers, over 128) takes two by default; asked for, refused
            wide = choose_config(d, tylo.bf16, causal, lk=lk, bn=160, stages=2)
            assert (wide.consumers, wide.bn) == (2, 160)
            with pytest.raises(PlanError, match="registers"):
                choose_config(d, tylo.bf16, causal, lk=lk, bn=160, stages=2, consumers=3)


def _need(d: int, bn: int) -> int:
    """Accumulator registers at a consumer's peak: S (bn/2 f32), O (d/2) and one packed P."""
    return bn // 2 + d // 2 + bn // 4


def test_refusals_by_brute_force_and_the_register_budget():
    """Over the whole domain (d, bn, stages, overlap, persistent, consumers): a config is
    accepted exactly when its accumulators fit the consumer's registers less the headroom,
    its shared memory (Q buffers of bm rows and the K/V ring, recomputed here) fits 227 KiB
    and overlap has two stages; every accepted config's roles fit the register file."""
    counts = dict.fromkeys(CONSUMER_COUNTS, 0)
    for d, bn, stages, overlap, persistent, n in itertools.product(
        (64, 128),
        range(16, 257, 16),
        range(1, 9),
        (False, True),
        (False, True),
        CONSUMER_COUNTS,
    ):
        p, c = registers(n)
        bm = 64 * n
        shared = ((2 if persistent else 1) * bm * d + 2 * stages * bn * d) * 2
        fits = (_need(d, bn) <= c - HEADROOM[n] and shared <= SHARED_LIMIT
                and (stages >= 2 or not overlap))  # fmt: skip
        kw = dict(d=d, bn=bn, stages=stages, overlap=overlap, persistent=persistent,
                  consumers=n)  # fmt: skip
        if not fits:
            with pytest.raises(PlanError, match="registers|shared memory|stages >= 2"):
                HopperAttentionConfig(**kw)
            continue
        cfg = HopperAttentionConfig(**kw)
        counts[n] += 1
        assert cfg.shared_bytes() == shared and cfg.bm == bm and cfg.threads == 128 * (1 + n)
        assert (cfg.producer_registers, cfg.consumer_registers) == (p, c)
        assert 128 * (p + n * c) <= REGISTER_FILE
        assert all(r % 8 == 0 and 24 <= r <= 256 for r in (p, c))
    assert counts[2] > counts[3] > 0, counts
    # the two-consumer kernels keep their registers and their 176 accumulators
    assert registers(2) == (40, 232) and HopperAttentionConfig().accumulator_registers == 176
    # three: FlashAttention-3's d = 64 tile (128 keys) fits, 144 keys do not
    assert HopperAttentionConfig(consumers=3, bn=128).accumulator_registers == 128
    with pytest.raises(PlanError, match="consumers=2"):
        HopperAttentionConfig(consumers=3, bn=144)


@pytest.mark.parametrize("consumers", CONSUMER_COUNTS)
def test_named_barrier_ids_are_distinct_and_below_16(consumers):
    """sync_threads, each consumer's turn barrier and its epilogue barrier: distinct ids in
    [0, 15] (PTX ISA: 16 named barriers per CTA); the ids the kernel's functions give are
    the listed ones."""
    ids = barrier_ids(consumers)
    assert len(ids) == 1 + 2 * consumers
    assert len(set(ids.values())) == len(ids) and all(0 <= i <= 15 for i in ids.values())
    cfg = HopperAttentionConfig(consumers=consumers)
    for c in range(consumers):
        wg = 1 + c
        got_c, (own, nxt), me = consumer_rows(cfg, wg, 128 * wg + 5)
        assert (got_c, me) == (c, 5)
        assert own == ids[f"turn {c}"] and nxt == ids[f"turn {(c + 1) % consumers}"]
        assert epilogue_barrier(consumers, c) == ids[f"epilogue {c}"]
    # a turn's phase: the waiting warpgroup and the giving one (bar.sync and bar.arrive of
    # one phase name the same count, a multiple of the warp size)
    assert TURN_THREADS == 2 * 128


@pytest.mark.parametrize("consumers", CONSUMER_COUNTS)
def test_turns_rotate_through_every_consumer(consumers):
    """Following ``next_turn`` from consumer 0's barrier visits every consumer's barrier once
    before coming back: a single cycle (so each consumer's turns alternate with the
    others' and the last hands back to the first)."""
    seen, bar = [], 1
    for _ in range(consumers):
        seen.append(bar)
        bar = next_turn(consumers, bar)
    assert bar == 1 and sorted(seen) == list(range(1, consumers + 1))


@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("persistent", [False, True])
def test_choose_config_takes_three_consumers(d, persistent):
    """``consumers=3`` keeps the measured schedules and takes ``THREE_CONSUMER_TILES``'s tile;
    ``bn``/``stages`` given still replace it; the plans' Q box is 192 rows and the O plan's
    staging blocks sit ``192 * 64`` elements apart."""
    # (overlap without split_release: d = 128's choice needs no compile to see spills)
    kw = dict(persistent=persistent, overlap=True, split_release=False)
    two = choose_config(d, tylo.bf16, True, **kw)
    three = choose_config(d, tylo.bf16, True, consumers=3, **kw)
    bn, stages = THREE_CONSUMER_TILES[d]
    # the item options' defaults are the two-consumer kernel's (ITEM_SCHEDULES): off
    assert three == HopperAttentionConfig(**{**two.__dict__, "consumers": 3, "bn": bn,
                                             "stages": stages, "item_overlap": False,
                                             "o_buffer": False})  # fmt: skip
    assert choose_config(d, tylo.bf16, True, consumers=3, bn=32, **kw).bn == 32
    pq, pk, _ = plans(three)
    assert pq.box == (192, 1, 1, 64) and pk.box == (bn, 1, 1, 64)
    assert pq.box_bytes * three.blocks == three.q_elements() * 2 == 192 * d * 2
    store = HopperAttentionConfig(**{**three.__dict__, "tma_store": True})
    assert o_plan(store).box == (64, 1, 1, 64)


def test_item_checks_follow_bm():
    """The persistent kernel's u32 item count is ceil(Lq / 192) * H * B with three consumers:
    the host refuses at 2**32 items exactly (checked against the arithmetic)."""
    cfg = HopperAttentionConfig(consumers=3, persistent=True, bn=64)
    h = b = 2**16
    for lq in (192, 193, 384):
        items = -(-lq // 192) * h * b
        if items >= 2**32:
            with pytest.raises(AttentionInputError, match="work items"):
                persistent_grid(cfg, lq, 64, h, b, sms=132)
        else:
            assert persistent_grid(cfg, lq, 64, h, b, sms=132) == min(items, 132)
    assert persistent_grid(cfg, 192 * 7, 64, 1, 1, sms=132) == 7


def _compile(cfg):
    import warnings

    from tylo.ops.attention.hopper_host import compile_hopper_attention

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nvJitLink here drops setmaxnreg, and says so
        return compile_hopper_attention(cfg)


ONE_ITEM = dict(d=64, bn=128, stages=4, causal=True, pingpong=True, overlap=True)
PERSISTENT = dict(d=128, bn=64, stages=2, split_kv=True, split_release=True, pingpong=True,
                  persistent=True, tma_store=True)  # fmt: skip


@pytest.mark.parametrize(
    "consumers, kw",
    [(2, PERSISTENT), (3, ONE_ITEM), (3, PERSISTENT)],
    ids=["2-d128-persistent-split-pp-tma", "3-d64-causal-pp-ov", "3-d128-persistent-split-pp-tma"],
)
def test_ptx_role_constants(consumers, kw):
    """The PTX's constants that depend on the count, read back: the threads a CTA launches
    with, setmaxnreg's counts, the turn barriers' 256 threads and the epilogue's 128, the
    ring's and Q pipeline's empty barriers initialized to 128 * consumers arrivals, and the
    epilogue barrier id ``1 + consumers + c``. With two consumers these are the values the
    kernels had before the count was a parameter (40/232, 384 threads, ids 3 + c)."""
    cfg = HopperAttentionConfig(consumers=consumers, **kw)
    ptx = _compile(cfg).ptx
    p, c = registers(consumers)
    assert re.search(rf"\.(maxntid|reqntid) {cfg.threads}, 1, 1", ptx)
    assert re.findall(r"setmaxnreg\.dec\.sync\.aligned\.u32 (\d+);", ptx) == [str(p)]
    assert re.findall(r"setmaxnreg\.inc\.sync\.aligned\.u32 (\d+);", ptx) == [str(c)]
    counts = set(re.findall(r"bar\.(?:sync|arrive) %?\w+, (\d+);", ptx))
    want = {str(TURN_THREADS)} if cfg.pingpong else set()
    assert counts == want | ({"128"} if cfg.tma_store else set()), counts
    movs = dict(re.findall(r"mov\.u32 \s*(%r\d+), (\d+);", ptx))
    inits = {int(movs.get(x, x)) for x in re.findall(r"mbarrier\.init\S* \[[^\]]+\], (\S+);", ptx)}
    # the full barriers take 1 arrival (the producer's), the empty ones a warpgroup each
    assert inits == {1, 128 * consumers}, inits


@pytest.mark.parametrize("persistent", [False, True], ids=["one-item", "persistent"])
@pytest.mark.parametrize("consumers", CONSUMER_COUNTS)
@pytest.mark.parametrize("lq", [1, 191, 192, 193, 1000])
def test_launch_follows_the_count(monkeypatch, persistent, consumers, lq):
    """hopper_attention's launch (kernels, maps and SM count recorded, nothing run): a CTA
    of ``cfg.threads`` threads, the one-item grid ``(ceil(Lq / bm), H, B)``, the persistent
    one ``min(items, SMs)`` over ``ceil(Lq / bm) * H * B`` items, and ``cfg.shared_bytes()``."""
    from test_attention_hopper_prepare_host import _arr, _lens, _record

    log = _record(monkeypatch)
    h, b = 3, 2
    q = _arr((b, h, lq, 64), 1 << 30)
    out = _arr((b, h, lq, 64), 1 << 33)
    lse = _arr((b, h, lq), 1 << 34, dtype=tylo.f32)
    cfg = choose_config(64, tylo.bf16, False, persistent=persistent, consumers=consumers)
    hopper_attention(q, q, q, kv_lens=_lens(b), out=out, lse=lse, cfg=cfg)
    name, (grid, threads), args, kw = log[-1]
    assert name == ("pers" if persistent else "one") and args[-1].consumers == consumers
    bm = 64 * consumers
    assert threads == 128 * (1 + consumers) and kw["shared"] == args[-1].shared_bytes()
    tiles = -(-lq // bm)
    assert grid == ((min(tiles * h * b, 132),) if persistent else (tiles, h, b))
    assert args[2].plan.box == (bm, 1, 1, 64)
