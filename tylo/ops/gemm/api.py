"""``tylo.ops.gemm(a, b)``: ``a @ b`` for arrays, on the fastest path the operands allow.

``a`` is (M, K) with unit column stride (row-major); ``b`` is (K, N) and is fastest as the
transposed view of an (N, K) row-major array (unit row stride, ``b.stride() == (1, ldb)``);
a row-major ``b`` is copied into that layout first (torch tensors; other arrays are
refused, naming ``b``). ``out`` is (M, N), row-major or column-major. The kernels compute
with D M-contiguous (:mod:`tylo.ops.gemm.kernel`), so a row-major ``out`` is computed as
``outᵀ = bᵀ aᵀ``, which reads the same memory: no copy either way.

Routing: on an sm_90 GPU the Hopper kernel (:mod:`tylo.ops.gemm.hopper_host`: TMA +
wgmma; unaligned operands packed first; f32, bf16 or f16 out); elsewhere the warp-MMA
kernel (:mod:`tylo.ops.gemm.host`, f32 out).
"""

from __future__ import annotations

from typing import Any

from tylo.ops.args import OpArgumentError, f32_scalar, require_bool
from tylo.ops.arrays import as_array, capture_guard, empty_like_kind, is_torch, refuse_bad_strides

__all__ = ["gemm", "gemm_operands"]

_IN = ("bf16", "f16")
_OUT = ("f32", "bf16", "f16")


def _dtype(op: str, what: str, value: Any) -> Any:
    import tylo

    name = getattr(value, "name", value)
    if isinstance(name, str) and name in _OUT:
        return getattr(tylo, name)
    torch_name = str(value).removeprefix("torch.")
    names = {"float32": "f32", "bfloat16": "bf16", "float16": "f16"}
    if torch_name in names:
        return getattr(tylo, names[torch_name])
    raise OpArgumentError(f"{op}: {what} must be one of {_OUT} (or torch's), got {value!r}")


def gemm_operands(a: Any, b: Any, out: Any, out_dtype: Any) -> dict[str, Any]:
    """Check and describe the operands of :func:`gemm` without launching anything: the
    kernel-level call (``d, a, b, m, n, k, lda, ldb, ldd``; the roles of ``a`` and ``b``
    swapped for a row-major ``out``) and the output dtype. Raises
    :class:`~tylo.ops.args.OpArgumentError` naming the argument at fault. ``out`` None:
    the caller allocates a row-major (M, N) output."""
    op = "tylo.ops.gemm"
    A = as_array(op, "a", a, ndim=2)
    B = as_array(op, "b", b, ndim=2)
    (m, k), (k2, n) = A.shape, B.shape
    if k != k2:
        raise OpArgumentError(
            f"{op}: a is {A.shape} and b is {B.shape}: a's columns must equal b's rows"
        )
    if A.dtype.name not in _IN or B.dtype != A.dtype:
        raise OpArgumentError(
            f"{op}: a and b must both be bf16 or both f16, got {A.dtype.name} and {B.dtype.name}"
        )
    if A.device != B.device:
        raise OpArgumentError(f"{op}: a is on device {A.device}, b on {B.device}")
    refuse_bad_strides(op, "a", A)
    refuse_bad_strides(op, "b", B)
    if m > 1 and k > 1 and A.strides[1] != 1:
        raise OpArgumentError(
            f"{op}: a must be row-major (unit column stride), got strides "
            f"{A.strides}: pass a.contiguous()"
        )
    if k > 1 and n > 1 and B.strides[0] != 1:
        raise OpArgumentError(
            f"{op}: b must have unit row stride (the transposed view of an "
            f"(N, K) row-major array), got strides {B.strides}"
        )
    lda = A.strides[0] if m > 1 else max(k, 1)
    ldb = B.strides[1] if n > 1 else max(k, 1)
    dt = None if out_dtype is None else _dtype(op, "out_dtype", out_dtype)
    desc: dict[str, Any] = {"m": m, "n": n, "k": k, "lda": lda, "ldb": ldb, "device": A.device}
    if out is None:
        desc["out_dtype"] = dt
        desc.update(row_major=True, ldo=max(n, 1))
        return desc
    D = as_array(op, "out", out, ndim=2)
    if tuple(D.shape) != (m, n):
        raise OpArgumentError(f"{op}: out must be ({m}, {n}), got {tuple(D.shape)}")
    if D.dtype.name not in _OUT or (dt is not None and D.dtype != dt):
        raise OpArgumentError(
            f"{op}: out is {D.dtype.name}; it must be one of {_OUT}"
            + ("" if dt is None else f" and equal out_dtype {dt.name}")
        )
    if D.device != A.device:
        raise OpArgumentError(f"{op}: out is on device {D.device}, a on {A.device}")
    refuse_bad_strides(op, "out", D)
    if n == 1 or D.strides[1] == 1:
        row_major, ldo = True, (D.strides[0] if m > 1 else max(n, 1))
    elif m == 1 or D.strides[0] == 1:
        row_major, ldo = False, (D.strides[1] if n > 1 else max(m, 1))
    else:
        raise OpArgumentError(f"{op}: out must be row- or column-major, got strides {D.strides}")
    if ldo < (n if row_major else m):
        raise OpArgumentError(f"{op}: out's rows overlap (leading dimension {ldo})")
    desc.update(out_dtype=D.dtype, row_major=row_major, ldo=ldo)
    return desc


def gemm(
    a: Any,
    b: Any,
    *,
    out: Any = None,
    alpha: float = 1.0,
    relu: bool = False,
    out_dtype: Any = None,
    stream: Any = None,
) -> Any:
    """``out = alpha * a @ b`` (``relu=True``: ``max(., 0)``) and return ``out``.

    ``a`` (M, K) and ``b`` (K, N): bf16 or f16 device arrays (torch tensors, DeviceBuffers,
    CuPy, ...), on one device. ``out`` (M, N) is allocated (row-major, of ``a``'s kind) when
    not given; its dtype is ``out_dtype`` (f32 by default; bf16 and f16 on the Hopper path).
    ``alpha`` must be a real number whose f32 rounding is finite (|alpha| <= 3.4028235e38);
    ``relu`` True or False. Strides: see :mod:`tylo.ops.gemm.api`; zero and negative
    strides are refused. ``stream``: a CUDA stream handle; with torch tensors and none
    given, torch's current stream. K = 0 gives zeros.
    """
    op = "tylo.ops.gemm"
    relu = require_bool(op, "relu", relu)
    alpha = f32_scalar(op, "alpha", alpha)
    if is_torch(b) and b.dim() == 2 and b.shape[0] > 1 and b.shape[1] > 1 and b.stride(0) != 1:
        b = b.t().contiguous().t()  # the (N, K) row-major storage the kernels read
    desc = gemm_operands(a, b, out, out_dtype)
    m, n, k = desc["m"], desc["n"], desc["k"]
    if out is None:
        import tylo

        dt = desc["out_dtype"] or tylo.f32
        out = empty_like_kind(a, (m, n), dt, desc["device"])
        desc = gemm_operands(a, b, out, dt)
    if m == 0 or n == 0:
        return out
    if k == 0:
        _zero(out)
        return out
    from tylo.ops.gemm.route import launch_gemm

    with capture_guard(a):
        launch_gemm(desc, out, a, b, alpha=alpha, relu=relu, stream=stream)
    return out


def _zero(out: Any) -> None:
    from tylo.arrays import DeviceBuffer

    if is_torch(out):
        out.zero_()
    elif isinstance(out, DeviceBuffer):
        out.fill_bytes(0)
    else:
        raise OpArgumentError(
            "tylo.ops.gemm: K = 0 with an out that is neither a torch "
            "tensor nor a DeviceBuffer: fill it with zeros yourself"
        )
