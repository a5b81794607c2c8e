"""tylo/ops/attention's softmax steps (``AttentionConfig.sub_n``) and lazy rescale
(``lazy_rescale``) on the host: the typed refusals of every hostile ``sub_n`` (each
checked against the block sizes it stands for), the plans of one step, the proof that
every step's window of a K / V stage is a translate of the first (and that the check
catches a swizzle for which it is not), the lazy rescale's arithmetic on a float64 model of
one warp (the vote's test, the reference maximum, the ``-inf`` rows) against the exact
softmax, and ``launch_options``: which GPUs, masks and alignments take the stepped tile,
through ``plan_attention``."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tylo

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from attention_arrays import attention_args, device_array  # noqa: E402

from tylo.layouts import Layout, Swizzle, composition  # noqa: E402
from tylo.nvgpu.errors import PlanError  # noqa: E402
from tylo.ops.attention import host  # noqa: E402
from tylo.ops.attention.config import (  # noqa: E402
    BLOCK_NS,
    HEAD_DIMS,
    AttentionConfig,
    _prove_steps,
    _swizzle,
    attention_config,
)
from tylo.ops.attention.kernel import LAZY_LIMIT  # noqa: E402

STEPPED = host.STEPPED_128


# ---------------------------------------------------------------------------- sub_n


@pytest.mark.parametrize("bad", [0, 8, 48, 256, -16, 16.0, "16", True, (16,)])
def test_sub_n_refusals(bad):
    with pytest.raises(PlanError, match="sub_n"):
        AttentionConfig(128, "bf16", 128, 64, sub_n=bad)


@given(st.sampled_from(BLOCK_NS), st.sampled_from(BLOCK_NS), st.sampled_from(HEAD_DIMS))
@settings(max_examples=60, deadline=None)
def test_sub_n_is_refused_exactly_when_it_does_not_divide_the_block(bn, sn, d):
    """Refused iff ``sn`` does not divide ``bn`` (both multiples of 16, so a refusal's claim
    is checked by the division itself); accepted configs plan steps of ``sn`` keys."""
    try:
        cfg = AttentionConfig(d, "bf16", 64, bn, sub_n=sn)
    except PlanError as e:
        assert "sub_n" in str(e) and bn % sn != 0
        return
    assert bn % sn == 0
    assert (cfg.step_n, cfg.steps) == (sn, bn // sn)
    assert cfg.s_plan.size[1:] == (sn, d) and cfg.pv_plan.size[1:] == (d, sn)  # one step


def test_without_sub_n_a_step_is_the_block():
    cfg = attention_config(128, "bf16", block_m=64, block_n=64)
    assert (cfg.sub_n, cfg.step_n, cfg.steps) == (None, 64, 1)
    assert "steps" not in cfg.describe() and "lazy" not in cfg.describe()
    assert "K/V steps: translates of the first" not in cfg.proofs


def test_lazy_rescale_must_be_a_bool():
    for bad in (1, 0, "yes", None):
        with pytest.raises(PlanError, match="lazy_rescale must be a bool"):
            AttentionConfig(128, "bf16", 128, 64, sub_n=16, lazy_rescale=bad)


def test_the_stepped_tile_plans_and_proves():
    cfg = attention_config(128, "bf16", **STEPPED)
    assert (cfg.block_m, cfg.block_n, cfg.step_n, cfg.steps, cfg.rows_per_warp) == (
        128,
        64,
        16,
        4,
        32,
    )
    assert cfg.proofs["K/V steps: translates of the first"] is True
    assert cfg.proofs["K ldmatrix bank conflicts"] == 0
    assert cfg.proofs["V ldmatrix.trans bank conflicts"] == 0
    # one k-step of P V: 4 packed registers for each of the warp's 2 m16 repeats
    assert len(cfg.chain.registers(0)) == 8 and cfg.pv_plan.k_steps == 1
    assert "steps of 16 keys" in cfg.describe() and "lazy rescale" in cfg.describe()


# ---------------------------------------------------------------------------- the steps' proof


def _stage_fn(layout, j, sn, d):
    return [[layout(j * sn + r, c) for c in range(d)] for r in range(sn)]


@pytest.mark.parametrize(("d", "bn", "sn"), [(64, 64, 16), (128, 64, 16), (128, 128, 32),
                                             (64, 128, 64)])  # fmt: skip
def test_every_step_is_a_translate_of_the_first_by_brute_force(d, bn, sn):
    """Independent of ``_prove_steps``: the stage's addresses of step ``j`` minus its first
    address equal step 0's, element by element, and step ``j`` starts ``j * sn`` rows in."""
    cfg = attention_config(d, "bf16", block_m=64, block_n=bn, sub_n=sn)
    stage = composition(_swizzle(d), Layout((bn, d), (d, 1)))
    first = np.array(_stage_fn(stage, 0, sn, d))
    for j in range(cfg.steps):
        got = np.array(_stage_fn(stage, j, sn, d))
        assert (got - got[0, 0] == first - first[0, 0]).all()
        assert got[0, 0] == j * sn * d


def test_the_steps_check_catches_a_swizzle_that_moves_with_the_step():
    """A swizzle that XORs row bits 3..5 into the chunk: a 16-row step changes row bit 4,
    so step 1 is not step 0 moved; ``_prove_steps`` must say so (and brute force agrees)."""

    class Fake:
        d, block_n, step_n, steps = 128, 64, 16, 4
        kv_smem = composition(Swizzle(3, 3, 7), Layout((64, 128, 2), (128, 1, 64 * 128)))

    stage = composition(Swizzle(3, 3, 7), Layout((64, 128), (128, 1)))
    s0, s1 = np.array(_stage_fn(stage, 0, 16, 128)), np.array(_stage_fn(stage, 1, 16, 128))
    assert not (s1 - s1[0, 0] == s0 - s0[0, 0]).all()  # brute force: not a translate
    with pytest.raises(PlanError, match="not a translate"):
        _prove_steps(Fake())


# ---------------------------------------------------------------------------- lazy rescale


def lazy_warp(scores, step, c):
    """A float64 model of ``kernel.lazy_block`` over one warp's rows (``scores``: rows x
    keys, ``-inf`` masked), ``step`` keys at a time: returns ``(o_weights, l_sum, m, rescales)``
    where ``o_weights`` are the unnormalized weights each key got, relative to the final
    reference ``m``. The vote: any row whose reference is passed by more than LAZY_LIMIT
    (log2 units) raises every row's reference to its running maximum."""
    rows, keys = scores.shape
    m = np.full(rows, -np.inf)
    l_sum = np.zeros(rows)
    w = np.zeros((rows, keys))
    rescales = 0
    for k0 in range(0, keys, step):
        s = scores[:, k0 : k0 + step]
        with np.errstate(invalid="ignore"):
            over = (s > (m + LAZY_LIMIT / c)[:, None]).any()
        if over:
            m_new = np.maximum(m, s.max(axis=1))
            base = np.where(m_new == -np.inf, 0.0, m_new * c)
            alpha = np.exp2(m * c - base)
            l_sum, w, m = l_sum * alpha, w * alpha[:, None], m_new
            rescales += 1
        base = np.where(m == -np.inf, 0.0, m * c)
        p = np.exp2(s * c - base[:, None])
        assert (p <= 2.0**LAZY_LIMIT * (1 + 1e-12)).all()  # the bound the vote keeps
        w[:, k0 : k0 + step] = p
        l_sum = l_sum + p.sum(axis=1)
    return w, l_sum, m, rescales


@given(
    st.integers(1, 8), st.integers(1, 12), st.sampled_from([16, 32]),
    st.floats(0.01, 40.0), st.integers(0, 2**32 - 1), st.floats(0.0, 0.6),
)  # fmt: skip
@settings(max_examples=200, deadline=None)
def test_lazy_rescale_model_matches_the_exact_softmax(rows, blocks, step, spread, seed, holes):
    """Defining property: the lazy weights normalized by ``l_sum`` are the softmax, and the lse
    ``m c + log2 l_sum`` (in log2 units) is the exact one, for any scores, including scores that
    rise over many exponents, masked (``-inf``) entries and rows with no visible key (zero
    weights, ``l_sum = 0``: the kernel's zero row and ``lse = -inf``)."""
    rng = np.random.default_rng(seed)
    c = 1 / math.sqrt(128) * 1.4426950408889634
    keys = blocks * step
    s = rng.standard_normal((rows, keys)) * spread / c + np.linspace(0, spread, keys) / c
    s[rng.random((rows, keys)) < holes] = -np.inf
    if rows > 1:
        s[0] = -np.inf  # a row that sees nothing
    w, l_sum, m, _ = lazy_warp(s, step, c)
    for r in range(rows):
        vis = np.isfinite(s[r])
        if not vis.any():
            assert l_sum[r] == 0 and (w[r] == 0).all() and m[r] == -np.inf
            continue
        x = s[r][vis] * c
        exact = np.exp2(x - x.max()) / np.exp2(x - x.max()).sum()
        np.testing.assert_allclose(w[r][vis] / l_sum[r], exact, rtol=1e-9, atol=1e-300)
        lse2 = x.max() + np.log2(np.exp2(x - x.max()).sum())
        assert abs((m[r] * c + np.log2(l_sum[r])) - lse2) <= 1e-9 * max(1.0, abs(lse2))
        assert (w[r][~vis] == 0).all()


def test_lazy_rescale_model_skips_rescales_on_flat_scores():
    """The point of the vote: scores within LAZY_LIMIT of the first step's maximum never
    rescale again (one rescale, the first step); scores rising by more do."""
    c = 1.0
    flat = np.random.default_rng(0).uniform(0, 4, (16, 1024))
    assert lazy_warp(flat, 16, c)[3] == 1
    rising = np.tile(np.linspace(0, 200, 1024), (16, 1))
    assert lazy_warp(rising, 16, c)[3] > 10


# ---------------------------------------------------------------------------- launch options


@pytest.mark.parametrize("cap", [(9, 0), (10, 0), (12, 0)])
def test_sm90_and_later_take_the_stepped_tile_at_d128_without_masks(cap):
    assert host.launch_options(128, causal=False, padding=False, capability=cap) == STEPPED


@pytest.mark.parametrize(
    "kw",
    [dict(capability=(8, 0)), dict(capability=(8, 9)), dict(capability=None),
     dict(capability=(9, 0), causal=True), dict(capability=(9, 0), padding=True),
     dict(capability=(9, 0), aligned=False)],
)  # fmt: skip
def test_elsewhere_d128_takes_attention_configs_default(kw):
    args = {"causal": False, "padding": False, **kw}
    assert host.launch_options(128, **args) == {}


@pytest.mark.parametrize("cap", [None, (8, 0), (9, 0)])
def test_d64_options_do_not_depend_on_the_gpu(cap):
    assert host.launch_options(64, causal=False, padding=False, capability=cap) == {
        "block_m": 128,
        "block_n": 64,
    }
    assert host.launch_options(64, causal=True, padding=True, capability=cap) == {}


def _args():
    return attention_args(128)  # tests/host/attention_arrays.py


def test_plan_attention_takes_the_stepped_tile_on_sm90(monkeypatch):
    monkeypatch.setattr(host, "_capability", lambda a: (9, 0))
    cfg, _ = host.plan_attention(*_args())
    assert (cfg.block_m, cfg.block_n, cfg.sub_n, cfg.lazy_rescale) == (128, 64, 16, True)
    assert cfg.late_copies and cfg.shared_bases and cfg.q_in_registers
    causal, _ = host.plan_attention(*_args(), causal=True)
    assert (causal.block_m, causal.block_n, causal.sub_n, causal.lazy_rescale) == (
        64,
        64,
        None,
        False,
    )


@pytest.mark.parametrize(
    "kw",
    [dict(late_copies=False), dict(shared_bases=True), dict(sub_n=64),
     dict(lazy_rescale=False), dict(q_in_registers=False), dict(warps=8)],
)  # fmt: skip
def test_a_given_option_leaves_the_stepped_tile(monkeypatch, kw):
    """The stepped tile is taken whole or not at all: any of its options given (or Q in
    shared memory, or 8 warps) plans what was asked on attention_config's blocks."""
    monkeypatch.setattr(host, "_capability", lambda a: (9, 0))
    cfg, _ = host.plan_attention(*_args(), **kw)
    assert cfg.sub_n == kw.get("sub_n") and cfg.lazy_rescale is False
    assert cfg.block_n == 64 and cfg.block_m == (128 if kw.get("warps") == 8 else 64)


def test_without_a_gpu_the_capability_is_unknown():
    """On a machine without a CUDA driver ``_capability`` is None (no error), so planning
    falls back to the tile that compiles everywhere."""
    try:
        tylo.device_properties(0)
    except tylo.NoDeviceError:
        assert host._capability(_args()[0]) is None
        cfg, _ = host.plan_attention(*_args())
        assert (cfg.block_m, cfg.sub_n) == (64, None)
    else:
        pytest.skip("a GPU is present: the capability is known")


@pytest.mark.parametrize(
    ("argv", "cap", "want"),
    [
        (["1", "16", "4096", "128"], (9, 0), (128, 64, 16)),
        (["1", "16", "4096", "128"], (8, 0), (64, 64, None)),
        (["1", "16", "4096", "128"], None, (64, 64, None)),
        (["1", "16", "4096", "128", "--causal"], (9, 0), (64, 64, None)),
        (["2", "16", "4096", "128", "--kv-lens", "7,9"], (9, 0), (64, 64, None)),
        (["1", "16", "4096", "128", "--warps", "8"], (9, 0), (128, 64, None)),
        (["1", "16", "4096", "64"], (8, 0), (128, 64, None)),
    ],
)  # fmt: skip
def test_cli_plans_what_attention_launches(monkeypatch, argv, cap, want):
    """``run.py`` prints (and with ``--compile-only`` compiles) the configuration
    ``attention()`` launches on a GPU of ``cap``: ``plan_attention``'s, not
    ``attention_config``'s default."""
    import argparse

    from tylo.ops.attention.cli import _config, add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(argv)
    cfg = _config(args, cap)
    assert (cfg.block_m, cfg.block_n, cfg.sub_n) == want
    monkeypatch.setattr(host, "_capability", lambda a: cap)
    lens = None if args.kv_lens is None else device_array((2,), 1 << 40, tylo.i32)
    planned, _ = host.plan_attention(
        *attention_args(args.d), causal=args.causal, warps=args.warps, kv_lens=lens
    )
    assert planned == cfg
