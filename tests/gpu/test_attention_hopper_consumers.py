# TEST_TARGET: cc>=9.0a
"""Three consumer warpgroups in the Hopper attention forward (``HopperAttentionConfig(
consumers=3)``: 512 threads, 192 query rows per CTA, setmaxnreg 32/160, the ping-pong turns a
rotation of three named barriers; tylo/ops/attention/hopper_roles.py) on an sm_90a GPU,
against the float64 reference with outputs poisoned with NaN first (``hopper_verify.verify``):
D = 64 on the 128-key tile (4 stages) and D = 128 on the 64-key tile (3 stages)
(``THREE_CONSUMER_TILES``), both kernels, causal and not, every schedule, the TMA-store
epilogue and split_release; L = 1, 17, 1000 and 4097, Lq != Lk both ways, lengths around
the 192-row tile, per-batch key lengths with zero-length entries (o = 0, lse = -inf), many
items per CTA of the persistent kernel, f16. The assembly as the device's linker makes it
for the configurations ptxas 13.0 links without spilling here: no spill, no call, no
serialization note. ``tests/nvvm/test_attention_hopper_consumers_sass.py`` checks the
assembly without a GPU, ``tests/host/test_attention_hopper_consumers_host.py`` the
configuration, the barrier ids and (with the persistent protocol model) the rotation."""

from __future__ import annotations

import pytest
from attention_cases import (  # tests/gpu/attention_cases.py
    assert_no_spill,
    compile_unserialized,
    verify_standard_cases,
)

import tylo
from tylo.ops.attention.hopper_host import THREE_CONSUMER_TILES, choose_config
from tylo.ops.attention.hopper_kernel import HopperAttentionConfig
from tylo.ops.attention.hopper_verify import verify

SCHEDULES = {"plain": (False, False), "pp": (True, False), "ov": (False, True),
             "pp+ov": (True, True)}  # fmt: skip


INTERPRET_SKIP = (  # the interpreter tier (tests/interp_tier.py)
    "sm_90a kernels (wgmma, TMA, mbarrier, setmaxnreg, clusters): the interpreter refuses "
    "these instructions by name (UnsupportedOperation; docs/interpret.md)"
)


def _cfg(d, schedule, persistent, causal, tma_store=False, split_release=False,
         dtype=tylo.bf16):  # fmt: skip
    bn, stages = THREE_CONSUMER_TILES[d]
    pp, ov = SCHEDULES[schedule]
    return HopperAttentionConfig(d=d, dtype=dtype, bn=bn, stages=stages, causal=causal,
                                 pingpong=pp, overlap=ov, persistent=persistent,
                                 tma_store=tma_store, split_kv=split_release,
                                 split_release=split_release, consumers=3)  # fmt: skip


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("persistent", [False, True], ids=["one-item", "persistent"])
@pytest.mark.parametrize("schedule", list(SCHEDULES))
@pytest.mark.parametrize("d", [64, 128])
def test_three_consumers_against_the_reference(gpu_runtime, d, schedule, persistent, causal):
    cfg = _cfg(d, schedule, persistent, causal)
    verify_standard_cases(cfg, d, causal)
    for lq in (191, 192, 193, 385):  # around the 192-row tile
        verify(1, 2, lq, d, lk=lq + 5, causal=causal, cfg=cfg)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("persistent", [False, True], ids=["one-item", "persistent"])
@pytest.mark.parametrize("extra", ["tma_store", "split_release"])
@pytest.mark.parametrize("d", [64, 128])
def test_three_consumers_epilogue_and_ring_options(gpu_runtime, d, extra, persistent, causal):
    """The TMA-store epilogue (each consumer's 64 rows of the 192-row Q buffer; epilogue
    barriers 4, 5, 6) and split_release, with ping-pong and overlap."""
    cfg = _cfg(d, "pp+ov", persistent, causal, **{extra: True})
    verify_standard_cases(cfg, d, causal)


@pytest.mark.parametrize("persistent", [False, True], ids=["one-item", "persistent"])
def test_three_consumers_f16_and_many_items(gpu_runtime, persistent):
    """choose_config(consumers=3) with the measured schedules, f16, and 512 items with
    padding masks (several per CTA of the persistent kernel: the ring's and the Q
    pipeline's parities, and the turn rotation, carried across items)."""
    for d in (64, 128):
        for causal in (False, True):
            cfg = choose_config(d, tylo.f16, causal, persistent=persistent, consumers=3,
                                overlap=True, split_release=False)  # fmt: skip
            assert cfg.consumers == 3 and cfg.bm == 192
            verify(2, 5, 777, d, lk=1100, dtype="f16", causal=causal, cfg=cfg)
            cfg = choose_config(d, tylo.bf16, causal, persistent=persistent, consumers=3)
            verify(8, 8, 1000, d, causal=causal, cfg=cfg,
                   kv_lens=[1000, 0, 1, 999, 512, 128, 129, 700])  # fmt: skip


# (d, schedule, persistent, causal, tma_store, split_release) that ptxas 13.0 links without
# spilling at 32/160 registers (docs/attention_hopper.md, "Three consumer warpgroups")
FITS = [
    (64, "plain", False, False, True, False),
    (64, "pp", False, False, True, False),
    (64, "ov", False, False, True, False),
    (64, "pp+ov", False, False, True, False),
    (64, "pp", True, False, True, False),
    (64, "ov", True, False, True, False),
    (64, "pp", False, True, True, False),
    (64, "pp+ov", False, True, True, False),
    (64, "pp", True, True, True, False),
    # (64, "pp+ov", True, True, True, False): 8 bytes with the causal own_tiles bounds
    (128, "pp+ov", False, False, True, False),
    (128, "pp+ov", True, False, False, True),
    (128, "pp", False, True, True, False),
    (128, "pp+ov", True, True, True, False),
    # d = 128's measured schedules (TMA store and split_release together)
    (128, "pp+ov", False, False, True, True),
    (128, "pp+ov", True, False, True, True),
    # (128, "pp+ov", True, True, True, True): spills on the H200 with the causal own_tiles
    # bounds (LDL; not a default: three consumers stay off at d = 128)
]


@pytest.mark.parametrize("case", FITS, ids=["-".join(map(str, c)) for c in FITS])
def test_three_consumers_assembly_on_the_device(gpu_runtime, case):
    d, schedule, persistent, causal, tma_store, split_release = case
    cfg = _cfg(d, schedule, persistent, causal, tma_store, split_release)
    k, live = compile_unserialized(cfg)
    assert_no_spill(cfg, k, live)
    assert "HGMMA" in live and "UTMALDG.4D" in live
    assert "setmaxnreg.inc.sync.aligned.u32 160;" in k.ptx


def test_the_default_takes_three_where_measured(gpu_runtime):
    """Where the device's linker keeps ``setmaxnreg`` (ptxas on the H200) ``choose_config``
    takes three consumers at d = 64 without a mask (``THREE_CONSUMER_SCHEDULES``: the
    persistent kernel up to 2048 keys, the one-item kernel past them) and causal past 4096
    keys (the one-item kernel), and two elsewhere; the default calls (no ``cfg``) are
    correct on both sides of the boundaries, with padding, and their assembly does not
    spill (``SPILL_BOUND``)."""
    for causal, lk, persistent in ((False, 1024, True), (False, 2048, True),
                                   (False, 2049, False), (False, 16384, False),
                                   (True, 4097, False), (True, 16384, False)):  # fmt: skip
        cfg = choose_config(64, tylo.bf16, causal, lk=lk)
        assert (cfg.consumers, cfg.bm, cfg.persistent) == (3, 192, persistent), lk
        assert (cfg.pingpong, cfg.overlap, cfg.tma_store) == (True, True, True)
        k, live = compile_unserialized(cfg)
        assert_no_spill(cfg, k, live)
    for d, causal, lk in ((64, True, 1024), (64, True, 4096), (128, False, 1024),
                          (128, True, 1024), (128, True, 16384)):  # fmt: skip
        assert choose_config(d, tylo.bf16, causal, lk=lk).consumers == 2
    verify(2, 3, 1000, 64)  # the persistent kernel, 6 q-tiles of 192 (the last 40 rows)
    verify(1, 2, 300, 64, lk=2100)  # the one-item kernel
    verify(3, 2, 400, 64, lk=2500, kv_lens=[2500, 0, 1000])
    verify(2, 2, 2049, 64, dtype="f16")
    # causal, the one-item kernel: Lq < Lk (the diagonal at the bottom right), Lq = Lk with a
    # partial last q-tile (4100 = 21 x 192 + 68), padding, f16
    verify(1, 2, 300, 64, lk=4200, causal=True)
    verify(1, 1, 4100, 64, causal=True)
    verify(3, 1, 500, 64, lk=4500, causal=True, kv_lens=[4500, 0, 4097])
    verify(1, 2, 4097, 64, causal=True, dtype="f16")
