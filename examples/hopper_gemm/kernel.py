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
    """The tile (``bm`` = 64 * ``m_atoms`` rows per consumer warpgroup, ``bn`` columns,
    ``bk`` = 64: one 128-byte swizzled row of bf16/f16), the ring depth and the input dtype.
    With ``m_atoms = 2`` each consumer issues two independent wgmma chains per k-step."""

    bn: int = 128
    stages: int = 4
    dtype: object = tylo.bf16
    bk: int = 64
    m_atoms: int = 1

    def __post_init__(self) -> None:
        from tylo.nvgpu.errors import PlanError

        if self.m_atoms not in (1, 2) or self.bn not in (64, 128, 256):
            raise PlanError(f"HopperGemmConfig: m_atoms 1 or 2, bn 64/128/256; got {self}")
        if self.m_atoms * self.bn > 256:  # the accumulators: m_atoms * bn / 2 f32 per thread
            raise PlanError(
                f"HopperGemmConfig: {self.m_atoms} x {self.bn} columns of accumulators need "
                f"{self.m_atoms * self.bn // 2} registers per thread, over the 128 that leave "
                "room under setmaxnreg 232; use m_atoms * bn <= 256"
            )
        if self.shared_bytes() > 227 * 1024:
            raise PlanError(f"HopperGemmConfig: {self.shared_bytes()} B of shared memory > 227 KiB")

    @property
    def bm(self) -> int:
        return 64 * self.m_atoms * CONSUMERS

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
    """Consumer warpgroup ``c`` (static): its ``64 * m_atoms`` rows of the tile, all of
    its columns, one accumulator per 64-row block."""
    a_elems, b_elems = cfg.stage_elements()
    atom = WarpgroupMMAAtom((64, cfg.bn, 16), cfg.dtype)
    rows = 64 * cfg.m_atoms
    accs = tuple(zeros(atom.c) for _ in range(cfg.m_atoms))
    for it in tylo.range(k_tiles):
        pipe.consumer_wait(it)
        base = pipe.stage(it) * (a_elems + b_elems)
        sa = SharedTile(smem, ta.plan.smem_layout, base=base)
        sb = SharedTile(smem, tb.plan.smem_layout, base=base + a_elems)
        fence()
        pending = list(accs)
        for kk in range(cfg.bk // 16):
            for j in range(cfg.m_atoms):
                a_rows = sa.window((rows * c + 64 * j, 0), (64, cfg.bk))
                pending[j] = mma_async(atom, a_rows, sb, pending[j], k_offset=16 * kk)
        commit_group()
        done = wait_group(0, *pending)
        accs = done if cfg.m_atoms > 1 else (done,)
        pipe.consumer_release(it)
    D = GlobalTile(d, Layout((m, n), (1, ldd)))
    for j in range(cfg.m_atoms):
        origin = (row0 + rows * c + 64 * j, col0)
        store(None, D, accs[j] * alpha, tid - 128 * (1 + c), origin=origin)
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
