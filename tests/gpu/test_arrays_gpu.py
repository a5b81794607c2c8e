# TEST_TARGET: cc>=8.0
"""DeviceBuffer on a GPU, and interop with PyTorch through every protocol tylo reads."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tylo.arrays import ArrayError, DeviceArray, DeviceBuffer, as_device_array
from tylo.backend import compile_ir, driver
from tylo.backend.driver import I32, PTR, ArgPack, launch
from tylo.dtypes import bf16, f16, f32, i64, u8
from tylo.target import Target
from tylo.testing import vector_add_ir

# the interpreter tier (tests/interp_tier.py): what it cannot run, and why
INTERPRET_SKIP = "torch CUDA interop; the interpreter takes torch CPU tensors"
RAW_LAUNCH = (
    "launches a compiled module through the driver (cuLaunchKernel with packed arguments); "
    "the interpreter runs kern[grid, block] launches"
)


def test_device_buffer_needs_no_gpu_to_describe_errors() -> None:
    with pytest.raises(ArrayError, match="non-negative ints"):
        DeviceBuffer.empty((2, -1), f32)
    with pytest.raises(ArrayError, match="unknown dtype name"):
        DeviceBuffer.empty((2,), "complex-ish")
    with pytest.raises(ArrayError, match=r"dtype bf16 \(2 B\) does not match"):
        DeviceBuffer.from_numpy(np.zeros(3, np.float32), dtype=bf16)


# ---------------------------------------------------------------------------- runtime half


@pytest.mark.interpret
@pytest.mark.parametrize(
    ("array", "dtype"),
    [
        (np.arange(12, dtype=np.float32).reshape(3, 4), f32),
        (np.linspace(-1, 1, 7).astype(np.float16), f16),
        (np.arange(-5, 5, dtype=np.int64), i64),
        (np.arange(256, dtype=np.uint8), u8),
    ],
)
def test_round_trip(gpu_runtime: Target, array: np.ndarray, dtype) -> None:
    buf = DeviceBuffer.from_numpy(array)
    assert (buf.shape, buf.dtype, buf.nbytes) == (array.shape, dtype, array.nbytes)
    assert buf.strides == tuple(s // array.itemsize for s in array.strides)
    back = buf.to_numpy()
    assert back.dtype == array.dtype
    np.testing.assert_array_equal(back, array)
    buf.close()


@pytest.mark.interpret
def test_bf16_bits_and_fill(gpu_runtime: Target) -> None:
    bits = np.array([0x3F80, 0xBF80, 0x0000], dtype=np.uint16)  # 1.0, -1.0, 0.0
    buf = DeviceBuffer.from_numpy(bits, dtype=bf16)
    assert buf.dtype == bf16 and buf.__cuda_array_interface__["typestr"] == "<u2"
    np.testing.assert_array_equal(buf.to_numpy(), bits)
    assert (buf.fill_bytes(0xAB).to_numpy() == 0xABAB).all()
    zeros = DeviceBuffer.zeros((5, 3), f32)
    assert not zeros.to_numpy().any()


@pytest.mark.interpret
def test_empty_close_and_context_manager(gpu_runtime: Target) -> None:
    empty = DeviceBuffer.empty((0, 4), f32)
    assert empty.ptr == 0 and empty.to_numpy().shape == (0, 4)
    with DeviceBuffer.empty(16, f32) as buf:
        assert buf.ptr != 0 and "ptr=0x" in repr(buf)
    assert "closed" in repr(buf)
    buf.close()  # idempotent
    with pytest.raises(ArrayError, match="used after close"):
        _ = buf.ptr


@pytest.mark.interpret
def test_device_buffer_as_device_array(gpu_runtime: Target) -> None:
    buf = DeviceBuffer.from_numpy(np.ones((4, 6), np.float32))
    a = as_device_array(buf)
    assert (a.ptr, a.shape, a.strides, a.dtype, a.device) == (buf.ptr, (4, 6), (6, 1), f32, 0)

    class OnlyCAI:
        __cuda_array_interface__ = buf.__cuda_array_interface__

    b = as_device_array(OnlyCAI())
    assert (b.ptr, b.shape, b.strides, b.dtype, b.device) == (a.ptr, a.shape, a.strides, f32, 0)


def _vadd(target: Target, a: DeviceArray, b: DeviceArray, c: DeviceArray, stream=None) -> None:
    fn = compile_ir(vector_add_ir(), target).load().function("vadd")
    n = a.size
    launch(
        fn,
        math.ceil(n / 128),
        128,
        ArgPack([PTR, PTR, PTR, I32]).pack(a.ptr, b.ptr, c.ptr, n),
        stream=stream,
    )


@pytest.mark.interpret(skip=RAW_LAUNCH)
def test_kernel_on_device_buffers(gpu_runtime: Target) -> None:
    x = np.arange(500, dtype=np.float32)
    a, b = DeviceBuffer.from_numpy(x), DeviceBuffer.from_numpy(2 * x)
    c = DeviceBuffer.empty(500, f32)
    _vadd(gpu_runtime, as_device_array(a), as_device_array(b), as_device_array(c))
    driver.synchronize()
    np.testing.assert_array_equal(c.to_numpy(), 3 * x)


# ---------------------------------------------------------------------------- torch


@pytest.fixture
def torch(gpu_runtime: Target):
    return pytest.importorskip("torch", reason="needs torch for interop (found: not installed)")


class DLPackOnly:
    """Hides every other protocol, so only DLPack is used."""

    def __init__(self, t) -> None:
        self.t = t

    def __dlpack__(self, **kwargs):
        return self.t.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.t.__dlpack_device__()


class CAIOnly:
    def __init__(self, t) -> None:
        self.__cuda_array_interface__ = t.__cuda_array_interface__


def test_torch_tensors_through_every_protocol(torch) -> None:
    t = torch.arange(24, dtype=torch.float32, device="cuda").reshape(4, 6)
    for view in (t, t.T, t[:, 1::2]):
        direct = as_device_array(view)
        assert direct.ptr == view.data_ptr() and direct.strides == view.stride()
        for wrapped in (CAIOnly(view), DLPackOnly(view)):
            other = as_device_array(wrapped)
            assert (other.ptr, other.shape, other.strides, other.dtype, other.device) == (
                direct.ptr,
                direct.shape,
                direct.strides,
                f32,
                0,
            )
    half = torch.ones(8, dtype=torch.bfloat16, device="cuda")
    assert as_device_array(half).dtype == bf16 == as_device_array(DLPackOnly(half)).dtype


def test_torch_cpu_tensors_are_refused(torch) -> None:
    cpu = torch.zeros(3)
    for obj in (cpu, DLPackOnly(cpu)):
        with pytest.raises(ArrayError, match="not a CUDA device"):
            as_device_array(obj)


@pytest.mark.interpret(skip="torch CUDA tensors and streams; the interpreter takes CPU tensors")
def test_kernel_on_torch_tensors_and_stream(torch, gpu_runtime: Target) -> None:
    a = torch.randn(1000, device="cuda")
    b = torch.randn(1000, device="cuda")
    c = torch.empty_like(a)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        _vadd(gpu_runtime, *(as_device_array(x) for x in (a, b, c)), stream=stream)
    stream.synchronize()
    torch.testing.assert_close(c, a + b, rtol=0, atol=0)


def test_torch_reads_a_device_buffer(torch) -> None:
    buf = DeviceBuffer.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3))
    t = torch.as_tensor(buf, device="cuda")
    assert t.data_ptr() == buf.ptr
    assert t.cpu().tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
