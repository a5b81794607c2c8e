"""The persistent schedule of the Hopper attention forward (tylo/ops/attention/hopper_persistent.py)
without a GPU: the item order is a bijection with the q-tiles of one (batch, head)
consecutive (heaviest first with causal), u32 arithmetic gives the same items as Python's up
to 2**32 - 1 items, the CTAs' item sets partition the items, the host's grid and refusals
(checked against the arithmetic they claim), the configuration, and a model of the kernel's
barrier protocol (the K/V ring with a global count, the double-buffered Q, the ping-pong
named barriers) run under random interleavings: no deadlock, no stage or Q buffer refilled
while a consumer reads it, every read sees the data of its own item and tile.
``tests/gpu/test_attention_hopper_persistent.py`` runs the kernel."""

from __future__ import annotations

import random
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tylo
from tylo.arrays import DeviceArray
from tylo.nvgpu.errors import PlanError
from tylo.nvgpu.mbarrier import PipelinePlan
from tylo.ops.attention import hopper_host
from tylo.ops.attention.hopper_host import choose_config, persistent_grid
from tylo.ops.attention.hopper_kernel import HopperAttentionConfig, key_tiles, own_tiles
from tylo.ops.attention.hopper_persistent import item_order, work_items
from tylo.ops.attention.hopper_roles import consumer_rows
from tylo.ops.attention.hopper_schedule import cta_shares, item_weights
from tylo.ops.attention.reference import AttentionInputError


@settings(max_examples=60, deadline=None)
@given(q_tiles=st.integers(1, 9), heads=st.integers(1, 5), batch=st.integers(1, 4),
       causal=st.booleans(), sms=st.integers(1, 140))  # fmt: skip
def test_items_are_a_bijection_and_the_ctas_partition_them(q_tiles, heads, batch, causal, sms):
    items = work_items(q_tiles, heads, batch)
    order = [item_order(t, q_tiles, heads, causal) for t in range(items)]
    assert sorted(order) == sorted(
        (k, h, b) for k in range(q_tiles) for h in range(heads) for b in range(batch)
    )
    for t in range(items - 1):  # one (batch, head) at a time, its q-tiles consecutive
        k, h, b = order[t]
        k2, h2, b2 = order[t + 1]
        if (h2, b2) == (h, b):
            assert k2 == (k - 1 if causal else k + 1)
        else:  # the next (batch, head) starts at its heaviest tile (the last, with causal)
            assert k == (0 if causal else q_tiles - 1) and k2 == (q_tiles - 1 if causal else 0)
    grid = min(items, sms)
    cfg = HopperAttentionConfig(d=64, causal=causal, stages=2)
    weights = item_weights(cfg, q_tiles * cfg.bm, q_tiles * cfg.bm, heads * batch)
    taken = [t for share in cta_shares(weights, q_tiles, heads * batch, grid) for t in share]
    assert sorted(taken) == list(range(items))  # tests/host/test_attention_hopper_balance_host.py


@pytest.mark.parametrize(
    "q_tiles, heads, batch",
    [(65537, 65535, 1), (1, 1, 2**32 - 1), (2**16, 2**16 - 1, 1), (3, 5, 7)],
)
def test_u32_arithmetic_gives_the_same_items(q_tiles, heads, batch):
    """The kernel decomposes items in u32: up to 2**32 - 1 items nothing wraps (numpy's
    uint32 here wraps as the kernel's would)."""
    items = work_items(q_tiles, heads, batch)
    assert items < 2**32
    rng = np.random.default_rng(0)
    ts = sorted({0, 1, items - 1, items // 2, *map(int, rng.integers(0, items, 50))})
    u = np.uint32
    for causal in (False, True):
        for t in ts:
            got = item_order(u(t), u(q_tiles), u(heads), causal)
            assert tuple(int(x) for x in got) == item_order(t, q_tiles, heads, causal)


def test_grid_is_the_smaller_of_items_and_sms():
    cfg = HopperAttentionConfig(d=64, stages=4, persistent=True)
    for lq, h, b, sms in [(1, 1, 1, 132), (1000, 8, 8, 132), (129, 1, 1, 132), (128, 3, 44, 132)]:
        items = -(-lq // 128) * h * b
        assert persistent_grid(cfg, lq, 1000, h, b, sms=sms) == min(items, sms)


@pytest.mark.parametrize(
    "lq, lk, h, b, what",
    [
        (128 * 65537, 64, 65535, 2, "u32 item index"),  # 2 (2**32 - 1) items
        (128, 64, 2**16, 2**16, "u32 item index"),  # exactly 2**32
        (2**31 - 1, 2**31 - 1, 1, 1, "u32 ring count"),  # one CTA's ring runs past 2**32
    ],
)
def test_shapes_past_the_u32_arithmetic_are_refused(lq, lk, h, b, what):
    cfg = HopperAttentionConfig(d=64, bn=16, stages=4, persistent=True)
    items = -(-lq // cfg.bm) * h * b
    with pytest.raises(AttentionInputError, match=what):
        persistent_grid(cfg, lq, lk, h, b, sms=1)
    grid = min(items, 1)  # the claim, by the arithmetic it names
    assert items >= 2**32 or -(-items // grid) * -(-lk // cfg.bn) >= 2**32
    # the largest accepted: 2**32 - 1 items, short keys
    assert persistent_grid(cfg, 128 * 65537, 16, 65535, 1, sms=132) == 132


def test_launch_refuses_before_touching_a_device():
    from tylo.ops.attention.hopper_host import hopper_attention

    q = DeviceArray(1 << 20, (2**16, 2**16, 8, 64), (2**25, 2**9, 64, 1), tylo.bf16, 0)
    walk = HopperAttentionConfig(d=64, stages=4, persistent=True)
    with pytest.raises(AttentionInputError, match="u32 item index"):
        hopper_attention(q, q, q, cfg=walk)
    with pytest.raises(AttentionInputError, match="fit neither kernel"):
        hopper_attention(q, q, q)
    for causal in (False, True):  # the claim, by the arithmetic it names
        cfg = hopper_host.choose_config(64, tylo.bf16, causal, lk=8)
        assert 2**16 > 65535 and -(-8 // cfg.bm) * 2**16 * 2**16 >= 2**32
    one = HopperAttentionConfig(d=64, stages=4)
    with pytest.raises(AttentionInputError, match="persistent=True"):  # the 1-D grid's way out
        hopper_attention(q, q, q, cfg=one)


def test_config():
    for bad in (1, "yes", None, np.bool_(True)):
        with pytest.raises(PlanError, match="persistent must be a bool"):
            HopperAttentionConfig(persistent=bad)
    for d, bn, stages in ((64, 128, 4), (128, 128, 2), (128, 64, 3)):
        one = HopperAttentionConfig(d=d, bn=bn, stages=stages)
        walk = HopperAttentionConfig(d=d, bn=bn, stages=stages, persistent=True)
        assert walk.q_buffers == 2 and one.q_buffers == 1
        assert walk.shared_bytes() == one.shared_bytes() + 128 * d * 2 <= 227 * 1024
        assert walk.ring_offset() * 2 % 1024 == 0  # the ring's swizzled tiles stay aligned
        assert "persistent" in walk.describe() and "persistent" not in one.describe()
    assert choose_config(64, tylo.bf16, True).persistent is True  # short keys: measured
    assert choose_config(64, tylo.bf16, True, lk=16384).persistent is False
    assert choose_config(64, tylo.bf16, True, persistent=False).persistent is False
    assert choose_config(64, tylo.bf16, True, lk=16384, persistent=True).persistent is True
    with pytest.raises(PlanError, match="persistent must be a bool"):
        choose_config(64, tylo.bf16, False, persistent=1)


# -- a model of the kernel's barrier protocol --------------------------------------------
# The roles' operations, generated by loops shaped as the kernel's (_produce, _consume,
# key_loop), run on a model of mbarriers (a wait on parity p returns once the barrier's
# completed-phase count has the other parity: PTX's try_wait.parity) and named barriers
# (bar.sync / bar.arrive, two warpgroups per generation), in a random interleaving.


class _Machine:
    def __init__(self):
        self.done = {}  # mbarrier -> completed phases
        self.pending = {}  # mbarrier -> arrivals in the current phase
        self.named = {}  # named barrier -> arrivals so far
        self.data = {}  # buffer -> what it holds
        self.held = {}  # buffer -> consumers reading it

    def arrive(self, bar, count):
        self.pending[bar] = self.pending.get(bar, 0) + 1
        if self.pending[bar] == count:
            self.pending[bar] = 0
            self.done[bar] = self.done.get(bar, 0) + 1

    def ready(self, op):
        kind = op[0]
        if kind == "wait":  # (wait, bar, parity)
            return self.done.get(op[1], 0) % 2 != op[2]
        if kind == "sync":  # (sync, bar, generation it completes)
            return self.named.get(op[1], 0) >= 2 * (op[2] + 1)
        return True


def cta_walk(cfg, items, sms, c, lens, lq, lk):
    """CTA ``c``'s items as both roles of the kernel walk them (``lens``: the key lengths
    per batch entry and the number of heads): ``(i, (k, h, b), n_tiles, first)``, ``first``
    the ring's iteration count at the item's first key tile."""
    grid = min(items, sms)
    q_tiles = -(-lq // cfg.bm)
    bh = lens[1] * len(lens[0])
    first = 0
    for i, t in enumerate(cta_shares(item_weights(cfg, lq, lk, bh), q_tiles, bh, grid)[c]):
        k, h, b = item_order(int(t), q_tiles, lens[1], cfg.causal)
        kv = min(max(lens[0][b], 0), lk)
        n_tiles = key_tiles(cfg, k * cfg.bm, kv, lq)[1]
        yield i, (k, h, b), n_tiles, first
        first += n_tiles


def consumer_tiles(cfg, item, n_tiles, w, lens, lq, lk):
    """The key tiles consumer ``w`` computes of an item of ``n_tiles``: where
    ``own_tiles(cfg)`` those its own 64 rows see (``key_loop``), else all."""
    if not own_tiles(cfg):
        return n_tiles
    k, _, b = item
    kv = min(max(lens[0][b], 0), lk)
    return min(key_tiles(cfg, k * cfg.bm + 64 * w, kv, lq, rows=64)[1], n_tiles)


def turn_ops(cfg, w):
    """Consumer ``w``'s ping-pong turn (empty without ping-pong): wait on its own turn
    barrier, then give the next consumer its turn, with the barriers the kernel's
    ``consumer_rows`` names for warpgroup ``1 + w``."""
    own, nxt = consumer_rows(cfg, 1 + w, 128 * (1 + w))[1]
    return [("turn", own), ("give", nxt)] if cfg.pingpong else []


def open_turns(cfg, cons):
    """With ping-pong the last consumer gives consumer 0 the first turn, before anything."""
    if cfg.pingpong:
        cons[-1].insert(0, ("give", 1))


def _ops(cfg, items, sms, c, lens, lq, lk):
    """The producer's and the consumers' operations for CTA ``c`` (``cfg.consumers`` of
    them; ping-pong: each waits on its own turn barrier and gives the next its turn, the
    barriers the kernel's ``consumer_rows`` names). Each consumer's item is a head (its Q
    and, with overlap, its first tile's S), a body (the other tiles) and a tail (the last
    P V's release, the skipped tiles, Q's release); with ``item_overlap`` the next item's
    head comes between this item's body and its tail, as the kernel issues the next item's
    first S with this item's last P V."""
    n = cfg.consumers
    ring, qp = PipelinePlan(cfg.stages, 128 * n), PipelinePlan(2, 128 * n)
    prod, parts = [], [[] for _ in range(n)]
    for i, item, n_tiles, first in cta_walk(cfg, items, sms, c, lens, lq, lk):
        qb = ("q", qp.stage(i))
        prod += [("wait", ("qempty", qp.stage(i)), 1 - qp.parity(i)), ("fill", qb, item),
                 ("arrive", ("qfull", qp.stage(i)), 1)]  # fmt: skip
        for kt in range(n_tiles):
            it = first + kt
            st_ = ("kv", ring.stage(it))
            prod += [("wait", ("empty", ring.stage(it)), 1 - ring.parity(it)),
                     ("fill", st_, (item, kt)),
                     ("arrive", ("full", ring.stage(it)), 1)]  # fmt: skip
        for w in range(n):
            mine = consumer_tiles(cfg, item, n_tiles, w, lens, lq, lk)
            head = [("wait", ("qfull", qp.stage(i)), qp.parity(i)), ("hold", qb, item)]
            body, tail = [], []
            for kt in range(mine):
                it = first + kt
                st_ = ("kv", ring.stage(it))
                ops = head if cfg.overlap and kt == 0 else body
                ops += [("wait", ("full", ring.stage(it)), ring.parity(it)),
                        ("hold", st_, (item, kt))]  # fmt: skip
                ops += turn_ops(cfg, w)
                if not cfg.overlap:
                    ops += [("free", st_), ("arrive", ("empty", ring.stage(it)), 128 * n)]
                elif kt > 0:  # overlap: the previous stage is released after this one's S
                    prev = ("kv", ring.stage(it - 1))
                    ops += [("free", prev),
                            ("arrive", ("empty", ring.stage(it - 1)), 128 * n)]  # fmt: skip
            if cfg.overlap:
                last = first + mine - 1
                tail += [("free", ("kv", ring.stage(last))),
                         ("arrive", ("empty", ring.stage(last)), 128 * n)]  # fmt: skip
            for kt in range(mine, n_tiles):  # _skipped_tile: wait, the turn, release
                it = first + kt
                tail += [("wait", ("full", ring.stage(it)), ring.parity(it))]
                tail += turn_ops(cfg, w) + [("arrive", ("empty", ring.stage(it)), 128 * n)]
            tail += [("free", qb), ("arrive", ("qempty", qp.stage(i)), 128 * n)]
            parts[w].append((head, body, tail))
    cons = [item_sequence(cfg, p) for p in parts]
    open_turns(cfg, cons)
    return prod, cons


def item_sequence(cfg, parts):
    """One consumer's operations from its items' ``(head, body, tail)``: in turn, or with
    ``cfg.item_overlap`` each item's tail after the next item's head (the last item's at
    the end)."""
    ops = []
    for i, (head, body, tail) in enumerate(parts):
        if not cfg.item_overlap or i == 0:
            ops += head
        ops += body
        if cfg.item_overlap and i + 1 < len(parts):
            ops += parts[i + 1][0]
        ops += tail
    return ops


def failing_seeds(run, prod, cons, seeds) -> int:
    """How many of the interleavings ``seeds`` of ``run(prod, cons, seed)`` fail (an
    AssertionError of the model: a tile refilled under a reader, a stale tile, a deadlock):
    a broken protocol must fail under some, or the model would be vacuous."""
    failures = 0
    for seed in seeds:
        try:
            run(prod, cons, seed)
        except AssertionError:
            failures += 1
    return failures


def _run(prod, cons, seed):
    m = _Machine()
    # one consumer op stands for its warpgroup's 128 threads: arrivals count 128 each
    actors = [(prod, 1)] + [(ops, 128) for ops in cons]
    pos = [0] * len(actors)
    reg = {}  # (actor, op index) -> the generation a sync registered for
    rng = random.Random(seed)
    while True:
        live = [a for a in range(len(actors)) if pos[a] < len(actors[a][0])]
        if not live:
            return m
        moved = False
        for a in rng.sample(live, len(live)):
            ops, weight = actors[a]
            op = ops[pos[a]]
            if op[0] == "turn":  # bar.sync: arrive, then wait for the generation
                key = (a, pos[a])
                if key not in reg:
                    reg[key] = m.named.get(op[1], 0) // 2
                    m.named[op[1]] = m.named.get(op[1], 0) + 1
                if not m.ready(("sync", op[1], reg[key])):
                    continue
            elif not m.ready(op):
                continue
            if op[0] == "arrive":
                for _ in range(weight):
                    m.arrive(op[1], op[2])
            elif op[0] == "give":
                m.named[op[1]] = m.named.get(op[1], 0) + 1
            elif op[0] == "fill":
                assert not m.held.get(op[1]), f"{op[1]} refilled while {m.held[op[1]]} read it"
                m.data[op[1]] = op[2]
            elif op[0] == "hold":
                assert m.data.get(op[1]) == op[2], f"{op[1]} holds {m.data.get(op[1])}, not {op[2]}"
                m.held.setdefault(op[1], set()).add(a)
            elif op[0] == "free":
                m.held[op[1]].discard(a)
            pos[a] += 1
            moved = True
            break
        assert moved, f"deadlock at {[actors[a][0][pos[a]] for a in live]}"


# the random cases of the barrier-protocol models (here, split_kv's and split_release's):
# lengths, heads, per-batch key lengths (0: an empty item), mask, schedules, ring stages,
# and few SMs (so that many items per CTA carry the ring's count across items)
PROTOCOL_CASES = dict(
    lq=st.integers(1, 700), lk=st.integers(1, 500), heads=st.integers(1, 3),
    lens=st.lists(st.one_of(st.just(0), st.integers(1, 600)), min_size=1, max_size=3),
    causal=st.booleans(), pingpong=st.booleans(), overlap=st.booleans(),
    stages=st.integers(2, 4), sms=st.integers(1, 6), seed=st.integers(0, 2**16),
)  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(**PROTOCOL_CASES, consumers=st.sampled_from([2, 3]), item_overlap=st.booleans())
def test_protocol_model_never_deadlocks_or_races(
    lq, lk, heads, lens, causal, pingpong, overlap, stages, sms, seed, consumers, item_overlap
):
    item_overlap = item_overlap and overlap and not (consumers == 3 and causal)
    cfg = HopperAttentionConfig(d=64, bn=64, stages=stages, causal=causal, pingpong=pingpong,
                                overlap=overlap, persistent=True, consumers=consumers,
                                item_overlap=item_overlap)  # fmt: skip
    items = work_items(-(-lq // cfg.bm), heads, len(lens))
    for c in range(min(items, sms)):
        prod, cons = _ops(cfg, items, sms, c, (lens, heads), lq, lk)
        m = _run(prod, cons, seed + c)
        if pingpong:  # balanced: only the last consumer's opening arrival is left over
            assert m.named.get(1, 0) % 2 == 1
            assert all(m.named.get(b, 0) % 2 == 0 for b in range(2, consumers + 1))


@pytest.mark.parametrize("consumers", [2, 3])
def test_protocol_model_catches_a_single_q_buffer(consumers):
    """The model is not vacuous: with one Q buffer per two items' parities (every item in
    buffer 0), a producer runs ahead and refills Q under a reading consumer, or a consumer
    takes an old phase for a new one."""
    cfg = HopperAttentionConfig(d=64, bn=64, stages=2, persistent=True, consumers=consumers)
    prod, cons = _ops(cfg, 4, 1, 0, ([300], 1), 512, 300)

    def one_buffer(ops):
        q = ("q", "qfull", "qempty")
        return [(op[0], (op[1][0], 0), *op[2:]) if isinstance(op[1], tuple) and op[1][0] in q
                else op for op in ops]  # fmt: skip

    bad, cons = one_buffer(prod), [one_buffer(ops) for ops in cons]
    assert failing_seeds(_run, bad, cons, range(30)) > 0


def test_own_tiles_skip_and_the_model_catches_a_skip_without_its_wait():
    """With three consumers at a causal 1000 x 1000 (192-row items; the last item's
    consumers 1 and 2 hold no row below Lq) consumers skip tiles of their items; with two
    (128-row items) none does here. The model is not vacuous about the skip: a skipped tile
    released without waiting for it first can count towards an earlier phase of its stage
    while another consumer still reads that stage."""
    for consumers, skips in ((2, False), (3, True)):
        cfg = HopperAttentionConfig(d=64, bn=64, stages=2, persistent=True, causal=True,
                                    pingpong=True, overlap=True, consumers=consumers)  # fmt: skip
        items = work_items(-(-1000 // cfg.bm), 1, 1)
        walked = list(cta_walk(cfg, items, 1, 0, ([1000], 1), 1000, 1000))
        skipped = sum(n - consumer_tiles(cfg, item, n, w, ([1000], 1), 1000, 1000)
                      for _, item, n, _ in walked for w in range(consumers))  # fmt: skip
        assert (skipped > 0) == skips, (consumers, skipped)
    prod, cons = _ops(cfg, items, 1, 0, ([1000], 1), 1000, 1000)
    assert failing_seeds(_run, prod, cons, range(20)) == 0

    def no_wait(ops):  # drop the full-barrier wait before each skipped tile's turn
        out = []
        for j, op in enumerate(ops):
            nxt = ops[j + 1] if j + 1 < len(ops) else ()
            follows = ops[j + 3] if j + 3 < len(ops) else ()
            if (
                op[0] == "wait"
                and op[1][0] == "full"
                and nxt
                and nxt[0] == "turn"
                and follows
                and follows[0] == "arrive"
            ):
                continue
            out.append(op)
        return out

    bad = [no_wait(ops) for ops in cons]
    assert bad != cons and failing_seeds(_run, prod, bad, range(40)) > 0


def test_protocol_model_catches_a_broken_rotation():
    """With three consumers the two-consumer hand-over (``3 - wg``: the other one) is no
    rotation: the third consumer gives its turn to barrier 0, consumer 0 never gets a second
    turn and the model deadlocks under every interleaving; the kernel's rotation does not."""
    cfg = HopperAttentionConfig(d=64, bn=64, stages=2, persistent=True, pingpong=True,
                                consumers=3)  # fmt: skip
    prod, cons = _ops(cfg, 2, 1, 0, ([300], 1), 256, 300)
    bad = [[("give", 3 - ops[i - 1][1]) if op[0] == "give" and i else op
            for i, op in enumerate(ops)] for ops in cons]  # fmt: skip
    assert bad != cons and failing_seeds(_run, prod, bad, range(10)) == 10
    assert failing_seeds(_run, prod, cons, range(10)) == 0


def test_benchmark_variants_are_choose_config_arguments():
    """benchmarks/attention.py --path hopper --variants: every entry is choose_config's
    keyword arguments, "persistent" the default schedules made persistent and "one-item"
    made one CTA per item; a variant that names neither keeps the default's kernel; the
    "3 consumers" ones take three consumer warpgroups (192 rows), the "2 consumers" one two,
    the others the default's count (three only where measured and fitting: choose_config)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "attention.py"
    spec = importlib.util.spec_from_file_location("_bench_attention", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    for causal, lk in ((False, 1024), (True, 1024), (True, 16384)):
        default = choose_config(64, tylo.bf16, causal, lk=lk)
        for name, kw in bench.HOPPER_VARIANTS.items():
            if "bn" in kw:
                continue  # d = 128's tiles
            try:
                cfg = choose_config(64, tylo.bf16, causal, lk=lk, **kw)
            except PlanError:  # a tile that does not fit, or items overlapped where three
                # consumers compute their own causal tiles: the benchmark skips it too
                assert (kw.get("consumers") == 3 and "stages" in kw) or kw.get("item_overlap")
                continue
            named = True if "persistent" in name else False if "one-item" in name else None
            assert kw.get("persistent") is named, name
            assert cfg.persistent == (default.persistent if named is None else named), name
            if name.startswith(("2 consumers", "3 consumers")):
                assert cfg.consumers == kw["consumers"] == int(name[0]), name
            else:  # the default's count, or two where three would not fit this schedule
                assert "consumers" not in kw and cfg.consumers in {2, default.consumers}, name
            assert cfg.bm == 64 * cfg.consumers
        assert sum(k.startswith("3 consumers") for k in bench.HOPPER_VARIANTS) >= 4
        for name, flag in (("persistent", True), ("one-item", False)):
            got = choose_config(64, tylo.bf16, causal, lk=lk, **bench.HOPPER_VARIANTS[name])
            want = {**default.__dict__, "persistent": flag}
            if not flag:  # the item options belong to the persistent kernel: off
                want.update(item_overlap=False, o_buffer=False)
            assert got == HopperAttentionConfig(**want)


def test_item_overlap_model_catches_a_head_issued_too_early(monkeypatch):
    """The item-overlap order is checked, not assumed: the next item's head (its Q and its
    first tile's S) issued before this item's body, instead of after it, waits for a ring
    stage that only this item's body releases (2 stages, 5 key tiles per item) and
    deadlocks under every interleaving; the kernel's order never does."""
    cfg = HopperAttentionConfig(d=64, bn=64, stages=2, persistent=True, overlap=True,
                                pingpong=True, item_overlap=True)  # fmt: skip
    shape = (2, 1, 0, ([300], 1), 256, 300)  # two items on one CTA
    prod, cons = _ops(cfg, *shape)
    assert failing_seeds(_run, prod, cons, range(20)) == 0

    def early(cfg, parts):
        ops = []
        for i, (head, body, tail) in enumerate(parts):
            ops += (head if i == 0 else []) + (parts[i + 1][0] if i + 1 < len(parts) else [])
            ops += body + tail
        return ops

    monkeypatch.setattr(sys.modules[__name__], "item_sequence", early)
    bad_prod, bad = _ops(cfg, *shape)
    assert bad != cons and failing_seeds(_run, bad_prod, bad, range(20)) == 20
