"""Data space: :class:`Value`, a typed IR value with operator overloading.

A :class:`Value` pairs a tylo :class:`~tylo.dtypes.DType` with an llvmlite value. Every
arithmetic, comparison, bitwise and math operation goes through one funnel,
:func:`elementwise`, which coerces operands, applies the promotion rules and emits IR (a
container type that defines ``__tylo_elementwise__(op, args)``, such as a future register
fragment, takes over the whole operation and broadcasts it over its Values).

Operand rules (documented in ``docs/kernels.md``):

- Python scalars and symbolic index expressions are *weakly typed*: they take the dtype
  of the Value they meet (a float scalar meeting an integer Value makes the result f32).
  An int constant must fit the dtype.
- Two Values of different dtypes promote within a kind (f16/bf16 < f32 < f64; narrower
  ints to wider ints of the same signedness, or to a wider signed int); int with float
  gives the float; bool mixes with nothing (convert with ``.to()``).
- ``/`` is float division; ``//`` and ``%`` on ints have Python's floor semantics;
  comparisons give bool Values; ``&``, ``|``, ``^``, ``~`` work on ints and bools.
- f16 and bf16 are stored as i16 bits in IR (the NVVM 7 dialect has no bfloat); arithmetic
  on them is computed in f32 and rounded back to nearest-even.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from typing import Any

import numpy as np
from llvmlite import ir

from tylo import dtypes as dt
from tylo.dtypes import DType
from tylo.kernel.context import current
from tylo.kernel.errors import TraceError, Undefined
from tylo.layouts._lazy import sympy

__all__ = [
    "Value",
    "as_value",
    "constant",
    "convert",
    "elementwise",
    "ir_type",
    "is_dynamic_bool",
    "is_relation",
    "memory_type",
    "to_index",
]

_I1 = ir.IntType(1)
_IR_TYPES: dict[str, ir.Type] = {
    "f64": ir.DoubleType(),
    "f32": ir.FloatType(),
    "f16": ir.IntType(16),
    "bf16": ir.IntType(16),
    "i64": ir.IntType(64),
    "i32": ir.IntType(32),
    "i16": ir.IntType(16),
    "i8": ir.IntType(8),
    "u64": ir.IntType(64),
    "u32": ir.IntType(32),
    "u16": ir.IntType(16),
    "u8": ir.IntType(8),
    "bool": _I1,
}


def ir_type(dtype: DType) -> ir.Type:
    """The IR type of a Value of ``dtype`` in registers (16-bit floats as i16, bool i1)."""
    return _IR_TYPES[dtype.name]


def memory_type(dtype: DType) -> ir.Type:
    """The IR type of ``dtype`` in memory (bool is one byte)."""
    return ir.IntType(8) if dtype is dt.bool_ else _IR_TYPES[dtype.name]


class Value:
    """A runtime value inside a kernel: ``dtype`` plus an IR value.

    Values exist only while tracing. They have no Python truth value: inside a kernel,
    ``if``, ``and``, ``or``, ``not`` and ``x if c else y`` are rewritten to handle them.
    """

    __slots__ = ("dtype", "ir", "scope")
    __hash__ = object.__hash__  # identity: ``==`` builds a comparison Value

    def __init__(self, dtype: DType, value: ir.Value, scope: Any = None) -> None:
        self.dtype = dtype
        self.ir = value
        self.scope = scope if scope is not None else current().scope

    def use(self) -> ir.Value:
        """The IR value, after checking it dominates the current position."""
        if not self.scope.alive:
            raise TraceError(
                f"a {self.dtype} value computed inside {self.scope.describe()} is used after "
                "it ended; values that change in a dynamic loop or branch must be names "
                "assigned before it (they become loop-carried / merged values)"
            )
        return self.ir

    def to(self, dtype: Any) -> Value:
        """This value converted to ``dtype`` (floats round to nearest-even; float to int
        truncates toward zero and saturates; int to bool is ``!= 0``)."""
        return convert(self, dt.dtype_of(dtype))

    def __repr__(self) -> str:
        return f"Value({self.dtype}, {self.ir.type} {self.ir.get_reference()})"

    def __bool__(self) -> bool:
        raise TraceError(
            f"a runtime {self.dtype} value has no Python truth value. In a kernel, `if`, "
            "`and`, `or`, `not` and `x if c else y` handle runtime conditions; this use "
            "(`while`, `assert`, `bool()`, or a helper not decorated with @tylo.inline) "
            "does not. Use tylo.where(c, a, b) for a select"
        )

    def _not_static(self, what: str) -> Any:
        raise TraceError(
            f"a runtime {self.dtype} value cannot be used as a Python {what} (it is only "
            "known on the GPU); static arguments (tylo.Static) are Python values"
        )

    def __index__(self) -> int:
        return self._not_static("int")

    __int__ = __index__

    def __float__(self) -> float:
        return self._not_static("float")

    def __iter__(self) -> Any:
        return self._not_static("iterable")

    # arithmetic
    def __add__(self, o: Any) -> Any:
        return elementwise("add", self, o)

    def __radd__(self, o: Any) -> Any:
        return elementwise("add", o, self)

    def __sub__(self, o: Any) -> Any:
        return elementwise("sub", self, o)

    def __rsub__(self, o: Any) -> Any:
        return elementwise("sub", o, self)

    def __mul__(self, o: Any) -> Any:
        return elementwise("mul", self, o)

    def __rmul__(self, o: Any) -> Any:
        return elementwise("mul", o, self)

    def __truediv__(self, o: Any) -> Any:
        return elementwise("truediv", self, o)

    def __rtruediv__(self, o: Any) -> Any:
        return elementwise("truediv", o, self)

    def __floordiv__(self, o: Any) -> Any:
        return elementwise("floordiv", self, o)

    def __rfloordiv__(self, o: Any) -> Any:
        return elementwise("floordiv", o, self)

    def __mod__(self, o: Any) -> Any:
        return elementwise("mod", self, o)

    def __rmod__(self, o: Any) -> Any:
        return elementwise("mod", o, self)

    def __neg__(self) -> Any:
        return elementwise("neg", self)

    def __pos__(self) -> Any:
        return self

    def __abs__(self) -> Any:
        return elementwise("abs", self)

    # bitwise
    def __and__(self, o: Any) -> Any:
        return elementwise("and", self, o)

    def __rand__(self, o: Any) -> Any:
        return elementwise("and", o, self)

    def __or__(self, o: Any) -> Any:
        return elementwise("or", self, o)

    def __ror__(self, o: Any) -> Any:
        return elementwise("or", o, self)

    def __xor__(self, o: Any) -> Any:
        return elementwise("xor", self, o)

    def __rxor__(self, o: Any) -> Any:
        return elementwise("xor", o, self)

    def __lshift__(self, o: Any) -> Any:
        return elementwise("shl", self, o)

    def __rlshift__(self, o: Any) -> Any:
        return elementwise("shl", o, self)

    def __rshift__(self, o: Any) -> Any:
        return elementwise("shr", self, o)

    def __rrshift__(self, o: Any) -> Any:
        return elementwise("shr", o, self)

    def __invert__(self) -> Any:
        return elementwise("invert", self)

    # comparisons
    def __lt__(self, o: Any) -> Any:
        return elementwise("lt", self, o)

    def __le__(self, o: Any) -> Any:
        return elementwise("le", self, o)

    def __gt__(self, o: Any) -> Any:
        return elementwise("gt", self, o)

    def __ge__(self, o: Any) -> Any:
        return elementwise("ge", self, o)

    def __eq__(self, o: object) -> Any:
        return elementwise("eq", self, o)  # type: ignore[override]

    def __ne__(self, o: object) -> Any:
        return elementwise("ne", self, o)  # type: ignore[override]


# ---------------------------------------------------------------------------- constants


def _bf16_bits(x: float) -> int:
    """Round an f32 to bf16 (nearest-even) and return the 16 bits."""
    (u,) = struct.unpack("<I", struct.pack("<f", np.float32(x)))
    if math.isnan(x):
        return 0x7FC0
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF


def constant(x: Any, dtype: DType) -> Value:
    """A constant Value of ``dtype`` (an int must fit; bools are 0/1)."""
    t = ir_type(dtype)
    if dtype.kind == "b":
        return Value(dtype, _I1(1 if x else 0))
    if dtype.is_float:
        f = float(x)
        if dtype.name == "bf16":
            return Value(dtype, t(_bf16_bits(f)))
        if dtype.name == "f16":
            return Value(dtype, t(int(np.array(f, np.float16).view(np.uint16))))
        return Value(dtype, t(f))
    if isinstance(x, float):
        if not x.is_integer():
            raise TraceError(f"the float constant {x} cannot be used as a {dtype} value")
        x = int(x)
    v = int(x)
    lo = -(1 << (dtype.bits - 1)) if dtype.kind == "i" else 0
    hi = (1 << (dtype.bits - 1)) - 1 if dtype.kind == "i" else (1 << dtype.bits) - 1
    if not lo <= v <= hi:
        raise TraceError(f"the constant {v} does not fit in {dtype} ([{lo}, {hi}])")
    return Value(dtype, t(v & ((1 << dtype.bits) - 1)))


def is_relation(x: Any) -> bool:
    """Whether ``x`` is a sympy relation or boolean (``i < n``, ``And(...)``, ``true``); a
    symbol is not, although sympy's Symbol also derives from Boolean."""
    return isinstance(x, sympy.logic.boolalg.Boolean) and not isinstance(x, sympy.Expr)


def is_dynamic_bool(x: Any) -> bool:
    return isinstance(x, Value) and x.dtype is dt.bool_


def _is_index(x: Any) -> bool:
    return isinstance(x, sympy.Expr) and x.is_integer is not False


def as_value(x: Any, like: DType | None = None) -> Value:
    """``x`` as a Value: Values pass; Python scalars and index expressions become Values
    of ``like`` (default: f32 for floats, the index width for ints, bool for bools and
    relations)."""
    if isinstance(x, Value):
        return x
    if isinstance(x, Undefined):
        x._fail()
    ctx = current()
    if isinstance(x, (bool, np.bool_)) or is_relation(x):
        if isinstance(x, (bool, np.bool_)) or x in (sympy.true, sympy.false):
            v = constant(bool(x), dt.bool_)
        else:
            from tylo.kernel.lower import lower_bool

            v = Value(dt.bool_, lower_bool(ctx, x))
        return v if like is None or like is dt.bool_ else convert(v, like)
    index_dtype = dt.i64 if ctx.index_bits == 64 else dt.i32
    if isinstance(x, (int, np.integer)):
        return constant(int(x), like or index_dtype)
    if isinstance(x, (float, np.floating)):
        return constant(float(x), like or dt.f32)
    if isinstance(x, sympy.Basic):
        if x.is_Integer:
            return constant(int(x), like or index_dtype)
        if x.is_Float or x.is_Rational:
            return constant(float(x), like or dt.f32)
        if not _is_index(x):
            raise TraceError(f"cannot use the symbolic expression {x} as a value")
        from tylo.kernel.lower import lower_int

        v = Value(index_dtype, lower_int(ctx, x))
        return v if like is None else convert(v, like)
    raise TraceError(
        f"cannot use {type(x).__name__} {x!r} as a kernel value (expected a Value, a Python "
        "number, or an index expression)"
    )


def to_index(x: Any, what: str = "index") -> Any:
    """``x`` as an integer index expression: ints and sympy integer expressions pass; an
    integer Value becomes a fresh symbol bound (in the current region) to its value widened
    to the index width, so layouts and comparisons can use data-dependent indices."""
    if isinstance(x, Undefined):
        x._fail()
    if isinstance(x, (bool, np.bool_)):
        raise TraceError(f"{what}: a bool is not an index")
    if isinstance(x, (int, np.integer)):
        return sympy.Integer(int(x))
    if isinstance(x, sympy.Basic):
        if x.is_integer or (x.is_Symbol and x.is_integer is not False):
            return x
        raise TraceError(f"{what}: {x} is not an integer expression")
    if isinstance(x, Value):
        if x.dtype.is_float or x.dtype is dt.bool_:
            raise TraceError(
                f"{what}: a {x.dtype} value is not an index; convert it with .to(tylo.i32) first"
            )
        from tylo.kernel import facts

        ctx = current()
        index_dtype = dt.i64 if ctx.index_bits == 64 else dt.i32
        wide = x if x.dtype is index_dtype else convert(x, index_dtype)
        sym = facts.integer_symbol(ctx.unique("v"), nonnegative=x.dtype.kind == "u")
        ctx.bind(sym, wide.use())
        if x.dtype.kind == "u" or x.dtype.bits < ctx.index_bits:
            lo = 0 if x.dtype.kind == "u" else -(1 << (x.dtype.bits - 1))
            hi = (1 << (x.dtype.bits - (0 if x.dtype.kind == "u" else 1))) - 1
            ctx.symbol_bounds[sym] = (lo, hi)
        return sym
    raise TraceError(f"{what}: cannot use {type(x).__name__} {x!r} as an index")


# ---------------------------------------------------------------------------- conversion


def _cvt_asm(b: ir.IRBuilder, text: str, out: ir.Type, arg: ir.Value) -> ir.Value:
    from tylo.backend.inline_ptx import inline_asm

    return inline_asm(b, text, [out], [arg])[0]


def _to_f32(b: ir.IRBuilder, v: Value) -> ir.Value:
    """A 16-bit float Value's bits widened exactly to f32."""
    if v.dtype.name == "bf16":
        wide = b.shl(b.zext(v.use(), ir.IntType(32)), ir.IntType(32)(16))
        return b.bitcast(wide, ir.FloatType())
    return b.fpext(b.bitcast(v.use(), ir.HalfType()), ir.FloatType())


def _from_f32(b: ir.IRBuilder, x: ir.Value, dtype: DType) -> ir.Value:
    if dtype.name == "bf16":  # PTX ISA cvt: .bf16 destination needs sm_80
        return _cvt_asm(b, "cvt.rn.bf16.f32 $0, $1;", ir.IntType(16), x)
    return b.bitcast(b.fptrunc(x, ir.HalfType()), ir.IntType(16))


def convert(v: Value, to: DType) -> Value:
    """Convert Value ``v`` to dtype ``to`` (see :meth:`Value.to`)."""
    src = v.dtype
    if src is to:
        return v
    b = current().builder
    x = v.use()
    if src.bits == 16 and src.is_float:
        if to.name in ("f16", "bf16"):
            return Value(to, _from_f32(b, _to_f32(b, v), to))
        return convert(Value(dt.f32, _to_f32(b, v)), to)
    if to.bits == 16 and to.is_float:
        f = convert(v, dt.f32).use() if src is not dt.f32 else x
        return Value(to, _from_f32(b, f, to))
    t = ir_type(to)
    if to is dt.bool_:
        if src.is_float:
            return Value(to, b.fcmp_unordered("!=", x, ir_type(src)(0.0)))
        return Value(to, b.icmp_unsigned("!=", x, ir_type(src)(0)))
    if src is dt.bool_:
        return Value(to, b.uitofp(x, t) if to.is_float else b.zext(x, t))
    if src.is_float and to.is_float:
        return Value(to, b.fpext(x, t) if to.bits > src.bits else b.fptrunc(x, t))
    if src.is_float:
        return Value(to, b.fptosi(x, t) if to.kind == "i" else b.fptoui(x, t))
    if to.is_float:
        return Value(to, b.sitofp(x, t) if src.kind == "i" else b.uitofp(x, t))
    if to.bits == src.bits:
        return Value(to, x)
    if to.bits < src.bits:
        return Value(to, b.trunc(x, t))
    return Value(to, b.sext(x, t) if src.kind == "i" else b.zext(x, t))


# The funnel lives in tylo.kernel.ops, which builds on Value and so sits above this module;
# it installs itself here when imported (tylo.kernel imports it), so Value's operators reach
# it without this module importing ops.
_FUNNEL: list[Callable[..., Any]] = []


def elementwise(op: str, *args: Any) -> Any:
    """Apply elementwise ``op`` to ``args`` (the funnel, :func:`tylo.kernel.ops.elementwise`)."""
    if not _FUNNEL:
        raise TraceError("tylo.kernel.ops is not loaded: import tylo.kernel first")
    return _FUNNEL[0](op, *args)
