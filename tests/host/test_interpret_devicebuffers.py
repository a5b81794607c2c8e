"""tylo DeviceBuffers emulated in host memory under ``TYLO_INTERPRET=1``
(tylo.backend.hostmem), read by the interpreter as kernel arguments; the interpreter's
device (tylo.backend.device.interpreted_properties)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tylo
from tylo.arrays import DeviceArray, DeviceBuffer
from tylo.backend import driver, hostmem, memory
from tylo.backend.device import device_properties
from tylo.backend.errors import LaunchError, NoDeviceError
from tylo.interpret import OutOfBounds
from tylo.interpret.launch import InterpretArgumentError


@pytest.fixture
def interpret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TYLO_INTERPRET", "1")
    monkeypatch.delenv("TYLO_INTERPRET_TARGET", raising=False)


@tylo.kernel
def add(c, a, b, n):
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    if i < n:
        c[i] = a[i] + b[i]


@tylo.kernel
def row_copy(
    out: tylo.Ptr(strided=True), x: tylo.Ptr(strided=True), rows, cols, ld, extra: tylo.Static
):
    """Copy a ``rows x cols`` view with row stride ``ld``; ``extra`` reads past each row."""
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    if i < rows * (cols + extra):
        r = i // (cols + extra)
        c = i % (cols + extra)
        out[r * ld + c] = x[r * ld + c]


def test_device_buffers_round_trip_and_poison(interpret: None) -> None:
    a = np.arange(1000, dtype=np.float32)
    buf = DeviceBuffer.from_numpy(a)
    assert hostmem.owns(buf.ptr) and buf.ptr % 256 == 0
    assert np.array_equal(buf.to_numpy(), a)
    empty = DeviceBuffer.empty(7, tylo.f32)
    assert np.isnan(empty.to_numpy()).all()  # uninitialized memory reads as NaN
    empty.fill_bytes(0)
    assert not empty.to_numpy().any()


def test_kernel_on_device_buffers_matches_float64(interpret: None) -> None:
    rng = np.random.default_rng(3)
    for n in (1, 33, 1000):
        a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
        da, db = DeviceBuffer.from_numpy(a), DeviceBuffer.from_numpy(b)
        dc = DeviceBuffer.empty(n, tylo.f32).fill_bytes(0xFF)
        add[(n + 127) // 128, 128](dc, da, db, n)  # TYLO_INTERPRET=1: interpreted
        driver.synchronize()  # nothing to wait for: a no-op
        want = a.astype(np.float64) + b.astype(np.float64)
        assert np.array_equal(dc.to_numpy(), want.astype(np.float32))


def test_views_of_device_buffers_are_bounded_by_their_span(interpret: None) -> None:
    rows, cols, ld = 5, 6, 8
    x = np.arange(rows * ld, dtype=np.float32).reshape(rows, ld)
    xb = DeviceBuffer.from_numpy(x)
    ob = DeviceBuffer.zeros((rows, ld), tylo.f32)
    xv = DeviceArray(xb.ptr, (rows, cols), (ld, 1), tylo.f32, 0, owner=xb)
    ov = DeviceArray(ob.ptr, (rows, cols), (ld, 1), tylo.f32, 0, owner=ob)
    row_copy.interpret[1, 64](ov, xv, rows, cols, ld, 0)
    got = ob.to_numpy()
    assert np.array_equal(got[:, :cols], x[:, :cols]) and not got[:, cols:].any()
    # the last row read past the view's last element: out of bounds, though inside the buffer
    with pytest.raises(OutOfBounds) as info:
        row_copy.interpret[1, 64](ov, xv, rows, cols, ld, 1)
    assert "array 'out'" in str(info.value) or "array 'x'" in str(info.value)


def test_device_arrays_get_the_gpu_launchs_checks(interpret: None) -> None:
    """What a GPU launch refuses of a device array, the interpreter refuses too: a strided
    view or a read-only array the annotation does not allow, an address off alignment."""
    buf = DeviceBuffer.from_numpy(np.arange(64, dtype=np.float32))
    out = DeviceBuffer.empty(64, tylo.f32)
    strided = DeviceArray(buf.ptr, (8, 4), (8, 1), tylo.f32, 0, owner=buf)
    with pytest.raises(tylo.KernelArgumentError, match="'a'.*not C-contiguous"):
        add.interpret[1, 32](out, strided, buf, 32)
    read_only = DeviceArray(buf.ptr, (64,), (1,), tylo.f32, 0, readonly=True, owner=buf)
    with pytest.raises(tylo.KernelArgumentError, match="'b'.*read-only"):
        add.interpret[1, 32](out, buf, read_only, 32)
    shifted = DeviceArray(buf.ptr + 2, (60,), (1,), tylo.f32, 0, owner=buf)
    with pytest.raises(tylo.KernelArgumentError, match="not a multiple of 4 bytes"):
        add.interpret[1, 32](out, shifted, buf, 32)


def test_cuda_array_interface_objects_in_emulated_memory(interpret: None) -> None:
    buf = DeviceBuffer.from_numpy(np.full(4, 2.0, np.float32))

    class Foreign:  # another framework's array, seen through the interface only
        __cuda_array_interface__ = {
            "shape": (4,), "typestr": "<f4", "data": (buf.ptr, False), "strides": None,
            "version": 3,
        }  # fmt: skip

    out = np.zeros(4, np.float32)
    add.interpret[1, 32](out, Foreign(), Foreign(), 4)
    assert out.tolist() == [4.0] * 4


def test_gpu_addresses_are_refused_with_the_fix() -> None:
    fake = DeviceArray(0x7F00_0000_0000, (4,), (1,), tylo.f32, 0)
    with pytest.raises(InterpretArgumentError) as info:
        add.interpret[1, 32](fake, fake, fake, 4)
    assert "GPU memory" in str(info.value) and "TYLO_INTERPRET=1" in str(info.value)


def test_free_and_hostile_addresses(interpret: None, monkeypatch: pytest.MonkeyPatch) -> None:
    assert DeviceBuffer.empty(0, tylo.f32).ptr == 0  # no bytes: no allocation, as cuMemAlloc
    with pytest.raises(tylo.TyloError):
        DeviceBuffer.empty(-1, tylo.f32)
    before = hostmem.live_bytes()
    buf = DeviceBuffer.empty(1000, tylo.u8)
    assert hostmem.live_bytes() == before + 1000
    ptr = buf.ptr
    with pytest.raises(LaunchError):
        memory.memcpy_htod(ptr + 999, np.zeros(2, np.uint8))  # passes the end
    with pytest.raises(LaunchError):
        memory.mem_free(ptr + 8)  # an interior pointer
    monkeypatch.delenv("TYLO_INTERPRET")  # freed where it came from, whatever the variable
    buf.close()
    assert hostmem.live_bytes() == before
    with pytest.raises(LaunchError):
        memory.mem_free(ptr)  # twice
    with pytest.raises(LaunchError):
        memory.memcpy_dtoh(np.zeros(1, np.uint8), ptr)  # after free


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(1, 20000), min_size=1, max_size=8))
def test_allocations_never_overlap(sizes: list[int]) -> None:
    ptrs = [hostmem.alloc(n) for n in sizes]
    try:
        spans = sorted(zip(ptrs, sizes))
        for (p, n), (q, _) in zip(spans, spans[1:]):
            assert p + n + 4096 <= q  # a gap: an overrun never lands in a neighbour
        for p, n in zip(ptrs, sizes):
            assert p % 256 == 0 and hostmem.HEAP_BASE <= p < hostmem.HEAP_END
            data, off = hostmem.lookup(p + n - 1)
            assert off == n - 1 and data.size == n
    finally:
        for p in ptrs:
            hostmem.free(p)


def test_the_interpreters_device(interpret: None, monkeypatch: pytest.MonkeyPatch) -> None:
    p = device_properties(0)
    assert p.compute_capability == (8, 0) and p.sm_count == 108
    assert p.shared_memory_per_block_optin == 163 * 1024
    assert tylo.Target.from_device(0).sm == "sm_80"
    monkeypatch.setenv("TYLO_INTERPRET_TARGET", "sm_90a")
    assert device_properties(0).compute_capability == (9, 0)
    assert tylo.Target.from_device(0).sm == "sm_90a"
    with pytest.raises(NoDeviceError):
        device_properties(1)


class _TorchDType:
    """Stands in for a torch dtype (torch is not installed here): its module and its name."""

    __module__ = "torch"

    def __init__(self, name: str) -> None:
        self.name = name

    def __str__(self) -> str:
        return f"torch.{self.name}"


class _TorchTensor:
    """Stands in for a torch tensor: exactly what the interpreter reads of one (its module,
    ``device.type``, ``dtype``, ``data_ptr``, ``detach().numpy()``)."""

    __module__ = "torch"

    def __init__(self, a: np.ndarray, device: str = "cpu") -> None:
        self._a = a
        self.device = SimpleNamespace(type=device)
        self.dtype = _TorchDType(str(a.dtype))

    def data_ptr(self) -> int:
        return self._a.ctypes.data

    def detach(self) -> _TorchTensor:
        return self

    def numpy(self) -> np.ndarray:
        return self._a


def test_torch_cpu_tensors_are_arguments_and_cuda_ones_are_refused() -> None:
    a = np.arange(40, dtype=np.float32)
    c = np.full(40, np.nan, np.float32)
    add.interpret[1, 64](_TorchTensor(c), _TorchTensor(a), _TorchTensor(2 * a), 40)
    assert np.array_equal(c, 3 * a)  # written through the tensor's memory
    with pytest.raises(InterpretArgumentError) as info:
        add.interpret[1, 64](_TorchTensor(c, "cuda"), _TorchTensor(a), _TorchTensor(a), 40)
    assert "t.cpu()" in str(info.value)
