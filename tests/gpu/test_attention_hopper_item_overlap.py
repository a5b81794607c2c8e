# TEST_TARGET: cc>=9.0a
"""The persistent Hopper attention forward with ``item_overlap`` (a consumer issues the next
work item's first ``S = Q Kᵀ`` with this item's last ``P V`` and stores this item's O after
that tile's softmax) and ``o_buffer`` (the TMA-store epilogue staged in a buffer of its own,
Q released before it, the stores' read waited for before the next item's staging), alone and
together (tylo/ops/attention/hopper_persistent.py, hopper_epilogue.py), on an sm_90a GPU,
against the float64 reference with outputs poisoned with NaN first (``hopper_verify.verify``):
D = 64 and 128, causal and not, with and without ping-pong; the standard shapes (L = 1, 17,
1000, 4097, Lq != Lk, key lengths with zero-length entries), many items per CTA whose
key-tile counts differ (causal and padding masks), a CTA with a single item, f16. The
assembly as the GPU's own linker makes it: no spill, no wgmma serialization note."""

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

# name -> choose_config options beyond persistent=True
VARIANTS = {
    "items pp+ov": {"pingpong": True, "overlap": True, "item_overlap": True},
    "items ov": {"pingpong": False, "overlap": True, "item_overlap": True},
    "o buffer": {"tma_store": True, "o_buffer": True},
    "items + o buffer": {"overlap": True, "item_overlap": True, "tma_store": True,
                         "o_buffer": True},
}  # fmt: skip


INTERPRET_SKIP = (  # the interpreter tier (tests/interp_tier.py)
    "sm_90a kernels (wgmma, TMA, mbarrier, setmaxnreg, clusters): the interpreter refuses "
    "these instructions by name (UnsupportedOperation; docs/interpret.md)"
)


def _cfg(d, causal, name, dtype=tylo.bf16, **more):
    kw = {"item_overlap": False, "o_buffer": False, **VARIANTS[name], **more}
    cfg = choose_config(d, dtype, causal, persistent=True, **kw)
    assert cfg.persistent
    assert cfg.item_overlap == kw.get("item_overlap", False)
    assert cfg.o_buffer == kw.get("o_buffer", False)
    return cfg


@pytest.mark.parametrize("name", list(VARIANTS))
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_standard_cases(gpu_runtime, d, causal, name):
    cfg = _cfg(d, causal, name)
    verify_standard_cases(cfg, d, causal)
    verify(1, 1, 1, d, lk=300, causal=causal, cfg=cfg)  # a single work item: no next one


@pytest.mark.parametrize("name", ["items pp+ov", "o buffer", "items + o buffer"])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_many_items_per_cta(gpu_runtime, d, causal, name):
    """B·H = 64 at L = 1000: 512 items, about four per CTA, whose key-tile counts differ
    under the causal and padding masks (a zero-length entry's items: one masked tile);
    ``item_overlap`` also with O stored by ownership."""
    sms = tylo.device_properties(0).sm_count
    assert 8 * 8 * 8 > sms
    stores = [{}, {"tma_store": False}] if name == "items pp+ov" else [{}]
    for more in stores:
        cfg = _cfg(d, causal, name, **more)
        verify(8, 8, 1000, d, causal=causal, cfg=cfg)
        lens = [1000, 0, 1, 999, 512, 128, 129, 700]
        verify(8, 8, 1000, d, lk=1000, causal=causal, kv_lens=lens, cfg=cfg)
        verify(8, 8, 1000, d, lk=1500, causal=causal, kv_lens=[0] * 4 + [1500] * 4, cfg=cfg)


def test_f16(gpu_runtime):
    for d in (64, 128):
        for causal in (False, True):
            for name in ("items pp+ov", "items + o buffer"):
                verify(2, 5, 777, d, lk=1100, dtype="f16", causal=causal,
                       cfg=_cfg(d, causal, name, dtype=tylo.f16))  # fmt: skip


@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_assembly_on_the_device(gpu_runtime, d, causal):
    """As the device's linker makes it: no spill, no call, no serialization note (the next
    item's first S and this item's last P V are issued in one place, outside any runtime
    branch)."""
    for name in VARIANTS:
        cfg = _cfg(d, causal, name)
        k, live = compile_unserialized(cfg)
        assert_no_spill(cfg, k, live)
