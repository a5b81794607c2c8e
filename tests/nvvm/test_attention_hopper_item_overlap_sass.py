"""The persistent Hopper attention kernel with ``item_overlap`` and ``o_buffer``
(tylo/ops/attention/hopper_persistent.py, hopper_epilogue.py) compiled for sm_90a without a
GPU, on the tiles that fit the 168 registers a thread keeps where the linker drops
``setmaxnreg`` (nvJitLink here): D = 64 (128 keys, 4 stages) and D = 128 (64 keys, 3
stages), causal and not, with and without ping-pong. Every case: both products' wgmma in the
SASS, no call, no serialization note, no spill beyond ``SPILL_BOUND``; the O buffer's place
in the PTX (the stores' read waited for before the staging ``stmatrix``, not after the
stores, and once more before the consumer exits); the items overlapped issue wgmma from
more places than the kernel without (the next item's first S with the last P V, and the
peeled last item)."""

from __future__ import annotations

import re

import pytest
from attention_sass import assert_not_serialized, compile_quiet, fitting_config, live_lines

CASES = [(d, causal, pp) for d in (64, 128) for causal in (False, True) for pp in (False, True)]


def _cfg(d, causal, pp, **kw):
    return fitting_config(d, causal=causal, pingpong=pp, overlap=True, persistent=True,
                          tma_store=True, **kw)  # fmt: skip


def _wgmma_issues(ptx):
    """The number of places the PTX issues a run of wgmma: consecutive ``wgmma.mma_async``
    lines count once, and so do those with only ``mov`` lines (register moves) between."""
    runs, prev = 0, False
    for line in ptx.splitlines():
        now = "wgmma.mma_async" in line
        runs += now and not prev
        if line.strip() and not line.strip().startswith("//"):
            prev = now if now or "wgmma" in line or "mov" not in line else prev
    return runs


# (d, causal, pingpong) -> the bytes the kernel with both options spills here (nvJitLink,
# 168 registers), where any; on the H200 (ptxas keeps setmaxnreg: 232) none spill
# (tests/gpu/test_attention_hopper_item_overlap.py). The kernel without them spills 8 and 12
# bytes at d = 64 causal here, which both options remove.
SPILL_BOUND = {(64, False, True): 4}


@pytest.mark.parametrize("d, causal, pp", CASES)
def test_item_overlap_and_o_buffer_assembly(d, causal, pp):
    plain = compile_quiet(_cfg(d, causal, pp))
    both = compile_quiet(_cfg(d, causal, pp, item_overlap=True, o_buffer=True))
    for k in (plain, both):
        live = live_lines(k.sass)
        assert "HGMMA" in live and not re.search(r"\bCALL\b", live)
        assert_not_serialized(k)
    spilled = both.resources.spill_stores if both.resources.spills else 0
    assert spilled <= SPILL_BOUND.get((d, causal, pp), 0), both.resources
    # more wgmma issue sites with the items overlapped: the peeled last item and the
    # boundary step (next S with the last P V) besides the key loop's
    assert _wgmma_issues(both.ptx) > _wgmma_issues(plain.ptx)


@pytest.mark.parametrize("d", [64, 128])
def test_o_buffer_waits_before_staging(d):
    """Without the O buffer the elected thread waits for the stores' read right after
    committing them (the Q buffer is released next); with it the wait comes before the
    staging ``stmatrix`` (the previous item's stores), and once more at the consumer's
    end."""
    for o_buffer in (False, True):
        ptx = compile_quiet(_cfg(d, False, True, o_buffer=o_buffer)).ptx
        lines = [ln.strip() for ln in ptx.splitlines()]
        waits = [i for i, ln in enumerate(lines) if ln.startswith("cp.async.bulk.wait_group.read")]
        commits = [i for i, ln in enumerate(lines) if ln.startswith("cp.async.bulk.commit_group")]
        stm = [i for i, ln in enumerate(lines) if ln.startswith("stmatrix")]
        assert waits and commits and stm
        if o_buffer:
            assert min(waits) < min(stm), "the read wait precedes the staging"
            assert not any(c < w < c + 8 for c in commits for w in waits), "no wait after"
            assert max(waits) > max(commits), "the exit wait"
        else:
            assert all(any(c < w < c + 8 for c in commits) for w in waits)
