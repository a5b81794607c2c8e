"""The Hopper attention kernel (examples/attention/hopper_kernel.py) compiled for sm_90a without
a GPU: S = Q Kᵀ is a shared-memory wgmma (``HGMMA.64x<bn>``), P V a register-A wgmma reading V
transposed (``HGMMA.64x<d>`` with a register A and ``tnspB``), Q, K and V arrive by 4-D TMA
(``UTMALDG.4D``) on mbarriers (``SYNCS``), P becomes the A operand by ``F2FP`` packs alone
(no shared-memory store or load anywhere in the kernel), the row statistics by ``SHFL.BFLY``
and ``MUFU.EX2``, nothing spills (no ``LDL``/``STL``), and the wgmma are not serialized.
``tests/gpu/test_attention_hopper.py`` runs it."""

from __future__ import annotations

import re
import warnings

import pytest

import tylo
from examples.attention.hopper_host import compile_hopper_attention
from examples.attention.hopper_kernel import HopperAttentionConfig


def _compile(cfg):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nvJitLink may drop setmaxnreg here (it warns)
        return compile_hopper_attention(cfg)


@pytest.mark.parametrize(
    "d, causal, dtype, pingpong, overlap",
    [
        (64, False, tylo.bf16, False, False),
        (64, True, tylo.f16, True, False),
        (128, False, tylo.bf16, True, True),
        (128, True, tylo.bf16, False, False),
    ],
    # overlap with causal masking needs more than the 168 registers a thread keeps when the
    # linker drops setmaxnreg (nvJitLink here): it spills here, not under ptxas 13.0
    ids=["d64", "d64-causal-f16-pingpong", "d128-pingpong-overlap", "d128-causal"],
)
def test_assembly(d, causal, dtype, pingpong, overlap):
    # choose_config at d = 128 would first compile 128-key tiles to see whether they spill
    # (here they do: nvJitLink drops setmaxnreg); the 64-key tiles it falls back to, directly
    bn, stages = (128, 4) if d == 64 else (64, 3)
    cfg = HopperAttentionConfig(
        d=d, dtype=dtype, causal=causal, bn=bn, stages=stages, pingpong=pingpong, overlap=overlap
    )
    k = _compile(cfg)
    sass = k.sass
    t = r"\.BF16" if dtype is tylo.bf16 else ""  # nvdisasm leaves f16 inputs unnamed
    s_mma = re.findall(rf"HGMMA\.64x{cfg.bn}x16\.F32{t} R\d+, gdesc\[UR\d+\]", sass)
    pv_mma = re.findall(rf"HGMMA\.64x{d}x16\.F32{t} R\d+, R\d+, gdesc\[UR\d+\]\.tnspB", sass)
    # one traced consumer body: d/16 k-steps of S and bn/16 of P V in each of its two loops
    # (the loops may be unrolled, so at least that many)
    assert len(s_mma) >= 2 * d // 16 and len(pv_mma) >= 2 * cfg.bn // 16, (len(s_mma), len(pv_mma))
    assert "UTMALDG.4D" in sass and "SYNCS" in sass
    assert "F2FP" in sass and "SHFL.BFLY" in sass and "MUFU.EX2" in sass
    live = "\n".join(line for line in sass.splitlines() if "@!PT" not in line)  # not padding
    for op in ("LDL", "STL", "STS", "LDS"):
        assert not re.search(rf"\b{op}\b", live), f"{op} in the SASS of {cfg.describe()}"
    # the producer gives registers back once, the consumers (one branch) take them once
    assert k.ptx.count("setmaxnreg.dec") == 1 and k.ptx.count("setmaxnreg.inc") == 1
    assert ".extern .func llvm." not in k.ptx
    # the wgmma of a group are issued back to back, not serialized: ptxas serializes all of
    # them (C7509, C7513) when the kernel calls a function (rcp.rn's slow path) or writes a
    # pending wgmma's input registers; then every HGMMA waits (gsb0) on the one before
    hgmma = [line for line in live.splitlines() if "HGMMA" in line]
    assert sum("gsb0" not in line for line in hgmma) >= len(hgmma) // 2, "wgmma serialized"
    assert "CALL" not in live
    # ping-pong: a consumer syncs on its own named barrier and arrives on the other's once
    # per S = Q K^T (two loops, plus the prologue with overlap; both consumers run one body,
    # the barrier ids in registers); consumer 1 lets consumer 0 go first (one more arrive)
    issues = 3 if overlap else 2
    turns = len(re.findall(r"bar\.sync %r\d+, 256;", k.ptx))
    arrivals = len(re.findall(r"bar\.arrive %r\d+, 256;", k.ptx))
    assert (turns, arrivals) == ((issues, issues + 1) if pingpong else (0, 0))
    # overlap: S of the next tile and P V of the previous one in flight together
    assert ("wgmma.wait_group.sync.aligned 1;" in k.ptx) == overlap


def test_needs_sm90a():
    with pytest.raises(tylo.TyloError, match="sm_90a"):
        compile_hopper_attention(HopperAttentionConfig(d=64, stages=2), target="sm_90")
