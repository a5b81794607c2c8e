"""Argument checks of the Hopper attention forward (:mod:`tylo.ops.attention.hopper_host`):
the views of q, k and v that the tensor maps take, with typed errors for anything the kernel
does not take; the outputs' checks; the per-batch key lengths as a device array."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

import tylo
from tylo.arrays import ArrayError, DeviceArray, DeviceBuffer, array_key, device_clash
from tylo.ops.arrays import refuse_bad_strides
from tylo.ops.attention.reference import AttentionInputError
from tylo.remembered import Remembered

__all__ = ["check_inputs", "takes_tma_store"]

_MAX_EXTENT = 2**31 - 1


def _array(x: Any, what: str) -> Any:
    from tylo.arrays import as_device_array

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
    same_device("hopper_attention", q=qa, k=ka, v=va)
    return _tma_view(qa, "q"), _tma_view(ka, "k"), _tma_view(va, "v")


def _torch() -> Any:
    """The torch module if it was imported (a torch tensor cannot exist otherwise), else
    None: a failing ``import torch`` on every call would search the path every time."""
    return sys.modules.get("torch")


_FULL_LENS = Remembered(16)  # (B, Lk, device, torch?) -> a device array of B entries of Lk


def _kv_lens(kv_lens: Any, b: int, lk: int, like: Any, device: int | None) -> Any:
    """The per-batch key lengths as a device int32 array of B entries (Lk each when None).
    The kernel clamps each to [0, Lk] itself (the reference's meaning of a length outside).
    Without ``kv_lens`` the array of Lk's is made once per (B, Lk, device) and kept (the
    kernel only reads it): a host-to-device copy on every call would wait for the kernels
    before it and leave the GPU idle while the next call is prepared. A torch int32 tensor
    already on the device is passed as it is."""
    torch = _torch()
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
        if is_torch:
            return _FULL_LENS.get(
                key, lambda: torch.full((b,), lk, dtype=torch.int32, device=like.device)
            )
        return _FULL_LENS.get(
            key, lambda: DeviceBuffer.from_numpy(np.full(b, lk, dtype=np.int32), device=device or 0)
        )
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


def same_device(op: str, **arrays: Any) -> None:
    """Raise :class:`AttentionInputError` unless the arrays (tylo views) that name a device
    all name the same one. A tensor map is not a pointer argument, so the launcher cannot
    see which device its array is on: a q on another device than ``out`` would be read
    through the wrong device's address space."""
    where = device_clash((name, a.device) for name, a in arrays.items())
    if where is not None:
        raise AttentionInputError(
            f"{op}: the arrays live on different devices ({where}); copy them to one "
            "device first (e.g. x.to(q.device))"
        )


def _check_out(x: Any, shape: tuple, dtype: Any, what: str) -> Any:
    """``x`` as a device array of ``shape`` and ``dtype`` with a contiguous last dimension
    and positive strides (:func:`tylo.ops.arrays.refuse_bad_strides`: a zero or negative
    stride of a mode of more than one element is refused, never rewritten)."""
    a = _array(x, what)
    if a.shape != shape or a.dtype is not dtype:
        raise AttentionInputError(
            f"hopper_attention: {what} must be {dtype} of shape {shape}, got {a.dtype} {a.shape}"
        )
    refuse_bad_strides("hopper_attention", what, a)
    if a.strides[-1] != 1 and shape[-1] > 1:
        raise AttentionInputError(
            f"hopper_attention: {what}'s last dimension must be contiguous, got strides {a.strides}"
        )
    return a


def array_key_of(x: Any, what: str) -> tuple:
    """:func:`tylo.arrays.array_key` of ``x``, its error typed as the other input checks'."""
    try:
        return array_key(x)
    except ArrayError as err:
        raise AttentionInputError(f"hopper_attention: {what}: {err}") from None
