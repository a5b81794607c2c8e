"""The elementwise funnel of data values: promotion rules and the IR of each operation.

:func:`elementwise` is the one entry point of data-space arithmetic (every operator of
:class:`~tylo.kernel.values.Value`, every math function of :mod:`tylo.kernel.mathfn`):
containers that define ``__tylo_elementwise__(op, args)`` take the operation over (a
register fragment broadcasts it over its Values); otherwise the operands are coerced to a
common dtype (see :func:`promote`) and the rule registered in :data:`OPS` emits the IR.
16-bit floats are computed in f32 and rounded back.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from llvmlite import ir

from tylo import dtypes as dt
from tylo.dtypes import DType
from tylo.kernel import values as _values
from tylo.kernel.context import current
from tylo.kernel.errors import TraceError, Undefined
from tylo.kernel.values import Value, as_value, convert, ir_type, is_relation
from tylo.layouts._lazy import sympy

__all__ = ["OPS", "elementwise", "promote"]

_FLOAT_RANK = {"bf16": 1, "f16": 1, "f32": 2, "f64": 3}


# ---------------------------------------------------------------------------- promotion


def promote(a: DType, b: DType, op: str = "operation") -> DType:
    """The dtype two Values of dtypes ``a`` and ``b`` meet in."""
    if a is b:
        return a
    if a is dt.bool_ or b is dt.bool_:
        raise TraceError(
            f"{op}: cannot mix bool with {b if a is dt.bool_ else a}; convert with .to()"
        )
    if a.is_float and b.is_float:
        ra, rb = _FLOAT_RANK[a.name], _FLOAT_RANK[b.name]
        if ra == rb:  # f16 with bf16
            return dt.f32
        return a if ra > rb else b
    if a.is_float:
        return a
    if b.is_float:
        return b
    if a.kind == b.kind:
        return a if a.bits > b.bits else b
    signed, unsigned = (a, b) if a.kind == "i" else (b, a)
    if signed.bits > unsigned.bits:
        return signed
    raise TraceError(
        f"{op}: cannot mix {a} and {b} (signed and unsigned of the same or "
        "smaller signed width); convert one with .to()"
    )


def _weak_dtype(x: Any) -> str | None:
    """'int', 'float' or 'bool' for weakly typed operands (Python scalars, sympy)."""
    if isinstance(x, (bool, np.bool_)) or is_relation(x):
        return "bool"
    if isinstance(x, (int, np.integer)):
        return "int"
    if isinstance(x, (float, np.floating)):
        return "float"
    if isinstance(x, sympy.Basic):
        return "int" if x.is_integer else "float"
    return None


def _common(args: tuple[Any, ...], op: str) -> DType:
    strong = [a.dtype for a in args if isinstance(a, Value)]
    if not strong:
        raise TraceError(f"{op}: needs at least one Value operand")
    d = strong[0]
    for s in strong[1:]:
        d = promote(d, s, op)
    for a in args:
        if isinstance(a, Value):
            continue
        if isinstance(a, Undefined):
            a._fail()
        kind = _weak_dtype(a)
        if kind is None:
            raise TraceError(f"{op}: cannot combine a {type(a).__name__} ({a!r}) with a {d} Value")
        if kind == "float" and not d.is_float:
            d = dt.f32 if d.bits <= 32 or d is dt.bool_ else dt.f64
        if kind == "bool" and d is not dt.bool_:
            raise TraceError(f"{op}: cannot combine a bool with a {d} Value")
    return d


# ---------------------------------------------------------------------------- the funnel

_ARITH = {"add": ("fadd", "add"), "sub": ("fsub", "sub"), "mul": ("fmul", "mul")}
_CMP = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


def elementwise(op: str, *args: Any) -> Any:
    """Apply elementwise operation ``op`` ('add', 'lt', 'exp', 'fma', ...) to ``args``.

    The single entry point of data-space arithmetic: containers that define
    ``__tylo_elementwise__`` take over; otherwise operands are coerced to a common dtype
    and the operation is emitted. Math functions register themselves in ``OPS``.
    """
    for a in args:
        hook = getattr(type(a), "__tylo_elementwise__", None)
        if hook is not None:
            return hook(op, args)
    if op == "select":
        return _select(*args)
    d = _common(args, op)
    if (
        op in _CMP
        and d.kind in "iu"
        and any(isinstance(a, sympy.Basic) and not a.is_Integer for a in args)
    ):
        # compare runtime integers with index expressions at a width holding both
        d = promote(d, dt.i64 if current().index_bits == 64 else dt.i32, op)
    work = dt.f32 if d.is_float and d.bits == 16 else d
    vals = [
        convert(as_value(a, d), work) if isinstance(a, Value) else as_value(a, work) for a in args
    ]
    rule = OPS.get(op)
    if rule is None:
        raise TraceError(f"unknown elementwise operation {op!r}")
    out = rule(current().builder, work, *vals)
    if work is not d and out.dtype is work:
        out = convert(out, d)
    return out


def _arith(name: str) -> Any:
    fop, iop = _ARITH[name]

    def rule(b: ir.IRBuilder, d: DType, x: Value, y: Value) -> Value:
        if d is dt.bool_:
            raise TraceError(f"{name} on bool values; convert with .to() first")
        return Value(d, getattr(b, fop if d.is_float else iop)(x.use(), y.use()))

    return rule


def _truediv(b: ir.IRBuilder, d: DType, x: Value, y: Value) -> Value:
    if not d.is_float:
        raise TraceError(
            f"/ on {d} values: use // for integer (floor) division, or convert to a float dtype"
        )
    return Value(d, b.fdiv(x.use(), y.use()))  # div.rn: IEEE round-to-nearest


def _int_only(name: str, d: DType) -> None:
    if d.is_float or d is dt.bool_:
        raise TraceError(f"{name} needs integer values, got {d}")


def _static_zero_divisor(name: str, d: DType, y: Value) -> None:
    """An integer division by a divisor known to be zero has no defined result on the GPU
    (PTX ISA div/rem: unspecified); Python would raise ZeroDivisionError."""
    if isinstance(y.ir, ir.Constant) and y.ir.constant == 0:
        raise TraceError(f"integer division by zero: {name} of a {d} value by 0")


def _floordiv(b: ir.IRBuilder, d: DType, x: Value, y: Value) -> Value:
    _int_only("//", d)
    _static_zero_divisor("//", d, y)
    if d.kind == "u":
        return Value(d, b.udiv(x.use(), y.use()))
    q, r = b.sdiv(x.use(), y.use()), b.srem(x.use(), y.use())
    zero = ir_type(d)(0)
    # floor: subtract one when the remainder is non-zero and its sign differs from y's
    fix = b.and_(b.icmp_signed("!=", r, zero), b.icmp_signed("<", b.xor(r, y.use()), zero))
    return Value(d, b.sub(q, b.zext(fix, ir_type(d))))


def _mod(b: ir.IRBuilder, d: DType, x: Value, y: Value) -> Value:
    _int_only("%", d)
    _static_zero_divisor("%", d, y)
    if d.kind == "u":
        return Value(d, b.urem(x.use(), y.use()))
    r = b.srem(x.use(), y.use())
    zero = ir_type(d)(0)
    fix = b.and_(b.icmp_signed("!=", r, zero), b.icmp_signed("<", b.xor(r, y.use()), zero))
    return Value(d, b.select(fix, b.add(r, y.use()), r))


def _neg(b: ir.IRBuilder, d: DType, x: Value) -> Value:
    if d.is_float:  # no `fneg` in the LLVM 7 dialect: -0.0 - x
        return Value(d, b.fsub(ir_type(d)(-0.0), x.use()))
    _int_only("unary -", d)
    return Value(d, b.sub(ir_type(d)(0), x.use()))


def _bitwise(name: str) -> Any:
    def rule(b: ir.IRBuilder, d: DType, x: Value, y: Value) -> Value:
        if d.is_float:
            raise TraceError(f"{name} needs integer or bool values, got {d}")
        return Value(d, getattr(b, name + ("_" if name in ("and", "or") else ""))(x.use(), y.use()))

    return rule


def _shift(left: bool) -> Any:
    def rule(b: ir.IRBuilder, d: DType, x: Value, y: Value) -> Value:
        _int_only("<<" if left else ">>", d)
        if left:
            return Value(d, b.shl(x.use(), y.use()))
        return Value(d, b.ashr(x.use(), y.use()) if d.kind == "i" else b.lshr(x.use(), y.use()))

    return rule


def _invert(b: ir.IRBuilder, d: DType, x: Value) -> Value:
    if d.is_float:
        raise TraceError(f"~ needs integer or bool values, got {d}")
    return Value(d, b.not_(x.use()))


def _compare(name: str) -> Any:
    sym = _CMP[name]

    def rule(b: ir.IRBuilder, d: DType, x: Value, y: Value) -> Value:
        if d.is_float:
            # ordered comparisons (false with NaN), except != which is true with NaN
            fn = b.fcmp_unordered if sym == "!=" else b.fcmp_ordered
            return Value(dt.bool_, fn(sym, x.use(), y.use()))
        if d.kind == "u" or d is dt.bool_:
            return Value(dt.bool_, b.icmp_unsigned(sym, x.use(), y.use()))
        return Value(dt.bool_, b.icmp_signed(sym, x.use(), y.use()))

    return rule


def _select(cond: Any, a: Any, b_: Any) -> Any:
    from tylo.kernel import facts

    if not isinstance(cond, Value):
        if isinstance(cond, sympy.Basic) and not is_relation(cond):
            raise TraceError(f"where: the condition {cond} is not a relation or a bool")
        decided = facts.decide(cond) if isinstance(cond, sympy.Basic) else bool(cond)
        if decided is not None:
            return a if decided else b_
    c = as_value(cond, dt.bool_)
    if c.dtype is not dt.bool_:
        raise TraceError(f"where: the condition must be a bool Value, got {c.dtype}")
    if not isinstance(a, Value) and not isinstance(b_, Value):
        a = as_value(a)
    d = _common((a, b_), "where")
    x, y = as_value(a, d), as_value(b_, d)
    x, y = convert(x, d), convert(y, d)
    return Value(d, current().builder.select(c.use(), x.use(), y.use()))


OPS: dict[str, Any] = {
    "add": _arith("add"),
    "sub": _arith("sub"),
    "mul": _arith("mul"),
    "truediv": _truediv,
    "floordiv": _floordiv,
    "mod": _mod,
    "neg": _neg,
    "and": _bitwise("and"),
    "or": _bitwise("or"),
    "xor": _bitwise("xor"),
    "shl": _shift(True),
    "shr": _shift(False),
    "invert": _invert,
    **{name: _compare(name) for name in _CMP},
}


_values._FUNNEL[:] = [elementwise]  # Value's operators call the funnel (see values.py)
