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
   ownership, bounded at the matrix edges.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sympy

import tylo
from examples.gemm.sass import sass_summary
from tylo.copy import CopyPlan, commit_copies, copy_async, wait_copies
from tylo.layouts import ComposedLayout, Layout, Swizzle, composition
from tylo.ldmatrix import operand_loads
from tylo.mma import MMAAtom, PlanError, TiledMMA, load_operands, mma_atoms, size, zero_accumulator
from tylo.tiles import GlobalTile, SharedTile, store

__all__ = [
    "DEFAULT_PLAN",
    "DEFAULT_STAGES",
    "SMALL_PLAN",
    "GemmConfig",
    "choose_config",
    "compile_gemm",
    "gemm",
    "gemm_config",
    "prefetch_stage",
    "reference",
    "sass_summary",
    "tiled_gemm_kernel",
    "verify",
]

# pipeline depth of the large plan: 3 K-tiles in flight hide HBM latency (96 KiB of stages)
DEFAULT_STAGES = 4

# the seed's plan: 64 x 64 CTA tile, 4 warps of 32 x 32; used for element-wise copies
SMALL_PLAN = TiledMMA(MMAAtom((16, 8, 16), tylo.bf16), warps=(2, 2), repeat=(2, 4), k=32)

# runtime extents and leading dimensions: positive and below 2**31 (index math on them is
# 32-bit where the values allow, 64-bit where products need it)
Dim = tylo.Int(min=1, max=2**31 - 1)

# 128 x 256 CTA tile, 8 warps of 64 x 64 (128 f32 accumulators per thread), K-tile 32
DEFAULT_PLAN = TiledMMA(MMAAtom((16, 8, 16), tylo.bf16), warps=(2, 4), repeat=(4, 8), k=32)


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
    rasterized together (L2 reuse)."""

    plan: TiledMMA
    stages: int = 3
    swizzle: bool = True
    group_m: int = 8
    bounded: bool = True
    vector: bool = True
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
    def shared_bytes(self) -> int:
        """Dynamic shared memory per block: A stages, then B stages."""
        return (self.a_elements + self.b_elements) * self.dtype.nbytes

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
        rows = sympy.Min(sympy.Max(grid_m - first, 1), self.group_m)
        return first + (pid % width) % rows, (pid % width) // rows

    def describe(self) -> str:
        bm, bn, bk = self.tile
        return (
            f"{bm}x{bn}x{bk} tile, {self.plan.warps[0]}x{self.plan.warps[1]} warps of "
            f"{self.plan.warp_tile[0]}x{self.plan.warp_tile[1]}, {self.stages} stages, "
            f"{'swizzled' if self.swizzle else 'plain'} smem, group_m {self.group_m}, "
            f"{'bounded' if self.bounded else 'full tiles'}, "
            f"{'16-byte' if self.vector else 'element-wise'} copies, "
            f"{self.shared_bytes // 1024} KiB smem"
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
) -> GemmConfig:
    """Plan a GEMM on the host: shared layouts, copy plans and their proofs.

    >>> cfg = gemm_config(TiledMMA(MMAAtom((16, 8, 16), tylo.bf16), (2, 2), (2, 4), 32),
    ...                   stages=2)
    >>> cfg.tile, cfg.shared_bytes, cfg.proofs["A ldmatrix bank conflicts"]
    ((64, 64, 32), 16384, 0)
    """
    if type(stages) is not int or stages < 1:
        raise PlanError(f"gemm_config: stages must be an int >= 1, got {stages!r}")
    cfg = GemmConfig(plan, stages, swizzle, group_m, bounded, vector)
    if cfg.shared_bytes > 227 * 1024:
        raise PlanError(
            f"gemm_config: {cfg.shared_bytes} bytes of shared memory exceed the "
            "227 KiB a block may use (sm_90); use fewer stages or a smaller tile"
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
def prefetch_stage(cfg, A, B, sa, sb, tid, m0, n0, kt, stage):
    """Issue (not commit) the cp.async copies of K-tile ``kt`` into pipeline ``stage``."""
    bm, bn, bk = cfg.tile
    k0 = kt * bk
    if cfg.bounded:  # the whole matrices plus the tile's origin: clipped, zero-filled
        copy_async(cfg.copy_a, A, sa.select(2, stage), tid, origin=(m0, k0))
        copy_async(cfg.copy_b, B, sb.select(2, stage), tid, origin=(n0, k0))
    else:
        copy_async(cfg.copy_a, A.window((m0, k0), (bm, bk)), sa.select(2, stage), tid)
        copy_async(cfg.copy_b, B.window((n0, k0), (bn, bk)), sb.select(2, stage), tid)


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
    k_tiles = (k + bk - 1) // bk
    acc = zero_accumulator(plan)
    # --8<-- [end:setup]
    # --8<-- [start:pipeline]
    if stages == 1:  # no overlap: copy, wait, multiply, repeat
        for kt in tylo.range(k_tiles):
            prefetch_stage(cfg, A, B, sa, sb, tid, m0, n0, kt, 0)
            commit_copies()
            wait_copies(0)
            tylo.sync_threads()
            for ks in range(plan.k_steps):
                fa, fb = load_operands(plan, sa.select(2, 0), sb.select(2, 0), tid, ks)
                acc = mma_atoms(plan, fa, fb, acc)
            tylo.sync_threads()
    else:
        for s in range(stages - 1):  # fill the pipeline: K-tiles 0 .. stages-2
            if s * bk < k:  # K-tile s exists
                prefetch_stage(cfg, A, B, sa, sb, tid, m0, n0, s, s)
            commit_copies()
        wait_copies(stages - 2)
        tylo.sync_threads()
        fa, fb = load_operands(plan, sa.select(2, 0), sb.select(2, 0), tid, 0)
        for kt in tylo.range(k_tiles):
            read = kt % stages
            for ks in range(plan.k_steps):
                if ks == 0:  # refill the stage every warp finished reading last iteration
                    ahead = kt + stages - 1
                    if ahead * bk < k:
                        prefetch_stage(cfg, A, B, sa, sb, tid, m0, n0, ahead, ahead % stages)
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
                acc = mma_atoms(plan, fa, fb, acc)
                fa, fb = fa2, fb2
        wait_copies(0)
    # --8<-- [end:pipeline]
    # --8<-- [start:epilogue]
    out = acc * alpha  # the epilogue, on the fragment: ownership kept
    if relu:
        out = tylo.maximum(out, 0.0)
    if cfg.bounded:
        store(plan, D, out, tid, origin=(m0, n0))
    else:
        store(plan, D.window((m0, n0), (bm, bn)), out, tid)
    # --8<-- [end:epilogue]


# --8<-- [end:kernel]


# ---------------------------------------------------------------------------- host


def choose_config(
    m: int,
    n: int,
    k: int,
    lda: int,
    ldb: int,
    aligned: bool = True,
    plan: TiledMMA | None = None,
    **kw: Any,
) -> GemmConfig:
    """The configuration for a problem: full tiles when M, N, K divide the tile, 16-byte
    copies when the leading dimensions and pointers allow. Element-wise copies (unaligned
    leading dimensions) use the smaller 64 x 64 plan, whose fewer loads per thread fit in
    registers beside the accumulators."""
    dtype = (plan or DEFAULT_PLAN).atom.dtype
    vec = 16 // dtype.nbytes
    vector = aligned and lda % vec == 0 and ldb % vec == 0
    if plan is None:
        base = DEFAULT_PLAN if vector else SMALL_PLAN
        plan = TiledMMA(MMAAtom(base.atom.shape, dtype), base.warps, base.repeat, base.k)
    bm, bn, bk = size(plan)
    full = m % bm == 0 and n % bn == 0 and k % bk == 0
    kw.setdefault("stages", DEFAULT_STAGES if plan.threads >= 256 else 3)
    return gemm_config(plan, bounded=not full, vector=vector, **kw)


def gemm(
    d: Any,
    a: Any,
    b: Any,
    m: int,
    n: int,
    k: int,
    lda: int,
    ldb: int,
    ldd: int,
    *,
    alpha: float = 1.0,
    relu: bool = False,
    cfg: GemmConfig | None = None,
    stream: Any = None,
) -> GemmConfig:
    """Launch ``D = alpha * A @ B`` (device arrays or pointers' owners: DeviceBuffer,
    torch, ...; see the module docstring for the storage); returns the configuration."""
    from tylo.arrays import as_device_array

    if cfg is None:
        pa, pb = as_device_array(a).ptr, as_device_array(b).ptr
        cfg = choose_config(m, n, k, lda, ldb, aligned=pa % 16 == 0 and pb % 16 == 0)
    tiled_gemm_kernel[cfg.grid(m, n), cfg.plan.threads](
        cfg,
        d,
        a,
        b,
        m,
        n,
        k,
        lda,
        ldb,
        ldd,
        float(alpha),
        relu,
        shared=cfg.shared_bytes,
        stream=stream,
    )
    return cfg


def compile_gemm(cfg: GemmConfig, target: Any = "sm_90a", relu: bool = False) -> Any:
    """Compile :func:`tiled_gemm_kernel` for ``cfg`` without a GPU."""
    d = cfg.dtype
    a_ptr = tylo.pointer(d, align=16) if cfg.vector else d
    return tiled_gemm_kernel.compile(
        cfg,
        tylo.pointer(tylo.f32),
        a_ptr,
        a_ptr,
        int,
        int,
        int,
        int,
        int,
        int,
        float,
        relu,
        block=cfg.plan.threads,
        target=target,
    )


def reference(a: np.ndarray, b: np.ndarray, alpha: float = 1.0, relu: bool = False) -> np.ndarray:
    """float64 ``alpha * a @ b`` (``a`` (M, K), ``b`` (K, N)), then ReLU."""
    out = alpha * (a.astype(np.float64) @ b.astype(np.float64))
    return np.maximum(out, 0.0) if relu else out


def _bf16_bits(x: np.ndarray) -> np.ndarray:
    """Round float32 to bfloat16 (nearest even), as uint16 bits."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def _bf16_value(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def _reference_on_device(a: np.ndarray, b: np.ndarray, alpha: float, relu: bool) -> Any:
    """float64 ``alpha * a @ b`` through torch on the GPU (large problems), or None."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    out = alpha * (torch.from_numpy(a).cuda().double() @ torch.from_numpy(b).cuda().double())
    return (out.clamp_min(0.0) if relu else out).cpu().numpy()


def verify(
    m: int,
    n: int,
    k: int,
    *,
    dtype: str = "bf16",
    alpha: float = 1.0,
    relu: bool = False,
    pad: tuple[int, int, int] = (0, 0, 0),
    seed: int | None = None,
    cfg: GemmConfig | None = None,
    use_torch: bool = False,
    tolerance: float = 1e-2,
) -> dict[str, Any]:
    """Run the GEMM on fresh random data (D poisoned with NaN first; leading dimensions
    padded by ``pad``) and compare with the float64 reference. Returns the relative error,
    the configuration and the seed; raises AssertionError when the error exceeds
    ``tolerance`` or any element was left unwritten."""
    import os

    if seed is None:
        seed = int.from_bytes(os.urandom(4), "little")
    rng = np.random.default_rng(seed)
    lda, ldb, ldd = k + pad[0], k + pad[1], m + pad[2]
    a32 = rng.standard_normal((m, lda)).astype(np.float32)
    b32 = rng.standard_normal((n, ldb)).astype(np.float32)  # B^T rows: (N, K) K-contiguous
    if dtype == "bf16":
        a_bits, b_bits = _bf16_bits(a32), _bf16_bits(b32)
        a_val, b_val = _bf16_value(a_bits), _bf16_value(b_bits)
        td = tylo.bf16
    elif dtype == "f16":
        a_bits = a32.astype(np.float16).view(np.uint16)
        b_bits = b32.astype(np.float16).view(np.uint16)
        a_val = a_bits.view(np.float16).astype(np.float32)
        b_val = b_bits.view(np.float16).astype(np.float32)
        td = tylo.f16
    else:
        raise ValueError(f"verify: dtype must be 'bf16' or 'f16', got {dtype!r}")
    av, bv = np.ascontiguousarray(a_val[:, :k]), np.ascontiguousarray(b_val[:, :k].T)
    ref = _reference_on_device(av, bv, alpha, relu) if m * n * k > 2**30 else None
    if ref is None:
        ref = reference(av, bv, alpha, relu)
    if use_torch:
        import torch

        tdt = torch.bfloat16 if dtype == "bf16" else torch.float16
        da = torch.from_numpy(a_bits.view(np.int16)).cuda().view(tdt)
        db = torch.from_numpy(b_bits.view(np.int16)).cuda().view(tdt)
        dd = torch.full((n, ldd), float("nan"), dtype=torch.float32, device="cuda")
        cfg = gemm(dd, da, db, m, n, k, lda, ldb, ldd, alpha=alpha, relu=relu, cfg=cfg)
        torch.cuda.synchronize()
        got = dd.cpu().numpy()
    else:
        from tylo.arrays import DeviceBuffer
        from tylo.backend import driver

        da = DeviceBuffer.from_numpy(a_bits, dtype=td)
        db = DeviceBuffer.from_numpy(b_bits, dtype=td)
        dd = DeviceBuffer.empty((n, ldd), tylo.f32).fill_bytes(0xFF)  # NaN poison
        cfg = gemm(dd, da, db, m, n, k, lda, ldb, ldd, alpha=alpha, relu=relu, cfg=cfg)
        driver.synchronize()
        got = dd.to_numpy()
    d = got[:, :m].T.astype(np.float64)  # (M, N)
    where = f"gemm {m}x{n}x{k} {dtype} seed {seed} ({cfg.describe()})"
    if not np.isfinite(d).all():
        bad = np.argwhere(~np.isfinite(d))
        raise AssertionError(
            f"{where}: {len(bad)} elements unwritten or not finite, first at {tuple(bad[0])}"
        )
    if pad[2] and not np.isnan(got[:, m:]).all():
        raise AssertionError(f"{where}: the padding of D (rows {m}..{ldd - 1}) was written")
    denom = np.linalg.norm(ref)
    err = float(np.linalg.norm(d - ref) / denom) if denom > 0 else float(np.abs(d).max())
    if not err <= tolerance:
        raise AssertionError(f"{where}: relative error {err:.3g} > {tolerance}")
    return {"error": err, "config": cfg, "seed": seed}
