"""Separate K and V barriers in the Hopper attention kernels (``HopperAttentionConfig(
split_kv=True)``, tylo/ops/attention/hopper_ring.py) without a GPU: the configuration (a
typed refusal of anything but a bool, off by default and in ``choose_config``, the shared
bytes unchanged: barriers are static shared memory), the benchmark's variants, and a model of
the barrier protocol with K's and V's full barriers (every schedule, the persistent kernel's
items one after another) run under random interleavings: no deadlock, no stage refilled
while a consumer reads it, and every K or V read sees its own item's tile; the model catches
a consumer that reads V after waiting for K alone. ``tests/gpu/test_attention_hopper_split_kv.py``
runs the kernels, ``tests/nvvm/test_attention_hopper_split_kv_sass.py`` checks their
assembly."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_attention_hopper_persistent_host import (  # the mbarrier model and the item walk
    PROTOCOL_CASES,
    _run,
    consumer_tiles,
    cta_walk,
    failing_seeds,
    open_turns,
    turn_ops,
)

import tylo
from tylo.nvgpu.errors import PlanError
from tylo.nvgpu.mbarrier import PipelinePlan
from tylo.ops.attention.hopper_host import SCHEDULES, choose_config
from tylo.ops.attention.hopper_kernel import HopperAttentionConfig
from tylo.ops.attention.hopper_persistent import work_items
from tylo.ops.attention.hopper_ring import PARTS, K, V


def test_config_refuses_anything_but_a_bool():
    for bad in (1, 0, "yes", None, np.bool_(True), 1.0):
        with pytest.raises(PlanError, match=f"split_kv must be a bool, got {bad!r}"):
            HopperAttentionConfig(split_kv=bad)
    assert choose_config(64, tylo.bf16, False, split_kv=True).split_kv is True
    for bad in (1, np.bool_(True), "yes"):  # not the cached True's config (1 == True)
        for name in ("split_kv", "persistent", "tma_store"):
            with pytest.raises(PlanError, match=f"choose_config: {name} must be a bool"):
                choose_config(64, tylo.bf16, False, **{name: bad})
    assert HopperAttentionConfig().split_kv is False


@pytest.mark.parametrize("d, bn, stages", [(64, 128, 4), (128, 128, 2), (128, 64, 3), (64, 16, 8)])
def test_shared_bytes_and_defaults_unchanged(d, bn, stages):
    """The barriers are static shared memory: the dynamic bytes (the Q buffers and the ring)
    do not change, for every schedule option; nothing chooses split_kv unless asked, or
    unless the measured default takes split_release, which needs it (``SCHEDULES``: at
    d = 128)."""
    for persistent in (False, True):
        for tma_store in (False, True):
            cfg = HopperAttentionConfig(d=d, bn=bn, stages=stages, persistent=persistent,
                                        tma_store=tma_store)  # fmt: skip
            split = replace(cfg, split_kv=True)
            assert split.shared_bytes() == cfg.shared_bytes()
            assert split.ring_offset() == cfg.ring_offset()
            assert "split K/V" in split.describe() and "split K/V" not in cfg.describe()
    for causal in (False, True):
        base = choose_config(d, tylo.bf16, causal)
        assert base.split_kv is base.split_release is SCHEDULES[(d, causal, False)].split_release
        assert choose_config(d, tylo.bf16, causal, split_kv=None) == base
        assert choose_config(d, tylo.bf16, causal, split_kv=True) == replace(base, split_kv=True)


def test_benchmark_variants():
    """benchmarks/attention.py --path hopper --variants: "split-kv" is the default
    configuration with split_kv, "persistent split-kv" the persistent default with it."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "attention.py"
    spec = importlib.util.spec_from_file_location("_bench_attention_skv", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    for causal in (False, True):
        for d in (64, 128):
            base = choose_config(d, tylo.bf16, causal)
            got = choose_config(d, tylo.bf16, causal, **bench.HOPPER_VARIANTS["split-kv"])
            assert got == replace(base, split_kv=True)
            walk = choose_config(d, tylo.bf16, causal,
                                 **bench.HOPPER_VARIANTS["persistent split-kv"])  # fmt: skip
            assert walk == replace(base, split_kv=True, persistent=True)
        others = [k for k in bench.HOPPER_VARIANTS  # split release brings split_kv along
                  if "split-kv" not in k and "split release" not in k]  # fmt: skip
        assert all(not choose_config(64, tylo.bf16, causal, **bench.HOPPER_VARIANTS[k]).split_kv
                   for k in others)  # fmt: skip


# -- a model of the protocol with K's and V's full barriers ------------------------------
# The operations of the producer (hopper_ring.load_kv_tile) and of the two consumers
# (hopper_kernel.key_loop, per item of the persistent kernel), on the mbarrier model of
# tests/host/test_attention_hopper_persistent_host.py. A fill stands for the TMA bytes landing,
# the arrive after it for the barrier's phase completing (it needs both). Q's buffers are
# left out here: that protocol is the persistent test's and did not change.


def _ops(cfg, items, sms, c, lens, lq, lk, v_on_k=False):
    """The producer's and the consumers' operations for CTA ``c``; ``v_on_k``: consumers
    that read V after waiting for K alone (a bug the model must catch)."""
    n = cfg.consumers
    ring = PipelinePlan(cfg.stages, 128 * n, parts=PARTS)
    prod, cons = [], [[] for _ in range(n)]
    for _, item, n_tiles, first in cta_walk(cfg, items, sms, c, lens, lq, lk):

        def buf(part, it):
            return (part, ring.stage(it))

        def wait(part, it):
            if part == V and v_on_k:
                return []
            return [("wait", ("full", part, ring.stage(it)), ring.parity(it))]

        def release(it):
            return [("free", buf(K, it)), ("free", buf(V, it)),
                    ("arrive", ("empty", ring.stage(it)), 128 * n)]  # fmt: skip

        for kt in range(n_tiles):
            it = first + kt
            prod.append(("wait", ("empty", ring.stage(it)), 1 - ring.parity(it)))
            for part in (K, V):  # K's boxes armed and issued first, then V's
                prod += [("fill", buf(part, it), (item, kt, part)),
                         ("arrive", ("full", part, ring.stage(it)), 1)]  # fmt: skip
        for w in range(n):
            ops, turn = cons[w], turn_ops(cfg, w)
            mine = consumer_tiles(cfg, item, n_tiles, w, lens, lq, lk)
            for kt in range(mine):
                it = first + kt
                if not cfg.overlap:  # K, S (the turn), the softmax, then V and P V
                    ops += wait(K, it) + [("hold", buf(K, it), (item, kt, K))] + turn
                    ops += wait(V, it) + [("hold", buf(V, it), (item, kt, V))] + release(it)
                elif kt == 0:  # the prologue: S of the first tile
                    ops += wait(K, it) + [("hold", buf(K, it), (item, kt, K))] + turn
                else:  # V of the previous tile and K of this one, then both issues
                    ops += wait(V, it - 1) + [("hold", buf(V, it - 1), (item, kt - 1, V))]
                    ops += wait(K, it) + [("hold", buf(K, it), (item, kt, K))] + turn
                    ops += release(it - 1)
            if cfg.overlap:  # P V of the last tile
                last = first + mine - 1
                ops += wait(V, last) + [("hold", buf(V, last), (item, mine - 1, V))]
                ops += release(last)
            for kt in range(mine, n_tiles):  # _skipped_tile: wait K, turn, wait V, release
                it = first + kt
                ops += wait(K, it) + turn + wait(V, it)
                ops += [("arrive", ("empty", ring.stage(it)), 128 * n)]
    open_turns(cfg, cons)
    return prod, cons


@settings(max_examples=150, deadline=None)
@given(**PROTOCOL_CASES, consumers=st.sampled_from([2, 3]))
def test_split_protocol_never_deadlocks_or_races(lq, lk, heads, lens, causal, pingpong,
                                                 overlap, stages, sms, seed,
                                                 consumers):  # fmt: skip
    """Many items per CTA (small ``sms``) carry the ring's count across items, and one item
    per CTA is the one-item kernel's ring; two or three consumers."""
    cfg = HopperAttentionConfig(d=64, bn=64, stages=stages, causal=causal, pingpong=pingpong,
                                overlap=overlap, persistent=True, split_kv=True,
                                consumers=consumers)  # fmt: skip
    items = work_items(-(-lq // cfg.bm), heads, len(lens))
    for c in range(min(items, sms)):
        prod, cons = _ops(cfg, items, sms, c, (lens, heads), lq, lk)
        m = _run(prod, cons, seed + c)
        assert not any(m.held.values())  # every stage was released
        if pingpong:  # balanced: only the last consumer's opening arrival is left over
            assert m.named.get(1, 0) % 2 == 1
            assert all(m.named.get(b, 0) % 2 == 0 for b in range(2, consumers + 1))


@pytest.mark.parametrize("overlap", [False, True])
def test_split_model_catches_v_read_after_k_alone(overlap):
    """The model is not vacuous: a consumer that reads V having waited for K alone reads a
    V tile that has not landed (or an older one) under some interleaving."""
    cfg = HopperAttentionConfig(d=64, bn=64, stages=2, overlap=overlap, persistent=True,
                                split_kv=True)  # fmt: skip
    prod, cons = _ops(cfg, 2, 1, 0, ([300], 1), 256, 300, v_on_k=True)
    assert failing_seeds(_run, prod, cons, range(40)) > 0
    good = _ops(cfg, 2, 1, 0, ([300], 1), 256, 300)
    for seed in range(40):
        _run(*good, seed)
