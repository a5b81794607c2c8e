# TEST_TARGET: cc>=9.0a
"""The TMA-store epilogue of the Hopper attention forward (``HopperAttentionConfig(
tma_store=True)``, tylo/ops/attention/hopper_epilogue.py) on an sm_90a GPU, against the
float64 reference with outputs poisoned with NaN first (``hopper_verify.verify``): D = 64 and
128, causal and not, every schedule option, persistent and not; L = 1, 17, 1000 and 4097 (one
head), Lq != Lk both ways, per-batch key lengths with zero-length entries (o = 0, lse =
-inf), f16; given outputs that TMA can write (rows past Lq of a padded buffer stay
untouched: the boxes are clipped at Lq) and that it cannot (the fallback to stores by
ownership, still correct). The assembly as the device's linker makes it: no spill, no
serialization note."""

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
    takes_tma_store,
)
from tylo.ops.attention.hopper_verify import verify

SCHEDULES = [(False, False), (True, False), (False, True), (True, True)]


INTERPRET_SKIP = (  # the interpreter tier (tests/interp_tier.py)
    "sm_90a kernels (wgmma, TMA, mbarrier, setmaxnreg, clusters): the interpreter refuses "
    "these instructions by name (UnsupportedOperation; docs/interpret.md)"
)


def _cfg(d, causal, pingpong, overlap, persistent, dtype=tylo.bf16):
    cfg = choose_config(
        d, dtype, causal, pingpong=pingpong, overlap=overlap, persistent=persistent, tma_store=True
    )
    assert cfg.tma_store and cfg.persistent == persistent
    return cfg


@pytest.mark.parametrize("pingpong, overlap", SCHEDULES, ids=["plain", "pp", "ov", "pp+ov"])
@pytest.mark.parametrize("persistent", [False, True], ids=["one-item", "persistent"])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_tma_store_schedules(gpu_runtime, d, causal, pingpong, overlap, persistent):
    cfg = _cfg(d, causal, pingpong, overlap, persistent)
    verify_standard_cases(cfg, d, causal)


@pytest.mark.parametrize("persistent", [False, True], ids=["one-item", "persistent"])
def test_tma_store_f16_and_many_items(gpu_runtime, persistent):
    for d in (64, 128):
        for causal in (False, True):
            cfg = choose_config(d, tylo.f16, causal, persistent=persistent, tma_store=True)
            verify(2, 5, 777, d, lk=1100, dtype="f16", causal=causal, cfg=cfg)
            cfg = choose_config(d, tylo.bf16, causal, persistent=persistent, tma_store=True)
            verify(
                8,
                8,
                1000,
                d,
                causal=causal,
                cfg=cfg,  # 512 items: several per CTA
                kv_lens=[1000, 0, 1, 999, 512, 128, 129, 700],
            )


@pytest.mark.parametrize("persistent", [False, True], ids=["one-item", "persistent"])
@pytest.mark.parametrize("d", [64, 128])
def test_given_outputs_tma_can_and_cannot_write(gpu_runtime, persistent, d):
    import torch

    b, h, lq, lk = 2, 3, 300, 250
    bf = torch.bfloat16
    q = torch.randn(b, h, lq, d, device="cuda").to(bf)
    k = torch.randn(b, h, lk, d, device="cuda").to(bf)
    v = torch.randn(b, h, lk, d, device="cuda").to(bf)
    for causal in (False, True):
        cfg = choose_config(d, tylo.bf16, causal, persistent=persistent, tma_store=True)
        # TMA-writable: (B, L, H, D) storage seen as (B, H, L, D), and a padded buffer whose
        # rows past Lq must stay untouched (the boxes are clipped at Lq, not at the buffer)
        swapped = torch.full((b, lq, h, d), float("nan"), device="cuda").to(bf).transpose(1, 2)
        padded_buf = torch.full((b, h, lq + 70, d), float("nan"), device="cuda").to(bf)
        padded = padded_buf[:, :, :lq]
        # not TMA-writable: a sequence stride of d + 8 + 1 elements (not 16 bytes), and a
        # base 2 bytes past a 16-byte boundary; both run with the stores by ownership
        odd = torch.full((b, h, lq, d + 9), float("nan"), device="cuda").to(bf)[..., :d]
        flat = torch.full((b * h * lq * d + 1,), float("nan"), device="cuda").to(bf)
        shifted = flat[1:].view(b, h, lq, d)
        for out, tma in ((swapped, True), (padded, True), (odd, False), (shifted, False)):
            assert takes_tma_store(out) is tma
            lse = torch.full((b, h, lq), float("nan"), device="cuda")
            o2, _ = hopper_attention(q, k, v, causal=causal, out=out, lse=lse, cfg=cfg)
            assert o2 is out
            assert_matches_reference(q, k, v, out, lse, causal=causal)
        assert torch.isnan(padded_buf[:, :, lq:]).all()  # nothing written past Lq
        assert torch.isnan(flat[:1]).all()


@pytest.mark.parametrize("persistent", [False, True], ids=["one-item", "persistent"])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_tma_store_assembly_on_the_device(gpu_runtime, d, causal, persistent):
    """As the device's linker makes it (setmaxnreg kept): no spill, no call, no
    serialization note, for the default schedules with the TMA-store epilogue."""
    cfg = choose_config(d, tylo.bf16, causal, persistent=persistent, tma_store=True)
    k, live = compile_unserialized(cfg)
    assert_no_spill(cfg, k, live)
    assert "STSM" in live and "UTMASTG.4D" in live
