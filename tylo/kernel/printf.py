"""A device print through CUDA's ``vprintf`` (CUDA C++ Programming Guide, "Formatted
Output"; PTX: ``call.uni (ret), vprintf, (fmt, args)``).

``tylo.print_(fmt, *values)`` (named so that it does not shadow Python's ``print``) prints
from every thread that runs it. ``fmt`` is a static C format string; it becomes a global
constant. The values are packed into a buffer as C's variadic calls pass them: each at
its natural alignment, f32 (and f16/bf16) promoted to f64, integers narrower than 32 bits
and bools promoted to 32 bits (sign- or zero-extended). The number of ``%`` conversions
must equal the number of values, and each conversion must fit its value (``%d`` an
integer, ``%f`` a float, ``%lld`` / ``%llu`` / ``%llx`` a 64-bit integer), or the trace
fails at the user's line. The output appears when the host synchronizes.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
from llvmlite import ir

from tylo import dtypes as dt
from tylo.dtypes import DType
from tylo.kernel.context import TraceContext, current
from tylo.kernel.errors import TraceError
from tylo.kernel.values import Value, as_value, convert
from tylo.layouts._lazy import sympy

__all__ = ["conversions", "print_", "vprintf"]

# C99 7.19.6.1: %[flags][width][.precision][length]conversion; '*' width/precision are
# refused (they would consume arguments the count below could not see)
_SPEC = re.compile(
    r"%(?P<flags>[-+ #0]*)(?P<width>\*|\d+)?(?:\.(?P<prec>\*|\d*))?"
    r"(?P<len>hh|h|ll|l|L|z|j|t)?(?P<conv>[diouxXfFeEgGaAcspn%])?"
)
_INT_CONV = set("diouxXc")
_FLOAT_CONV = set("fFeEgGaA")
_I8P = ir.IntType(8).as_pointer()
_VPRINTF = "vprintf"


def conversions(fmt: str) -> list[tuple[str, str]]:
    """The ``(length, conversion)`` of each argument-consuming conversion in ``fmt``, in
    order (``%%`` consumes none). Defining property: ``len(conversions(fmt))`` is the
    number of arguments C's ``printf(fmt, ...)`` reads.

    >>> conversions("x=%d y=%8.3f %% z=%llx")
    [('', 'd'), ('', 'f'), ('ll', 'x')]
    """
    out = []
    for m in _SPEC.finditer(fmt):
        conv = m.group("conv")
        if conv is None:
            raise TraceError(
                f"tylo.print_: {m.group(0)!r} in {fmt!r} is not a complete conversion; "
                "write %% for a literal percent sign"
            )
        if conv == "%":
            if m.group(0) != "%%":
                raise TraceError(f"tylo.print_: {m.group(0)!r} in {fmt!r}: write %% alone")
            continue
        if m.group("width") == "*" or m.group("prec") == "*":
            raise TraceError(
                f"tylo.print_: {m.group(0)!r} in {fmt!r}: '*' widths are not supported; "
                "write the width into the format"
            )
        if conv in "sn":
            raise TraceError(
                f"tylo.print_: %{conv} in {fmt!r} is not supported (kernel values are "
                "numbers; %s and %n need pointers)"
            )
        out.append((m.group("len") or "", conv))
    return out


def _int_type(v: int, wide: bool, conv: str, where: str, length: str) -> DType:
    """The type a Python int is passed as: signed if it fits, else unsigned for the
    unsigned conversions (o, u, x, X); refused when it fits neither."""
    bits = 64 if wide else 32
    if -(1 << (bits - 1)) <= v < (1 << (bits - 1)):
        return dt.i64 if wide else dt.i32
    if conv in "ouxX" and 0 <= v < (1 << bits):
        return dt.u64 if wide else dt.u32
    hint = f"use %ll{conv}" if not wide else "no C integer conversion holds it"
    raise TraceError(
        f"{where}: the integer {v} does not fit the {bits} bits that %{length}{conv} prints; {hint}"
    )


def _promote(v: Any, length: str, conv: str, k: int, fmt: str) -> Value:
    """Value ``v`` as C's default argument promotion passes it for conversion ``conv``."""
    where = f"tylo.print_({fmt!r}): value {k}"
    wide = length in ("l", "ll", "j", "z", "t")
    if conv in _FLOAT_CONV:
        if isinstance(v, Value):
            got = None if v.dtype.is_float else f"a {v.dtype}"
        else:
            got = None if isinstance(v, (float, sympy.Float)) else "an integer"
        if got is not None:
            raise TraceError(
                f"{where} is {got} but %{conv} prints a double; convert it with "
                ".to(tylo.f32) or use an integer conversion (%d, %u, %x)"
            )
        return convert(as_value(v, dt.f64) if not isinstance(v, Value) else v, dt.f64)
    if conv == "p":
        val = as_value(v, dt.u64)
        if val.dtype.is_float:
            raise TraceError(f"{where}: %p needs an address (a u64), got {val.dtype}")
        return convert(val, dt.u64)
    # integer conversions
    if isinstance(v, float) or (isinstance(v, Value) and v.dtype.is_float):
        got = "float" if isinstance(v, float) else str(v.dtype)
        raise TraceError(
            f"{where} is a {got} but %{conv} prints an integer; use %f/%g/%e, or convert "
            "it with .to(tylo.i32)"
        )
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        val = as_value(int(v), _int_type(int(v), wide, conv, where, length))
    elif not isinstance(v, Value):
        val = as_value(v, dt.i64 if wide else dt.i32)
    else:
        val = v
    bits = val.dtype.bits if val.dtype is not dt.bool_ else 1
    if bits == 64 and not wide:
        raise TraceError(
            f"{where} is a 64-bit {val.dtype} but %{length}{conv} prints 32 bits; use "
            f"%ll{conv} or convert it with .to(tylo.i32)"
        )
    if wide:
        target = dt.u64 if val.dtype.kind in ("u", "b") else dt.i64
    else:
        target = dt.u32 if val.dtype.kind in ("u", "b") else dt.i32
    return convert(val, target)


def _format_global(ctx: TraceContext, fmt: str) -> ir.Value:
    """An ``i8*`` to a module constant holding ``fmt`` and a terminating NUL."""
    data = fmt.encode("utf-8") + b"\0"
    cache = ctx.module.__dict__.setdefault("_tylo_strings", {})
    gv = cache.get(data)
    if gv is None:
        ty = ir.ArrayType(ir.IntType(8), len(data))
        # addrspace(4) is NVVM's constant space; vprintf takes a generic pointer
        gv = ir.GlobalVariable(
            ctx.module.module, ty, ctx.module.unique_name("tylo_fmt"), addrspace=4
        )
        gv.global_constant = True
        gv.linkage = "internal"
        gv.initializer = ir.Constant(ty, bytearray(data))
        gv.align = 1
        cache[data] = gv
    zero = ir.IntType(32)(0)
    p = ctx.builder.gep(gv, [zero, zero], inbounds=True)
    return ctx.builder.addrspacecast(p, _I8P)


def vprintf(
    ctx: TraceContext, fmt: str, args: list[ir.Value], *, shared_slot: bool = False
) -> None:
    """Emit ``vprintf(fmt, buffer)`` with the already-promoted IR ``args`` packed at
    their natural alignment (the layout of C's variadic argument buffer). With
    ``shared_slot`` the buffer is one per argument layout and kernel (for prints that end
    the thread, such as the bounds-debug traps, which never need two buffers at once)."""
    b = ctx.builder
    fn = ctx.module.intrinsic(_VPRINTF, ir.IntType(32), [_I8P, _I8P])
    text = _format_global(ctx, fmt)
    if not args:
        b.call(fn, [text, ir.Constant(_I8P, None)])
        return
    struct = ir.LiteralStructType([a.type for a in args])
    # the buffer lives in the entry block (one slot per print, reused by loops)
    slots = ctx.__dict__.setdefault("_tylo_printf_slots", {})
    slot = slots.get(str(struct)) if shared_slot else None
    if slot is None:
        slot = ctx.prologue.alloca(struct, name=ctx.unique("printf_args"))
        slot.align = 8
        if shared_slot:
            slots[str(struct)] = slot
    i32 = ir.IntType(32)
    for k, a in enumerate(args):
        b.store(a, b.gep(slot, [i32(0), i32(k)], inbounds=True))
    b.call(fn, [text, b.bitcast(slot, _I8P)])


def print_(fmt: str, *values: Any) -> None:
    """Print ``fmt`` formatted with ``values`` from each thread that runs this line, with
    C ``printf`` semantics (see the module docstring). Defining property: the line printed
    is ``fmt % values`` as C formats it, after C's default argument promotions."""
    ctx = current()
    if not isinstance(fmt, str):
        raise TraceError(f"tylo.print_: the format must be a Python str, got {type(fmt).__name__}")
    if "\0" in fmt:
        raise TraceError("tylo.print_: the format contains a NUL character, which ends it")
    specs = conversions(fmt)
    if len(specs) != len(values):
        raise TraceError(
            f"tylo.print_({fmt!r}): the format has {len(specs)} conversion(s) but "
            f"{len(values)} value(s) were given; give one value per % conversion "
            "(write %% for a literal percent sign)"
        )
    promoted = [
        _promote(v, length, conv, k, fmt).use()
        for k, (v, (length, conv)) in enumerate(zip(values, specs))
    ]
    vprintf(ctx, fmt, promoted)
