# TEST_TARGET: cc>=8.0
"""Launch arguments on the GPU: a strided, transposed or broadcast torch view, a
read-only ``__cuda_array_interface__``, a misaligned view and host memory are refused
before launching; the opt-ins (``tylo.Ptr(strided=True)`` with the strides passed,
``tylo.Ptr(readonly=True)``) compute the right values; arrays on another device launch
there (two GPUs, else skipped with the count found)."""

from __future__ import annotations

import numpy as np
import pytest

import tylo
from tylo.arrays import DeviceArray, DeviceBuffer
from tylo.backend import driver

F32 = tylo.f32


INTERPRET_SKIP = (  # the interpreter tier (tests/interp_tier.py)
    "torch CUDA views, host addresses a GPU cannot read, a second GPU: the interpreter "
    "takes host memory (its read-only and alignment refusals run here)"
)


@tylo.kernel
def add_one(out, x, n):
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    if i < n:
        out[i] = x[i] + 1.0


@tylo.kernel
def gather_2d(out, x: tylo.Ptr(strided=True), rows, cols, s0: tylo.Int(min=0), s1: tylo.Int(min=0)):
    """out (rows x cols, contiguous) = x read through its strides s0, s1 (elements)."""
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    if i < rows * cols:
        out[i] = x[(i // cols) * s0 + (i % cols) * s1]


@tylo.kernel
def read_only_in(out, x: tylo.Ptr(readonly=True), n):
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    if i < n:
        out[i] = x[i] * 2.0


class Shared:
    """A producer that shares a buffer through ``__cuda_array_interface__`` only (its
    device comes from the driver), read-only when asked (``data=(ptr, True)``)."""

    def __init__(self, buf: DeviceBuffer, readonly: bool = False) -> None:
        self.buf = buf
        self.__cuda_array_interface__ = {
            "shape": buf.shape,
            "typestr": "<f4",
            "data": (buf.ptr, readonly),
            "strides": None,
            "version": 3,
        }


def ReadOnlyView(buf: DeviceBuffer) -> Shared:  # noqa: N802 - reads as a type
    return Shared(buf, readonly=True)


def host(buf) -> np.ndarray:
    driver.current_context(buf.device)
    driver.synchronize()
    return buf.to_numpy()


def test_torch_views_are_refused_and_copies_work(gpu_runtime):
    torch = pytest.importorskip("torch")
    x = torch.arange(64, dtype=torch.float32, device="cuda").reshape(8, 8)
    out = torch.zeros(64, device="cuda")
    launcher = add_one[1, 64]
    for _ in range(3):  # checked, reader, inline paths
        launcher(out, x, 64)
    for bad in (x.T, x[:, ::2], x[:1].expand(8, 8)):
        with pytest.raises(tylo.KernelArgumentError, match="'x'.*not C-contiguous"):
            launcher(out, bad, 64)
    launcher(out, x.T.contiguous(), 64)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(out.cpu().numpy(), x.T.cpu().numpy().reshape(-1) + 1)


def test_a_strided_kernel_reads_a_transposed_view(gpu_runtime):
    torch = pytest.importorskip("torch")
    x = torch.randn(24, 40, device="cuda")
    for view in (x, x.T, x[::2, ::3], x[:1].expand(7, 40)):
        out = torch.full((view.numel(),), float("nan"), device="cuda")
        r, c = view.shape
        gather_2d[(r * c + 127) // 128, 128](out, view, r, c, *view.stride())
        torch.cuda.synchronize()
        np.testing.assert_array_equal(out.cpu().numpy(), view.cpu().numpy().reshape(-1))


@pytest.mark.interpret
def test_read_only_arrays_need_the_annotation(gpu_runtime):
    src = DeviceBuffer.from_numpy(np.arange(256, dtype=np.float32))
    out = DeviceBuffer.empty(256, F32).fill_bytes(0xFF)
    with pytest.raises(tylo.KernelArgumentError, match="'x'.*read-only"):
        add_one[1, 256](out, ReadOnlyView(src), 256)
    read_only_in[1, 256](out, ReadOnlyView(src), 256)
    np.testing.assert_array_equal(host(out), 2 * np.arange(256, dtype=np.float32))


@pytest.mark.interpret
def test_misaligned_addresses_are_refused(gpu_runtime):
    base = DeviceBuffer.from_numpy(np.zeros(64, np.float32))
    shifted = DeviceArray(base.ptr + 2, (60,), (1,), F32, base.device, owner=base)
    with pytest.raises(tylo.KernelArgumentError, match="not a multiple of 4 bytes"):
        add_one[1, 64](base, shifted, 60)


def test_host_addresses_are_refused(gpu_runtime):
    if driver._device_attribute(0, "CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS"):
        pytest.skip("needs a GPU that cannot read pageable host memory (found: one that can)")
    base = DeviceBuffer.from_numpy(np.zeros(64, np.float32))
    on_host = np.zeros(64, np.float32)

    class HostCAI:
        __cuda_array_interface__ = {  # noqa: RUF012 - a fixed interface
            "shape": (64,),
            "typestr": "<f4",
            "data": (on_host.ctypes.data, False),
            "strides": None,
            "version": 3,
        }

    with pytest.raises(tylo.KernelArgumentError, match="does not know address"):
        add_one[1, 64](base, HostCAI(), 64)


def test_arrays_on_another_device_launch_there(gpu_runtime):
    count = driver.device_count()
    if count < 2:
        pytest.skip(f"needs 2 GPUs (found: {count})")
    x0 = np.arange(256, dtype=np.float32)
    a1 = DeviceBuffer.from_numpy(x0, device=1)
    o1 = DeviceBuffer.empty(256, F32, device=1).fill_bytes(0xFF)
    a0 = DeviceBuffer.from_numpy(x0 * 3, device=0)
    o0 = DeviceBuffer.empty(256, F32, device=0).fill_bytes(0xFF)
    launcher = add_one[1, 256]
    for _ in range(3):  # device 0 current each time; the launch goes to device 1
        driver.current_context(0)
        launcher(o1, a1, 256)
        launcher(o0, a0, 256)  # alternating devices: each launch on its arrays' device
    np.testing.assert_array_equal(host(o1), x0 + 1)
    np.testing.assert_array_equal(host(o0), x0 * 3 + 1)
    o1.fill_bytes(0xFF)
    driver.current_context(0)
    add_one[1, 256](o1, Shared(a1), 256)  # the driver says which device the address is on
    np.testing.assert_array_equal(host(o1), x0 + 1)
    with pytest.raises(tylo.KernelArgumentError, match="different devices"):
        launcher(o0, a1, 256)
    assert {hot.ordinal for hot in add_one.cache.values()} >= {0, 1}
