"""``tylo.ops.softmax(x)``: row softmax for arrays along the last dimension, with an
optional boolean mask; the styles and configurations stay with
:func:`tylo.ops.softmax.host.softmax` for experts."""

from __future__ import annotations

from typing import Any

from tylo.ops.args import OpArgumentError, require_int
from tylo.ops.arrays import as_array, capture_guard, empty_like_kind, refuse_bad_strides

__all__ = ["softmax"]


def softmax(x: Any, *, dim: int = -1, mask: Any = None, out: Any = None, stream: Any = None) -> Any:
    """``softmax(x)`` along ``dim`` of the 2-D array ``x`` (f32 or bf16); returns ``out``
    (allocated like ``x``, same dtype, when not given; f32 or bf16, ``x``'s shape).

    ``dim`` must name the last dimension (-1 or 1): the kernels read rows with a unit
    stride. ``mask`` (bool, ``x``'s shape): True keeps an element; masked elements and
    ``-inf`` inputs give 0, and a row with nothing kept gives zeros. ``stream``: a CUDA
    stream handle; with torch tensors and none given, torch's current stream.
    """
    op = "tylo.ops.softmax"
    X = as_array(op, "x", x, ndim=2)
    d = require_int(op, "dim", dim)
    if d not in (-1, 1):
        raise OpArgumentError(
            f"{op}: dim must be the last dimension (-1 or 1), got {d}: "
            "transpose x so that the softmax runs along its rows"
        )
    refuse_bad_strides(op, "x", X)
    if out is None:
        out = empty_like_kind(x, tuple(X.shape), X.dtype, X.device)
    else:
        refuse_bad_strides(op, "out", as_array(op, "out", out, ndim=2))
    from tylo.ops.softmax.host import softmax as run

    with capture_guard(x):
        run(out, x, mask=mask, stream=stream)
    return out
