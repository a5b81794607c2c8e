# TEST_TARGET: cc>=9.0a
"""The persistent Hopper attention's shares of work (the schedule table of
tylo/ops/attention/hopper_schedule.py: whole rounds of mirrored pairs, then the tail dealt
heaviest first) on an sm_90a GPU, against the float64 reference (``hopper_verify.verify``):
shapes with enough items per CTA for rounds of pairs, with an odd number of q-tiles and of
(batch, head)s (the last one pairs its own q-tiles, its middle one alone), per-batch key
lengths with a zero-length entry, few items (the tail alone: one or two per CTA), and the
batch sizes whose pairs did not divide among the CTAs (B 17 x H 16 at 1k keys).
``tests/host/test_attention_hopper_balance_host.py`` checks the shares without a GPU."""

from __future__ import annotations

import pytest

import tylo
from tylo.ops.attention.hopper_host import choose_config
from tylo.ops.attention.hopper_verify import verify

SCHEDULES = [(False, False), (True, True)]


INTERPRET_SKIP = (  # the interpreter tier (tests/interp_tier.py)
    "sm_90a kernels (wgmma, TMA, mbarrier, setmaxnreg, clusters): the interpreter refuses "
    "these instructions by name (UnsupportedOperation; docs/interpret.md)"
)


def _odd_heads(sms: int, q_tiles: int, batch: int) -> int:
    """The fewest heads, odd, with ``q_tiles * heads * batch >= 2 sms`` items."""
    h = -(-2 * sms // (q_tiles * batch))
    return h + 1 - h % 2


@pytest.mark.parametrize("pingpong, overlap", SCHEDULES, ids=["plain", "pp+ov"])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_pairs_with_odd_q_tiles_and_heads(gpu_runtime, d, causal, pingpong, overlap):
    cfg = choose_config(d, tylo.bf16, causal, pingpong=pingpong, overlap=overlap, persistent=True)
    sms = tylo.device_properties(0).sm_count
    lq = 7 * cfg.bm - 5  # 7 q-tiles, the last one partial
    b = 3
    h = _odd_heads(sms, 7, b)
    assert 7 * h * b >= 2 * min(7 * h * b, sms) and (h * b) % 2 == 1
    verify(b, h, lq, d, causal=causal, cfg=cfg)
    verify(b, h, lq, d, lk=lq + 40, causal=causal, kv_lens=[lq + 40, 0, 300], cfg=cfg)


@pytest.mark.parametrize("causal", [False, True])
def test_both_sides_of_two_items_per_cta(gpu_runtime, causal):
    """``items = 2 grid`` and ``2 grid - 1`` (the tail alone: one or two items a CTA): one
    head per batch entry, one q-tile each (L = 100), so the batch sets the item count."""
    cfg = choose_config(64, tylo.bf16, causal, persistent=True)
    sms = tylo.device_properties(0).sm_count
    for items in (2 * sms, 2 * sms - 1):
        verify(items, 1, 100, 64, causal=causal, cfg=cfg)


@pytest.mark.parametrize("d", [64, 128])
def test_a_batch_whose_pairs_do_not_divide(gpu_runtime, d):
    """17 x 16 (batch, head)s of 8 causal q-tiles (1088 pairs over the SMs: whole rounds of
    pairs, then a tail of at least ``TAIL_ROUNDS`` rounds dealt by weight), with the
    default configuration at 1k keys (the persistent kernel), f16 and per-batch lengths."""
    cfg = choose_config(d, tylo.bf16, True, lk=1024)
    assert cfg.persistent
    verify(17, 16, 1024, d, causal=True)
    verify(17, 4, 1000, d, lk=1030, causal=True, dtype="f16",
           kv_lens=[1030, 0, 1, 700, 129] + [1030] * 12)  # fmt: skip
