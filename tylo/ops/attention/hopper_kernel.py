"""The Hopper (sm_90a) streaming attention forward, ``O = softmax(Q Kᵀ · scale) V``, with TMA,
an mbarrier pipeline and wgmma in the FlashAttention-3 style (walk-through:
docs/attention_hopper.md). One CTA takes ``bm = 64 * consumers`` query rows of one
(batch, head), with ``1 + consumers`` warpgroups (``cfg.consumers``: 2 by default, or 3;
:mod:`tylo.ops.attention.hopper_roles`):

- warpgroup 0, the *producer* (``setmaxnreg.dec``): one thread loads Q once by TMA, then
  streams K and V tiles of ``bn`` keys into a :class:`~tylo.nvgpu.mbarrier.Pipeline` ring;
- warpgroups ``1 .. consumers``, the *consumers* (``setmaxnreg.inc``), one traced body (which
  consumer is a runtime value); consumer ``c`` owns query rows ``64c ..``. Per key tile:
  ``S = Q Kᵀ`` by wgmma from shared memory (K-major, 128-byte swizzled, descriptors derived
  from the layouts); the online softmax on the S fragment (row max and sum by the reductions its
  ownership derives: in-thread folds and two shuffles); ``P`` converted to wgmma's *register
  A* with no shared memory (:func:`accumulator_as_register_a`, proved by
  :func:`prove_register_a`); ``O += P V`` by wgmma with V read MN-major; the stage released;
- options (FlashAttention-3's schedules): ``pingpong``, the consumers take turns at the tensor
  cores in a rotation (a named barrier each); ``overlap``, ``S`` of tile ``j`` and ``P V`` of
  tile ``j - 1`` in flight together, the softmax of ``j`` while ``P V`` runs; ``split_kv``: K
  and V land on barriers of their own, S waits for K only, ``P V`` for V; ``split_release``: K
  and V are released on their own too, K once S completed
  (:mod:`tylo.ops.attention.hopper_ring`);
- the epilogue stores O / rowsum and the row log-sum-exp by ownership, bounded at Lq; with
  ``tma_store`` O goes through the consumer's rows of the Q buffer (``stmatrix``) and leaves
  by TMA stores (:mod:`tylo.ops.attention.hopper_epilogue`).

Q, K and V are read through 4-D tensor maps (modes L, H, B, D), so a box past the sequence's
end is zero-filled, never the next head's rows. Keys past the batch entry's length or the
causal diagonal (bottom-right) are masked to ``-inf`` in the tiles that need it; a row with
no visible key gives ``o = 0`` and ``lse = -inf``. At D = 128 each tile is two
128-byte-swizzled column blocks of 64: two TMA boxes, two K-major operands of ``S = Q Kᵀ``
and the two 64-column atoms of V's MN-major descriptor (its LBO).
"""

from __future__ import annotations

from typing import Any

import tylo
from tylo.kernel.values import to_index
from tylo.layouts import Layout
from tylo.nvgpu import tma
from tylo.nvgpu.errors import PlanError
from tylo.nvgpu.mbarrier import Barriers, Pipeline
from tylo.nvgpu.warpgroup.chain import (
    RegisterAProof,
    accumulator_as_register_a,
    prove_register_a,
)
from tylo.nvgpu.warpgroup.mma import (
    WarpgroupMMAAtom,
    commit_group,
    fence,
    mma_async,
    wait_group,
)
from tylo.nvgpu.warpgroup.roles import set_max_registers
from tylo.ops.attention.hopper_config import (  # noqa: F401 - re-exported
    BLOCK,
    CONSUMER_REGISTERS,
    CONSUMERS,
    HEADROOM,
    LOG2E,
    NEG_INF,
    OWN_TILES,
    PRODUCER_REGISTERS,
    SHARED_LIMIT,
    THREADS,
    Dim,
    HopperAttentionConfig,
    block_layout,
    box_layout,
    own_tiles,
    swizzle,
    v_operand_layout,
)
from tylo.ops.attention.hopper_epilogue import check_o_map, normalize, tma_epilogue
from tylo.ops.attention.hopper_ring import (
    load_kv_tile,
    release_k,
    release_v,
    ring_plan,
    wait_k,
    wait_v,
)
from tylo.ops.attention.hopper_roles import (
    consumer_rows,
    turn_barrier,
)
from tylo.ops.attention.mask import score_mask
from tylo.tile.access import store
from tylo.tile.fragment import full, zeros
from tylo.tile.views import GlobalTile, SharedTile

__all__ = [
    "CONSUMERS",
    "OWN_TILES",
    "THREADS",
    "HopperAttentionConfig",
    "RegisterAProof",
    "accumulator_as_register_a",
    "hopper_attention_kernel",
    "key_tiles",
    "prove_register_a",
]


# --8<-- [start:bounds]
def key_tiles(
    cfg: HopperAttentionConfig,
    row0: Any,
    kv: Any,
    lq: Any,
    lo: Any = min,
    hi: Any = max,
    rows: int | None = None,
) -> tuple[Any, Any]:
    """``(n_full, n_tiles)`` for the CTA whose first query row is ``row0``, with ``kv`` keys
    (already clamped to [0, Lk]) and ``lq`` queries: key tiles ``[0, n_tiles)`` hold every
    key a row of the CTA sees (causal: up to the bottom-right diagonal of its last row), and
    the first ``n_full`` of them are seen whole by every row (no mask). With ``overlap`` a
    CTA that sees nothing still runs one (masked) tile. ``lo``/``hi`` are min/max: Python's
    on the host, ``tylo.minimum``/``tylo.maximum`` in the kernel. ``rows``: the query rows
    from ``row0`` (None: the CTA's ``bm``; 64: one consumer's, :func:`key_loop`), of which
    only those below ``lq`` count (a consumer's rows may all lie past ``lq``: it sees
    nothing).

    Defining property (checked against the reference's mask by brute force): no row of
    the CTA (or of the consumer) sees a key at or past ``n_tiles * bn``, and every row sees
    every key below ``n_full * bn``."""
    end, full_end = kv, kv
    last = cfg.bm if rows is None else rows
    if cfg.causal:  # the last row sees keys up to row0 + bm - 1 + kv - lq, the first row0 + ..
        end = lo(kv, kv + (row0 + last - lq))
        full_end = lo(kv, kv + (row0 + 1 - lq))
    if rows is not None:  # a consumer whose rows all lie at or past lq sees no key
        end = lo(end, kv * lo(hi(lq - row0, 0), 1))
    n_tiles = (hi(end, 0) + cfg.bn - 1) // cfg.bn
    if cfg.overlap:  # the overlapped loop has a prologue
        n_tiles = hi(n_tiles, 1)
    return lo(hi(full_end, 0) // cfg.bn, n_tiles), n_tiles


# --8<-- [end:bounds]


def _issue_s(cfg, smem, qs, base):
    """Issue ``S = Q Kᵀ`` for the K tile at element ``base`` (``d / 16`` wgmma, both operands
    in shared memory, K-major); returns the pending accumulator."""
    s_atom = WarpgroupMMAAtom((64, cfg.bn, 16), cfg.dtype)
    s = zeros(s_atom.c)
    for kk in range(cfg.d // 16):
        j, k16 = divmod(kk, BLOCK // 16)
        ks = SharedTile(smem, block_layout(cfg.bn, cfg.dtype), base=base + j * cfg.bn * BLOCK)
        s = mma_async(s_atom, qs[j], ks, s, k_offset=16 * k16, accumulate=kk > 0)
    return s


def _issue_pv(cfg, smem, pa, base, o):
    """Issue ``O += P V`` for the V tile of the stage at element ``base`` (``bn / 16``
    register-A wgmma, V read MN-major); returns the pending accumulator."""
    o_atom = WarpgroupMMAAtom((64, cfg.d, 16), cfg.dtype, a="registers")
    vs = SharedTile(smem, v_operand_layout(cfg), base=base + cfg.kv_elements())
    for ks in range(cfg.bn // 16):
        o = mma_async(o_atom, pa[ks], vs, o, k_offset=16 * ks)
    return o


# --8<-- [start:softmax]
def _online_softmax(cfg, s, m2, lsum, it, mask, scale2):
    """The online softmax of one S tile of raw scores; ``scale2 = scale · log2 e > 0`` and
    the running maximum ``m2`` is kept in those units, so ``p = exp2(s · scale2 - m2)`` is one
    FFMA and one ``MUFU.EX2`` per score. ``mask`` = (thread, first row, kv, lq) where keys
    must be masked, None where the tile is fully visible. Returns ``(p, m2, lsum, alpha)``:
    P, the new running maximum and sum, and the factor the old O must be rescaled by."""
    s_atom = WarpgroupMMAAtom((64, cfg.bn, 16), cfg.dtype)
    if mask is not None:  # keys past kv_len, or past the causal diagonal: -inf
        me, r0, kv, lq = mask
        keep = score_mask(s_atom.c, me, (r0, it * cfg.bn), kv, lq, cfg.causal, cfg.bn)
        s = tylo.where(keep, s, NEG_INF)
    m2_new = tylo.maximum(m2, s.max(axis=1) * scale2)  # scale2 > 0: the max commutes
    sub = tylo.where(m2_new == NEG_INF, 0.0, m2_new)  # nothing visible yet: subtract 0
    p = tylo.exp2(tylo.fma(s, scale2, -sub))
    alpha = tylo.exp2(m2 - sub)
    return p, m2_new, lsum * alpha + p.sum(axis=1), alpha


# --8<-- [end:softmax]


# --8<-- [start:tile]
def s_alone(cfg, bars, smem, pipe, qs, ring):
    """``S = Q Kᵀ`` for the K tile of ring iteration ``ring``, with no other wgmma in flight:
    wait for K, take the tensor cores in turn with the other consumers (ping-pong: ``bars``,
    this consumer's scheduling barrier and the next one's), issue, give the turn on, wait
    for S and release K (``split_release``). Returns S."""
    wait_k(cfg, pipe, ring)
    base = cfg.ring_offset() + pipe.stage(ring) * 2 * cfg.kv_elements()
    if cfg.pingpong:  # take the tensor cores in turn with the other consumers
        turn_barrier("sync", bars[0])
    fence()
    s = _issue_s(cfg, smem, qs, base)
    commit_group()
    if cfg.pingpong:
        turn_barrier("arrive", bars[1])
    s = wait_group(0, s)
    release_k(cfg, pipe, ring)  # split_release: S has read K
    return s


def pv_alone(cfg, smem, pipe, pa, o, ring):
    """``O += P V`` for the V tile of ring iteration ``ring`` (``pa``: P as the register A),
    with no other wgmma in flight: wait for V (``split_kv``), issue, wait for O and release
    the stage (``split_release``: its V). Returns O."""
    wait_v(cfg, pipe, ring)  # split_kv: V, only now
    fence()  # O and P were written by the threads: order them before the wgmma reads
    base = cfg.ring_offset() + pipe.stage(ring) * 2 * cfg.kv_elements()
    o = _issue_pv(cfg, smem, pa, base, o)
    commit_group()
    o = wait_group(0, o)
    release_v(cfg, pipe, ring)  # the stage (split_release: its V)
    return o


def _key_tile(cfg, bars, smem, pipe, qs, it, o, m2, lsum, scale2, mask, first=0):
    """Key tile ``it``, ring iteration ``first + it``: ``S = Q Kᵀ``, the online softmax,
    ``O = O · alpha + P V``, each wgmma group waited for before the next step. Returns
    ``(o, m2, lsum)``."""
    o_atom = WarpgroupMMAAtom((64, cfg.d, 16), cfg.dtype, a="registers")
    s = s_alone(cfg, bars, smem, pipe, qs, first + it)
    p, m2, lsum, alpha = _online_softmax(cfg, s, m2, lsum, it, mask, scale2)
    o = o * alpha
    pa = accumulator_as_register_a(p, o_atom)
    return pv_alone(cfg, smem, pipe, pa, o, first + it), m2, lsum


# --8<-- [end:tile]


# --8<-- [start:overlap]
@tylo.inline
def overlapped_step(cfg, bars, smem, pipe, qs, rings, o, pa, stats, scale2, soft):
    """Issue ``S = Q Kᵀ`` for the K tile of ring iteration ``rings[0]`` (``qs``: this
    consumer's Q blocks) and then ``O += P V`` for the V tile of ``rings[1]`` (``pa``: that
    tile's P, in registers), wait for S only, run the online softmax on it from ``stats =
    (m2, lsum)`` while P V runs (``soft = (it, mask, n_full)``: the tile's index in its item, the
    mask, and the item's count of tiles that need none, or None to take ``mask`` as it
    is), then wait for O, release V's stage and pack the new P. Returns ``(o, pa, m2,
    lsum, alpha)``: O *not* rescaled by ``alpha``. With ``split_kv`` both waits come before
    both issues: V of ``rings[1]`` (loaded before the K of a later iteration) and K of
    ``rings[0]``; a wait between the two issues makes ptxas put a warpgroup arrive in a
    divergent path and serialize every wgmma of the persistent kernel (info C7519)."""
    o_atom = WarpgroupMMAAtom((64, cfg.d, 16), cfg.dtype, a="registers")
    ring, pv_ring = rings
    wait_v(cfg, pipe, pv_ring)  # split_kv: V of the P V tile (its stage is still held)
    wait_k(cfg, pipe, ring)  # K of the S tile
    stage_elems = 2 * cfg.kv_elements()
    base = cfg.ring_offset() + pipe.stage(ring) * stage_elems
    prev = cfg.ring_offset() + pipe.stage(pv_ring) * stage_elems
    if cfg.pingpong:
        turn_barrier("sync", bars[0])
    fence()
    s = _issue_s(cfg, smem, qs, base)
    commit_group()
    o = _issue_pv(cfg, smem, pa, prev, o)
    commit_group()
    if cfg.pingpong:
        turn_barrier("arrive", bars[1])
    s = wait_group(1, s)  # S is complete; P V may still run
    release_k(cfg, pipe, ring)  # split_release: K of the S tile, free for a later tile
    p, m2, lsum, alpha = tile_softmax(cfg, s, stats, scale2, soft)
    o = wait_group(0, o)
    release_v(cfg, pipe, pv_ring)  # the P V tile's stage (split_release: its V)
    # packed only now: the previous P's registers are wgmma inputs until the wait, and
    # writing the new P into them earlier would make ptxas serialize every wgmma (C7513)
    pa = accumulator_as_register_a(p, o_atom)
    return o, pa, m2, lsum, alpha


def _overlapped_tile(cfg, bars, smem, pipe, qs, it, o, pa, m2, lsum, scale2, mask, first=0):
    """Key tile ``it >= 1`` (ring iteration ``first + it``) with the softmax overlapping the
    tensor cores (:func:`overlapped_step`): ``S = Q K_itᵀ`` and ``O += P_(it-1) V_(it-1)``
    (the previous tile's P, in registers) in flight together, the softmax of tile ``it``
    while P V runs, then O rescaled. Returns ``(o, pa, m2, lsum)`` with ``pa`` tile ``it``'s
    P."""
    ring = first + it
    o, pa, m2, lsum, alpha = overlapped_step(
        cfg, bars, smem, pipe, qs, (ring, ring - 1), o, pa, (m2, lsum), scale2, (it, mask, None)
    )
    return o * alpha, pa, m2, lsum


@tylo.inline
def tile_softmax(cfg, s, stats, scale2, soft):
    """:func:`_online_softmax` of the S tile ``s`` from ``stats = (m2, lsum)``, ``soft = (it,
    mask, n_full)``: tile ``it`` of its item, masked by ``mask`` unless ``it < n_full`` (a
    runtime count of the item's tiles every row sees whole); ``n_full`` None takes ``mask``
    as given (None: no mask)."""
    it, mask, n_full = soft
    m2, lsum = stats
    if n_full is None:
        p, m2, lsum, alpha = _online_softmax(cfg, s, m2, lsum, it, mask, scale2)
    elif n_full > it:
        p, m2, lsum, alpha = _online_softmax(cfg, s, m2, lsum, it, None, scale2)
    else:
        p, m2, lsum, alpha = _online_softmax(cfg, s, m2, lsum, it, mask, scale2)
    return p, m2, lsum, alpha


# --8<-- [end:overlap]


@tylo.inline
def first_tile(cfg, bars, smem, pipe, qs, stats, scale2, soft, first):
    """The overlap schedule's first key tile (ring iteration ``first``): ``S = Q Kᵀ`` alone
    (:func:`s_alone`) and the online softmax from ``stats = (m2, lsum)`` (``soft`` as
    :func:`tile_softmax`'s). Returns ``(pa, m2, lsum)``: its P as the register A of the P V
    that the next step issues."""
    o_atom = WarpgroupMMAAtom((64, cfg.d, 16), cfg.dtype, a="registers")
    s = s_alone(cfg, bars, smem, pipe, qs, first)
    p, m2, lsum, _ = tile_softmax(cfg, s, stats, scale2, soft)
    return accumulator_as_register_a(p, o_atom), m2, lsum


@tylo.inline
def overlapped_tiles(cfg, bars, smem, pipe, qs, tiles, state, scale2, mask, first):
    """The overlap schedule's key tiles ``1 .. n_tiles - 1`` (``tiles = (n_full, n_tiles)``:
    those below ``max(n_full, 1)`` without the mask, the rest with it) from ``state = (o, pa,
    m2, lsum)``, tile 0's P in ``pa``. Returns the state with the last tile's P in ``pa``,
    its P V not yet issued."""
    n_full, n_tiles = tiles
    o, pa, m2, lsum = state
    n1 = tylo.maximum(n_full, 1)
    for it in tylo.range(1, n1):
        o, pa, m2, lsum = _overlapped_tile(
            cfg, bars, smem, pipe, qs, it, o, pa, m2, lsum, scale2, None, first
        )
    for it in tylo.range(n1, n_tiles):
        o, pa, m2, lsum = _overlapped_tile(
            cfg, bars, smem, pipe, qs, it, o, pa, m2, lsum, scale2, mask, first
        )
    return o, pa, m2, lsum


def _skipped_tile(cfg, bars, pipe, it, first=0):
    """Key tile ``it`` (ring iteration ``first + it``) of the CTA that this consumer's rows do
    not see (:data:`OWN_TILES`): no wgmma, only its part of the protocol, as
    :func:`_key_tile` makes it: wait for the tile, take and give the turn (ping-pong keeps
    rotating), release it. The waits are needed: a release made before the tile landed
    could count towards the phase of an earlier use of the stage, which other consumers
    may still be reading."""
    wait_k(cfg, pipe, first + it)
    if cfg.pingpong:
        turn_barrier("sync", bars[0])
        turn_barrier("arrive", bars[1])
    release_k(cfg, pipe, first + it)
    wait_v(cfg, pipe, first + it)
    release_v(cfg, pipe, first + it)


def fresh_stats(cfg: Any) -> tuple[Any, Any]:
    """A consumer's row statistics before its first key tile: the running maximum of the
    scores times log2(e), ``-inf``, and the running sum of ``exp2(s2 - m2)``, 0."""
    rows = WarpgroupMMAAtom((64, cfg.bn, 16), cfg.dtype).c.reduced(1)
    return full(rows, NEG_INF, tylo.f32), full(rows, 0.0, tylo.f32)


def consumer_q(cfg: Any, smem: Any, qbase: Any, c: Any) -> list[Any]:
    """Consumer ``c``'s rows of the Q buffer at element ``qbase``: rows ``64c ..`` of each
    64-column block ``j``, the same swizzled block 64 rows (8 swizzle periods) on: the A
    operands of ``S = Q Kᵀ``."""
    return [
        SharedTile(
            smem, block_layout(64, cfg.dtype), base=qbase + j * cfg.bm * BLOCK + 64 * BLOCK * c
        )
        for j in range(cfg.blocks)
    ]


# --8<-- [start:consumer]
@tylo.inline
def key_loop(cfg, c, bars, smem, pipe, qbase, tiles, mask, scale2, first=0):
    """Consumer ``c``'s 64 query rows (of the Q tile at element ``qbase``) against the key
    tiles ``[0, n_tiles)`` (``tiles = (n_full, n_tiles)``: the first ``n_full`` need no
    mask), read from ring iterations ``first ..``; every wgmma is complete on return.
    Returns ``(o, m2, lsum)``: the unnormalized O, the row maximum (log2 units) and sum.
    Where :func:`own_tiles` the consumer computes only the tiles its own 64 rows see
    (:func:`key_tiles` with ``rows=64``) and steps through the rest with
    :func:`_skipped_tile`."""
    n_full, n_tiles = tiles
    all_tiles = n_tiles
    if own_tiles(cfg):
        _, r0, kv, lq = mask
        n_full, n_tiles = key_tiles(cfg, r0, kv, lq, tylo.minimum, tylo.maximum, rows=64)
        n_tiles = tylo.minimum(n_tiles, all_tiles)  # never more: its rows are the CTA's
    o_atom = WarpgroupMMAAtom((64, cfg.d, 16), cfg.dtype, a="registers")
    qs = consumer_q(cfg, smem, qbase, c)
    o = zeros(o_atom.c)
    m2, lsum = fresh_stats(cfg)
    if not cfg.overlap:
        for it in tylo.range(n_full):
            o, m2, lsum = _key_tile(cfg, bars, smem, pipe, qs, it, o, m2, lsum, scale2, None, first)
        for it in tylo.range(n_full, n_tiles):
            o, m2, lsum = _key_tile(cfg, bars, smem, pipe, qs, it, o, m2, lsum, scale2, mask, first)
    else:  # n_tiles >= 1 here (key_tiles gives an empty item one fully masked tile)
        pa, m2, lsum = first_tile(cfg, bars, smem, pipe, qs, (m2, lsum), scale2,
                                  (0, mask, n_full), first)  # fmt: skip
        o, pa, m2, lsum = overlapped_tiles(cfg, bars, smem, pipe, qs, (n_full, n_tiles),
                                           (o, pa, m2, lsum), scale2, mask, first)  # fmt: skip
        # an index expression: layouts and the descriptor's alignment proof reason about it
        last = first + to_index(n_tiles - 1, "the last key tile")
        o = pv_alone(cfg, smem, pipe, pa, o, last)  # the last tile's P V
    if own_tiles(cfg):
        for it in tylo.range(n_tiles, all_tiles):
            _skipped_tile(cfg, bars, pipe, it, first)
    return o, m2, lsum


def epilogue(o, m2, lsum, outs, me, r0) -> None:
    """Normalize and store consumer rows ``r0 ..`` of O and the row log-sum-exp into
    ``outs = (o_tile, l_tile)`` by ownership, bounded at Lq (``me``: the thread's index in
    its warpgroup); a row that saw no key gets ``o = 0`` and ``lse = -inf``."""
    o_tile, l_tile = outs
    out, lse = normalize(o, m2, lsum)
    store(None, o_tile, out, me, origin=(r0, 0))
    store(None, l_tile, lse, me, origin=(r0, 0))


@tylo.inline
def _consume(cfg, wg, smem, pipe, qbar, tiles, kv, lq, row0, outs, scale2, tid):
    """Consumer warpgroup ``wg`` (``1 .. cfg.consumers``, known at run time: every consumer
    runs this one traced body): its 64 query rows against every key tile, then the epilogue into
    ``outs = (o_tile, l_tile, to, bh, bb)`` (``to``: the O tensor map with ``tma_store``,
    else None)."""
    c, bars, me = consumer_rows(cfg, wg, tid)
    r0 = row0 + 64 * c
    if cfg.pingpong:  # noqa: SIM102 - a static choice around a runtime test
        if wg == cfg.consumers:
            turn_barrier("arrive", 1)  # the last gives consumer 0 the first turn
    n_tiles = tiles[1]
    if n_tiles > 0:  # the producer loads Q only for a CTA with keys to see
        qbar.wait(0, 0)
    o, m2, lsum = key_loop(cfg, c, bars, smem, pipe, 0, tiles, (me, r0, kv, lq), scale2)
    if cfg.tma_store:  # every wgmma is complete: the Q rows are free (hopper_epilogue)
        dst = (outs[2], outs[1], r0, outs[3], outs[4], lq)
        tma_epilogue(cfg, o, m2, lsum, dst, smem, 0, c, me, "written")
    else:
        epilogue(o, m2, lsum, outs[:2], me, r0)


# --8<-- [end:consumer]


# --8<-- [start:kernel]
@tylo.kernel
def hopper_attention_kernel(
    o: tylo.Ptr(strided=True),  # the kernel takes o's and lse's strides as arguments
    lse: tylo.Ptr(strided=True),
    tq,
    tk,
    tv,
    to,
    kv_lens,
    lq: Dim,
    lk: Dim,
    osb: Dim,
    osh: Dim,
    osl: Dim,
    lsb: Dim,
    lsh: Dim,
    scale2: float,
    cfg: tylo.Static,
):
    """One CTA per (``bm`` query rows, head, batch entry): grid ``(ceil(Lq / bm), H, B)``
    (causal: row blocks from the last), ``cfg.threads`` threads, ``cfg.shared_bytes()`` dynamic
    shared bytes. ``scale2`` is ``scale * log2(e)`` (positive); ``kv_lens`` holds B int32 key
    lengths; ``to`` is O's tensor map with ``cfg.tma_store`` (``hopper_host.o_plan``), else
    None."""
    q_elems, kv_elems = cfg.q_elements(), cfg.kv_elements()
    if cfg.persistent:
        raise PlanError(
            "hopper_attention_kernel: cfg.persistent is the persistent kernel's "
            "(tylo.ops.attention.hopper_persistent.hopper_attention_persistent_kernel)"
        )
    check_o_map(cfg, to, "hopper_attention_kernel")
    smem = tylo.dynamic_shared(cfg.dtype, cfg.ring_offset() + 2 * cfg.stages * kv_elems, align=1024)
    pipe = Pipeline(ring_plan(cfg, 128 * cfg.consumers))  # split_kv/split_release: K's and V's
    qbar = Barriers(1, name="qbar")
    tid = tylo.thread_idx.x
    if tid == 0:
        pipe.init()
        qbar.init(0, 1)
    tylo.sync_threads()
    bh, bb = tylo.block_idx.y, tylo.block_idx.z
    row0 = tylo.block_idx.x * cfg.bm
    if cfg.causal:  # the last rows see the most keys: start them first, end on light CTAs
        row0 = (tylo.grid_dim.x - 1 - tylo.block_idx.x) * cfg.bm
    kv = tylo.minimum(tylo.maximum(kv_lens[bb], 0), lk)  # keys of this batch entry
    n_full, n_tiles = key_tiles(cfg, row0, kv, lq, tylo.minimum, tylo.maximum)
    wg = tid // 128
    if wg == 0:
        set_max_registers(cfg.producer_registers, increase=False)
        if tid == 0:
            if n_tiles > 0:
                qbar.arrive_expect_tx(0, q_elems * cfg.dtype.nbytes)
                for j in range(cfg.blocks):
                    qt = SharedTile(smem, tq.plan.smem_layout, base=j * cfg.bm * BLOCK)
                    tma.load(tq, qt, (row0, bh, bb, BLOCK * j), qbar, 0)
            for it in tylo.range(n_tiles):
                load_kv_tile(cfg, smem, pipe, (tk, tv), it, it, bh, bb)
    else:
        d = cfg.d
        o_tile = GlobalTile(o, Layout((lq, d), (osl, 1)), base=bb * osb + bh * osh)
        l_tile = GlobalTile(lse, Layout((lq, 1), (1, 0)), base=bb * lsb + bh * lsh)
        set_max_registers(cfg.consumer_registers, increase=True)
        tiles, outs = (n_full, n_tiles), (o_tile, l_tile, to, bh, bb)
        wgv = tylo.value(wg, tylo.i32)
        _consume(cfg, wgv, smem, pipe, qbar, tiles, kv, lq, row0, outs, scale2, tid)


# --8<-- [end:kernel]
