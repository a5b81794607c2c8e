"""The persistent schedule of the Hopper attention forward (``HopperAttentionConfig(
persistent=True)``; walk-through: docs/attention_hopper.md, "Persistent schedule").

A *work item* is one query tile of ``bm`` rows of one (batch, head). The host launches
``min(items, SMs)`` CTAs on a 1-D grid. :func:`item_order` numbers the items with the
q-tiles of one (batch, head) consecutive (from the last with ``causal``: the rows that see
the most keys first), and the host deals them out in a table the kernel reads
(:mod:`tylo.ops.attention.hopper_schedule`): whole rounds of mirrored pairs (a q-tile of one
(batch, head) with the mirror q-tile of the next, ``q_tiles + 1`` causal key tiles a pair),
then the last few rounds' items heaviest first to the least-loaded CTA, so that no CTA given
one of those ends more than the heaviest item above the mean. The pairs in flight at one
time are ~``grid`` consecutive ones of a few (batch, head)s, so they read the same K and V
(from L2). The roles are those of :mod:`tylo.ops.attention.hopper_kernel`, run on across
items:

- the producer thread loads item ``i``'s Q into buffer ``i % 2`` (a two-stage
  :class:`~tylo.nvgpu.mbarrier.Pipeline` of Q buffers: a full barrier completed by TMA's
  bytes, an empty barrier released by the consumers), then streams the item's K and V tiles
  into the K/V ring, whose iteration count is global: the sum of the previous items' key-tile
  counts, which vary per item with causal and padding masks (both roles compute them with
  :func:`_item`, so they agree);
- the consumers wait for item ``i``'s Q, run the key loop of the non-persistent kernel
  (every schedule option) from the ring's running count, release the Q buffer (every wgmma
  that read it is complete) and store the item's O and log-sum-exp by ownership while the
  producer already loads item ``i + 2``'s Q and the next item's keys; with ``tma_store``
  they stage O in their rows of the Q buffer, store it by TMA and release the buffer only
  once the store has read it (:mod:`tylo.ops.attention.hopper_epilogue`).

With ``item_overlap`` a consumer issues item ``i + 1``'s first ``S = Q Kᵀ`` together with item
``i``'s last ``P V`` and finishes item ``i`` after that tile's softmax
(:func:`_consume_items_overlapped`); with ``o_buffer`` the TMA-store epilogue stages O in a
buffer of its own, so Q is released before it and the stores' read is waited for one item
later (docs/attention_hopper.md, "Running on from one item into the next").

Every item loads its Q and its consumers wait for and release it, even one whose rows see no
key, so buffer ``i % 2`` is used in the same order by both roles. The ping-pong schedule's
named barriers stay balanced across items: each consumer issues ``S = Q Kᵀ`` the same number
of times per item (``n_tiles``), and the last consumer's opening arrival is made once per CTA.
"""

from __future__ import annotations

from typing import Any

import tylo
from tylo.kernel.values import to_index
from tylo.layouts import Layout
from tylo.nvgpu import tma
from tylo.nvgpu.errors import PlanError
from tylo.nvgpu.mbarrier import Pipeline, PipelinePlan
from tylo.nvgpu.warpgroup.mma import WarpgroupMMAAtom
from tylo.nvgpu.warpgroup.roles import set_max_registers
from tylo.ops.attention.hopper_epilogue import check_o_map, tma_epilogue
from tylo.ops.attention.hopper_kernel import (
    BLOCK,
    Dim,
    consumer_q,
    epilogue,
    first_tile,
    fresh_stats,
    key_loop,
    key_tiles,
    overlapped_step,
    overlapped_tiles,
    pv_alone,
)
from tylo.ops.attention.hopper_ring import load_kv_tile, ring_plan
from tylo.ops.attention.hopper_roles import consumer_rows, turn_barrier
from tylo.tile.fragment import zeros
from tylo.tile.views import GlobalTile, SharedTile

__all__ = [
    "hopper_attention_persistent_kernel",
    "item_order",
    "work_items",
]


# --8<-- [start:order]
def work_items(q_tiles: int, heads: int, batch: int) -> int:
    """The number of work items, ``q_tiles * heads * batch`` (host side)."""
    return q_tiles * heads * batch


def item_order(t: Any, q_tiles: Any, heads: Any, causal: bool) -> tuple[Any, Any, Any]:
    """Item ``t`` of the schedule as ``(q_tile, head, batch)``: ``t = (batch * heads + head)
    * q_tiles + k``, the q-tile ``k`` (``q_tiles - 1 - k`` with ``causal``: the heaviest
    first). Python ints on the host, u32 Values in the kernel (a u32 division by a runtime
    value is inline code; a 64-bit one is a subroutine call, and a call makes ptxas serialize
    every wgmma).

    Defining property: a bijection from ``[0, q_tiles * heads * batch)`` onto the items, the
    q-tiles of one (batch, head) consecutive."""
    bh = t // q_tiles
    k = t - bh * q_tiles
    b = bh // heads
    h = bh - b * heads
    return (q_tiles - 1 - k if causal else k), h, b


# --8<-- [end:order]


# --8<-- [start:schedule]
@tylo.inline
def _schedule(cfg, lq, heads, table):
    """What both roles need to walk this CTA's items: the q-tiles per (batch, head) and the
    number of heads (u32), this CTA's item count, and the index of its first item in the
    host's ``table`` (:func:`tylo.ops.attention.hopper_schedule.schedule_table`: ``grid +
    1`` u32 offsets, then the items)."""
    q_tiles = tylo.value((lq + cfg.bm - 1) // cfg.bm, tylo.u32)
    nh = tylo.value(heads, tylo.u32)
    c = to_index(tylo.value(tylo.block_idx.x, tylo.u32), "CTA")
    start = table[c]
    mine = to_index(table[c + 1] - start, "items")
    grid = to_index(tylo.value(tylo.grid_dim.x, tylo.u32), "grid")
    return q_tiles, nh, mine, grid + 1 + to_index(start, "first item")


@tylo.inline
def _item(cfg, i, sched, table, kv_lens, lq, lk):
    """This CTA's ``i``-th item: ``(row0, head, batch, kv, (n_full, n_tiles))``, its first
    query row, its (batch, head), the batch entry's key count clamped to [0, Lk], and its key
    tiles (:func:`~tylo.ops.attention.hopper_kernel.key_tiles`)."""
    q_tiles, nh = sched[0], sched[1]
    # an opaque copy: without it LLVM's reassociation ranks the epilogue's addresses by the
    # depth of this arithmetic and hoists 15 64-bit offsets out of the item loop, which
    # spill with pingpong and causal masks (tests/nvvm/test_attention_hopper_sass.py)
    t = tylo.ptx("mov.b32", table[sched[3] + i], out=tylo.u32)
    k, h, b = item_order(t, q_tiles, nh, cfg.causal)
    row0 = to_index(k, "q-tile") * cfg.bm
    bh, bb = to_index(h, "head"), to_index(b, "batch entry")
    kv = tylo.minimum(tylo.maximum(kv_lens[bb], 0), lk)
    return row0, bh, bb, kv, key_tiles(cfg, row0, kv, lq, tylo.minimum, tylo.maximum)


# --8<-- [end:schedule]


# --8<-- [start:producer]
@tylo.inline
def _produce(cfg, smem, pipe, qpipe, maps, sched, table, kv_lens, lq, lk):
    """The producer thread: per item, Q into buffer ``i % 2`` once the consumers released
    it (item ``i - 2``'s), then the item's K and V tiles into the ring from its running
    iteration count ``first``."""
    tq, tk, tv = maps
    q_elems = cfg.q_elements()
    first = tylo.value(0, tylo.u32)  # the ring's iteration count at this item's first tile
    for i in tylo.range(sched[2]):
        row0, bh, bb, _, tiles = _item(cfg, i, sched, table, kv_lens, lq, lk)
        n_tiles = tiles[1]
        qpipe.producer_acquire(i)
        qpipe.producer_commit(i, tx_bytes=q_elems * cfg.dtype.nbytes)
        for j in range(cfg.blocks):
            qt = SharedTile(
                smem, tq.plan.smem_layout, base=qpipe.stage(i) * q_elems + j * cfg.bm * BLOCK
            )
            tma.load(tq, qt, (row0, bh, bb, BLOCK * j), qpipe.full, qpipe.stage(i))
        at = to_index(first, "ring iteration")
        for kt in tylo.range(n_tiles):
            load_kv_tile(cfg, smem, pipe, (tk, tv), at + kt, kt, bh, bb)
        first = first + tylo.value(n_tiles, tylo.u32)


# --8<-- [end:producer]


# --8<-- [start:consumer]
@tylo.inline
def _finish(cfg, i, item, state, smem, qpipe, outs, c, me, lq):
    """Item ``i``'s end for consumer ``c``: its O and lse stored from ``state = (o, m2,
    lsum)`` (every wgmma complete), ``item = (row0, head, batch)``, and its Q buffer
    released (``tma_store``: O staged in the consumer's rows of that buffer, stored by TMA,
    the buffer released once the store has read it; ``o_buffer``: the buffer released
    first, O staged in the O buffer once the previous item's stores have read it)."""
    acc, m2, lsum = state
    row0, bh, bb = item
    o, lse, osb, osh, osl, lsb, lsh, to = outs
    r0 = row0 + 64 * c
    l_tile = GlobalTile(lse, Layout((lq, 1), (1, 0)), base=bb * lsb + bh * lsh)
    dst = (to, l_tile, r0, bh, bb, lq)
    if cfg.o_buffer:  # every wgmma that read this Q is complete; O goes through its own
        qpipe.consumer_release(i)
        tma_epilogue(cfg, acc, m2, lsum, dst, smem, cfg.o_offset(), c, me, "before")
    elif cfg.tma_store:  # every wgmma that read this Q is complete: its rows are free
        tma_epilogue(cfg, acc, m2, lsum, dst, smem, qpipe.stage(i) * cfg.q_elements(), c, me,
                     "read")  # fmt: skip
        # the elected thread waited for its stores to read the buffer before arriving:
        # the producer's next TMA load into it cannot race them
        qpipe.consumer_release(i)
    else:
        qpipe.consumer_release(i)  # every wgmma that read this Q is complete
        o_tile = GlobalTile(o, Layout((lq, cfg.d), (osl, 1)), base=bb * osb + bh * osh)
        epilogue(acc, m2, lsum, (o_tile, l_tile), me, r0)


@tylo.inline
def _consumer_start(cfg, wg, tid):
    """Consumer warpgroup ``wg``'s rows, turn barriers and thread index
    (:func:`~tylo.ops.attention.hopper_roles.consumer_rows`); with ping-pong the last
    consumer gives consumer 0 the first turn, once per CTA."""
    c, bars, me = consumer_rows(cfg, wg, tid)
    if cfg.pingpong:  # noqa: SIM102 - a static choice around a runtime test
        if wg == cfg.consumers:
            turn_barrier("arrive", 1)
    return c, bars, me


@tylo.inline
def _consume(cfg, wg, smem, pipe, qpipe, sched, table, kv_lens, lq, lk, outs, scale2, tid):
    """Consumer warpgroup ``wg`` (``1 .. cfg.consumers``, a runtime value): per item, wait for
    its Q, run the key loop from the ring's running count, then :func:`_finish` it."""
    c, bars, me = _consumer_start(cfg, wg, tid)
    first = tylo.value(0, tylo.u32)
    for i in tylo.range(sched[2]):
        row0, bh, bb, kv, tiles = _item(cfg, i, sched, table, kv_lens, lq, lk)
        r0 = row0 + 64 * c
        qpipe.consumer_wait(i)
        qbase = qpipe.stage(i) * cfg.q_elements()
        at = to_index(first, "ring iteration")
        state = key_loop(cfg, c, bars, smem, pipe, qbase, tiles, (me, r0, kv, lq), scale2, at)
        _finish(cfg, i, (row0, bh, bb), state, smem, qpipe, outs, c, me, lq)
        first = first + tylo.value(tiles[1], tylo.u32)


@tylo.inline
def _consume_items_overlapped(cfg, wg, smem, pipe, qpipe, sched, table, kv_lens, lq, lk, outs,
                              scale2, tid):  # fmt: skip
    """Consumer warpgroup ``wg`` with ``cfg.item_overlap``: the overlap schedule run across
    the CTA's items as one stream of key tiles. Item ``i + 1``'s first ``S = Q Kᵀ`` is issued
    with item ``i``'s last ``P V`` (:func:`~tylo.ops.attention.hopper_kernel.overlapped_step`
    from fresh statistics), its softmax runs while that ``P V`` does, and item ``i`` is
    finished only then. Every CTA has at least one item (``cta_shares``): the last item is
    peeled, so no wgmma sits under a runtime branch."""
    c, bars, me = _consumer_start(cfg, wg, tid)
    loads = (sched, table, kv_lens, lq, lk)
    o_atom = WarpgroupMMAAtom((64, cfg.d, 16), cfg.dtype, a="registers")
    row0, _, _, kv, tiles = _item(cfg, 0, sched, table, kv_lens, lq, lk)
    qpipe.consumer_wait(0)
    q0 = consumer_q(cfg, smem, qpipe.stage(0) * cfg.q_elements(), c)
    pa, m2, lsum = first_tile(cfg, bars, smem, pipe, q0, fresh_stats(cfg), scale2,
                              (0, (me, row0 + 64 * c, kv, lq), tiles[0]), 0)  # fmt: skip
    o = zeros(o_atom.c)
    first = tylo.value(0, tylo.u32)
    for i in tylo.range(sched[2] - 1):  # the items with a next one
        item, tiles, last, (o, pa, m2, lsum) = _item_tiles(
            cfg, i, first, (o, pa, m2, lsum), smem, pipe, qpipe, loads, (c, bars, me), scale2
        )
        first = first + tylo.value(tiles[1], tylo.u32)
        nrow0, _nh, _nb, nkv, ntiles = _item(cfg, i + 1, sched, table, kv_lens, lq, lk)
        qpipe.consumer_wait(i + 1)
        nqs = consumer_q(cfg, smem, qpipe.stage(i + 1) * cfg.q_elements(), c)
        soft = (0, (me, nrow0 + 64 * c, nkv, lq), ntiles[0])
        acc, pa, nm2, nlsum, _alpha = overlapped_step(
            cfg,
            bars,
            smem,
            pipe,
            nqs,
            (to_index(first, "ring iteration"), last),
            o,
            pa,
            fresh_stats(cfg),
            scale2,
            soft,
        )
        _finish(cfg, i, item, (acc, m2, lsum), smem, qpipe, outs, c, me, lq)
        o = zeros(o_atom.c)
        m2, lsum = nm2, nlsum
    i = to_index(sched[2] - 1, "the last item")
    item, _, last, (o, pa, m2, lsum) = _item_tiles(
        cfg, i, first, (o, pa, m2, lsum), smem, pipe, qpipe, loads, (c, bars, me), scale2
    )
    o = pv_alone(cfg, smem, pipe, pa, o, last)
    _finish(cfg, i, item, (o, m2, lsum), smem, qpipe, outs, c, me, lq)


@tylo.inline
def _item_tiles(cfg, i, first, carry, smem, pipe, qpipe, loads, rows, scale2):
    """Item ``i``'s key tiles in the items-overlapped stream, from the ring's running count
    ``first`` and ``carry = (o, pa, m2, lsum)`` (its first ``S`` already issued):
    :func:`~tylo.ops.attention.hopper_kernel.overlapped_tiles` on the item's Q. Returns
    ``((row0, head, batch), tiles, the ring iteration of its last tile, carry)``; its last
    ``P V`` is still to issue."""
    sched, table, kv_lens, lq, lk = loads
    c, bars, me = rows
    row0, bh, bb, kv, tiles = _item(cfg, i, sched, table, kv_lens, lq, lk)
    at = to_index(first, "ring iteration")
    qi = consumer_q(cfg, smem, qpipe.stage(i) * cfg.q_elements(), c)
    carry = overlapped_tiles(cfg, bars, smem, pipe, qi, tiles, carry, scale2,
                             (me, row0 + 64 * c, kv, lq), at)  # fmt: skip
    return (row0, bh, bb), tiles, at + to_index(tiles[1] - 1, "the last key tile"), carry


# --8<-- [end:consumer]


# --8<-- [start:kernel]
@tylo.kernel
def hopper_attention_persistent_kernel(
    o: tylo.Ptr(strided=True),
    lse: tylo.Ptr(strided=True),
    tq,
    tk,
    tv,
    to,
    kv_lens,
    table,
    lq: Dim,
    lk: Dim,
    heads: Dim,
    osb: Dim,
    osh: Dim,
    osl: Dim,
    lsb: Dim,
    lsh: Dim,
    scale2: float,
    cfg: tylo.Static,
):
    """``cfg.persistent``: a 1-D grid of at most ``ceil(Lq / bm) * heads * batch`` CTAs
    (one per SM), each walking its work items (module docstring); ``cfg.threads`` threads,
    ``cfg.shared_bytes()`` dynamic shared bytes. Arguments as the non-persistent kernel's,
    plus the host's schedule ``table`` (u32,
    :func:`tylo.ops.attention.hopper_schedule.schedule_table`) and the number of heads."""
    if not cfg.persistent:
        raise PlanError(
            "hopper_attention_persistent_kernel: takes a config with persistent=True, got "
            f"{cfg}; use hopper_kernel.hopper_attention_kernel"
        )
    check_o_map(cfg, to, "hopper_attention_persistent_kernel")
    kv_elems = cfg.kv_elements()
    smem = tylo.dynamic_shared(cfg.dtype, cfg.ring_offset() + 2 * cfg.stages * kv_elems, align=1024)
    pipe = Pipeline(ring_plan(cfg, 128 * cfg.consumers))  # split_kv/split_release: K's and V's
    qpipe = Pipeline(PipelinePlan(stages=2, consumers=128 * cfg.consumers), name="qbuf")
    tid = tylo.thread_idx.x
    if tid == 0:
        pipe.init()
        qpipe.init()
    tylo.sync_threads()
    sched = _schedule(cfg, lq, heads, table)
    wg = tid // 128
    if wg == 0:
        set_max_registers(cfg.producer_registers, increase=False)
        if tid == 0:
            _produce(cfg, smem, pipe, qpipe, (tq, tk, tv), sched, table, kv_lens, lq, lk)
    else:
        set_max_registers(cfg.consumer_registers, increase=True)
        outs = (o, lse, osb, osh, osl, lsb, lsh, to)
        wgv = tylo.value(wg, tylo.i32)
        consume = _consume_items_overlapped if cfg.item_overlap else _consume
        consume(cfg, wgv, smem, pipe, qpipe, sched, table, kv_lens, lq, lk, outs, scale2, tid)
        if cfg.o_buffer and tid % 128 == 0:  # the last stores read the O buffer before exit
            tma.wait_stores(0, read=True)


# --8<-- [end:kernel]
