"""The warp-MMA GEMM: ``D = alpha * A @ B`` (optionally ReLU), bf16/f16 in, f32 out.

A is logically (M, K) stored K-contiguous (row stride ``lda``), B is logically (K, N) stored
K-contiguous (column stride ``ldb``; tylo sees it as the (N, K) tile the MMA's B operand
takes), D is (M, N) stored M-contiguous (column stride ``ldd``).

Three layers, each a few lines (``docs/gemm.md`` walks through them):

1. **Host planning** (:func:`gemm_config`): an MMA plan (atom, warps, repeats, K-tile),
   swizzled shared layouts for ``stages`` pipeline stages, and the two copy plans. Building
   them proves the copy destinations unique, contiguous and aligned, the ldmatrix rows
   contiguous and aligned, and counts bank conflicts; the result is a frozen, hashable
   configuration: the kernel's static argument.
2. **The pipeline** (:func:`prefetch_stage`, the main loop): ``stages - 1`` K-tiles are in
   flight (``cp.async`` groups); each iteration waits for the oldest, loads fragments with
   ``ldmatrix`` one k-step ahead of the ``mma.sync`` that uses them (register double
   buffering), and refills the stage freed by the previous iteration. One barrier per
   K-tile.
3. **The epilogue**: ``alpha * acc`` (and ReLU) on the accumulator fragment, stored by its
   ownership (guarded at the matrix edges), or staged through the idle pipeline shared
   memory and stored in 16-byte vectors along M (:mod:`tylo.ops.gemm.epilogue`).

Edge tiles run the same main loop: rows past M or N read the matrix's last row (they reach
only outputs that are never stored), and only the last, partial K-tile has its columns
checked and zero-filled. The host side (choosing a configuration, launching, packing
operands whose leading dimensions are not 16-byte multiples, verifying) is in
:mod:`tylo.ops.gemm.host`.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any

import tylo
from tylo.kernel import facts
from tylo.layouts import ComposedLayout, Layout, Swizzle, composition
from tylo.nvgpu.cpasync import CopyPlan, commit_copies, copy_async, wait_copies
from tylo.nvgpu.warp.ldmatrix import operand_loads
from tylo.nvgpu.warp.mma import (
    MMAAtom,
    PlanError,
    TiledMMA,
    load_operands,
    mma_atoms,
    size,
    zero_accumulator,
)
from tylo.ops.gemm.epilogue import StagedStore, staged_store
from tylo.ops.gemm.sass import sass_summary
from tylo.target import MAX_SHARED_BYTES
from tylo.tile.access import GlobalTile, SharedTile, store

__all__ = [
    "DEFAULT_EPILOGUE",
    "DEFAULT_PLAN",
    "DEFAULT_STAGES",
    "EPILOGUES",
    "SMALL_PLAN",
    "GemmConfig",
    "gemm_config",
    "prefetch_stage",
    "sass_summary",
    "tiled_gemm_kernel",
]

# pipeline depth of the large plan: 3 K-tiles in flight hide HBM latency (192 KiB of stages)
DEFAULT_STAGES = 4

# "direct": the accumulator stored by its ownership; "staged": through shared memory, in
# 16-byte vectors along M (needs ldd a multiple of 4 and a 16-byte aligned D)
EPILOGUES = ("direct", "staged")
DEFAULT_EPILOGUE = "staged"

# the seed's plan: 64 x 64 CTA tile, 4 warps of 32 x 32; used for element-wise copies
SMALL_PLAN = TiledMMA(MMAAtom((16, 8, 16), tylo.bf16), warps=(2, 2), repeat=(2, 4), k=32)

# runtime extents and leading dimensions: positive and below 2**31 (index math on them is
# 32-bit where the values allow, 64-bit where products need it)
Dim = tylo.Dim

# 128 x 256 CTA tile, 8 warps of 64 x 64 (128 f32 accumulators per thread), K-tile 64
DEFAULT_PLAN = TiledMMA(MMAAtom((16, 8, 16), tylo.bf16), warps=(2, 4), repeat=(4, 8), k=64)


def _shared_layout(rows: int, bk: int, stages: int, dtype: Any, swizzle: bool) -> Any:
    """(rows, K, stage) -> element offset: K-contiguous rows, stages one after another;
    swizzled so that 8 consecutive rows' 16-byte chunks fall in 8 different bank groups
    (``S<b,3,3>`` on element offsets: XOR the chunk index with row bits)."""
    inner = Layout((rows, bk, stages), (bk, 1, rows * bk))
    if not swizzle:
        return inner
    vec = 16 // dtype.nbytes
    chunks = bk // vec
    bits = min(3, int(math.log2(chunks))) if chunks > 1 else 0
    if bits == 0:
        return inner
    return composition(Swizzle(bits, int(math.log2(vec)), 3), inner)


@functools.lru_cache(maxsize=64)
def _staged_store(plan: TiledMMA) -> StagedStore:
    return StagedStore(plan)  # proved once, on the host (gemm_config)


def _stage_layout(layout: Any) -> Any:
    """The 2-D layout of one stage (the first two modes)."""
    if isinstance(layout, ComposedLayout):
        inner = layout.inner
        return composition(layout.outer, Layout(inner.shape[:2], inner.stride[:2]))
    return Layout(layout.shape[:2], layout.stride[:2])


@dataclass(frozen=True)
class GemmConfig:
    """The static configuration of :func:`tiled_gemm_kernel` (build it with
    :func:`gemm_config`). ``bounded``: handle partial tiles at the matrix edges;
    ``vector``: 16-byte copies (leading dimensions multiples of 8 elements, 16-byte aligned
    pointers; launches check); ``group_m``: tiles of this many rows of tiles are
    rasterized together (L2 reuse); ``epilogue``: one of :data:`EPILOGUES`."""

    plan: TiledMMA
    stages: int = 3
    swizzle: bool = True
    group_m: int = 8
    bounded: bool = True
    vector: bool = True
    epilogue: str = "direct"
    proofs: dict = field(default_factory=dict, compare=False, hash=False, repr=False)

    @property
    def dtype(self) -> Any:
        return self.plan.atom.dtype

    @property
    def tile(self) -> tuple[int, int, int]:
        return size(self.plan)

    @property
    def a_smem(self) -> Any:
        bm, _, bk = self.tile
        return _shared_layout(bm, bk, self.stages, self.dtype, self.swizzle)

    @property
    def b_smem(self) -> Any:
        _, bn, bk = self.tile
        return _shared_layout(bn, bk, self.stages, self.dtype, self.swizzle)

    @property
    def a_elements(self) -> int:
        bm, _, bk = self.tile
        return bm * bk * self.stages

    @property
    def b_elements(self) -> int:
        _, bn, bk = self.tile
        return bn * bk * self.stages

    @property
    def staged(self) -> StagedStore | None:
        """The staged epilogue's plan (None for the direct epilogue)."""
        return _staged_store(self.plan) if self.epilogue == "staged" else None

    @property
    def pipeline_bytes(self) -> int:
        """A stages, then B stages."""
        return (self.a_elements + self.b_elements) * self.dtype.nbytes

    @property
    def shared_bytes(self) -> int:
        """Dynamic shared memory per block: the pipeline's stages, which the staged
        epilogue reuses after the main loop (the larger of the two)."""
        st = self.staged
        return max(self.pipeline_bytes, st.shared_bytes if st else 0)

    @property
    def copy_a(self) -> CopyPlan:
        bm, _, bk = self.tile
        return CopyPlan((bm, bk), self.dtype, self.plan.threads, _stage_layout(self.a_smem))

    @property
    def copy_b(self) -> CopyPlan:
        _, bn, bk = self.tile
        return CopyPlan((bn, bk), self.dtype, self.plan.threads, _stage_layout(self.b_smem))

    def grid(self, m: int, n: int) -> int:
        bm, bn, _ = self.tile
        return -(-m // bm) * -(-n // bn)

    def tile_coords(self, pid: Any, m: Any, n: Any) -> tuple[Any, Any]:
        """(tile row, tile column) of block ``pid``: grouped rasterization, ``group_m``
        tile rows at a time, column-major within a group (works on ints and symbols)."""
        bm, bn, _ = self.tile
        grid_m = (m + bm - 1) // bm
        grid_n = (n + bn - 1) // bn
        if self.group_m <= 1:
            return pid % grid_m, pid // grid_m
        width = self.group_m * grid_n
        first = (pid // width) * self.group_m
        # sympy.Min(sympy.Max(...)), built exactly but faster (tylo.kernel.minmax)
        rows = facts.minimum(facts.maximum(grid_m - first, 1), self.group_m)
        return first + (pid % width) % rows, (pid % width) // rows

    def describe(self) -> str:
        bm, bn, bk = self.tile
        return (
            f"{bm}x{bn}x{bk} tile, {self.plan.warps[0]}x{self.plan.warps[1]} warps of "
            f"{self.plan.warp_tile[0]}x{self.plan.warp_tile[1]}, {self.stages} stages, "
            f"{'swizzled' if self.swizzle else 'plain'} smem, group_m {self.group_m}, "
            f"{'bounded' if self.bounded else 'full tiles'}, "
            f"{'16-byte' if self.vector else 'element-wise'} copies, "
            f"{self.epilogue} epilogue, {self.shared_bytes // 1024} KiB smem"
        )


# --8<-- [start:config]
def gemm_config(
    plan: TiledMMA = DEFAULT_PLAN,
    *,
    stages: int = 3,
    swizzle: bool = True,
    group_m: int = 8,
    bounded: bool = True,
    vector: bool = True,
    epilogue: str = "direct",
) -> GemmConfig:
    """Plan a GEMM on the host: shared layouts, copy plans and their proofs.

    >>> cfg = gemm_config(TiledMMA(MMAAtom((16, 8, 16), tylo.bf16), (2, 2), (2, 4), 32),
    ...                   stages=2)
    >>> cfg.tile, cfg.shared_bytes, cfg.proofs["A ldmatrix bank conflicts"]
    ((64, 64, 32), 16384, 0)
    """
    if not isinstance(plan, TiledMMA):
        raise PlanError(f"gemm_config: plan must be a TiledMMA, got {plan!r}")
    if type(stages) is not int or stages < 1:
        raise PlanError(f"gemm_config: stages must be an int >= 1, got {stages!r}")
    if type(group_m) is not int or group_m < 1:
        raise PlanError(f"gemm_config: group_m must be an int >= 1, got {group_m!r}")
    for name, flag in (("swizzle", swizzle), ("bounded", bounded), ("vector", vector)):
        if type(flag) is not bool:
            raise PlanError(f"gemm_config: {name} must be True or False, got {flag!r}")
    if epilogue not in EPILOGUES:
        raise PlanError(f"gemm_config: epilogue must be one of {EPILOGUES}, got {epilogue!r}")
    cfg = GemmConfig(plan, stages, swizzle, group_m, bounded, vector, epilogue)
    if cfg.shared_bytes > MAX_SHARED_BYTES:
        raise PlanError(
            f"gemm_config: {cfg.shared_bytes} bytes of shared memory exceed the "
            f"{MAX_SHARED_BYTES // 1024} KiB a block may use on any target; use fewer stages "
            "or a smaller tile"
        )
    proofs = cfg.proofs
    from tylo.layouts.proofs import prove_bounded

    for name, layout, span in (
        ("A", cfg.a_smem, cfg.a_elements),
        ("B", cfg.b_smem, cfg.b_elements),
    ):
        v = prove_bounded(layout, extent=span)
        if not v:
            raise PlanError(
                f"gemm_config: the {name} stages {layout} leave their shared span "
                f"of {span} elements: {v.reason}"
            )
        proofs[f"{name} stages within their {span * cfg.dtype.nbytes} shared bytes"] = v
    for name, cp in (("A", cfg.copy_a), ("B", cfg.copy_b)):
        for what, v in cp.proofs.items():
            proofs[f"{name} copy: {what}"] = v
        proofs[f"{name} cp.async bank conflicts"] = cp.bank_conflicts()
    for name, op, layout in (("A", "a", cfg.a_smem), ("B", "b", cfg.b_smem)):
        loads = operand_loads(plan, op)
        for what, v in loads.prove(_stage_layout(layout)).items():
            proofs[f"{name} {what}"] = v
        proofs[f"{name} ldmatrix bank conflicts"] = loads.bank_conflicts(_stage_layout(layout))
    for what, v in plan.proofs.items():
        proofs[f"MMA: {what}"] = v
    if vector:
        proofs.update(_source_proofs(cfg))
    if cfg.staged is not None:
        proofs.update({f"epilogue {k}": v for k, v in cfg.staged.proofs.items()})
    return cfg


# --8<-- [end:config]


def _source_proofs(cfg: GemmConfig) -> dict[str, Any]:
    """Global-side proofs over symbolic M, N, K and leading dimensions (multiples of 8)."""
    from tylo.layouts import dim

    bm, bn, bk = cfg.tile
    vec = 16 // cfg.dtype.nbytes
    out = {}
    for name, cp, rows in (("A", cfg.copy_a, bm), ("B", cfg.copy_b, bn)):
        ld = dim(f"ld{name.lower()}", multiple_of=vec)
        for what, v in cp.prove_source(Layout((rows, bk), (ld, 1))).items():
            out[f"{name} copy: {what} (ld{name.lower()} a multiple of {vec})"] = v
    return out


# --8<-- [start:prefetch]
@tylo.inline
def prefetch_stage(cfg, A, B, sa, sb, tid, m0, n0, k, kt, stage):
    """Issue (not commit) the cp.async copies of K-tile ``kt`` into pipeline ``stage``,
    if that K-tile exists."""
    bm, bn, bk = cfg.tile
    k0 = kt * bk
    if k0 < k:
        if not cfg.bounded:
            copy_async(cfg.copy_a, A.window((m0, k0), (bm, bk)), sa.select(2, stage), tid)
            copy_async(cfg.copy_b, B.window((n0, k0), (bn, bk)), sb.select(2, stage), tid)
        else:
            _copy_clamped(cfg, A, B, sa, sb, tid, m0, n0, k0, stage)


def _copy_clamped(cfg, A, B, sa, sb, tid, m0, n0, k0, stage):
    """The whole matrices plus the tile's origin; rows past M (N) read the last row."""
    copy_async(cfg.copy_a, A, sa.select(2, stage), tid, origin=(m0, k0), clamp_rows=True)
    copy_async(cfg.copy_b, B, sb.select(2, stage), tid, origin=(n0, k0), clamp_rows=True)


# --8<-- [end:prefetch]


# --8<-- [start:kernel]
@tylo.kernel
def tiled_gemm_kernel(
    cfg: tylo.Static,
    d,
    a,
    b,
    m: Dim,
    n: Dim,
    k: Dim,
    lda: Dim,
    ldb: Dim,
    ldd: Dim,
    alpha: float,
    relu: tylo.Static,
):
    # --8<-- [start:setup]
    plan = cfg.plan
    bm, bn, bk = size(plan)
    stages = cfg.stages
    if cfg.vector:  # 16-byte copies: stated here, checked at every launch
        a = tylo.assume_aligned(a, 16)
        b = tylo.assume_aligned(b, 16)
        tylo.assume(
            tylo.divisible(lda, 16 // a.dtype.nbytes), tylo.divisible(ldb, 16 // b.dtype.nbytes)
        )
    if not cfg.bounded:  # full tiles only
        tylo.assume(tylo.divisible(m, bm), tylo.divisible(n, bn), tylo.divisible(k, bk))
    if cfg.epilogue == "staged":  # 16-byte stores of D along M
        d = tylo.assume_aligned(d, 16)
        tylo.assume(tylo.divisible(ldd, 4))
    tid = tylo.thread_idx.x
    tm, tn = cfg.tile_coords(tylo.block_idx.x, m, n)
    m0, n0 = tm * bm, tn * bn
    A = GlobalTile(a, Layout((m, k), (lda, 1)))  # logical (M, K), K-contiguous
    B = GlobalTile(b, Layout((n, k), (ldb, 1)))  # logical (K, N) seen as (N, K)
    D = GlobalTile(d, Layout((m, n), (1, ldd)))  # M-contiguous
    sa = SharedTile(tylo.dynamic_shared(a.dtype, cfg.a_elements), cfg.a_smem)
    sb = SharedTile(
        tylo.dynamic_shared(b.dtype, cfg.b_elements, offset_bytes=cfg.a_elements * a.dtype.nbytes),
        cfg.b_smem,
    )
    if cfg.epilogue == "staged":  # reuses the pipeline's shared memory after the loop
        scratch = tylo.dynamic_shared(tylo.f32, cfg.staged.elements)
    k_tiles = (k + bk - 1) // bk
    acc = zero_accumulator(plan)
    # --8<-- [end:setup]
    # --8<-- [start:pipeline]
    if stages == 1:  # no overlap: copy, wait, multiply, repeat
        for kt in tylo.range(k_tiles):
            prefetch_stage(cfg, A, B, sa, sb, tid, m0, n0, k, kt, 0)
            commit_copies()
            wait_copies(0)
            tylo.sync_threads()
            for ks in range(plan.k_steps):
                fa, fb = load_operands(plan, sa.select(2, 0), sb.select(2, 0), tid, ks)
                acc = mma_atoms(plan, fa, fb, acc)
            tylo.sync_threads()
    else:
        for s in range(stages - 1):  # fill the pipeline: K-tiles 0 .. stages-2
            prefetch_stage(cfg, A, B, sa, sb, tid, m0, n0, k, s, s)
            commit_copies()
        wait_copies(stages - 2)
        tylo.sync_threads()
        fa, fb = load_operands(plan, sa.select(2, 0), sb.select(2, 0), tid, 0)
        for kt in tylo.range(k_tiles):
            read = kt % stages
            ahead = kt + stages - 1  # refills the stage every warp finished reading last iteration
            for ks in range(plan.k_steps):
                if ks == 0 and plan.k_steps == 1:  # (one k-step: refill before the wait)
                    prefetch_stage(cfg, A, B, sa, sb, tid, m0, n0, k, ahead, ahead % stages)
                    commit_copies()
                if ks == plan.k_steps - 1:  # K-tile kt+1 must have landed: wait, barrier
                    wait_copies(stages - 2)
                    tylo.sync_threads()
                    nxt = (kt + 1) % stages
                    fa2, fb2 = load_operands(plan, sa.select(2, nxt), sb.select(2, nxt), tid, 0)
                else:  # fragments one k-step ahead of the MMAs that use them
                    fa2, fb2 = load_operands(
                        plan, sa.select(2, read), sb.select(2, read), tid, ks + 1
                    )
                if ks == 0 and plan.k_steps > 1:  # after the loads: ldmatrix need not wait
                    prefetch_stage(cfg, A, B, sa, sb, tid, m0, n0, k, ahead, ahead % stages)
                    commit_copies()
                acc = mma_atoms(plan, fa, fb, acc)
                fa, fb = fa2, fb2
        wait_copies(0)
    # --8<-- [end:pipeline]
    # --8<-- [start:epilogue]
    out = acc * alpha  # the epilogue, on the fragment: ownership kept
    if relu:
        out = tylo.maximum(out, 0.0)
    if cfg.bounded and tylo.any_of(m0 + bm > m, n0 + bn > n):  # an edge tile
        store(plan, D, out, tid, origin=(m0, n0))  # guarded element stores
    elif cfg.epilogue == "staged":  # through shared memory: 16-byte stores along M
        staged_store(cfg.staged, D.window((m0, n0), (bm, bn)), out, tid, scratch)
    else:  # each element a thread holds, at its coordinate
        store(plan, D.window((m0, n0), (bm, bn)), out, tid)
    # --8<-- [end:epilogue]


# --8<-- [end:kernel]
