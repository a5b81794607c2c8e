"""Math functions on kernel values: ``tylo.exp``, ``sqrt``, ``maximum``, ``fma``, ``where``...

All go through :func:`tylo.kernel.values.elementwise`. Precision, for f32 (16-bit floats
are computed in f32 and rounded back; f64 where noted):

=============  ==========================================  ===============================
function       instruction                                 precision
=============  ==========================================  ===============================
exp2(x)        ``ex2.approx.ftz.f32``                      max 2 ulp (PTX ISA, ex2);
                                                           subnormals flush to zero
exp(x)         ``ex2.approx.ftz.f32`` of ``x*log2(e)``      ~2 ulp + rounding of the
                                                           product (relative error grows
                                                           with abs(x), ~1e-6 for abs(x) < 80)
log2(x)        ``lg2.approx.ftz.f32``                      max abs error 2^-22.6 on [0.5, 2]
log(x)         ``lg2.approx.ftz.f32`` times ``ln(2)``       as log2, times ln 2
sqrt(x)        ``sqrt.rn.f32`` / ``sqrt.rn.f64``           IEEE, correctly rounded
rsqrt(x)       ``rsqrt.approx.ftz.f32`` / ``.f64``         max 2 ulp (f64: ~2^-50)
abs(x)         ``abs.f32`` / ``abs.f64``, ints by select   exact
maximum(a, b)  ``max.f32`` (``llvm.maxnum``); ints select  exact; NaN-ignoring (IEEE maxNum)
minimum(a, b)  ``min.f32`` (``llvm.minnum``); ints select  exact; NaN-ignoring
fma(a, b, c)   ``fma.rn.f32`` / ``fma.rn.f64``             single rounding
where(c, a, b) ``selp`` / branch-free select               exact
=============  ==========================================  ===============================

exp, exp2, log and log2 of f64 values are not provided (they need libdevice); convert to
f32 or use :func:`tylo.ptx` with an instruction of your choice.
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir

from tylo import dtypes as dt
from tylo.constants import LN2, LOG2E
from tylo.dtypes import DType
from tylo.hostmath import HOST_MATH
from tylo.kernel import facts
from tylo.kernel.context import current
from tylo.kernel.errors import TraceError
from tylo.kernel.ops import OPS, elementwise
from tylo.kernel.values import Value, as_value, convert, ir_type
from tylo.layouts._lazy import sympy

__all__ = [
    "abs",
    "exp",
    "exp2",
    "fma",
    "log",
    "log2",
    "maximum",
    "minimum",
    "pack_bf16x2",
    "pack_f16x2",
    "rsqrt",
    "sqrt",
    "where",
]

_LOG2E = LOG2E
_LN2 = LN2
_builtin_abs = abs


def _nvvm(name: str, d: DType, *args: ir.Value) -> ir.Value:
    ctx = current()
    t = ir_type(d)
    fn = ctx.module.intrinsic(name, t, [t] * len(args))
    return ctx.builder.call(fn, list(args))


def _float_only(name: str, d: DType, f64: bool = True) -> None:
    if not d.is_float:
        raise TraceError(f"tylo.{name} needs float values, got {d}; convert with .to(tylo.f32)")
    if d is dt.f64 and not f64:
        raise TraceError(
            f"tylo.{name} of f64 values is not provided (it needs libdevice); convert to f32 "
            "or use tylo.ptx with the instruction you want"
        )


def _unary(
    name: str, f32: str | None, f64: str | None, scale_in: float = 1.0, scale_out: float = 1.0
) -> Any:
    def rule(b: ir.IRBuilder, d: DType, x: Value) -> Value:
        _float_only(name, d, f64 is not None)
        v = x.use()
        if scale_in != 1.0:
            v = b.fmul(v, ir_type(d)(scale_in))
        out = _nvvm(f32 if d is dt.f32 else f64, d, v)  # type: ignore[arg-type]
        if scale_out != 1.0:
            out = b.fmul(out, ir_type(d)(scale_out))
        return Value(d, out)

    return rule


def _abs(b: ir.IRBuilder, d: DType, x: Value) -> Value:
    if d.is_float:
        return Value(
            d, _nvvm("llvm.nvvm.fabs.f" if d is dt.f32 else "llvm.nvvm.fabs.d", d, x.use())
        )
    if d is dt.bool_ or d.kind == "u":
        return x
    zero = ir_type(d)(0)
    neg = b.sub(zero, x.use())
    return Value(d, b.select(b.icmp_signed("<", x.use(), zero), neg, x.use()))


def _minmax(is_max: bool) -> Any:
    def rule(b: ir.IRBuilder, d: DType, x: Value, y: Value) -> Value:
        if d.is_float:
            suffix = "f32" if d is dt.f32 else "f64"
            name = f"llvm.{'maxnum' if is_max else 'minnum'}.{suffix}"
            return Value(d, _nvvm(name, d, x.use(), y.use()))
        if d is dt.bool_:
            op = b.or_ if is_max else b.and_
            return Value(d, op(x.use(), y.use()))
        cmp = b.icmp_signed if d.kind == "i" else b.icmp_unsigned
        c = cmp(">" if is_max else "<", x.use(), y.use())
        return Value(d, b.select(c, x.use(), y.use()))

    return rule


def _fma(b: ir.IRBuilder, d: DType, x: Value, y: Value, z: Value) -> Value:
    if not d.is_float:
        return Value(d, b.add(b.mul(x.use(), y.use()), z.use()))
    name = "llvm.fma.f32" if d is dt.f32 else "llvm.fma.f64"
    return Value(d, _nvvm(name, d, x.use(), y.use(), z.use()))


OPS.update(
    {
        "exp2": _unary("exp2", "llvm.nvvm.ex2.approx.ftz.f", None),
        "exp": _unary("exp", "llvm.nvvm.ex2.approx.ftz.f", None, scale_in=_LOG2E),
        "log2": _unary("log2", "llvm.nvvm.lg2.approx.ftz.f", None),
        "log": _unary("log", "llvm.nvvm.lg2.approx.ftz.f", None, scale_out=_LN2),
        "sqrt": _unary("sqrt", "llvm.sqrt.f32", "llvm.sqrt.f64"),
        "rsqrt": _unary("rsqrt", "llvm.nvvm.rsqrt.approx.ftz.f", "llvm.nvvm.rsqrt.approx.d"),
        "abs": _abs,
        "maximum": _minmax(True),
        "minimum": _minmax(False),
        "fma": _fma,
    }
)


def _has_value(args: tuple[Any, ...]) -> bool:
    return any(isinstance(a, Value) or hasattr(type(a), "__tylo_elementwise__") for a in args)


_PY_MATH = HOST_MATH


def _math(name: str, x: Any) -> Any:
    if _has_value((x,)):
        return elementwise(name, x)
    if isinstance(x, sympy.Basic) and not x.is_number:
        raise TraceError(
            f"tylo.{name} of the index expression {x}: convert it to a value "
            "first, e.g. tylo.value(expr).to(tylo.f32)"
        )
    return _PY_MATH[name](float(x))


def exp(x: Any) -> Any:
    """e**x (``ex2.approx.ftz.f32`` of ``x*log2(e)``; see the module table)."""
    return _math("exp", x)


def exp2(x: Any) -> Any:
    """2**x (``ex2.approx.ftz.f32``)."""
    return _math("exp2", x)


def log(x: Any) -> Any:
    """Natural logarithm (``lg2.approx.ftz.f32`` times ln 2)."""
    return _math("log", x)


def log2(x: Any) -> Any:
    """Base-2 logarithm (``lg2.approx.ftz.f32``)."""
    return _math("log2", x)


def sqrt(x: Any) -> Any:
    """Square root, correctly rounded (``sqrt.rn``)."""
    return _math("sqrt", x)


def rsqrt(x: Any) -> Any:
    """1/sqrt(x) (``rsqrt.approx.ftz``)."""
    return _math("rsqrt", x)


def abs(x: Any) -> Any:  # the tylo spelling of abs
    """Absolute value (also of index expressions, which stay symbolic)."""
    if _has_value((x,)):
        return elementwise("abs", x)
    return sympy.Abs(x) if isinstance(x, sympy.Basic) else _builtin_abs(x)


def maximum(a: Any, b: Any) -> Any:
    """Elementwise maximum; of two index expressions, the symbolic ``Max``."""
    if _has_value((a, b)):
        return elementwise("maximum", a, b)
    if isinstance(a, sympy.Basic) or isinstance(b, sympy.Basic):
        return facts.maximum(a, b)
    return max(a, b)


def minimum(a: Any, b: Any) -> Any:
    """Elementwise minimum; of two index expressions, the symbolic ``Min``."""
    if _has_value((a, b)):
        return elementwise("minimum", a, b)
    if isinstance(a, sympy.Basic) or isinstance(b, sympy.Basic):
        return facts.minimum(a, b)
    return min(a, b)


def fma(a: Any, b: Any, c: Any) -> Any:
    """a*b + c with a single rounding (``fma.rn``)."""
    if not _has_value((a, b, c)):
        return a * b + c
    return elementwise("fma", a, b, c)


def where(cond: Any, a: Any, b: Any) -> Any:
    """``a`` where ``cond`` holds, else ``b``, without branching (a select). A static
    condition (a Python bool, or a relation the facts settle) just picks one operand."""
    return elementwise("select", cond, a, b)


def _pack2(instruction: str, lo: Any, hi: Any) -> Value:
    from tylo.backend.inline_ptx import inline_asm

    ctx = current()
    x = convert(as_value(lo, dt.f32), dt.f32)
    y = convert(as_value(hi, dt.f32), dt.f32)
    # PTX ISA cvt: "d = {cvt(a) in the upper half, cvt(b) in the lower half}"
    (r,) = inline_asm(
        ctx.builder, f"{instruction} $0, $1, $2;", [ir.IntType(32)], [y.use(), x.use()]
    )
    return Value(dt.u32, r)


def pack_bf16x2(lo: Any, hi: Any) -> Value:
    """Round two f32 values to bf16 (nearest-even) and pack them in a u32, ``lo`` in bits
    0-15 and ``hi`` in bits 16-31 (``cvt.rn.bf16x2.f32``, sm_80+): the register layout
    of a bf16x2 MMA operand or a 4-byte bf16 pair in memory."""
    return _pack2("cvt.rn.bf16x2.f32", lo, hi)


def pack_f16x2(lo: Any, hi: Any) -> Value:
    """As :func:`pack_bf16x2` for f16 (``cvt.rn.f16x2.f32``)."""
    return _pack2("cvt.rn.f16x2.f32", lo, hi)
