"""Host side of the Hopper GEMM: tensor-map plans (proved), launch, routing, verification.

:func:`gemm` runs ``D = alpha * A @ B`` with A (M, K) and B (N, K) K-contiguous and D (M, N)
M-contiguous, as :mod:`tylo.ops.gemm`. The TMA path needs what the tensor memory accelerator
needs: K and both leading dimensions multiples of 8 elements (16 bytes) and 16-byte aligned
base addresses; other bf16/f16 operands are packed into aligned scratch rows first
(``tylo.ops.gemm.pack``), and what the kernel does not take at all (other dtypes, or more
than 2**31 packed elements) runs on the warp-MMA GEMM (``tylo.ops.gemm``). The TMA-store
epilogue (``HopperGemmConfig(tma_store=True)``) writes D by TMA where TMA can
(:func:`takes_tma_store`), and otherwise the same kernel stores from registers.
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache
from typing import Any

import numpy as np

import tylo
from tylo.arrays import array_key
from tylo.layouts import ComposedLayout, Layout, Swizzle, dim, size, zipped_divide
from tylo.nvgpu.errors import PlanError
from tylo.nvgpu.tma import TensorMap, TensorMapPlan
from tylo.ops.args import OpArgumentError, require_int
from tylo.ops.gemm.hopper_kernel import (
    EPILOGUE_BOX,
    OUT_DTYPES,
    STMATRIX_DTYPES,
    THREADS,
    HopperGemmConfig,
    hopper_gemm_kernel,
)
from tylo.remembered import Remembered

__all__ = [
    "c_plan",
    "check_extents",
    "chosen_config",
    "compile_hopper_gemm",
    "default_config",
    "gemm",
    "plans",
    "takes_tma_path",
    "takes_tma_store",
    "verify",
]


# --8<-- [start:plans]
@cache
def plans(cfg: HopperGemmConfig) -> tuple[TensorMapPlan, TensorMapPlan]:
    """The tensor maps of X and Y (B and A of the example): boxes of (bm, bk) and (bn, bk)
    over symbolic (R, K) and (S, K) matrices with 8-element-multiple leading dimensions,
    128-byte swizzled; each plan proves that the box's shared layout is the layout the
    kernel's wgmma reads. In a 2-CTA cluster each CTA loads half of the Y box (bn/2 rows,
    multicast to both), written as the first bn/2 rows of the same swizzled layout."""
    R, S, K = dim("R"), dim("S"), dim("K")
    ld = dim("ld", multiple_of=8)
    lx, ly = cfg.smem_layouts()
    half = cfg.bn // cfg.cluster
    if cfg.cluster > 1:
        ly = ComposedLayout(ly.outer, 0, Layout((half, cfg.bk), (cfg.bk, 1)))
    px = TensorMapPlan(cfg.dtype, Layout((R, K), (ld, 1)), (cfg.bm, cfg.bk), "128B", lx)
    py = TensorMapPlan(cfg.dtype, Layout((S, K), (ld, 1)), (half, cfg.bk), "128B", ly)
    return px, py


@cache
def c_plan(cfg: HopperGemmConfig) -> TensorMapPlan | None:
    """The tensor map of C for the TMA-store epilogue (None without ``cfg.tma_store``):
    boxes of (64 m_atoms, 64) over a symbolic (R, S) row-major C whose leading dimension is a
    multiple of 8 elements, 128-byte swizzled. The box's shared layout is taken from the
    buffer the consumer's stmatrix writes (``cfg.epilogue_layout()``), divided into boxes:
    the plan proves the first box is the layout TMA reads, and box ``b`` starts
    ``b * cfg.box_elements`` further on (where the kernel stores it from), a multiple of the
    swizzle's period, where the swizzle acts as on the first box; so each TMA store reads
    exactly the tile's columns ``64 b ..``."""
    if not cfg.tma_store:
        return None
    rows = 64 * cfg.m_atoms
    tiles = zipped_divide(cfg.epilogue_layout(), (rows, EPILOGUE_BOX))
    box = tiles[0]  # ((rows, 64), boxes): the first box, and where each box starts
    swizzled = isinstance(tiles, ComposedLayout)
    rest = tiles.inner[1] if swizzled else tiles[1]
    period = tiles.outer.size() if swizzled and isinstance(tiles.outer, Swizzle) else 1
    offsets = [rest(i) for i in range(size(rest))]
    if offsets != [b * cfg.box_elements for b in range(len(offsets))] or any(
        o % period for o in offsets
    ):
        raise PlanError(
            f"hopper_gemm c_plan: the epilogue buffer {cfg.epilogue_layout()} puts its "
            f"{EPILOGUE_BOX}-column boxes at {offsets}, not at multiples of {cfg.box_elements} "
            f"(each a multiple of the swizzle's period {period}) where the kernel stores them"
        )
    R, S, ldc = dim("R"), dim("S"), dim("ldc", multiple_of=8)
    return TensorMapPlan(cfg.out, Layout((R, S), (ldc, 1)), (rows, EPILOGUE_BOX), "128B", box)


# --8<-- [end:plans]


def compile_hopper_gemm(cfg: HopperGemmConfig, target: Any = "sm_90a") -> Any:
    """Compile (no GPU needed) the kernel for ``cfg``."""
    px, py = plans(cfg)
    return hopper_gemm_kernel.compile(
        cfg.out,
        px,
        py,
        c_plan(cfg),
        int,
        int,
        int,
        int,
        float,
        cfg,
        block=THREADS,
        target=target,
        **({"cluster": (cfg.cluster, 1, 1)} if cfg.cluster > 1 else {}),
    )


def takes_tma_path(
    m: int,
    n: int,
    k: int,
    lda: int,
    ldb: int,
    a: Any,
    b: Any,
    d: Any = None,
    ldd: int | None = None,
) -> bool:
    """Whether TMA can read these operands as they are (else :func:`gemm` packs them, or
    runs the warp-MMA path): K and both leading dimensions multiples of 8 elements, 16-byte
    aligned bases, bf16/f16 inputs of one dtype, and D (when given) f32, bf16 or f16."""
    from tylo.arrays import as_device_array

    for name, x in (("m", m), ("n", n), ("k", k), ("lda", lda), ("ldb", ldb)):
        require_int("takes_tma_path", name, x)
    da, db = as_device_array(a), as_device_array(b)
    ok = (
        k % 8 == 0
        and lda % 8 == 0
        and ldb % 8 == 0
        and da.ptr % 16 == 0
        and db.ptr % 16 == 0
        and da.dtype in (tylo.bf16, tylo.f16)
        and da.dtype is db.dtype
    )
    if ok and d is not None:
        ok = as_device_array(d).dtype.name in OUT_DTYPES
    return ok


def takes_tma_store(d: Any, m: int, ldd: int) -> bool:
    """Whether TMA can write D (M-contiguous, leading dimension ``ldd``; the kernel's C,
    (N, M) row-major) for the TMA-store epilogue: bf16 or f16, rows of ``ldd`` elements a
    multiple of 16 bytes from a 16-byte aligned base, and M a multiple of 16 bytes too (TMA
    moves whole 16-byte units along the contiguous dimension, see ``TensorMapPlan.encode``).
    Where not, :func:`gemm` runs the same problem with the register epilogue."""
    from tylo.arrays import as_device_array

    dd = as_device_array(d)
    if dd.dtype.name not in STMATRIX_DTYPES:
        return False
    unit = 16 // dd.dtype.nbytes
    return m % unit == 0 and ldd % unit == 0 and dd.ptr % 16 == 0


@cache
def _sm_count(device: int) -> int:
    from tylo.backend.device import device_properties

    return device_properties(device).sm_count


# --8<-- [start:default]
SMALL_K = 512  # at most this K (8 k-tiles per tile), ping-pong beats cooperative tiles


def default_config(
    dtype: Any = tylo.bf16, *, tma_store: bool = True, k: int | None = None
) -> HopperGemmConfig:
    """The configuration :func:`gemm` uses unless given one. Where TMA can write D
    (``tma_store``, see :func:`takes_tma_store`) and K is over ``SMALL_K``: cooperative
    consumers on a 128x256 tile (each a 64x256 accumulator: m64n256 wgmma, the fewest
    operand bytes per FLOP), a 3-stage ring and the TMA-store epilogue, whose two 64x256
    buffers take the fourth stage's shared memory. Otherwise ping-pong consumers, each on its
    own 128x128 tile (two m64n128 accumulators), with a 5-stage ring: one consumer's epilogue
    overlaps the other's MMAs, which pays where tiles are short (K up to ``SMALL_K``) or the
    epilogue is the register one (an f32 D, or rows TMA cannot write). All walk raster bands
    of 16 tile-rows (docs/hopper.md, "Measured")."""
    if type(tma_store) is not bool:
        raise PlanError(f"default_config: tma_store must be a bool, got {tma_store!r}")
    if k is not None and (type(k) is not int or k < 1):
        raise PlanError(f"default_config: k must be a positive int or None, got {k!r}")
    if tma_store and (k is None or k > SMALL_K):
        return HopperGemmConfig(
            bn=256, m_atoms=1, stages=3, group=16, dtype=dtype, out=tylo.bf16, tma_store=True
        )
    return HopperGemmConfig(
        bn=128,
        m_atoms=2,
        pingpong=True,
        stages=5,
        group=16,
        dtype=dtype,
        **({"out": tylo.bf16, "tma_store": True} if tma_store else {}),
    )


# --8<-- [end:default]


@cache
def _resident_clusters(cfg: HopperGemmConfig, device: int) -> int:
    """How many CTAs (clusters of ``cfg.cluster``) of the kernel run at once: one per SM
    without clusters; with them, what the driver says fits (GPCs need not hold a whole
    number of clusters, so a persistent grid of ``SMs / 2`` clusters could leave some
    for a second wave)."""
    if cfg.cluster == 1:
        return _sm_count(device)
    from tylo.backend.launchex import max_active_clusters

    fn = compile_hopper_gemm(cfg).function(device)
    return max_active_clusters(fn, THREADS, (cfg.cluster, 1, 1), cfg.shared_bytes())


def _span(arr: Any) -> int | None:
    """Elements addressable from ``arr``'s base as its shape and strides describe it (the
    last element's offset + 1), or None when a stride is negative (nothing to read forward)."""
    if any(st < 0 for st, n in zip(arr.strides, arr.shape) if n > 1):
        return None
    if any(n == 0 for n in arr.shape):
        return 0
    return 1 + sum((n - 1) * st for n, st in zip(arr.shape, arr.strides))


def check_extents(
    d: Any, a: Any, b: Any, m: int, n: int, k: int, lda: int, ldb: int, ldd: int
) -> None:
    """Refuse operands on different devices, a D that shares memory with A or B, and
    operands smaller than the problem says: A must hold ``(m-1)*lda + k``
    elements from its base, B ``(n-1)*ldb + k``, D ``(n-1)*ldd + m`` (as far as each array's
    shape and strides describe it). TMA reads through a tensor map, which knows nothing of
    the array's size: without this, a small array would be read past its end.

    >>> from tylo.arrays import DeviceArray
    >>> a = DeviceArray(4096, (64, 64), (64, 1), tylo.bf16, 0)
    >>> d = DeviceArray(1 << 20, (64, 64), (64, 1), tylo.bf16, 0)
    >>> check_extents(d, a, a, 64, 64, 64, 64, 64, 64)
    >>> check_extents(d, a, a, 64, 64, 64, 128, 64, 64)
    Traceback (most recent call last):
    ...
    tylo.nvgpu.errors.PlanError: hopper_gemm: A holds 4096 elements from its base ... need 8128
    >>> check_extents(a, a, d, 64, 64, 64, 64, 64, 64)
    Traceback (most recent call last):
    ...
    tylo.nvgpu.errors.PlanError: hopper_gemm: D and A share memory; ... give D memory of its own
    """
    from tylo.arrays import as_device_array, device_clash
    from tylo.ops.gemm.host import check_output

    for name, x in (("m", m), ("n", n), ("k", k), ("lda", lda), ("ldb", ldb), ("ldd", ldd)):
        require_int("hopper_gemm", name, x)
    check_output("hopper_gemm", d)
    operands = (("A", a), ("B", b), ("D", d))
    where = device_clash((name, as_device_array(x).device) for name, x in operands)
    if where is not None:  # early: A and B go by tensor maps (the launcher checks them too)
        raise PlanError(
            f"hopper_gemm: the operands live on different devices ({where}); copy them to "
            "one device first"
        )
    for name, arr, rows, cols, ld, what, ld_name in (
        ("A", a, m, k, lda, "K", "lda"),
        ("B", b, n, k, ldb, "K", "ldb"),
        ("D", d, n, m, ldd, "M", "ldd"),
    ):
        da = as_device_array(arr)
        if min(rows, cols, ld) < 1 or ld < cols:
            raise PlanError(
                f"hopper_gemm: {name} is {rows} rows of {what} = {cols} with leading dimension "
                f"{ld}: sizes must be >= 1 and the leading dimension >= {what}"
            )
        need = (rows - 1) * ld + cols
        span = _span(da)
        if span is None or span < need:
            held = "no forward extent (a negative stride)" if span is None else f"{span} elements"
            raise PlanError(
                f"hopper_gemm: {name} holds {held} from its base (shape {tuple(da.shape)}, "
                f"strides {tuple(da.strides)}); {rows} rows of {what} = {cols}, "
                f"{ld_name} = {ld} need {need}"
            )
    from tylo.ops.gemm.host import refuse_shared_memory

    refuse_shared_memory("hopper_gemm", d, a, b)


# launch key -> ("warp",) or (path, cfg, X, Y, C maps, grid, packing)
_PREPARED = Remembered(64)


def _prepare(d, a, b, m, n, k, lda, ldb, ldd, relu, cfg) -> tuple:
    from tylo.arrays import DeviceArray, as_device_array
    from tylo.ops.gemm.host import _scratch
    from tylo.ops.gemm.pack import packed_ld

    da, db, dd = as_device_array(a), as_device_array(b), as_device_array(d)
    typed = (
        da.dtype in (tylo.bf16, tylo.f16) and da.dtype is db.dtype and dd.dtype.name in OUT_DTYPES
    )
    ldp = packed_ld(k)
    direct = typed and takes_tma_path(m, n, k, lda, ldb, a, b)
    if not typed or (not direct and max(m, n) * ldp >= 2**31):
        return ("warp",)
    packing = None
    if not direct:
        # TMA reads 16-byte rows from 16-byte aligned bases: copy A and B into scratch rows
        # of ldp elements (K rounded up to 8, zero-filled), which contribute nothing. The
        # entry keeps its buffers alive (the scratch cache may replace them later).
        key = (da.device, "hopper")
        pa = _scratch(("a", *key), m * ldp, da.dtype, da.device)
        pb = _scratch(("b", *key), n * ldp, db.dtype, db.device)
        packing = (pa, pb, ldp)
        da, db = as_device_array(pa), as_device_array(pb)
        k, lda, ldb = ldp, ldp, ldp
    cfg = cfg or default_config(da.dtype, tma_store=takes_tma_store(d, m, ldd), k=k)
    # pair stores where D's rows and base allow them (else element stores everywhere); the
    # TMA-store epilogue where asked for and TMA can write D (else the stores by ownership)
    pairs = ldd % 2 == 0 and dd.ptr % (2 * dd.dtype.nbytes) == 0
    tma_store = cfg.tma_store and takes_tma_store(d, m, ldd)
    want = (da.dtype, dd.dtype, bool(relu), pairs, tma_store)
    if (cfg.dtype, cfg.out, cfg.relu, cfg.pairs, cfg.tma_store) != want:
        cfg = replace(
            cfg, dtype=da.dtype, out=dd.dtype, relu=bool(relu), pairs=pairs, tma_store=tma_store
        )
    px, py = plans(cfg)
    pc = c_plan(cfg)
    # D = A B^T computed as D^T = B A^T: X = B (N, K), Y = A (M, K), C = D as (N, M) row-major.
    # The maps hold addresses only (no reference to the arrays: a cached map outliving its
    # array is never used for another, since the key holds the address, shape and strides)
    bx = DeviceArray(db.ptr, (n, k), (ldb, 1), db.dtype, db.device)
    ay = DeviceArray(da.ptr, (m, k), (lda, 1), da.dtype, da.device)
    tmc = (
        None
        if pc is None
        else TensorMap(pc, DeviceArray(dd.ptr, (n, m), (ldd, 1), dd.dtype, dd.device))
    )
    units = -(-n // (cfg.bm * cfg.cluster)) * -(-m // cfg.bn)  # one unit per cluster
    clusters = min(units, _resident_clusters(cfg, dd.device))
    if clusters < 1:  # a device that reports no SM, or no cluster of cfg fits
        raise PlanError(
            f"hopper_gemm: no CTA (cluster of {cfg.cluster}) of {cfg} fits on device "
            f"{dd.device}; use a smaller cluster or fewer stages"
        )
    grid = (clusters * cfg.cluster,)
    path = "hopper" if packing is None else "hopper-packed"
    return (path, cfg, TensorMap(px, bx), TensorMap(py, ay), tmc, grid, packing)


def _prepared(d, a, b, m, n, k, lda, ldb, ldd, relu, cfg) -> tuple:
    """The (remembered) launch preparation of these arguments and the key it is kept by."""
    if cfg is not None and not isinstance(cfg, HopperGemmConfig):
        raise OpArgumentError(f"hopper_gemm: cfg must be a HopperGemmConfig (or None), got {cfg!r}")
    key = (array_key(d), array_key(a), array_key(b), m, n, k, lda, ldb, ldd, bool(relu), cfg)

    def make() -> tuple:
        check_extents(d, a, b, m, n, k, lda, ldb, ldd)
        return _prepare(d, a, b, m, n, k, lda, ldb, ldd, relu, cfg)

    return key, _PREPARED.get(key, make)


def chosen_config(d, a, b, m, n, k, lda, ldb, ldd, *, relu=False, cfg=None) -> Any:
    """The :class:`HopperGemmConfig` that :func:`gemm` with these arguments runs (its
    choice, or ``cfg`` adapted to the arguments: dtypes, ReLU, pair stores, TMA store), or
    None where it takes the warp-MMA path. No GPU work: the same remembered preparation."""
    from tylo.ops.gemm.host import check_call

    (m, n, k, lda, ldb, ldd), _, relu = check_call("hopper_gemm", m, n, k, lda, ldb, ldd, 1.0, relu)
    prep = _prepared(d, a, b, m, n, k, lda, ldb, ldd, relu, cfg)[1]
    return None if prep[0] == "warp" else prep[1]


def gemm(d, a, b, m, n, k, lda, ldb, ldd, *, alpha=1.0, relu=False, cfg=None, stream=None) -> str:
    """Launch ``D = alpha * A @ B`` (``relu=True``: ``max(., 0)``); D is f32, bf16 or f16.
    Returns which path ran: 'hopper', 'hopper-packed' (A and B copied into aligned rows
    first, for K or leading dimensions that are not multiples of 8 or misaligned bases) or
    'warp' (the warp-MMA GEMM, for what the Hopper kernel does not take). ``cfg`` (default:
    :func:`default_config`) gives the tile and schedule; the dtypes, ReLU, pair stores and
    the TMA-store epilogue (``cfg.tma_store`` where :func:`takes_tma_store`) follow the
    arguments. The preparation (routing, tile choice, tensor maps) is remembered for the
    last 64 argument combinations. The arguments are checked as
    :func:`tylo.ops.gemm.host.check_call` says (sizes integers >= 1, ``alpha`` finite in
    f32: ``|alpha| <= 3.4028235e38``, ``relu`` a bool, D without zero or negative strides;
    :class:`~tylo.ops.args.OpArgumentError`); ``cfg`` must be a :class:`HopperGemmConfig`
    or None."""
    from tylo.ops.gemm.host import check_call

    (m, n, k, lda, ldb, ldd), alpha, relu = check_call(
        "hopper_gemm", m, n, k, lda, ldb, ldd, alpha, relu
    )
    key, prep = _prepared(d, a, b, m, n, k, lda, ldb, ldd, relu, cfg)
    if prep[0] == "warp":
        from tylo.ops.gemm.host import gemm as warp_gemm

        warp_gemm(d, a, b, m, n, k, lda, ldb, ldd, alpha=alpha, relu=relu, stream=stream)
        return "warp"
    path, cfg, tmx, tmy, tmc, grid, packing = prep
    if packing is not None:
        from tylo.ops.gemm.pack import pack_rows

        pa, pb, k = packing
        pack_rows(pa, a, m, key[5], lda, stream=stream)
        pack_rows(pb, b, n, key[5], ldb, stream=stream)
    launch = (
        hopper_gemm_kernel[grid, THREADS]
        if cfg.cluster == 1
        else hopper_gemm_kernel[grid, THREADS, (cfg.cluster, 1, 1)]
    )
    launch(
        d, tmx, tmy, tmc, n, m, k, ldd, float(alpha), cfg, shared=cfg.shared_bytes(), stream=stream
    )
    return path


def verify(
    m, n, k, *, dtype="bf16", out="f32", alpha=1.0, relu=False, seed=None, cfg=None, tolerance=1e-2
) -> dict:
    """Run on fresh random data (D poisoned with NaN first) and compare with float64; raises
    AssertionError beyond ``tolerance`` (relative, max-norm). ``out``: D's dtype. Returns the
    error, the path, and the configuration that ran (``cfg``: None on the warp path)."""
    import torch

    g = torch.Generator(device="cuda")
    g.manual_seed(seed if seed is not None else int(np.random.default_rng().integers(2**31)))
    tdt = {"bf16": torch.bfloat16, "f16": torch.float16}[dtype]
    odt = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}[out]
    a = torch.randn(m, k, device="cuda", generator=g).to(tdt)
    b = torch.randn(n, k, device="cuda", generator=g).to(tdt)
    d = torch.full((n, m), float("nan"), device="cuda", dtype=odt)  # (M, N) M-contiguous
    path = gemm(d, a, b, m, n, k, k, k, m, alpha=alpha, relu=relu, cfg=cfg)
    torch.cuda.synchronize()
    want = alpha * (a.double().cpu().numpy() @ b.double().cpu().numpy().T)
    if relu:
        want = np.maximum(want, 0.0)
    got = d.double().cpu().numpy().T
    scale = max(np.abs(want).max(), 1e-30)
    err = float(np.nanmax(np.abs(got - want)) / scale) if np.isfinite(got).all() else float("inf")
    if not err <= tolerance:
        raise AssertionError(f"hopper_gemm {m}x{n}x{k} ({path}): relative error {err:.3g}")
    ran = chosen_config(d, a, b, m, n, k, k, k, m, relu=relu, cfg=cfg)
    return {"error": err, "path": path, "cfg": ran}
