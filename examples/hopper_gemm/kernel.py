"""A warp-specialized Hopper GEMM: D = alpha * A @ B, A (M, K) and B (N, K) K-contiguous (B is
the (K, N) matrix seen as (N, K), as in ``examples/gemm``), D (M, N) M-contiguous.

One CTA computes a ``bm x bn`` tile of D with three warpgroups:

- warpgroup 0, the *producer*, gives registers back (``setmaxnreg.dec 40``) and one of its
  threads streams A and B tiles (``bm x bk`` and ``bn x bk``) by TMA into a ring of
  ``stages`` shared buffers, each stage's bytes completing on its *full* mbarrier;
- warpgroups 1 and 2, the *consumers*, take registers (``setmaxnreg.inc 232``); consumer ``c``
  owns rows ``64c .. 64c+63`` of the tile: for each k-tile it waits on the stage, issues
  ``bk/16`` wgmma m64nBNk16 with both operands in shared memory (descriptors derived from the
  stage's tile layouts), waits for them and releases the stage (its *empty* mbarrier);
- the epilogue scales the accumulator fragment and stores it by ownership, bounded at the
  matrix edges. TMA fills the out-of-bounds parts of edge tiles with zeros.

The shared tiles are the 128-byte-swizzled K-major layout ``S<3,3,3> o (rows, 64):(64, 1)``
(bf16/f16), which TMA writes and wgmma reads: the plans prove both facts on the host.
"""

from __future__ import annotations

from dataclasses import dataclass

import tylo
from tylo.layouts import Layout
from tylo.nvgpu import tma
from tylo.nvgpu.mbarrier import Pipeline, PipelinePlan
from tylo.nvgpu.warpgroup.mma import (
    WarpgroupMMAAtom,
    commit_group,
    fence,
    mma_async,
    wait_group,
)
from tylo.nvgpu.warpgroup.roles import set_max_registers
from tylo.tile.access import store
from tylo.tile.fragment import zeros
from tylo.tile.views import GlobalTile, SharedTile

Dim = tylo.Int(min=1, max=2**31 - 1)
PRODUCER_REGISTERS = 40
CONSUMER_REGISTERS = 232
CONSUMERS = 2
THREADS = 128 * (1 + CONSUMERS)


# --8<-- [start:config]
@dataclass(frozen=True)
class HopperGemmConfig:
    """The tile (``bm`` = 64 rows per consumer warpgroup, ``bn`` columns, ``bk`` = 64: one
    128-byte swizzled row of bf16/f16), the ring depth and the input dtype."""

    bn: int = 128
    stages: int = 4
    dtype: object = tylo.bf16
    bk: int = 64

    @property
    def bm(self) -> int:
        return 64 * CONSUMERS

    def stage_elements(self) -> tuple[int, int]:
        return self.bm * self.bk, self.bn * self.bk

    def shared_bytes(self) -> int:
        a, b = self.stage_elements()
        return self.stages * (a + b) * self.dtype.nbytes

    def describe(self) -> str:
        return (
            f"{self.bm}x{self.bn}x{self.bk} tile, {self.stages} stages, {CONSUMERS} consumer "
            f"warpgroups + 1 producer, {self.shared_bytes() // 1024} KiB shared, {self.dtype}"
        )
# --8<-- [end:config]


# --8<-- [start:consumer]
@tylo.inline
def _consume(cfg, c, ta, tb, smem, pipe, k_tiles, d, m, n, ldd, alpha, row0, col0, tid):
    """Consumer warpgroup ``c`` (static): rows 64c.. of the tile, all of its columns."""
    a_elems, b_elems = cfg.stage_elements()
    atom = WarpgroupMMAAtom((64, cfg.bn, 16), cfg.dtype)
    acc = zeros(atom.c)
    for it in tylo.range(k_tiles):
        pipe.consumer_wait(it)
        base = pipe.stage(it) * (a_elems + b_elems)
        sa = SharedTile(smem, ta.plan.smem_layout, base=base).window((64 * c, 0), (64, cfg.bk))
        sb = SharedTile(smem, tb.plan.smem_layout, base=base + a_elems)
        fence()
        for kk in range(cfg.bk // 16):
            acc = mma_async(atom, sa, sb, acc, k_offset=16 * kk)
        commit_group()
        acc = wait_group(0, acc)
        pipe.consumer_release(it)
    D = GlobalTile(d, Layout((m, n), (1, ldd)))
    store(None, D, acc * alpha, tid - 128 * (1 + c), origin=(row0 + 64 * c, col0))
# --8<-- [end:consumer]


# --8<-- [start:kernel]
@tylo.kernel
def hopper_gemm_kernel(d, ta, tb, m: Dim, n: Dim, k: Dim, ldd: Dim, alpha: float, cfg: tylo.Static):
    a_elems, b_elems = cfg.stage_elements()
    smem = tylo.dynamic_shared(cfg.dtype, cfg.stages * (a_elems + b_elems), align=1024)
    pipe = Pipeline(PipelinePlan(stages=cfg.stages, consumers=128 * CONSUMERS))
    tid = tylo.thread_idx.x
    if tid == 0:
        pipe.init()
    tylo.sync_threads()
    row0 = tylo.block_idx.y * cfg.bm
    col0 = tylo.block_idx.x * cfg.bn
    k_tiles = (k + cfg.bk - 1) // cfg.bk
    wg = tid // 128
    if wg == 0:
        set_max_registers(PRODUCER_REGISTERS, increase=False)
        if tid == 0:
            for it in tylo.range(k_tiles):
                pipe.producer_acquire(it)
                pipe.producer_commit(it, tx_bytes=(a_elems + b_elems) * cfg.dtype.nbytes)
                s = pipe.stage(it)
                base = s * (a_elems + b_elems)
                sa = SharedTile(smem, ta.plan.smem_layout, base=base)
                sb = SharedTile(smem, tb.plan.smem_layout, base=base + a_elems)
                tma.load(ta, sa, (row0, it * cfg.bk), pipe.full, s)
                tma.load(tb, sb, (col0, it * cfg.bk), pipe.full, s)
    elif wg == 1:
        set_max_registers(CONSUMER_REGISTERS, increase=True)
        _consume(cfg, 0, ta, tb, smem, pipe, k_tiles, d, m, n, ldd, alpha, row0, col0, tid)
    else:
        set_max_registers(CONSUMER_REGISTERS, increase=True)
        _consume(cfg, 1, ta, tb, smem, pipe, k_tiles, d, m, n, ldd, alpha, row0, col0, tid)
# --8<-- [end:kernel]
