"""The warp-MMA streaming attention forward (FlashAttention-2 class), sm_80 and later.

``O = softmax(Q Kᵀ · scale) V`` for one (query block, head, batch) per CTA of ``cfg.warps``
warps (4 or 8, each owning ``cfg.rows_per_warp`` rows; with the causal mask, query blocks
run longest first within groups of (batch, head)s, :func:`longest_first`); the semantics
(masks, empty rows, lse) are :mod:`tylo.ops.attention.reference`'s. The static
configuration and its proofs are :mod:`tylo.ops.attention.config`. Nothing below counts
warps: every thread index goes through the plans' ownerships (built for
``warps = (cfg.warps, 1)``), every copy is shared by ``cfg.threads`` threads, and the
barriers are CTA-wide. Per CTA:

1. **Q once**: the (Br, D) tile is copied to shared memory with ``cp.async`` and loaded
   into registers with ``ldmatrix`` (the A operand of every k-step of ``S = Q Kᵀ``); it
   stays there for the whole key loop.
2. **The key loop**, one block of Bc keys per iteration, K and V double-buffered: the
   copies of block ``n + 1`` are issued at the top of iteration ``n`` and waited for at its
   end (one barrier per iteration, which also frees the stage iteration ``n + 1`` refills).
   Each iteration: ``S = Q Kᵀ`` (``mma.sync``, K through ``ldmatrix``); the running row
   maximum from tylo's row reduction of the S fragment (its ownership puts each row in the
   4 lanes of a quad: in-thread folds, then 2 butterfly shuffles); ``P = exp2(S · c -
   m · c)`` with ``c = scale · log2(e)`` folded into one FFMA per element before
   ``ex2.approx`` (MUFU.EX2); the rescale of O and of the running sum by ``exp2(m_old · c -
   m_new · c)``; P converted to packed bf16/f16 pairs *as* the A operand of ``O += P V``
   (:func:`~tylo.nvgpu.warp.chain.accumulator_as_a_operand`: proved, no shared memory) and
   V through ``ldmatrix.trans``. The running sum stays a per-thread partial (each thread's
   own columns, :func:`thread_partials`) until the end: one quad reduction after the loop
   instead of one per block. With ``cfg.sub_n`` the block is taken in softmax steps of
   ``sub_n`` keys (S, softmax and ``P V`` of each step in turn over the same stage: S of
   one step is what fits beside Q and O at 32 rows per warp and D = 128), and with
   ``cfg.lazy_rescale`` the rescale is :func:`lazy_block`'s: O is rescaled only when a
   score passes the row's reference maximum by more than ``2**LAZY_LIMIT``, which one
   warp vote decides.
3. **Masks** cost nothing where they cannot apply: the key blocks split into a prefix that
   every row of the CTA sees whole (no element test) and the rest (the causal diagonal
   and the last partial block), which a second loop masks element-wise to ``-inf``;
   causal blocks past the diagonal are never loaded. A row whose maximum is still ``-inf``
   subtracts 0 instead (``exp2(-inf) = 0``, never ``-inf - -inf``), so it ends with a zero
   sum, a zero output and ``lse = -inf``.
4. **Epilogue**: ``O / l`` in the input dtype (pairs of columns per store), and
   ``lse = (m · c + log2 l) · ln 2`` (f32), rows past Lq skipped.

Key rows past the sequence (or past the batch entry's key length) read that entry's last
valid row (``clamp_rows``: no predicate, and padding past a key length is never read), so
every shared element is finite and a masked P of 0 meets finite V. Query rows past Lq read
the last query row; their results are never stored.
"""

from __future__ import annotations

import tylo
from tylo.constants import LN2, LOG2E, NEG_INF
from tylo.kernel.values import to_index
from tylo.layouts import Layout
from tylo.nvgpu.cpasync import commit_copies, copy_async, wait_copies
from tylo.nvgpu.errors import PlanError
from tylo.nvgpu.warp.chain import accumulator_as_a_operand
from tylo.nvgpu.warp.ldmatrix import load_operand
from tylo.nvgpu.warp.mma import mma_atoms, zero_accumulator
from tylo.ops.attention.config import AttentionConfig, attention_config
from tylo.ops.attention.mask import score_mask
from tylo.tile.access import GlobalTile, SharedTile
from tylo.tile.fragment import Fragment, full
from tylo.tile.fragment_io import store_fragment
from tylo.tile.ownership import Ownership
from tylo.tile.reduce import fold_pairwise, reduction_plan

__all__ = [
    "LAZY_LIMIT",
    "LN2",
    "LOG2E",
    "AttentionConfig",
    "attention_config",
    "attention_kernel",
    "causal_order",
    "key_blocks",
    "lazy_block",
    "online_block",
    "partial_ownership",
    "passes",
    "thread_partials",
    "warp_any",
]

# sequence lengths: positive, below 2**31
Dim = tylo.Dim
# element strides of the batch, head and sequence modes (the last mode is contiguous)
Stride = tylo.Int(min=0, max=2**40)
Strided = tylo.Ptr(strided=True)


# --8<-- [start:partials]
def thread_partials(f: Fragment, axis: int = 1) -> Fragment:
    """Each thread's own partial reduction (sum) of ``f`` along ``axis``, before any lanes
    talk: the in-thread folds of :func:`tylo.tile.reduce.reduction_plan`, placed by an
    ownership that says so, over ``(M, T)`` where the ``T`` threads that share a row each
    hold their own column (thread ``t``'s digit along ``axis``). ``.sum(axis)`` of the
    result finishes the reduction with the lane shuffles the full reduction would have
    used; in between, partials rescale and accumulate in registers.

    Defining property: ``thread_partials(f).sum(1) == f.sum(1)`` (same ownership, same
    values up to the order of additions)."""
    own = f.ownership
    plan = reduction_plan(own, axis)
    vals = [fold_pairwise(lambda a, b: a + b, [f.values[i] for i in g]) for g in plan.groups]
    return Fragment(vals, partial_ownership(own, axis))


def partial_ownership(own: Ownership, axis: int) -> Ownership:
    """``own`` with its value modes along ``axis`` folded away and its thread modes along
    ``axis`` packed densely into a new extent (one column per thread of a row)."""
    th, va = [], []
    step = 1
    for m in own.thread_modes:
        if m.axis == axis:
            th.append((m.extent, axis, step))
            step *= m.extent
        else:
            th.append((m.extent, m.axis, m.step))
    va = [(m.extent, m.axis, m.step) for m in own.value_modes if m.axis != axis]
    shape = tuple(step if a == axis else s for a, s in enumerate(own.shape))
    return Ownership.from_modes(shape, th, va, f"{own.label} partials along {axis}")


# --8<-- [end:partials]


# --8<-- [start:online]
def online_block(cfg, s, m, l_part, o, c):
    """One key block of the online softmax on the S fragment ``s`` (raw scores, masked
    entries ``-inf``): ``m`` the running row maximum of raw scores, ``l_part`` the
    per-thread partial row sums, ``o`` the O accumulator, ``c = scale * log2(e)``.
    Returns ``(m, l_part, o, P as the A operands of P V)``."""
    m_new = tylo.maximum(m, s.max(axis=1))  # in-thread folds, then 2 shuffles per row
    base = tylo.where(m_new == NEG_INF, 0.0, m_new * c)  # nothing seen yet: subtract 0
    p = tylo.exp2(tylo.fma(s, c, -base))  # one FFMA + MUFU.EX2 per element
    alpha = tylo.exp2(tylo.fma(m, c, -base))  # exp2(-inf) = 0 on the first block
    l_part = l_part * alpha + thread_partials(p)
    o = o * alpha
    return m_new, l_part, o, accumulator_as_a_operand(p, cfg.pv_plan)


# --8<-- [end:online]


# --8<-- [start:lazy]
LAZY_LIMIT = 8.0  # P <= 2**8 between rescales (FlashAttention-4's threshold)


def warp_any(x):
    """Whether ``x`` (a bool Value) holds in any lane of the warp (``vote.sync.any``)."""
    u = tylo.where(x, tylo.value(1, tylo.u32), tylo.value(0, tylo.u32))
    r = tylo.ptx(
        "{ .reg .pred %p<2>; setp.ne.u32 %p0, $1, 0; vote.sync.any.pred %p1, %p0, -1; "
        "selp.u32 $0, 1, 0, %p1; }",
        u,
        out=tylo.u32,
    )
    return r != 0


def passes(s, limit):
    """Whether any score this thread holds exceeds its row's ``limit`` (one bool Value,
    no shuffles): each row's own scores folded to their maximum (a tree of ``max``), one
    compare per row, the rows' verdicts or-ed as a tree. ``limit``'s value slots are the
    rows of ``s``'s (:meth:`Ownership.reduced`), checked here."""
    own = s.ownership
    groups = reduction_plan(own, 1).groups
    if len(groups) != len(limit.values):
        raise PlanError(f"passes: {len(groups)} rows of scores, {len(limit.values)} limits")
    verdicts = []
    for k, g in enumerate(groups):
        if any(own.value_coord(i)[0] != limit.ownership.value_coord(k)[0] for i in g):
            raise PlanError(f"passes: row slot {k} of the limits is not the scores' row")
        top = fold_pairwise(tylo.maximum, [s.values[i] for i in g])
        verdicts.append(top > limit.values[k])
    return fold_pairwise(lambda a, b: a | b, verdicts)


@tylo.inline
def lazy_block(cfg, s, m, l_part, o, c):
    """:func:`online_block` with FlashAttention-4's lazy rescale: ``m`` is a reference
    maximum, raised (and O and the sums rescaled) only when a score of the block passes it
    by more than ``LAZY_LIMIT`` in the exponent, anywhere in the warp; otherwise P is taken
    against the old reference (``P <= 2**LAZY_LIMIT``). The test needs no shuffles: each
    thread compares its own scores, one vote decides for the warp. A row whose reference
    is still ``-inf`` passes with any finite score."""
    if warp_any(passes(s, m + LAZY_LIMIT / c)):
        m_new = tylo.maximum(m, s.max(axis=1))
        base = tylo.where(m_new == NEG_INF, 0.0, m_new * c)
        alpha = tylo.exp2(tylo.fma(m, c, -base))
        l_part = l_part * alpha
        o = o * alpha
        m = m_new
    base = tylo.where(m == NEG_INF, 0.0, m * c)
    p = tylo.exp2(tylo.fma(s, c, -base))
    l_part = l_part + thread_partials(p)
    return m, l_part, o, accumulator_as_a_operand(p, cfg.pv_plan)


# --8<-- [end:lazy]


def _index(x):
    """A clipped index (``Min``/``Max``) computed once into a fresh index symbol, so that
    the block arithmetic on it lowers to plain integer division."""
    if isinstance(x, int) or x.is_Symbol:
        return x
    return to_index(tylo.value(x))


def causal_order(lin, blocks, nbh, group, minimum=min):
    """``(xq, bh)`` of the CTA with linear index ``lin`` (``0 <= lin < blocks * nbh``):
    ``nbh`` (batch, head)s of ``blocks`` query blocks each, taken ``group`` (batch, head)s
    at a time (the last group may be smaller) and within a group query-block-slowest:
    ``xq`` counts from each (batch, head)'s longest block. Plain ints or kernel values
    (``minimum``: ``min`` or ``tylo.minimum``); a bijection onto
    ``range(blocks) x range(nbh)`` (tests/host/test_attention_warps_host.py)."""
    g = minimum(group, nbh)
    span = g * blocks  # the CTAs of one whole group
    grp = lin // span
    first = grp * g  # its first (batch, head)
    size = minimum(g, nbh - first)  # the last group may have fewer
    r = lin - grp * span
    xq = r // size  # how many of each (batch, head)'s blocks come before, in this group
    return xq, first + (r - xq * size)


def longest_first(br, group):
    """``(m0, h, b)`` of this CTA in a causal launch. CTAs are dispatched in the order of
    their linear index (x fastest), which is read here as groups of ``group`` (batch, head)s
    (the last group may be smaller), and within a group query blocks slowest: every
    (batch, head)'s last query block (the one that sees the most keys) runs first, then
    every second-to-last, and so on, so that a group ends with its lightest blocks. The
    grid is unchanged (query blocks, heads, batch) and the mapping is a bijection of it:
    ``group = 1`` is each (batch, head)'s blocks longest first, one (batch, head) after the
    other; ``group`` >= B * H orders the whole launch. Groups keep the K and V of the
    (batch, head)s in flight few enough to be read from L2 (host.CAUSAL_GROUPS). The
    arithmetic is u32: the host launches no causal grid of 2**31 CTAs or more."""
    u32 = tylo.u32
    grid, idx = tylo.grid_dim, tylo.block_idx
    gx, gy, gz = (tylo.value(g, u32) for g in (grid.x, grid.y, grid.z))
    x, y, z = (tylo.value(i, u32) for i in (idx.x, idx.y, idx.z))
    lin = x + gx * (y + gy * z)
    xq, bh = causal_order(lin, gx, gy * gz, tylo.value(group, u32), tylo.minimum)
    m0 = to_index(gx - 1 - xq, "query block") * br
    return m0, to_index(bh % gy, "head"), to_index(bh // gy, "batch entry")


# --8<-- [start:blocks]
def key_blocks(cfg, m0, lq, kv):
    """``(unmasked, total)`` key blocks of the CTA whose first query row is ``m0``:
    blocks ``0 .. unmasked - 1`` are visible whole to every row of the CTA; blocks
    ``unmasked .. total - 1`` need the element-wise mask; later ones are never visible."""
    bc = cfg.block_n
    if cfg.causal:
        off = kv - lq  # key j visible to row i when j <= i + off (bottom-right aligned)
        rows_end = tylo.minimum(m0 + cfg.block_m, lq)
        hi = tylo.maximum(tylo.minimum(kv, rows_end + off), 0)
        lo = tylo.maximum(tylo.minimum(kv, m0 + off + 1), 0)
    else:
        hi = kv
        lo = kv
    return _index(_index(lo) // bc), _index((_index(hi) + bc - 1) // bc)


# --8<-- [end:blocks]


# --8<-- [start:iteration]
@tylo.inline
def prefetch(cfg, K, V, sk, sv, tid, n, total):
    """Issue the copies of key block ``n`` into stage ``n % 2`` (if it exists) and commit
    them as one group (an empty group otherwise, so that the group count stays fixed)."""
    if n < total:
        st = n % 2
        at = (n * cfg.block_n, 0)
        if at[0] + cfg.block_n <= K.shape[0]:  # a whole block: no row is clamped
            shape = (cfg.block_n, cfg.d)
            copy_async(cfg.copy_kv, K.window(at, shape), sk.select(2, st), tid)
            copy_async(cfg.copy_kv, V.window(at, shape), sv.select(2, st), tid)
        else:
            copy_async(cfg.copy_kv, K, sk.select(2, st), tid, origin=at, clamp_rows=True)
            copy_async(cfg.copy_kv, V, sv.select(2, st), tid, origin=at, clamp_rows=True)
    commit_copies()


def scores(cfg, qf, kt, tid, j):
    """``S = Q Kᵀ`` of softmax step ``j`` of the key block in stage ``kt``."""
    s_plan, sb, sn = cfg.s_plan, cfg.shared_bases, cfg.step_n
    kj = kt.window((j * sn, 0), (sn, cfg.d)) if cfg.steps > 1 else kt
    s = zero_accumulator(s_plan)
    for ks in range(s_plan.k_steps):
        if cfg.q_in_registers:
            qa = qf[ks]
        else:
            qa = load_operand(s_plan, "a", qf, tid, ks, share_bases=sb)
        s = mma_atoms(s_plan, qa, load_operand(s_plan, "b", kj, tid, ks, share_bases=sb), s)
    return s


@tylo.inline
def key_block(cfg, qf, K, V, sk, sv, svt, tid, n, total, m, l_part, o, c, m0, lq, kv, masked):
    """Iteration ``n`` of the key loop (see the module docstring)."""
    s_plan, pv_plan = cfg.s_plan, cfg.pv_plan
    sb = cfg.shared_bases
    copies = cfg.causal or not masked  # without causality the masked block is the last one
    if copies and not cfg.late_copies:
        prefetch(cfg, K, V, sk, sv, tid, n + 1, total)
    st = n % 2
    kt = sk.select(2, st)
    vt = svt.select(2, st)
    sn = cfg.step_n
    for j in range(cfg.steps):  # softmax steps of sn keys through the block
        s = scores(cfg, qf, kt, tid, j)
        if masked:  # one i32 compare per score (tylo/ops/attention/mask.py)
            at = (m0, n * cfg.block_n + j * sn)
            keep = score_mask(s_plan.acc_ownership, tid, at, kv, lq, cfg.causal, sn, split=True)
            s = tylo.where(keep, s, NEG_INF)
        if cfg.lazy_rescale:
            m, l_part, o, p = lazy_block(cfg, s, m, l_part, o, c)
        else:
            m, l_part, o, p = online_block(cfg, s, m, l_part, o, c)
        if copies and cfg.late_copies and j == 0:  # after the softmax: fewer registers live
            prefetch(cfg, K, V, sk, sv, tid, n + 1, total)
        vj = vt.window((0, j * sn), (cfg.d, sn)) if cfg.steps > 1 else vt
        for ks in range(pv_plan.k_steps):
            v_op = load_operand(pv_plan, "b", vj, tid, ks, share_bases=sb)
            o = mma_atoms(pv_plan, p[ks], v_op, o)
    if copies:
        wait_copies(0)  # block n + 1 has landed (this thread's copies) ...
        tylo.sync_threads()  # ... and everyone's; everyone is done with stage n % 2
    return m, l_part, o


# --8<-- [end:iteration]


# --8<-- [start:kernel]
@tylo.kernel
def attention_kernel(
    cfg: tylo.Static,
    out: Strided,
    lse,
    q: Strided,
    k: Strided,
    v: Strided,
    kv_lens,
    lq: Dim,
    lk: Dim,
    heads: Dim,
    sqb: Stride, sqh: Stride, sql: Stride,
    skb: Stride, skh: Stride, skl: Stride,
    svb: Stride, svh: Stride, svl: Stride,
    sob: Stride, soh: Stride, sol: Stride,
    c: float,
    group: Dim,
):  # fmt: skip
    d, br = cfg.d, cfg.block_m
    if cfg.aligned:  # 16-byte rows: stated here, checked at every launch
        q, k, v, out = (tylo.assume_aligned(x, 16) for x in (q, k, v, out))
        tylo.assume(*(tylo.divisible(s, 8) for s in (sqb, sqh, sql, skb, skh, skl)))
        tylo.assume(*(tylo.divisible(s, 8) for s in (svb, svh, svl, sob, soh, sol)))
    tid = tylo.thread_idx.x
    m0 = tylo.block_idx.x * br
    h = tylo.block_idx.y
    b = tylo.block_idx.z
    if cfg.causal:  # the longest rows (the most key blocks) first: a shorter tail
        m0, h, b = longest_first(br, group)
    kv = lk
    if cfg.padding:
        # a data-dependent index, clipped to 0 .. Lk (the key rows that exist)
        kv = _index(tylo.minimum(tylo.maximum(to_index(kv_lens[b]), 0), lk))
    # this (batch, head)'s (L, D) matrices; K and V bounded by the keys that exist
    Q = GlobalTile(q, Layout((lq, d), (sql, 1)), base=b * sqb + h * sqh)
    K = GlobalTile(k, Layout((lk, d), (skl, 1)), base=b * skb + h * skh, shape=(kv, d))
    V = GlobalTile(v, Layout((lk, d), (svl, 1)), base=b * svb + h * svh, shape=(kv, d))
    O = GlobalTile(out, Layout((lq, d), (sol, 1)), base=b * sob + h * soh)
    sq = SharedTile(tylo.dynamic_shared(q.dtype, cfg.q_elements), cfg.q_smem)
    kv_base = cfg.q_elements * q.dtype.nbytes
    kv_bytes = cfg.kv_elements * q.dtype.nbytes
    k_mem = tylo.dynamic_shared(q.dtype, cfg.kv_elements, offset_bytes=kv_base)
    sk = SharedTile(k_mem, cfg.kv_smem)
    v_mem = tylo.dynamic_shared(q.dtype, cfg.kv_elements, offset_bytes=kv_base + kv_bytes)
    sv = SharedTile(v_mem, cfg.kv_smem)  # V as copied: (Bc, D)
    svt = SharedTile(v_mem, cfg.vt_smem)  # the same bytes as P V's B operand: (D, Bc)
    unmasked, total = key_blocks(cfg, m0, lq, kv)
    # Q and the first key block: one group, waited for before the loop
    copy_async(cfg.copy_q, Q, sq, tid, origin=(m0, 0), clamp_rows=True)
    prefetch(cfg, K, V, sk, sv, tid, 0, total)
    wait_copies(0)
    tylo.sync_threads()
    s_plan = cfg.s_plan
    qf = sq  # Q's A operands: reloaded from shared memory at every k-step, or ...
    if cfg.q_in_registers:  # ... loaded once and kept in registers
        qf = [load_operand(s_plan, "a", sq, tid, ks) for ks in range(s_plan.k_steps)]
    row = s_plan.acc_ownership.reduced(1)
    m = full(row, NEG_INF, tylo.f32)  # running maximum of the raw scores
    l_part = full(partial_ownership(s_plan.acc_ownership, 1), 0.0, tylo.f32)
    o = zero_accumulator(cfg.pv_plan)
    args = (K, V, sk, sv, svt, tid)
    for n in tylo.range(0, unmasked):  # whole blocks: no element test
        m, l_part, o = key_block(cfg, qf, *args, n, total, m, l_part, o, c, m0, lq, kv, False)
    for n in tylo.range(unmasked, total):  # the diagonal and the last, partial block
        m, l_part, o = key_block(cfg, qf, *args, n, total, m, l_part, o, c, m0, lq, kv, True)
    # --8<-- [start:epilogue]
    l_row = l_part.sum(axis=1)  # the quad's partials: 2 shuffles per row, once
    inv = tylo.where(l_row > 0.0, 1.0 / l_row, 0.0)  # nothing visible: a zero row
    vec = 2 if cfg.aligned else 1  # column pairs: one 4-byte store
    store_fragment(O, o * inv, tid, origin=(m0, 0), bounds=(lq, d), vector=vec)
    lse_row = tylo.where(l_row > 0.0, (tylo.fma(m, c, tylo.log2(l_row))) * LN2, NEG_INF)
    if tid % 4 == 0:  # the 4 lanes of a quad hold the same row statistics
        L = GlobalTile(lse, Layout((lq, 1), (1, 1)), base=(b * heads + h) * lq)
        store_fragment(L, lse_row, tid, origin=(m0, 0), bounds=(lq, 1))
    # --8<-- [end:epilogue]


# --8<-- [end:kernel]
