# TEST_TARGET: cc>=8.0
"""tylo/ops/gemm on the GPU: relative error <= 1e-2 against float64 on fresh random data
(outputs poisoned first) for the issue's shapes, padded leading dimensions, partial tiles at
every edge combination, many K-tiles through every pipeline depth, both epilogues (by
ownership and staged through shared memory), unaligned leading dimensions both packed and
with element-wise copies, f16, and alpha/ReLU. The command line runs everywhere."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import tylo

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tylo.nvgpu.warp.mma import MMAAtom, TiledMMA
from tylo.ops.gemm.host import choose_config, verify
from tylo.ops.gemm.kernel import DEFAULT_PLAN, SMALL_PLAN, gemm_config

RUN = [sys.executable, "-m", "tylo.ops.gemm"]
# the interpreter tier (tests/interp_tier.py) runs a handful of shapes up to 384 x 512 x 512
INTERPRET_SKIP = (
    "512^3 or K = 2048 over many configurations: too slow for the interpreter tier, which "
    "runs this file's smaller shapes"
)
TORCH_CUDA = "makes torch CUDA tensors; the interpreter takes CPU tensors"


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


@pytest.mark.interpret(when=lambda shape: max(shape) <= 128)
@pytest.mark.parametrize(
    "shape", [(65, 97, 73), (1, 1, 1), (128, 128, 128), (1000, 1, 129), (4096, 4096, 4096)]
)
def test_issue_shapes(gpu_runtime, shape):
    verify(*shape)


@pytest.mark.interpret
@pytest.mark.parametrize("pad", [(8, 24, 3), (8, 16, 4), (1, 3, 5)])
def test_padded_leading_dimensions(gpu_runtime, pad):
    res = verify(300, 200, 152, pad=pad)  # unaligned lda, ldb: packed first
    assert res["config"].vector
    assert res["config"].epilogue == ("staged" if (300 + pad[2]) % 4 == 0 else "direct")


@pytest.mark.interpret
@pytest.mark.parametrize("pad", [(1, 3, 5), (3, 0, 0)])
def test_unaligned_leading_dimensions_element_wise(gpu_runtime, pad):
    res = verify(300, 200, 152, pad=pad, pack=False)
    assert not res["config"].vector and res["config"].plan == SMALL_PLAN


@pytest.mark.interpret(when=lambda shape, pad: max(shape) < 300)
@pytest.mark.parametrize(
    ("shape", "pad"),
    [((333, 517, 301), (0, 0, 0)), ((1000, 1001, 1003), (5, 2, 1)), ((65, 97, 73), (0, 0, 0))],
)
def test_packed_operands(gpu_runtime, shape, pad):
    """lda/ldb not multiples of 8: A and B are packed into aligned scratch, then the
    aligned kernel runs (the scratch is reused by the next call: fresh data each time)."""
    for _ in range(2):
        res = verify(*shape, pad=pad)
        assert res["config"].vector and res["config"].plan == DEFAULT_PLAN


@pytest.mark.interpret(skip=TORCH_CUDA)
def test_packed_torch_tensors(gpu_runtime):
    pytest.importorskip("torch", reason="torch is not installed")
    res = verify(257, 129, 77, use_torch=True)
    assert res["config"].vector


@pytest.mark.parametrize("m", [256, 250])
@pytest.mark.parametrize("n", [512, 500])
@pytest.mark.parametrize("k", [256, 200])
def test_every_edge_combination(gpu_runtime, m, n, k):
    pad = (-k % 8, -k % 8, -m % 4)  # 16-byte copies and stores: edges from M, N, K alone
    for epilogue in ("direct", "staged"):
        cfg = choose_config(m, n, k, k + pad[0], k + pad[1], epilogue=epilogue)
        assert cfg.bounded == ((m % 128 or n % 256 or k % 64) > 0)
        verify(m, n, k, pad=pad, cfg=cfg)


@pytest.mark.interpret(when=lambda shape: shape[2] < 4097)
@pytest.mark.parametrize("shape", [(130, 260, 97), (129, 257, 1), (127, 255, 65), (7, 9, 4097)])
def test_k_edge_inside_a_vector(gpu_runtime, shape):
    """K not a multiple of 8 with 16-byte aligned rows: the last vector of a row is partly
    past K (its source size zero-fills the rest); rows past M and N read the last row."""
    m, n, k = shape
    pad = (-k % 8 + 8, -k % 8, -m % 4)
    for epilogue in ("direct", "staged"):
        cfg = choose_config(m, n, k, k + pad[0], k + pad[1], epilogue=epilogue)
        assert cfg.vector and cfg.bounded
        verify(m, n, k, pad=pad, cfg=cfg)


@pytest.mark.parametrize("stages", [1, 2, 3, 4])
def test_stage_buffers_reused_over_many_k_tiles(gpu_runtime, stages):
    for bounded in (False, True):
        for epilogue in ("direct", "staged"):
            cfg = gemm_config(DEFAULT_PLAN, stages=stages, bounded=bounded, epilogue=epilogue)
            verify(256, 512, 2048 + (0 if not bounded else 24), cfg=cfg)


def test_other_tiles_staged(gpu_runtime):
    atom = DEFAULT_PLAN.atom
    for warps, repeat, k, stages in (((4, 2), (4, 8), 64, 3), ((2, 4), (4, 8), 32, 4)):
        plan = TiledMMA(atom, warps, repeat, k)
        for shape, bounded in (((512, 512, 512), False), ((300, 301, 150), True)):
            cfg = gemm_config(plan, stages=stages, bounded=bounded, epilogue="staged")
            verify(*shape, pad=(-shape[2] % 8, -shape[2] % 8, 0), cfg=cfg)


def test_small_plan_and_rasterization(gpu_runtime):
    for group_m in (1, 3):
        cfg = gemm_config(SMALL_PLAN, stages=3, group_m=group_m)
        verify(333, 517, 296, cfg=cfg)  # lda = 296: 16-byte copies


@pytest.mark.interpret
@pytest.mark.parametrize(("alpha", "relu"), [(-0.5, False), (2.0, True), (-1.0, True)])
def test_epilogues(gpu_runtime, alpha, relu):
    verify(200, 300, 96, alpha=alpha, relu=relu)
    verify(256, 512, 128, alpha=alpha, relu=relu)  # full tiles: the staged epilogue


@pytest.mark.interpret
def test_f16(gpu_runtime):
    plan = TiledMMA(MMAAtom((16, 8, 16), tylo.f16), DEFAULT_PLAN.warps, DEFAULT_PLAN.repeat, 64)
    verify(384, 256, 512, dtype="f16", cfg=gemm_config(plan, stages=4, bounded=False))
    cfg = choose_config(77, 99, 120, 120, 120, plan=plan, ldd=77)
    verify(77, 99, 120, dtype="f16", cfg=cfg)


@pytest.mark.interpret(skip=TORCH_CUDA)
def test_torch_tensors(gpu_runtime):
    pytest.importorskip("torch", reason="torch is not installed: the torch half needs it")
    verify(513, 257, 300, use_torch=True)


@pytest.mark.interpret
def test_full_tile_config_rejects_partial_tiles(gpu_runtime):
    from tylo.kernel.errors import KernelArgumentError

    cfg = gemm_config(DEFAULT_PLAN, stages=3, bounded=False)
    with pytest.raises(KernelArgumentError, match="divisible|assuming"):
        verify(130, 256, 64, cfg=cfg)


@pytest.mark.interpret
def test_staged_epilogue_rejects_unaligned_ldd(gpu_runtime):
    from tylo.kernel.errors import KernelArgumentError

    cfg = gemm_config(DEFAULT_PLAN, stages=4, bounded=False, epilogue="staged")
    with pytest.raises(KernelArgumentError, match="divisible|assuming"):
        verify(128, 256, 64, pad=(0, 0, 1), cfg=cfg)


@pytest.mark.interpret
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
