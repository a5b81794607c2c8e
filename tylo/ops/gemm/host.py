"""The GEMM's host side: choosing a configuration, launching, packing, verifying.

:func:`gemm` picks the configuration for a problem (:func:`choose_config`) and launches
:func:`~tylo.ops.gemm.kernel.tiled_gemm_kernel`. Three paths, by what the operands allow:

- **aligned** (``lda`` and ``ldb`` multiples of 8 elements, 16-byte aligned pointers):
  16-byte ``cp.async`` copies, the large plan; full-tile kernel when M, N, K divide the
  tile, otherwise the same main loop with clamped rows and a zero-filled last K-tile;
- **packed** (otherwise, the default): :func:`~tylo.ops.gemm.pack.pack_rows` first copies
  A and B into 16-byte aligned scratch buffers with padded rows (one read and one write of
  each operand; the buffers are kept per device and stream and reused), then the aligned
  path runs on them;
- **element-wise** (``pack=False``): the kernel loads each element on its own (no
  misaligned vector is ever formed) with the smaller 64 x 64 plan.

The epilogue is staged through shared memory when ``ldd`` is a multiple of 4 and D is
16-byte aligned, else stored by ownership.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

import tylo
from tylo.nvgpu.errors import PlanError
from tylo.nvgpu.warp.mma import MMAAtom, TiledMMA, size
from tylo.ops.args import OpArgumentError, f32_scalar, require_bool, require_int
from tylo.ops.arrays import as_array, refuse_bad_strides
from tylo.ops.gemm.kernel import (
    DEFAULT_EPILOGUE,
    DEFAULT_PLAN,
    DEFAULT_STAGES,
    SMALL_PLAN,
    GemmConfig,
    gemm_config,
    tiled_gemm_kernel,
)
from tylo.ops.gemm.pack import pack_rows, packed_ld

__all__ = [
    "check_call",
    "check_output",
    "choose_config",
    "compile_gemm",
    "gemm",
    "reference",
    "verify",
]


def choose_config(
    m: int,
    n: int,
    k: int,
    lda: int,
    ldb: int,
    aligned: bool = True,
    plan: TiledMMA | None = None,
    *,
    ldd: int | None = None,
    d_aligned: bool = True,
    dtype: Any = None,
    max_shared: int | None = None,
    **kw: Any,
) -> GemmConfig:
    """The configuration for a problem: full tiles when M, N, K divide the tile, 16-byte
    copies when the leading dimensions and pointers allow (element-wise copies use the
    smaller 64 x 64 plan, whose fewer loads per thread fit in registers beside the
    accumulators), the staged epilogue when ``ldd`` (if given) is a multiple of 4 and D is
    16-byte aligned. ``dtype``: the inputs' (default: the plan's, else bf16).
    ``max_shared``: the shared memory a block may use on the device it will run on
    (:attr:`tylo.target.Target.max_shared_bytes`); unless ``stages`` is given, the default
    depth is lowered until the pipeline fits (the default 4 stages take 192 KiB, more than
    an sm_80 block's 163 KiB)."""
    op = "gemm choose_config"
    m, n, k, lda, ldb = (
        require_int(op, w, x, minimum=1)
        for w, x in (("m", m), ("n", n), ("k", k), ("lda", lda), ("ldb", ldb))
    )
    ldd = None if ldd is None else require_int(op, "ldd", ldd, minimum=1)
    aligned = require_bool(op, "aligned", aligned)
    d_aligned = require_bool(op, "d_aligned", d_aligned)
    if plan is not None and not isinstance(plan, TiledMMA):
        raise OpArgumentError(f"{op}: plan must be a TiledMMA (or None), got {plan!r}")
    if dtype is not None:
        dtype = tylo.dtype_of(dtype)
    dtype = plan.atom.dtype if plan is not None else (dtype or DEFAULT_PLAN.atom.dtype)
    vec = 16 // dtype.nbytes
    vector = aligned and lda % vec == 0 and ldb % vec == 0
    given_plan = plan is not None
    if plan is None:
        base = DEFAULT_PLAN if vector else SMALL_PLAN
        plan = _plan_in(base, dtype)
    bm, bn, bk = size(plan)
    full = m % bm == 0 and n % bn == 0 and k % bk == 0
    given_stages = "stages" in kw
    if max_shared is not None:
        max_shared = require_int(op, "max_shared", max_shared, minimum=1)
    kw.setdefault("stages", DEFAULT_STAGES if plan.threads >= 256 else 3)
    staged = d_aligned and (ldd is None or ldd % 4 == 0)
    kw.setdefault("epilogue", DEFAULT_EPILOGUE if staged else "direct")
    cfg = _planned(plan, not full, vector, tuple(sorted(kw.items())))
    if max_shared is not None and not given_stages:
        while cfg.shared_bytes > max_shared and kw["stages"] > 2:
            kw["stages"] -= 1
            cfg = _planned(plan, not full, vector, tuple(sorted(kw.items())))
        if cfg.shared_bytes > max_shared and not given_plan:  # sm_86/89/120: 99 KiB
            small = _plan_in(SMALL_PLAN, dtype)
            bm, bn, bk = size(small)
            full = m % bm == 0 and n % bn == 0 and k % bk == 0
            kw["stages"] = 3
            cfg = _planned(small, not full, vector, tuple(sorted(kw.items())))
    return cfg


@functools.lru_cache(maxsize=64)
def _plan_in(base: TiledMMA, dtype: Any) -> TiledMMA:
    # TiledMMA proves its ownerships on construction: build each (plan, dtype) once.
    if base.atom.dtype == dtype:
        return base
    return TiledMMA(MMAAtom(base.atom.shape, dtype), base.warps, base.repeat, base.k)


@functools.lru_cache(maxsize=256)
def _planned(plan: TiledMMA, bounded: bool, vector: bool, options: tuple) -> GemmConfig:
    # Planning proves every layout the kernel relies on (tens of milliseconds); the
    # configuration depends only on these arguments, so each one is planned once.
    return gemm_config(plan, bounded=bounded, vector=vector, **dict(options))


_SCRATCH: dict[tuple, Any] = {}


def _scratch(key: tuple, elements: int, dtype: Any, device: int) -> Any:
    """A cached device buffer of at least ``elements`` (grown, never shrunk)."""
    from tylo.arrays import DeviceBuffer

    buf = _SCRATCH.get(key)
    if buf is None or buf.size < elements or buf.dtype is not dtype:
        _SCRATCH[key] = buf = DeviceBuffer.empty((elements,), dtype, device=device)
    return buf


def _launch(cfg: GemmConfig, d, a, b, m, n, k, lda, ldb, ldd, alpha, relu, stream) -> None:
    tiled_gemm_kernel[cfg.grid(m, n), cfg.plan.threads](
        cfg, d, a, b, m, n, k, lda, ldb, ldd, float(alpha), relu,
        shared=cfg.shared_bytes, stream=stream,
    )  # fmt: skip


def refuse_shared_memory(op: str, d: Any, a: Any, b: Any) -> None:
    """Raise :class:`PlanError` where D certainly shares memory with A or B
    (:func:`tylo.arrays.overlapping_pair`): the CTAs read A and B while others write D, so
    the product would be wrong without a word."""
    from tylo.arrays import overlapping_pair

    pair = overlapping_pair({"D": d}, {"A": a, "B": b})
    if pair is not None:
        raise PlanError(
            f"{op}: D and {pair[1]} share memory; the kernel reads A and B while it writes "
            "D: give D memory of its own"
        )


def check_call(
    op: str, m: Any, n: Any, k: Any, lda: Any, ldb: Any, ldd: Any, alpha: Any, relu: Any
) -> tuple[tuple[int, ...], float, bool]:
    """The scalar arguments of a kernel-level GEMM call, checked
    (:mod:`tylo.ops.args`): the sizes and leading dimensions integers >= 1 (numpy's too,
    never a bool or a float), ``alpha`` a real number whose f32 rounding is finite
    (``|alpha| <= F32_MAX``, about 3.4028235e38), ``relu`` True or False. Returns
    ``((m, n, k, lda, ldb, ldd), alpha, relu)`` as Python values; raises
    :class:`~tylo.ops.args.OpArgumentError` naming the argument."""
    sizes = tuple(
        require_int(op, name, x, minimum=1)
        for name, x in (("m", m), ("n", n), ("k", k), ("lda", lda), ("ldb", ldb), ("ldd", ldd))
    )
    return sizes, f32_scalar(op, "alpha", alpha), require_bool(op, "relu", relu)


def check_output(op: str, d: Any) -> Any:
    """``d`` as a device array, refused (:class:`~tylo.ops.args.OpArgumentError`) when
    it is not one or has a zero or negative stride
    (:func:`tylo.ops.arrays.refuse_bad_strides`)."""
    arr = as_array(op, "D", d)
    refuse_bad_strides(op, "D", arr)
    return arr


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
    pack: bool = True,
    stream: Any = None,
) -> GemmConfig:
    """Launch ``D = alpha * A @ B`` (device arrays or pointers' owners: DeviceBuffer,
    torch, ...; storage as in :mod:`tylo.ops.gemm.kernel`); returns the configuration of
    the GEMM launch. With ``cfg``, exactly that configuration runs on the operands as
    given (no checks beyond the arguments' and the launcher's); otherwise unaligned
    operands are packed first (see the module docstring), and a D that certainly shares
    memory with A or B is refused (:func:`refuse_shared_memory`). The arguments
    (:func:`check_call`): sizes and leading dimensions integers >= 1, ``alpha`` a real
    number whose f32 rounding is finite (``|alpha| <= 3.4028235e38``), ``relu`` a bool,
    D without zero or negative strides; else :class:`~tylo.ops.args.OpArgumentError`."""
    from tylo.arrays import as_device_array

    (m, n, k, lda, ldb, ldd), alpha, relu = check_call("gemm", m, n, k, lda, ldb, ldd, alpha, relu)
    check_output("gemm", d)
    if cfg is not None:
        if not isinstance(cfg, GemmConfig):
            raise OpArgumentError(f"gemm: cfg must be a GemmConfig (or None), got {cfg!r}")
        _launch(cfg, d, a, b, m, n, k, lda, ldb, ldd, alpha, relu, stream)
        return cfg
    da, db, dd = (as_device_array(x) for x in (a, b, d))
    refuse_shared_memory("gemm", dd, da, db)
    aligned = da.ptr % 16 == 0 and db.ptr % 16 == 0
    d_aligned = dd.ptr % 16 == 0
    kw = {
        "ldd": ldd,
        "d_aligned": d_aligned,
        "dtype": da.dtype,
        "max_shared": _max_shared(da.device),
    }
    cfg = choose_config(m, n, k, lda, ldb, aligned, **kw)
    ldp = packed_ld(k)
    if not cfg.vector and pack and max(m, n) * max(lda, ldb, ldp) < 2**31:  # 32-bit indices
        key = (da.device, id(stream) if stream is not None else None)
        pa = _scratch(("a", *key), m * ldp, da.dtype, da.device)
        pb = _scratch(("b", *key), n * ldp, db.dtype, db.device)
        pack_rows(pa, a, m, k, lda, stream=stream)
        pack_rows(pb, b, n, k, ldb, stream=stream)
        a, b, lda, ldb = pa, pb, ldp, ldp
        cfg = choose_config(m, n, k, lda, ldb, **kw)
    _launch(cfg, d, a, b, m, n, k, lda, ldb, ldd, alpha, relu, stream)
    return cfg


def _max_shared(device: int | None) -> int | None:
    """The shared memory a block may use on ``device`` (None: unknown, no limit applied)."""
    from tylo.ops.attention.host import device_capability
    from tylo.target import Target, TargetError

    cc = device_capability(device)
    if cc is None:
        return None
    try:
        return Target(*cc).max_shared_bytes
    except (TargetError, TypeError):
        return None


def compile_gemm(cfg: GemmConfig, target: Any = "sm_90a", relu: bool = False) -> Any:
    """Compile :func:`~tylo.ops.gemm.kernel.tiled_gemm_kernel` for ``cfg`` without a GPU."""
    d = cfg.dtype
    a_ptr = tylo.pointer(d, align=16) if cfg.vector else d
    d_ptr = tylo.pointer(tylo.f32, align=16) if cfg.epilogue == "staged" else tylo.f32
    return tiled_gemm_kernel.compile(
        cfg, d_ptr, a_ptr, a_ptr, int, int, int, int, int, int, float, relu,
        block=cfg.plan.threads, target=target,
    )  # fmt: skip


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
    pack: bool = True,
) -> dict[str, Any]:
    """Run the GEMM on fresh random data (D poisoned with NaN first; leading dimensions
    padded by ``pad``) and compare with the float64 reference. Returns the relative error,
    the configuration and the seed; raises AssertionError when the error exceeds
    ``tolerance`` or any element was left unwritten. ``pack``: as for :func:`gemm`."""
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
        cfg = gemm(dd, da, db, m, n, k, lda, ldb, ldd, alpha=alpha, relu=relu, cfg=cfg, pack=pack)
        torch.cuda.synchronize()
        got = dd.cpu().numpy()
    else:
        from tylo.arrays import DeviceBuffer
        from tylo.backend import driver

        da = DeviceBuffer.from_numpy(a_bits, dtype=td)
        db = DeviceBuffer.from_numpy(b_bits, dtype=td)
        dd = DeviceBuffer.empty((n, ldd), tylo.f32).fill_bytes(0xFF)  # NaN poison
        cfg = gemm(dd, da, db, m, n, k, lda, ldb, ldd, alpha=alpha, relu=relu, cfg=cfg, pack=pack)
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
