"""The Hopper attention kernel (examples/attention/hopper_kernel.py) compiled for sm_90a without
a GPU: S = Q Kᵀ is a shared-memory wgmma (``HGMMA.64x<bn>``), P V a register-A wgmma reading V
transposed (``HGMMA.64x<d>`` with a register A and ``tnspB``), Q, K and V arrive by 4-D TMA
(``UTMALDG.4D``) on mbarriers (``SYNCS``), P becomes the A operand by ``F2FP`` packs alone
(no shared-memory store or load anywhere in the kernel), the row statistics by ``SHFL.BFLY``
and ``MUFU.EX2``, and nothing spills (no ``LDL``/``STL``). ``tests/gpu/test_attention_hopper.py``
runs it."""

from __future__ import annotations

import re
import warnings

import pytest

import tylo
from examples.attention.hopper_host import choose_config, compile_hopper_attention
from examples.attention.hopper_kernel import HopperAttentionConfig


def _compile(cfg):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nvJitLink may drop setmaxnreg here (it warns)
        return compile_hopper_attention(cfg)


@pytest.mark.parametrize(
    "d, causal, dtype, pingpong",
    [
        (64, False, tylo.bf16, False),
        (64, True, tylo.f16, True),
        (128, False, tylo.bf16, True),
        (128, True, tylo.bf16, False),
    ],
    ids=["d64", "d64-causal-f16-pingpong", "d128-pingpong", "d128-causal"],
)
def test_assembly(d, causal, dtype, pingpong):
    cfg = choose_config(d, dtype, causal, pingpong=pingpong)
    k = _compile(cfg)
    sass = k.sass
    t = r"\.BF16" if dtype is tylo.bf16 else ""  # nvdisasm leaves f16 inputs unnamed
    s_mma = re.findall(rf"HGMMA\.64x{cfg.bn}x16\.F32{t} R\d+, gdesc\[UR\d+\]", sass)
    pv_mma = re.findall(rf"HGMMA\.64x{d}x16\.F32{t} R\d+, R\d+, gdesc\[UR\d+\]\.tnspB", sass)
    # both consumer warpgroups: d/16 k-steps of S and bn/16 of P V per key tile (the loop
    # may be unrolled, so at least that many)
    assert len(s_mma) >= 2 * d // 16 and len(pv_mma) >= 2 * cfg.bn // 16, (len(s_mma), len(pv_mma))
    assert "UTMALDG.4D" in sass and "SYNCS" in sass
    assert "F2FP" in sass and "SHFL.BFLY" in sass and "MUFU.EX2" in sass
    live = "\n".join(line for line in sass.splitlines() if "@!PT" not in line)  # not padding
    for op in ("LDL", "STL", "STS", "LDS"):
        assert not re.search(rf"\b{op}\b", live), f"{op} in the SASS of {cfg.describe()}"
    # the producer gives registers back once, the consumers (one branch) take them once
    assert k.ptx.count("setmaxnreg.dec") == 1 and k.ptx.count("setmaxnreg.inc") == 1
    assert ".extern .func llvm." not in k.ptx
    # ping-pong: each consumer syncs on its own named barrier and arrives on the other's,
    # in both of its loops (full tiles, masked tiles); consumer 1 lets consumer 0 go first
    turns = (k.ptx.count("bar.sync 1, 256;"), k.ptx.count("bar.sync 2, 256;"))
    arrivals = (k.ptx.count("bar.arrive 1, 256;"), k.ptx.count("bar.arrive 2, 256;"))
    assert turns == ((2, 2) if pingpong else (0, 0)), turns
    assert arrivals == ((3, 2) if pingpong else (0, 0)), arrivals


def test_needs_sm90a():
    with pytest.raises(tylo.TyloError, match="sm_90a"):
        compile_hopper_attention(HopperAttentionConfig(d=64, stages=2), target="sm_90")
