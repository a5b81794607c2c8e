"""The stream of a launch given no ``stream``: torch's current stream when a torch tensor
is among the arguments, else the legacy default stream (handle 0).

PyTorch queues each tensor's work on the *current* stream of its device
(``torch.cuda.current_stream``, set by ``with torch.cuda.stream(s):``). A tylo launch that
ignored it would race with the work torch queued there: the kernel could read an input
before the copy that writes it has run. So a launch with ``stream=None`` whose arguments
include a CUDA tensor runs on the current stream of that tensor's device, as Triton's
launches do; an explicit ``stream=`` always wins, and without torch nothing changes.

The check costs one list lookup per launch until the first torch tensor reaches a kernel
(:data:`SEEN`, set when a kernel makes a reader for a tensor type); after that, one type
test per argument up to the first tensor, then torch's raw current-stream query.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["SEEN", "note_type", "torch_inline", "torch_stream"]

SEEN = [False]  # a torch tensor type has reached a kernel's reader in this process
_TENSOR_TYPES: set[type] = set()
_RAW: list[Any] = []  # torch's current-stream query, found on first use


def note_type(t: type) -> None:
    """Remember ``t`` if it is a torch tensor type (``torch.Tensor`` or a subclass)."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(t, type) and issubclass(t, torch.Tensor):
        _TENSOR_TYPES.add(t)
        SEEN[0] = True


def _raw_stream() -> Any:
    if not _RAW:
        import torch

        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        if raw is None:  # older torch: the public query (a little slower)

            def raw(index: int) -> int:
                return torch.cuda.current_stream(index).cuda_stream

        _RAW.append(raw)
    return _RAW[0]


def torch_stream(args: Any, kwargs: Any) -> int | None:
    """The current torch stream's handle of the first CUDA tensor among ``args`` (then
    ``kwargs``' values), or None when there is none."""
    types = _TENSOR_TYPES
    for a in args:
        if type(a) in types:
            index = a.get_device()
            if index >= 0:
                return _raw_stream()(index)
    if kwargs:
        return torch_stream(tuple(kwargs.values()), None)
    return None


def torch_inline(inline: Any, args: Any) -> Any:
    """The inline launch to keep for ``args``: as it is without torch tensors; with them,
    wrapped so that the C dispatch (which launches on the legacy stream) leaves it to the
    Python launcher, which passes torch's current stream."""
    if inline is None or not any(type(a) in _TENSOR_TYPES for a in args):
        return inline

    def with_torch_stream(dims: Any, a: Any, shared: int, stream: Any) -> bool:
        return inline(dims, a, shared, stream)

    with_torch_stream.__wrapped__ = inline  # type: ignore[attr-defined]  # what it wraps
    return with_torch_stream
