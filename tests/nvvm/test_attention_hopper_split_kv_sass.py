"""Separate K and V barriers in the Hopper attention kernels (``split_kv=True``,
tylo/ops/attention/hopper_ring.py) compiled for sm_90a without a GPU: the same instructions
as without (``HGMMA`` from descriptors and with a register A, 4-D TMA loads), nothing spills
(no ``LDL``/``STL``) in the configurations the other assembly tests check for it, no
serialization note in the link log, a second array of full barriers (``pipe_full1``) beside
the first, and the consumer waiting twice per key tile:
for K before ``S = Q Kᵀ`` and for V before ``P V``.
``tests/gpu/test_attention_hopper_split_kv.py`` runs the kernels."""

from __future__ import annotations

import re

import pytest
from attention_sass import (
    assert_not_serialized,
    fitting_config,
    live_lines,
    role_events,
    wgmma_chains,
)
from attention_sass import compile_quiet as _compile

import tylo
from tylo.ops.attention.hopper_kernel import HopperAttentionConfig


def _consumer(ptx):
    """The consumer's events (:func:`attention_sass.role_events`), the first wait being
    Q's."""
    return role_events(ptx)[0]


# (d, causal, dtype, pingpong, overlap, persistent, tma_store): configurations that fit the
# 168 registers a thread keeps where the linker drops setmaxnreg (nvJitLink here)
CASES = [
    (64, False, tylo.bf16, False, False, False, False),
    (64, True, tylo.f16, True, False, False, True),
    (128, False, tylo.bf16, True, True, False, False),
    (128, False, tylo.bf16, True, True, True, True),
]


@pytest.mark.parametrize(
    "d, causal, dtype, pingpong, overlap, persistent, tma_store", CASES,
    ids=["d64", "d64-causal-f16-pp-tma", "d128-pp-ov", "persistent-d128-pp-ov-tma"],
)  # fmt: skip
def test_split_kv_assembly(d, causal, dtype, pingpong, overlap, persistent, tma_store):
    cfg = fitting_config(
        d, dtype=dtype, causal=causal, pingpong=pingpong, overlap=overlap,
        persistent=persistent, tma_store=tma_store, split_kv=True,
    )  # fmt: skip
    bn, stages = cfg.bn, cfg.stages
    k = _compile(cfg)
    assert_not_serialized(k)
    sass = k.sass
    s_mma, pv_mma = wgmma_chains(sass, cfg)
    assert len(s_mma) >= 2 * d // 16 and len(pv_mma) >= 2 * bn // 16, (len(s_mma), len(pv_mma))
    assert "UTMALDG.4D" in sass and "SYNCS" in sass
    live = live_lines(sass)
    for op in ("LDL", "STL", "CALL"):
        assert not re.search(rf"\b{op}\b", live), f"{op} in the SASS of {cfg.describe()}"
    hgmma = [line for line in live.splitlines() if "HGMMA" in line]
    assert sum("gsb0" not in line for line in hgmma) >= len(hgmma) // 2, "wgmma serialized"
    ptx = k.ptx
    # K's full barriers (pipe_full) and V's (pipe_full1), one empty barrier per stage
    for name in ("pipe_full", "pipe_full1", "pipe_empty"):
        assert re.search(rf"\.shared \.align 8 \.b8 {name}\[{8 * stages}\];", ptx), name
    # the consumer: Q's wait, then two waits per key tile site (two loops, and with overlap
    # the prologue's S and the last P V): K before each S, V before each P V
    sites = 3 if overlap else 2
    cons = _consumer(ptx)
    assert cons.count("W") == 1 + 2 * sites, cons
    if overlap:  # V of the previous tile and K of this one, then S and P V back to back
        assert cons == "WWS" + "WWSP" * 2 + "WP", cons
    else:  # K, S, the softmax, V, P V
        assert cons == "W" + "WSWP" * 2, cons


def test_without_split_kv_one_wait_per_tile():
    """The control: without split_kv one full barrier per stage, one wait per key tile site
    (the test above is not vacuous)."""
    cfg = HopperAttentionConfig(d=64, bn=128, stages=4)
    ptx = _compile(cfg).ptx
    assert "pipe_full1" not in ptx
    assert _consumer(ptx) == "W" + "WSP" * 2
