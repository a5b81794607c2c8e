"""The launch path without a GPU: the driver calls are replaced by recorders, so
specialization, caching (ten launches compile once), argument packing, the checks that run
before a launch, and the fast path after the first checked launch are all exercised."""

from __future__ import annotations

import ctypes
from types import SimpleNamespace

import pytest

import tylo
from tylo.arrays import DeviceArray
from tylo.backend import driver
from tylo.kernel import launch as launch_mod

F32, F16 = tylo.f32, tylo.f16


def array(ptr=0x7F00_0000_0000, n=256, dtype=F32, device=0):
    return DeviceArray(ptr, (n,), (1,), dtype, device)


@pytest.fixture
def recorder(monkeypatch):
    """Replace the driver: checked launches and direct cuLaunchKernel calls are recorded
    with the packed argument bytes they would pass."""
    calls: list[tuple] = []
    sizes: dict[int, tuple[int, ...]] = {}  # ArgPack address -> parameter sizes

    def checked(fn, grid, block, pack, *, shared_bytes=0, stream=None):
        sizes[pack.address] = pack.sizes
        calls.append(("checked", grid, block, shared_bytes, pack.values()))

    def direct(handle, gx, gy, gz, bx, by, bz, shared, stream, address, extra):
        n = sizes[address]  # what the driver reads: kernelParams[i] -> n[i] bytes
        ptrs = (ctypes.c_void_p * len(n)).from_address(address)
        raw = tuple(
            int.from_bytes(ctypes.string_at(ptrs[i], n[i]), "little", signed=True)
            for i in range(len(n))
        )
        calls.append(("direct", (gx, gy, gz), (bx, by, bz), shared, raw))
        return (0,)

    monkeypatch.setattr(driver, "launch", checked)
    monkeypatch.setattr(launch_mod, "_CU_LAUNCH", direct)
    monkeypatch.setattr(launch_mod, "_DRIVER", driver)
    monkeypatch.setitem(launch_mod._targets, 0, tylo.Target.parse("sm_90a"))
    monkeypatch.setitem(launch_mod._targets, 1, tylo.Target.parse("sm_80"))
    monkeypatch.setattr(
        launch_mod.CompiledKernel,
        "function",
        lambda self, ordinal=0: SimpleNamespace(handle=ordinal),
    )
    return calls


def make_kernel():
    def add_one(out, x, n):
        i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
        if i < n:
            out[i] = x[i] + 1.0

    return tylo.kernel(add_one)


def test_ten_launches_compile_once(recorder):
    k = make_kernel()
    out, x = array(0x1000), array(0x2000)
    for i in range(10):
        k[4, 256](out, x, 1000 + i)
    assert k.stats.compiles == 1 and k.stats.traces <= 1
    assert recorder[0][0] == "checked"  # the first launch in a thread is fully checked
    assert {c[0] for c in recorder[1:]} == {"direct"}  # then the fast path
    assert recorder[-1] == ("direct", (4, 1, 1), (256, 1, 1), 0, (0x1000, 0x2000, 1009))


def test_specializations_follow_dtype_block_device_and_statics(recorder):
    k = make_kernel()
    k[1, 128](array(), array(), 5)
    k[1, 128](array(dtype=F16), array(dtype=F16), 5)  # another dtype
    k[1, 64](array(), array(), 5)  # another block shape
    k[1, 128](array(device=1), array(device=1), 5)  # another device, its own target
    k[2, 128](array(), array(), 7)  # another grid: the same specialization
    assert k.stats.compiles == 4
    targets = {hot.entry.target.sm for hot in k.cache.values()}
    assert targets == {"sm_90a", "sm_80"}


@tylo.kernel
def guarded(out, x: tylo.Ptr(align=16), n: tylo.Int(), vec: tylo.Static):
    if vec > 1:
        tylo.assume(tylo.divisible(n, vec))
    i = tylo.thread_idx.x
    if i < n:
        out[i] = x[i]


GUARDED = guarded.fn


def test_checks_before_launching(recorder):
    k = make_kernel()
    k[1, 32](array(), array(), 4)
    with pytest.raises(tylo.KernelArgumentError, match="must be positive"):
        k[1, 32](array(), array(), 0)
    with pytest.raises(tylo.KernelArgumentError, match="different devices"):
        k[1, 32](array(device=0), array(device=1), 4)
    with pytest.raises(tylo.KernelArgumentError, match="expected a Python int"):
        tylo.kernel(guarded.fn)[1, 32](array(), array(), 4.5, 1)  # n: an int, annotated
    with pytest.raises(tylo.KernelArgumentError, match="host memory"):
        import numpy as np

        k[1, 32](array(), np.zeros(4, np.float32), 4)
    assert len(recorder) == 1  # nothing else was launched


def test_guards_and_alignment_on_the_fast_path(recorder):
    guarded = tylo.kernel(GUARDED)  # a fresh Kernel: nothing cached by other tests
    guarded[1, 32](array(), array(0x1000), 8, 4)
    guarded[1, 32](array(), array(0x1000), 12, 4)  # fast path, guard holds
    assert [c[0] for c in recorder] == ["checked", "direct"]
    with pytest.raises(tylo.KernelArgumentError, match="compiled assuming 4 | n"):
        guarded[1, 32](array(), array(0x1000), 10, 4)
    with pytest.raises(tylo.KernelArgumentError, match="not aligned to 16 bytes"):
        guarded[1, 32](array(), array(0x1004), 8, 4)
    guarded[1, 32](array(), array(0x1000), 10, 1)  # vec=1: no guard
    assert len(recorder) == 3


def test_streams_and_bad_grids_take_the_checked_path(recorder):
    k = make_kernel()
    k[1, 32](array(), array(), 4)
    k[1, 32](array(), array(), 4, stream=SimpleNamespace(cuda_stream=7))
    assert [c[0] for c in recorder] == ["checked", "checked"]
    k[(2, 3), 32](array(), array(), 4, stream=0)
    assert recorder[-1][0] == "direct" and recorder[-1][1] == (2, 3, 1)
    k[(0,), 32](array(), array(), 4)  # an invalid grid: the driver's checks report it
    assert recorder[-1][0] == "checked"
    k[[3, 2], 32](array(), array(), 4)  # a list is fine too (not cached)
    assert recorder[-1][1] == (3, 2, 1)


def test_dynamic_shared_memory_is_checked(recorder):
    @tylo.kernel
    def uses_smem(out):
        t = tylo.thread_idx.x
        buf = tylo.dynamic_shared(F32, 256)
        buf[t] = 1.0
        tylo.sync_threads()
        out[t] = buf[255 - t]

    with pytest.raises(tylo.KernelArgumentError, match="need 1024 bytes"):
        uses_smem[1, 256](array(), shared=512)
    uses_smem[1, 256](array(), shared=1024)
    assert recorder[-1][3] == 1024
