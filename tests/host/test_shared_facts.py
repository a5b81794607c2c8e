"""Facts the ops share live in tylo once: the shared memory a block may use per target
(``Target.max_shared_bytes``), the constants (``tylo.constants``), the hardware's byte
swizzle (``tylo.layouts.byte_swizzle``), the extent annotation (``tylo.Dim``), and the
Hopper attention's defaults as named values (``hopper_defaults.Schedule``)."""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tylo
from tylo.constants import F32_MAX, INT32_MAX, LN2, LOG2E, NEG_INF
from tylo.layouts import Swizzle, SwizzleError, byte_swizzle
from tylo.target import MAX_SHARED_BYTES, Target, TargetError

ROOT = Path(__file__).resolve().parents[2]

# CUDA C++ Programming Guide, "Technical Specifications per Compute Capability": maximum
# shared memory per thread block (opt-in), KiB
GUIDE_KIB = {"sm_75": 64, "sm_80": 163, "sm_86": 99, "sm_87": 163, "sm_89": 99,
             "sm_90": 227, "sm_90a": 227, "sm_100a": 227, "sm_120": 99}  # fmt: skip


@pytest.mark.parametrize("target", sorted(GUIDE_KIB))
def test_max_shared_bytes_per_target(target):
    assert Target.parse(target).max_shared_bytes == GUIDE_KIB[target] * 1024


def test_max_shared_bytes_is_the_largest():
    assert MAX_SHARED_BYTES == 227 * 1024 == max(GUIDE_KIB.values()) * 1024


@settings(max_examples=60, deadline=None)
@given(st.integers(7, 15), st.integers(0, 9), st.booleans())
def test_max_shared_bytes_known_or_refused(major, minor, a):
    """Every target either has a figure between 48 KiB and the largest, or is refused with
    a TargetError naming it (never a KeyError, never a guess)."""
    try:
        t = Target(major, minor, a and major >= 9)
    except TargetError:
        return
    try:
        n = t.max_shared_bytes
    except TargetError as err:
        assert t.sm in str(err)
        return
    assert 48 * 1024 <= n <= MAX_SHARED_BYTES and n % 1024 == 0


def test_the_ops_shared_limits_are_the_targets():
    from tylo.ops.attention import config, hopper_config
    from tylo.ops.gemm import hopper_kernel

    sm90 = Target.parse("sm_90a").max_shared_bytes
    assert hopper_config.SHARED_LIMIT == hopper_kernel.SHARED_LIMIT == sm90
    assert config.SHARED_LIMIT == MAX_SHARED_BYTES


def test_warp_attention_refuses_a_target_with_less_shared_memory():
    """A warp-attention configuration is compiled only for a target whose blocks may hold
    its shared memory (it would compile, and every launch fail)."""
    from tylo.nvgpu.errors import PlanError
    from tylo.ops.attention.config import attention_config
    from tylo.ops.attention.host import compile_attention

    cfg = attention_config(128, block_m=128, block_n=128, warps=8)
    assert cfg.shared_bytes > 99 * 1024
    with pytest.raises(PlanError, match="sm_86"):
        compile_attention(cfg, "sm_86")


def test_constants():
    assert LOG2E == math.log2(math.e) and LN2 == math.log(2)
    assert F32_MAX == float(np.finfo(np.float32).max) and INT32_MAX == 2**31 - 1
    assert NEG_INF == -math.inf
    from tylo.ops import args

    assert args.F32_MAX is F32_MAX


def _hardware_swizzle(addr: int, width: int) -> int:
    """The hardware's swizzle of a shared byte address, written from its definition: the
    16-byte chunk index within a ``width``-byte row (bits 4..) XOR the row index modulo
    ``width // 16`` (the 128-byte row count, bits 7..)."""
    chunks = width // 16
    row = (addr >> 7) % chunks
    return addr ^ (row << 4)


@pytest.mark.parametrize("width", [32, 64, 128])
@pytest.mark.parametrize("element_bytes", [1, 2, 4, 8, 16])
def test_byte_swizzle_against_the_hardware_definition(width, element_bytes):
    """In bytes it is the hardware's swizzle; in elements it moves whole elements the same
    way (element e lands where its first byte does)."""
    sw = byte_swizzle(width, element_bytes)
    for e in range(4096 // element_bytes):
        assert sw(e) * element_bytes == _hardware_swizzle(e * element_bytes, width), e
    assert byte_swizzle(width)(123) == _hardware_swizzle(123, width)


@pytest.mark.parametrize("bad", [16, 256, 0, -128, "128", 128.0, True, None, "128B"])
def test_byte_swizzle_refuses_other_widths(bad):
    with pytest.raises(SwizzleError, match="width"):
        byte_swizzle(bad)


@pytest.mark.parametrize("bad", [0, 3, 32, -2, 2.0, True, "2", None])
def test_byte_swizzle_refuses_other_element_sizes(bad):
    with pytest.raises(SwizzleError, match="element_bytes"):
        byte_swizzle(128, bad)


def test_the_kernels_swizzles_are_the_helpers():
    from tylo.ops.attention.hopper_config import swizzle

    assert swizzle(tylo.bf16) == swizzle(tylo.f16) == byte_swizzle(128, 2) == Swizzle(3, 3, 3)


def test_dim():
    assert tylo.Dim == tylo.Int(min=1, max=2**31 - 1)
    from tylo.ops.attention import hopper_config, kernel
    from tylo.ops.gemm import hopper_kernel
    from tylo.ops.gemm import kernel as gemm_kernel
    from tylo.ops.softmax import kernel as softmax_kernel

    for mod in (hopper_config, kernel, hopper_kernel, gemm_kernel, softmax_kernel):
        assert mod.Dim is tylo.Dim, mod.__name__


# the copies that must not come back into tylo/ops
COPIES = [r"1\.4426950408", r"0\.6931471805", r"227 \* 1024", r"Swizzle\(3, 4 -",
          r"Int\(min=1, max=2\*\*31 - 1\)", r"NEG_INF = "]  # fmt: skip


def test_no_copies_of_the_shared_facts_in_the_ops():
    found = []
    for path in sorted((ROOT / "tylo" / "ops").rglob("*.py")):
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            found += [f"{path.relative_to(ROOT)}:{i}: {line.strip()}"
                      for pat in COPIES if re.search(pat, line)]  # fmt: skip
    assert not found, "\n".join(found)


def test_the_hopper_defaults_are_named():
    """Every default is a Case -> Schedule (or ItemSchedule), each option a field of the
    config of the same name, and the tables read the same as the measured rows."""
    from tylo.ops.attention import hopper_defaults as hd
    from tylo.ops.attention.hopper_config import HopperAttentionConfig

    cfg_fields = {f.name for f in dataclasses.fields(HopperAttentionConfig)}
    for table, kind in ((hd.SCHEDULES, hd.Schedule), (hd.THREE_CONSUMER_SCHEDULES, hd.Schedule),
                        (hd.ITEM_SCHEDULES, hd.ItemSchedule)):  # fmt: skip
        for case, value in table.items():
            assert isinstance(case, hd.Case) and isinstance(value, kind)
            assert {f.name for f in dataclasses.fields(value)} <= cfg_fields
            with pytest.raises(dataclasses.FrozenInstanceError):
                value.overlap = True  # type: ignore[misc]
    assert hd.SCHEDULES[(64, True, True)] == hd.Schedule(overlap=True, tma_store=True)
    assert hd.SCHEDULES[hd.Case(d=128, causal=False, long=False)] == hd.Schedule(
        pingpong=True, overlap=True, tma_store=True, persistent=True, split_release=True
    )
    assert hd.ITEM_SCHEDULES[(64, True, False)] == hd.ItemSchedule(True, True)
    assert len(hd.SCHEDULES) == 8 and len(hd.THREE_CONSUMER_SCHEDULES) == 3
