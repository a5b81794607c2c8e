"""The TMA-store epilogue of the Hopper attention kernels (``tma_store=True``,
tylo/ops/attention/hopper_epilogue.py) compiled for sm_90a without a GPU: O is staged with
``stmatrix`` (``STSM``) and leaves by 4-D TMA stores (``UTMASTG.4D``), nothing spills (no
``LDL``/``STL``), no store of O by the threads (no ``STG.E.U16``), the wgmma are not
serialized (nothing about it in the link log), a consumer's named barriers count its own 128
threads, and the persistent kernel releases a Q buffer only after its stores read it.
``tests/gpu/test_attention_hopper_tma_store.py`` runs them."""

from __future__ import annotations

import re

import pytest
from attention_sass import assert_not_serialized, fitting_config, live_lines
from attention_sass import compile_quiet as _compile

import tylo
from tylo.ops.attention.hopper_kernel import HopperAttentionConfig

# configurations that fit the 168 registers a thread keeps where the linker drops
# setmaxnreg (nvJitLink here); under ptxas 13.0 (the H200's) every schedule fits
CASES = [
    (64, False, tylo.bf16, False, True, False),
    (64, True, tylo.f16, True, False, False),
    (128, True, tylo.bf16, False, False, False),
    (128, False, tylo.bf16, True, True, True),
    (64, False, tylo.f16, False, False, True),
]


@pytest.mark.parametrize(
    "d, causal, dtype, pingpong, overlap, persistent",
    CASES,
    ids=[
        "d64-overlap",
        "d64-causal-f16-pp",
        "d128-causal",
        "persistent-d128-pp-ov",
        "persistent-d64-f16",
    ],
)
def test_tma_store_assembly(d, causal, dtype, pingpong, overlap, persistent):
    cfg = fitting_config(
        d, dtype=dtype, causal=causal, pingpong=pingpong, overlap=overlap,
        persistent=persistent, tma_store=True,
    )  # fmt: skip
    k = _compile(cfg)
    assert_not_serialized(k)
    sass = k.sass
    live = live_lines(sass)
    assert re.search(r"\bSTSM\b", live) and "UTMASTG.4D" in live and "UTMALDG.4D" in live
    for op in ("LDL", "STL", "CALL"):
        assert not re.search(rf"\b{op}\b", live), f"{op} in the SASS of {cfg.describe()}"
    # O leaves only by TMA: no 16-bit global store of the threads (lse is f32)
    assert not re.search(r"\bSTG\.E\.U16\b", live)
    hgmma = [line for line in live.splitlines() if "HGMMA" in line]
    assert sum("gsb0" not in line for line in hgmma) >= len(hgmma) // 2, "wgmma serialized"
    ptx = k.ptx
    # d / 64 boxes per consumer, each through the 4-D O map
    stores = re.findall(r"cp\.async\.bulk\.tensor\.4d\.global\.shared::cta\.tile\.bulk_group", ptx)
    assert len(stores) == d // 64
    # the consumer's own barriers (ids 3 + c, in a register): 128 threads, twice per item
    assert len(re.findall(r"bar\.sync %r\d+, 128;", ptx)) == 2
    if persistent:  # the Q buffer goes back to the producer only after the stores read it
        wait = ptx.index("cp.async.bulk.wait_group.read 0;")
        tail = ptx[wait:]
        assert "qbuf_empty" not in ptx[ptx.index("stmatrix") : wait]  # no release before it
        assert re.search(r"qbuf_empty;[\s\S]*?mbarrier\.arrive", tail)
    else:
        assert "cp.async.bulk.wait_group 0;" in ptx


def test_ownership_path_has_no_tma_store():
    cfg = HopperAttentionConfig(d=64, stages=2, bn=128)
    ptx = _compile(cfg).ptx
    assert "stmatrix" not in ptx and "bulk_group" not in ptx
    assert not re.search(r"bar\.sync %r\d+, 128;", ptx)
