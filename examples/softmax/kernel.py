"""Row softmax over fragments: ``out[r, :] = softmax(x[r, :])`` with optional masking.

Every kernel here loads a register *fragment* of the input (values placed by an
:class:`~tylo.ownership.Ownership`), takes the row maximum and the row sum with the
fragment's layout-derived reductions (``f.max(axis=1)``, ``f.sum(axis=1)``), and stores the
normalized fragment by the same ownership. What differs between the styles is only the
ownership, and therefore the communication the reductions derive from it (see
``docs/softmax.md`` and :mod:`examples.softmax.plan`).

Numerics: f32 math for f32 and bf16 data; ``exp(x - m)`` is ``ex2.approx`` of
``x * log2(e) - m * log2(e)`` (one FFMA and one MUFU per element). Masked elements (a valid
length per row, or a boolean mask where True keeps) and ``-inf`` inputs enter as ``-inf``
and come out as 0. A row with nothing left (fully masked, or all ``-inf``) gives zeros,
never NaN: its maximum ``-inf`` is replaced by 0 before subtracting, its sum is 0, and
``1 / sum`` is replaced by 0.
"""

from __future__ import annotations

import math
from typing import Any

import tylo
from tylo.fragment import Fragment, full
from tylo.layouts import Layout

__all__ = [
    "LOG2E",
    "load_fragment",
    "mma_softmax_kernel",
    "normalize",
    "online_softmax_kernel",
    "row_softmax_kernel",
    "store_fragment",
]

LOG2E = 1.4426950408889634  # exp(x) = 2 ** (x * log2(e))
NEG_INF = -math.inf

# runtime extents and leading dimensions: positive, below 2**31
Dim = tylo.Int(min=1, max=2**31 - 1)


def _element(v: Any, ok: Any) -> Any:
    """One loaded element as f32, or -inf where ``ok`` (a bool Value, or True) fails."""
    f = v.to(tylo.f32)
    return f if ok is True else tylo.where(ok, f, NEG_INF)


# --8<-- [start:load]
def load_fragment(cfg, own, X, M, tid, row0, col0, rows, cols, lengths=None):
    """The fragment of ``own`` at ``(row0, col0)`` of the view ``X``, as f32, with every
    masked or missing element ``-inf``. Loads are ``cfg.vec`` wide; a chunk past the row's
    end is read from the row's last chunk (always in bounds, so no branch) and replaced by
    ``-inf``; rows past the last are read from the last row (their stores are skipped)."""
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
        chunk = X.load((row, at), vector=vec, cache=cfg.load_cache) if vec > 1 else (X[row, at],)
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
def normalize(f, scratch_max=None, scratch_sum=None):
    """softmax along axis 1 of the f32 fragment ``f`` (masked elements ``-inf``): the
    reductions' communication (in-thread folds, shuffles, shared memory) follows from
    ``f``'s ownership. Fully masked rows give zeros."""
    m = f.max(axis=1, scratch=scratch_max, sync=False)
    m2 = tylo.where(m == NEG_INF, 0.0, m) * LOG2E  # a fully masked row: subtract 0, not -inf
    e = tylo.exp2(tylo.fma(f, LOG2E, -m2))  # exp(f - m): one FFMA and one ex2.approx
    s = e.sum(axis=1, scratch=scratch_sum, sync=False)
    inv = tylo.where(s > 0.0, 1.0 / s, 0.0)  # a fully masked row sums to 0: zeros
    return e * inv


# --8<-- [end:normalize]


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
    scratch = [None, None]
    if cfg.scratch_elements:  # several warps per row: their partial results meet here
        scratch = [tylo.shared(tylo.f32, cfg.scratch_elements) for _ in range(2)]
    f = load_fragment(cfg, own, X, M, tid, row0, 0, rows, cols, aux)
    y = normalize(f, *scratch)
    store_fragment(cfg, own, O, y, tid, row0, 0, rows, cols)


# --8<-- [end:row_kernel]


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
    m = full(mine.reduced(1), NEG_INF, tylo.f32)
    s = full(mine.reduced(1), 0.0, tylo.f32)
    for t in tylo.range(tiles):  # pass 1: running maximum and sum, in the thread
        f = load_fragment(cfg, own, X, M, tid, row0, t * cfg.tile_cols, rows, cols, aux)
        f = Fragment(f.values, mine)
        m_new = tylo.maximum(m, f.max(axis=1))
        m2 = tylo.where(m_new == NEG_INF, 0.0, m_new) * LOG2E
        s = s * tylo.exp2(tylo.fma(m, LOG2E, -m2)) + tylo.exp2(tylo.fma(f, LOG2E, -m2)).sum(axis=1)
        m = m_new
    # the threads of a row combine their (maximum, sum) pairs: shuffles, shared memory
    scratch = [None, None]
    if cfg.scratch_elements:
        scratch = [tylo.shared(tylo.f32, cfg.scratch_elements) for _ in range(2)]
    m = Fragment(m.values, per_thread)
    s = Fragment(s.values, per_thread)
    row_max = m.max(axis=1, scratch=scratch[0], sync=False)
    m2 = tylo.where(row_max == NEG_INF, 0.0, row_max) * LOG2E
    total = (s * tylo.exp2(tylo.fma(m, LOG2E, -m2))).sum(axis=1, scratch=scratch[1], sync=False)
    inv = tylo.where(total > 0.0, 1.0 / total, 0.0)
    for t in tylo.range(tiles):  # pass 2: normalize and store
        f = load_fragment(cfg, own, X, M, tid, row0, t * cfg.tile_cols, rows, cols, aux)
        y = tylo.exp2(tylo.fma(f, LOG2E, -m2)) * inv
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
        m = full(own.reduced(1), NEG_INF, tylo.f32)
        s = full(own.reduced(1), 0.0, tylo.f32)
        for t in tylo.range(tiles):  # the running maximum and sum of each row
            f = load_fragment(cfg, own, X, M, tid, row0, t * cfg.tile_cols, rows, cols, aux)
            m_new = tylo.maximum(m, f.max(axis=1))
            m2 = tylo.where(m_new == NEG_INF, 0.0, m_new) * LOG2E
            p = tylo.exp2(tylo.fma(f, LOG2E, -m2))
            s = s * tylo.exp2(tylo.fma(m, LOG2E, -m2)) + p.sum(axis=1)
            m = m_new
        m2 = tylo.where(m == NEG_INF, 0.0, m) * LOG2E
        inv = tylo.where(s > 0.0, 1.0 / s, 0.0)
        for t in tylo.range(tiles):
            f = load_fragment(cfg, own, X, M, tid, row0, t * cfg.tile_cols, rows, cols, aux)
            y = tylo.exp2(tylo.fma(f, LOG2E, -m2)) * inv
            store_fragment(cfg, own, O, y, tid, row0, t * cfg.tile_cols, rows, cols)


# --8<-- [end:mma_kernel]
