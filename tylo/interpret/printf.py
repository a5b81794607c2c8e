"""``vprintf``: a kernel's ``tylo.print_`` lines, formatted as CUDA's device printf does,
one line per thread that runs the call, in lane order (block by block, thread by thread).

The format is the constant string the kernel passes; the values are read from the
argument buffer at C's variadic layout (each at its natural alignment; floats promoted to
f64, integers to at least 32 bits), as :mod:`tylo.kernel.printf` packs them.
"""

from __future__ import annotations

import re
import sys
from typing import Any

import numpy as np

from tylo.interpret.errors import UnsupportedOperation
from tylo.kernel.printf import conversions

__all__ = ["vprintf"]

_SPEC = re.compile(r"%([-+ #0]*)(\d+)?(?:\.(\d*))?(hh|h|ll|l|L|z|j|t)?([diouxXfFeEgGaAcspn%])")


def _read_string(st: Any, lane: int, addr: int, site: str) -> str:
    out = bytearray()
    lanes = np.array([lane])
    while True:
        chunk = st.memory.load(lanes, np.array([addr + len(out)]), 0, np.uint8, 1, site)
        if chunk[0] == 0:
            return out.decode("utf-8", "replace")
        out.append(int(chunk[0]))


def format_c(fmt: str, values: list[Any]) -> str:
    """``fmt`` formatted as C's printf would with already-promoted ``values``."""
    it = iter(values)

    def one(m: re.Match[str]) -> str:
        flags, width, prec, _length, conv = m.groups()
        if conv == "%":
            return "%"
        if conv in "spn":
            raise UnsupportedOperation(f"printf %{conv}", f"printf conversion %{conv}")
        spec = "%" + flags + (width or "") + ("." + prec if prec is not None else "")
        v = next(it)
        if conv == "u":
            return (spec + "d") % int(v)
        if conv == "c":
            return (spec + "c") % chr(int(v) & 0xFF)
        if conv in "aA":
            return float(v).hex()
        return (spec + conv) % (float(v) if conv in "fFeEgG" else int(v))

    return _SPEC.sub(one, fmt)


def vprintf(st: Any, fmt_ptr: Any, args_ptr: Any, site: str) -> np.ndarray:
    """Print one line per active lane; returns the count of values (``vprintf``'s)."""
    fmts = np.broadcast_to(np.asarray(fmt_ptr), (st.lanes,))
    bufs = np.broadcast_to(np.asarray(args_ptr), (st.lanes,))
    counts = np.zeros(len(st.idx), np.int32)
    for k, lane in enumerate(st.idx):
        fmt = _read_string(st, int(lane), int(fmts[lane]), site)
        values: list[Any] = []
        off = 0
        for length, conv in conversions(fmt):
            unsigned = conv in "ouxXc" or conv == "u"
            if conv in "fFeEgGaA":
                dtype, size = np.float64, 8
            elif length in ("ll", "l", "j", "z", "t"):
                dtype, size = (np.uint64 if unsigned else np.int64), 8
            else:
                dtype, size = (np.uint32 if unsigned else np.int32), 4
            off = (off + size - 1) // size * size
            raw = st.memory.load(np.array([lane]), np.array([int(bufs[lane]) + off]), 0,
                                 np.uint8, size, site)  # fmt: skip
            values.append(raw.reshape(-1).view(dtype)[0])
            off += size
        sys.stdout.write(format_c(fmt, values))
        counts[k] = len(values)
    sys.stdout.flush()
    return counts
