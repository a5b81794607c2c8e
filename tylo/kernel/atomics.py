"""Atomic read-modify-write on one element (or one pair) of global or shared memory.

``tylo.atomic_add(t, i, v)`` adds ``v`` to element ``i`` of the tensor ``t`` (a pointer
parameter, a :func:`~tylo.kernel.memory.view`, or shared memory) atomically and returns
the old value. ``atomic_min``, ``atomic_max``, ``atomic_exch`` and ``atomic_cas(t, i,
compare, v)`` follow. The PTX is ``atom`` (PTX ISA 9.7.13.5)::

    atom.{sem}.{scope}.{space}.{op}.{type}  d, [a], b;

with ``order=`` giving ``{sem}`` ("relaxed" by default, "acquire", "release",
"acq_rel") and ``scope=`` giving ``{scope}`` ("gpu" by default, "cta", "cluster", "sys");
both need sm_70+, below every target tylo compiles for, except "cluster" (thread block
clusters), which needs sm_90+. ``result=False`` (add, min, max) drops the old value and
emits ``red`` (PTX ISA 9.7.13.6), a fire-and-forget reduction (SASS ``RED``) that
returns None; ``red`` takes only relaxed or release ordering.

**Pairs.** On f16 or bf16 memory, ``atomic_add(t, i, (a, b))`` adds ``a`` to the element
at the offset ``o`` of ``i`` and ``b`` to the one at ``o + 1`` (the order of
``t.store(i, (a, b))``) with one packed instruction, and returns the two old elements as
a tuple. The pair is one 4-byte word: ``o`` must be provably even and the base 4-byte
aligned (checked like a vector access). Each half is atomic on its own; the pair is not
one atomic access (PTX ISA 9.7.13.5, "atom with packed type"). An index computed from
data (``2 * bins[i]``) is a value whose parity tylo cannot see; view the memory as pairs,
``tylo.view(t, Layout((n, 2), (2, 1)))`` at ``(bins[i], 0)``, so the offset is ``2 * k``.
SASS: ``ATOMG.E.ADD.F16x2.RN`` (``BF16x2``; ``RED``/``REDG`` without a result) in global
memory, one instruction, where a single f16 add becomes a compare-and-swap loop
(``ATOMG.E.CAS``); in shared memory ptxas builds a loop around ``ATOMS.CAST.SPIN``.

Types (PTX ISA 9.7.13.5; what ptxas 13.0 accepts was checked for sm_80 and sm_90a)::

    op         elements          PTX                                         targets
    add        u32 i32 u64 i64   atom.add.{u32,s32,u64} (i64 as .u64)        all
    add        f32 f64           atom.add.{f32,f64}                          all
    add        f16 bf16          atom.add.noftz.{f16,bf16}                   all; bf16 sm_90+
    add pair   f16 bf16          atom.add.noftz.{f16x2,bf16x2}               all; bf16 sm_90+
    min, max   u32 i32 u64 i64   atom.{min,max}.{u32,s32,u64,s64}            all
    min, max   f32 f64           one integer atom chosen by the sign (below) all
    min, max   f16 bf16 pair     atom.global.{min,max}.noftz.v2.{f16,bf16}   sm_90+, global
    exch, cas  32/64-bit types   atom.{exch,cas}.{b32,b64}                   all

Everything else is refused while tracing, at the user's line: PTX has min and max on
f16 and bf16 only as vectors in global memory on sm_90+ (ptxas: "Vector modifier
required"), so a single f16 element has none; min, max and add on 8- and 16-bit
integers do not exist; pairs of other types are not offered (call once per element).

**Float min and max.** PTX has no ``atom.min``/``atom.max`` on f32 or f64 (ptxas:
"Operation .min requires .u32 or .s32 or .u64 or .s64 or .f16 ..."). tylo reduces them,
exactly, to the integer atomics on the value's bits, one atom per call (tylo emits
no compare-and-swap loop): for max, a value whose sign bit is clear is combined with
``atom.max.s32`` (non-negative floats order like their bits as integers, and every
negative float's bits are a negative integer), and a value whose sign bit is set with
``atom.min.u32`` (negative floats order in reverse of their bits, and every non-negative
float's bits are below 2**31); min is the mirror (``min.s32`` / ``max.u32``); f64 uses
the 64-bit forms. Each is an atomic read-modify-write of the same word, so any
interleaving is exact. The order is IEEE 754 ``totalOrder``: -NaN < -inf < ... < -0.0 <
+0.0 < ... < +inf < +NaN, so ``max(-0.0, +0.0)`` is +0.0, a NaN wins or loses by its sign
bit, and subnormals are kept (no flush, unlike ``atom.add.f32`` on global memory). The
two instructions sit in one asm block under complementary predicates, and each thread
executes one. SASS for an f32 max: ``ATOMG.E.MAX.S32`` and ``ATOMG.E.MIN`` (``RED``/
``REDG`` without a result, ``ATOMS.MAX.S32``/``ATOMS.MIN`` in shared memory); f64:
``ATOMG.E.MAX.S64`` and ``ATOMG.E.MIN.64``, while shared memory has no 64-bit min or max,
so there ptxas turns each into an ``ATOMS.CAST.SPIN.64`` loop, as it does for i64.
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir

from tylo import dtypes as dt
from tylo.backend.inline_ptx import PTXAsm
from tylo.backend.ir import ADDRSPACE_SHARED
from tylo.dtypes import DType
from tylo.kernel import facts
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
# .cluster, .gpu, .sys }; .cluster needs sm_90 (ptxas: "Feature '.cluster scope' requires
# .target sm_90 or higher")
ORDERS = ("relaxed", "acquire", "release", "acq_rel")
SCOPES = ("cta", "cluster", "gpu", "sys")
CLUSTER_MIN_MAJOR = 9
# bf16 add (scalar and bf16x2) and every f16/bf16 min/max need sm_90 (PTX ISA 9.7.13.5,
# target ISA notes)
BF16_MIN_MAJOR = 9
HALF_MINMAX_MIN_MAJOR = 9

_INT = {"u32": "u32", "i32": "s32", "u64": "u64", "i64": "s64"}
# f32/f64 min/max through the integer atomics on the bits: (unsigned, signed) PTX types
_FLOAT_BITS = {"f32": ("u32", "s32", 32), "f64": ("u64", "s64", 64)}
_HALVES = ("f16", "bf16")


def _ptx_suffix(op: str, d: DType) -> str | None:
    """The PTX ``.type`` of a single ``atom.op`` on one ``d`` element, or None where PTX
    has none (f32/f64 min and max are two integer atoms: see the module docstring)."""
    if op == "add":
        if d.name in ("u32", "i32", "u64"):
            return _INT[d.name]
        if d.name == "i64":  # PTX has no atom.add.s64; the sum's bits are the same
            return "u64"
        if d.name in ("f32", "f64"):
            return d.name
        if d.name in _HALVES:  # only the .noftz form exists (sm_70+; bf16 sm_90+)
            return f"noftz.{d.name}"
        return None
    if op in ("min", "max"):
        return _INT.get(d.name)
    if op in ("exch", "cas"):
        return f"b{d.bits}" if d.bits in (32, 64) and d is not dt.bool_ else None
    return None


def _supported(op: str) -> str:
    return {
        "add": "u32, i32, u64, i64, f32, f64, f16, bf16 (sm_90+), and f16 or bf16 pairs",
        "min": "u32, i32, u64, i64, f32, f64, and f16 or bf16 pairs in global memory (sm_90+)",
        "max": "u32, i32, u64, i64, f32, f64, and f16 or bf16 pairs in global memory (sm_90+)",
        "exch": "32- and 64-bit types",
        "cas": "32- and 64-bit types",
    }[op]


def _check(name: str, t: Any, scope: Any, order: Any, result: Any) -> None:
    """The checks every atomic shares: memory operand, scope, order, result flag."""
    if not isinstance(t, Tensor):
        raise TraceError(
            f"{name}: the first argument must be global or shared memory (a pointer "
            f"parameter, a tylo.view or tylo.shared), got {type(t).__name__}"
        )
    if scope not in SCOPES:
        raise TraceError(f"{name}: scope={scope!r} is not one of {', '.join(SCOPES)}")
    if order not in ORDERS:
        raise TraceError(f"{name}: order={order!r} is not one of {', '.join(ORDERS)}")
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
    target = current().target
    if scope == "cluster" and target.major < CLUSTER_MIN_MAJOR:
        raise TraceError(
            f"{name}: scope='cluster' needs sm_90+ (thread block clusters), target is "
            f"{target}; use scope='gpu'"
        )


def _qualifiers(scope: str, order: str) -> str:
    # relaxed.gpu is PTX's default; the PTX stays short when it is meant
    return "" if (order, scope) == ("relaxed", "gpu") else f".{order}.{scope}"


def _atomic(
    op: str,
    t: Any,
    coord: Any,
    operands: list[Any],
    scope: str,
    order: str,
    result: bool = True,
) -> Any:
    name = f"tylo.atomic_{op}"
    _check(name, t, scope, order, result)
    if any(isinstance(v, (tuple, list)) for v in operands):
        return _pair(name, op, t, coord, operands, scope, order, result)
    d = t.dtype
    if op in ("min", "max") and d.name in _FLOAT_BITS:
        return _float_minmax(op, t, coord, operands[0], scope, order, result)
    suffix = _ptx_suffix(op, d)
    if suffix is None:
        hint = "store the data in one of those types"
        if op in ("min", "max") and d.name in _HALVES:
            hint = (
                f"PTX has {op} on {d} only as a vector: pass a pair, {name}(t, i, (a, b)) "
                "with an even offset, in global memory on sm_90+; or store the data as f32"
            )
        raise TraceError(
            f"{name}: PTX has no atom.{op} on {d} elements in {t.space} memory (PTX ISA "
            f"9.7.13.5: {op} takes {_supported(op)}); {hint}"
        )
    ctx = current()
    if d is dt.bf16 and ctx.target.major < BF16_MIN_MAJOR:
        raise TraceError(
            f"{name}: atom.add.noftz.bf16 needs sm_90+, target is {ctx.target}; add in f32 "
            "memory instead"
        )
    values = [_as_element(v, d) for v in operands]
    # checks the offset like a load: static bounds, sign, width, and debug-mode bounds
    addr = t.address(coord)
    quals = _qualifiers(scope, order)
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


def _float_minmax(
    op: str, t: Tensor, coord: Any, value: Any, scope: str, order: str, result: bool
) -> Value | None:
    """f32/f64 min or max as one of two integer atoms chosen by the sign bit of ``value``
    (the module docstring gives the argument); exact in IEEE 754 totalOrder."""
    ctx = current()
    b = ctx.builder
    d = t.dtype
    unsigned, signed, bits = _FLOAT_BITS[d.name]
    v = _as_element(value, d)
    addr = t.address(coord)
    word = ir.IntType(bits)
    # max: non-negative -> max as signed, negative -> min as unsigned; min: the mirror
    neg_op, pos_op = ("min", "max") if op == "max" else ("max", "min")
    quals = _qualifiers(scope, order)
    kind = "atom" if result else "red"
    asm = PTXAsm(f"{kind}.{op}.{d.name}")
    res = asm.output(word) if result else None
    a = asm.input(addr.use())
    x = asm.input(b.bitcast(v.use(), word))
    head = f"{kind}{quals}.{t.space}"
    dst = f"{res}, " if result else ""
    asm.line("{")
    asm.line(".reg .pred %neg;")
    asm.line(f"setp.lt.s{bits} %neg, {x}, 0;")
    asm.line(f"@%neg {head}.{neg_op}.{unsigned} {dst}[{a}], {x};")
    asm.line(f"@!%neg {head}.{pos_op}.{signed} {dst}[{a}], {x};")
    asm.line("}")
    outs = asm.emit(b, side_effects=True, memory=True)
    return Value(d, b.bitcast(outs[0], ir_type(d))) if result else None


def _pair(
    name: str,
    op: str,
    t: Tensor,
    coord: Any,
    operands: list[Any],
    scope: str,
    order: str,
    result: bool,
) -> tuple[Value, Value] | None:
    """``op`` on the two 16-bit elements at offsets ``o, o + 1`` of ``coord``: packed
    ``.f16x2``/``.bf16x2`` for add, ``.v2.f16``/``.v2.bf16`` for min and max."""
    d = t.dtype
    ctx = current()
    if op not in ("add", "min", "max"):
        raise TraceError(
            f"{name}: pairs are for atomic_add, atomic_min and atomic_max (PTX ISA "
            f"9.7.13.5); call {name} once per element"
        )
    pair = list(operands[0])
    if d.name not in _HALVES:
        raise TraceError(
            f"{name}: a pair of values is an f16x2 or bf16x2 operation, but the memory holds "
            f"{d} elements; call {name} once per element"
        )
    if len(pair) != 2:
        raise TraceError(
            f"{name}: a pair takes exactly 2 values (one 4-byte {d}x2 word), got {len(pair)}"
        )
    if op == "add" and d is dt.bf16 and ctx.target.major < BF16_MIN_MAJOR:
        raise TraceError(
            f"{name}: atom.add.noftz.bf16x2 needs sm_90+, target is {ctx.target}; use f16 "
            "pairs or f32 memory"
        )
    if op != "add" and t.addrspace == ADDRSPACE_SHARED:
        raise TraceError(
            f"{name}: PTX has {op} on {d} pairs only in global memory (atom.global."
            f"{op}.noftz.v2.{d}, PTX ISA 9.7.13.5); in shared memory use f32 elements"
        )
    if op != "add" and ctx.target.major < HALF_MINMAX_MIN_MAJOR:
        raise TraceError(
            f"{name}: atom.global.{op}.noftz.v2.{d} needs sm_90+, target is {ctx.target}; "
            "use f32 memory (f32 min and max work on every target)"
        )
    values = [_as_element(v, d) for v in pair]
    addr = _pair_address(name, t, coord)
    b = ctx.builder
    quals = _qualifiers(scope, order)
    kind = "atom" if result else "red"
    asm = PTXAsm(f"{kind}.{op}.{d.name}x2")
    if op == "add":
        lo, hi = (b.zext(v.use(), ir.IntType(32)) for v in values)
        packed = b.or_(lo, b.shl(hi, ir.IntType(32)(16)))
        res = asm.output(ir.IntType(32)) if result else None
        a = asm.input(addr)
        x = asm.input(packed)
        dst = f"{res}, " if result else ""
        asm.line(f"{kind}{quals}.{t.space}.add.noftz.{d}x2 {dst}[{a}], {x};")
        outs = asm.emit(b, side_effects=True, memory=True)
        if not result:
            return None
        word = outs[0]
        halves = (word, b.lshr(word, ir.IntType(32)(16)))
        old = [b.trunc(h, ir.IntType(16)) for h in halves]
    else:
        res2 = [asm.output(ir.IntType(16)) for _ in range(2)] if result else []
        a = asm.input(addr)
        xs = [asm.input(v.use()) for v in values]
        dst = "{" + ", ".join(res2) + "}, " if result else ""
        asm.line(f"{kind}{quals}.global.{op}.noftz.v2.{d} {dst}[{a}], {{{xs[0]}, {xs[1]}}};")
        old = asm.emit(b, side_effects=True, memory=True)
        if not result:
            return None
    return Value(d, old[0]), Value(d, old[1])


def _pair_address(name: str, t: Tensor, coord: Any) -> ir.Value:
    """The address of the 4-byte pair at ``coord`` after checking its bounds (two
    elements) and its alignment (a 4-byte aligned base and a provably even offset)."""
    offset = t.offset(coord)
    t._check_offset(offset, 2, f"[{coord!r}]", "atomic")
    if t.align < 4:
        hint = (
            "allocate with align=4"
            if t.addrspace == ADDRSPACE_SHARED
            else "annotate the parameter tylo.Ptr(align=4)"
        )
        raise TraceError(
            f"{name}: a {t.dtype} pair is one 4-byte word and needs a 4-byte aligned base, "
            f"but only {t.align}-byte alignment is known for {t.name}; {hint}"
        )
    if facts.divides(2, offset) is not True:
        raise TraceError(
            f"{name}: a {t.dtype} pair is one 4-byte word, but tylo cannot prove that the "
            f"element offset {offset} is even; give the facts that make it so (e.g. index "
            "2 * i, or tylo.Int(multiple_of=2) for a runtime index)"
        )
    p = t._pointer(offset)
    width = 32 if t.addrspace == ADDRSPACE_SHARED else 64
    return current().builder.ptrtoint(p, ir.IntType(width))


def atomic_add(
    t: Tensor,
    coord: Any,
    value: Any,
    *,
    scope: str = "gpu",
    order: str = "relaxed",
    result: bool = True,
) -> Any:
    """Atomically ``t[coord] += value``; returns the old element. Defining property: after
    any set of concurrent ``atomic_add`` calls the element holds the old value plus the sum
    of every added value (for floats, in some order), and the returned old values are
    distinct stages of that sum. ``atom.{order}.{scope}.{space}.add.{type}``; with
    ``result=False``, ``red...add`` and None. ``value`` may be a pair ``(a, b)`` on f16 or
    bf16 memory: one ``add.noftz.f16x2``/``.bf16x2`` on the elements at offsets ``o`` and
    ``o + 1`` (``o`` even), each half with the property above; returns a pair."""
    return _atomic("add", t, coord, [value], scope, order, result)


def atomic_min(
    t: Tensor,
    coord: Any,
    value: Any,
    *,
    scope: str = "gpu",
    order: str = "relaxed",
    result: bool = True,
) -> Any:
    """Atomically ``t[coord] = min(t[coord], value)``; returns the old element. After any
    concurrent calls the element is the minimum of its old value and every value given
    (f32/f64: in IEEE 754 totalOrder, so -0.0 < +0.0). ``value`` may be an f16/bf16 pair
    in global memory on sm_90+ (``atom.global.min.noftz.v2.f16``)."""
    return _atomic("min", t, coord, [value], scope, order, result)


def atomic_max(
    t: Tensor,
    coord: Any,
    value: Any,
    *,
    scope: str = "gpu",
    order: str = "relaxed",
    result: bool = True,
) -> Any:
    """Atomically ``t[coord] = max(t[coord], value)``; returns the old element. After any
    concurrent calls the element is the maximum of its old value and every value given
    (f32/f64: in IEEE 754 totalOrder, so -0.0 < +0.0). ``value`` may be an f16/bf16 pair
    in global memory on sm_90+ (``atom.global.max.noftz.v2.f16``)."""
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
