# TEST_TARGET: cc>=9.0a
"""Separate K and V barriers in the Hopper attention forward (``HopperAttentionConfig(
split_kv=True)``, tylo/ops/attention/hopper_ring.py) on an sm_90a GPU, against the float64
reference with outputs poisoned with NaN first (``hopper_verify.verify``): a representative
product of D = 64 and 128, causal and not, every schedule (plain, ping-pong, overlap, both),
persistent and not, the TMA-store epilogue on and off (each option in several combinations
with the others); L = 1, 17, 1000 and 4097 (one head), Lq != Lk both ways, per-batch key
lengths with zero-length entries (o = 0, lse = -inf), many items per CTA of the persistent
kernel, f16. The assembly as the device's linker makes it: no spill, no serialization
note. ``tests/nvvm/test_attention_hopper_split_kv_sass.py`` checks the assembly without a
GPU, ``tests/host/test_attention_hopper_split_kv_host.py`` the protocol's model."""

from __future__ import annotations

import pytest
from attention_cases import (  # tests/gpu/attention_cases.py
    assert_no_spill,
    compile_unserialized,
    verify_standard_cases,
)

import tylo
from tylo.ops.attention.hopper_host import choose_config
from tylo.ops.attention.hopper_verify import verify

# (d, causal, pingpong, overlap, persistent, tma_store): every schedule with each kernel,
# each d, causal and tma_store on both sides of every other option
CASES = [
    (64, False, False, False, False, False),
    (64, True, True, False, False, True),
    (64, False, False, True, False, True),
    (64, True, True, True, False, False),
    (128, True, False, False, False, True),
    (128, False, True, False, False, False),
    (128, True, False, True, False, False),
    (128, False, True, True, False, True),
    (64, True, False, False, True, False),
    (64, False, True, False, True, True),
    (64, True, False, True, True, True),
    (64, False, True, True, True, False),
    (128, False, False, False, True, True),
    (128, True, True, False, True, False),
    (128, False, False, True, True, False),
    (128, True, True, True, True, True),
]


INTERPRET_SKIP = (  # the interpreter tier (tests/interp_tier.py)
    "sm_90a kernels (wgmma, TMA, mbarrier, setmaxnreg, clusters): the interpreter refuses "
    "these instructions by name (UnsupportedOperation; docs/interpret.md)"
)


def _id(case):
    d, causal, pp, ov, pers, ts = case
    sched = {(False, False): "plain", (True, False): "pp", (False, True): "ov",
             (True, True): "pp+ov"}[(pp, ov)]  # fmt: skip
    return (
        f"d{d}-{sched}{'-causal' if causal else ''}{'-persistent' if pers else ''}"
        f"{'-tma' if ts else ''}"
    )


@pytest.mark.parametrize("d, causal, pingpong, overlap, persistent, tma_store", CASES,
                         ids=[_id(c) for c in CASES])  # fmt: skip
def test_split_kv_against_the_reference(gpu_runtime, d, causal, pingpong, overlap, persistent,
                                        tma_store):  # fmt: skip
    cfg = choose_config(d, tylo.bf16, causal, pingpong=pingpong, overlap=overlap,
                        persistent=persistent, tma_store=tma_store, split_kv=True)  # fmt: skip
    assert cfg.split_kv and (cfg.pingpong, cfg.overlap) == (pingpong, overlap)
    assert (cfg.persistent, cfg.tma_store) == (persistent, tma_store)
    verify_standard_cases(cfg, d, causal)


@pytest.mark.parametrize("persistent", [False, True], ids=["one-item", "persistent"])
def test_split_kv_f16_and_many_items(gpu_runtime, persistent):
    """f16 with the default schedules, and 512 items (several per CTA of the persistent
    kernel: the ring's count, hence both barriers' parities, carried across items)."""
    for d in (64, 128):
        for causal in (False, True):
            cfg = choose_config(d, tylo.f16, causal, persistent=persistent, split_kv=True)
            verify(2, 5, 777, d, lk=1100, dtype="f16", causal=causal, cfg=cfg)
            cfg = choose_config(d, tylo.bf16, causal, persistent=persistent, split_kv=True)
            verify(8, 8, 1000, d, causal=causal, cfg=cfg,
                   kv_lens=[1000, 0, 1, 999, 512, 128, 129, 700])  # fmt: skip


@pytest.mark.parametrize("persistent", [False, True], ids=["one-item", "persistent"])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_split_kv_assembly_on_the_device(gpu_runtime, d, causal, persistent):
    """As the device's linker makes it (setmaxnreg kept): no spill, no call, no
    serialization note, for the default configurations with split_kv."""
    cfg = choose_config(d, tylo.bf16, causal, persistent=persistent, split_kv=True)
    k, live = compile_unserialized(cfg)
    assert_no_spill(cfg, k, live)
    assert "HGMMA" in live and "UTMALDG.4D" in live
    assert "pipe_full1" in k.ptx
