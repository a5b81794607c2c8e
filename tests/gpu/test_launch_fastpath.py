# TEST_TARGET: cc>=8.0
"""Repeated launches on the GPU: the checked launch, then the reader path, then the inline
path (tylo.kernel.fastpath) must all compute the same results, from tylo buffers and torch
tensors, on other streams, from several threads, with more than 48 KB of dynamic shared
memory; a driver error on the fast path is a typed error naming the call."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import tylo
from tylo.arrays import DeviceBuffer
from tylo.backend import driver

F32 = tylo.f32


INTERPRET_SKIP = (  # the interpreter tier (tests/interp_tier.py)
    "tests the GPU launch paths (checked, reader, C inline), torch streams and the driver's "
    "errors, which the interpreter replaces"
)


@tylo.kernel
def affine(out, x, alpha: float, n):
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    if i < n:
        out[i] = x[i] * alpha + 1.0


@tylo.kernel
def reverse_64k(out, x):
    t = tylo.thread_idx.x
    buf = tylo.dynamic_shared(F32, 16384)  # 64 KB: above the default 48 KB
    buf[16128 + t] = x[t]
    tylo.sync_threads()
    out[t] = buf[16128 + 255 - t]


def expect(x: np.ndarray, alpha: float, n: int) -> np.ndarray:
    return x[:n] * np.float32(alpha) + np.float32(1.0)


def check_launches(launcher, make, read, size: int, rng) -> None:
    """Six launches on one launcher, fresh random input and a poisoned output each
    time, a different alpha and n; every element below n right, the rest untouched."""
    for step in range(6):
        x = rng.standard_normal(size).astype(np.float32)
        n = size - 7 * step
        alpha = float(rng.uniform(-2, 2))
        xd, out = make(x), make(np.full(size, np.nan, np.float32))
        launcher(out, xd, alpha, n)
        got = read(out)
        np.testing.assert_allclose(got[:n], expect(x, alpha, n), rtol=1e-6, atol=1e-6)
        assert np.isnan(got[n:]).all()


def test_every_path_computes_the_same(gpu_runtime):
    rng = np.random.default_rng()
    launcher = affine[4, 256]

    def read(buf):
        driver.synchronize()
        return buf.to_numpy()

    check_launches(launcher, DeviceBuffer.from_numpy, read, 1000, rng)
    assert launcher.inline is not None  # the inline path took part
    assert affine.stats.compiles == 1


def test_torch_tensors_and_streams(gpu_runtime):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng()
    launcher = affine[4, 256]

    def make(a):
        return torch.from_numpy(a).cuda()

    def read(t):
        torch.cuda.synchronize()
        return t.cpu().numpy()

    check_launches(launcher, make, read, 1000, rng)
    assert launcher.inline is not None
    side = torch.cuda.Stream()
    x = rng.standard_normal(1000).astype(np.float32)
    xd = make(x)
    for _ in range(4):  # an int stream handle takes the fast paths too
        out = torch.full((1000,), float("nan"), device="cuda")
        torch.cuda.synchronize()
        launcher(out, xd, 0.5, 1000, stream=side.cuda_stream)
        side.synchronize()
        np.testing.assert_allclose(out.cpu().numpy(), expect(x, 0.5, 1000), rtol=1e-6)


@pytest.mark.interpret
def test_threads_launch_side_by_side(gpu_runtime):
    launcher = affine[4, 256]
    errors: list[BaseException] = []

    def work(seed: int) -> None:
        try:
            rng = np.random.default_rng(seed)
            for _ in range(20):
                x = rng.standard_normal(1000).astype(np.float32)
                out = DeviceBuffer.from_numpy(np.full(1000, np.nan, np.float32))
                launcher(out, DeviceBuffer.from_numpy(x), 2.0, 1000)
                driver.synchronize()
                np.testing.assert_allclose(out.to_numpy(), expect(x, 2.0, 1000), rtol=1e-6)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_more_than_48_kb_of_dynamic_shared_memory(gpu_runtime):
    rng = np.random.default_rng()
    launcher = reverse_64k[1, 256]
    for _ in range(4):
        x = rng.standard_normal(256).astype(np.float32)
        out = DeviceBuffer.from_numpy(np.full(256, np.nan, np.float32))
        launcher(out, DeviceBuffer.from_numpy(x), shared=65536)
        driver.synchronize()
        np.testing.assert_array_equal(out.to_numpy(), x[::-1])
    assert launcher.inline is not None


def test_a_driver_error_on_the_fast_path_names_the_call(gpu_runtime):
    x = DeviceBuffer.from_numpy(np.ones(256, np.float32))
    out = DeviceBuffer.empty(256, F32)
    for _ in range(3):
        affine[1, 256](out, x, 1.0, 256)
    too_tall = affine[(1, 70_000), 256]  # grid.y is at most 65535: the driver refuses
    with pytest.raises(tylo.CudaError, match="cuLaunchKernelEx.*INVALID_VALUE"):
        too_tall(out, x, 1.0, 256)
    affine[1, 256](out, x, 3.0, 256)  # the context is still usable
    driver.synchronize()
    np.testing.assert_array_equal(out.to_numpy(), np.full(256, 4.0, np.float32))
