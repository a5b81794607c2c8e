"""The host side of the softmax example: checking arguments, launching, the float64
reference and verification on fresh random data.

:func:`softmax` checks every argument (dtypes, shapes, strides, the mask) and raises
:class:`~tylo.ops.softmax.plan.SoftmaxError` before anything is compiled or launched;
:func:`compile_softmax` compiles any configuration without a GPU.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from typing import Any

import numpy as np

import tylo
from tylo.ops.arrays import refuse_bad_strides
from tylo.ops.softmax.kernel import (
    mma_softmax_kernel,
    online_softmax_kernel,
    prefetch_softmax_kernel,
    row_softmax_kernel,
)
from tylo.ops.softmax.plan import (
    PREFETCH_MIN_CC,
    PREFETCH_SHARED,
    SMS,
    SoftmaxConfig,
    SoftmaxError,
    choose_config,
    prefetch_bytes,
    shared_capacity,
    vector_width,
)

__all__ = [
    "compile_softmax",
    "device_cc",
    "kernel_for",
    "launch_shape",
    "make_inputs",
    "multiprocessors",
    "plan_launch",
    "reference",
    "softmax",
    "verify",
]

_DTYPES = {"f32": tylo.f32, "bf16": tylo.bf16}


def kernel_for(cfg: SoftmaxConfig) -> Any:
    """The kernel that runs ``cfg``: the one-pass row kernel (lane and warp styles), the
    online two-pass kernel (warp style, long rows) or the MMA-layout kernel."""
    if cfg.style == "mma":
        return mma_softmax_kernel
    if cfg.prefetch:
        return prefetch_softmax_kernel
    return online_softmax_kernel if cfg.passes == 2 else row_softmax_kernel


def _array(obj: Any, what: str) -> Any:
    from tylo.arrays import ArrayError, as_device_array

    try:
        return as_device_array(obj)
    except ArrayError as err:
        raise SoftmaxError(f"softmax: {what}: {err}") from None


def _check_rows(a: Any, what: str, shape: tuple[int, int] | None = None) -> None:
    if a.ndim != 2:
        raise SoftmaxError(f"softmax: {what} must be 2-D (rows, cols), got shape {a.shape}")
    if shape is not None and tuple(a.shape) != shape:
        raise SoftmaxError(f"softmax: {what} has shape {tuple(a.shape)}, but x is {shape}")
    if a.shape[1] > 1 and a.strides[1] != 1:
        raise SoftmaxError(
            f"softmax: {what}'s rows must be contiguous (column stride 1), got strides "
            f"{a.strides}; pass a contiguous copy"
        )


def _ld(a: Any) -> int:
    """The row stride the kernel takes: as given for more than one row (positive:
    :func:`~tylo.ops.arrays.refuse_bad_strides` refused the rest), the row length for one
    (never stepped)."""
    return int(a.strides[0]) if a.shape[0] > 1 else max(int(a.shape[1]), 1)


def _refuse_shared_memory(oa: Any, inputs: dict[str, Any]) -> None:
    """Raise :class:`SoftmaxError` where ``out`` certainly has two elements at one address
    or shares memory with an input (:mod:`tylo.arrays`: ``internal_overlap``,
    ``overlapping_pair``): threads would read what others write, a wrong answer without
    a word. (Exactly in place, ``out`` being ``x``, is refused too: nothing here proves
    every kernel reads a row whole before it writes it.)"""
    from tylo.arrays import internal_overlap, overlapping_pair

    if internal_overlap(oa):
        raise SoftmaxError(
            f"softmax: out (shape {tuple(oa.shape)}, strides {tuple(oa.strides)}) has "
            "elements at one address; give it memory of its own, one place per element"
        )
    pair = overlapping_pair({"out": oa}, inputs)
    if pair is not None:
        raise SoftmaxError(
            f"softmax: out and {pair[1]} share memory; give out memory of its own (the "
            "kernels read their inputs while other threads write out)"
        )


def plan_launch(
    out: Any,
    x: Any,
    *,
    mask: Any = None,
    lengths: Any = None,
    style: str | None = None,
) -> tuple[SoftmaxConfig, dict[str, Any]]:
    """Check the arguments of :func:`softmax` and choose its configuration; returns the
    configuration and the launch's runtime values. Raises :class:`SoftmaxError`."""
    xa, oa = _array(x, "x"), _array(out, "out")
    refuse_bad_strides("softmax", "x", xa)
    refuse_bad_strides("softmax", "out", oa)
    _check_rows(xa, "x")
    _check_rows(oa, "out", tuple(xa.shape))
    for a, what in ((xa, "x"), (oa, "out")):
        if a.dtype not in (tylo.f32, tylo.bf16):
            raise SoftmaxError(
                f"softmax: {what} has dtype {a.dtype}; supported: f32 and bf16 (the math is "
                "f32 either way)"
            )
    if xa.device is not None and oa.device is not None and xa.device != oa.device:
        raise SoftmaxError(f"softmax: x is on device {xa.device}, out on {oa.device}")
    if mask is not None and lengths is not None:
        raise SoftmaxError("softmax: give a boolean mask or per-row lengths, not both")
    _refuse_shared_memory(oa, {"x": xa, "mask": mask, "lengths": lengths})
    rows, cols = (int(n) for n in xa.shape)
    ldx, ldo = _ld(xa), _ld(oa)
    kind, aux, ldm = "none", None, 1
    ok = all(
        a.ptr % 16 == 0 and (ld * a.dtype.nbytes) % 16 == 0 for a, ld in ((xa, ldx), (oa, ldo))
    )
    if mask is not None:
        ma = _array(mask, "mask")
        refuse_bad_strides("softmax", "mask", ma)
        _check_rows(ma, "mask", (rows, cols))
        if ma.dtype not in (tylo.bool_, tylo.u8):
            raise SoftmaxError(f"softmax: mask must be bool (or uint8), got {ma.dtype}")
        kind, aux, ldm = "bool", mask, _ld(ma)
    elif lengths is not None:
        la = _array(lengths, "lengths")
        if la.ndim != 1 or la.shape[0] != rows:
            raise SoftmaxError(
                f"softmax: lengths must be 1-D with one entry per row ({rows}), got shape "
                f"{tuple(la.shape)}"
            )
        if la.dtype is not tylo.i32:
            raise SoftmaxError(f"softmax: lengths must be int32, got {la.dtype}")
        if rows > 1 and la.strides[0] != 1:
            raise SoftmaxError("softmax: lengths must be contiguous")
        kind, aux = "length", lengths
    vec = vector_width(xa.dtype.nbytes, cols, ok) if cols else 1
    if style == "mma" and vec < 2:  # MMA rows move element pairs: 2-element alignment
        pairs = all(
            a.ptr % (2 * a.dtype.nbytes) == 0 and ld % 2 == 0 for a, ld in ((xa, ldx), (oa, ldo))
        )
        vec = 2 if pairs and cols % 2 == 0 else 1
    if kind == "bool" and vec >= 4:  # the mask's bytes move vec at a time too
        ma = _array(mask, "mask")
        while vec >= 4 and (ma.ptr % vec or ldm % vec):
            vec //= 2
    cfg = None
    if cols:
        cfg = choose_config(
            rows,
            cols,
            vec=vec,
            itemsize=xa.dtype.nbytes,
            mask=kind,
            style=style,
            cc=device_cc(xa.device or 0),
        )
        if cfg.prefetch and not _fits_31_bits(rows, cols, ldx, ldo, ldm):
            cfg = dataclasses.replace(cfg, prefetch=False)  # its index math is 32-bit
    values = {
        "rows": rows,
        "cols": cols,
        "ldo": ldo,
        "ldx": ldx,
        "ldm": ldm,
        "aux": aux,
        "itemsize": xa.dtype.nbytes,
    }
    return cfg, values  # type: ignore[return-value]


def _fits_31_bits(rows: int, cols: int, *lds: int) -> bool:
    return all(rows * ld + cols < 2**31 for ld in lds)


def launch_shape(cfg: SoftmaxConfig, rows: int, itemsize: int) -> tuple[int, int]:
    """(blocks, dynamic shared bytes) of a launch: one block per ``block_rows`` rows, or
    for ``prefetch`` a persistent grid of one block per SM (each walks rows ``bid, bid +
    grid, ...``) with two row stages of shared memory."""
    if not isinstance(cfg, SoftmaxConfig):
        raise SoftmaxError(f"softmax: cfg must be a SoftmaxConfig, got {cfg!r}")
    if type(rows) is not int or rows < 0 or type(itemsize) is not int or itemsize < 1:
        raise SoftmaxError(
            f"softmax: rows must be an int >= 0 and itemsize an int >= 1, got {rows!r}, "
            f"{itemsize!r}"
        )
    if not cfg.prefetch:
        return cfg.grid(rows), 0
    shared = prefetch_bytes(cfg, itemsize)
    # resident blocks per SM: threads (2048), shared memory (the device's per block: 227 KiB
    # on sm_90), registers (64 each)
    capacity = shared_capacity(device_cc())
    per_sm = max(1, min(2048 // cfg.threads, capacity // shared, 65536 // (64 * cfg.threads)))
    return min(rows, per_sm * multiprocessors()), shared


@functools.lru_cache(maxsize=8)
def device_cc(ordinal: int = 0) -> tuple[int, int]:
    """The device's compute capability ((9, 0) without a device: plan for the H200)."""
    from tylo.target import Target

    try:
        return Target.from_device(ordinal).cc
    except Exception:  # noqa: BLE001 - no driver or no device
        return (9, 0)


@functools.lru_cache(maxsize=8)
def multiprocessors(ordinal: int = 0) -> int:
    """The device's SM count (:data:`~tylo.ops.softmax.plan.SMS` without a device)."""
    try:
        return tylo.device_properties(ordinal).sm_count
    except tylo.NoDeviceError:  # no driver or no device: plan for the H200's count
        return SMS


def softmax(
    out: Any,
    x: Any,
    *,
    mask: Any = None,
    lengths: Any = None,
    style: str | None = None,
    cfg: SoftmaxConfig | None = None,
    stream: Any = None,
) -> SoftmaxConfig | None:
    """``out[r, :] = softmax(x[r, :])`` along rows of the 2-D device array ``x`` (f32 or
    bf16; ``out`` of the same shape, f32 or bf16; DeviceBuffers, torch, CuPy, JAX).

    Masking: ``mask`` (bool, ``x``'s shape, True keeps an element) or ``lengths`` (int32,
    one per row: columns ``< lengths[r]`` are kept). Masked elements and ``-inf`` inputs
    give 0; a row with nothing kept gives zeros. ``style`` ('lane', 'warp', 'mma') forces
    an ownership style; ``cfg`` a whole configuration. Returns the configuration used
    (None for an empty array)."""
    chosen, v = plan_launch(out, x, mask=mask, lengths=lengths, style=style)
    if v["rows"] == 0 or v["cols"] == 0:
        return None
    if cfg is None:
        cfg = chosen
    elif not isinstance(cfg, SoftmaxConfig):
        raise SoftmaxError(f"softmax: cfg must be a SoftmaxConfig (or None), got {cfg!r}")
    else:
        if cfg.mask != chosen.mask:
            raise SoftmaxError(
                f"softmax: cfg is for mask {cfg.mask!r}, the call has {chosen.mask!r}"
            )
        if not cfg.fits(v["cols"]) or cfg.vec > chosen.vec:
            raise SoftmaxError(
                f"softmax: the configuration ({cfg.describe()}) cannot take rows of "
                f"{v['cols']} elements with vectors of at most {chosen.vec}"
            )
    if cfg.prefetch:
        if cfg.vec * v["itemsize"] < 4:
            raise SoftmaxError(
                "softmax: prefetching copies vectors of at least 4 bytes; these rows allow "
                f"{cfg.vec * v['itemsize']}-byte accesses"
            )
        if prefetch_bytes(cfg, v["itemsize"]) > PREFETCH_SHARED:
            raise SoftmaxError(
                f"softmax: prefetching rows of {cfg.tile_cols} elements needs "
                f"{prefetch_bytes(cfg, v['itemsize'])} bytes of shared memory (at most "
                f"{PREFETCH_SHARED})"
            )
        if not _fits_31_bits(v["rows"], v["cols"], v["ldx"], v["ldo"], v["ldm"]):
            raise SoftmaxError("softmax: the prefetch kernel's offsets must fit in 31 bits")
    grid, shared = launch_shape(cfg, v["rows"], v["itemsize"])
    kernel_for(cfg)[grid, cfg.threads](
        cfg,
        out,
        x,
        v["aux"],
        v["rows"],
        v["cols"],
        v["ldo"],
        v["ldx"],
        v["ldm"],
        shared=shared,
        stream=stream,
    )
    return cfg


def compile_softmax(
    cfg: SoftmaxConfig, dtype: Any = "f32", out_dtype: Any = None, target: Any = "sm_90a"
) -> Any:
    """Compile the kernel of ``cfg`` for ``dtype`` input and ``out_dtype`` output (default:
    the same) without a GPU; returns the :class:`~tylo.kernel.CompiledKernel`."""
    from tylo.target import Target

    if cfg.prefetch and Target.parse(target).cc < PREFETCH_MIN_CC:
        raise SoftmaxError(
            f"softmax: the prefetch kernel is for sm_90 and newer, not {target} (ptxas for "
            "older targets duplicates its loop and spills); use prefetch=False"
        )
    d = _DTYPES.get(dtype, dtype) if isinstance(dtype, str) else dtype
    od = d if out_dtype is None else (_DTYPES.get(out_dtype, out_dtype))
    # pointer specs as a launch binds them (no alignment known): the kernel states what
    # it needs (tylo.assume_aligned), exactly as when it runs
    aux = None
    if cfg.mask == "length":
        aux = tylo.pointer(tylo.i32)
    elif cfg.mask == "bool":
        aux = tylo.pointer(tylo.bool_)
    return kernel_for(cfg).compile(
        cfg,
        tylo.pointer(od),
        tylo.pointer(d),
        aux,
        int,
        int,
        int,
        int,
        int,
        block=cfg.threads,
        target=target,
    )


# ---------------------------------------------------------------------------- reference


def reference(
    x: np.ndarray, mask: np.ndarray | None = None, lengths: np.ndarray | None = None
) -> np.ndarray:
    """The float64 row softmax of ``x`` with the same masking rules as :func:`softmax`:
    masked and ``-inf`` elements give 0, rows with nothing kept give zeros."""
    x64 = np.asarray(x, dtype=np.float64)
    keep = np.ones(x64.shape, dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    if lengths is not None:
        keep = keep & (np.arange(x64.shape[1])[None, :] < np.asarray(lengths)[:, None])
    v = np.where(keep, x64, -np.inf)
    m = v.max(axis=1, keepdims=True) if v.shape[1] else np.zeros((v.shape[0], 1))
    empty = m == -np.inf
    with np.errstate(invalid="ignore", over="ignore"):
        e = np.where(keep & ~empty, np.exp(v - np.where(empty, 0.0, m)), 0.0)
    s = e.sum(axis=1, keepdims=True)
    return np.where(s > 0, e / np.where(s > 0, s, 1.0), 0.0)


def _bf16_round(x: np.ndarray) -> np.ndarray:
    """f32 values rounded to bf16 (nearest even), as uint16 bits."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    out = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(x), np.uint16(0x7FC0), out)


def _bf16_value(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def make_inputs(
    rows: int, cols: int, mask: str, rng: np.random.Generator, *, special: bool = True
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """Random test data: ``x`` (f32, scale 3), with (``special``) scattered ``-inf``
    entries and a row of all ``-inf``; a bool mask (80% kept, some rows fully masked, one
    row fully kept) or int32 lengths (from below 0 to past ``cols``, a 0 and a ``cols``)."""
    x = (3.0 * rng.standard_normal((rows, cols))).astype(np.float32)
    if special:
        x[rng.random((rows, cols)) < 0.02] = -np.inf
        if rows > 2:
            x[rows // 2] = -np.inf
    bool_mask = lengths = None
    if mask == "bool":
        bool_mask = rng.random((rows, cols)) < 0.8
        bool_mask[rng.random(rows) < 0.1] = False
        if rows > 1:
            bool_mask[0] = False
            bool_mask[-1] = True
    elif mask == "length":
        lengths = rng.integers(-2, cols + 3, size=rows).astype(np.int32)
        lengths[0] = 0
        if rows > 1:
            lengths[-1] = cols
    return x, bool_mask, lengths


def verify(
    rows: int,
    cols: int,
    *,
    style: str | None = None,
    dtype: str = "f32",
    out_dtype: str | None = None,
    mask: str = "none",
    use_torch: bool = False,
    seed: int | None = None,
    pad: int = 0,
    special: bool = True,
    cfg: SoftmaxConfig | None = None,
) -> dict[str, Any]:
    """Softmax of fresh random data on the GPU (``out`` poisoned with NaN first; rows
    padded by ``pad`` elements) against :func:`reference`. Returns the configuration, the
    seed and the errors; raises AssertionError when an element is wrong or unwritten."""
    if seed is None:
        seed = int.from_bytes(os.urandom(4), "little")
    if dtype not in _DTYPES or (out_dtype or dtype) not in _DTYPES:
        raise SoftmaxError(f"verify: dtypes must be in {tuple(_DTYPES)}")
    out_dtype = out_dtype or dtype
    rng = np.random.default_rng(seed)
    x, bmask, lengths = make_inputs(rows, cols, mask, rng, special=special)
    ld = cols + pad
    storage = np.zeros((rows, ld), np.float32)
    storage[:, :cols] = x
    if dtype == "bf16":
        bits = _bf16_round(storage)
        x = _bf16_value(bits)[:, :cols]
        payload = bits
    else:
        payload = storage
    want = reference(x, bmask, lengths)
    used, got = _run(
        payload, rows, cols, ld, dtype, out_dtype, bmask, lengths, style, cfg, use_torch
    )
    where = (
        f"softmax {rows}x{cols} {dtype}->{out_dtype} mask {mask} seed {seed} ({used.describe()})"
    )
    unwritten = ~np.isfinite(got)
    if unwritten.any():
        r, c = np.argwhere(unwritten)[0]
        raise AssertionError(
            f"{where}: {int(unwritten.sum())} elements NaN/inf or unwritten; first at "
            f"({r}, {c}): got {got[r, c]}, want {want[r, c]}"
        )
    rtol, atol = (1e-5, 1e-7) if out_dtype == "f32" else (8e-3, 1e-6)
    err = np.abs(got - want)
    bad = ~(err <= atol + rtol * np.abs(want))
    if bad.any():
        r, c = np.argwhere(bad)[0]
        raise AssertionError(
            f"{where}: {int(bad.sum())} wrong elements; first at ({r}, {c}): got "
            f"{got[r, c]!r}, want {want[r, c]!r}"
        )
    norm = float(np.linalg.norm(want))
    rel = float(np.linalg.norm(got - want) / norm) if norm > 0 else float(err.max(initial=0.0))
    return {"config": used, "seed": seed, "rel_error": rel, "max_abs_error": float(err.max())}


def _run(
    payload: np.ndarray,
    rows: int,
    cols: int,
    ld: int,
    dtype: str,
    out_dtype: str,
    bmask: np.ndarray | None,
    lengths: np.ndarray | None,
    style: str | None,
    cfg: SoftmaxConfig | None,
    use_torch: bool,
) -> tuple[SoftmaxConfig, np.ndarray]:
    """Launch on ``payload`` (f32 values, or bf16 bits) and return (config, f64 result)."""
    if use_torch:
        import torch

        tdt = {"f32": torch.float32, "bf16": torch.bfloat16}
        if dtype == "bf16":
            dx = torch.from_numpy(payload.view(np.int16)).cuda().view(torch.bfloat16)
        else:
            dx = torch.from_numpy(payload).cuda()
        dx = dx[:, :cols]
        dout = torch.full((rows, ld), float("nan"), dtype=tdt[out_dtype], device="cuda")
        dout = dout[:, :cols]
        dm = None if bmask is None else torch.from_numpy(bmask).cuda()
        dl = None if lengths is None else torch.from_numpy(lengths).cuda()
        used = softmax(dout, dx, mask=dm, lengths=dl, style=style, cfg=cfg)
        torch.cuda.synchronize()
        got = dout.float().cpu().numpy().astype(np.float64)
        return used, got  # type: ignore[return-value]
    from tylo.arrays import DeviceArray, DeviceBuffer
    from tylo.backend import driver

    d = _DTYPES[dtype]
    od = _DTYPES[out_dtype]
    xbuf = DeviceBuffer.from_numpy(payload, dtype=d)
    dx = DeviceArray(xbuf.ptr, (rows, cols), (ld, 1), d, xbuf.device, owner=xbuf)
    obuf = DeviceBuffer.empty((rows, ld), od).fill_bytes(0xFF)  # NaN poison
    dout = DeviceArray(obuf.ptr, (rows, cols), (ld, 1), od, obuf.device, owner=obuf)
    dm = None if bmask is None else DeviceBuffer.from_numpy(bmask, dtype=tylo.bool_)
    dl = None if lengths is None else DeviceBuffer.from_numpy(lengths)
    used = softmax(dout, dx, mask=dm, lengths=dl, style=style, cfg=cfg)
    driver.synchronize()
    raw = obuf.to_numpy()
    full = (_bf16_value(raw) if out_dtype == "bf16" else raw).astype(np.float64)
    if ld > cols and not np.isnan(full[:, cols:]).all():
        raise AssertionError(
            f"softmax {rows}x{cols}: the row padding (columns {cols}..{ld - 1}) was written"
        )
    return used, full[:, :cols]  # type: ignore[return-value]
