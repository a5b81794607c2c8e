"""The TMA-store epilogue of the Hopper attention forward (``HopperAttentionConfig(
tma_store=True)``; walk-through: docs/attention_hopper.md, "The TMA-store epilogue").

Without it each consumer stores its normalized 64 x D block of O by ownership, element by
element and bounded at Lq: 2-byte scalar stores, which weigh at short sequences. With it:

- the consumer writes its O block with ``stmatrix`` (f32 rounded to the inputs' dtype and
  packed) into **its own 64 rows of the Q buffer**, in the layout the Q tile already has
  there (64-column blocks of 64 rows x 128 bytes, 128-byte swizzled, block ``j`` at
  ``j * bm * 64`` elements of the buffer): :func:`staging_layout`;
- ``fence.proxy.async`` (the writes, visible to the TMA unit), a named barrier over the
  consumer's 128 threads, and one elected thread issues a TMA store per 64-column block,
  the box (64 rows, 1 head, 1 batch entry, 64 columns) at ``(r0, head, batch, 64 j)`` of
  the 4-D O tensor map (modes L, H, B, D as Q's; the host's ``o_plan`` proves the box's
  shared layout is the staging layout's block ``j``). TMA clips the box at Lq (no per-element
  bounds; a box wholly past Lq is not issued);
- the store is committed, and waited for before the buffer may change: in the one-item
  kernel before the thread exits, in the persistent kernel (``read=True``: until the store has
  read shared memory) before the consumer releases the Q buffer to the producer, whose next
  TMA load into it must not race the store's read.

Why the Q rows are free: consumer ``c``'s wgmma ``S = Q Kᵀ`` read only rows ``64c ..`` of
the Q buffer (its A operand, ``key_loop``'s ``qs``), the other consumers read only their own
rows, the producer writes the buffer only once per item (before the consumers' wait on it:
one-item kernel) or after every consumer released it (persistent), and ``key_loop`` returns
only after ``wait_group(0)``: every wgmma the consumer issued, so every one that read Q, is
complete. The barrier before ``stmatrix`` makes that hold for the whole warpgroup, whichever
warp's part of a wgmma read which row. The log-sum-exp stays a store by ownership (64
floats).
"""

from __future__ import annotations

from typing import Any

import tylo
from tylo import dtypes as dt
from tylo.constants import LN2, NEG_INF
from tylo.layouts import ComposedLayout, Layout, byte_swizzle
from tylo.nvgpu import tma
from tylo.nvgpu.errors import PlanError
from tylo.nvgpu.warp.stmatrix import store_fragment
from tylo.nvgpu.warpgroup.mma import fence_shared_to_async
from tylo.ops.attention.hopper_roles import epilogue_barrier, named_barrier
from tylo.tile.access import store
from tylo.tile.views import SharedTile

__all__ = [
    "check_o_map",
    "normalize",
    "staging_layout",
    "staging_offset",
    "tma_epilogue",
]

BLOCK = 64  # columns of one 128-byte swizzled block of bf16/f16 (hopper_kernel.BLOCK)
ROWS = 64  # a consumer warpgroup's query rows


def normalize(o: Any, m2: Any, lsum: Any) -> tuple[Any, Any]:
    """``(O / rowsum, lse)``: the normalized output and the natural-log row log-sum-exp
    (``m2`` in log2 units); a row that saw no key (``lsum = 0``) gets ``o = 0`` and
    ``lse = -inf``."""
    # rcp.approx: rcp.rn's slow path is a call, and any call makes ptxas serialize every
    # wgmma of the kernel (C7509); lsum >= 1 wherever it is used
    inv = tylo.where(lsum > 0.0, lsum.ptx("rcp.approx.ftz.f32"), 0.0)
    lse = tylo.where(lsum > 0.0, (m2 + tylo.log2(lsum)) * LN2, NEG_INF)
    return o * inv, lse


# --8<-- [start:staging]
def staging_layout(cfg: Any) -> ComposedLayout:
    """The shared layout a consumer's 64 x D output block is staged in: coordinates
    (row, column) of the block, column ``64 j + x`` in 64-column block ``j``, blocks
    ``bm * 64`` elements apart, each 64 rows of 128 bytes with the 128-byte swizzle. From
    :func:`staging_offset` this is exactly the consumer's rows of the Q buffer (``key_loop``'s
    ``qs[j]`` for column block ``j``: Q's block ``j`` holds ``bm`` rows, the consumer's 64
    start ``64 * 64 c`` elements in, a multiple of the swizzle's period)."""
    d = dt.dtype_of(cfg.dtype)
    swz = byte_swizzle(128, d.nbytes)
    blocks = cfg.d // BLOCK
    return ComposedLayout(swz, 0, Layout((ROWS, (BLOCK, blocks)), (BLOCK, (1, cfg.bm * BLOCK))))


def staging_offset(qbase: Any, c: Any) -> Any:
    """The element offset of consumer ``c``'s rows in the Q buffer at ``qbase``."""
    return qbase + ROWS * BLOCK * c


# --8<-- [end:staging]


def check_o_map(cfg: Any, to: Any, kernel: str) -> None:
    """Raise :class:`~tylo.nvgpu.errors.PlanError` unless ``to`` is an O tensor map exactly
    when ``cfg.tma_store`` (None otherwise), its box the staging layout's 64 x 64 block."""
    if cfg.tma_store != (to is not None):
        raise PlanError(
            f"{kernel}: tma_store={cfg.tma_store} takes "
            f"{'the O tensor map (hopper_host.o_plan(cfg))' if cfg.tma_store else 'to=None'}; "
            f"got {to!r}"
        )
    if to is not None and tuple(to.plan.box) != (ROWS, 1, 1, BLOCK):
        raise PlanError(
            f"{kernel}: the O tensor map's box is {to.plan.box}, not the consumer's block "
            f"{(ROWS, 1, 1, BLOCK)} (hopper_host.o_plan(cfg))"
        )


def _consumer_barrier(cfg: Any, c: Any) -> None:
    """``bar.sync 1 + consumers + c, 128`` (PTX ISA 9.7.13.4): consumer ``c``'s 128 threads
    meet on a named barrier of their own (0 is ``sync_threads``, ``1 .. consumers`` the
    ping-pong turns: :func:`~tylo.ops.attention.hopper_roles.barrier_ids`), so the other
    consumers run on."""
    named_barrier("sync", epilogue_barrier(cfg.consumers, c), ROWS * 2)


# --8<-- [start:tma_epilogue]
WAITS = ("written", "read", "before")


@tylo.inline
def tma_epilogue(cfg, o, m2, lsum, dst, smem, qbase, c, me, wait):
    """Consumer ``c``'s epilogue through shared memory: ``dst = (to, l_tile, r0, bh, bb,
    lq)`` (the O tensor map, the lse tile, the block's first row, head and batch entry, and
    Lq); ``qbase`` the buffer staged in (a Q buffer, or ``cfg.o_offset()``); ``me`` the
    thread's index in its warpgroup. Every wgmma of the consumer must be complete
    (``key_loop`` returns so). ``wait`` (``WAITS``), what the elected thread waits for:
    ``"written"``, after the stores, until they are written (the one-item kernel's end);
    ``"read"``, after the stores, until they have read shared memory (persistent: before
    the Q buffer is released); ``"before"``, before staging, until the consumer's earlier
    stores (the previous item's, from the same rows of the O buffer) have read it, and not
    after (``o_buffer``; the kernel waits once more before it exits)."""
    if wait not in WAITS:
        raise PlanError(f"tma_epilogue: wait must be one of {WAITS}, got {wait!r}")
    to, l_tile, r0, bh, bb, lq = dst
    out, lse = normalize(o, m2, lsum)
    store(None, l_tile, lse, me, origin=(r0, 0))
    base = staging_offset(qbase, c)
    if wait == "before" and me == 0:
        tma.wait_stores(0, read=True)  # the barrier below holds the others until it returns
    _consumer_barrier(cfg, c)  # every warp's wgmma that read these Q rows is complete
    tile = SharedTile(smem, staging_layout(cfg), base=base).window((0, 0), (ROWS, cfg.d))
    store_fragment(out, tile, me)
    fence_shared_to_async()  # the stmatrix writes, visible to the TMA unit (async proxy)
    _consumer_barrier(cfg, c)
    if me == 0:
        if r0 < lq:  # a box wholly past Lq writes nothing: not issued
            for j in range(cfg.d // BLOCK):
                box = SharedTile(smem, to.plan.smem_layout, base=base + j * cfg.bm * BLOCK)
                tma.store(to, box, (r0, bh, bb, BLOCK * j))
            tma.commit_stores()
        if wait != "before":
            tma.wait_stores(0, read=wait == "read")


# --8<-- [end:tma_epilogue]
