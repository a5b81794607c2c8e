"""The arrays the ops take and make: read one argument as a :class:`~tylo.arrays.DeviceArray`
with errors that name it, allocate an output of the same kind as an input (a torch tensor
for torch inputs, else a :class:`~tylo.arrays.DeviceBuffer`), and refuse strides a kernel
cannot honour. One place, so that every op reads and refuses arrays the same way."""

from __future__ import annotations

import sys
from typing import Any

from tylo.arrays import DeviceArray, DeviceBuffer, as_device_array
from tylo.errors import TyloError
from tylo.ops.args import OpArgumentError

__all__ = [
    "as_array",
    "capture_guard",
    "empty_like_kind",
    "is_torch",
    "refuse_bad_strides",
    "torch_dtype",
]


def is_torch(x: Any) -> bool:
    """True for a torch tensor (torch is not imported to find out: none can exist without)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def capture_guard(x: Any) -> Any:
    """A context for an op's launches: inside a CUDA-graph capture of torch's current stream
    (``torch.cuda.graph``; ``x`` a torch tensor), whatever would allocate through the driver,
    synchronize, copy from the host or compile raises
    :class:`~tylo.backend.capture.CaptureError` instead (see :mod:`tylo.backend.capture`)."""
    from tylo.backend.capture import capture_scope

    active = is_torch(x) and x.is_cuda and sys.modules["torch"].cuda.is_current_stream_capturing()
    return capture_scope(active)


def as_array(op: str, what: str, x: Any, *, ndim: int | None = None) -> DeviceArray:
    """``x`` as a device array (DLPack, ``__cuda_array_interface__``, DeviceBuffer, torch),
    of ``ndim`` dimensions where given; :class:`OpArgumentError` naming ``what`` otherwise."""
    if x is None or isinstance(x, (bool, int, float, str, bytes)):
        raise OpArgumentError(
            f"{op}: {what} must be a device array (torch tensor, DeviceBuffer, CuPy, ...), "
            f"got {type(x).__name__}"
        )
    try:
        arr = as_device_array(x)
    except TyloError as err:
        raise OpArgumentError(f"{op}: {what}: {err}") from None
    if ndim is not None and arr.ndim != ndim:
        raise OpArgumentError(
            f"{op}: {what} must have {ndim} dimensions, got shape {tuple(arr.shape)}"
        )
    return arr


def refuse_bad_strides(op: str, what: str, arr: DeviceArray) -> None:
    """Refuse a zero or negative stride on a mode of more than one element: no kernel of
    tylo.ops honours them (a zero stride would make an output's elements alias; a negative
    one is not what the kernels' offsets assume), and rewriting them would be a wrong
    answer given silently. An array of no elements addresses nothing, so any strides pass.

    Every entry point of tylo.ops applies this to its outputs (the array-level ops to their
    inputs too), so the refusal reads the same on every path."""
    if any(n == 0 for n in arr.shape):
        return
    for i, (n, s) in enumerate(zip(arr.shape, arr.strides)):
        if n > 1 and s <= 0:
            raise OpArgumentError(
                f"{op}: {what} has stride {s} on dimension {i} (extent {n}); tylo.ops takes "
                "positive strides only: pass a copy with positive strides"
            )


def torch_dtype(dtype: Any) -> Any:
    """The torch dtype of a tylo dtype."""
    import torch

    return {
        "bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32,
        "i32": torch.int32, "i64": torch.int64, "u8": torch.uint8,
    }[dtype.name]  # fmt: skip


def empty_like_kind(like: Any, shape: tuple[int, ...], dtype: Any, device: int | None) -> Any:
    """A fresh C-contiguous array of ``shape`` and ``dtype`` on ``device``: a torch tensor
    when ``like`` is one (so torch's caching allocator and stream semantics apply), else a
    :class:`~tylo.arrays.DeviceBuffer`."""
    if is_torch(like):
        import torch

        return torch.empty(shape, dtype=torch_dtype(dtype), device=like.device)
    return DeviceBuffer.empty(shape, dtype, device=device or 0)
