"""The persistent Hopper attention's shares of work per CTA: a table the host computes once
per shape and the kernel reads (:mod:`tylo.ops.attention.hopper_persistent`; walk-through:
docs/attention_hopper.md, "Persistent schedule").

Each work item (a q-tile of one (batch, head), numbered by
:func:`~tylo.ops.attention.hopper_persistent.item_order`) weighs its key tiles plus one (its
Q load, first ``S`` and epilogue: about a tile's time, an estimate) at the full key length.

- The *head*: whole rounds of ``grid`` pairs of the mirrored order (:func:`mirrored`: a
  q-tile of one (batch, head) and the mirror q-tile of the next, ``q_tiles + 1`` causal key
  tiles a pair), pair ``c + r grid`` to CTA ``c``, while at least ``TAIL_ROUNDS * grid``
  items remain after them (any number where the items weigh the same:
  :func:`tail_rounds`). The pairs in flight at one time are ~``grid`` consecutive ones of a
  few (batch, head)s, so they read the same K and V from L2.
- The *tail*: the rest, heaviest first, each to the CTA whose load is the least so far
  (ties: the lowest CTA). Pairs alone left a CTA up to one pair above the mean: on an
  H200 at D = 64 causal 1k, 16 x 16 heads made 7.76 pairs a CTA (8 for some, 7 for
  others), and 17 x 16 made 8.24, where tylo fell from 0.96x to 0.91x cuDNN's speed.

The table (u32): ``grid + 1`` offsets, then the items; CTA ``c``'s items, in the order it
takes them, are ``table[grid + 1 + offsets[c] : grid + 1 + offsets[c + 1]]``.
"""

from __future__ import annotations

import heapq
from typing import Any

import numpy as np

from tylo.nvgpu.errors import PlanError
from tylo.ops.attention.hopper_kernel import key_tiles

__all__ = ["TAIL_ROUNDS", "cta_shares", "item_weights", "mirrored", "schedule_table", "tail_rounds"]

# the items dealt heaviest first at the end: at least this many rounds of grid (when there
# are that many). Measured on an H200 (benchmarks/attention.py's causal shapes, 6 rounds,
# 2026-12-02), TFLOP/s at 0 / 2 / 3 / 6: D = 128 1k 491 / 485 / 484 / 453, 4k 655 / 655 /
# 654 / 646; D = 64 1k 316 / 318 / 309 / 312, 4k 428 / 432 / 438 / 432. More rounds balance
# better (max / mean load at 132 CTAs, tests/host/test_attention_hopper_balance_host.py:
# 1.020 at 1k with 2, 1.008 with 6; the pairs alone 1.031) but put more (batch, head)s in
# flight at one time: with 6 at D = 128 1k ~100 of them, 50 MB of K and V, the whole L2.
TAIL_ROUNDS = 2


# --8<-- [start:shares]
def mirrored(p: Any, heads: int, q_tiles: int) -> Any:
    """Position ``p`` (an int or an integer numpy array) of the mirrored order as an
    :func:`~tylo.ops.attention.hopper_persistent.item_order` index (``heads``: the (batch,
    head)s). They go two by two: the ``j``-th pair is the ``j``-th q-tile of the first (in
    ``item_order``'s order) and the ``(q_tiles - 1 - j)``-th of the second (with
    ``causal``, the q-tiles ``q_tiles - 1 - j`` and ``j``: ``q_tiles + 1`` key tiles
    together); with an odd count, the last (batch, head) pairs its own ``j``-th and
    ``(q_tiles - 1 - j)``-th (the middle one alone: the order's last item).

    Defining property: a bijection of ``[0, q_tiles * heads)`` onto itself, positions
    ``2u, 2u + 1`` a pair as above."""
    bh = p // q_tiles
    odd = bh % 2  # the second of its two
    f = p - bh * q_tiles + odd * q_tiles  # the position among the two's q-tiles
    j, second = f // 2, f % 2
    whole = 1 - 1 // (heads // 2 - bh // 2 + 1)  # 0: the odd count's last (batch, head)
    pair = second * (q_tiles - 1 - j) + (1 - second) * j
    return (bh - odd + whole * second) * q_tiles + pair


def item_weights(cfg: Any, lq: int, lk: int, heads: int) -> np.ndarray:
    """Each item's weight, by ``item_order`` index (``heads``: the (batch, head)s): its key
    tiles (:func:`~tylo.ops.attention.hopper_kernel.key_tiles` at ``lk`` keys) plus one."""
    q_tiles = -(-lq // cfg.bm)
    tiles = [key_tiles(cfg, k * cfg.bm, lk, lq)[1] + 1 for k in range(q_tiles)]
    by_position = tiles[::-1] if cfg.causal else tiles  # item_order: heaviest first (causal)
    return np.tile(np.asarray(by_position, dtype=np.int64), heads)


def tail_rounds(weights: np.ndarray) -> int:
    """``TAIL_ROUNDS``, or 0 where every item weighs the same (no mask, or none that moves a
    tile): then whole rounds of pairs and the rest one by one leave each CTA
    ``ceil(items / grid)`` items at most, the least any deal can, with the most pairs."""
    return 0 if weights.min() == weights.max() else TAIL_ROUNDS


def cta_shares(weights: np.ndarray, q_tiles: int, heads: int, grid: int) -> list[np.ndarray]:
    """Each CTA's items (``item_order`` indices, in the order it takes them) for items of
    these ``weights`` (:func:`item_weights`), ``q_tiles * heads`` of them, over ``grid``
    CTAs (``1 <= grid <= items``): the head's pairs, then the tail's items (module
    docstring).

    Defining property: the shares partition the items, and no CTA's load exceeds the mean
    by more than the heaviest item (the tail's greedy bound, the head's loads equal where
    the pairs weigh the same)."""
    items = q_tiles * heads
    if not (type(grid) is int and 1 <= grid <= items):
        raise PlanError(f"cta_shares: grid must be an int in [1, {items}], got {grid!r}")
    order = mirrored(np.arange(items, dtype=np.int64), heads, q_tiles)
    rounds = max(items - tail_rounds(weights) * grid, 0) // (2 * grid)
    head = order[: 2 * grid * rounds].reshape(rounds, grid, 2).transpose(1, 0, 2)
    head = head.reshape(grid, 2 * rounds)
    tail = order[2 * grid * rounds :]
    tail = tail[np.argsort(-weights[tail], kind="stable")]  # heaviest first, else in order
    loads = [(int(weights[head[c]].sum()), c) for c in range(grid)]
    heapq.heapify(loads)
    extra: list[list[int]] = [[] for _ in range(grid)]
    for t in tail.tolist():
        load, c = heapq.heappop(loads)
        extra[c].append(t)
        heapq.heappush(loads, (load + int(weights[t]), c))
    return [np.concatenate([head[c], np.asarray(extra[c], dtype=np.int64)]) for c in range(grid)]


# --8<-- [end:shares]


def schedule_table(cfg: Any, lq: int, lk: int, heads: int, grid: int) -> np.ndarray:
    """The kernel's table (u32, module docstring) for ``cfg``'s tile at ``lq`` queries,
    ``lk`` keys and ``heads`` (batch, head)s over ``grid`` CTAs."""
    q_tiles = -(-lq // cfg.bm)
    shares = cta_shares(item_weights(cfg, lq, lk, heads), q_tiles, heads, grid)
    offsets = np.zeros(grid + 1, dtype=np.int64)
    np.cumsum([len(s) for s in shares], out=offsets[1:])
    return np.concatenate([offsets, *shares]).astype(np.uint32)
