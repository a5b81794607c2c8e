"""The Hopper attention forward checked on the GPU: :func:`verify` runs
:func:`~tylo.ops.attention.hopper_host.hopper_attention` on fresh random data (outputs
poisoned with NaN first) against the float64 reference."""

from __future__ import annotations

from typing import Any

import numpy as np

from tylo.ops.attention.hopper_host import hopper_attention
from tylo.ops.attention.reference import attention_reference

__all__ = ["verify"]


def verify(
    b: int,
    h: int,
    lq: int,
    d: int,
    *,
    lk: int | None = None,
    dtype: str = "bf16",
    causal: bool = False,
    kv_lens: Any = None,
    seed: int | None = None,
    tolerance: float = 2e-2,
    cfg: Any = None,
) -> dict:
    """Run on fresh random data (outputs poisoned with NaN first) and compare with the
    float64 reference; raises AssertionError beyond ``tolerance`` (max abs error of o over
    max |o|, and of lse). ``cfg`` overrides the default configuration."""
    import torch

    lk = lq if lk is None else lk
    g = torch.Generator(device="cuda")
    g.manual_seed(seed if seed is not None else int(np.random.default_rng().integers(2**31)))
    tdt = torch.bfloat16 if dtype == "bf16" else torch.float16
    q = torch.randn(b, h, lq, d, device="cuda", generator=g).to(tdt)
    k = torch.randn(b, h, lk, d, device="cuda", generator=g).to(tdt)
    v = torch.randn(b, h, lk, d, device="cuda", generator=g).to(tdt)
    out = torch.full((b, h, lq, d), float("nan"), device="cuda", dtype=tdt)
    lse = torch.full((b, h, lq), float("nan"), device="cuda")
    hopper_attention(q, k, v, causal=causal, kv_lens=kv_lens, out=out, lse=lse, cfg=cfg)
    torch.cuda.synchronize()
    want_o, want_l = attention_reference(
        q.double().cpu().numpy(),
        k.double().cpu().numpy(),
        v.double().cpu().numpy(),
        causal=causal,
        kv_lens=kv_lens,
    )
    got_o = out.double().cpu().numpy()
    got_l = lse.double().cpu().numpy()
    if np.isnan(got_o).any() or np.isnan(got_l).any():
        raise AssertionError(f"hopper_attention {b}x{h}x{lq}x{lk}x{d}: NaN in the output")
    if not np.array_equal(np.isneginf(got_l), np.isneginf(want_l)):
        raise AssertionError(f"hopper_attention {b}x{h}x{lq}x{lk}x{d}: -inf rows of lse differ")
    err_o = float(np.abs(got_o - want_o).max() / max(np.abs(want_o).max(), 1e-30))
    fin = np.isfinite(want_l)
    err_l = float(np.abs(got_l[fin] - want_l[fin]).max()) if fin.any() else 0.0
    if not (err_o <= tolerance and err_l <= tolerance):
        raise AssertionError(
            f"hopper_attention {b}x{h}x{lq}x{lk}x{d} causal={causal}: relative error of o "
            f"{err_o:.3g}, abs error of lse {err_l:.3g} (tolerance {tolerance})"
        )
    return {"error_o": err_o, "error_lse": err_l}
