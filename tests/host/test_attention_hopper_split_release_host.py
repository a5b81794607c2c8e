"""K released early in the Hopper attention kernels (``HopperAttentionConfig(split_release=
True)``, tylo/ops/attention/hopper_ring.py) without a GPU: the configuration (typed refusals,
off by default and in ``choose_config``, which makes ``split_kv`` follow it, the shared bytes
within the limit with the extra barriers), the benchmark's variants, and a model of the
barrier protocol with K's and V's full *and* empty barriers (every schedule, the persistent
kernel's items one after another) run under random interleavings: no deadlock, no K or V
tile refilled while a consumer reads it, every read sees its own item's tile, and K of a
later tile does load while a consumer still reads this stage's V (the point of the option).
The model catches a consumer that releases K before ``S`` completed, one that releases V
with K (before ``P V`` read it), and a producer that refills V having acquired K's part
alone. ``tests/gpu/test_attention_hopper_split_release.py`` runs the kernels,
``tests/nvvm/test_attention_hopper_split_release_sass.py`` checks their assembly."""

from __future__ import annotations

from dataclasses import replace
from itertools import product

import numpy as np
import pytest
import test_attention_hopper_persistent_host as model  # the mbarrier model and the item walk
from hypothesis import given, settings
from hypothesis import strategies as st

import tylo
from tylo.nvgpu.errors import PlanError
from tylo.ops.attention.hopper_host import SCHEDULES, choose_config
from tylo.ops.attention.hopper_kernel import SHARED_LIMIT, HopperAttentionConfig
from tylo.ops.attention.hopper_persistent import work_items
from tylo.ops.attention.hopper_ring import PARTS, K, V, ring_plan


def test_config_refusals():
    for bad in (1, 0, "yes", None, np.bool_(True), 1.0):
        with pytest.raises(PlanError, match=f"split_release must be a bool, got {bad!r}"):
            HopperAttentionConfig(split_kv=True, split_release=bad)
        with pytest.raises(PlanError, match="choose_config: split_release must be a bool"):
            choose_config(64, tylo.bf16, False, split_release=bad if bad is not None else 1)
    with pytest.raises(PlanError, match="split_release .* needs .* split_kv=True"):
        HopperAttentionConfig(split_release=True)
    with pytest.raises(PlanError, match="pass split_kv=True"):  # an explicit False stays one
        choose_config(64, tylo.bf16, False, split_kv=False, split_release=True)
    assert HopperAttentionConfig().split_release is False


@pytest.mark.parametrize("d, causal", [(64, False), (64, True), (128, False)])
def test_choose_config_makes_split_kv_follow(d, causal):
    """None is the measured choice (``SCHEDULES``: on at d = 128, off at d = 64); True
    brings split_kv's full barriers with it (None becomes True), False takes both off, and
    nothing else changes but the d = 128 tile (the 128-key tile with overlap only with the
    early release). (d = 128 causal is left out: its choice compiles the 128-key tile to see
    whether it spills, seconds per option.)"""
    base = choose_config(d, tylo.bf16, causal)
    assert base.split_release is SCHEDULES[(d, causal, False)].split_release is (d == 128)
    assert base.split_kv is base.split_release
    assert choose_config(d, tylo.bf16, causal, split_release=None) == base
    off = choose_config(d, tylo.bf16, causal, split_release=False)
    on = choose_config(d, tylo.bf16, causal, split_release=True)
    assert not off.split_release and not off.split_kv
    assert on.split_release and on.split_kv
    assert replace(off, split_kv=True, split_release=True, bn=on.bn, stages=on.stages) == on
    assert (off.bn, off.stages) == ((128, 4) if d == 64 else (64, 3))  # overlap: the narrow
    assert choose_config(d, tylo.bf16, causal, split_kv=True, split_release=True) == on
    split_kv_alone = choose_config(d, tylo.bf16, causal, split_kv=True, split_release=False)
    assert split_kv_alone == replace(off, split_kv=True)


def _barrier_bytes(cfg):
    """The static shared bytes of the kernels' mbarriers: the ring's full and empty
    barriers (``ring_plan``: a full per part, an empty per empty part, each per stage) and
    Q's (one barrier, or the persistent kernel's two-stage pipeline)."""
    plan = ring_plan(cfg, 256)
    q = 2 * 2 if cfg.persistent else 1
    return 8 * (plan.stages * (plan.parts + plan.empty_parts) + q)


def test_shared_memory_check_still_holds():
    """Brute force over every tile the config accepts: the dynamic bytes do not change with
    split_release, and with its extra barriers (static shared memory) the total stays
    within the 227 KiB the check allows: dynamic bytes come in 4 KiB steps (a K/V stage is
    ``bn d`` 2-byte elements twice, a multiple of 4096 bytes, as is a Q buffer), so a config
    the check accepts leaves at least 3 KiB, and the barriers take at most 4 * 8 * 8 + 32."""
    accepted = 0
    for d, bn, stages, persistent in product((64, 128), range(16, 257, 16), range(1, 9),
                                             (False, True)):  # fmt: skip
        try:
            cfg = HopperAttentionConfig(d=d, bn=bn, stages=stages, persistent=persistent)
        except PlanError:
            with pytest.raises(PlanError):  # refused with and without: same checks
                HopperAttentionConfig(d=d, bn=bn, stages=stages, persistent=persistent,
                                      split_kv=True, split_release=True)  # fmt: skip
            continue
        split = replace(cfg, split_kv=True, split_release=True)
        assert split.shared_bytes() == cfg.shared_bytes() and cfg.shared_bytes() % 4096 == 0
        assert split.shared_bytes() + _barrier_bytes(split) <= SHARED_LIMIT
        assert _barrier_bytes(split) - _barrier_bytes(cfg) == 16 * stages
        assert "K released after S" in split.describe() and "after S" not in cfg.describe()
        accepted += 1
    assert accepted > 100


def test_benchmark_variants():
    """benchmarks/attention.py --path hopper --variants: the "split release" entries are
    choose_config's arguments giving split_kv and split_release, "wide" ones the d = 128
    tile of 128 keys and 2 stages; at d = 64 no other entry turns split_release on."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "attention.py"
    spec = importlib.util.spec_from_file_location("_bench_attention_rel", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    names = [k for k in bench.HOPPER_VARIANTS if "split release" in k]
    assert {"split release", "wide split release", "wide split release persistent"} <= set(names)
    for causal in (False, True):
        for name in names:
            kw = bench.HOPPER_VARIANTS[name]
            # d = 128 causal left out: its choice compiles the 128-key tile (seconds)
            for d in [x for x in (64, 128) if (x == 128) >= ("wide" in name)
                      and not (causal and x == 128)]:  # fmt: skip
                cfg = choose_config(d, tylo.bf16, causal, **kw)
                assert cfg.split_kv and cfg.split_release, name
                assert cfg.persistent == kw.get("persistent", cfg.persistent), name
                if "wide" in name:
                    assert (cfg.bn, cfg.stages) == (128, 2), name
        for name in set(bench.HOPPER_VARIANTS) - set(names):
            kw = bench.HOPPER_VARIANTS[name]
            if "bn" in kw:
                continue  # d = 128's tiles: compiled by choose_config only at d = 128
            assert not choose_config(64, tylo.bf16, causal, **kw).split_release, name


# -- a model of the protocol with K's and V's full and empty barriers ---------------------
# The operations of the producer (hopper_ring.load_kv_tile) and of the two consumers
# (hopper_kernel._key_tile, _overlapped_tile and key_loop's prologue and last P V, per item
# of the persistent kernel), on the mbarrier model of test_attention_hopper_persistent_host.
# A fill stands for the TMA bytes landing, the arrive after it for the phase completing;
# "hold" is a wgmma's read starting (its issue), "free" the read complete (the wait_group
# that completes it). Q's buffers are left out: that protocol did not change.

MUTATIONS = ("k_before_s", "v_with_k", "v_on_k_acquire")


def _ops(cfg, items, sms, c, lens, lq, lk, bug=None):
    """The producer's and the consumers' operations for CTA ``c``; ``bug`` one of
    ``MUTATIONS``: consumers that release K before S completed, or V together with K
    (before P V read it), or a producer that acquires K's part alone before both loads."""
    n = cfg.consumers
    ring = ring_plan(cfg, 128 * n)
    assert (ring.parts, ring.empty_parts) == (PARTS, PARTS)
    prod, cons = [], [[] for _ in range(n)]
    pending = [None] * n  # item_overlap: the last P V each consumer issues with the next S

    def buf(part, it):
        return (part, ring.stage(it))

    def release(part, it):
        return [("arrive", ("empty", part, ring.stage(it)), 128 * n)]

    for _, item, n_tiles, first in model.cta_walk(cfg, items, sms, c, lens, lq, lk):

        def read(part, it, kt):  # wait for the part's full barrier, then issue the read
            return [("wait", ("full", part, ring.stage(it)), ring.parity(it)),
                    ("hold", buf(part, it), (item, kt, part))]  # fmt: skip

        def done_k(it):  # the wait_group that completes S, then (split_release) K's release
            if bug == "k_before_s":
                return release(K, it) + [("free", buf(K, it))]
            return [("free", buf(K, it))] + release(K, it) + (
                release(V, it) if bug == "v_with_k" else [])  # fmt: skip

        def done_v(it):  # the wait_group that completes P V, then V's release
            return [("free", buf(V, it))] + ([] if bug == "v_with_k" else release(V, it))

        for kt in range(n_tiles):
            it = first + kt
            for part in (K, V):  # each part acquired on its own, K's boxes first
                if part == K or bug != "v_on_k_acquire":
                    prod.append(("wait", ("empty", part, ring.stage(it)), 1 - ring.parity(it)))
                prod += [("fill", buf(part, it), (item, kt, part)),
                         ("arrive", ("full", part, ring.stage(it)), 1)]  # fmt: skip
        for w in range(n):
            ops, turn = cons[w], model.turn_ops(cfg, w)
            mine = model.consumer_tiles(cfg, item, n_tiles, w, lens, lq, lk)
            for kt in range(mine):
                it = first + kt
                if not cfg.overlap:  # _key_tile: K, S, the softmax, then V and P V
                    ops += read(K, it, kt) + turn + done_k(it)
                    ops += read(V, it, kt) + done_v(it)
                elif kt == 0 and pending[w] is not None:  # item_overlap: this item's first
                    # S issued with the previous item's last P V (overlapped_step)
                    last, held = pending[w]
                    ops += [("wait", ("full", V, ring.stage(last)), ring.parity(last))]
                    ops += read(K, it, kt) + [("hold", buf(V, last), held)]
                    ops += turn + done_k(it) + done_v(last)
                elif kt == 0:  # the prologue: S of the first tile
                    ops += read(K, it, kt) + turn + done_k(it)
                else:  # _overlapped_tile: both waits, S and P V issued, S done, P V done
                    ops += [("wait", ("full", V, ring.stage(it - 1)), ring.parity(it - 1))]
                    ops += read(K, it, kt) + [("hold", buf(V, it - 1), (item, kt - 1, V))]
                    ops += turn + done_k(it) + done_v(it - 1)
            pending[w] = None
            if cfg.overlap and cfg.item_overlap:  # P V of the last tile: with the next S
                pending[w] = (first + mine - 1, (item, mine - 1, V))
            elif cfg.overlap:  # P V of the last tile
                last = first + mine - 1
                ops += read(V, last, mine - 1) + done_v(last)
            for kt in range(mine, n_tiles):  # _skipped_tile: wait K, turn, release K, then V
                it = first + kt
                ops += [("wait", ("full", K, ring.stage(it)), ring.parity(it))] + turn
                ops += release(K, it) + [("wait", ("full", V, ring.stage(it)), ring.parity(it))]
                ops += release(V, it)
    for w in range(n):  # the last item's last P V (item_overlap: after the item loop)
        if pending[w] is not None:
            last, held = pending[w]
            cons[w] += [("wait", ("full", V, ring.stage(last)), ring.parity(last)),
                        ("hold", buf(V, last), held)] + done_v(last)  # fmt: skip
    model.open_turns(cfg, cons)
    return prod, cons


class _Early(dict):
    """The model's buffer contents, also noting every K fill made while a consumer still
    reads V of the same stage (K released early at work)."""

    def __init__(self, machine):
        super().__init__()
        self.machine, self.early = machine, 0

    def __setitem__(self, key, value):
        part, stage = key
        if part == K and self.machine.held.get((V, stage)):
            self.early += 1
        super().__setitem__(key, value)


class _Machine(model._Machine):
    def __init__(self):
        super().__init__()
        self.data = _Early(self)


def _run(prod, cons, seed, monkeypatch):
    with monkeypatch.context() as mp:
        mp.setattr(model, "_Machine", _Machine)
        return model._run(prod, cons, seed)


@settings(max_examples=250, deadline=None)
@given(
    **{**model.PROTOCOL_CASES, "stages": st.integers(1, 4)},
    consumers=st.sampled_from([2, 3]),
    item_overlap=st.booleans(),
)
def test_release_protocol_never_deadlocks_or_races(lq, lk, heads, lens, causal, pingpong,
                                                   overlap, stages, sms, seed,
                                                   consumers, item_overlap):  # fmt: skip
    """Many items per CTA (small ``sms``) carry the ring's count, hence every part's full
    and empty parities, across items; one item per CTA is the one-item kernel's ring. One
    stage where the config allows it (not with overlap). Two or three consumers; with
    overlap, also the items overlapped (each item's first S with the last P V before it)."""
    stages = max(stages, 2) if overlap else stages
    item_overlap = item_overlap and overlap and not (consumers == 3 and causal)
    cfg = HopperAttentionConfig(d=64, bn=64, stages=stages, causal=causal, pingpong=pingpong,
                                overlap=overlap, persistent=True, split_kv=True,
                                split_release=True, consumers=consumers,
                                item_overlap=item_overlap)  # fmt: skip
    items = work_items(-(-lq // cfg.bm), heads, len(lens))
    mp = pytest.MonkeyPatch()
    for c in range(min(items, sms)):
        prod, cons = _ops(cfg, items, sms, c, (lens, heads), lq, lk)
        m = _run(prod, cons, seed + c, mp)
        assert not any(m.held.values())  # every K and V read completed
        # every empty barrier completed once per use of its stage: parts in step
        for s in range(stages):
            assert m.done.get(("empty", K, s), 0) == m.done.get(("empty", V, s), 0)
            assert m.done.get(("full", K, s), 0) == m.done.get(("empty", K, s), 0)
        if pingpong:  # balanced: only the last consumer's opening arrival is left over
            assert m.named.get(1, 0) % 2 == 1
            assert all(m.named.get(b, 0) % 2 == 0 for b in range(2, consumers + 1))


@pytest.mark.parametrize("overlap", [False, True], ids=["plain", "overlap"])
def test_k_loads_while_v_is_read(overlap, monkeypatch):
    """The option is not the old protocol: under some interleaving the producer fills K
    of a later tile into a stage whose V a consumer still reads (2 stages, the 128-key
    tile's count at d = 128); with one empty barrier per stage that never happens."""
    cfg = HopperAttentionConfig(d=64, bn=64, stages=2, overlap=overlap, persistent=True,
                                split_kv=True, split_release=True)  # fmt: skip
    prod, cons = _ops(cfg, 1, 1, 0, ([640], 1), 128, 640)
    early = sum(_run(prod, cons, seed, monkeypatch).data.early for seed in range(30))
    assert early > 0

    # the control: the same producer and consumers with the stage's two releases made one
    # (V's release, after P V, counted for both parts), as without split_release
    def whole(ops):
        out = []
        for op in ops:
            if op[0] == "arrive" and op[1][0] == "empty":
                if op[1][1] == V:
                    out += [op, ("arrive", ("empty", K, op[1][2]), 256)]
            else:
                out.append(op)
        return out

    late = sum(_run(prod, [whole(o) for o in cons], seed, monkeypatch).data.early
               for seed in range(30))  # fmt: skip
    assert late == 0


@pytest.mark.parametrize("bug", MUTATIONS)
@pytest.mark.parametrize("overlap", [False, True], ids=["plain", "overlap"])
def test_model_catches_broken_releases(bug, overlap, monkeypatch):
    """The model is not vacuous: each broken variant refills a tile under a reading
    consumer, hands a consumer the wrong tile, or deadlocks, under some interleaving; the
    correct protocol on the same shapes never does."""
    cfg = HopperAttentionConfig(d=64, bn=64, stages=2, overlap=overlap, persistent=True,
                                split_kv=True, split_release=True)  # fmt: skip
    shape = (2, 1, 0, ([300], 1), 256, 300)

    def run(prod, cons, seed):
        return _run(prod, cons, seed, monkeypatch)

    assert model.failing_seeds(run, *_ops(cfg, *shape, bug=bug), range(40)) > 0, bug
    good = _ops(cfg, *shape)
    for seed in range(40):
        _run(*good, seed, monkeypatch)
