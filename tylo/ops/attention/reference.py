"""The float64 reference of the attention example, and the semantics every kernel path keeps.

Shapes: ``q`` is (B, H, Lq, D), ``k`` and ``v`` are (B, H, Lk, D). ``scale`` defaults to
``1/sqrt(D)``. A batch entry's key length is ``n = min(max(kv_lens[b], 0), Lk)``: the given
length (``kv_lens``, optional: per-batch key lengths, padding; default Lk) clamped to
``[0, Lk]`` first, a negative one to 0 and one past Lk to Lk. Key ``j`` is visible to query
``i`` of batch entry ``b`` when

- ``j < n``, and
- with ``causal=True``, ``j <= i + n - Lq``: the causal diagonal aligned to the
  bottom-right corner of the (Lq, n) score matrix, as FlashAttention does when Lq != Lk.
  The diagonal sits at the clamped length: ``kv_lens = [Lk + 5]`` masks exactly as
  ``[Lk]``, and ``[-3]`` as ``[0]`` (every row empty).

Both kernels clamp the same way (``tylo/ops/attention/kernel.py`` and the Hopper kernels:
``minimum(maximum(kv_lens[b], 0), Lk)`` before the mask is placed), and the Hopper host
clamps host-given lengths before copying them, so every path keeps this meaning.

Outputs: ``o`` (B, H, Lq, D) and ``lse`` (B, H, Lq), the natural-log log-sum-exp of the
scaled visible scores, ``lse = log(sum_j exp(scale * q_i . k_j))``. A row with no visible key
has ``o = 0`` and ``lse = -inf`` (never NaN).

>>> import numpy as np
>>> q = np.ones((1, 1, 2, 4)); k = np.ones((1, 1, 3, 4)); v = np.arange(12.0).reshape(1, 1, 3, 4)
>>> o, lse = attention_reference(q, k, v, causal=True)
>>> o[0, 0, 0].tolist(), o[0, 0, 1].tolist()
([2.0, 3.0, 4.0, 5.0], [4.0, 5.0, 6.0, 7.0])
>>> o, lse = attention_reference(q, k, v, kv_lens=[0])
>>> o[0, 0].tolist(), lse[0, 0].tolist()
([[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]], [-inf, -inf])
>>> bool((visible(2, 3, causal=True, kv_len=9) == visible(2, 3, causal=True, kv_len=3)).all())
True
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tylo.errors import TyloError

__all__ = [
    "AttentionInputError",
    "attention_flops",
    "attention_reference",
    "refuse_shared_memory",
    "visible",
]


class AttentionInputError(TyloError, ValueError):
    """Attention inputs whose shapes, dtypes or options the example does not take."""


def refuse_shared_memory(op: str, outputs: dict, inputs: dict) -> None:
    """Raise :class:`AttentionInputError` where an output certainly shares memory with
    itself (two elements at one address: :func:`tylo.arrays.internal_overlap`), with an
    input or with another output (:func:`tylo.arrays.overlapping_pair`; None entries
    skipped): the kernels read their inputs while other CTAs write the outputs, and write
    each output element once, so the answer would be wrong without a word."""
    from tylo.arrays import as_device_array, internal_overlap, overlapping_pair

    for name, out in outputs.items():
        if out is not None and internal_overlap(out):
            a = as_device_array(out)
            raise AttentionInputError(
                f"{op}: {name} (shape {tuple(a.shape)}, strides {tuple(a.strides)}) has "
                "elements at one address; give it memory of its own, one place per element"
            )
    pair = overlapping_pair(outputs, inputs)
    if pair is not None:
        raise AttentionInputError(
            f"{op}: {pair[0]} and {pair[1]} share memory; the kernel reads its inputs while "
            f"it writes its outputs: give {pair[0]} memory of its own"
        )


_MASK_LIMIT = 2**28  # elements of one batch entry's mask the host reference makes


def visible(lq: int, lk: int, *, causal: bool = False, kv_len: int | None = None) -> np.ndarray:
    """The (lq, lk) boolean mask of one batch entry: key ``j`` visible to query ``i``. The
    key length ``kv_len`` (None: ``lk``) is clamped to ``[0, lk]`` first, and the causal
    diagonal placed at the clamped length (the module docstring)."""
    from tylo.ops.args import require_bool, require_int

    lq = require_int("visible", "lq", lq, minimum=0)
    lk = require_int("visible", "lk", lk, minimum=0)
    causal = require_bool("visible", "causal", causal)
    if lq * lk > _MASK_LIMIT:
        raise AttentionInputError(
            f"visible: a ({lq}, {lk}) mask has more than {_MASK_LIMIT} elements; the "
            "reference is a float64 check for sizes a CPU holds"
        )
    kv = lk if kv_len is None else min(max(require_int("visible", "kv_len", kv_len), 0), lk)
    i = np.arange(lq)[:, None]
    j = np.arange(lk)[None, :]
    mask = j < kv
    if causal:
        mask = mask & (j <= i + kv - lq)
    return np.broadcast_to(mask, (lq, lk)).copy()


def attention_reference(
    q: Any,
    k: Any,
    v: Any,
    *,
    scale: float | None = None,
    causal: bool = False,
    kv_lens: Any = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``(o, lse)`` in float64 for numpy-convertible ``q``, ``k``, ``v`` (see the module)."""
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    b, h, lq, d = q.shape
    lk = k.shape[2]
    if k.shape != (b, h, lk, d) or v.shape != (b, h, lk, d):
        raise AttentionInputError(
            f"attention_reference: q {q.shape}, k {k.shape}, v {v.shape} disagree"
        )
    sc = 1.0 / np.sqrt(d) if scale is None else float(scale)
    o = np.zeros((b, h, lq, d))
    lse = np.full((b, h, lq), -np.inf)
    for bi in range(b):
        kv = None if kv_lens is None else int(kv_lens[bi])
        mask = visible(lq, lk, causal=causal, kv_len=kv)
        rows = mask.any(axis=1)
        s = np.matmul(q[bi], k[bi].transpose(0, 2, 1)) * sc  # (H, Lq, Lk), through BLAS
        s = np.where(mask[None], s, -np.inf)
        mx = np.where(rows[None, :, None], s.max(axis=2, keepdims=True, initial=-np.inf), 0.0)
        p = np.exp(s - mx)  # exp(-inf) = 0 for hidden keys
        total = p.sum(axis=2, keepdims=True)
        safe = np.where(total > 0, total, 1.0)
        o[bi] = np.matmul(p, v[bi]) / safe
        with np.errstate(divide="ignore"):
            lse[bi] = np.where(rows[None], (mx + np.log(safe))[..., 0], -np.inf)
    return o, lse


def attention_flops(b: int, h: int, lq: int, lk: int, d: int, *, causal: bool = False) -> float:
    """The FLOP count benchmarks report: ``4 B H Lq Lk D``, halved for causal."""
    f = 4.0 * b * h * lq * lk * d
    return f / 2 if causal else f
