"""The Hopper attention forward's tensor maps and compiling: the plans of Q, K, V (and O for
the TMA-store epilogue), each proving its box's shared layout is the one the kernel reads,
and :func:`compile_hopper_attention` for a target without a GPU.
Launching is :mod:`tylo.ops.attention.hopper_host`."""

from __future__ import annotations

from functools import cache
from typing import Any

import tylo
from tylo.layouts import Layout, Swizzle, dim, size, zipped_divide
from tylo.nvgpu.errors import PlanError
from tylo.nvgpu.tma import TensorMapPlan
from tylo.ops.attention.hopper_epilogue import staging_layout
from tylo.ops.attention.hopper_kernel import (
    BLOCK,
    HopperAttentionConfig,
    box_layout,
    hopper_attention_kernel,
)
from tylo.ops.attention.hopper_persistent import hopper_attention_persistent_kernel
from tylo.ops.attention.reference import (
    AttentionInputError,
)

__all__ = [
    "compile_hopper_attention",
    "o_plan",
    "plans",
]


# --8<-- [start:plans]
@cache
def plans(cfg: HopperAttentionConfig) -> tuple[TensorMapPlan, TensorMapPlan, TensorMapPlan]:
    """The tensor maps of Q, K and V: 4-D over symbolic extents and strides (16-byte
    multiples), with the modes (L, H, B, D) so that TMA's dimensions (the contiguous one
    first, then the others in mode order) are D, L, H, B as in a contiguous (B, H, L, D)
    tensor; boxes of (rows, 64) columns of one (h, b), 128-byte swizzled. Each plan proves that
    the box's shared layout is the (rows, 64) block the kernel's wgmma reads; a box past the
    sequence's end is zero-filled (never the next head's rows)."""
    B, H, Lq, Lk = dim("B"), dim("H"), dim("Lq"), dim("Lk")
    sb, sh, sl = (dim(n, multiple_of=8) for n in ("sb", "sh", "sl"))
    out = []
    for rows, length in ((cfg.bm, Lq), (cfg.bn, Lk), (cfg.bn, Lk)):
        glob = Layout((length, H, B, cfg.d), (sl, sh, sb, 1))
        box = (rows, 1, 1, 64)
        out.append(TensorMapPlan(cfg.dtype, glob, box, "128B", box_layout(rows, cfg.dtype)))
    return out[0], out[1], out[2]


# --8<-- [end:plans]


# --8<-- [start:o_plan]
@cache
def o_plan(cfg: HopperAttentionConfig) -> TensorMapPlan | None:
    """The tensor map of O for the TMA-store epilogue (None without ``cfg.tma_store``): 4-D
    (L, H, B, D) over symbolic extents and 16-byte-multiple strides as Q's, boxes of 64 rows
    x 64 columns of one (h, b), 128-byte swizzled. The box's shared layout is derived from
    the staging layout the consumer's ``stmatrix`` writes (``staging_layout(cfg)``), divided
    into 64 x 64 blocks: block ``j`` must start at ``j * bm * 64`` elements (where the kernel
    stores it from), a multiple of the swizzle's period (so the swizzle acts on it as on the
    first block), and the first block must equal, at every coordinate, the box layout of
    Q's plan at 64 rows (unit H and B modes); the plan then proves that box layout is what
    TMA reads for the box. So each TMA store reads exactly the block's 64 columns."""
    if not cfg.tma_store:
        return None
    stage = staging_layout(cfg)
    tiles = zipped_divide(stage, (64, BLOCK))
    first, rest = tiles[0], tiles.inner[1]
    period = tiles.outer.size() if isinstance(tiles.outer, Swizzle) else 1
    offsets = [rest(i) for i in range(size(rest))]
    want = [j * cfg.bm * BLOCK for j in range(cfg.blocks)]
    box = box_layout(64, cfg.dtype)
    same = all(first((r, x)) == box((r, 0, 0, x)) for r in range(64) for x in range(BLOCK))
    if offsets != want or any(o % period for o in offsets) or not same:
        raise PlanError(
            f"hopper_attention o_plan: the staging layout {stage} puts its {BLOCK}-column "
            f"blocks at {offsets} (want {want}, multiples of the swizzle's period {period}) "
            f"and its first block {'is' if same else 'is not'} the box layout {box}"
        )
    B, H, Lq = dim("B"), dim("H"), dim("Lq")
    sb, sh, sl = (dim(n, multiple_of=8) for n in ("sb", "sh", "sl"))
    glob = Layout((Lq, H, B, cfg.d), (sl, sh, sb, 1))
    return TensorMapPlan(cfg.dtype, glob, (64, 1, 1, BLOCK), "128B", box)


# --8<-- [end:o_plan]


def compile_hopper_attention(cfg: HopperAttentionConfig, target: Any = "sm_90a") -> Any:
    """Compile (no GPU needed) the kernel for ``cfg``; returns the compiled kernel (its
    ``ptx``, ``sass``...)."""
    if not isinstance(cfg, HopperAttentionConfig):
        raise AttentionInputError(
            f"compile_hopper_attention: expected a HopperAttentionConfig, got {cfg!r}"
        )
    pq, pk, pv = plans(cfg)
    po = o_plan(cfg)
    if cfg.persistent:  # the schedule table (u32) and the number of heads
        return hopper_attention_persistent_kernel.compile(
            cfg.dtype,
            tylo.f32,
            pq,
            pk,
            pv,
            po,
            tylo.i32,
            tylo.u32,
            int,
            int,
            int,
            int,
            int,
            int,
            int,
            int,
            float,
            cfg,
            block=cfg.threads,
            target=target,
        )
    return hopper_attention_kernel.compile(
        cfg.dtype,
        tylo.f32,
        pq,
        pk,
        pv,
        po,
        tylo.i32,
        int,
        int,
        int,
        int,
        int,
        int,
        int,
        float,
        cfg,
        block=cfg.threads,
        target=target,
    )
