"""The score mask both attention kernels apply to the key tiles that need one: keys past the
batch entry's key count, and with ``causal`` past the bottom-right diagonal, become ``-inf``.

Each row has one limit, the first key it does not see (:func:`row_limit`). In a key tile,
a thread's scores lie at its first column of the tile plus static per-slot offsets, so the
limit is taken relative to that first column and clamped to ``[0, width]``
(:func:`tile_limit`), converted to i32, and compared with each slot's offset: one 32-bit
compare per score (:func:`score_mask`). The warp kernel takes the limit in two steps
(``score_mask(split=True)``, :func:`split_limit`): relative to the tile in 64 bits, then to
the thread's column in 32, so that LLVM finds no 64-bit value of the thread alone to hoist
out of the key loop. Comparing the accumulator's coordinates
(``tylo.tile.fragment_io.coordinates``), which are 64-bit index values, took two compares per
condition and an AND per score. ``tests/host/test_attention_hopper_host.py`` checks the
limits against the reference's mask (``tylo/ops/attention/reference.py``) by brute force.
"""

from __future__ import annotations

from typing import Any

import tylo
from tylo.nvgpu.errors import PlanError
from tylo.tile.fragment import full
from tylo.tile.fragment_io import coordinates

__all__ = ["row_limit", "score_mask", "split_limit", "tile_limit"]


def row_limit(causal: bool, row: Any, kv: Any, lq: Any, lo: Any = min) -> Any:
    """The first key hidden from query row ``row`` (keys ``< row_limit`` are visible):
    ``kv`` (the batch entry's key count), and with ``causal`` ``row + 1 + kv - lq`` (the
    bottom-right diagonal) if that is smaller. ``lo``: Python's ``min`` on the host,
    ``tylo.minimum`` in the kernel.

    Defining property (checked against the reference's mask by brute force): key ``j`` is
    visible to row ``row < lq`` exactly when ``j < row_limit(...)``."""
    return lo(kv, row + 1 + kv - lq) if causal else kv


def tile_limit(limit: Any, base: Any, width: int, lo: Any = min, hi: Any = max) -> Any:
    """``limit - base`` clamped to ``[0, width]``: for a thread whose first column of a
    ``width``-key tile is key ``base``, its slot at column offset ``c`` (``0 <= c < width``)
    is visible exactly when ``c < tile_limit``; the clamp keeps the value within i32 (and
    small) whatever ``limit`` and ``base`` are."""
    return lo(hi(limit - base, 0), width)


def split_limit(
    limit: Any, c0: Any, col: Any, width: int, lo: Any = min, hi: Any = max, narrow: Any = None
) -> Any:
    """``tile_limit(limit, c0 + col, width)`` in two steps, for ``0 <= col < width``: the
    limit relative to the tile's first key ``c0``, clamped to ``[0, 2 * width]``; then
    (converted by the callable ``narrow`` where given: the kernel's conversion to i32)
    relative to the thread's first column ``col``, clamped to ``[0, width]``. Equal to the
    one-step form for every ``limit`` and ``c0``: a limit ``2 * width`` or more past ``c0``
    is ``width`` or more past ``c0 + col`` (``tests/host/test_attention_hopper_host.py``)."""
    tile = lo(hi(limit - c0, 0), 2 * width)
    if narrow is not None:
        tile = narrow(tile)
    return lo(hi(tile - col, 0), width)


def score_mask(
    own: Any,
    tid: Any,
    origin: tuple,
    kv: Any,
    lq: Any,
    causal: bool,
    width: int,
    split: bool = False,
) -> Any:
    """Inside a kernel: the boolean fragment (ownership ``own``, rank 2: rows, keys) of
    the scores thread ``tid`` holds that are visible, for the tile whose first row and key
    are ``origin``, ``width`` keys wide, with ``kv`` keys and ``lq`` queries. Raises
    :class:`PlanError` where a slot's column offset lies outside ``[0, width)``.

    ``split``: take the limit relative to the tile first (64 bits, clamped to ``[0, 2 *
    width]``, :func:`split_limit`), then relative to the thread's first column in 32 bits,
    so that no 64-bit value that depends on the thread alone is left for LLVM to hoist out
    of the key loop (the causal row limits clamped to ``[-1, 2**31 - 1]`` and made i32
    first). The warp kernel's D = 128 tile with Q in shared memory then spills 0 / 16 B
    (without / with the causal mask) instead of 8 / 36 under ptxas 13.0. The Hopper kernel
    keeps the one-step form: there the split measured 0.93-0.96x at D = 64 causal (H200,
    2026-12-02)."""
    offsets = [own.value_coord(v)[1] for v in range(own.values)]
    if min(offsets) < 0 or max(offsets) >= width:
        raise PlanError(f"score_mask: column offsets {offsets} outside the {width}-key tile")
    r0, c0 = origin
    lo, hi = tylo.minimum, tylo.maximum
    if causal:  # one limit per row the thread holds
        rows = coordinates(own.reduced(1), tid, 0, origin=(r0, 0))
        limit = row_limit(True, rows, kv, lq, lo)
    else:  # one for the thread
        limit = kv
    cols = full(own, 0, tylo.i32).map_slots(lambda v, _: tylo.value(offsets[v], tylo.i32))
    if not split:
        limit = tile_limit(limit, c0 + own.thread_coord(tid)[1], width, lo, hi)
        return cols < (limit.to(tylo.i32) if causal else tylo.value(limit, tylo.i32))
    narrow = None
    if causal:  # in [-1, 2**31 - 1] (row_limit <= kv < 2**31), then i32; c0 < 2**31
        limit = hi(lo(limit, 2**31 - 1), -1).to(tylo.i32)
        c0 = tylo.value(c0, tylo.i32)
    else:  # 64 bits relative to the tile, then i32

        def narrow(x: Any) -> Any:
            return tylo.value(x, tylo.i32)

    col = tylo.value(own.thread_coord(tid)[1], tylo.i32)
    return cols < split_limit(limit, c0, col, width, lo, hi, narrow)
