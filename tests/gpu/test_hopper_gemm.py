# TEST_TARGET: cc>=9.0a
"""The warp-specialized Hopper GEMM (examples/hopper_gemm): its SASS has wgmma, TMA loads and
mbarrier operations and no local memory; on an H200 it matches float64 (poisoned output,
fresh random data) at every edge combination, with operands TMA cannot read routed to the
warp-MMA GEMM."""

from __future__ import annotations

import warnings

import pytest

import tylo
from examples.hopper_gemm.host import compile_hopper_gemm, verify
from examples.hopper_gemm.kernel import HopperGemmConfig


@pytest.mark.parametrize("bn,m_atoms", [(128, 1), (256, 1), (128, 2)])
def test_assembly(bn, m_atoms):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nvJitLink may drop setmaxnreg here (it warns)
        k = compile_hopper_gemm(HopperGemmConfig(bn=bn, m_atoms=m_atoms))
    assert f"HGMMA.64x{bn}x16.F32.BF16" in k.sass
    assert "UTMALDG.2D" in k.sass and "SYNCS" in k.sass
    assert "LDL" not in k.sass and "STL" not in k.sass
    assert k.ptx.count("setmaxnreg") == 3  # the producer gives registers, both consumers take


@pytest.mark.parametrize(
    "shape",
    [(1, 1, 1), (65, 97, 73), (64, 128, 8), (129, 257, 64), (200, 300, 136), (1000, 1000, 1000),
     (130, 70, 4104)],
    ids=str,
)
def test_matches_float64(gpu_runtime, shape):
    m, n, k = shape
    res = verify(m, n, k, alpha=0.5)
    assert res["path"] == ("hopper" if k % 8 == 0 else "warp")


def test_large_square_and_f16_and_wide_tiles(gpu_runtime):
    assert verify(4096, 4096, 4096)["path"] == "hopper"
    assert verify(333, 517, 264, dtype="f16")["path"] == "hopper"
    assert verify(300, 600, 256, cfg=HopperGemmConfig(bn=256))["path"] == "hopper"
    assert verify(513, 300, 192, cfg=HopperGemmConfig(m_atoms=2))["path"] == "hopper"


@pytest.mark.parametrize("bad", [dict(m_atoms=2, bn=256), dict(m_atoms=3), dict(bn=96)])
def test_configs_that_do_not_fit_are_refused(bad):
    from tylo.nvgpu.errors import PlanError

    with pytest.raises(PlanError):
        HopperGemmConfig(**bad)
