"""Kernels that take tensor maps (by-value ``raw(128, 64)`` parameters) on the launch fast
paths, without libNVVM or a GPU: the kernel's build is a stand-in (a CompiledKernel made
from the bindings, never traced) and the driver's two launch calls are recorders that read
back the bytes each ``kernelParams`` entry points at.

After the first, checked, launch in a thread, a launch with a tensor map takes a fast path
(``Hot.slow`` runs once per specialization and thread); each launch packs exactly the bytes
of the map given on that call; every refusal of the checked path (a map on another device
than the pointers, a map whose bytes are not exactly 128, an argument of the wrong type, a
misaligned pointer, an int out of range) stays a typed error, with nothing launched.
"""

from __future__ import annotations

import ctypes
import struct
import threading
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tylo
from tylo.arrays import DeviceArray
from tylo.backend import argpack, driver, launchex
from tylo.backend.errors import LaunchError
from tylo.kernel import fastpath
from tylo.kernel import launch as launch_mod
from tylo.kernel.launch import CompiledKernel
from tylo.kernel.spec import ParamKind
from tylo.layouts import Layout, dim
from tylo.nvgpu import tma
from tylo.testing import require_c_launch

F32 = tylo.f32
HANDLE = 0x1000  # the function handle on device 0 (1 on device 1)
PTR = 0x7F00_0000_0000
MAP_BYTES = 128


def make_plan(box: int) -> tma.TensorMapPlan:
    m, k, ld = dim("M"), dim("K"), dim("ld", multiple_of=8)
    return tma.TensorMapPlan(
        F32, Layout((m, k), (ld, 1)), (box, box), "none", Layout((box, box), (box, 1))
    )


PLANS = (make_plan(8), make_plan(16))
PLAN_8_AGAIN = make_plan(8)  # equal to PLANS[0], another object: the same specialization
assert PLAN_8_AGAIN == PLANS[0] and PLAN_8_AGAIN is not PLANS[0]


class Map:
    """A stand-in for :class:`tylo.nvgpu.tma.TensorMap` (no driver encoding): its plan, its
    encoded bytes, and the array it was encoded for."""

    tylo_param_kind = "tensor_map"

    def __init__(self, plan: tma.TensorMapPlan, data: object, device: int = 0) -> None:
        self.plan = plan
        self.data = data
        self.array = DeviceArray(PTR, (64,), (1,), F32, device)


def array(ptr: int = PTR, device: int = 0) -> DeviceArray:
    return DeviceArray(ptr, (256,), (1,), F32, device)


def map_bytes(seed: int) -> bytes:
    return bytes((seed * 7 + i * 13) % 256 for i in range(MAP_BYTES))


def expected(ptr: int, data: bytes, n: int) -> tuple[bytes, bytes, bytes]:
    """What the driver reads for (out, tm, n) of an index_bits=32 kernel."""
    return ptr.to_bytes(8, "little"), data, n.to_bytes(4, "little", signed=True)


def box_copy(out, tm, n):  # noqa: ARG001 - never traced: the build is a stand-in
    pass


def make_kernel() -> tuple[tylo.kernel, list]:
    """A kernel (out, tm, n) whose build makes the CompiledKernel from the bindings; the
    returned list collects the bindings of each build."""
    k = tylo.kernel(box_copy, index_bits=32)
    builds: list = []

    def build(bindings, block, target, cluster=None):
        builds.append(bindings)
        runtime = tuple(i for i, b in enumerate(bindings) if b.kind is not ParamKind.STATIC)
        return CompiledKernel(
            name="box_copy", module=None, entry="box_copy", bindings=bindings, runtime=runtime,
            block=block, index_bits=32, dynamic_shared_bytes=0, timings={},
        )  # fmt: skip

    k._build = build
    return k, builds


def read_params(address: int, signature) -> tuple[bytes, ...]:
    """The bytes each ``kernelParams`` entry points at, after checking that each value
    sits at its parameter's alignment."""
    ptrs = (ctypes.c_void_p * len(signature)).from_address(address)
    for p, at in zip(signature, ptrs):
        assert at % p.align == 0, f"{p} at 0x{at:x}"
    return tuple(ctypes.string_at(ptrs[i], p.size) for i, p in enumerate(signature))


@pytest.fixture(params=["python", "c"])
def recorder(monkeypatch, request):
    """The driver replaced: ``calls`` holds ``(path, values as bytes)`` per launch, path
    "checked" (driver.launch) or "direct" (cuLaunchKernelEx from a fast path); ``slow``
    counts Hot.slow calls."""
    if request.param == "c":
        require_c_launch()
    monkeypatch.setattr(fastpath, "ACCELERATED", request.param == "c")
    monkeypatch.setattr(driver, "device_count", lambda: 0)  # made-up addresses
    monkeypatch.setattr(driver._tls, "ordinal", None, raising=False)
    calls: list = []
    last = [()]  # the signature of the last checked launch (the C path's own params)
    signatures: dict[int, tuple] = {}  # a LaunchRecord's kernelParams -> its signature

    class Record(launchex.LaunchRecord):
        __slots__ = ()

        def __init__(self, params):
            super().__init__(params)
            assert self.config % 64 == 0  # the largest alignment, a tensor map's
            signatures[self.params] = self.signature

    def checked(fn, grid, block, pack, *, shared_bytes=0, stream=None):
        driver._tls.ordinal = fn.handle - HANDLE  # as the real one: the context is current
        last[0] = pack.signature
        calls.append(("checked", read_params(pack.address, pack.signature)))

    def direct(config, handle, params, extra):
        try:
            assert config % 8 == 0 and handle == HANDLE + driver._tls.ordinal
            calls.append(("direct", read_params(params, signatures.get(params) or last[0])))
        except Exception as exc:  # noqa: BLE001 - a ctypes callback cannot raise: record it
            calls.append(("error", repr(exc)))
        return 0

    slow = fastpath.Hot.slow
    counts = SimpleNamespace(calls=calls, slow=0)

    def counting_slow(self, *args):
        counts.slow += 1
        return slow(self, *args)

    keep = launchex.LAUNCH_EX_TYPE(direct)
    counts.keep = keep
    monkeypatch.setattr(fastpath.Hot, "slow", counting_slow)
    monkeypatch.setattr(driver, "launch", checked)
    monkeypatch.setattr(launchex, "_launch_ex", keep)
    monkeypatch.setattr(launchex, "LaunchRecord", Record)
    monkeypatch.setattr(launch_mod, "_DRIVER", driver)
    monkeypatch.setitem(launch_mod._targets, 0, tylo.Target.parse("sm_90a"))
    monkeypatch.setitem(launch_mod._targets, 1, tylo.Target.parse("sm_90a"))
    monkeypatch.setattr(
        CompiledKernel,
        "function",
        lambda self, ordinal=0: SimpleNamespace(
            handle=HANDLE + ordinal, set_max_dynamic_shared_memory=lambda n: None
        ),
    )
    counts.path = request.param
    return counts


# ---------------------------------------------------------------------------- the record


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 3 * MAP_BYTES), st.sampled_from([bytes, bytearray, str, list]))
def test_the_record_packs_only_exactly_sized_bytes(size, kind):
    """``struct``'s "128s" zero-pads a short value and truncates a long one: the record
    refuses anything but exactly 128 bytes (struct.error, nothing written), and the checked
    path's ArgPack refuses it with a LaunchError."""
    sig = [argpack.PTR, argpack.raw(MAP_BYTES, 64), argpack.I32]
    record = launchex.LaunchRecord(sig)
    good = map_bytes(1)
    record.pack(1, 1, 1, 32, 1, 1, 0, 0, *launchex.NO_ATTRIBUTES, PTR, good, 5)
    value = kind(b"\x5a" * size) if kind is not str else "Z" * size
    ok = kind in (bytes, bytearray) and size == MAP_BYTES
    pack = argpack.ArgPack(sig)
    if ok:
        record.pack(2, 1, 1, 32, 1, 1, 0, 0, *launchex.NO_ATTRIBUTES, PTR, value, 6)
        assert record.values() == (PTR, bytes(value), 6)
        assert pack.pack(PTR, value, 6).values() == (PTR, bytes(value), 6)
        return
    with pytest.raises(struct.error):
        record.pack(2, 1, 1, 32, 1, 1, 0, 0, *launchex.NO_ATTRIBUTES, PTR, value, 6)
    assert record.values() == (PTR, good, 5) and record.config_values()[0] == 1
    with pytest.raises(LaunchError, match="argument 1"):
        pack.pack(PTR, value, 6)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                argpack.PTR,
                argpack.I32,
                argpack.F64,
                argpack.raw(128, 64),
                argpack.raw(12, 4),
                argpack.raw(32, 16),
            ]
        ),
        max_size=6,
    )
)
def test_every_value_sits_at_its_alignment_in_absolute_terms(signature):
    """Both buffers (the record's and the checked path's ArgPack) place each parameter's
    bytes at an address that is a multiple of its declared alignment."""
    record = launchex.LaunchRecord(signature)
    pack = argpack.ArgPack(signature)
    assert record.config % 8 == 0
    if signature:
        read_params(record.params, signature)  # asserts each value's alignment
        read_params(pack.address, signature)


def test_the_record_refuses_what_is_not_a_param():
    with pytest.raises(LaunchError, match="not a Param"):
        launchex.LaunchRecord([argpack.PTR, "128s"])


# ---------------------------------------------------------------------------- launches


def test_repeated_launches_take_the_fast_path_with_each_calls_map(recorder):
    k, builds = make_kernel()
    launcher = k[2, 64]
    maps = [Map(PLANS[0], map_bytes(i)) for i in range(6)]
    for i, m in enumerate(maps):
        launcher(array(), m, 100 + i)
    one = Map(PLANS[0], map_bytes(10))
    for i in range(3):  # one map object, its bytes replaced between launches
        one.data = map_bytes(20 + i)
        k[2, 64](array(PTR + 256 * i), one, 7)
    assert recorder.slow == 1 and len(builds) == 1
    assert [c[0] for c in recorder.calls] == ["checked"] + ["direct"] * 8
    inline_type = "InlineLaunch" if recorder.path == "c" else "function"
    assert type(launcher.inline).__name__ == inline_type
    want = [expected(PTR, m.data, 100 + i) for i, m in enumerate(maps)]
    want += [expected(PTR + 256 * i, map_bytes(20 + i), 7) for i in range(3)]
    assert [c[1] for c in recorder.calls] == want


def test_a_new_thread_starts_with_a_checked_launch(recorder):
    k, _ = make_kernel()
    k[1, 32](array(), Map(PLANS[0], map_bytes(1)), 3)

    def other():
        driver._tls.ordinal = None
        for i in range(2):
            k[1, 32](array(), Map(PLANS[0], map_bytes(2 + i)), 4)

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert [c[0] for c in recorder.calls] == ["checked", "checked", "direct"]
    assert recorder.calls[-1][1] == expected(PTR, map_bytes(3), 4)


@pytest.mark.parametrize("size", [0, 127, 129, 256])
def test_a_map_of_another_size_never_reaches_a_launch(recorder, size):
    k, _ = make_kernel()
    bad = Map(PLANS[0], bytes(size))
    with pytest.raises(tylo.KernelArgumentError, match="'tm'"):  # before any launch
        k[1, 32](array(), bad, 3)
    k[1, 32](array(), Map(PLANS[0], map_bytes(1)), 3)
    k[1, 32](array(), Map(PLANS[0], map_bytes(2)), 3)  # the fast path is warm
    for data in (bytes(size), bytearray(MAP_BYTES), "x" * MAP_BYTES, None):
        with pytest.raises(tylo.KernelArgumentError, match="'tm'"):
            k[1, 32](array(), Map(PLANS[0], data), 3)
    assert [c[0] for c in recorder.calls] == ["checked", "direct"]


def test_a_reader_that_gave_other_bytes_is_stopped_by_the_record(recorder):
    """Should a reader ever hand the launcher a value of another size, the record refuses
    it and the checked path reports it: a LaunchError, and nothing launched."""
    k, _ = make_kernel()
    k[1, 32](array(), Map(PLANS[0], map_bytes(1)), 3)
    reader = k.readers[1][Map]
    for size in (127, 129):

        def lying(a, size=size):
            key, _ = reader(a)
            return key, bytes(size)

        k.readers[1][Map] = lying
        k[1, 32].inline = None  # the reader path decides
        with pytest.raises(LaunchError, match=f"got {size} bytes, expected exactly 128"):
            k[1, 32](array(), Map(PLANS[0], map_bytes(2)), 3)
    assert [c[0] for c in recorder.calls] == ["checked"]


def test_maps_on_another_device_are_refused_on_the_fast_path(recorder):
    k, _ = make_kernel()
    for _ in range(2):
        k[1, 32](array(), Map(PLANS[0], map_bytes(1)), 3)
    for out_dev, map_dev in ((0, 1), (1, 0), (0, 1)):
        with pytest.raises(tylo.KernelArgumentError, match="different devices"):
            k[1, 32](array(device=out_dev), Map(PLANS[0], map_bytes(2), map_dev), 3)
    k[1, 32](array(), Map(PLANS[0], map_bytes(3)), 3)
    assert [c[0] for c in recorder.calls] == ["checked", "direct", "direct"]
    assert recorder.calls[-1][1] == expected(PTR, map_bytes(3), 3)


def test_wrong_types_for_the_map_are_refused(recorder):
    """An argument that is not a tensor map where the kernel was warmed with one: the raw
    bytes themselves, a string, a duck with the marker but no bytes (typed errors)."""
    k, _ = make_kernel()
    for _ in range(2):
        k[1, 32](array(), Map(PLANS[0], map_bytes(1)), 3)

    class Duck:
        tylo_param_kind = "tensor_map"
        plan = PLANS[0]

    for wrong in (map_bytes(1), "tensor map", Duck()):
        with pytest.raises(tylo.KernelArgumentError, match="'tm'"):
            k[1, 32](array(), wrong, 3)
    assert len(recorder.calls) == 2


def test_the_plan_selects_the_specialization(recorder):
    """Another plan is another specialization (its first launch checked); an equal plan
    object of its own is the same one (no build, the fast path)."""
    k, builds = make_kernel()
    k[1, 32](array(), Map(PLANS[0], map_bytes(1)), 3)
    k[1, 32](array(), Map(PLANS[1], map_bytes(2)), 3)
    k[1, 32](array(), Map(PLAN_8_AGAIN, map_bytes(3)), 3)
    k[1, 32](array(), Map(PLANS[1], map_bytes(4)), 3)
    assert len(builds) == 2 and recorder.slow == 2
    assert [c[0] for c in recorder.calls] == ["checked", "checked", "direct", "direct"]
    assert [c[1][1] for c in recorder.calls] == [map_bytes(i) for i in range(1, 5)]


# one step: (plan index: 0, 1 or 2 = the equal copy of 0; the map's byte count; the map's
# device; the pointer's misalignment in bytes; n)
_STEP = st.tuples(
    st.integers(0, 2),
    st.sampled_from([MAP_BYTES] * 6 + [127, 129]),
    st.sampled_from([0] * 5 + [1]),
    st.sampled_from([0] * 5 + [2]),
    st.sampled_from([1, 2, 1000, 0]),
)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(st.lists(_STEP, min_size=1, max_size=14), st.randoms(use_true_random=False))
def test_interleaved_maps_and_pointers_launch_what_each_call_gave(recorder, steps, rng):
    """Any interleaving of maps (two plans, an equal plan object, bytes of other sizes, on
    another device) with pointers (aligned or not) and ints (in range or not): each launch
    either is refused with a KernelArgumentError, launching nothing, exactly when the
    checked path refuses it, or launches exactly that call's bytes; the first launch of
    each specialization is the checked one, every later one takes a fast path."""
    k, _ = make_kernel()
    launched: set[int] = set()  # the boxes (specializations) launched from this thread
    for plan_i, size, device, skew, n in steps:
        plan = (PLANS[0], PLANS[1], PLAN_8_AGAIN)[plan_i]
        data = bytes(rng.getrandbits(8) for _ in range(size))
        ptr = PTR + 4096 * rng.randrange(16) + skew
        before, slow = len(recorder.calls), recorder.slow
        refusal = (
            "'tm'" if size != MAP_BYTES
            else "different devices" if device != 0
            else "'out'" if skew % 4
            else "'n'" if n < 1
            else None
        )  # fmt: skip
        if refusal is not None:
            with pytest.raises(tylo.KernelArgumentError, match=refusal):
                k[1, 32](array(ptr), Map(plan, data, device), n)
            assert len(recorder.calls) == before
            continue
        k[1, 32](array(ptr), Map(plan, data, device), n)
        box = plan.box[0]
        path = "direct" if box in launched else "checked"
        assert recorder.calls[before:] == [(path, expected(ptr, data, n))]
        assert recorder.slow == slow + (path == "checked")
        launched.add(box)


def test_the_inline_launch_declines_maps_it_was_not_made_for(recorder):
    """The inline function tests a map's plan (the same or an equal one, as the key
    does), its array's device and its bytes; a map that differs (another plan, another
    device, bytes of another size or type, attributes missing) is declined without
    raising, and the reader path decides as it would without the inline function."""
    k, _ = make_kernel()
    launcher = k[1, 32]
    for i in range(2):
        launcher(array(), Map(PLANS[0], map_bytes(i)), 3)
    inline = launcher.inline
    assert inline is not None
    dims = launcher.dims

    def bare(**drop):
        m = Map(PLANS[0], map_bytes(9))
        for name in drop:
            delattr(m, name)
        return m

    declined = [
        Map(PLANS[1], map_bytes(9)),
        Map(PLANS[0], map_bytes(9), device=1),
        Map(PLANS[0], map_bytes(9) + b"\0"),
        Map(PLANS[0], map_bytes(9)[:-1]),
        Map(PLANS[0], bytearray(map_bytes(9))),
        Map(PLANS[0], None),
        bare(plan=1),
        bare(data=1),
        bare(array=1),
    ]
    before = len(recorder.calls)
    for m in declined:
        assert inline(dims, (array(), m, 3), 0, None) is False
    assert len(recorder.calls) == before
    for i, plan in enumerate((PLANS[0], PLAN_8_AGAIN)):
        assert inline(dims, (array(), Map(plan, map_bytes(9 + i)), 3), 0, None) is True
        assert recorder.calls[-1] == ("direct", expected(PTR, map_bytes(9 + i), 3))


def test_the_c_inline_launch_rejects_malformed_tensor_map_slots():
    accel = require_c_launch()
    noop = ctypes.cast(ctypes.pythonapi.PyGILState_Check, ctypes.c_void_p).value
    tmap = (6, Map, None, 0, PLANS[0], 0)
    ptr = (0, DeviceArray, F32, 0, None, 0)

    def make(args, slots, end=192):
        return accel.InlineLaunch(
            noop, 1, 0, 0, driver._tls, lambda err: None, None, {}, 0, 49152,
            args, slots, (), (), end,
        )  # fmt: skip

    make((ptr, tmap), ((0, "Q", 56), (1, "128s", 64)))  # well formed
    for args, slots, end in [
        ((ptr, tmap), ((0, "Q", 56), (1, "128s", 64)), 191),  # past the end
        ((ptr, tmap), ((0, "128s", 64), (1, "128s", 64)), 192),  # bytes for a pointer
        ((ptr, tmap), ((0, "Q", 56), (1, "Q", 64)), 192),  # a map as a pointer
        ((ptr, tmap), ((0, "Q", 56),), 192),  # a map with no slot
        ((ptr, tmap), ((0, "Q", 56), (1, "128s", 64), (1, "128s", 64)), 192),  # two
        ((ptr, tmap), ((0, "Q", 56), (1, "128x", 64)), 192),
        ((ptr, tmap), ((0, "Q", 56), (1, "0s", 64)), 192),
        ((ptr, tmap), ((0, "Q", 56), (1, "9999s", 64)), 192),
        ((ptr, (7, *tmap[1:])), ((0, "Q", 56), (1, "128s", 64)), 192),  # no such kind
    ]:
        with pytest.raises(ValueError, match="malformed|bad"):
            make(args, slots, end)


@pytest.mark.parametrize("recorder", ["c"], indirect=True)  # about the C extension only
def test_an_extension_without_tensor_maps_leaves_them_to_python(recorder, monkeypatch):
    """A ``tylo._launch`` built before tensor maps (no ``TENSOR_MAPS``) would refuse their
    specs as malformed: the launch function is then the Python one, and launches go on."""
    monkeypatch.delattr(fastpath._accel, "TENSOR_MAPS")
    k, _ = make_kernel()
    for i in range(3):
        k[1, 32](array(), Map(PLANS[0], map_bytes(i)), 3)
    assert type(k[1, 32].inline).__name__ == "function"
    assert [c[0] for c in recorder.calls] == ["checked", "direct", "direct"]
    assert recorder.calls[-1][1] == expected(PTR, map_bytes(2), 3)
