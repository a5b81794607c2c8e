# TEST_TARGET: cc>=9.0a
"""The Hopper attention forward (examples/attention/hopper_host.py) on an sm_90a GPU, against
the float64 reference of examples/attention/reference.py: fresh random data, outputs
poisoned with NaN first, o within 2e-2 of max |o| and lse within 2e-2 absolute. Shapes: L =
1, 17, 1000, 4097, Lq != Lk both ways, D = 64 and 128, bf16 and f16, causal (bottom-right),
per-batch key lengths including 0 (rows with nothing to attend to: o = 0, lse = -inf), and
non-contiguous (B, H, L, D) strides that TMA can still read."""

from __future__ import annotations

import pytest

from examples.attention.hopper_host import hopper_attention, verify
from examples.attention.reference import AttentionInputError, attention_reference


@pytest.mark.parametrize("length", [1, 17, 1000, 4097])
@pytest.mark.parametrize("d", [64, 128])
def test_square(gpu_runtime, length, d):
    verify(2, 3, length, d)


@pytest.mark.parametrize(
    "lq, lk", [(17, 1000), (1000, 17), (1, 4097), (4097, 300), (129, 127)], ids=str
)
@pytest.mark.parametrize("causal", [False, True])
def test_lq_differs_from_lk(gpu_runtime, lq, lk, causal):
    verify(1, 2, lq, 64, lk=lk, causal=causal)
    verify(1, 1, lq, 128, lk=lk, causal=causal, dtype="f16")


@pytest.mark.parametrize("length", [1, 17, 1000, 4097])
def test_causal(gpu_runtime, length):
    verify(2, 2, length, 64, causal=True)
    verify(1, 2, length, 128, causal=True)


@pytest.mark.parametrize("causal", [False, True])
def test_padding_with_empty_rows(gpu_runtime, causal):
    # entry 1 has no keys at all (every row: o = 0, lse = -inf); with causal and
    # kv_len < Lq the first Lq - kv_len rows of the others see nothing either
    verify(4, 2, 300, 64, lk=333, causal=causal, kv_lens=[333, 0, 17, 129])
    verify(3, 1, 130, 128, lk=200, causal=causal, kv_lens=[0, 200, 64], dtype="f16")


def test_strided_views_and_given_outputs(gpu_runtime):
    import numpy as np
    import torch

    b, h, lq, lk, d = 2, 3, 77, 150, 64
    # (B, L, H, D) storage seen as (B, H, L, D): the head and sequence strides are swapped
    q = torch.randn(b, lq, h, d, device="cuda").to(torch.bfloat16).transpose(1, 2)
    k = torch.randn(b, lk, h, d, device="cuda").to(torch.bfloat16).transpose(1, 2)
    v = torch.randn(b, lk, h, d, device="cuda").to(torch.bfloat16).transpose(1, 2)
    out = torch.full((b, lq, h, d), float("nan"), device="cuda").to(torch.bfloat16).transpose(1, 2)
    lse = torch.full((b, h, lq), float("nan"), device="cuda")
    o2, l2 = hopper_attention(q, k, v, scale=0.3, out=out, lse=lse)
    assert o2 is out and l2 is lse
    torch.cuda.synchronize()
    want_o, want_l = attention_reference(
        q.double().cpu().numpy(), k.double().cpu().numpy(), v.double().cpu().numpy(), scale=0.3
    )
    got = out.double().cpu().numpy()
    assert np.abs(got - want_o).max() <= 2e-2 * np.abs(want_o).max()
    assert np.abs(lse.double().cpu().numpy() - want_l).max() <= 2e-2


def test_allocates_outputs_and_refuses_what_tma_cannot_read(gpu_runtime):
    import torch

    q = torch.randn(1, 2, 40, 64, device="cuda").to(torch.float16)
    o, lse = hopper_attention(q, q, q, causal=True)
    assert o.shape == q.shape and o.dtype == q.dtype and lse.shape == (1, 2, 40)
    odd = torch.randn(1, 2, 40, 68, device="cuda").to(torch.float16)[..., :64]  # 136-byte rows
    with pytest.raises(AttentionInputError, match="path='warp'"):
        hopper_attention(odd, odd, odd)
