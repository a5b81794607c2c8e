"""Row softmax over fragments: ``out[r, :] = softmax(x[r, :])`` with optional masking.

Every kernel here loads a register *fragment* of the input (values placed by an
:class:`~tylo.tile.ownership.Ownership`), takes the row maximum and the row sum with the
fragment's layout-derived reductions (``f.max(axis=1)``, ``f.sum(axis=1)``), and stores the
normalized fragment by the same ownership. What differs between the styles is only the
ownership, and therefore the communication the reductions derive from it (see
``docs/softmax.md`` and :mod:`tylo.ops.softmax.plan`): in-thread folds, butterfly
shuffles, and, when warps share a row, tylo's two-level step between warps (one shared
slot per warp, one barrier, ``log2(warps)`` more shuffles; :mod:`tylo.tile.reduce`). Loads and
stores are tylo's by-ownership vector accesses (:mod:`tylo.tile.fragment_io`); this module
adds only the softmax's policy: masked and missing elements are ``-inf``.

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

import tylo
from tylo.constants import LOG2E, NEG_INF
from tylo.layouts import Layout
from tylo.nvgpu.cpasync import CopyPlan, commit_copies, copy_async, wait_copies
from tylo.tile.access import GlobalTile, SharedTile
from tylo.tile.fragment import Fragment, full
from tylo.tile.fragment_io import coordinates, load_fragment, store_fragment
from tylo.tile.reduce import reduction_plan, reduction_scratch

__all__ = [
    "LOG2E",
    "OPS",
    "load_input",
    "mma_softmax_kernel",
    "normalize",
    "online_softmax_kernel",
    "online_update",
    "prefetch_softmax_kernel",
    "reduce_rows",
    "row_scratch",
    "row_softmax_kernel",
    "store_output",
]

OPS = ("maximum", "add")  # the row reductions of a softmax

# runtime extents and leading dimensions: positive, below 2**31
Dim = tylo.Dim
# rows ``ld`` elements apart, each row contiguous: the kernels take the row strides (ldo, ldx)
# as arguments; softmax() (host.py) checks the column stride is 1 before launching
Rows = tylo.Ptr(strided=True)


# --8<-- [start:load]
def load_input(cfg, own, X, A, tid, row0, col0, rows, cols, staged=None):
    """The fragment of ``own`` at ``(row0, col0)`` of the input view ``X``, as f32, with
    every masked or missing element ``-inf``. ``A`` is the mask's view (:func:`_views`:
    bool, or int32 lengths); ``staged = (S, stage)`` reads the values from row ``stage``
    of the shared view ``S`` instead (a row copied there ahead of time)."""
    at, vec = (row0, col0), cfg.vec
    # columns past the row's end read as fill; rows past the last read the last row
    # (clamp: their stores are skipped, so their values need no select)
    edge = {"origin": at, "bounds": (rows, cols), "clamp": (0,), "vector": vec}
    keep = None
    if cfg.mask == "bool":  # True keeps; the mask's bytes move vec at a time too
        keep = load_fragment(A, own, tid, fill=False, **edge)
    elif cfg.mask == "length":  # one length per row the thread holds
        per_row = {"origin": (row0, 0), "bounds": (rows, None), "clamp": (0,)}
        valid = load_fragment(A, own.reduced(1), tid, **per_row)
        keep = coordinates(own, tid, 1, origin=at) < valid
    f32 = {"fill": NEG_INF, "dtype": tylo.f32, "keep": keep}
    if staged is None:
        return load_fragment(X, own, tid, cache=cfg.load_cache, **edge, **f32)
    S, stage = staged  # the stage holds a whole tile: reading past the row's end is harmless
    return load_fragment(
        S, own, tid, origin=(stage, 0), bounds=(None, cols), vector=vec, overread=True, **f32
    )


# --8<-- [end:load]


def store_output(cfg, O, f, tid, row0, col0, rows, cols):
    """Store the f32 fragment ``f`` by its ownership at ``(row0, col0)`` of the output
    view ``O``, converted to its dtype, ``cfg.vec`` elements at a time; chunks past the
    row's end and rows past the last are skipped."""
    store_fragment(
        O, f, tid, origin=(row0, col0), bounds=(rows, cols), vector=cfg.vec, cache=cfg.store_cache
    )


# --8<-- [start:normalize]
def normalize(f, scratch=None):
    """softmax along axis 1 of the f32 fragment ``f`` (masked elements ``-inf``): the
    reductions' communication (in-thread folds, shuffles, shared memory between warps)
    follows from ``f``'s ownership; ``scratch`` (:func:`row_scratch`) is needed when
    warps share a row. Fully masked rows give zeros."""
    m = reduce_rows(f, "maximum", scratch)
    m2 = tylo.where(m == NEG_INF, 0.0, m) * LOG2E  # a fully masked row: subtract 0, not -inf
    e = tylo.exp2(tylo.fma(f, LOG2E, -m2))  # exp(f - m): one FFMA and one ex2.approx
    s = reduce_rows(e, "add", scratch)
    inv = tylo.where(s > 0.0, 1.0 / s, 0.0)  # a fully masked row sums to 0: zeros
    return e * inv


# --8<-- [end:normalize]


# --8<-- [start:across_warps]
def row_scratch(own):
    """The shared scratch of the row reductions of fragments of ``own`` when warps share a
    row (None otherwise): one array per reduction (maximum, sum), each one partial per
    warp and row. A softmax alternates them (maximum, sum, maximum, ... also across loop
    iterations), so each array's previous readers have passed the other reduction's
    barrier before it is written again: one barrier per reduction is enough."""
    if reduction_plan(own, 1).warps == 1:
        return None
    return {op: reduction_scratch(own, 1, tylo.f32, name=f"partials_{op}") for op in OPS}


def reduce_rows(f, op, scratch=None):
    """``f`` reduced along axis 1 with ``op`` by tylo's recipe for its ownership: the
    thread's values folded pairwise, butterflies over the lanes, and, when warps share a
    row, one partial per warp in ``scratch[op]``, one barrier and ``log2(warps)`` more
    butterflies (no leading barrier: see :func:`row_scratch`)."""
    if scratch is None:
        return f.reduce(op, axis=1)
    return f.reduce(op, axis=1, scratch=scratch[op], sync=False)


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
    """Global views of the output and the input (rows, cols), and of the mask: the bool
    mask (rows, cols) or the lengths (rows, 1); with the facts that 16-byte accesses
    need stated (checked at every launch)."""
    vec = cfg.vec
    if vec > 1:
        x = tylo.assume_aligned(x, x.dtype.nbytes * vec)
        out = tylo.assume_aligned(out, min(16, out.dtype.nbytes * vec))
        tylo.assume(tylo.divisible(ldx, vec), tylo.divisible(ldo, vec), tylo.divisible(cols, vec))
    if cfg.full:
        tylo.assume(cols >= cfg.tile_cols)
    X = tylo.view(x, Layout((rows, cols), (ldx, 1)))
    O = tylo.view(out, Layout((rows, cols), (ldo, 1)))
    A = None
    if cfg.mask == "bool":
        if vec >= 4:  # the mask's bytes are loaded vec at a time too
            aux = tylo.assume_aligned(aux, vec)
            tylo.assume(tylo.divisible(ldm, vec))
        A = tylo.view(aux, Layout((rows, cols), (ldm, 1)))
    elif cfg.mask == "length":
        A = tylo.view(aux, Layout((rows, 1)))
    return O, X, A


# --8<-- [start:row_kernel]
@tylo.kernel
def row_softmax_kernel(
    cfg: tylo.Static,
    out: Rows,
    x: Rows,
    aux,
    rows: Dim,
    cols: Dim,
    ldo: Dim,
    ldx: Dim,
    ldm: Dim,
):
    """One pass, the row in registers: lane-local rows (``cfg.style == 'lane'``) or
    warp-striped rows (``'warp'``), per ``cfg.ownership``."""
    O, X, A = _views(cfg, out, x, aux, rows, cols, ldo, ldx, ldm)
    own = cfg.ownership
    tid = tylo.thread_idx.x
    row0 = tylo.block_idx.x * cfg.block_rows
    scratch = row_scratch(own)  # None unless warps share a row
    f = load_input(cfg, own, X, A, tid, row0, 0, rows, cols)
    y = normalize(f, scratch)
    store_output(cfg, O, y, tid, row0, 0, rows, cols)


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
    cfg: tylo.Static,
    out: Rows,
    x: Rows,
    aux,
    rows: Dim,
    cols: Dim,
    ldo: Dim,
    ldx: Dim,
    ldm: Dim,
):
    """Warp-striped rows, one pass, with the next rows in flight: each block walks rows
    ``bid, bid + grid, ...`` and, while it normalizes one, the next ``stages - 1`` stream
    into shared memory (``cp.async``). Each thread later reads exactly the vectors it
    copied (the copy plan's ownership is the fragment's), so neither the copies nor the
    reuse of a stage need a barrier: ``cp.async.wait_group`` alone orders them."""
    O, X, A = _views(cfg, out, x, aux, rows, cols, ldo, ldx, ldm)
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
    scratch = row_scratch(own)  # None unless warps share a row
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
        f = load_input(cfg, own, X, A, tid, row, 0, rows, cols, staged=(S, stage))
        y = normalize(f, scratch)
        store_output(cfg, O, y, tid, row, 0, rows, cols)
        stage = (stage + 1) % n
    wait_copies(0)


# --8<-- [end:prefetch_kernel]


# --8<-- [start:online_kernel]
@tylo.kernel
def online_softmax_kernel(
    cfg: tylo.Static,
    out: Rows,
    x: Rows,
    aux,
    rows: Dim,
    cols: Dim,
    ldo: Dim,
    ldx: Dim,
    ldm: Dim,
):
    """Warp-striped rows longer than the registers hold: pass 1 streams the row in tiles
    of ``cfg.tile_cols`` keeping each thread's running maximum and sum (no communication
    inside the loop), then the threads of a row combine them; pass 2 streams the row
    again and writes ``exp(x - max) / sum``."""
    O, X, A = _views(cfg, out, x, aux, rows, cols, ldo, ldx, ldm)
    own = cfg.ownership  # one tile of the row: (rows_per_block, tile_cols)
    mine = cfg.local_ownership  # the same registers, each thread's values as its own row
    per_thread = cfg.thread_ownership  # one value per thread, (rows_per_block, row_threads)
    tid = tylo.thread_idx.x
    row0 = tylo.block_idx.x * cfg.block_rows
    tiles = (cols + cfg.tile_cols - 1) // cfg.tile_cols
    m2 = full(mine.reduced(1), NEG_INF, tylo.f32)  # running maximum, times log2(e)
    s = full(mine.reduced(1), 0.0, tylo.f32)  # running sum of exp(x - maximum)
    for t in tylo.range(tiles):  # pass 1: running maximum and sum, in the thread
        f = load_input(cfg, own, X, A, tid, row0, t * cfg.tile_cols, rows, cols)
        f = Fragment(f.values, mine)
        m2, s = online_update(f, m2, s)
    # the threads of a row combine their (maximum, sum) pairs: shuffles, shared memory
    scratch = row_scratch(per_thread)  # None unless warps share a row
    m2 = Fragment(m2.values, per_thread)
    s = Fragment(s.values, per_thread)
    row_m2 = reduce_rows(m2, "maximum", scratch)
    base = tylo.where(row_m2 == NEG_INF, 0.0, row_m2)
    total = reduce_rows(s * tylo.exp2(m2 - base), "add", scratch)
    inv = tylo.where(total > 0.0, 1.0 / total, 0.0)
    for t in tylo.range(tiles):  # pass 2: normalize and store
        f = load_input(cfg, own, X, A, tid, row0, t * cfg.tile_cols, rows, cols)
        y = tylo.exp2(tylo.fma(f, LOG2E, -base)) * inv
        store_output(cfg, O, y, tid, row0, t * cfg.tile_cols, rows, cols)


# --8<-- [end:online_kernel]


# --8<-- [start:mma_kernel]
@tylo.kernel
def mma_softmax_kernel(
    cfg: tylo.Static,
    out: Rows,
    x: Rows,
    aux,
    rows: Dim,
    cols: Dim,
    ldo: Dim,
    ldx: Dim,
    ldm: Dim,
):
    """Rows held as ``mma.sync`` m16n8k16 accumulators (``cfg.mma_plan``): each row's
    values live in the 4 lanes of a quad, so its reductions are in-thread folds and two
    butterfly shuffles. One column tile: one pass. Longer rows: the online form attention
    uses (a running maximum and sum carried across column tiles), then a second sweep."""
    O, X, A = _views(cfg, out, x, aux, rows, cols, ldo, ldx, ldm)
    own = cfg.ownership  # == cfg.mma_plan.acc_ownership
    tid = tylo.thread_idx.x
    row0 = tylo.block_idx.x * cfg.block_rows
    if cfg.passes == 1:
        f = load_input(cfg, own, X, A, tid, row0, 0, rows, cols)
        store_output(cfg, O, normalize(f), tid, row0, 0, rows, cols)
    else:
        tiles = (cols + cfg.tile_cols - 1) // cfg.tile_cols
        m2 = full(own.reduced(1), NEG_INF, tylo.f32)  # running maximum, times log2(e)
        s = full(own.reduced(1), 0.0, tylo.f32)  # running sum of exp(x - maximum)
        for t in tylo.range(tiles):  # online: the row's maximum and sum, tile by tile
            f = load_input(cfg, own, X, A, tid, row0, t * cfg.tile_cols, rows, cols)
            m2, s = online_update(f, m2, s)
        base = tylo.where(m2 == NEG_INF, 0.0, m2)
        inv = tylo.where(s > 0.0, 1.0 / s, 0.0)
        for t in tylo.range(tiles):  # normalize and store
            f = load_input(cfg, own, X, A, tid, row0, t * cfg.tile_cols, rows, cols)
            y = tylo.exp2(tylo.fma(f, LOG2E, -base)) * inv
            store_output(cfg, O, y, tid, row0, t * cfg.tile_cols, rows, cols)


# --8<-- [end:mma_kernel]
