"""Per-thread arrays of a static size: ``a = tylo.local(tylo.f32, 8)``.

``a[i]`` loads and ``a[i] = v`` stores element ``i`` of the calling thread's own array;
``i`` may be a Python int, an index expression or an integer Value. The array is an
``alloca`` in the kernel's entry block. When every index is a trace-time constant, LLVM's
scalar replacement of aggregates (SROA) splits it into registers, as nvcc does for a C
array, so the SASS has no local-memory access (``LDL``/``STL``); a runtime index keeps it
in local memory (per-thread, cached in L1). Static indices outside ``0 .. n - 1`` fail
while tracing at the user's line; runtime indices are checked in the bounds-debug mode
(``TYLO_DEBUG_BOUNDS=1``, :mod:`tylo.kernel.debug`).

Elements start undefined, as in C, unless ``fill=`` gives a value.
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir

from tylo import dtypes as dt
from tylo.dtypes import DType
from tylo.kernel import accesses, debug
from tylo.kernel.context import current
from tylo.kernel.errors import OutOfBoundsError, TraceError
from tylo.kernel.lower import bounds, lower_int
from tylo.kernel.memory import _as_element
from tylo.kernel.values import Value, memory_type, to_index
from tylo.layouts._lazy import sympy

__all__ = ["LOCAL_LIMIT", "LocalArray", "local"]

# Local memory per thread is at most 512 KB (CUDA C++ Programming Guide, "Technical
# Specifications per Compute Capability"); arrays meant for registers are far smaller.
LOCAL_LIMIT = 512 * 1024


class LocalArray:
    """A per-thread array of ``n`` elements of ``dtype`` (see the module docstring)."""

    __slots__ = ("dtype", "n", "name", "slot")

    def __init__(self, dtype: DType, n: int, slot: ir.Value, name: str) -> None:
        self.dtype = dtype
        self.n = n
        self.slot = slot
        self.name = name

    def __repr__(self) -> str:
        return f"LocalArray({self.dtype}, {self.n})"

    def __len__(self) -> int:
        return self.n

    def __bool__(self) -> bool:
        return True

    def __iter__(self) -> Any:
        return (self[k] for k in range(self.n))

    # carried through dynamic loops and branches as itself: the elements live in memory,
    # which every region sees (tylo.kernel.tree)
    def __tylo_flatten__(self) -> tuple[tuple[()], LocalArray]:
        return (), self

    @classmethod
    def __tylo_unflatten__(cls, aux: LocalArray, children: Any) -> LocalArray:
        return aux

    def _pointer(self, index: Any, what: str, kind: str) -> ir.Value:
        ctx = current()
        e = to_index(index, f"{self.name}[...]")
        if isinstance(e, sympy.Integer) or e.is_Integer:
            k = int(e)
            if not 0 <= k < self.n:
                raise OutOfBoundsError(
                    f"{self.name}{what}: index {k} is outside the local array of {self.n} "
                    f"elements (valid: 0..{self.n - 1}; negative indices do not wrap)"
                )
            off: ir.Value = ir.IntType(32)(k)
        else:
            lo, hi = bounds(ctx, e)
            if (hi is not None and hi < 0) or (lo is not None and lo >= self.n):
                raise OutOfBoundsError(
                    f"{self.name}{what}: the index {e} lies in [{lo}, {hi}], entirely "
                    f"outside the local array of {self.n} elements"
                )
            debug.check_index(e, self.n, f"local access {self.name}{what}")
            off = lower_int(ctx, e)
        accesses.record(ctx, e, 1, kind, name=self.name, space="local", extent=self.n, param=None)
        zero = ir.IntType(32)(0)
        return ctx.builder.gep(self.slot, [zero, off], inbounds=True)

    def __getitem__(self, index: Any) -> Value:
        ctx = current()
        v = ctx.builder.load(self._pointer(index, f"[{index!r}]", "load"), align=self.dtype.nbytes)
        if self.dtype is dt.bool_:
            v = ctx.builder.icmp_unsigned("!=", v, ir.IntType(8)(0))
        return Value(self.dtype, v)

    def __setitem__(self, index: Any, value: Any) -> None:
        ctx = current()
        v = _as_element(value, self.dtype).use()
        if self.dtype is dt.bool_:
            v = ctx.builder.zext(v, ir.IntType(8))
        ctx.builder.store(
            v, self._pointer(index, f"[{index!r}] = ...", "store"), align=self.dtype.nbytes
        )


def local(dtype: Any, n: int, *, fill: Any = None, name: str = "local") -> LocalArray:
    """A per-thread array of ``n`` (a static int) elements of ``dtype``. Defining property:
    ``a[i]`` reads the last value this thread stored at ``a[i]`` (or ``fill``); threads
    never see each other's arrays. Statically indexed arrays live in registers."""
    ctx = current()
    d = dt.dtype_of(dtype)
    if type(n) is not int or n < 1:
        raise TraceError(f"tylo.local: the size must be a static int >= 1, got {n!r}")
    if n * d.nbytes > LOCAL_LIMIT:
        raise TraceError(
            f"tylo.local: {n} {d} elements are {n * d.nbytes} bytes, over the "
            f"{LOCAL_LIMIT}-byte local memory of a thread; use shared or global memory"
        )
    mem = memory_type(d)
    slot = ctx.prologue.alloca(ir.ArrayType(mem, n), name=ctx.unique(name))
    slot.align = max(d.nbytes, 1)
    arr = LocalArray(d, n, slot, name)
    if fill is not None:
        for k in range(n):
            arr[k] = fill
    return arr
