# TEST_TARGET: cc>=8.0
"""Runtime-dependent Python constructs on the GPU (tylo issue 11, items 2 and 3): ``match``
on the thread index gives each thread its own case, ``in`` over literals and ranges,
``dict.get`` and ``tuple[i]`` with runtime keys, ``(c) == True``; and ``tylo.ptx``
reductions and atomics whose results are unused still happen. Each compares with numpy.

The assembly halves always run (compile for sm_80 and sm_90a); the runtime halves need a
GPU (``gpu_runtime``)."""

from __future__ import annotations

import numpy as np
import pytest

import tylo
from tylo.arrays import DeviceBuffer

F32, I32, U32 = tylo.f32, tylo.i32, tylo.u32
TARGETS = ("sm_80", "sm_90a")
BLOCK = 128


pytestmark = pytest.mark.interpret  # the runtime tests here run in the interpreter tier too


def host(buf: DeviceBuffer) -> np.ndarray:
    from tylo.backend import driver

    driver.synchronize()
    return buf.to_numpy()


@tylo.kernel
def per_thread(out, n):
    t = tylo.thread_idx.x
    match t % 8:
        case 0:
            v = 10
        case 1 | 2:
            v = 20
        case k if k > 5:
            v = 30 + k
        case _:
            v = 40
    if t in (3, 17, 64) or t in range(100, 120, 7):
        v = v + 1000
    table = {0: 5, 3: 6, 5: 7}
    consts = (100, 200, 300, 400)
    w = table.get(t % 6, 9) + consts[t % 4]
    if (t < n) == True:  # noqa: E712 - the construct under test
        w = w + 50000
    out[t] = tylo.value(v * 100000 + w, I32)


def per_thread_reference(n: int) -> np.ndarray:
    out = np.empty(BLOCK, np.int32)
    for t in range(BLOCK):
        match t % 8:
            case 0:
                v = 10
            case 1 | 2:
                v = 20
            case k if k > 5:
                v = 30 + k
            case _:
                v = 40
        if t in (3, 17, 64) or t in range(100, 120, 7):
            v = v + 1000
        w = {0: 5, 3: 6, 5: 7}.get(t % 6, 9) + (100, 200, 300, 400)[t % 4]
        if t < n:
            w = w + 50000
        out[t] = v * 100000 + w
    return out


@pytest.mark.parametrize("target", TARGETS)
def test_per_thread_logic_assembly(target):
    k = per_thread.compile(I32, int, block=BLOCK, target=target)
    assert k.ptx.count("bra") >= 4 and "st.global" in k.ptx


@pytest.mark.parametrize("n", [1, 50, 1000])
def test_per_thread_logic_runtime(gpu_runtime, n):
    out = DeviceBuffer.empty(BLOCK, I32).fill_bytes(0xFF)
    per_thread[1, BLOCK](out, n)
    np.testing.assert_array_equal(host(out), per_thread_reference(n))


@tylo.kernel
def counters(counts, x, n):
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    if i < n:
        tylo.ptx("red.global.add.u32", counts.address(0), tylo.value(1, U32))
        tylo.ptx("atom.global.max.u32", counts.address(1), x[i])  # result unused
        tylo.ptx("red.global.add.u32", counts.address(2), x[i])


@pytest.mark.parametrize("target", TARGETS)
def test_reductions_assembly(target):
    ptx = counters.compile(U32, U32, int, block=BLOCK, target=target).ptx
    assert ptx.count("red.global.add.u32") + ptx.count("red.relaxed.gpu.global.add.u32") == 2
    assert "atom.global.max.u32" in ptx


def test_reductions_runtime(gpu_runtime):
    n = 1000
    x = np.random.default_rng(3).integers(0, 1 << 20, n).astype(np.uint32)
    counts = DeviceBuffer.from_numpy(np.zeros(3, np.uint32))
    counters[(n + BLOCK - 1) // BLOCK, BLOCK](counts, DeviceBuffer.from_numpy(x), n)
    got = host(counts)
    assert got[0] == n and got[1] == x.max() and got[2] == int(x.sum()) % (1 << 32)
