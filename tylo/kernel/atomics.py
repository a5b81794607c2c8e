"""Atomic read-modify-write on one element of global or shared memory.

``tylo.atomic_add(t, i, v)`` adds ``v`` to element ``i`` of the tensor ``t`` (a pointer
parameter, a :func:`~tylo.kernel.memory.view`, or shared memory) atomically and returns
the old value. ``atomic_min``, ``atomic_max``, ``atomic_exch`` and ``atomic_cas(t, i,
compare, v)`` follow. Each emits one PTX instruction (PTX ISA 9.7.13.5, "atom")::

    atom.{sem}.{scope}.{space}.{op}.{type}  d, [a], b;

with ``order=`` giving ``{sem}`` ("relaxed" by default, "acquire", "release",
"acq_rel") and ``scope=`` giving ``{scope}`` ("gpu" by default, "cta", "sys"); both need
sm_70+, below every target tylo compiles for. ``result=False`` (add, min, max) drops the
old value and emits ``red`` (PTX ISA 9.7.13.6), a fire-and-forget reduction (SASS
``RED``) that returns None; ``red`` takes only relaxed or release ordering.

Types (PTX ISA 9.7.13.5): add on u32, i32, u64, i64 (as ``.u64``: two's complement), f32,
f64, f16 and bf16 (``.noftz``; bf16 needs sm_90+); min/max on u32, i32, u64, i64; exch
and cas on any 32- or 64-bit type (as ``.b32`` / ``.b64``). Other combinations are
refused while tracing, at the user's line.
"""

from __future__ import annotations

from typing import Any

from tylo import dtypes as dt
from tylo.backend.inline_ptx import PTXAsm
from tylo.dtypes import DType
from tylo.kernel.context import current
from tylo.kernel.errors import TraceError
from tylo.kernel.memory import Tensor, _as_element
from tylo.kernel.values import Value, ir_type

__all__ = [
    "ORDERS",
    "SCOPES",
    "atomic_add",
    "atomic_cas",
    "atomic_exch",
    "atomic_max",
    "atomic_min",
]

# PTX ISA 9.7.13.5: .sem = { .relaxed, .acquire, .release, .acq_rel }, .scope = { .cta,
# .gpu, .sys } (.cluster needs sm_90 and is not offered)
ORDERS = ("relaxed", "acquire", "release", "acq_rel")
SCOPES = ("cta", "gpu", "sys")

_INT = {"u32": "u32", "i32": "s32", "u64": "u64", "i64": "s64"}


def _ptx_suffix(op: str, d: DType) -> str | None:
    """The PTX ``.type`` of ``atom.op`` on ``d`` elements, or None where PTX has none."""
    if op == "add":
        if d.name in ("u32", "i32", "u64"):
            return _INT[d.name]
        if d.name == "i64":  # PTX has no atom.add.s64; the sum's bits are the same
            return "u64"
        if d.name in ("f32", "f64"):
            return d.name
        if d.name in ("f16", "bf16"):  # only the .noftz form exists (sm_70+; bf16 sm_90+)
            return f"noftz.{d.name}"
        return None
    if op in ("min", "max"):
        return _INT.get(d.name)
    if op in ("exch", "cas"):
        return f"b{d.bits}" if d.bits in (32, 64) and d is not dt.bool_ else None
    return None


def _supported(op: str) -> str:
    return {
        "add": "u32, i32, u64, i64, f32, f64, f16, bf16 (sm_90+)",
        "min": "u32, i32, u64, i64",
        "max": "u32, i32, u64, i64",
        "exch": "32- and 64-bit types",
        "cas": "32- and 64-bit types",
    }[op]


def _atomic(
    op: str,
    t: Any,
    coord: Any,
    operands: list[Any],
    scope: str,
    order: str,
    result: bool = True,
) -> Value | None:
    name = f"tylo.atomic_{op}"
    if not isinstance(t, Tensor):
        raise TraceError(
            f"{name}: the first argument must be global or shared memory (a pointer "
            f"parameter, a tylo.view or tylo.shared), got {type(t).__name__}"
        )
    if scope not in SCOPES:
        raise TraceError(f"{name}: scope={scope!r} is not one of {', '.join(SCOPES)}")
    if order not in ORDERS:
        raise TraceError(f"{name}: order={order!r} is not one of {', '.join(ORDERS)}")
    d = t.dtype
    suffix = _ptx_suffix(op, d)
    if suffix is None:
        raise TraceError(
            f"{name}: PTX has no atom.{op} on {d} elements in {t.space} memory (PTX ISA "
            f"9.7.13.5: {op} takes {_supported(op)}); store the data in one of those types"
        )
    if type(result) is not bool:
        raise TraceError(
            f"{name}: result= must be a Python bool (whether to return the old value), "
            f"got {type(result).__name__}"
        )
    if not result and order not in ("relaxed", "release"):
        raise TraceError(
            f"{name}(result=False, order={order!r}): red takes only relaxed or release "
            "ordering (PTX ISA 9.7.13.6); keep the result to use acquire semantics"
        )
    ctx = current()
    if d is dt.bf16 and ctx.target.major < 9:
        raise TraceError(
            f"{name}: atom.add.noftz.bf16 needs sm_90+, target is {ctx.target}; add in f32 "
            "memory instead"
        )
    values = [_as_element(v, d) for v in operands]
    # checks the offset like a load: static bounds, sign, width, and debug-mode bounds
    addr = t.address(coord)
    # relaxed.gpu is PTX's default; the PTX stays short when it is meant
    quals = "" if (order, scope) == ("relaxed", "gpu") else f".{order}.{scope}"
    asm = PTXAsm(f"atom.{op}" if result else f"red.{op}")
    res = asm.output(ir_type(d)) if result else None
    a = asm.input(addr.use())
    ins = ", ".join(asm.input(v.use()) for v in values)
    if result:
        asm.line(f"atom{quals}.{t.space}.{op}.{suffix} {res}, [{a}], {ins};")
    else:
        asm.line(f"red{quals}.{t.space}.{op}.{suffix} [{a}], {ins};")
    outs = asm.emit(ctx.builder, side_effects=True, memory=True)
    return Value(d, outs[0]) if result else None


def atomic_add(
    t: Tensor,
    coord: Any,
    value: Any,
    *,
    scope: str = "gpu",
    order: str = "relaxed",
    result: bool = True,
) -> Value | None:
    """Atomically ``t[coord] += value``; returns the old element. Defining property: after
    any set of concurrent ``atomic_add`` calls the element holds the old value plus the sum
    of every added value (for floats, in some order), and the returned old values are
    distinct stages of that sum. ``atom.{order}.{scope}.{space}.add.{type}``; with
    ``result=False``, ``red...add`` and None."""
    return _atomic("add", t, coord, [value], scope, order, result)


def atomic_min(
    t: Tensor,
    coord: Any,
    value: Any,
    *,
    scope: str = "gpu",
    order: str = "relaxed",
    result: bool = True,
) -> Value | None:
    """Atomically ``t[coord] = min(t[coord], value)``; returns the old element. After any
    concurrent calls the element is the minimum of its old value and every value given."""
    return _atomic("min", t, coord, [value], scope, order, result)


def atomic_max(
    t: Tensor,
    coord: Any,
    value: Any,
    *,
    scope: str = "gpu",
    order: str = "relaxed",
    result: bool = True,
) -> Value | None:
    """Atomically ``t[coord] = max(t[coord], value)``; returns the old element. After any
    concurrent calls the element is the maximum of its old value and every value given."""
    return _atomic("max", t, coord, [value], scope, order, result)


def atomic_exch(
    t: Tensor, coord: Any, value: Any, *, scope: str = "gpu", order: str = "relaxed"
) -> Value:
    """Atomically store ``value`` at ``t[coord]`` and return the element it replaced; the
    old values returned by concurrent calls and the final element are all distinct
    participants (each value is returned at most once or left in memory)."""
    return _atomic("exch", t, coord, [value], scope, order)


def atomic_cas(
    t: Tensor,
    coord: Any,
    compare: Any,
    value: Any,
    *,
    scope: str = "gpu",
    order: str = "relaxed",
) -> Value:
    """Atomically ``old = t[coord]; if old == compare: t[coord] = value``; returns
    ``old`` (the store happened exactly when the result equals ``compare``, bitwise)."""
    return _atomic("cas", t, coord, [compare, value], scope, order)
