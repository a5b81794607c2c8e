"""K released early in the Hopper attention kernels (``split_release=True``,
tylo/ops/attention/hopper_ring.py) compiled for sm_90a without a GPU, at the tiles the option
is for: D = 64 (128 keys, 4 stages) and D = 128 (128 keys and 2 stages with ping-pong and
overlap; 64 keys and 3 stages), causal and not, one-item and persistent (a pairwise cover:
each tile causal and not, one-item and persistent, and each pair of those two; every compile
takes seconds).

Every case: the protocol in the PTX (four barrier arrays of ``stages``: K's and V's full and
empty barriers; each key tile's K released right after the ``wgmma.wait_group`` that
completes its ``S``, V after the one that completes ``P V``; the producer waiting before each
part's ``expect_tx``), the wgmma of both products in the SASS, no call. Where the kernel fits
the 168 registers a thread keeps when the linker drops ``setmaxnreg`` (nvJitLink here; the
H200's ptxas keeps it), also no spill (``LDL``/``STL``), wgmma not serialized and no
serialization note (C7509/C7513/C7519) in the link log; the others are checked for that as
the device's linker makes them by ``tests/gpu/test_attention_hopper_split_release.py``."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from attention_sass import (
    assert_not_serialized,
    live_lines,
    role_events,
    wgmma_chains,
)
from attention_sass import compile_quiet as _compile

from tylo.ops.attention.hopper_kernel import HopperAttentionConfig

TILES = {"d64": (64, 128, 4), "d128-wide": (128, 128, 2), "d128": (128, 64, 3)}

# (tile, causal, persistent, pingpong, overlap, fits 168 registers here): the wide D = 128
# tile with both schedules (FlashAttention-3's), the others with what fits where they can
CASES = [
    ("d64", False, False, True, True, True),
    ("d64", True, True, True, False, False),
    ("d128-wide", False, False, True, True, False),
    ("d128-wide", True, True, True, True, False),
    ("d128", False, True, True, True, True),
    ("d128", True, False, False, False, True),
]


def _roles(ptx):
    """``(consumer, producer)`` events (:func:`attention_sass.role_events`, with releases,
    arming and ``wait_group`` depths)."""
    return role_events(ptx, detail=True)


def _cfg(tile, causal, persistent, pingpong, overlap, **kw):
    d, bn, stages = TILES[tile]
    return HopperAttentionConfig(d=d, bn=bn, stages=stages, causal=causal, pingpong=pingpong,
                                 overlap=overlap, persistent=persistent, **kw)  # fmt: skip


def _id(case):
    tile, causal, persistent, pp, ov, _ = case
    return (
        f"{tile}{'-causal' if causal else ''}{'-persistent' if persistent else ''}"
        f"{'-pp' if pp else ''}{'-ov' if ov else ''}"
    )


@pytest.mark.parametrize("tile, causal, persistent, pingpong, overlap, fits", CASES,
                         ids=[_id(c) for c in CASES])  # fmt: skip
def test_split_release_assembly(tile, causal, persistent, pingpong, overlap, fits):
    cfg = _cfg(tile, causal, persistent, pingpong, overlap, split_kv=True, split_release=True)
    k = _compile(cfg)
    ptx, stages = k.ptx, cfg.stages
    # K's full and empty barriers (pipe_full, pipe_empty) and V's (pipe_full1, pipe_empty1)
    for name in ("pipe_full", "pipe_full1", "pipe_empty", "pipe_empty1"):
        assert re.search(rf"\.shared \.align 8 \.b8 {name}\[{8 * stages}\];", ptx), name
    cons, prod = _roles(ptx)
    # the consumer: Q's wait; per key tile K's wait, S, the wait_group that completes it,
    # K's release, then V's wait, P V, its wait_group, V's release (two loops). With
    # overlap: the prologue's S, then per tile V of the previous and K of this one, S and
    # P V issued together, wait_group 1 (S done) and K's release, wait_group 0 (P V done)
    # and the previous V's release; the last tile's P V. Persistent: Q's release after.
    if overlap:
        body = "WS0R" + "WWSP1R0R" * 2 + "WP0R"
    else:
        body = "WS0RWP0R" * 2
    assert cons == "W" + body + ("R" if persistent else ""), cons
    # the producer: each part waited for before it is armed (one-item: Q's arming first;
    # persistent: Q's buffer waited for and armed per item, the K/V ring's parts per tile)
    if persistent:
        assert re.fullmatch(r"(WX)+", prod) and prod.count("WX") >= 3, prod
    else:
        assert re.fullmatch(r"X(WXWX)+", prod), prod
    sass = k.sass
    s_mma, pv_mma = wgmma_chains(sass, cfg)
    assert len(s_mma) >= 2 * cfg.d // 16 and len(pv_mma) >= 2 * cfg.bn // 16, (
        len(s_mma), len(pv_mma))  # fmt: skip
    assert "UTMALDG.4D" in sass and "SYNCS" in sass
    live = live_lines(sass)
    assert not re.search(r"\bCALL\b", live)
    if fits:
        assert_not_serialized(k)
        for op in ("LDL", "STL"):
            assert not re.search(rf"\b{op}\b", live), f"{op} in the SASS of {cfg.describe()}"
        hgmma = [line for line in live.splitlines() if "HGMMA" in line]
        assert sum("gsb0" not in line for line in hgmma) >= len(hgmma) // 2, "wgmma serialized"


def test_without_split_release_one_release_per_tile():
    """The control (the test above is not vacuous): split_kv alone keeps one empty barrier
    per stage, released once per tile after P V, and the producer waits once per tile. And
    the option costs no registers: on the wide D = 128 tile, which spills here (setmaxnreg
    dropped), split_release spills no more than split_kv alone."""
    cfg = _cfg("d128-wide", False, False, True, True, split_kv=True)
    k = _compile(cfg)
    assert "pipe_empty1" not in k.ptx and "pipe_full1" in k.ptx
    cons, prod = _roles(k.ptx)
    assert cons == "W" + "WS0" + "WWSP10R" * 2 + "WP0R", cons
    assert re.fullmatch(r"X(WXX)+", prod), prod
    split = _compile(replace(cfg, split_release=True)).resources  # the case above's
    assert k.resources.spills and split.spill_stores <= k.resources.spill_stores, (
        split, k.resources)  # fmt: skip
