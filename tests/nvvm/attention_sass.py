"""What the Hopper attention assembly tests share (imported by the
``test_attention_hopper*_sass.py`` files; not a test module itself)."""

from __future__ import annotations

import re
import warnings
from typing import Any

import tylo
from tylo.ops.attention.hopper_host import compile_hopper_attention
from tylo.ops.attention.hopper_kernel import HopperAttentionConfig

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
    pv_mma = re.findall(rf"HGMMA\.64x{cfg.d}x16\.F32{t} R\d+, R\d+, gdesc\[UR\d+\]\.tnspB", sass)
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


def _blocks(ptx: str) -> list[list[str]]:
    """The PTX's straight-line pieces: a new one at every ``$L__`` label and after every
    branch to one (the mbarrier waits' branches stay inside their inline-asm scopes)."""
    blocks: list[list[str]] = [[]]
    for line in ptx.splitlines():
        if re.match(r"^\$L__\w+:", line.strip()) and blocks[-1]:
            blocks.append([])
        blocks[-1].append(line)
        if re.search(r"\bbra(?:\.uni)?\s+\$L__\w+;", line):
            blocks.append([])
    return [b for b in blocks if b]


def role_events(ptx: str, detail: bool = False) -> tuple[str, str]:
    """``(consumer, producer)``: the :func:`ptx_events` of the code each role reaches from its
    ``setmaxnreg`` (``inc`` for the consumers, ``dec`` for the producer) and the other role
    does not (the shared exit dropped), each in PTX order. Found by the branches' graph, not
    by where LLVM placed the blocks."""
    blocks = _blocks(ptx)
    label = {}
    for i, b in enumerate(blocks):
        m = re.match(r"^(\$L__\w+):", b[0].strip())
        if m:
            label[m.group(1)] = i
    succ = []
    for i, b in enumerate(blocks):
        last = next((line.strip() for line in reversed(b) if line.strip()), "")
        targets = {label[t] for t in re.findall(r"\bbra(?:\.uni)?\s+(\$L__\w+);", last)}
        ends = re.match(r"^(bra\.uni|bra|ret|exit)\b", last) is not None
        succ.append(targets | (set() if ends or i + 1 == len(blocks) else {i + 1}))

    def reach(start: int) -> set[int]:
        seen, todo = set(), [start]
        while todo:
            i = todo.pop()
            if i not in seen:
                seen.add(i)
                todo.extend(succ[i])
        return seen

    def start(marker: str) -> int:
        return next(i for i, b in enumerate(blocks) if any(marker in line for line in b))

    cons, prod = reach(start("setmaxnreg.inc")), reach(start("setmaxnreg.dec"))

    def events(mine: set[int], other: set[int]) -> str:
        lines = [line for i in sorted(mine - other) for line in blocks[i]]
        return ptx_events("\n".join(lines), detail)

    return events(cons, prod), events(prod, cons)
