"""What the Hopper attention assembly tests share (imported by the
``test_attention_hopper*_sass.py`` files; not a test module itself)."""

from __future__ import annotations

import re
import warnings
from typing import Any

import tylo
from examples.attention.hopper_host import compile_hopper_attention
from examples.attention.hopper_kernel import HopperAttentionConfig

SERIALIZATION_NOTES = ("C7509", "C7519", "C7513", "serialized")


def compile_quiet(cfg: Any) -> Any:
    """Compile ``cfg`` for sm_90a, ignoring the linker's warnings (nvJitLink may drop
    setmaxnreg here, and says so)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return compile_hopper_attention(cfg)


def fitting_config(d: int, **kw: Any) -> HopperAttentionConfig:
    """``cfg`` with the key tiles that compile without spills where setmaxnreg is dropped:
    128 keys and 4 stages at d = 64, 64 keys and 3 stages at d = 128 (what choose_config
    falls back to, given directly: it would first compile the 128-key tiles to see)."""
    bn, stages = (128, 4) if d == 64 else (64, 3)
    return HopperAttentionConfig(d=d, bn=bn, stages=stages, **kw)


def assert_not_serialized(k: Any) -> None:
    """The link log says nothing of serialized wgmma."""
    for note in SERIALIZATION_NOTES:
        assert note not in k.module.info_log, k.module.info_log


def live_lines(sass: str) -> str:
    """The SASS without the never-executed ``@!PT`` padding."""
    return "\n".join(line for line in sass.splitlines() if "@!PT" not in line)


def wgmma_chains(sass: str, cfg: Any) -> tuple[list[str], list[str]]:
    """The S = Q K^T wgmma (both operands in shared memory) and the P V wgmma (register A,
    V transposed) of the SASS."""
    t = r"\.BF16" if cfg.dtype is tylo.bf16 else ""  # nvdisasm leaves f16 inputs unnamed
    s_mma = re.findall(rf"HGMMA\.64x{cfg.bn}x16\.F32{t} R\d+, gdesc\[UR\d+\]", sass)
    pv_mma = re.findall(
        rf"HGMMA\.64x{cfg.d}x16\.F32{t} R\d+, R\d+, gdesc\[UR\d+\]\.tnspB", sass
    )
    return s_mma, pv_mma


def ptx_events(ptx: str, detail: bool = False) -> str:
    """The kernel's barrier waits and wgmma in PTX order: ``W`` a ``try_wait``, ``S`` a run
    of wgmma with both operands in shared memory, ``P`` a run of register-A wgmma. With
    ``detail`` also ``R`` a plain arrive (a consumer's release), ``X`` an
    ``arrive.expect_tx`` (the producer arming a part) and a digit for a
    ``wgmma.wait_group`` of that many pending groups."""
    out = []
    for line in ptx.splitlines():
        if "mbarrier.try_wait" in line:
            out.append("W")
        elif detail and "mbarrier.arrive.expect_tx" in line:
            out.append("X")
        elif detail and "mbarrier.arrive" in line:
            out.append("R")
        elif detail and (m := re.search(r"wgmma\.wait_group\.sync\.aligned (\d+);", line)):
            out.append(m.group(1))
        elif "wgmma.mma_async" in line:
            ev = "P" if re.search(r"\}, \{%r", line) else "S"
            if not out or out[-1] != ev:
                out.append(ev)
    return "".join(out)
