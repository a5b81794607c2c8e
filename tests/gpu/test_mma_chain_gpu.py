# TEST_TARGET: cc>=8.0
"""The chained product ``(A Bᵀ) Cᵀ`` on the GPU: the first MMA's f32 accumulator becomes the
second MMA's packed A operand in registers (:func:`tylo.nvgpu.warp.chain.accumulator_as_a_operand`).
Small integers keep every step exact (the first product fits the 8-bit significand of bf16,
the second fits f32), so the output must equal the float64 product exactly; the output
buffer is poisoned with NaN bytes first, so an element never written fails too."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import tylo
from tylo.nvgpu.warp.mma import size

_SASS = Path(__file__).resolve().parents[1] / "nvvm" / "test_mma_chain_sass.py"
_spec = importlib.util.spec_from_file_location("_mma_chain_kernels", _SASS)
chain = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(chain)  # the kernel and plans of the compile-only test


pytestmark = pytest.mark.interpret  # the runtime tests here run in the interpreter tier too


def _bits(x: np.ndarray, dtype) -> np.ndarray:
    if dtype is tylo.bf16:
        return (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    return x.astype(np.float16).view(np.uint16)


@pytest.mark.parametrize("name", sorted(chain.PLANS))
def test_chained_product_is_exact(gpu_runtime, name):
    from tylo.arrays import DeviceBuffer
    from tylo.backend import driver

    first, second = chain.PLANS[name]
    m, n1, k1 = size(first)
    _, n2, _ = size(second)
    dtype = first.atom.dtype
    # |S| <= 2 * 2 * k1 <= 256 (k1 <= 64) is exact in bf16 and f16; P C stays below 2**24
    lim = 2
    rng = np.random.default_rng()
    a = rng.integers(-lim, lim + 1, size=(m, k1)).astype(np.float64)
    b = rng.integers(-lim, lim + 1, size=(n1, k1)).astype(np.float64)
    c = rng.integers(-3, 4, size=(n2, n1)).astype(np.float64)
    s = a @ b.T
    assert np.abs(s).max() <= 256
    want = s @ c.T  # (M, n2)
    dev = [DeviceBuffer.from_numpy(_bits(x, dtype), dtype=dtype) for x in (a, b, c)]
    d = DeviceBuffer.empty(m * n2, tylo.f32).fill_bytes(0xFF)  # NaN until written
    chain.chained[1, first.threads](d, *dev, first, second, False)
    driver.synchronize()
    got = d.to_numpy().reshape(n2, m).T  # column-major (M, n2)
    np.testing.assert_array_equal(got, want)
