"""Host side of the Hopper attention forward: tensor-map plans (proved), argument checks with
typed errors, launch and verification.

:func:`hopper_attention` runs ``O = softmax(Q Kᵀ · scale) V`` (semantics of
:mod:`examples.attention.reference`) on an sm_90a GPU. It takes what TMA can read: bf16 or
f16, head dim 64 or 128, the last dimension contiguous, every other stride (of L, of the
heads and of the batch) a multiple of 16 bytes and 16-byte aligned base addresses; anything
else raises :class:`~examples.attention.reference.AttentionInputError` saying to use
``path="warp"``. :func:`compile_hopper_attention` compiles any configuration without a GPU.
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import cache
from typing import Any

import numpy as np

import tylo
from examples.attention.hopper_epilogue import staging_layout
from examples.attention.hopper_kernel import (
    BLOCK,
    THREADS,
    HopperAttentionConfig,
    box_layout,
    hopper_attention_kernel,
)
from examples.attention.hopper_persistent import hopper_attention_persistent_kernel, work_items
from examples.attention.reference import AttentionInputError, attention_reference
from tylo.arrays import DeviceArray, DeviceBuffer
from tylo.layouts import Layout, Swizzle, dim, size, zipped_divide
from tylo.nvgpu.errors import PlanError
from tylo.nvgpu.tma import TensorMap, TensorMapPlan

__all__ = [
    "HopperAttentionConfig",
    "check_inputs",
    "choose_config",
    "compile_hopper_attention",
    "hopper_attention",
    "o_plan",
    "persistent_grid",
    "plans",
    "takes_tma_store",
    "verify",
]

LOG2E = 1.4426950408889634
_MAX_EXTENT = 2**31 - 1


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
    if cfg.persistent:  # two more sizes: the heads and batch entries
        return hopper_attention_persistent_kernel.compile(
            cfg.dtype, tylo.f32, pq, pk, pv, po, tylo.i32, int, int, int, int, int, int, int, int,
            int, float, cfg, block=THREADS, target=target,
        )
    return hopper_attention_kernel.compile(
        cfg.dtype, tylo.f32, pq, pk, pv, po, tylo.i32, int, int, int, int, int, int, int, float,
        cfg, block=THREADS, target=target,
    )


def compile_kernels(args: Any, target: Any) -> dict[str, Any]:
    """What ``examples/attention/run.py --path hopper --compile-only`` compiles: the kernel
    of :func:`choose_config` for the command line's head dim, dtype and mask."""
    import tylo as _tylo

    dtype = _tylo.f16 if getattr(args, "dtype", "bf16") == "f16" else _tylo.bf16
    cfg = choose_config(args.d, dtype, bool(args.causal), target=target)
    return {"hopper_attention_kernel": compile_hopper_attention(cfg, target)}


# (d, causal) -> (pingpong, overlap, tma_store): the schedules and epilogue that measured
# fastest on an H200 (benchmarks/attention.py --path hopper --variants, 2026-12-01, a run
# made before the host stopped copying the default key lengths on every call; to be
# measured again): overlap alone at d = 64 without a mask, both schedules elsewhere; the
# TMA-store epilogue at d = 128 and d = 64 causal, not at d = 64 without a mask (slower)
SCHEDULES = {(64, False): (False, True, False), (64, True): (True, True, True),
             (128, False): (True, True, True), (128, True): (True, True, True)}  # fmt: skip


def choose_config(
    d: int, dtype: Any, causal: bool, *, pingpong: bool | None = None,
    overlap: bool | None = None, persistent: bool | None = None,
    tma_store: bool | None = None, split_kv: bool | None = None, target: Any = "sm_90a",
) -> HopperAttentionConfig:
    """The default tile: at d = 64, 128 keys per tile and 4 stages; at d = 128, 128 keys and 2
    stages where that compiles without spilling (S, O and P take 64 + 64 + 32 registers per
    thread: it does where the linker keeps ``setmaxnreg``, as ptxas does on the H200), else
    64 keys and 3 stages (nvJitLink, which drops ``setmaxnreg`` and leaves 168 registers).
    ``pingpong`` and ``overlap`` (the FlashAttention-3 schedules): None takes the measured
    choice for ``(d, causal)`` (``SCHEDULES``), and so does ``tma_store`` (O through shared
    memory and TMA stores; :func:`hopper_attention` falls back to stores by ownership for an
    ``out`` TMA cannot write). ``persistent`` (one CTA per SM walking the work items): None
    is False (in the same run it was far behind at 16k causal keys, where the items'
    lengths differ most). ``split_kv`` (K and V on full barriers of their own,
    :mod:`examples.attention.hopper_ring`): None is False (not measured yet)."""
    opts = dict(pingpong=pingpong, overlap=overlap, persistent=persistent,
                tma_store=tma_store, split_kv=split_kv)
    for name, value in opts.items():  # before the cache, which takes 1 for True
        if value is not None and type(value) is not bool:
            raise PlanError(
                f"choose_config: {name} must be a bool (or None: the default), got {value!r}"
            )
    return _choose_config(d, dtype, causal, target=target, **opts)


@cache
def _choose_config(
    d: int, dtype: Any, causal: bool, *, pingpong: bool | None, overlap: bool | None,
    persistent: bool | None, tma_store: bool | None, split_kv: bool | None, target: Any,
) -> HopperAttentionConfig:
    pp, ov, ts = SCHEDULES.get((d, bool(causal)), (False, False, False))
    pingpong = pp if pingpong is None else pingpong
    overlap = ov if overlap is None else overlap
    persistent = False if persistent is None else persistent
    tma_store = ts if tma_store is None else tma_store
    split_kv = False if split_kv is None else split_kv
    opts = dict(d=d, dtype=dtype, causal=causal, pingpong=pingpong, overlap=overlap,
                persistent=persistent, tma_store=tma_store, split_kv=split_kv)
    if d != 128:
        return HopperAttentionConfig(bn=128, stages=4, **opts)
    narrow = HopperAttentionConfig(bn=64, stages=3, **opts)
    try:
        wide = HopperAttentionConfig(bn=128, stages=2, **opts)
    except tylo.TyloError:  # overlap: two P tiles of 128 keys do not fit the registers
        return narrow
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a linker that drops setmaxnreg says so
        spills = compile_hopper_attention(wide, target).resources.spills
    return wide if spills is False else narrow


def _sm_count(device: int | None) -> int:
    from tylo.backend.device import device_properties

    return device_properties(device or 0).sm_count


def persistent_grid(
    cfg: HopperAttentionConfig, lq: int, lk: int, h: int, b: int, device: int | None = None,
    sms: int | None = None,
) -> int:
    """The persistent kernel's 1-D grid: ``min(work items, SMs)`` (``sms`` given, or the
    device's SM count). Raises :class:`AttentionInputError` where the kernel's u32
    arithmetic would wrap: ``2**32`` work items or more, or a CTA whose K/V ring would run
    ``2**32`` iterations or more (its items times ``ceil(Lk / bn)``)."""
    items = work_items(-(-lq // cfg.bm), h, b)
    if items >= 2**32:
        raise AttentionInputError(
            f"hopper_attention: {items} work items (ceil(Lq / {cfg.bm}) * H * B) do not fit "
            "the persistent kernel's u32 item index; use persistent=False or split the batch"
        )
    grid = min(items, _sm_count(device) if sms is None else sms)
    if -(-items // grid) * -(-lk // cfg.bn) >= 2**32:
        raise AttentionInputError(
            f"hopper_attention: {-(-items // grid)} work items per CTA of {-(-lk // cfg.bn)} "
            "key tiles each overflow the persistent kernel's u32 ring count; use "
            "persistent=False or split the batch"
        )
    return grid


def _array(x: Any, what: str) -> Any:
    from tylo.arrays import ArrayError, as_device_array

    try:
        return as_device_array(x)
    except ArrayError as err:
        raise AttentionInputError(f"hopper_attention: {what}: {err}") from None


def _tma_strides(a: Any, what: str) -> tuple[int, int, int] | str:
    """The (L, H, B) element strides of ``a`` (B, H, L, D) as TMA sees it, strides of
    extent-1 modes replaced by a legal value (they are never stepped), or why TMA cannot take
    it: a last dimension not contiguous, a stride not a positive multiple of 16 bytes, a base
    not 16-byte aligned."""
    b, h, length, d = a.shape
    nbytes = a.dtype.nbytes
    strides = list(a.strides)
    if strides[3] != 1 and d > 1:
        return (
            f"{what}'s last dimension must be contiguous (stride 1), got strides {a.strides}; "
            "pass a contiguous copy"
        )
    fill = length * d  # any 16-byte multiple would do for an extent that is never stepped
    for i, ext in enumerate((b, h, length)):
        if ext == 1:
            strides[i] = fill
    for i, name in enumerate(("batch", "head", "sequence")):
        if strides[i] * nbytes % 16 or strides[i] <= 0:
            return (
                f"{what}'s {name} stride is {strides[i]} elements ({strides[i] * nbytes} "
                "bytes); TMA needs positive multiples of 16 bytes: use path='warp' or a padded "
                "copy"
            )
    if a.ptr % 16:
        return f"{what}'s address {a.ptr:#x} is not 16-byte aligned (TMA); use path='warp'"
    return strides[2], strides[1], strides[0]


def _tma_view(a: Any, what: str) -> Any:
    """``a`` (B, H, L, D) in the plans' mode order (L, H, B, D), checked for TMA
    (:func:`_tma_strides`); raises :class:`AttentionInputError` saying why not."""
    st = _tma_strides(a, what)
    if isinstance(st, str):
        raise AttentionInputError(f"hopper_attention: {st}")
    b, h, length, d = a.shape
    return DeviceArray(a.ptr, (length, h, b, d), (*st, 1), a.dtype, a.device, owner=a)


def takes_tma_store(out: Any) -> bool:
    """Whether TMA can write ``out`` (B, H, Lq, D), as the TMA-store epilogue does: its
    last dimension contiguous, every other stride a positive multiple of 16 bytes (an
    extent-1 mode's stride is free) and a 16-byte aligned base. Where not,
    :func:`hopper_attention` runs ``tma_store=False`` (the stores by ownership)."""
    return not isinstance(_tma_strides(_array(out, "out"), "out"), str)


def check_inputs(q: Any, k: Any, v: Any) -> tuple[Any, Any, Any]:
    """Views of q (B, H, Lq, D), k and v (B, H, Lk, D) in the tensor maps' mode order
    (L, H, B, D), checked for this path: raises :class:`AttentionInputError` (saying what
    to do) for anything the kernel does not take."""
    qa, ka, va = _array(q, "q"), _array(k, "k"), _array(v, "v")
    for a, what in ((qa, "q"), (ka, "k"), (va, "v")):
        if a.ndim != 4:
            raise AttentionInputError(
                f"hopper_attention: {what} must be 4-D (B, H, L, D), got shape {a.shape}"
            )
    b, h, lq, d = qa.shape
    lk = ka.shape[2]
    if ka.shape != (b, h, lk, d) or va.shape != (b, h, lk, d):
        raise AttentionInputError(
            f"hopper_attention: q {qa.shape}, k {ka.shape} and v {va.shape} disagree; k and v "
            "must be (B, H, Lk, D) with q's B, H and D"
        )
    same = ka.dtype is qa.dtype and va.dtype is qa.dtype
    if qa.dtype not in (tylo.bf16, tylo.f16) or not same:
        raise AttentionInputError(
            f"hopper_attention: inputs must all be bf16 or all f16, got {qa.dtype}, {ka.dtype}, "
            f"{va.dtype}"
        )
    if d not in (64, 128):
        raise AttentionInputError(
            f"hopper_attention: head dim {d} is not taken by the Hopper kernel (64 or 128); "
            "use path='warp'"
        )
    for n, what in ((b, "B"), (h, "H"), (lq, "Lq"), (lk, "Lk")):
        if not 1 <= n <= _MAX_EXTENT:
            raise AttentionInputError(f"hopper_attention: {what} = {n} must be in [1, 2**31)")
    return _tma_view(qa, "q"), _tma_view(ka, "k"), _tma_view(va, "v")


def _empty(like: Any, shape: tuple, dtype: Any, device: int | None) -> Any:
    try:
        import torch
    except ImportError:  # pragma: no cover - tylo arrays without torch
        torch = None
    if torch is not None and isinstance(like, torch.Tensor):
        tdt = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32,
               "i32": torch.int32}[dtype.name]
        return torch.empty(shape, dtype=tdt, device=like.device)
    return DeviceBuffer.empty(shape, dtype, device=device or 0)


_FULL_LENS: dict = {}  # (B, Lk, device, torch?) -> a device array of B entries equal to Lk
_FULL_LENS_MAX = 16


def _kv_lens(kv_lens: Any, b: int, lk: int, like: Any, device: int | None) -> Any:
    """The per-batch key lengths as a device int32 array of B entries (Lk each when None).
    The kernel clamps each to [0, Lk] itself (the reference's meaning of a length outside).
    Without ``kv_lens`` the array of Lk's is made once per (B, Lk, device) and kept (the
    kernel only reads it): a host-to-device copy on every call would wait for the kernels
    before it and leave the GPU idle while the next call is prepared. A torch int32 tensor
    already on the device is passed as it is."""
    try:
        import torch
    except ImportError:  # pragma: no cover - tylo arrays without torch
        torch = None
    if torch is not None and isinstance(kv_lens, torch.Tensor):
        if tuple(kv_lens.shape) != (b,) or kv_lens.dtype.is_floating_point:
            raise AttentionInputError(
                f"hopper_attention: kv_lens must give B = {b} integer key lengths, got "
                f"{kv_lens.dtype} {tuple(kv_lens.shape)}"
            )
        dev = like.device if isinstance(like, torch.Tensor) else torch.device("cuda", device or 0)
        if kv_lens.dtype == torch.int32 and kv_lens.device == dev and kv_lens.is_contiguous():
            return kv_lens
        return kv_lens.clamp(0, lk).to(device=dev, dtype=torch.int32).contiguous()
    if kv_lens is None:
        is_torch = torch is not None and isinstance(like, torch.Tensor)
        key = (b, lk, str(like.device) if is_torch else (device or 0), is_torch)
        full = _FULL_LENS.get(key)
        if full is None:
            if is_torch:
                full = torch.full((b,), lk, dtype=torch.int32, device=like.device)
            else:
                full = DeviceBuffer.from_numpy(np.full(b, lk, dtype=np.int32), device=device or 0)
            if len(_FULL_LENS) >= _FULL_LENS_MAX:
                _FULL_LENS.pop(next(iter(_FULL_LENS)))
            _FULL_LENS[key] = full
        return full
    if hasattr(kv_lens, "__cuda_array_interface__") or isinstance(kv_lens, DeviceArray):
        a = _array(kv_lens, "kv_lens")
        if a.dtype is not tylo.i32 or a.shape != (b,) or (b > 1 and a.strides != (1,)):
            raise AttentionInputError(
                f"hopper_attention: kv_lens on the device must be a contiguous int32 array of "
                f"B = {b} entries, got {a.dtype} {a.shape}"
            )
        return kv_lens
    else:
        host = np.asarray(kv_lens)
        if host.shape != (b,) or host.dtype.kind not in "iu":
            raise AttentionInputError(
                f"hopper_attention: kv_lens must give B = {b} integer key lengths, got "
                f"{host.dtype} {host.shape}"
            )
        host = np.clip(host, 0, lk).astype(np.int32)
    if torch is not None and isinstance(like, torch.Tensor):
        return torch.from_numpy(host).to(like.device)
    return DeviceBuffer.from_numpy(host, device=device or 0)


def _check_out(x: Any, shape: tuple, dtype: Any, what: str) -> Any:
    a = _array(x, what)
    if a.shape != shape or a.dtype is not dtype:
        raise AttentionInputError(
            f"hopper_attention: {what} must be {dtype} of shape {shape}, got {a.dtype} {a.shape}"
        )
    if a.strides[-1] != 1 and shape[-1] > 1:
        raise AttentionInputError(
            f"hopper_attention: {what}'s last dimension must be contiguous, got strides {a.strides}"
        )
    return a


# --8<-- [start:launch]
def hopper_attention(
    q: Any, k: Any, v: Any, *, causal: bool = False, kv_lens: Any = None,
    scale: float | None = None, out: Any = None, lse: Any = None, cfg: Any = None,
    stream: Any = None,
) -> tuple[Any, Any]:
    """``(out, lse)``: ``out`` (B, H, Lq, D) in the inputs' dtype and ``lse`` (B, H, Lq) f32,
    the natural-log log-sum-exp of the scaled visible scores, by the Hopper kernel. Masks
    (``causal`` bottom-right, ``kv_lens`` per batch entry) and empty rows (o = 0, lse = -inf)
    as :func:`examples.attention.reference.attention_reference`. ``out``/``lse`` given:
    written in place (last dimension contiguous, other strides free). With
    ``cfg.tma_store`` O is written by TMA stores, which need ``out``'s other strides to be
    positive multiples of 16 bytes and its base 16-byte aligned (:func:`takes_tma_store`):
    a given ``out`` that is not runs with ``tma_store=False`` (stores by ownership), with
    the same result."""
    qa, ka, va = check_inputs(q, k, v)
    lq, h, b, d = qa.shape
    lk = ka.shape[0]
    if type(causal) is not bool:
        raise AttentionInputError(f"hopper_attention: causal must be a bool, got {causal!r}")
    sc = 1.0 / math.sqrt(d) if scale is None else float(scale)
    if not (math.isfinite(sc) and sc > 0):
        raise AttentionInputError(
            f"hopper_attention: the Hopper kernel takes a finite positive scale (its running "
            f"maximum is kept scaled), got {scale!r}; use path='warp'"
        )
    if cfg is None:
        cfg = choose_config(d, qa.dtype, causal)
    elif not isinstance(cfg, HopperAttentionConfig):
        raise AttentionInputError(
            f"hopper_attention: cfg must be a HopperAttentionConfig, got {type(cfg).__name__}"
        )
    if (cfg.d, cfg.dtype, cfg.causal) != (d, qa.dtype, causal):
        raise AttentionInputError(
            f"hopper_attention: cfg {cfg} does not match d = {d}, {qa.dtype}, causal = {causal}"
        )
    if not cfg.persistent and (h > 65535 or b > 65535):
        raise AttentionInputError(
            f"hopper_attention: {h} heads and {b} batch entries: the grid takes at most 65535 "
            "of each; use cfg=choose_config(..., persistent=True)"
        )
    grid = (-(-lq // cfg.bm), h, b)
    if cfg.persistent:
        grid = (persistent_grid(cfg, lq, lk, h, b, qa.device),)
    lens = _kv_lens(kv_lens, b, lk, q, qa.device)
    if out is None:
        out = _empty(q, (b, h, lq, d), qa.dtype, qa.device)
    if lse is None:
        lse = _empty(q, (b, h, lq), tylo.f32, qa.device)
    oa = _check_out(out, (b, h, lq, d), qa.dtype, "out")
    la = _check_out(lse, (b, h, lq), tylo.f32, "lse")
    tmo = None
    if cfg.tma_store:
        st = _tma_strides(oa, "out")
        if isinstance(st, str):  # TMA cannot write this out: the stores by ownership
            cfg = replace(cfg, tma_store=False)
        else:
            view = DeviceArray(oa.ptr, (lq, h, b, d), (*st, 1), oa.dtype, oa.device, owner=oa)
            tmo = TensorMap(o_plan(cfg), view)
    pq, pk, pv = plans(cfg)
    osb, osh, osl = (max(int(s), 1) for s in oa.strides[:3])
    lsb, lsh = (max(int(s), 1) for s in la.strides[:2])
    if cfg.persistent:
        hopper_attention_persistent_kernel[grid, THREADS](
            oa, la, TensorMap(pq, qa), TensorMap(pk, ka), TensorMap(pv, va), tmo, lens,
            lq, lk, h, b, osb, osh, osl, lsb, lsh, sc * LOG2E, cfg,
            shared=cfg.shared_bytes(), stream=stream,
        )
        return out, lse
    hopper_attention_kernel[grid, THREADS](
        oa, la, TensorMap(pq, qa), TensorMap(pk, ka), TensorMap(pv, va), tmo, lens,
        lq, lk, osb, osh, osl, lsb, lsh, sc * LOG2E, cfg,
        shared=cfg.shared_bytes(), stream=stream,
    )
    return out, lse
# --8<-- [end:launch]


def verify(
    b: int, h: int, lq: int, d: int, *, lk: int | None = None, dtype: str = "bf16",
    causal: bool = False, kv_lens: Any = None, seed: int | None = None,
    tolerance: float = 2e-2, cfg: Any = None,
) -> dict:
    """Run on fresh random data (outputs poisoned with NaN first) and compare with the
    float64 reference; raises AssertionError beyond ``tolerance`` (max abs error of o over
    max |o|, and of lse). ``cfg`` overrides the default configuration."""
    import torch

    lk = lq if lk is None else lk
    g = torch.Generator(device="cuda")
    g.manual_seed(seed if seed is not None else int(np.random.default_rng().integers(2**31)))
    tdt = torch.bfloat16 if dtype == "bf16" else torch.float16
    q = torch.randn(b, h, lq, d, device="cuda", generator=g).to(tdt)
    k = torch.randn(b, h, lk, d, device="cuda", generator=g).to(tdt)
    v = torch.randn(b, h, lk, d, device="cuda", generator=g).to(tdt)
    out = torch.full((b, h, lq, d), float("nan"), device="cuda", dtype=tdt)
    lse = torch.full((b, h, lq), float("nan"), device="cuda")
    hopper_attention(q, k, v, causal=causal, kv_lens=kv_lens, out=out, lse=lse, cfg=cfg)
    torch.cuda.synchronize()
    want_o, want_l = attention_reference(
        q.double().cpu().numpy(), k.double().cpu().numpy(), v.double().cpu().numpy(),
        causal=causal, kv_lens=kv_lens,
    )
    got_o = out.double().cpu().numpy()
    got_l = lse.double().cpu().numpy()
    if np.isnan(got_o).any() or np.isnan(got_l).any():
        raise AssertionError(f"hopper_attention {b}x{h}x{lq}x{lk}x{d}: NaN in the output")
    if not np.array_equal(np.isneginf(got_l), np.isneginf(want_l)):
        raise AssertionError(f"hopper_attention {b}x{h}x{lq}x{lk}x{d}: -inf rows of lse differ")
    err_o = float(np.abs(got_o - want_o).max() / max(np.abs(want_o).max(), 1e-30))
    fin = np.isfinite(want_l)
    err_l = float(np.abs(got_l[fin] - want_l[fin]).max()) if fin.any() else 0.0
    if not (err_o <= tolerance and err_l <= tolerance):
        raise AssertionError(
            f"hopper_attention {b}x{h}x{lq}x{lk}x{d} causal={causal}: relative error of o "
            f"{err_o:.3g}, abs error of lse {err_l:.3g} (tolerance {tolerance})"
        )
    return {"error_o": err_o, "error_lse": err_l}
