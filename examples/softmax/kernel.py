"""Row softmax over fragments: ``out[r, :] = softmax(x[r, :])`` with optional masking.

Every kernel here loads a register *fragment* of the input (values placed by an
:class:`~tylo.ownership.Ownership`), takes the row maximum and the row sum with the
fragment's layout-derived reductions (``f.max(axis=1)``, ``f.sum(axis=1)``), and stores the
normalized fragment by the same ownership. What differs between the styles is only the
ownership, and therefore the communication the reductions derive from it (see
``docs/softmax.md`` and :mod:`examples.softmax.plan`). When warps share a row, the step
between them is :class:`WarpExchange` (one shared slot per warp, then shuffles), built on
the same fragment reductions by re-viewing the ownership.

Kernels: :func:`row_softmax_kernel` (lane-local or warp-striped rows, one pass),
:func:`prefetch_softmax_kernel` (warp-striped, persistent, the next rows streamed into
shared memory with ``cp.async``), :func:`online_softmax_kernel` (rows longer than the
registers hold) and :func:`mma_softmax_kernel` (the ``mma.sync`` accumulator layout).

Numerics: f32 math for f32 and bf16 data; ``exp(x - m)`` is ``ex2.approx`` of
``x * log2(e) - m * log2(e)`` (one FFMA and one MUFU per element). Masked elements (a valid
length per row, or a boolean mask where True keeps) and ``-inf`` inputs enter as ``-inf``
and come out as 0. A row with nothing left (fully masked, or all ``-inf``) gives zeros,
never NaN: its maximum ``-inf`` is replaced by 0 before subtracting, its sum is 0, and
``1 / sum`` is replaced by 0.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import tylo
from tylo.copy import CopyPlan, commit_copies, copy_async, wait_copies
from tylo.fragment import Fragment, full
from tylo.layouts import Layout
from tylo.ownership import Ownership
from tylo.reduce import reduction_plan
from tylo.tiles import GlobalTile, SharedTile

__all__ = [
    "COMBINE",
    "LOG2E",
    "OPS",
    "WarpExchange",
    "fold_in_thread",
    "load_fragment",
    "mma_softmax_kernel",
    "normalize",
    "online_softmax_kernel",
    "online_update",
    "prefetch_softmax_kernel",
    "reduce_rows",
    "row_softmax_kernel",
    "store_fragment",
]

LOG2E = 1.4426950408889634  # exp(x) = 2 ** (x * log2(e))
NEG_INF = -math.inf
OPS = ("maximum", "add")  # the row reductions of a softmax
COMBINE = {"maximum": tylo.maximum, "add": operator.add}

# runtime extents and leading dimensions: positive, below 2**31
Dim = tylo.Int(min=1, max=2**31 - 1)


def _element(v: Any, ok: Any) -> Any:
    """One loaded element as f32, or -inf where ``ok`` (a bool Value, or True) fails."""
    f = v.to(tylo.f32)
    return f if ok is True else tylo.where(ok, f, NEG_INF)


# --8<-- [start:load]
def load_fragment(cfg, own, X, M, tid, row0, col0, rows, cols, lengths=None, staged=None):
    """The fragment of ``own`` at ``(row0, col0)`` of the view ``X``, as f32, with every
    masked or missing element ``-inf``. Loads are ``cfg.vec`` wide; a chunk past the row's
    end is read from the row's last chunk (always in bounds, so no branch) and replaced by
    ``-inf``; rows past the last are read from the last row (their stores are skipped).
    ``staged = (S, stage)`` reads the values from row ``stage`` of the shared view ``S``
    instead (a row copied there ahead of time; masks still come from global memory)."""
    tr, tc = own.thread_coord(tid)
    vec = cfg.vec
    values = []
    limit = {}  # valid length of each of the thread's rows
    for g in range(own.values // vec):
        dr, dc = own.value_coord(g * vec)
        row = tylo.minimum(row0 + tr + dr, rows - 1)
        col = col0 + tc + dc
        if cfg.full:
            ok = True
            at = col
        else:  # clamp to the last chunk (vec divides cols): an in-bounds address
            ok = col < cols
            at = vec * tylo.minimum(col // vec, cols // vec - 1)
        if cfg.mask == "length":
            if dr not in limit:
                limit[dr] = lengths[row]
            part = [tylo.all_of(ok, limit[dr] > col + j) for j in range(vec)]
        elif cfg.mask == "bool":
            if vec >= 4:  # one 4..8-byte load of the mask's bytes
                keep = M.load((row, at), vector=vec)
            else:
                keep = [M[row, at + j] for j in range(vec)]
            part = [tylo.all_of(ok, keep[j]) for j in range(vec)]
        else:
            part = [ok] * vec
        if staged is not None:
            S, stage = staged
            chunk = S.load((stage, col), vector=vec) if vec > 1 else (S[stage, col],)
        elif vec > 1:
            chunk = X.load((row, at), vector=vec, cache=cfg.load_cache)
        else:
            chunk = (X[row, at],)
        values += [_element(chunk[j], part[j]) for j in range(vec)]
    return Fragment(values, own)


# --8<-- [end:load]


@tylo.inline
def store_fragment(cfg, own, O, f, tid, row0, col0, rows, cols):
    """Store fragment ``f`` (f32) by its ownership at ``(row0, col0)`` of the view ``O``,
    converted to its dtype, ``cfg.vec`` elements at a time (in pieces of at most 16
    bytes); chunks past the row's end and rows past the last are skipped."""
    tr, tc = own.thread_coord(tid)
    vec = cfg.vec
    d = O.dtype
    piece = min(vec, 16 // d.nbytes)
    for g in range(own.values // vec):
        dr, dc = own.value_coord(g * vec)
        row = row0 + tr + dr
        col = col0 + tc + dc
        vals = [f.values[g * vec + j].to(d) for j in range(vec)]
        inside = row < rows if cfg.full else tylo.all_of(row < rows, col < cols)
        if inside:
            for p in range(0, vec, piece):
                part = vals[p : p + piece]
                O.store((row, col + p), part if piece > 1 else part[0], cache=cfg.store_cache)


# --8<-- [start:normalize]
def normalize(f, across=None):
    """softmax along axis 1 of the f32 fragment ``f`` (masked elements ``-inf``): the
    reductions' communication (in-thread folds, shuffles) follows from ``f``'s ownership;
    ``across`` (a :class:`WarpExchange`) adds the step between warps that share a row.
    Fully masked rows give zeros."""
    m = reduce_rows(f, "maximum", across)
    m2 = tylo.where(m == NEG_INF, 0.0, m) * LOG2E  # a fully masked row: subtract 0, not -inf
    e = tylo.exp2(tylo.fma(f, LOG2E, -m2))  # exp(f - m): one FFMA and one ex2.approx
    s = reduce_rows(e, "add", across)
    inv = tylo.where(s > 0.0, 1.0 / s, 0.0)  # a fully masked row sums to 0: zeros
    return e * inv


# --8<-- [end:normalize]


# --8<-- [start:across_warps]
class WarpExchange:
    """The step between warps that share a row, in two levels: each warp reduces its part
    of the row with shuffles (the fragment re-viewed by ``cfg.warp_view``: the warp index
    becomes a kept axis), writes one partial per warp to shared memory, and after one
    barrier every lane reads the partial of warp ``lane % warps`` (``cfg.exchange_ownership``)
    and reduces those with ``log2(warps)`` more shuffles. One shared slot per warp and
    reduction; the two scratch arrays (maximum, sum) alternate, so a barrier per
    reduction is enough even when a loop reuses them."""

    def __init__(self, cfg):
        self.cfg = cfg
        n = cfg.rows_per_block * cfg.row_warps
        self.scratch = {op: tylo.shared(tylo.f32, n, name=f"partials_{op}") for op in OPS}
        t = tylo.thread_idx.x
        w = cfg.row_warps
        self.slot = t // tylo.WARP_SIZE  # == row * warps + warp
        self.first = (t // (tylo.WARP_SIZE * w)) * w  # the row's first slot

    def reduce(self, f, op):
        cfg = self.cfg
        part = Fragment(f.values, cfg.warp_view(f.ownership)).reduce(op, axis=2)
        scratch = self.scratch[op]
        scratch[self.slot] = part.values[0]  # every lane stores the same value
        tylo.sync_threads()
        mine = scratch[self.first + tylo.lane_id() % cfg.row_warps]
        total = Fragment([mine], cfg.exchange_ownership).reduce(op, axis=1)
        return Fragment(total.values, f.ownership.reduced(1))


def fold_in_thread(f, op):
    """The thread's own values of each row folded pairwise (a dependency chain of
    ``log2(values)`` operations instead of ``values``), as a fragment that keeps the
    thread's place along axis 1: the ownership without its value modes along axis 1."""
    plan = reduction_plan(f.ownership, 1)
    if all(len(g) == 1 for g in plan.groups):
        return f
    folded = []
    for group in plan.groups:
        vals = [f.values[i] for i in group]
        while len(vals) > 1:
            pairs = [COMBINE[op](vals[k], vals[k + 1]) for k in range(0, len(vals) - 1, 2)]
            vals = pairs + vals[len(vals) - len(vals) % 2 :]
        folded.append(vals[0])
    own = f.ownership
    th = [(m.extent, m.axis, m.step) for m in own.thread_modes]
    va = [(m.extent, m.axis, m.step) for m in own.value_modes if m.axis != 1]
    return Fragment(folded, Ownership.from_modes(own.shape, th, va, name=own.name))


def reduce_rows(f, op, across=None):
    """``f`` reduced along axis 1 with ``op``: the thread's values folded pairwise, then
    the recipe derived from the ownership (shuffles), or, when warps share a row, the
    two-level :class:`WarpExchange`."""
    part = fold_in_thread(f, op)
    if across is None:
        total = part.reduce(op, axis=1)
    else:
        total = across.reduce(part, op)
    return Fragment(total.values, f.ownership.reduced(1))


# --8<-- [end:across_warps]


# --8<-- [start:online_update]
def online_update(f, m2, s):
    """One column tile of the online softmax: ``m2`` is the running maximum times log2(e)
    and ``s`` the running sum of ``exp(x - maximum)`` (fragments reduced along axis 1).
    The maximum is carried already scaled, so an unchanged maximum rescales the sum by
    ``exp2(m2 - m2) = 1`` exactly (no rounding that compounds over the tiles)."""
    m2_new = tylo.maximum(m2, f.max(axis=1) * LOG2E)
    base = tylo.where(m2_new == NEG_INF, 0.0, m2_new)  # nothing kept yet: subtract 0
    p = tylo.exp2(tylo.fma(f, LOG2E, -base))
    return m2_new, s * tylo.exp2(m2 - base) + p.sum(axis=1)


# --8<-- [end:online_update]


def _views(cfg, out, x, aux, rows, cols, ldo, ldx, ldm):
    """Global views (rows, cols) of the output, the input and the bool mask, with the
    facts that 16-byte accesses need stated (checked at every launch)."""
    vec = cfg.vec
    if vec > 1:
        x = tylo.assume_aligned(x, x.dtype.nbytes * vec)
        out = tylo.assume_aligned(out, min(16, out.dtype.nbytes * vec))
        tylo.assume(tylo.divisible(ldx, vec), tylo.divisible(ldo, vec), tylo.divisible(cols, vec))
    if cfg.full:
        tylo.assume(cols >= cfg.tile_cols)
    X = tylo.view(x, Layout((rows, cols), (ldx, 1)))
    O = tylo.view(out, Layout((rows, cols), (ldo, 1)))
    M = None
    if cfg.mask == "bool":
        if vec >= 4:  # the mask's bytes are loaded vec at a time too
            aux = tylo.assume_aligned(aux, vec)
            tylo.assume(tylo.divisible(ldm, vec))
        M = tylo.view(aux, Layout((rows, cols), (ldm, 1)))
    return O, X, M


# --8<-- [start:row_kernel]
@tylo.kernel
def row_softmax_kernel(
    cfg: tylo.Static, out, x, aux, rows: Dim, cols: Dim, ldo: Dim, ldx: Dim, ldm: Dim
):
    """One pass, the row in registers: lane-local rows (``cfg.style == 'lane'``) or
    warp-striped rows (``'warp'``), per ``cfg.ownership``."""
    O, X, M = _views(cfg, out, x, aux, rows, cols, ldo, ldx, ldm)
    own = cfg.ownership
    tid = tylo.thread_idx.x
    row0 = tylo.block_idx.x * cfg.block_rows
    across = WarpExchange(cfg) if cfg.row_warps > 1 else None  # warps sharing a row
    f = load_fragment(cfg, own, X, M, tid, row0, 0, rows, cols, aux)
    y = normalize(f, across)
    store_fragment(cfg, own, O, y, tid, row0, 0, rows, cols)


# --8<-- [end:row_kernel]


@tylo.inline
def fetch_row(cfg, plan, src, dst, tid, row):
    """Issue the ``cp.async`` copies of row ``row`` of ``src`` into the shared stage
    ``dst``: a whole-tile window when the row fills the tile (no per-vector checks), else
    the bounded form (columns past the row's end zero-filled)."""
    if cfg.full:
        copy_async(plan, src.window((row, 0), (1, cfg.tile_cols)), dst, tid)
    else:
        copy_async(plan, src, dst, tid, origin=(row, 0))


# --8<-- [start:prefetch_kernel]
@tylo.kernel(index_bits=32)  # the host picks it only when every offset fits in 31 bits
def prefetch_softmax_kernel(
    cfg: tylo.Static, out, x, aux, rows: Dim, cols: Dim, ldo: Dim, ldx: Dim, ldm: Dim
):
    """Warp-striped rows, one pass, with the next rows in flight: each block walks rows
    ``bid, bid + grid, ...`` and, while it normalizes one, the next ``stages - 1`` stream
    into shared memory (``cp.async``). Each thread later reads exactly the vectors it
    copied (the copy plan's ownership is the fragment's), so neither the copies nor the
    reuse of a stage need a barrier: ``cp.async.wait_group`` alone orders them."""
    O, X, M = _views(cfg, out, x, aux, rows, cols, ldo, ldx, ldm)
    own = cfg.ownership  # (1, tile_cols): the row in registers
    tile, n = cfg.tile_cols, cfg.stages
    tid = tylo.thread_idx.x
    bid, grid = tylo.block_idx.x, tylo.grid_dim.x
    vector_bytes = cfg.vec * x.dtype.nbytes  # the fragment's vectors, copied as they are
    plan = CopyPlan((1, tile), x.dtype, cfg.threads, Layout((1, tile), (tile, 1)), vector_bytes)
    smem = tylo.dynamic_shared(x.dtype, n * tile)
    stages = SharedTile(smem, Layout((1, tile, n), (tile, 1, tile)))  # cp.async destination
    S = tylo.view(smem, Layout((n, tile), (tile, 1)))  # the same bytes, read as rows
    src = GlobalTile(X, Layout((rows, cols), (ldx, 1)))  # X: x with its alignment stated
    across = WarpExchange(cfg) if cfg.row_warps > 1 else None  # warps sharing a row
    for s in range(n - 1):  # the block's first rows
        if bid + s * grid < rows:
            fetch_row(cfg, plan, src, stages.select(2, s), tid, bid + s * grid)
        commit_copies()
    stage = 0  # the stage of this iteration's row
    for i in tylo.range((rows - bid + grid - 1) // grid):
        row = bid + i * grid
        ahead = (stage + n - 1) % n  # the stage freed last iteration gets row + n - 1
        if row + (n - 1) * grid < rows:
            fetch_row(cfg, plan, src, stages.select(2, ahead), tid, row + (n - 1) * grid)
        commit_copies()  # (an empty group past the last row keeps the count in step)
        wait_copies(n - 1)  # this row's copies (issued n - 1 iterations ago) have landed
        f = load_fragment(cfg, own, X, M, tid, row, 0, rows, cols, aux, staged=(S, stage))
        y = normalize(f, across)
        store_fragment(cfg, own, O, y, tid, row, 0, rows, cols)
        stage = (stage + 1) % n
    wait_copies(0)


# --8<-- [end:prefetch_kernel]


# --8<-- [start:online_kernel]
@tylo.kernel
def online_softmax_kernel(
    cfg: tylo.Static, out, x, aux, rows: Dim, cols: Dim, ldo: Dim, ldx: Dim, ldm: Dim
):
    """Warp-striped rows longer than the registers hold: pass 1 streams the row in tiles
    of ``cfg.tile_cols`` keeping each thread's running maximum and sum (no communication
    inside the loop), then the threads of a row combine them; pass 2 streams the row
    again and writes ``exp(x - max) / sum``."""
    O, X, M = _views(cfg, out, x, aux, rows, cols, ldo, ldx, ldm)
    own = cfg.ownership  # one tile of the row: (rows_per_block, tile_cols)
    mine = cfg.local_ownership  # the same registers, each thread's values as its own row
    per_thread = cfg.thread_ownership  # one value per thread, (rows_per_block, row_threads)
    tid = tylo.thread_idx.x
    row0 = tylo.block_idx.x * cfg.block_rows
    tiles = (cols + cfg.tile_cols - 1) // cfg.tile_cols
    m2 = full(mine.reduced(1), NEG_INF, tylo.f32)  # running maximum, times log2(e)
    s = full(mine.reduced(1), 0.0, tylo.f32)  # running sum of exp(x - maximum)
    for t in tylo.range(tiles):  # pass 1: running maximum and sum, in the thread
        f = load_fragment(cfg, own, X, M, tid, row0, t * cfg.tile_cols, rows, cols, aux)
        f = Fragment(f.values, mine)
        m2, s = online_update(f, m2, s)
    # the threads of a row combine their (maximum, sum) pairs: shuffles, shared memory
    across = WarpExchange(cfg) if cfg.row_warps > 1 else None  # warps sharing a row
    m2 = Fragment(m2.values, per_thread)
    s = Fragment(s.values, per_thread)
    row_m2 = reduce_rows(m2, "maximum", across)
    base = tylo.where(row_m2 == NEG_INF, 0.0, row_m2)
    total = reduce_rows(s * tylo.exp2(m2 - base), "add", across)
    inv = tylo.where(total > 0.0, 1.0 / total, 0.0)
    for t in tylo.range(tiles):  # pass 2: normalize and store
        f = load_fragment(cfg, own, X, M, tid, row0, t * cfg.tile_cols, rows, cols, aux)
        y = tylo.exp2(tylo.fma(f, LOG2E, -base)) * inv
        store_fragment(cfg, own, O, y, tid, row0, t * cfg.tile_cols, rows, cols)


# --8<-- [end:online_kernel]


# --8<-- [start:mma_kernel]
@tylo.kernel
def mma_softmax_kernel(
    cfg: tylo.Static, out, x, aux, rows: Dim, cols: Dim, ldo: Dim, ldx: Dim, ldm: Dim
):
    """Rows held as ``mma.sync`` m16n8k16 accumulators (``cfg.mma_plan``): each row's
    values live in the 4 lanes of a quad, so its reductions are in-thread folds and two
    butterfly shuffles. One column tile: one pass. Longer rows: the online form attention
    uses (a running maximum and sum carried across column tiles), then a second sweep."""
    O, X, M = _views(cfg, out, x, aux, rows, cols, ldo, ldx, ldm)
    own = cfg.ownership  # == cfg.mma_plan.acc_ownership
    tid = tylo.thread_idx.x
    row0 = tylo.block_idx.x * cfg.block_rows
    if cfg.passes == 1:
        f = load_fragment(cfg, own, X, M, tid, row0, 0, rows, cols, aux)
        store_fragment(cfg, own, O, normalize(f), tid, row0, 0, rows, cols)
    else:
        tiles = (cols + cfg.tile_cols - 1) // cfg.tile_cols
        m2 = full(own.reduced(1), NEG_INF, tylo.f32)  # running maximum, times log2(e)
        s = full(own.reduced(1), 0.0, tylo.f32)  # running sum of exp(x - maximum)
        for t in tylo.range(tiles):  # online: the row's maximum and sum, tile by tile
            f = load_fragment(cfg, own, X, M, tid, row0, t * cfg.tile_cols, rows, cols, aux)
            m2, s = online_update(f, m2, s)
        base = tylo.where(m2 == NEG_INF, 0.0, m2)
        inv = tylo.where(s > 0.0, 1.0 / s, 0.0)
        for t in tylo.range(tiles):  # normalize and store
            f = load_fragment(cfg, own, X, M, tid, row0, t * cfg.tile_cols, rows, cols, aux)
            y = tylo.exp2(tylo.fma(f, LOG2E, -base)) * inv
            store_fragment(cfg, own, O, y, tid, row0, t * cfg.tile_cols, rows, cols)


# --8<-- [end:mma_kernel]
