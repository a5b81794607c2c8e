"""tylo.device_properties without a GPU: the typed error, the dataclass, the once-per-process
read (against a fake ``cuda.bindings.driver``). The runtime half, against torch, is in
tests/gpu/test_device_properties_gpu.py."""

from __future__ import annotations

import dataclasses
import doctest
import threading

import pytest

import tylo
from tylo.backend import device, driver
from tylo.backend.errors import CudaError, NoDeviceError

H200 = {
    "COMPUTE_CAPABILITY_MAJOR": 9,
    "COMPUTE_CAPABILITY_MINOR": 0,
    "MULTIPROCESSOR_COUNT": 132,
    "WARP_SIZE": 32,
    "MAX_THREADS_PER_BLOCK": 1024,
    "MAX_THREADS_PER_MULTIPROCESSOR": 2048,
    "MAX_BLOCKS_PER_MULTIPROCESSOR": 32,
    "MAX_REGISTERS_PER_BLOCK": 65536,
    "MAX_REGISTERS_PER_MULTIPROCESSOR": 65536,
    "MAX_SHARED_MEMORY_PER_BLOCK": 49152,
    "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN": 232448,
    "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR": 233472,
    "RESERVED_SHARED_MEMORY_PER_BLOCK": 1024,
    "L2_CACHE_SIZE": 62914560,
    "GLOBAL_MEMORY_BUS_WIDTH": 6144,
    "CLOCK_RATE": 1980000,
    "MEMORY_CLOCK_RATE": 3201000,
}


class FakeDriver:
    """The few calls device_properties makes, for a one-GPU machine."""

    def __init__(self, table: dict[str, int], *, count: int = 1, name: bytes = b"") -> None:
        from cuda.bindings import driver as cu  # a dependency of tylo: never a skip

        self.CUresult = cu.CUresult
        self.CUdevice_attribute = cu.CUdevice_attribute
        self.ok = cu.CUresult.CUDA_SUCCESS
        self.table = table
        self.count = count
        self.name = name or b"NVIDIA H200" + bytes(245)
        self.queries = 0

    def cuInit(self, flags):
        return (self.ok,)

    def cuDeviceGetCount(self):
        return (self.ok, self.count)

    def cuDeviceGet(self, i):
        return (self.ok, i)

    def cuDeviceGetAttribute(self, attr, dev):
        self.queries += 1
        key = attr.name.removeprefix("CU_DEVICE_ATTRIBUTE_")
        if key not in self.table:
            return (self.CUresult.CUDA_ERROR_INVALID_VALUE, 0)
        return (self.ok, self.table[key])

    def cuDeviceGetName(self, length, dev):
        return (self.ok, self.name[:length])

    def cuDeviceTotalMem(self, dev):
        return (self.ok, 150 * 2**30)

    def cuGetErrorName(self, code):
        return (self.ok, self.CUresult(code).name.encode())

    def cuGetErrorString(self, code):
        return (self.ok, b"fake description")


def use(monkeypatch, fake: FakeDriver) -> FakeDriver:
    monkeypatch.setattr(driver, "_driver", fake)
    monkeypatch.setattr(driver, "_initialized", False)
    monkeypatch.setattr(driver, "_init_error", None)
    monkeypatch.setattr(device, "_cache", {})
    return fake


def test_public_names() -> None:
    assert tylo.device_properties is device.device_properties
    assert tylo.DeviceProperties is device.DeviceProperties
    assert tylo.NoDeviceError is NoDeviceError
    assert {"DeviceProperties", "device_properties", "NoDeviceError"} <= set(tylo.__all__)


def test_docstring_example() -> None:
    assert doctest.testmod(device, raise_on_error=True).attempted >= 1


def test_no_device_is_a_typed_error() -> None:
    n = driver.device_count()
    with pytest.raises(NoDeviceError, match=f"no CUDA device {n + 3}|no usable CUDA driver"):
        tylo.device_properties(n + 3)
    if n == 0:  # this machine: no driver or no GPU
        with pytest.raises(NoDeviceError):
            tylo.device_properties()


@pytest.mark.parametrize("ordinal", [-1, 1.0, "0", True, None])
def test_bad_ordinal(ordinal) -> None:
    with pytest.raises(NoDeviceError, match="ordinal must be a non-negative int"):
        tylo.device_properties(ordinal)


def test_reads_every_field_once(monkeypatch) -> None:
    fake = use(monkeypatch, FakeDriver(H200))
    props = tylo.device_properties()
    assert props.name == "NVIDIA H200" and props.ordinal == 0
    assert props.compute_capability == (9, 0) and props.target.sm == "sm_90a"
    assert props.sm_count == 132 and props.warp_size == 32
    assert props.shared_memory_per_block_optin == 227 * 1024
    assert props.l2_cache_bytes == 60 * 2**20 and props.total_memory_bytes == 150 * 2**30
    assert (props.clock_khz, props.memory_clock_khz) == (1980000, 3201000)
    queries = fake.queries
    assert tylo.device_properties(0) is props and fake.queries == queries  # cached
    with pytest.raises(dataclasses.FrozenInstanceError):
        props.sm_count = 1  # type: ignore[misc]
    assert hash(props) == hash(dataclasses.replace(props))


def test_ordinal_past_the_last_device(monkeypatch) -> None:
    use(monkeypatch, FakeDriver(H200, count=1))
    with pytest.raises(NoDeviceError, match="no CUDA device 1: the driver reports 1 device"):
        tylo.device_properties(1)


def test_deprecated_clocks_may_be_missing(monkeypatch) -> None:
    table = {k: v for k, v in H200.items() if "CLOCK" not in k}
    use(monkeypatch, FakeDriver(table))
    props = tylo.device_properties()
    assert props.clock_khz is None and props.memory_clock_khz is None
    assert props.sm_count == 132


def test_a_failing_query_is_no_device(monkeypatch) -> None:
    table = {k: v for k, v in H200.items() if k != "L2_CACHE_SIZE"}
    use(monkeypatch, FakeDriver(table))
    with pytest.raises(NoDeviceError, match="cannot query CUDA device 0") as info:
        tylo.device_properties()
    assert isinstance(info.value.__cause__, CudaError)
    assert "CUDA_ERROR_INVALID_VALUE" in str(info.value)


def test_threads_share_one_read(monkeypatch) -> None:
    use(monkeypatch, FakeDriver(H200))
    seen: list[object] = []
    workers = [
        threading.Thread(target=lambda: seen.append(tylo.device_properties())) for _ in range(8)
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert len(seen) == 8 and all(p is seen[0] for p in seen)
