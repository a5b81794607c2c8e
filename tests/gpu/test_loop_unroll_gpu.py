# TEST_TARGET: cc>=8.0
"""Unrolled ``tylo.range`` loops give the same results as numpy on the GPU, with trip counts
that the unroll count does not divide (the remainder iterations run too). The PTX these
loops compile to is checked in tests/nvvm/test_loop_unroll.py."""

from __future__ import annotations

import numpy as np
import pytest

import tylo
from tylo.arrays import DeviceBuffer
from tylo.backend import driver
from tylo.target import Target

F32, I32 = tylo.f32, tylo.i32
BLOCK = 128


pytestmark = pytest.mark.interpret  # the runtime tests here run in the interpreter tier too


@tylo.kernel
def strided_sum(out, count, x, n: tylo.Int(min=0), unroll: tylo.Static):
    t = tylo.thread_idx.x
    acc = tylo.value(0.0)
    hits = 0
    for i in tylo.range(t, n, tylo.block_dim.x, unroll=unroll):
        acc = acc + x[i] * (i % 7 + 1)
        hits = hits + 1
    out[t] = acc
    count[t] = tylo.value(hits, I32)


@tylo.kernel
def tile_sums(out, x, rows, trips: tylo.Static, unroll: tylo.Static):
    # rows x trips*BLOCK, row-major: each thread sums its column of every row
    t = tylo.thread_idx.x
    for r in tylo.range(rows, unroll=2):
        acc = tylo.value(0.0)
        for c in tylo.range(trips, unroll=unroll):
            acc = acc + x[(r * trips + c) * tylo.block_dim.x + t]
        out[r * tylo.block_dim.x + t] = acc


UNROLLS = [None, 1, 2, 3, 4, 8]
STATIC_TRIPS = [(13, 4), (13, True), (13, 1), (6, 8)]


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
def test_kernels_of_this_file_compile(target) -> None:
    for unroll in UNROLLS:
        k = strided_sum.compile(F32, I32, F32, int, unroll, block=BLOCK, target=target)
        assert ".extern .func llvm." not in k.ptx
    for trips, unroll in STATIC_TRIPS:
        k = tile_sums.compile(F32, F32, int, trips, unroll, block=BLOCK, target=target)
        assert k.resources.spill_stores == 0


def run(kern, grid, *args, **kw) -> None:
    kern[grid, BLOCK](*args, **kw)
    driver.synchronize()


@pytest.mark.parametrize("unroll", UNROLLS)
@pytest.mark.parametrize("n", [0, 5, BLOCK * 37 + 55, BLOCK * 8])
def test_strided_sum(gpu_runtime: Target, unroll, n) -> None:
    rng = np.random.default_rng(n)
    x = rng.integers(-8, 9, size=max(n, 1)).astype(np.float32)  # exact sums in f32
    out = DeviceBuffer.empty(BLOCK, F32).fill_bytes(0xFF)
    count = DeviceBuffer.empty(BLOCK, I32).fill_bytes(0xFF)
    run(strided_sum, 1, out, count, DeviceBuffer.from_numpy(x), n, unroll)
    weight = np.arange(n) % 7 + 1
    want = np.zeros(BLOCK)
    np.add.at(want, np.arange(n) % BLOCK, x[:n] * weight)
    hits = np.bincount(np.arange(n) % BLOCK, minlength=BLOCK)
    np.testing.assert_array_equal(out.to_numpy(), want.astype(np.float32))
    np.testing.assert_array_equal(count.to_numpy(), hits)


@pytest.mark.parametrize(("trips", "unroll"), STATIC_TRIPS)
@pytest.mark.parametrize("rows", [1, 5])
def test_nested_static_trips(gpu_runtime: Target, trips, unroll, rows) -> None:
    rng = np.random.default_rng(trips * rows)
    x = rng.integers(-8, 9, size=(rows, trips, BLOCK)).astype(np.float32)
    out = DeviceBuffer.empty(rows * BLOCK, F32).fill_bytes(0xFF)
    run(tile_sums, 1, out, DeviceBuffer.from_numpy(x.reshape(-1)), rows, trips, unroll)
    np.testing.assert_array_equal(out.to_numpy().reshape(rows, BLOCK), x.sum(axis=1))
