"""The score mask both attention kernels apply to the key tiles that need one: keys past the
batch entry's key count, and with ``causal`` past the bottom-right diagonal, become ``-inf``.

Each row has one limit, the first key it does not see (:func:`row_limit`). In a key tile,
a thread's scores lie at its first column of the tile plus static per-slot offsets, so the
limit is taken relative to that first column and clamped to ``[0, width]``
(:func:`tile_limit`), converted to i32, and compared with each slot's offset: one 32-bit
compare per score (:func:`score_mask`). Comparing the accumulator's coordinates
(``tylo.tile.fragment_io.coordinates``), which are 64-bit index values, took two compares per
condition and an AND per score. ``tests/host/test_attention_hopper_host.py`` checks the
limits against the reference's mask (``examples/attention/reference.py``) by brute force.
"""

from __future__ import annotations

from typing import Any

import tylo
from tylo.nvgpu.errors import PlanError
from tylo.tile.fragment import full
from tylo.tile.fragment_io import coordinates

__all__ = ["row_limit", "score_mask", "tile_limit"]


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


def score_mask(
    own: Any, tid: Any, origin: tuple, kv: Any, lq: Any, causal: bool, width: int
) -> Any:
    """Inside a kernel: the boolean fragment (ownership ``own``, rank 2: rows, keys) of
    the scores thread ``tid`` holds that are visible, for the tile whose first row and key
    are ``origin``, ``width`` keys wide, with ``kv`` keys and ``lq`` queries. Raises
    :class:`PlanError` where a slot's column offset lies outside ``[0, width)``."""
    offsets = [own.value_coord(v)[1] for v in range(own.values)]
    if min(offsets) < 0 or max(offsets) >= width:
        raise PlanError(f"score_mask: column offsets {offsets} outside the {width}-key tile")
    r0, c0 = origin
    base = c0 + own.thread_coord(tid)[1]
    if causal:  # one limit per row the thread holds
        rows = coordinates(own.reduced(1), tid, 0, origin=(r0, 0))
        limit = row_limit(True, rows, kv, lq, tylo.minimum)
        limit = tile_limit(limit, base, width, tylo.minimum, tylo.maximum).to(tylo.i32)
    else:  # one for the thread
        limit = tylo.value(tile_limit(kv, base, width, tylo.minimum, tylo.maximum), tylo.i32)
    cols = full(own, 0, tylo.i32).map_slots(lambda v, _: tylo.value(offsets[v], tylo.i32))
    return cols < limit
