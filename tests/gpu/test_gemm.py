# TEST_TARGET: cc>=8.0
"""examples/gemm on the GPU: relative error <= 1e-2 against float64 on fresh random data
(outputs poisoned first) for the issue's shapes, padded leading dimensions, partial tiles at
every edge combination, many K-tiles through every pipeline depth, element-wise copies for
unaligned leading dimensions, f16, and the epilogues. The command line runs everywhere."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import tylo

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from examples.gemm.kernel import (
    DEFAULT_PLAN,
    SMALL_PLAN,
    choose_config,
    gemm_config,
    verify,
)
from tylo.mma import MMAAtom, TiledMMA

RUN = [sys.executable, str(ROOT / "examples" / "gemm" / "run.py")]


def test_cli_without_running():
    out = subprocess.run(
        [*RUN, "65", "97", "73", "--compile-only", "--target", "sm_90a"],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert "accumulator ownership is a bijection: proved" in out.stdout
    assert "registers" in out.stdout and "spills 0/0" in out.stdout


@pytest.mark.parametrize(
    "shape", [(65, 97, 73), (1, 1, 1), (128, 128, 128), (1000, 1, 129), (4096, 4096, 4096)]
)
def test_issue_shapes(gpu_runtime, shape):
    verify(*shape)


@pytest.mark.parametrize("pad", [(8, 24, 3), (1, 3, 5)])  # aligned (16-byte) and unaligned
def test_padded_leading_dimensions(gpu_runtime, pad):
    res = verify(300, 200, 152, pad=pad)
    assert res["config"].vector == (pad[0] % 8 == 0 and pad[1] % 8 == 0)


@pytest.mark.parametrize("m", [256, 250])
@pytest.mark.parametrize("n", [512, 500])
@pytest.mark.parametrize("k", [256, 200])
def test_every_edge_combination(gpu_runtime, m, n, k):
    pad = (-k % 8, -k % 8, 0)  # keep 16-byte copies: the edges come from M, N, K alone
    cfg = choose_config(m, n, k, k + pad[0], k + pad[1])
    assert cfg.bounded == ((m % 128 or n % 256 or k % 32) > 0)
    verify(m, n, k, pad=pad, cfg=cfg)


@pytest.mark.parametrize("stages", [1, 2, 3, 4])
def test_stage_buffers_reused_over_many_k_tiles(gpu_runtime, stages):
    for bounded in (False, True):
        cfg = gemm_config(DEFAULT_PLAN, stages=stages, bounded=bounded)
        verify(256, 512, 2048 + (0 if not bounded else 24), cfg=cfg)


def test_small_plan_and_rasterization(gpu_runtime):
    for group_m in (1, 3):
        cfg = gemm_config(SMALL_PLAN, stages=3, group_m=group_m)
        verify(333, 517, 296, cfg=cfg)  # lda = 296: 16-byte copies


@pytest.mark.parametrize(("alpha", "relu"), [(-0.5, False), (2.0, True), (-1.0, True)])
def test_epilogues(gpu_runtime, alpha, relu):
    verify(200, 300, 96, alpha=alpha, relu=relu)


def test_f16(gpu_runtime):
    plan = TiledMMA(MMAAtom((16, 8, 16), tylo.f16), DEFAULT_PLAN.warps, DEFAULT_PLAN.repeat, 32)
    verify(384, 256, 512, dtype="f16", cfg=gemm_config(plan, stages=4, bounded=False))
    verify(77, 99, 120, dtype="f16", cfg=choose_config(77, 99, 120, 120, 120, plan=plan))


def test_torch_tensors(gpu_runtime):
    pytest.importorskip("torch", reason="torch is not installed: the torch half needs it")
    verify(513, 257, 300, use_torch=True)


def test_full_tile_config_rejects_partial_tiles(gpu_runtime):
    from tylo.kernel.errors import KernelArgumentError

    cfg = gemm_config(DEFAULT_PLAN, stages=3, bounded=False)
    with pytest.raises(KernelArgumentError, match="divisible|assuming"):
        verify(130, 256, 64, cfg=cfg)


def test_cli_runs_and_verifies(gpu_runtime):
    out = subprocess.run(
        [*RUN, "65", "97", "73", "--relu", "--alpha", "0.5"],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "gemm: OK" in out.stdout
