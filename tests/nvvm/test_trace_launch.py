"""The launch path without a GPU: the driver calls are replaced by recorders, so
specialization, caching (ten launches compile once), argument packing, the checks that run
before a launch, and the fast path after the first checked launch are all exercised."""

from __future__ import annotations

import ctypes
import struct
from types import SimpleNamespace

import pytest

import tylo
from tylo.arrays import DeviceArray
from tylo.backend import driver, launchex
from tylo.kernel import fastpath
from tylo.kernel import launch as launch_mod
from tylo.testing import require_c_launch

F32, F16 = tylo.f32, tylo.f16


def array(ptr=0x7F00_0000_0000, n=256, dtype=F32, device=0):
    return DeviceArray(ptr, (n,), (1,), dtype, device)


HANDLE = 0x1000  # the recorder's function handle on device 0 (1 on device 1...)


class Calls(list):
    """Recorded launches; ``streams`` holds the stream of each direct launch."""

    def __init__(self):
        super().__init__()
        self.streams: list[int] = []


@pytest.fixture(params=["python", "c"])
def recorder(monkeypatch, request):
    """Replace the driver: checked launches and direct cuLaunchKernelEx calls are recorded
    with the launch configuration and the argument bytes the driver would read."""
    if request.param == "c":
        require_c_launch()
    monkeypatch.setattr(fastpath, "ACCELERATED", request.param == "c")
    calls = Calls()
    sizes: dict[int, tuple[int, ...]] = {}  # kernelParams address -> parameter sizes
    sizes_c = [()]  # the C path's own kernelParams: the sizes of the last checked launch

    class Record(launchex.LaunchRecord):
        __slots__ = ()

        def __init__(self, params):
            super().__init__(params)
            sizes[self.params] = tuple(p.size for p in params)

    def checked(fn, grid, block, pack, *, shared_bytes=0, stream=None):
        driver._tls.ordinal = fn.handle - HANDLE  # as the real one: the context is current
        sizes_c[0] = pack.sizes
        calls.append(("checked", grid, block, shared_bytes, pack.values()))

    def direct(config, handle, params, extra):
        try:
            gx, gy, gz, bx, by, bz, shared, stream = struct.unpack_from(
                "<7I4xQ", ctypes.string_at(config, 40)
            )
            n = sizes.get(params) or sizes_c[0]  # kernelParams[i] -> n[i] bytes
            ptrs = (ctypes.c_void_p * len(n)).from_address(params)
            raw = tuple(
                int.from_bytes(ctypes.string_at(ptrs[i], n[i]), "little", signed=True)
                for i in range(len(n))
            )
            assert extra is None and handle == HANDLE + driver._tls.ordinal
            calls.append(("direct", (gx, gy, gz), (bx, by, bz), shared, raw))
            calls.streams.append(stream)
        except Exception as exc:  # a ctypes callback cannot raise: record it instead
            calls.append(("error", repr(exc)))
        return 0

    monkeypatch.setattr(driver, "launch", checked)
    keep = launchex.LAUNCH_EX_TYPE(direct)  # called from C by the C path
    calls.keep = keep
    monkeypatch.setattr(launchex, "_launch_ex", keep)
    monkeypatch.setattr(launchex, "LaunchRecord", Record)
    monkeypatch.setattr(launch_mod, "_DRIVER", driver)
    monkeypatch.setitem(launch_mod._targets, 0, tylo.Target.parse("sm_90a"))
    monkeypatch.setitem(launch_mod._targets, 1, tylo.Target.parse("sm_80"))
    monkeypatch.setattr(
        launch_mod.CompiledKernel,
        "function",
        lambda self, ordinal=0: SimpleNamespace(
            handle=HANDLE + ordinal, set_max_dynamic_shared_memory=lambda n: None
        ),
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
    out, x = array(0x1000, n=1024), array(0x2000, n=1024)  # the 4 x 256 threads' elements
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


def test_repeated_launches_take_the_inline_path(recorder):
    k = make_kernel()
    launcher = k[4, 256]
    out, x = array(0x1000), array(0x2000)
    launcher(out, x, 10)  # checked
    assert launcher.inline is None
    launcher(out, x, 11)  # reader path: makes the inline function
    assert launcher.inline is not None
    for n in (12, 13):
        assert launcher.inline(launcher.dims, (out, x, n), 0, None) is True
    launcher(out, array(0x3000), 14, stream=5)
    assert [c[0] for c in recorder] == ["checked"] + ["direct"] * 4
    assert [c[4] for c in recorder[1:]] == [
        (0x1000, 0x2000, 11),
        (0x1000, 0x2000, 12),
        (0x1000, 0x2000, 13),
        (0x1000, 0x3000, 14),
    ]
    assert recorder.streams == [0, 0, 0, 5]
    assert all(c[1:4] == ((4, 1, 1), (256, 1, 1), 0) for c in recorder[1:])


def test_the_inline_path_checks_the_bounds_guards(recorder):
    """add_one writes out[i] for i < n over 4 x 256 threads: the inline function (the C
    one with the extension) accepts arrays long enough and declines a short one, which the
    checked path then refuses before the driver."""
    k = make_kernel()
    assert k.accesses(F32, F32, int, block=256).count("guarded") == 2
    launcher = k[4, 256]
    out, x = array(0x1000), array(0x2000)  # 256 elements
    launcher(out, x, 200)
    launcher(out, x, 201)  # makes the inline function
    if fastpath.ACCELERATED:
        assert type(launcher.inline).__name__ == "InlineLaunch"
    assert launcher.inline(launcher.dims, (out, x, 256), 0, None) is True
    assert launcher.inline(launcher.dims, (out, x, 257), 0, None) is False  # x[256]: past
    before = len(recorder)
    with pytest.raises(tylo.OutOfBoundsLaunchError, match=r"argument 'x'.*n = 257"):
        launcher(out, x, 257)
    with pytest.raises(tylo.OutOfBoundsLaunchError, match=r"len\(x\) = 100"):
        launcher(out, array(0x3000, n=100), 200)
    assert len(recorder) == before  # no refused launch reached the driver
    launcher(out, x, 256)
    assert recorder[-1][0] == "direct"


def test_inline_guards_send_other_arguments_elsewhere(recorder):
    k = make_kernel()
    launcher = k[1, 64]
    for n in (5, 6):
        launcher(array(), array(), n)
    first = launcher.inline
    assert first is not None
    assert first(launcher.dims, (array(dtype=F16), array(dtype=F16), 5), 0, None) is False
    assert first(launcher.dims, (array(device=1), array(device=1), 5), 0, None) is False
    assert first(launcher.dims, (array(), array(), 5.0), 0, None) is False  # a float
    assert first(launcher.dims, (array(), array(), 0), 0, None) is False  # n >= 1 fails
    assert first(launcher.dims, (array(), array()), 0, None) is False  # too few
    assert first(launcher.dims, (array(), array(), 5), 0, object()) is False  # a stream
    assert first(launcher.dims, (array(), array(), 5), 50_000, None) is False  # > 48 KB
    assert len(recorder) == 2  # none of those launched
    launcher(array(dtype=F16), array(dtype=F16), 7)  # another specialization: checked
    assert recorder[-1][0] == "checked" and k.stats.compiles == 2
    with pytest.raises(tylo.KernelArgumentError, match="must be positive"):
        launcher(array(), array(), 0)
    launcher(out=array(0x10), x=array(0x20), n=9)  # keywords: the reader path
    assert recorder[-1] == ("direct", (1, 1, 1), (64, 1, 1), 0, (0x10, 0x20, 9))


def test_inline_path_keeps_statics_floats_and_alignment(recorder):
    @tylo.kernel
    def scaled(out, x: tylo.Ptr(align=16), s: float, n: tylo.Int(), vec: tylo.Static):
        if vec > 1:
            tylo.assume(tylo.divisible(n, vec))
        i = tylo.thread_idx.x
        if i < n:
            out[i] = x[i] * s

    launcher = scaled[1, 32]
    for n in (8, 16, 24):
        launcher(array(), array(0x1000), 2, n, 4)  # s given as an int: passed as a float
    assert launcher.inline is not None and scaled.stats.compiles == 1
    got = [c[4] for c in recorder[1:]]
    as_f32 = int.from_bytes(struct.pack("<f", 2.0), "little")
    assert got == [(0x7F00_0000_0000, 0x1000, as_f32, n) for n in (16, 24)]
    with pytest.raises(tylo.KernelArgumentError, match="compiled assuming 4 | n"):
        launcher(array(), array(0x1000), 2, 10, 4)
    with pytest.raises(tylo.KernelArgumentError, match="not aligned to 16 bytes"):
        launcher(array(), array(0x1008), 2, 8, 4)
    launcher(array(), array(0x1000), 2, 10, 1)  # another static value: a new specialization
    assert scaled.stats.compiles == 2 and recorder[-1][0] == "checked"


def test_each_thread_starts_with_a_checked_launch(recorder):
    import threading

    k = make_kernel()
    launcher = k[1, 32]
    for n in (1, 2, 3):
        launcher(array(), array(), n)
    worker = threading.Thread(target=lambda: [launcher(array(), array(), n) for n in (4, 5)])
    worker.start()
    worker.join()
    assert [c[0] for c in recorder] == ["checked", "direct", "direct", "checked", "direct"]


def test_large_dynamic_shared_memory_takes_the_fast_path_once_allowed(recorder):
    @tylo.kernel
    def big_smem(out):
        t = tylo.thread_idx.x
        buf = tylo.dynamic_shared(F32, 256)
        buf[t] = 1.0
        tylo.sync_threads()
        out[t] = buf[255 - t]

    launcher = big_smem[1, 256]
    for _ in range(3):
        launcher(array(), shared=100_000)
    assert [c[0] for c in recorder] == ["checked", "direct", "direct"]
    assert recorder[-1][3] == 100_000
    launcher(array(), shared=120_000)  # above the raised limit: checked again
    assert recorder[-1][0] == "checked"


def test_the_c_inline_launch_rejects_malformed_input():
    accel = require_c_launch()
    noop = ctypes.cast(ctypes.pythonapi.PyGILState_Check, ctypes.c_void_p).value

    def make(args=((2, int, None, None, None),), slots=((0, "q", 56),), size=64, launch=noop):
        return accel.InlineLaunch(
            launch,
            1,
            0,
            0,
            driver._tls,
            lambda err: None,
            None,
            {},
            0,
            49152,
            args,
            slots,
            ((0, 1, 100, 1),),
            (),
            size,
        )

    with pytest.raises(ValueError, match="malformed"):
        make(args=((9, int, None, None, None),))  # no such kind
    with pytest.raises(ValueError, match="malformed"):
        make(slots=((0, "x", 56),))  # no such struct code
    with pytest.raises(ValueError, match="malformed"):
        make(slots=((3, "q", 56),))  # no such argument
    with pytest.raises(ValueError, match="bad launch"):
        make(launch=0)
    f = make()
    with pytest.raises(TypeError):
        f((1, 1, 1, 32, 1, 1), (5,), 0)  # three arguments, not four
    # another thread's function never launches here
    assert f((1, 1, 1, 32, 1, 1), (5,), 0, None) is False


def test_a_thread_new_to_the_driver_takes_the_checked_path(recorder):
    """A thread that never launched has no current device yet: even if a record exists
    for its thread id (ids are reused), its first launch is the checked one."""
    import threading

    k = make_kernel()
    launcher = k[1, 32]
    for n in (1, 2, 3):
        launcher(array(), array(), n)
    hot = next(iter(k.cache.values()))
    seen = {}

    def fresh_thread():
        seen["ordinal"] = driver._tls.ordinal
        hot.records[threading.get_ident()] = next(iter(hot.records.values()))  # a reused id
        launcher(array(), array(), 4)

    worker = threading.Thread(target=fresh_thread)
    worker.start()
    worker.join()
    assert seen["ordinal"] is None
    assert [c[0] for c in recorder] == ["checked", "direct", "direct", "checked"]


def test_equal_statics_of_other_types_are_other_specializations(recorder):
    @tylo.kernel
    def pick(out, flags: tylo.Static):
        i = tylo.thread_idx.x
        if isinstance(flags[0], bool):
            out[i] = 1.0
        else:
            out[i] = 2.0

    launcher = pick[1, 32]
    for _ in range(3):
        launcher(array(), (True, 2))
    launcher(array(), (1, 2))  # equal to (True, 2) in Python, but another type inside
    assert pick.stats.compiles == 2
    kinds = [c[0] for c in recorder]
    assert kinds == ["checked", "direct", "direct", "checked"]
    for flags in ((True,), (1,), (1.0,), (1,)):
        launcher(array(), flags)
    assert pick.stats.compiles == 5


def test_owned_buffers_on_the_inline_path(recorder, monkeypatch):
    """A DeviceBuffer is read without its property while open; once closed, the inline
    path raises the buffer's own error, as the reader path does."""
    from tylo.arrays import DeviceBuffer
    from tylo.backend import memory

    monkeypatch.setattr(memory, "mem_free", lambda ptr: None)

    def buffer(ptr):
        b = DeviceBuffer.__new__(DeviceBuffer)
        DeviceBuffer.__init__(b, ptr, (256,), F32, 0)
        return b

    k = make_kernel()
    launcher = k[1, 32]
    out, x = buffer(0x1000), buffer(0x2000)
    for n in (1, 2, 3):
        launcher(out, x, n)
    assert launcher.inline is not None
    assert recorder[-1] == ("direct", (1, 1, 1), (32, 1, 1), 0, (0x1000, 0x2000, 3))
    x.close()
    with pytest.raises(tylo.TyloError, match="used after close"):
        launcher(out, x, 4)
    assert len(recorder) == 3


class _Map:
    """A stand-in for tylo.nvgpu.tma.TensorMap (no driver encoding): its plan, 128 bytes,
    and the array it was encoded for."""

    tylo_param_kind = "tensor_map"

    def __init__(self, device):
        from tylo.layouts import Layout, dim
        from tylo.nvgpu import tma

        m, k, ld = dim("M"), dim("K"), dim("ld", multiple_of=8)
        self.plan = _MAP_PLAN.setdefault(
            0, tma.TensorMapPlan(F32, Layout((m, k), (ld, 1)), (8, 8), "none",
                                 Layout((8, 8), (8, 1))),
        )  # fmt: skip
        self.data = bytes(128)
        self.array = array(device=device)


_MAP_PLAN: dict = {}


def test_tensor_maps_on_another_device_than_the_pointers_are_refused(recorder):
    """A tensor map is not a pointer argument, but the array it was encoded for lives on a
    device: a launch whose maps and pointers name different devices is refused, on the
    first launch and after a cached one (the device is part of the map's key)."""
    from tylo.nvgpu import tma
    from tylo.tile.views import SharedTile

    def map_store(out, tm):
        tile = SharedTile(tylo.shared(F32, 64, align=128), tm.plan.smem_layout)
        t = tylo.thread_idx.x
        if t == 0:
            tma.store(tm, tile, (0, 0))
            tma.commit_stores()
            tma.wait_stores()
        out[t] = 0.0

    k = tylo.kernel(map_store)
    k[1, 32](array(device=0), _Map(0))  # the same device: launched
    for out_dev, map_dev in ((0, 1), (1, 0)):
        with pytest.raises(tylo.KernelArgumentError, match="different devices") as err:
            k[1, 32](array(device=out_dev), _Map(map_dev))
        assert f"tm on device {map_dev}" in str(err.value)
    k[1, 32](array(device=0), _Map(0))  # the cached specialization still launches
    assert len(recorder) == 2
