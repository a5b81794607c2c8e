"""``tylo.ops.attention(q, k, v)``: the attention forward for arrays, on the warp-MMA path
(sm_80+) or the Hopper path (sm_90a), chosen by :func:`tylo.ops.attention.host.auto_path`.
The options of each path (tiles, warps, schedules) stay with
:func:`tylo.ops.attention.host.attention` for experts."""

from __future__ import annotations

from typing import Any

from tylo.ops.args import check_scale, require_bool
from tylo.ops.arrays import as_array, capture_guard, refuse_bad_strides

__all__ = ["attention", "check_scale"]


def attention(
    q: Any,
    k: Any,
    v: Any,
    *,
    causal: bool = False,
    kv_lens: Any = None,
    scale: float | None = None,
    out: Any = None,
    return_lse: bool = False,
    stream: Any = None,
) -> Any:
    """``softmax(q kᵀ · scale) v`` for (B, H, L, D) arrays; returns ``out``, or ``(out, lse)``
    with ``return_lse=True`` (``lse`` (B, H, Lq) f32: the log-sum-exp of each row's scaled
    scores, ``-inf`` for a row that sees no key).

    ``q`` (B, H, Lq, D), ``k`` and ``v`` (B, H, Lk, D): bf16 or f16, D of 64 or 128, each
    with a unit last stride and positive strides. ``causal``: bottom-right aligned mask
    (query i sees keys j <= i + Lk - Lq). ``kv_lens``: int32 (B,) key lengths, each
    clamped to [0, Lk] first (a negative one is 0, one past Lk is Lk), the causal diagonal
    placed at the clamped length. ``scale`` (default 1/sqrt(D)): a real number with
    ``|scale| * log2(e)`` finite in f32 (``|scale| <= 2.3585e38`` about). ``out`` (B, H, Lq,
    D) of q's dtype is allocated when not given.
    ``stream``: a CUDA stream handle; with torch tensors and none given, torch's current
    stream. The exact semantics: :mod:`tylo.ops.attention.reference`.
    """
    op = "tylo.ops.attention"
    causal = require_bool(op, "causal", causal)
    return_lse = require_bool(op, "return_lse", return_lse)
    scale = check_scale(op, scale)
    for what, x in (("q", q), ("k", k), ("v", v)):
        refuse_bad_strides(op, what, as_array(op, what, x, ndim=4))
    if out is not None:
        o = as_array(op, "out", out, ndim=4)
        refuse_bad_strides(op, "out", o)
    from tylo.ops.attention.host import attention as run

    with capture_guard(q):
        o, lse = run(q, k, v, causal=causal, kv_lens=kv_lens, scale=scale, out=out, stream=stream)
    return (o, lse) if return_lse else o
