# TEST_TARGET: cc>=9.0a
"""The persistent Hopper attention forward (``HopperAttentionConfig(persistent=True)``,
tylo/ops/attention/hopper_persistent.py) on an sm_90a GPU, against the float64 reference
with outputs poisoned with NaN first (``hopper_verify.verify``): every schedule option (plain,
ping-pong, overlap, both) at D = 64 and 128, causal and not; L = 1, 17, 1000 and 4097 (one
head: the reference is quadratic on the CPU), Lq != Lk both ways, per-batch key lengths with
a zero-length entry, more work items than SMs (B·H = 64 at L = 1000: 512 items) and fewer,
a single item, strided inputs and given outputs. The assembly as the GPU's own linker makes
it (``setmaxnreg`` kept): no spill in either role, no wgmma serialization note."""

from __future__ import annotations

import pytest
from attention_cases import (  # tests/gpu/attention_cases.py
    assert_matches_reference,
    assert_no_spill,
    compile_unserialized,
    verify_standard_cases,
)

import tylo
from tylo.ops.attention.hopper_host import (
    choose_config,
    hopper_attention,
)
from tylo.ops.attention.hopper_verify import verify

SCHEDULES = [(False, False), (True, False), (False, True), (True, True)]


INTERPRET_SKIP = (  # the interpreter tier (tests/interp_tier.py)
    "sm_90a kernels (wgmma, TMA, mbarrier, setmaxnreg, clusters): the interpreter refuses "
    "these instructions by name (UnsupportedOperation; docs/interpret.md)"
)


def _cfg(d, causal, pingpong, overlap, dtype=tylo.bf16):
    # choose_config: at d = 128 with overlap only 64-key tiles fit the registers
    cfg = choose_config(d, dtype, causal, pingpong=pingpong, overlap=overlap, persistent=True)
    assert cfg.persistent
    return cfg


@pytest.mark.parametrize("pingpong, overlap", SCHEDULES, ids=["plain", "pp", "ov", "pp+ov"])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_persistent_schedules(gpu_runtime, d, causal, pingpong, overlap):
    cfg = _cfg(d, causal, pingpong, overlap)
    # 6 to 48 items (fewer than SMs) at the short lengths; with a zero-length entry every
    # row of its items gives o = 0, lse = -inf (the item still loads its Q and releases it,
    # so the buffers' phases stay in step)
    verify_standard_cases(cfg, d, causal)
    verify(1, 1, 1, d, lk=300, causal=causal, cfg=cfg)  # a single work item


@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_more_items_than_sms(gpu_runtime, d, causal):
    """B·H = 64 at L = 1000: 512 items, several per CTA (each CTA's ring count runs on across
    items of different key-tile counts under causal and padding masks)."""
    sms = tylo.device_properties(0).sm_count
    for pp, ov in SCHEDULES:
        cfg = _cfg(d, causal, pp, ov)
        assert 8 * 8 * 8 > sms
        verify(8, 8, 1000, d, causal=causal, cfg=cfg)
        lens = [1000, 0, 1, 999, 512, 128, 129, 700]
        verify(8, 8, 1000, d, lk=1000, causal=causal, kv_lens=lens, cfg=cfg)


def test_f16_and_the_default_schedule(gpu_runtime):
    for d in (64, 128):
        for causal in (False, True):
            cfg = choose_config(d, tylo.f16, causal, persistent=True)
            verify(2, 5, 777, d, lk=1100, dtype="f16", causal=causal, cfg=cfg)


def test_persistent_strided_views_and_given_outputs(gpu_runtime):
    import torch

    b, h, lq, lk, d = 2, 3, 300, 150, 64
    cfg = choose_config(d, tylo.bf16, True, persistent=True)
    # (B, L, H, D) storage seen as (B, H, L, D): the head and sequence strides are swapped
    q = torch.randn(b, lq, h, d, device="cuda").to(torch.bfloat16).transpose(1, 2)
    k = torch.randn(b, lk, h, d, device="cuda").to(torch.bfloat16).transpose(1, 2)
    v = torch.randn(b, lk, h, d, device="cuda").to(torch.bfloat16).transpose(1, 2)
    out = torch.full((b, lq, h, d), float("nan"), device="cuda").to(torch.bfloat16).transpose(1, 2)
    lse = torch.full((b, h, lq + 5), float("nan"), device="cuda")[..., :lq]  # padded rows
    o2, l2 = hopper_attention(q, k, v, causal=True, scale=0.3, out=out, lse=lse, cfg=cfg)
    assert o2 is out and l2 is lse
    assert_matches_reference(q, k, v, out, lse, causal=True, scale=0.3)


@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_persistent_assembly_on_the_device(gpu_runtime, d, causal):
    """As the device's linker makes it (where it keeps setmaxnreg, as ptxas does on the
    H200, the producer has 40 registers for its item loop): no spill anywhere, no call, and
    no serialization note, for the default schedules."""
    cfg = choose_config(d, tylo.bf16, causal, persistent=True)
    k, live = compile_unserialized(cfg)
    assert_no_spill(cfg, k, live)
