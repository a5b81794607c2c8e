"""The launch fast path's one foreign call: ``cuLaunchKernelEx`` with a prebuilt record.

A checked launch (:func:`tylo.backend.driver.launch`) goes through
``cuda.bindings.driver.cuLaunchKernel``, whose eleven converted arguments cost about
1.5 us of Python on the H200's host, half the driver's own ~3 us. A cached kernel's
later launches instead write everything the driver reads into one preallocated
:class:`LaunchRecord` with a single ``struct.pack_into``:

- a ``CUlaunchConfig`` (CUDA driver API, "Execution Control": grid and block
  dimensions, dynamic shared bytes, stream, no launch attributes), then
- the kernel's argument values, each at its natural alignment, and
- a ``void*[]`` array pointing at each value (``kernelParams``),

and call ``cuLaunchKernelEx(config, function, kernelParams, NULL)``: four pointer-sized
arguments through ctypes. The function pointer comes from the driver itself, through
``cuda.bindings``' ``cuGetProcAddress`` with legacy default-stream semantics (stream 0 is
the legacy default stream, as for ``cuda.bindings``' ``cuLaunchKernel``).

A record is not thread-safe: each thread packs into its own. Records hold plain values
only; by-value byte parameters (``raw``) take the checked path.
"""

from __future__ import annotations

import ctypes
import functools
import struct
import threading
from collections.abc import Callable, Sequence
from typing import Any

from tylo.backend.argpack import Param, lay_out

__all__ = ["CONFIG_BYTES", "LAUNCH_EX_TYPE", "LaunchRecord", "launch_ex", "launch_ex_address"]

# CUlaunchConfig: gridDim x/y/z, blockDim x/y/z, sharedMemBytes (7 x u32), padding to 8,
# hStream (pointer), attrs (pointer, NULL), numAttrs (u32, 0), padding to 8: 56 bytes.
_CONFIG_FORMAT = "<7I4xQ16x"
CONFIG_BYTES = struct.calcsize(_CONFIG_FORMAT)
assert CONFIG_BYTES == 56

#: The C type of ``cuLaunchKernelEx``: int (const CUlaunchConfig*, CUfunction, void**, void**).
LAUNCH_EX_TYPE = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p
)
_lock = threading.Lock()
_launch_ex: Any = None
_launch_ex_error: str | None = None


class LaunchRecord:
    """One thread's launch record for one kernel signature (see the module doc).

    ``pack(gx, gy, gz, bx, by, bz, shared, stream, *values)`` writes a launch; then
    ``launch_ex()(record.config, function_handle, record.params, None)`` launches it.

    >>> from tylo.backend.argpack import PTR, I32
    >>> r = LaunchRecord([PTR, I32])
    >>> r.pack(4, 1, 1, 256, 1, 1, 0, 0, 0x7F0000000000, 1000)
    >>> r.values()
    (139637976727552, 1000)
    >>> r.config_values()
    (4, 1, 1, 256, 1, 1, 0, 0)
    """

    __slots__ = ("_buffer", "_pointers", "_struct", "config", "nbytes", "offsets", "pack",
                 "params", "signature")

    def __init__(self, params: Sequence[Param]) -> None:
        self.signature = tuple(params)
        for p in self.signature:
            if not isinstance(p, Param) or p.kind == "raw":
                raise ValueError(f"LaunchRecord holds plain values only, not {p!r}")
        fmt, offsets, pos = lay_out(self.signature, _CONFIG_FORMAT, CONFIG_BYTES)
        self.offsets = offsets
        self.nbytes = pos
        self._struct = struct.Struct(fmt)
        self._buffer = ctypes.create_string_buffer(pos)  # malloc'd: 16-byte aligned
        base = ctypes.addressof(self._buffer)
        self._pointers = (ctypes.c_void_p * max(len(offsets), 1))(
            *(base + off for off in offsets)
        )
        self.config = base
        self.params = ctypes.addressof(self._pointers) if offsets else None
        # buffer and offset bound once: pack(*config, *values)
        self.pack: Callable[..., None] = functools.partial(
            self._struct.pack_into, self._buffer, 0
        )

    def values(self) -> tuple[Any, ...]:
        """The argument values last packed (for debugging and tests)."""
        return self._struct.unpack_from(self._buffer, 0)[8:]

    def config_values(self) -> tuple[int, ...]:
        """The ``CUlaunchConfig`` fields last packed: grid, block, shared bytes, stream."""
        return self._struct.unpack_from(self._buffer, 0)[:8]


def launch_ex() -> Callable[[int, int, Any, Any], int] | None:
    """``cuLaunchKernelEx`` as a ctypes function of four pointers, or None where the
    driver does not provide it (then launches stay on the checked path). Looked up once
    per process through ``cuda.bindings``' ``cuGetProcAddress``."""
    global _launch_ex, _launch_ex_error
    if _launch_ex is not None or _launch_ex_error is not None:
        return _launch_ex
    with _lock:
        if _launch_ex is None and _launch_ex_error is None:
            try:
                from cuda.bindings import driver as cu

                flags = cu.CUdriverProcAddress_flags.CU_GET_PROC_ADDRESS_LEGACY_STREAM
                err, pfn, _status = cu.cuGetProcAddress(b"cuLaunchKernelEx", 12000, flags)
                if err != cu.CUresult.CUDA_SUCCESS or not pfn:
                    _launch_ex_error = f"cuGetProcAddress(cuLaunchKernelEx): {err}"
                else:
                    _launch_ex = LAUNCH_EX_TYPE(int(pfn))
            except Exception as exc:  # no bindings or no driver: the checked path remains
                _launch_ex_error = f"{type(exc).__name__}: {exc}"
    return _launch_ex


def launch_ex_address() -> int:
    """The address of the function :func:`launch_ex` calls (0 if there is none): what
    the C inline path (``tylo._launch``) calls directly."""
    fn = launch_ex()
    if fn is None:
        return 0
    return ctypes.cast(fn, ctypes.c_void_p).value or 0
