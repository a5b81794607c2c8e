"""Device memory through the driver: allocation, host <-> device copies, memset.

Each call is synchronous with respect to the legacy default stream (the driver's ``cuMem*``
calls without a stream), so none of them may run while a stream is being captured into a
CUDA graph: each first asks :func:`tylo.backend.capture.forbid_in_capture`, which raises
:class:`~tylo.backend.capture.CaptureError` inside a capture scope instead of letting the
driver invalidate the capture.

With ``TYLO_INTERPRET=1`` allocations come from host memory instead
(:mod:`tylo.backend.hostmem`); every call on such an address stays on the host.
"""

from __future__ import annotations

import ctypes
from typing import Any

from tylo.backend import hostmem
from tylo.backend.capture import forbid_in_capture
from tylo.backend.driver import _cuda, _ensure_context, check
from tylo.backend.errors import LaunchError

__all__ = ["mem_alloc", "mem_free", "memcpy_dtoh", "memcpy_htod", "memset_d8"]


def mem_alloc(nbytes: int) -> int:
    """Allocate ``nbytes`` of device memory; returns the address (0 for 0 bytes)."""
    if nbytes < 0:
        raise LaunchError(f"mem_alloc: negative size {nbytes}")
    if nbytes == 0:
        return 0
    if hostmem.emulating():
        return hostmem.alloc(nbytes)
    forbid_in_capture("cuMemAlloc")
    _ensure_context()
    return int(check(_cuda().cuMemAlloc(nbytes), "cuMemAlloc"))


def mem_free(ptr: int) -> None:
    """Free memory from :func:`mem_alloc` (0 is a no-op)."""
    if ptr and hostmem.owns(ptr):
        hostmem.free(ptr)
    elif ptr:
        forbid_in_capture("cuMemFree")
        _ensure_context()
        check(_cuda().cuMemFree(ptr), "cuMemFree")


def _host_view(buf: Any, what: str, nbytes: int | None, *, writable: bool) -> tuple[Any, int, int]:
    """(object to keep alive, address, byte count) of a C-contiguous host buffer."""
    from tylo.errors import ArrayError

    try:
        mv = memoryview(buf)
    except TypeError:
        raise ArrayError(f"{what}: {type(buf).__name__} does not expose a host buffer") from None
    if not mv.c_contiguous:
        raise ArrayError(f"{what}: host buffer is not C-contiguous; copy it first")
    if writable and mv.readonly:
        raise ArrayError(f"{what}: host buffer is read-only")
    size = mv.nbytes if nbytes is None else nbytes
    if not 0 <= size <= mv.nbytes:
        raise ArrayError(f"{what}: {size} bytes requested, the host buffer holds {mv.nbytes}")
    if size == 0:
        return mv, 0, 0
    flat = mv.cast("B")
    if flat.readonly:
        holder: Any = ctypes.create_string_buffer(flat.tobytes(), flat.nbytes)
    else:
        holder = (ctypes.c_char * flat.nbytes).from_buffer(flat)
    return holder, ctypes.addressof(holder), size


def memcpy_htod(dst: int, src: Any, nbytes: int | None = None) -> None:
    """Copy a contiguous host buffer (numpy array, bytes, ...) to device address ``dst``."""
    holder, addr, size = _host_view(src, "memcpy_htod", nbytes, writable=False)
    if size and hostmem.owns(dst):
        ctypes.memmove(hostmem.host_bytes(dst, size).ctypes.data, addr, size)
    elif size:
        forbid_in_capture("a host-to-device copy (cuMemcpyHtoD)")
        _ensure_context()
        check(_cuda().cuMemcpyHtoD(dst, addr, size), "cuMemcpyHtoD")
    del holder


def memcpy_dtoh(dst: Any, src: int, nbytes: int | None = None) -> None:
    """Copy from device address ``src`` into a contiguous, writable host buffer."""
    holder, addr, size = _host_view(dst, "memcpy_dtoh", nbytes, writable=True)
    if size and hostmem.owns(src):
        ctypes.memmove(addr, hostmem.host_bytes(src, size).ctypes.data, size)
    elif size:
        forbid_in_capture("a device-to-host copy (cuMemcpyDtoH)")
        _ensure_context()
        check(_cuda().cuMemcpyDtoH(addr, src, size), "cuMemcpyDtoH")
    del holder


def memset_d8(ptr: int, value: int, nbytes: int) -> None:
    """Set ``nbytes`` bytes at device address ``ptr`` to ``value`` (0..255)."""
    if not 0 <= value <= 255:
        raise LaunchError(f"memset_d8: byte value {value} is outside 0..255")
    if nbytes and hostmem.owns(ptr):
        hostmem.host_bytes(ptr, nbytes)[:] = value
    elif nbytes:
        forbid_in_capture("cuMemsetD8")
        _ensure_context()
        check(_cuda().cuMemsetD8(ptr, value, nbytes), "cuMemsetD8")
