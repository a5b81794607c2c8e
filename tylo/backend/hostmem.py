"""Device memory emulated in host memory, for the CPU interpreter (``TYLO_INTERPRET=1``).

With ``TYLO_INTERPRET=1``, :func:`tylo.backend.memory.mem_alloc` hands out addresses of this
heap instead of asking the driver, so :class:`~tylo.arrays.DeviceBuffer` (and every op that
allocates through it) works on a machine without a GPU; :mod:`tylo.interpret` reads a
pointer argument of such an address as the host bytes behind it. The other memory calls
(free, copies, memset) dispatch on the address, whatever the variable says now: an
emulated address is never handed to the driver.

Addresses start at :data:`HEAP_BASE` (``2**56``), above any address a CUDA driver gives
(its unified address space is a 48-bit user range), so the two can never be confused.
Allocations are 256-byte aligned, as ``cuMemAlloc``'s are, with an unused gap of at least
4 KiB between two of them. Memory starts filled with ``0xFF`` bytes (NaN for every float
type), as uninitialized device memory may hold anything.
"""

from __future__ import annotations

import bisect
import os
import threading

import numpy as np

__all__ = [
    "HEAP_BASE",
    "HEAP_END",
    "alloc",
    "emulating",
    "free",
    "host_bytes",
    "live_bytes",
    "lookup",
    "owns",
]

HEAP_BASE = 1 << 56
HEAP_END = 1 << 62
_ALIGN = 4096  # each allocation starts on a fresh 4 KiB page: 256-byte aligned, and a gap

_lock = threading.Lock()
_starts: list[int] = []  # sorted start addresses of live allocations
_blocks: dict[int, np.ndarray] = {}  # start -> its bytes (uint8)
_next = [HEAP_BASE]


def emulating() -> bool:
    """True when ``TYLO_INTERPRET=1``: new device allocations come from this heap."""
    return os.environ.get("TYLO_INTERPRET") == "1"


def owns(ptr: int) -> bool:
    """Whether ``ptr`` is an address of this heap's range (live or freed)."""
    return HEAP_BASE <= ptr < HEAP_END


def alloc(nbytes: int) -> int:
    """A fresh emulated allocation of ``nbytes`` (> 0) bytes, filled with ``0xFF``."""
    data = np.full(nbytes, 0xFF, dtype=np.uint8)
    with _lock:
        start = _next[0]
        if start + nbytes >= HEAP_END:
            raise MemoryError(f"the emulated device heap is exhausted ({nbytes} bytes asked)")
        _next[0] = start + (nbytes + 2 * _ALIGN - 1) // _ALIGN * _ALIGN
        bisect.insort(_starts, start)
        _blocks[start] = data
    return start


def free(ptr: int) -> None:
    """Free the emulated allocation that starts at ``ptr``."""
    from tylo.backend.errors import LaunchError

    with _lock:
        if ptr not in _blocks:
            raise LaunchError(
                f"mem_free: 0x{ptr:x} is not the start of a live emulated allocation "
                "(freed twice, or an interior pointer)"
            )
        del _blocks[ptr]
        _starts.remove(ptr)


def lookup(ptr: int) -> tuple[np.ndarray, int]:
    """(the allocation's bytes, ``ptr``'s offset in them) for an address inside a live
    emulated allocation; :class:`~tylo.backend.errors.LaunchError` otherwise."""
    from tylo.backend.errors import LaunchError

    with _lock:
        i = bisect.bisect_right(_starts, ptr) - 1
        if i >= 0:
            start = _starts[i]
            data = _blocks[start]
            if ptr - start < max(data.size, 1):
                return data, ptr - start
    raise LaunchError(
        f"0x{ptr:x} is not inside a live emulated device allocation (freed, or never "
        "allocated with TYLO_INTERPRET=1)"
    )


def host_bytes(ptr: int, nbytes: int) -> np.ndarray:
    """The ``nbytes`` bytes at emulated address ``ptr``, as a writable uint8 view;
    :class:`~tylo.backend.errors.LaunchError` when they pass the allocation's end."""
    from tylo.backend.errors import LaunchError

    data, off = lookup(ptr)
    if nbytes < 0 or off + nbytes > data.size:
        raise LaunchError(
            f"{nbytes} bytes at 0x{ptr:x} pass the end of its emulated allocation "
            f"({data.size} bytes, the address {off} bytes in)"
        )
    return data[off : off + nbytes]


def live_bytes() -> int:
    """Bytes held by live emulated allocations (for tests of leaks)."""
    with _lock:
        return sum(d.size for d in _blocks.values())
