"""The Hopper attention kernel (tylo/ops/attention/hopper_kernel.py) compiled for sm_90a without
a GPU: S = Q Kᵀ is a shared-memory wgmma (``HGMMA.64x<bn>``), P V a register-A wgmma reading V
transposed (``HGMMA.64x<d>`` with a register A and ``tnspB``), Q, K and V arrive by 4-D TMA
(``UTMALDG.4D``) on mbarriers (``SYNCS``), P becomes the A operand by ``F2FP`` packs alone
(no shared-memory store or load anywhere in the kernel), the row statistics by ``SHFL.BFLY``
and ``MUFU.EX2``, nothing spills (no ``LDL``/``STL``), and the wgmma are not serialized.
``tests/gpu/test_attention_hopper.py`` runs it."""

from __future__ import annotations

import re

import pytest
from attention_sass import assert_not_serialized, fitting_config, live_lines, wgmma_chains
from attention_sass import compile_quiet as _compile

import tylo
from tylo.ops.attention.hopper_host import compile_hopper_attention
from tylo.ops.attention.hopper_kernel import HopperAttentionConfig


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
    cfg = fitting_config(d, dtype=dtype, causal=causal, pingpong=pingpong, overlap=overlap)
    k = _compile(cfg)
    sass = k.sass
    s_mma, pv_mma = wgmma_chains(sass, cfg)
    # one traced consumer body: d/16 k-steps of S and bn/16 of P V in each of its two loops
    # (the loops may be unrolled, so at least that many)
    assert len(s_mma) >= 2 * d // 16 and len(pv_mma) >= 2 * cfg.bn // 16, (len(s_mma), len(pv_mma))
    assert "UTMALDG.4D" in sass and "SYNCS" in sass
    assert "F2FP" in sass and "SHFL.BFLY" in sass and "MUFU.EX2" in sass
    live = live_lines(sass)
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


# -- the persistent schedule (tylo/ops/attention/hopper_persistent.py) ---------------------


@pytest.mark.parametrize(
    "d, causal, dtype, pingpong, overlap",
    [
        (64, False, tylo.bf16, False, True),
        (64, True, tylo.f16, True, False),
        (128, False, tylo.bf16, True, True),
        (128, True, tylo.bf16, False, False),
    ],
    # as above: causal with overlap spills only where the linker drops setmaxnreg
    ids=["d64-overlap", "d64-causal-f16-pingpong", "d128-pingpong-overlap", "d128-causal"],
)
def test_persistent_assembly(d, causal, dtype, pingpong, overlap):
    """The persistent kernel: the same instructions as the one-item kernel (HGMMA from
    descriptors and with a register A, 4-D TMA loads, no local or shared-memory traffic of
    the threads), one S and one P V chain per schedule loop (the item loop does not copy
    them), the wgmma not serialized (the item's decomposition is u32 arithmetic: no call),
    and nothing about serialization in the linker's log."""
    cfg = fitting_config(
        d, dtype=dtype, causal=causal, pingpong=pingpong, overlap=overlap, persistent=True
    )
    bn = cfg.bn
    k = _compile(cfg)
    assert ".entry hopper_attention_persistent_kernel" in k.ptx
    assert_not_serialized(k)
    sass = k.sass
    s_mma, pv_mma = wgmma_chains(sass, cfg)
    assert len(s_mma) >= 2 * d // 16 and len(pv_mma) >= 2 * bn // 16, (len(s_mma), len(pv_mma))
    assert "UTMALDG.4D" in sass and "SYNCS" in sass and "F2FP" in sass
    live = live_lines(sass)
    for op in ("LDL", "STL", "STS", "LDS", "CALL"):
        assert not re.search(rf"\b{op}\b", live), f"{op} in the SASS of {cfg.describe()}"
    hgmma = [line for line in live.splitlines() if "HGMMA" in line]
    assert sum("gsb0" not in line for line in hgmma) >= len(hgmma) // 2, "wgmma serialized"
    assert k.ptx.count("setmaxnreg.dec") == 1 and k.ptx.count("setmaxnreg.inc") == 1
    # the u32 item decomposition: no 64-bit division by a runtime value anywhere
    assert not re.search(r"\b(div|rem)\.[us]64\b", k.ptx)
    # the ping-pong turns as in the one-item kernel: the opening arrival once per CTA, not
    # once per item (it sits before the item loop)
    issues = 3 if overlap else 2
    turns = len(re.findall(r"bar\.sync %r\d+, 256;", k.ptx))
    arrivals = len(re.findall(r"bar\.arrive %r\d+, 256;", k.ptx))
    assert (turns, arrivals) == ((issues, issues + 1) if pingpong else (0, 0))
    assert ("wgmma.wait_group.sync.aligned 1;" in k.ptx) == overlap
    # Q double-buffered: its own two full and two empty barriers beside the K/V ring's
    assert re.search(r"qbuf_full\[16\]", k.ptx) and re.search(r"qbuf_empty\[16\]", k.ptx)


def test_each_kernel_refuses_the_other_schedule():
    from tylo.ops.attention.hopper_host import plans
    from tylo.ops.attention.hopper_kernel import THREADS, hopper_attention_kernel
    from tylo.ops.attention.hopper_persistent import hopper_attention_persistent_kernel

    one = HopperAttentionConfig(d=64, stages=2)
    walk = HopperAttentionConfig(d=64, stages=2, persistent=True)
    common = (tylo.i32, int, int, int, int, int, int, int, float)
    with pytest.raises(tylo.TyloError, match="persistent kernel"):
        hopper_attention_kernel.compile(
            walk.dtype, tylo.f32, *plans(walk), None, *common, walk, block=THREADS, target="sm_90a"
        )
    with pytest.raises(tylo.TyloError, match="persistent=True"):
        hopper_attention_persistent_kernel.compile(  # with the table (u32) and the heads
            one.dtype,
            tylo.f32,
            *plans(one),
            None,
            tylo.i32,
            tylo.u32,
            *common[1:],
            int,
            one,
            block=THREADS,
            target="sm_90a",
        )


@pytest.mark.parametrize("causal", [False, True], ids=["padding", "causal"])
def test_the_mask_is_one_32_bit_compare_per_score(causal):
    """The masked tile compares each score's static column offset with its row's i32 limit
    (``tylo.ops.attention.mask.score_mask``): a ``setp.gt.s32`` per score of the (64, bn)
    S fragment a thread holds (``bn / 2``) in a masked tile body (LLVM may fold the
    prologue's), and none of the 64-bit compares (two ISETP in SASS each) the fragment's
    coordinates took: those were about three per score (198 at bn = 128 with the causal
    mask)."""
    cfg = fitting_config(64, causal=causal, overlap=True)
    ptx = _compile(cfg).ptx
    per_tile = cfg.bn // 2
    assert len(re.findall(r"setp\.gt\.s32", ptx)) >= per_tile
    assert len(re.findall(r"setp\.\w+\.s64", ptx)) <= 12
