"""The attention example's host side: checking arguments, launching, verifying.

:func:`attention` takes torch tensors or tylo device arrays (anything
:func:`tylo.arrays.as_device_array` reads) of shape (B, H, L, D) with any strides for B, H
and L and a contiguous last dimension, checks everything before compiling or launching
(:class:`~tylo.ops.attention.reference.AttentionInputError`, or a
:class:`~tylo.nvgpu.errors.PlanError` for what the kernel does not plan: a head dim other
than 64 or 128, a dtype other than bf16 or f16), and launches the chosen path.
:func:`verify` runs on fresh random data with NaN-poisoned outputs and compares with the
float64 reference.
"""

from __future__ import annotations

import importlib
import math
import os
from typing import Any

import numpy as np

import tylo
from tylo.constants import LOG2E
from tylo.nvgpu.errors import PlanError
from tylo.ops.args import check_scale, refuse_shared_over, require_bool
from tylo.ops.arrays import empty_like_kind, refuse_bad_strides
from tylo.ops.attention.config import WARPS, AttentionConfig, attention_config
from tylo.ops.attention.reference import (
    AttentionInputError,
    attention_reference,
    refuse_shared_memory,
)
from tylo.remembered import Remembered

__all__ = [
    "PATHS",
    "AttentionPathError",
    "attention",
    "compile_attention",
    "plan_attention",
    "verify",
]

PATHS = ("auto", "warp", "hopper")
GRID_LIMIT = 65535  # grid y (heads) and z (batch)
CAUSAL_CTAS = 2**31 - 1  # a causal launch's CTAs, numbered in 32 bits (kernel.longest_first)
# (batch, head)s per group of a causal launch's longest-first order (kernel.causal_order):
# about a quarter of the CTAs an H200 runs at once (132 SMs x 2), so that some 4 CTAs of each
# (batch, head) are in flight and its K and V are read from L2. Against each (batch, head)'s
# blocks in a row (group 1), ordering the whole launch measured 0.89x at D = 128, 1k (16 x 16
# heads: 256 (batch, head)s in flight, one CTA each) and 1.03-1.15x at the other causal
# shapes; with groups of 64, D = 128 at 1k measured 240 TFLOP/s (group 1: 237) and the
# other shapes kept the gain (2026-12-02, H200, docs/attention.md). At D = 128 a (batch,
# head)'s K and V are twice D = 64's bytes; groups of 32 there (the K / V bytes of D = 64's
# groups of 64) measured 1.01-1.02x groups of 64 at 1k, 4k and 16k, as did 8 and 16; at
# D = 64, groups of 8 and 16 lost 4-5% at 1k and 32 matched 64 (2026-12-02, H200).
CAUSAL_GROUPS = {64: 64, 128: 32}  # head dim D -> (batch, head)s per group


class AttentionPathError(AttentionInputError):
    """A path that is unknown or not available in this checkout."""


def _array(x: Any, what: str) -> Any:
    from tylo.arrays import as_device_array
    from tylo.errors import TyloError

    try:
        return as_device_array(x)
    except TyloError as err:
        raise AttentionInputError(f"attention: {what} is not a device array: {err}") from None


def _check_4d(a: Any, what: str) -> tuple[int, ...]:
    if a.ndim != 4:
        raise AttentionInputError(
            f"attention: {what} must be 4-D (B, H, L, D), got shape {tuple(a.shape)}"
        )
    if a.shape[3] > 1 and a.strides[3] != 1:
        raise AttentionInputError(
            f"attention: {what}'s last dimension must be contiguous (stride 1), got strides "
            f"{tuple(a.strides)}; make it contiguous along D (e.g. .contiguous())"
        )
    if any(s < 0 for s in a.strides[:3]):
        raise AttentionInputError(
            f"attention: {what} has a negative stride {tuple(a.strides)}; use a non-negative view"
        )
    return tuple(int(n) for n in a.shape)


# Lq * Lk from which path="auto" takes the Hopper kernel, per head dim (measured on an H200,
# 2026-12-01, benchmarks/attention.py --reps 10, 3 calls per sample, the two paths in two
# runs minutes apart: the Hopper default was 1.26-1.51x the warp path at D = 64 and
# 1.65-1.86x at D = 128 at every benchmark length, 1k to 16k, causal or not; shorter
# sequences were not measured, so they stay on the warp path)
HOPPER_FROM = {64: 1024 * 1024, 128: 1024 * 1024}


def auto_path(q: Any, k: Any, v: Any, *, scale: Any = None) -> str:
    """The path ``path="auto"`` takes: 'hopper' on an sm_90 GPU where it was faster on an
    H200 (``HOPPER_FROM``: from Lq * Lk = 1k * 1k at D = 64 and 128), when
    the Hopper kernel takes the inputs (16-byte strides and bases, a positive scale);
    'warp' otherwise (and always for shorter sequences, where the Hopper kernel's per-CTA
    setup is not amortized)."""
    qa, ka = _array(q, "q"), _array(k, "k")
    if qa.ndim != 4 or ka.ndim != 4:
        return "warp"
    lq, d, lk = int(qa.shape[2]), int(qa.shape[3]), int(ka.shape[2])
    if d not in HOPPER_FROM or lq * lk < HOPPER_FROM[d] or (scale is not None and not scale > 0):
        return "warp"
    from tylo.backend.device import device_properties

    if device_properties(qa.device).compute_capability != (9, 0):
        return "warp"
    try:
        from tylo.ops.attention import hopper_host

        hopper_host.check_inputs(q, k, v)
    except (ImportError, tylo.TyloError):
        return "warp"
    return "hopper"


_AUTO_PATHS = Remembered(64)  # (q, k, v array keys, scale) -> auto_path's answer


def _auto_path_of(q: Any, k: Any, v: Any, scale: Any) -> str:
    """:func:`auto_path`, remembered per arrays (address, shape, strides, dtype, device) and
    scale for the last 64 combinations: it checks the inputs for the Hopper kernel, which
    costs tens of microseconds a call. Arguments without a key are not remembered."""
    from tylo.arrays import array_key

    try:
        key = (array_key(q), array_key(k), array_key(v), scale)
        hash(key)
    except (tylo.TyloError, TypeError):  # not an array, or an unhashable scale
        return auto_path(q, k, v, scale=scale)
    return _AUTO_PATHS.get(key, lambda: auto_path(q, k, v, scale=scale))


# the sm_90 tile at D = 128 without masks (launch_options): 32 rows per warp with Q in
# registers, the softmax in steps of 16 keys with the lazy rescale
STEPPED_128 = {"block_m": 128, "block_n": 64, "sub_n": 16, "lazy_rescale": True,
               "late_copies": True, "shared_bases": True}  # fmt: skip


def launch_options(
    d: int, *, causal: bool, padding: bool, aligned: bool = True, capability: Any = None
) -> dict[str, Any]:
    """The warp path's configuration :func:`attention` launches with when given none
    (``capability``: the GPU's (major, minor), None when unknown). At D = 64, 128 query
    rows by 64 keys (1.04-1.21x faster than the 64x128 default of ``attention_config`` on
    an H200, 2026-12-01, ``benchmarks/attention.py --variants``, every length, causal or
    not), except with both masks, where 128x64 spills on sm_80. At D = 128 on sm_90 and
    later, without masks and with 16-byte rows, :data:`STEPPED_128` (1.03-1.07x the 64x64
    default on an H200, 2026-12-02; ptxas spills it on sm_80, and with the causal mask, key
    lengths or element-wise copies). Otherwise ``attention_config``'s default (an empty
    dict)."""
    if d == 64 and not (causal and padding):
        return {"block_m": 128, "block_n": 64}
    sm90 = capability is not None and tuple(capability) >= (9, 0)
    if d == 128 and sm90 and not causal and not padding and aligned:
        return dict(STEPPED_128)
    return {}


def device_capability(ordinal: Any) -> Any:
    """The (major, minor) of CUDA device ``ordinal``; None for no device (``ordinal`` None)
    or without a GPU."""
    if ordinal is None:
        return None
    from tylo.backend.device import device_properties

    try:
        return device_properties(ordinal).compute_capability
    except tylo.NoDeviceError:
        return None


def _capability(a: Any) -> Any:
    """The (major, minor) of the GPU holding array ``a``; None without one."""
    return device_capability(a.device)


def launch_config(
    d: int, dtype: Any, *, causal: bool, padding: bool, aligned: bool, capability: Any,
    q_in_registers: bool = True, warps: int | None = None, block_m: int | None = None,
    block_n: int | None = None, late_copies: bool | None = None,
    shared_bases: bool | None = None, sub_n: int | None = None,
    lazy_rescale: bool | None = None,
) -> AttentionConfig:  # fmt: skip
    """The warp path's configuration for these arguments on a GPU of ``capability``: the
    options given (None: not given) completed by :func:`launch_options` when no block size
    is given and the CTA is the default one (a stepped tile is taken whole, with Q in
    registers, or not at all), then by ``attention_config``'s defaults. What
    :func:`plan_attention` plans and ``run.py`` prints."""
    chosen = {
        "block_m": block_m,
        "block_n": block_n,
        "late_copies": late_copies,
        "shared_bases": shared_bases,
        "sub_n": sub_n,
        "lazy_rescale": lazy_rescale,
    }
    default_cta = warps is None or (type(warps) is int and warps == WARPS)
    if block_m is None and block_n is None and default_cta:
        opts = launch_options(
            d, causal=causal, padding=padding, aligned=aligned, capability=capability
        )
        extras = [n for n in opts if n not in ("block_m", "block_n")]
        if extras and (q_in_registers is not True or any(chosen[n] is not None for n in extras)):
            opts = {}  # a stepped tile is taken whole, Q in registers, or not at all
        chosen.update(opts)
    return attention_config(
        d, dtype, causal=causal, padding=padding, aligned=aligned,
        q_in_registers=q_in_registers, warps=warps, **chosen,
    )  # fmt: skip


def plan_attention(
    q: Any, k: Any, v: Any, out: Any, lse: Any, *, causal: bool = False, kv_lens: Any = None,
    scale: float | None = None, block_m: int | None = None, block_n: int | None = None,
    q_in_registers: bool = True, warps: int | None = None, late_copies: bool | None = None,
    shared_bases: bool | None = None, sub_n: int | None = None,
    lazy_rescale: bool | None = None,
) -> tuple[AttentionConfig, dict[str, Any]]:  # fmt: skip
    """Check every argument of :func:`attention` (``out`` and ``lse`` given) and plan the
    warp path; returns the configuration and the launch's runtime values. Raises
    :class:`AttentionInputError` or :class:`PlanError`; launches nothing. The configuration
    is :func:`launch_config`'s: without blocks, the default CTA (``warps`` None or 4) takes
    :func:`launch_options`; 8 warps take ``attention_config``'s default for 8 warps (16
    rows per warp). ``causal`` must be a bool; ``scale`` a positive real number with
    ``scale * log2(e)`` finite in f32 (at most about 2.3585e38;
    :func:`tylo.ops.args.check_scale`)."""
    causal = require_bool("attention", "causal", causal)
    qa, ka, va = _array(q, "q"), _array(k, "k"), _array(v, "v")
    b, h, lq, d = _check_4d(qa, "q")
    kb, kh, lk, kd = _check_4d(ka, "k")
    if (kb, kh, kd) != (b, h, d) or tuple(va.shape) != tuple(ka.shape):
        raise AttentionInputError(
            f"attention: q {tuple(qa.shape)}, k {tuple(ka.shape)} and v {tuple(va.shape)} "
            "disagree: k and v must be (B, H, Lk, D) for q (B, H, Lq, D)"
        )
    _check_4d(va, "v")
    for a, what in ((ka, "k"), (va, "v")):
        if a.dtype is not qa.dtype:
            raise AttentionInputError(
                f"attention: {what} has dtype {a.dtype}, q has {qa.dtype}; pass one dtype"
            )
    if qa.dtype not in (tylo.bf16, tylo.f16):
        raise PlanError(
            f"attention: dtype {qa.dtype} is not supported; the warp path takes bf16 or f16"
        )
    if d not in (64, 128):
        raise PlanError(f"attention: head dim D = {d} is not supported; use D = 64 or 128")
    if min(b, h, lq, lk) < 1:
        raise AttentionInputError(
            f"attention: every extent must be >= 1, got q {tuple(qa.shape)}, k {tuple(ka.shape)}"
        )
    if h > GRID_LIMIT or b > GRID_LIMIT:
        raise AttentionInputError(
            f"attention: B = {b} and H = {h} must each be at most {GRID_LIMIT} (grid limits)"
        )
    oa = _array(out, "out")
    if tuple(oa.shape) != (b, h, lq, d) or oa.dtype is not qa.dtype:
        raise AttentionInputError(
            f"attention: out must be {(b, h, lq, d)} {qa.dtype}, got {tuple(oa.shape)} {oa.dtype}"
        )
    refuse_bad_strides("attention", "out", oa)
    _check_4d(oa, "out")
    la = _array(lse, "lse")
    refuse_bad_strides("attention", "lse", la)
    if tuple(la.shape) != (b, h, lq) or la.dtype is not tylo.f32 or not la.is_contiguous():
        raise AttentionInputError(
            f"attention: lse must be a contiguous {(b, h, lq)} f32 array, got "
            f"{tuple(la.shape)} {la.dtype} strides {tuple(la.strides)}"
        )
    devices = {a.device for a in (qa, ka, va, oa, la) if a.device is not None}
    if kv_lens is not None:
        ka_ = _array(kv_lens, "kv_lens")
        if ka_.dtype is not tylo.i32 or tuple(ka_.shape) != (b,) or not ka_.is_contiguous():
            raise AttentionInputError(
                f"attention: kv_lens must be a contiguous int32 array of B = {b} key lengths, "
                f"got {tuple(ka_.shape)} {ka_.dtype}"
            )
        if ka_.device is not None:
            devices.add(ka_.device)
    if len(devices) > 1:
        raise AttentionInputError(f"attention: the arrays are on different devices {devices}")
    refuse_shared_memory(
        "attention", {"out": oa, "lse": la},
        {"q": qa, "k": ka, "v": va, "kv_lens": None if kv_lens is None else ka_},
    )  # fmt: skip
    sc = 1.0 / math.sqrt(d) if scale is None else check_scale("attention", scale)
    if not sc > 0:
        raise AttentionInputError(
            f"attention: scale must be a positive finite number, got {scale!r}"
        )
    arrays = (qa, ka, va, oa)
    # a mode of extent 1 is only ever indexed at 0: its stride is irrelevant (torch may
    # report anything there), so it neither breaks alignment nor reaches the kernel
    strides = [
        tuple(int(s) if n > 1 else 0 for n, s in zip(a.shape[:3], a.strides[:3])) for a in arrays
    ]
    for a, st, what in zip(arrays, strides, ("q", "k", "v", "out")):
        if max(st) >= 2**40:
            raise AttentionInputError(f"attention: {what}'s strides {st} exceed 2**40 elements")
    aligned = all(a.ptr % 16 == 0 for a in arrays) and all(s % 8 == 0 for st in strides for s in st)
    cfg = launch_config(
        d, qa.dtype, causal=bool(causal), padding=kv_lens is not None, aligned=aligned,
        capability=_capability(qa), q_in_registers=q_in_registers, warps=warps,
        block_m=block_m, block_n=block_n, late_copies=late_copies, shared_bases=shared_bases,
        sub_n=sub_n, lazy_rescale=lazy_rescale,
    )  # fmt: skip
    ctas = math.prod(cfg.grid(b, h, lq))
    if cfg.causal and ctas > CAUSAL_CTAS:
        raise AttentionInputError(
            f"attention: a causal launch of {ctas} CTAs (B = {b}, "
            f"H = {h}, Lq = {lq} in blocks of {cfg.block_m}) exceeds {CAUSAL_CTAS}"
        )
    values = {
        "shape": (b, h, lq, lk, d),
        "strides": [s for st in strides for s in st],
        "c": float(sc) * LOG2E,
        "group": min(b * h, CAUSAL_GROUPS[d]),
    }
    return cfg, values


def attention(
    q: Any, k: Any, v: Any, *, causal: bool = False, kv_lens: Any = None,
    scale: float | None = None, out: Any = None, lse: Any = None, path: str = "auto",
    stream: Any = None, block_m: int | None = None, block_n: int | None = None,
    q_in_registers: bool = True, warps: int | None = None, late_copies: bool | None = None,
    shared_bases: bool | None = None, sub_n: int | None = None,
    lazy_rescale: bool | None = None,
) -> tuple[Any, Any]:  # fmt: skip
    """``(out, lse)``: ``out = softmax(q kᵀ · scale) v`` (B, H, Lq, D) in the input dtype and
    ``lse`` (B, H, Lq) f32, with the masks of :mod:`tylo.ops.attention.reference`
    (``causal``: bottom-right aligned; ``kv_lens``: int32 per-batch key lengths). ``out`` and
    ``lse`` are allocated when not given. ``path``: 'warp' (mma.sync, sm_80+), 'hopper'
    (:mod:`tylo.ops.attention.hopper_host`, sm_90a) or 'auto' (:func:`auto_path`).
    ``block_m``, ``block_n``, ``q_in_registers``, ``warps``, ``late_copies``,
    ``shared_bases``: the warp path's configuration
    (:class:`~tylo.ops.attention.config.AttentionConfig`; default: its choice for D); any of
    them given makes ``path="auto"`` the warp path."""
    if not isinstance(path, str) or path not in PATHS:
        raise AttentionPathError(f"attention: path must be one of {PATHS}, got {path!r}")
    causal = require_bool("attention", "causal", causal)
    scale = check_scale("attention", scale)  # before any allocation
    options = (("block_m", block_m), ("block_n", block_n), ("warps", warps),
               ("late_copies", late_copies), ("shared_bases", shared_bases),
               ("sub_n", sub_n), ("lazy_rescale", lazy_rescale))  # fmt: skip
    given = [n for n, x in options if x is not None] + ([] if q_in_registers else
                                                        ["q_in_registers"])  # fmt: skip
    if path == "auto" and not given:
        path = _auto_path_of(q, k, v, scale)
    if path == "hopper":
        if given:
            raise AttentionPathError(
                f"attention: {', '.join(given)} configure the warp path, not path='hopper' "
                "(its configuration: hopper_host.choose_config); drop them or use path='warp'"
            )
        return _hopper(q, k, v, causal=causal, kv_lens=kv_lens, scale=scale, out=out, lse=lse)
    qa = _array(q, "q")
    if qa.ndim == 4:
        if out is None:
            out = empty_like_kind(q, tuple(qa.shape), qa.dtype, qa.device)
        if lse is None:
            lse = empty_like_kind(q, tuple(qa.shape[:3]), tylo.f32, qa.device)

    def plan() -> tuple[AttentionConfig, dict[str, Any]]:
        return plan_attention(
            q, k, v, out, lse, causal=causal, kv_lens=kv_lens, scale=scale,
            block_m=block_m, block_n=block_n, q_in_registers=q_in_registers, warps=warps,
            late_copies=late_copies, shared_bases=shared_bases, sub_n=sub_n,
            lazy_rescale=lazy_rescale,
        )  # fmt: skip

    key = _plan_key(
        q, k, v, out, lse, kv_lens, causal, scale, block_m, block_n, q_in_registers, warps,
        late_copies, shared_bases, sub_n, lazy_rescale,
    )  # fmt: skip
    cfg, val = plan() if key is None else _PLANS.get(key, plan)
    launch(cfg, val, q, k, v, out, lse, kv_lens, stream)
    return out, lse


_PLANS = Remembered(64)  # _plan_key(...) -> plan_attention's (cfg, values)


def _plan_key(q, k, v, out, lse, kv_lens, *scalars) -> tuple | None:
    """What :func:`plan_attention`'s answer depends on: the arrays' keys (not their
    contents: ``kv_lens`` is read by the kernel) and the other arguments with their types
    (``True`` and ``1`` are one dictionary key, but not one argument). None where an
    argument has no key (not an array, unhashable): then the plan is made every time, and
    says what is wrong."""
    from tylo.arrays import array_key

    try:
        arrays = tuple(None if x is None else array_key(x) for x in (q, k, v, out, lse, kv_lens))
        key = (arrays, tuple((type(x), x) for x in scalars))
        hash(key)
    except (tylo.TyloError, TypeError):
        return None
    return key


def launch(cfg: AttentionConfig, val: dict, q, k, v, out, lse, kv_lens, stream=None) -> None:
    """Launch :func:`~tylo.ops.attention.kernel.attention_kernel` with planned values."""
    from tylo.ops.attention.kernel import attention_kernel

    b, h, lq, lk, _ = val["shape"]
    s = val["strides"]
    attention_kernel[cfg.grid(b, h, lq), cfg.threads](
        cfg, out, lse, q, k, v, kv_lens, lq, lk, h,
        s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8], s[9], s[10], s[11],
        val["c"], val["group"], shared=cfg.shared_bytes, stream=stream,
    )  # fmt: skip


def _hopper_module() -> Any:
    """:mod:`tylo.ops.attention.hopper_host`, imported on first use."""
    try:
        return importlib.import_module("tylo.ops.attention.hopper_host")
    except ModuleNotFoundError as err:
        if err.name != "tylo.ops.attention.hopper_host":
            raise
        raise AttentionPathError(
            "attention: path='hopper' needs tylo/ops/attention/hopper_host.py, which this "
            "checkout does not have; use path='warp'"
        ) from None


def _hopper(q, k, v, **kw) -> tuple[Any, Any]:
    return _hopper_module().hopper_attention(q, k, v, **kw)


def compile_attention(cfg: AttentionConfig, target: Any = "sm_90a") -> Any:
    """Compile the warp path's kernel for ``cfg`` without a GPU."""
    from tylo.ops.attention.kernel import attention_kernel

    refuse_shared_over("compile_attention", cfg.shared_bytes, target)
    p = tylo.Ptr(cfg.dtype, align=16 if cfg.aligned else None, strided=True)
    lens = tylo.i32 if cfg.padding else None
    return attention_kernel.compile(
        cfg, p, tylo.f32, p, p, p, lens, int, int, int, *([int] * 12), float, int,
        block=cfg.threads, target=target,
    )  # fmt: skip


# ---------------------------------------------------------------------------- verification


def _round(x: np.ndarray, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """(uint16 bits, float64 values) of ``x`` rounded to bf16 / f16 (nearest even)."""
    if dtype == "bf16":
        u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
        bits = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
        return bits, (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    h = x.astype(np.float16)
    return h.view(np.uint16), h.astype(np.float64)


def _device(bits: np.ndarray, dtype: Any, layout: str, pad: int) -> Any:
    """(B, H, L, D) data on the device: ``layout`` 'bhld' (contiguous) or 'blhd' (the
    (B, L, H, D) storage seen as (B, H, L, D)); ``pad`` extra elements per row of D."""
    from tylo.arrays import DeviceArray, DeviceBuffer

    b, h, length, d = bits.shape
    if layout == "bhld":
        store = np.zeros((b, h, length, d + pad), dtype=np.uint16)
        store[..., :d] = bits
        buf = DeviceBuffer.from_numpy(store, dtype=dtype)
        strides = (h * length * (d + pad), length * (d + pad), d + pad, 1)
    elif layout == "blhd":
        store = np.zeros((b, length, h, d + pad), dtype=np.uint16)
        store[..., :d] = bits.transpose(0, 2, 1, 3)
        buf = DeviceBuffer.from_numpy(store, dtype=dtype)
        strides = (length * h * (d + pad), d + pad, h * (d + pad), 1)
    else:
        raise AttentionInputError(f"verify: layout must be 'bhld' or 'blhd', got {layout!r}")
    return DeviceArray(buf.ptr, (b, h, length, d), strides, dtype, buf.device, owner=buf)


def verify(
    b: int, h: int, lq: int, d: int, *, lk: int | None = None, dtype: str = "bf16",
    causal: bool = False, kv_lens: Any = None, scale: float | None = None,
    layout: str = "bhld", pad: int = 0, path: str = "auto", seed: int | None = None,
    tolerance: float = 1e-2, lse_tolerance: float = 1e-3, block_m: int | None = None,
    block_n: int | None = None, q_in_registers: bool = True, warps: int | None = None,
    late_copies: bool | None = None, shared_bases: bool | None = None,
    sub_n: int | None = None, lazy_rescale: bool | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Run attention on fresh random data (``out`` and ``lse`` poisoned with NaN first) and
    compare with :func:`~tylo.ops.attention.reference.attention_reference`: the relative
    max-norm error of ``o`` at most ``tolerance``; ``lse`` within ``lse_tolerance`` where the
    reference is finite and exactly ``-inf`` where it is ``-inf``. Raises AssertionError
    otherwise; returns the errors, the seed and the configuration."""
    from tylo.arrays import DeviceBuffer
    from tylo.backend import driver

    if dtype not in ("bf16", "f16"):
        raise PlanError(f"verify: dtype must be 'bf16' or 'f16', got {dtype!r}")
    td = tylo.bf16 if dtype == "bf16" else tylo.f16
    lk = lq if lk is None else lk
    if seed is None:
        seed = int.from_bytes(os.urandom(4), "little")
    rng = np.random.default_rng(seed)
    data = [rng.standard_normal((b, h, n, d)).astype(np.float32) for n in (lq, lk, lk)]
    rounded = [_round(x, dtype) for x in data]
    q, k, v = (_device(bits, td, layout, pad) for bits, _ in rounded)
    out = DeviceBuffer.empty((b, h, lq, d), td).fill_bytes(0xFF)  # NaN until written
    lse = DeviceBuffer.empty((b, h, lq), tylo.f32).fill_bytes(0xFF)
    lens = None
    if kv_lens is not None:
        kv_lens = np.asarray(kv_lens, dtype=np.int32)
        lens = DeviceBuffer.from_numpy(kv_lens, dtype=tylo.i32)
    attention(q, k, v, causal=causal, kv_lens=lens, scale=scale, out=out, lse=lse, path=path,
              block_m=block_m, block_n=block_n, q_in_registers=q_in_registers,
              warps=warps, late_copies=late_copies, shared_bases=shared_bases, sub_n=sub_n,
              lazy_rescale=lazy_rescale)  # fmt: skip
    driver.synchronize()
    ref_o, ref_lse = attention_reference(
        *(x for _, x in rounded), scale=scale, causal=causal, kv_lens=kv_lens
    )
    got_bits = out.to_numpy().view(np.uint16)
    if dtype == "bf16":
        got = (got_bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    else:
        got = got_bits.view(np.float16).astype(np.float64)
    got_lse = lse.to_numpy().astype(np.float64)
    where = (
        f"attention B={b} H={h} Lq={lq} Lk={lk} D={d} {dtype} causal={causal} "
        f"kv_lens={None if kv_lens is None else kv_lens.tolist()} layout={layout} pad={pad} "
        f"seed {seed}"
    )
    if not np.isfinite(got).all():
        bad = np.argwhere(~np.isfinite(got))
        raise AssertionError(f"{where}: {len(bad)} outputs unwritten or not finite, first at "
                             f"{tuple(bad[0])}")  # fmt: skip
    denom = np.abs(ref_o).max()
    err = float(np.abs(got - ref_o).max() / denom) if denom > 0 else float(np.abs(got).max())
    if not err <= tolerance:
        raise AssertionError(f"{where}: relative max-norm error of o {err:.3g} > {tolerance}")
    empty = np.isneginf(ref_lse)
    if not np.array_equal(np.isneginf(got_lse), empty):
        bad = np.argwhere(np.isneginf(got_lse) != empty)
        raise AssertionError(f"{where}: lse is -inf at the wrong rows, first at {tuple(bad[0])}")
    fin = ~empty
    lse_err = float(np.abs(got_lse[fin] - ref_lse[fin]).max()) if fin.any() else 0.0
    if not lse_err <= lse_tolerance:  # NaN fails too
        raise AssertionError(f"{where}: lse error {lse_err:.3g} > {lse_tolerance}")
    return {"error": err, "lse_error": lse_err, "seed": seed, "where": where}
