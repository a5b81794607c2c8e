"""The warp-path attention kernel of tylo/ops/attention (cp.async, ldmatrix, mma.sync,
online softmax) runs in the interpreter at small shapes and meets the example's own
verification bounds against the float64 reference (o: relative max-norm 1e-2, the
bf16 rounding of P and o; lse: 1e-3)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import tylo
from tylo.interpret import HostArray
from tylo.interpret.numerics import bf16_to_f32, f32_to_bf16


@pytest.mark.parametrize(("lq", "causal", "padding"), [(17, False, False), (17, True, True)])
def test_attention_warp_path(lq: int, causal: bool, padding: bool) -> None:
    from tylo.constants import LOG2E as _LOG2E
    from tylo.ops.attention.host import CAUSAL_GROUPS, launch_config
    from tylo.ops.attention.kernel import attention_kernel
    from tylo.ops.attention.reference import attention_reference

    b, h, d = 1, 2, 64
    rng = np.random.default_rng(12)
    q, k, v = (f32_to_bf16(rng.standard_normal((b, h, lq, d)).astype(np.float32))
               for _ in range(3))  # fmt: skip
    kv = np.array([lq - 5], np.int32) if padding else None
    cfg = launch_config(d, tylo.bf16, causal=causal, padding=padding, aligned=True,
                        capability=(8, 0))  # fmt: skip
    out = np.full((b, h, lq, d), 0x7FFF, np.uint16)
    lse = np.full((b, h, lq), np.nan, np.float32)
    strides = [h * lq * d, lq * d, d] * 4
    bf = tylo.bf16
    attention_kernel.interpret[cfg.grid(b, h, lq), cfg.threads](
        cfg, HostArray(out, bf), lse, HostArray(q, bf), HostArray(k, bf), HostArray(v, bf), kv,
        lq, lq, h, *strides, _LOG2E / math.sqrt(d), min(b * h, CAUSAL_GROUPS[d]),
        shared=cfg.shared_bytes,
    )  # fmt: skip
    ro, rl = attention_reference(bf16_to_f32(q), bf16_to_f32(k), bf16_to_f32(v),
                                 causal=causal, kv_lens=kv)  # fmt: skip
    got = bf16_to_f32(out.view(np.int16)).astype(np.float64)
    assert np.isfinite(got).all()
    assert np.abs(got - ro).max() / np.abs(ro).max() <= 1e-2
    assert np.array_equal(np.isneginf(lse), np.isneginf(rl))
    fin = ~np.isneginf(rl)
    assert np.abs(lse[fin] - rl[fin]).max() <= 1e-3
