"""The K/V ring of the Hopper attention kernels (:mod:`tylo.ops.attention.hopper_kernel` and
:mod:`tylo.ops.attention.hopper_persistent`; walk-through: docs/attention_hopper.md, "Separate
K and V barriers"): a :class:`~tylo.nvgpu.mbarrier.Pipeline` of ``stages`` stages, stage
``s`` holding key tile K at element ``ring_offset + 2 s bn d`` and V ``bn d`` after it.

- By default a stage has one full barrier: the producer arms it with the K and V bytes
  together, and a consumer's wait before ``S = Q Kᵀ`` waits for both tiles.
- With ``split_kv`` (FlashAttention-3's separate barriers) the pipeline has two *parts*
  (``PipelinePlan(parts=2)``): part :data:`K`'s full barrier counts the K boxes' bytes,
  part :data:`V`'s the V boxes'; the producer arms and issues K first, then V. A consumer
  waits for K before issuing ``S = Q Kᵀ`` and for V only before issuing ``P V``, so S
  starts while V is still landing.

Without ``split_release`` one empty barrier per stage, released after ``P V`` (both tiles
read). With ``split_release`` (FlashAttention-3's separate K and V pipelines; it needs
``split_kv``) the empty barriers have parts too (``PipelinePlan(empty_parts=2)``): a consumer
releases K as soon as the ``wait_group`` that completes ``S = Q Kᵀ`` of its tile returned
(:func:`release_k`) and V where the stage is released otherwise, after ``P V``
(:func:`release_v`); the producer acquires K's part before arming and issuing K's boxes and
V's part before V's, so K of a later tile loads while this tile's ``P V`` still reads V. Both
parts' full barriers, and with ``split_release`` both parts' empty barriers, complete once
per use of the stage, so the parity of ring iteration ``it`` is the same for K and V:
``(it // stages) % 2``. The overlap schedule issues ``S`` of tile ``j``
and ``P V`` of tile ``j - 1`` back to back, so it waits for V of tile ``j - 1`` and K of tile
``j`` before both (the producer loaded that V before this K, so S rarely waits for it): it
still holds stage ``j - 1`` (its V, with ``split_release``), released only after that
``P V`` completes, so that stage's V barrier cannot move on to a later phase before the wait
(stages >= 2: checked by the config).
"""

from __future__ import annotations

from typing import Any

import tylo
from tylo.nvgpu import tma
from tylo.nvgpu.mbarrier import PipelinePlan
from tylo.tile.views import SharedTile

__all__ = [
    "K",
    "PARTS",
    "V",
    "load_kv_tile",
    "release_k",
    "release_v",
    "ring_plan",
    "wait_k",
    "wait_v",
]

BLOCK = 64  # columns of one 128-byte swizzled block of bf16/f16 (hopper_kernel.BLOCK)
K, V = 0, 1  # the parts of a stage with split_kv: K's full barriers, V's
PARTS = 2


def ring_plan(cfg: Any, consumers: int) -> PipelinePlan:
    """The ring's plan: ``cfg.stages`` stages released by ``consumers`` arrivals; K's and
    V's full barriers with ``split_kv``, and their empty barriers too with
    ``split_release``."""
    parts = PARTS if cfg.split_kv else 1
    empty = PARTS if cfg.split_release else 1
    return PipelinePlan(stages=cfg.stages, consumers=consumers, parts=parts, empty_parts=empty)


# --8<-- [start:ring]
def wait_k(cfg: Any, pipe: Any, it: Any) -> None:
    """Before ``S = Q Kᵀ`` of ring iteration ``it``: wait until its K tile has landed (without
    ``split_kv``: the whole stage, K and V)."""
    pipe.consumer_wait(it)  # part K (0): the stage's only full barrier without split_kv


def wait_v(cfg: Any, pipe: Any, it: Any) -> None:
    """Before ``P V`` of ring iteration ``it``: with ``split_kv`` wait until its V tile has
    landed; without, nothing (the stage's one full barrier was waited for before S)."""
    if cfg.split_kv:
        pipe.consumer_wait(it, part=V)


def release_k(cfg: Any, pipe: Any, it: Any) -> None:
    """Right after the ``wait_group`` that completed ``S = Q Kᵀ`` of ring iteration ``it``:
    with ``split_release`` release its K (the wgmma's reads of it are done); without,
    nothing (the stage is released whole by :func:`release_v`)."""
    if cfg.split_release:
        pipe.consumer_release(it, part=K)


def release_v(cfg: Any, pipe: Any, it: Any) -> None:
    """After the ``wait_group`` that completed ``P V`` of ring iteration ``it``: release its
    V (``split_release``), or its whole stage."""
    if cfg.split_release:
        pipe.consumer_release(it, part=V)
    else:
        pipe.consumer_release(it)


@tylo.inline
def load_kv_tile(cfg, smem, pipe, maps, it, key_tile, bh, bb):
    """The producer's ring iteration ``it``: wait until its stage is free, expect its bytes,
    and load key tile ``key_tile`` of K and V (head ``bh``, batch entry ``bb``) into it,
    one TMA box per 64-column block. With ``split_kv``: K's bytes on part K's full barrier,
    armed and issued first, then V's on part V's; with ``split_release`` each part waits
    for its own empty barrier first (K's freed after S, V's after P V)."""
    tk, tv = maps
    kv_elems = cfg.kv_elements()
    if not cfg.split_release:
        pipe.producer_acquire(it)
    if not cfg.split_kv:
        pipe.producer_commit(it, tx_bytes=2 * kv_elems * cfg.dtype.nbytes)
    s = pipe.stage(it)
    base = cfg.ring_offset() + s * 2 * kv_elems
    if not cfg.split_kv:
        for j in range(cfg.blocks):
            kt = SharedTile(smem, tk.plan.smem_layout, base=base + j * cfg.bn * BLOCK)
            vt = SharedTile(smem, tv.plan.smem_layout, base=base + kv_elems + j * cfg.bn * BLOCK)
            tma.load(tk, kt, (key_tile * cfg.bn, bh, bb, BLOCK * j), pipe.full, s)
            tma.load(tv, vt, (key_tile * cfg.bn, bh, bb, BLOCK * j), pipe.full, s)
    else:
        for part, tmap, at in ((K, tk, base), (V, tv, base + kv_elems)):
            if cfg.split_release:
                pipe.producer_acquire(it, part=part)
            pipe.producer_commit(it, tx_bytes=kv_elems * cfg.dtype.nbytes, part=part)
            for j in range(cfg.blocks):
                tile = SharedTile(smem, tmap.plan.smem_layout, base=at + j * cfg.bn * BLOCK)
                at_j = (key_tile * cfg.bn, bh, bb, BLOCK * j)
                tma.load(tmap, tile, at_j, pipe.fulls[part], s)


# --8<-- [end:ring]
