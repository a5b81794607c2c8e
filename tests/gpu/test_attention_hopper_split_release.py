# TEST_TARGET: cc>=9.0a
"""K released early in the Hopper attention forward (``HopperAttentionConfig(split_release=
True)``: K and V of a ring stage on full and empty barriers of their own, K freed once
``S = Q Kᵀ`` of its tile completed; tylo/ops/attention/hopper_ring.py) on an sm_90a GPU,
against the float64 reference with outputs poisoned with NaN first (``hopper_verify.verify``):
the tiles the option is for, D = 64 (128 keys, 4 stages) and D = 128 (128 keys and 2 stages,
FlashAttention-3's tile, with ping-pong and overlap; 64 keys and 3 stages), both kernels,
causal and not, every schedule at the default tiles, the TMA-store epilogue on and off; L =
1, 17, 1000 and 4097, Lq != Lk both ways, per-batch key lengths with zero-length entries
(o = 0, lse = -inf), many items per CTA of the persistent kernel (every part's parities
carried across items), f16. The assembly as the device's linker makes it: no spill, no
serialization note. ``tests/nvvm/test_attention_hopper_split_release_sass.py`` checks the
assembly without a GPU, ``tests/host/test_attention_hopper_split_release_host.py`` the
protocol's model."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from attention_cases import (  # tests/gpu/attention_cases.py
    compile_unserialized,
    verify_standard_cases,
)

import tylo
from tylo.ops.attention.hopper_host import choose_config
from tylo.ops.attention.hopper_kernel import HopperAttentionConfig
from tylo.ops.attention.hopper_verify import verify

# (d, bn, stages, pingpong, overlap, persistent, tma_store): the three tiles with both
# kernels, every schedule on the default tiles, tma_store on both sides of the others
CASES = [
    (64, 128, 4, False, False, False, False),
    (64, 128, 4, True, False, True, True),
    (64, 128, 4, False, True, False, True),
    (64, 128, 4, True, True, True, False),
    (128, 128, 2, True, True, False, True),
    (128, 128, 2, True, True, True, False),
    (128, 128, 2, False, True, True, True),
    (128, 64, 3, False, False, True, False),
    (128, 64, 3, True, False, False, True),
    (128, 64, 3, False, True, True, True),
    (128, 64, 3, True, True, False, False),
]


INTERPRET_SKIP = (  # the interpreter tier (tests/interp_tier.py)
    "sm_90a kernels (wgmma, TMA, mbarrier, setmaxnreg, clusters): the interpreter refuses "
    "these instructions by name (UnsupportedOperation; docs/interpret.md)"
)


def _id(case):
    d, bn, stages, pp, ov, pers, ts = case
    sched = {(False, False): "plain", (True, False): "pp", (False, True): "ov",
             (True, True): "pp+ov"}[(pp, ov)]  # fmt: skip
    return f"d{d}-bn{bn}x{stages}-{sched}{'-persistent' if pers else ''}{'-tma' if ts else ''}"


def _cfg(d, bn, stages, pingpong, overlap, persistent, tma_store, causal, dtype=tylo.bf16):
    return HopperAttentionConfig(d=d, dtype=dtype, bn=bn, stages=stages, causal=causal,
                                 pingpong=pingpong, overlap=overlap, persistent=persistent,
                                 tma_store=tma_store, split_kv=True,
                                 split_release=True)  # fmt: skip


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("d, bn, stages, pingpong, overlap, persistent, tma_store", CASES,
                         ids=[_id(c) for c in CASES])  # fmt: skip
def test_split_release_against_the_reference(gpu_runtime, d, bn, stages, pingpong, overlap,
                                             persistent, tma_store, causal):  # fmt: skip
    cfg = _cfg(d, bn, stages, pingpong, overlap, persistent, tma_store, causal)
    verify_standard_cases(cfg, d, causal)


@pytest.mark.parametrize("persistent", [False, True], ids=["one-item", "persistent"])
def test_split_release_f16_and_many_items(gpu_runtime, persistent):
    """f16 with the default schedules (choose_config), and 512 items (several per CTA of
    the persistent kernel) with padding masks; the wide D = 128 tile too."""
    for d in (64, 128):
        for causal in (False, True):
            cfg = choose_config(d, tylo.f16, causal, persistent=persistent, split_release=True)
            assert cfg.split_kv and cfg.split_release
            verify(2, 5, 777, d, lk=1100, dtype="f16", causal=causal, cfg=cfg)
            cfg = choose_config(d, tylo.bf16, causal, persistent=persistent, split_release=True)
            verify(8, 8, 1000, d, causal=causal, cfg=cfg,
                   kv_lens=[1000, 0, 1, 999, 512, 128, 129, 700])  # fmt: skip
    for causal in (False, True):
        wide = _cfg(128, 128, 2, True, True, persistent, False, causal)
        verify(8, 8, 1000, 128, causal=causal, cfg=wide,
               kv_lens=[1000, 0, 1, 999, 512, 128, 129, 700])  # fmt: skip


@pytest.mark.parametrize("persistent", [False, True], ids=["one-item", "persistent"])
@pytest.mark.parametrize("tile", [(64, 128, 4), (128, 128, 2), (128, 64, 3)],
                         ids=["d64", "d128-wide", "d128"])  # fmt: skip
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_split_release_assembly_on_the_device(gpu_runtime, tile, causal, persistent):
    """As the device's linker makes it (setmaxnreg kept): no spill, no call, no
    serialization note, at each tile with ping-pong and overlap (the wide D = 128 tile's
    schedule; FlashAttention-3's) and the TMA store. The persistent wide tile without the
    mask spills with split_kv alone already (ptxas 13.0: 12 bytes, as with split_release;
    8 without either, docs/attention_hopper.md, "128-key tiles with overlap at D = 128"):
    there split_release must spill no more than split_kv alone."""
    d, bn, stages = tile
    cfg = _cfg(d, bn, stages, True, True, persistent, True, causal)
    k, live = compile_unserialized(cfg)
    assert not re.search(r"\bCALL\b", live)
    if (bn, d, persistent, causal) == (128, 128, True, False):
        base, _ = compile_unserialized(replace(cfg, split_release=False))
        assert k.resources.spill_stores <= base.resources.spill_stores, (
            k.resources, base.resources)  # fmt: skip
    else:
        for op in ("LDL", "STL"):
            assert not re.search(rf"\b{op}\b", live), f"{op} in the SASS of {cfg.describe()}"
    assert "HGMMA" in live and "UTMALDG.4D" in live
    assert "pipe_empty1" in k.ptx and "pipe_full1" in k.ptx
