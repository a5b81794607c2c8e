# TEST_TARGET: cc>=9.0a
"""The persistent Hopper attention's mirrored pairs (``cta_item`` of
examples/attention/hopper_persistent.py) on an sm_90a GPU, against the float64 reference
(``hopper_host.verify``): shapes with at least two items per CTA, so that the CTAs take
pairs, with an odd number of q-tiles and of (batch, head)s (the last one pairs its own
q-tiles, its middle one alone), per-batch key lengths with a zero-length entry, and the
round-robin side of the boundary (one item fewer than two per CTA).
``tests/host/test_attention_hopper_balance_host.py`` checks the shares without a GPU."""

from __future__ import annotations

import pytest

import tylo
from examples.attention.hopper_host import choose_config, verify

SCHEDULES = [(False, False), (True, True)]


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
    """``items = 2 grid`` (pairs) and ``2 grid - 1`` (round-robin): one head per batch
    entry, one q-tile each (L = 100), so the batch sets the item count."""
    cfg = choose_config(64, tylo.bf16, causal, persistent=True)
    sms = tylo.device_properties(0).sm_count
    for items in (2 * sms, 2 * sms - 1):
        verify(items, 1, 100, 64, causal=causal, cfg=cfg)
