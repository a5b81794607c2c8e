"""Which GEMM kernel runs a checked call of :func:`tylo.ops.gemm.gemm`: the Hopper kernel on
an sm_90 device (it packs unaligned operands and hands what it does not take to the
warp-MMA kernel itself), the warp-MMA kernel elsewhere."""

from __future__ import annotations

from typing import Any

from tylo.ops.args import OpArgumentError

__all__ = ["flat", "kernel_call", "launch_gemm", "takes_hopper"]


def flat(x: Any) -> Any:
    """``x`` as the 1-D run of elements its strides span, from its first element: the
    kernels take a base address and leading dimensions, not a view, and refuse a view that
    is not C-contiguous (they would read it as one). Keeps ``x`` alive as the owner."""
    from tylo.arrays import DeviceArray, as_device_array

    arr = as_device_array(x)
    span = 1 + sum((n - 1) * s for n, s in zip(arr.shape, arr.strides) if n > 0)
    return DeviceArray(arr.ptr, (span,), (1,), arr.dtype, arr.device, owner=x)


def kernel_call(desc: dict[str, Any], out: Any, a: Any, b: Any) -> tuple:
    """``(d, a, b, m, n, k, lda, ldb, ldd)`` for the kernels' convention (D M-contiguous): a
    column-major ``out`` as it is, a row-major one as ``outᵀ = bᵀ aᵀ`` (the same memory).
    The arrays are passed as the flat runs of elements they span (:func:`flat`)."""
    out, a, b = flat(out), flat(a), flat(b)
    m, n, k = desc["m"], desc["n"], desc["k"]
    lda, ldb, ldo = desc["lda"], desc["ldb"], desc["ldo"]
    if desc["row_major"]:
        return (out, b, a, n, m, k, ldb, lda, ldo)
    return (out, a, b, m, n, k, lda, ldb, ldo)


def takes_hopper(device: int | None) -> bool:
    """True where the Hopper kernel runs: a device of compute capability 9.0."""
    from tylo.ops.attention.host import device_capability

    return device_capability(device) == (9, 0)


def launch_gemm(
    desc: dict[str, Any], out: Any, a: Any, b: Any, *, alpha: float, relu: bool, stream: Any
) -> str:
    """Launch the checked call; returns the path that ran ('hopper', 'hopper-packed' or
    'warp')."""
    if stream is None:  # the flat views hide the torch tensors from the launcher
        from tylo.kernel.torch_streams import note_type, torch_stream

        note_type(type(a))
        stream = torch_stream((a, b, out), None)
    call = kernel_call(desc, out, a, b)
    if takes_hopper(desc["device"]):
        from tylo.ops.gemm.hopper_host import gemm as hopper_gemm

        return hopper_gemm(*call, alpha=alpha, relu=relu, stream=stream)
    if desc["out_dtype"].name != "f32":
        raise OpArgumentError(
            f"tylo.ops.gemm: out is {desc['out_dtype'].name}; off sm_90 the warp-MMA kernel "
            "writes f32 only: pass an f32 out (or out_dtype=None)"
        )
    from tylo.ops.gemm.host import gemm as warp_gemm

    warp_gemm(*call, alpha=alpha, relu=relu, stream=stream)
    return "warp"
