"""What a CUDA device is: :func:`device_properties` reads it once per process.

Host code that sizes a launch to the machine (a persistent kernel's grid, the shared memory a
pipeline may use, a split of rows over SMs) reads these numbers instead of hard-coding an
H200's. The values come from the driver (``cuDeviceGetAttribute``, ``cuDeviceGetName``,
``cuDeviceTotalMem``; CUDA Driver API, "Device Management"), are read once per device and
process, and are cached: a later call costs one dict lookup.

Without a driver, without a GPU, or for an ordinal the driver does not report, the query
raises :class:`~tylo.backend.errors.NoDeviceError`; nothing here is needed to compile.

With ``TYLO_INTERPRET=1`` device 0 is the CPU interpreter (:mod:`tylo.interpret`): its
properties are those of a GPU of the interpreter's target ``TYLO_INTERPRET_TARGET``
(default ``sm_80``; see :func:`interpreted_properties`), so host code plans its launches
for the device that will run them.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any

from tylo.backend.errors import CudaError, NoDeviceError

__all__ = ["DeviceProperties", "device_properties", "interpreted_properties"]

# field -> CUdevice_attribute name (without the CU_DEVICE_ATTRIBUTE_ prefix); every one of
# these exists on every driver tylo supports (CUDA 12 and 13)
_REQUIRED: dict[str, str] = {
    "sm_count": "MULTIPROCESSOR_COUNT",
    "warp_size": "WARP_SIZE",
    "max_threads_per_block": "MAX_THREADS_PER_BLOCK",
    "max_threads_per_sm": "MAX_THREADS_PER_MULTIPROCESSOR",
    "max_blocks_per_sm": "MAX_BLOCKS_PER_MULTIPROCESSOR",
    "registers_per_block": "MAX_REGISTERS_PER_BLOCK",
    "registers_per_sm": "MAX_REGISTERS_PER_MULTIPROCESSOR",
    "shared_memory_per_block": "MAX_SHARED_MEMORY_PER_BLOCK",
    "shared_memory_per_block_optin": "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN",
    "shared_memory_per_sm": "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR",
    "reserved_shared_memory_per_block": "RESERVED_SHARED_MEMORY_PER_BLOCK",
    "l2_cache_bytes": "L2_CACHE_SIZE",
    "memory_bus_width_bits": "GLOBAL_MEMORY_BUS_WIDTH",
}
# attributes CUDA 13 deprecates (the runtime's cudaDeviceProp dropped them): None when the
# driver no longer answers
_OPTIONAL: dict[str, str] = {
    "clock_khz": "CLOCK_RATE",
    "memory_clock_khz": "MEMORY_CLOCK_RATE",
}


@dataclass(frozen=True)
class DeviceProperties:
    """The properties of one CUDA device, as the driver reports them.

    Sizes are in bytes, clocks in kHz. ``shared_memory_per_block`` is the default limit
    (48 KB); a kernel may use up to ``shared_memory_per_block_optin`` after opting in (tylo's
    launches do that for you), and ``shared_memory_per_sm`` is what all resident blocks of
    one SM share (each block also costs ``reserved_shared_memory_per_block``, 1 KB on sm_80
    and sm_90). ``clock_khz`` and ``memory_clock_khz`` are None where the driver no longer
    reports them.

    >>> p = DeviceProperties(
    ...     ordinal=0, name="NVIDIA H200", compute_capability=(9, 0), sm_count=132,
    ...     warp_size=32, max_threads_per_block=1024, max_threads_per_sm=2048,
    ...     max_blocks_per_sm=32, registers_per_block=65536, registers_per_sm=65536,
    ...     shared_memory_per_block=49152, shared_memory_per_block_optin=232448,
    ...     shared_memory_per_sm=233472, reserved_shared_memory_per_block=1024,
    ...     l2_cache_bytes=62914560, total_memory_bytes=150 * 2**30,
    ...     memory_bus_width_bits=6144, clock_khz=1980000, memory_clock_khz=3201000)
    >>> p.target.sm, p.sm_count
    ('sm_90a', 132)
    """

    ordinal: int
    name: str
    compute_capability: tuple[int, int]
    sm_count: int
    warp_size: int
    max_threads_per_block: int
    max_threads_per_sm: int
    max_blocks_per_sm: int
    registers_per_block: int
    registers_per_sm: int
    shared_memory_per_block: int
    shared_memory_per_block_optin: int
    shared_memory_per_sm: int
    reserved_shared_memory_per_block: int
    l2_cache_bytes: int
    total_memory_bytes: int
    memory_bus_width_bits: int
    clock_khz: int | None = None
    memory_clock_khz: int | None = None

    @property
    def target(self) -> Any:
        """The compile target of this device (``Target.from_device``'s answer)."""
        from tylo.target import MIN_ARCH_SPECIFIC_MAJOR, Target

        major, minor = self.compute_capability
        return Target(major, minor, major >= MIN_ARCH_SPECIFIC_MAJOR)


_cache: dict[int, DeviceProperties] = {}
_lock = threading.Lock()


def device_properties(ordinal: int = 0) -> DeviceProperties:
    """The :class:`DeviceProperties` of CUDA device ``ordinal``, read once per process.

    Raises :class:`~tylo.backend.errors.NoDeviceError` when there is no CUDA driver, no
    GPU, or no device ``ordinal`` (the message says which), so host code can fall back::

        try:
            sms = tylo.device_properties().sm_count
        except tylo.NoDeviceError:
            sms = 132   # plan for an H200 when compiling without a GPU
    """
    if type(ordinal) is not int or ordinal < 0:
        raise NoDeviceError(
            f"device_properties: the ordinal must be a non-negative int, got {ordinal!r}"
        )
    if os.environ.get("TYLO_INTERPRET") == "1":
        return interpreted_properties(ordinal)
    props = _cache.get(ordinal)
    if props is not None:
        return props
    props = _read(ordinal)
    with _lock:
        return _cache.setdefault(ordinal, props)


def _read(ordinal: int) -> DeviceProperties:
    from tylo.backend import driver

    dev = driver._device(ordinal)  # NoDeviceError without a driver, a GPU or this ordinal
    cu = driver._cuda()

    def attribute(name: str) -> int:
        attr = getattr(cu.CUdevice_attribute, f"CU_DEVICE_ATTRIBUTE_{name}")
        return int(driver.check(cu.cuDeviceGetAttribute(attr, dev), "cuDeviceGetAttribute"))

    try:
        values: dict[str, Any] = {field: attribute(name) for field, name in _REQUIRED.items()}
        for field, name in _OPTIONAL.items():
            try:
                values[field] = attribute(name)
            except (CudaError, AttributeError):
                values[field] = None
        raw = driver.check(cu.cuDeviceGetName(256, dev), "cuDeviceGetName")
        total = driver.check(cu.cuDeviceTotalMem(dev), "cuDeviceTotalMem")
        major = attribute("COMPUTE_CAPABILITY_MAJOR")
        minor = attribute("COMPUTE_CAPABILITY_MINOR")
    except CudaError as err:
        raise NoDeviceError(f"cannot query CUDA device {ordinal}: {err}") from err
    name = raw.split(b"\0", 1)[0].decode(errors="replace") if isinstance(raw, bytes) else str(raw)
    return DeviceProperties(
        ordinal=ordinal,
        name=name.strip(),
        compute_capability=(major, minor),
        total_memory_bytes=int(total),
        **values,
    )


# compute capability -> (name, SMs, L2 bytes, bus width) of the GPU the interpreter stands for
_INTERPRETED = {
    (8, 0): ("A100", 108, 40 * 2**20, 5120),
    (9, 0): ("H100", 132, 50 * 2**20, 5120),
}


def interpreted_properties(ordinal: int = 0) -> DeviceProperties:
    """The properties of the interpreter's device 0 (``TYLO_INTERPRET=1``): the compute
    capability of ``TYLO_INTERPRET_TARGET`` (default ``sm_80``), that target's shared memory
    per block (:attr:`tylo.target.Target.max_shared_bytes`), and the SM count and L2 size
    of the A100 (8.0) or the H100 (9.0); 108 SMs otherwise. Another ordinal raises
    :class:`~tylo.backend.errors.NoDeviceError`."""
    from tylo.target import Target

    if ordinal != 0:
        raise NoDeviceError(
            f"no CUDA device {ordinal}: the interpreter (TYLO_INTERPRET=1) emulates device 0 only"
        )
    target = Target.parse(os.environ.get("TYLO_INTERPRET_TARGET", "sm_80"))
    name, sms, l2, bus = _INTERPRETED.get(target.cc, ("GPU", 108, 40 * 2**20, 5120))
    optin = target.max_shared_bytes
    return DeviceProperties(
        ordinal=0,
        name=f"tylo interpreter ({name}, {target.sm})",
        compute_capability=target.cc,
        sm_count=sms,
        warp_size=32,
        max_threads_per_block=1024,
        max_threads_per_sm=2048,
        max_blocks_per_sm=32,
        registers_per_block=65536,
        registers_per_sm=65536,
        shared_memory_per_block=49152,
        shared_memory_per_block_optin=optin,
        shared_memory_per_sm=optin + 1024,
        reserved_shared_memory_per_block=1024,
        l2_cache_bytes=l2,
        total_memory_bytes=16 * 2**30,
        memory_bus_width_bits=bus,
    )
