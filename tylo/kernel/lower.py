"""Lowering of symbolic index arithmetic (sympy) to NVVM IR integers.

Index space is symbolic: offsets, coordinates and thread/loop indices are sympy expressions
until they are used (an address, a dynamic comparison, a conversion to a data value). This
module turns such an expression into IR, with these rules:

- **Sharing.** Every lowered sub-expression is cached in the current region
  (:class:`tylo.kernel.context.Scope`); expressions over kernel parameters and special
  registers only are emitted once in the entry block, which dominates every use.
- **Width.** Index arithmetic is 64-bit by default (``index_bits``), so no product of
  runtime extents and strides can overflow. A sub-expression whose value range is known
  statically to fit in 32 bits (thread indices, lane and warp ids, their tile offsets) is
  computed in 32 bits and widened once, which keeps PTX index math lean. Addition and
  multiplication are exact modulo 2**n, so a narrow result may come from wider
  operands by truncation; divisions, remainders, minima and comparisons are computed at a
  width where their operands fit.
- **Division.** ``floor(a/b)`` and ``Mod(a, b)`` of non-negative values become unsigned
  ``udiv``/``urem``, or shifts and masks for powers of two; for values whose sign is not
  known, signed division is corrected to floor semantics (Python's ``//`` and ``%``).
- Only targeted rewrites: sympy's general ``simplify`` is never called.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llvmlite import ir

from tylo.kernel import facts
from tylo.kernel.context import TraceContext
from tylo.kernel.errors import TraceError
from tylo.kernel.freesyms import free_symbols
from tylo.kernel.minmax import relation
from tylo.layouts._lazy import sympy

__all__ = ["bounds", "is_nonnegative", "lower_bool", "lower_int", "register_lowering"]

_I1 = ir.IntType(1)
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
Bounds = tuple[int | None, int | None]
LoweringRule = Callable[[TraceContext, ir.IRBuilder, Any], ir.Value]  # (.., sympy expression)
_RULES: dict[str, LoweringRule] = {}


def register_lowering(function_name: str, rule: LoweringRule) -> None:
    """Lower applications of the sympy function named ``function_name`` with ``rule``
    (for functions defined elsewhere, e.g. the bitwise operations of a swizzle). The rule
    receives the context, the builder to emit with, and the expression; it should lower
    operands with :func:`lower_int`."""
    _RULES[function_name] = rule


# ---------------------------------------------------------------------------- bounds


def _add_b(a: Bounds, b: Bounds) -> Bounds:
    lo = None if a[0] is None or b[0] is None else a[0] + b[0]
    hi = None if a[1] is None or b[1] is None else a[1] + b[1]
    return lo, hi


def _mul_b(a: Bounds, b: Bounds) -> Bounds:
    if None in a or None in b:
        # keep the sign knowledge when both are non-negative
        if a[0] is not None and a[0] >= 0 and b[0] is not None and b[0] >= 0:
            return a[0] * b[0], None
        return None, None
    prods = [x * y for x in a for y in b]  # type: ignore[operator]
    return min(prods), max(prods)


def bounds(ctx: TraceContext, expr: Any) -> Bounds:
    """Static bounds ``(lo, hi)`` of an integer expression (None where unbounded)."""
    if isinstance(expr, int):
        return expr, expr
    hit = ctx.bounds_cache.get(expr)
    if hit is not None:
        return hit
    result = _bounds(ctx, expr)
    ctx.bounds_cache[expr] = result
    return result


def _bounds(ctx: TraceContext, e: sympy.Basic) -> Bounds:
    if e.is_Integer:
        return int(e), int(e)
    if e.is_Symbol:
        known = ctx.symbol_bounds.get(e)
        if known is not None:
            return known
        return facts.symbol_bounds(e, lambda u: bounds(ctx, u)[1], ctx.int_max)
    if e.is_Add:
        acc: Bounds = (0, 0)
        for a in e.args:
            acc = _add_b(acc, bounds(ctx, a))
        return acc
    if e.is_Mul:
        acc = (1, 1)
        for a in e.args:
            if not (a.is_Integer or _is_integer(a)):
                return None, None
            acc = _mul_b(acc, bounds(ctx, a))
        return acc
    if e.is_Pow and e.exp.is_Integer and int(e.exp) > 0:
        acc = (1, 1)
        for _ in range(int(e.exp)):
            acc = _mul_b(acc, bounds(ctx, e.base))
        return acc
    if isinstance(e, sympy.Mod):
        a, m = e.args
        bm = bounds(ctx, m)
        if bm[0] is not None and bm[0] > 0:
            ba = bounds(ctx, a)
            hi = bm[1] - 1 if bm[1] is not None else None
            if ba[0] is not None and ba[0] >= 0 and ba[1] is not None:
                hi = ba[1] if hi is None else min(hi, ba[1])
            return 0, hi
        return None, None
    if isinstance(e, (sympy.floor, sympy.ceiling)):
        num, den = _fraction(e.args[0])
        bn, bd = bounds(ctx, num), bounds(ctx, den)
        if bd[0] is not None and bd[0] > 0 and bd[0] == bd[1] and None not in bn:
            d = bd[0]
            if isinstance(e, sympy.floor):
                return bn[0] // d, bn[1] // d  # type: ignore[operator]
            return -(-bn[0] // d), -(-bn[1] // d)  # type: ignore[operator]
        if bd[0] is not None and bd[0] > 0 and bn[0] is not None and bn[0] >= 0:
            lo = 0
            hi = None if bn[1] is None else -(-bn[1] // bd[0])
            return lo, hi
        return None, None
    if isinstance(e, (sympy.Min, sympy.Max)):
        bs = [bounds(ctx, a) for a in e.args]
        pick = min if isinstance(e, sympy.Min) else max
        los = [b[0] for b in bs]
        his = [b[1] for b in bs]
        if isinstance(e, sympy.Min):
            lo = None if None in los else pick(los)  # type: ignore[type-var]
            hi_known = [h for h in his if h is not None]
            hi = min(hi_known) if hi_known else None
        else:
            hi = None if None in his else pick(his)  # type: ignore[type-var]
            lo_known = [x for x in los if x is not None]
            lo = max(lo_known) if lo_known else None
        return lo, hi
    if e.is_nonnegative:
        return 0, None
    return None, None


def _is_integer(e: sympy.Basic) -> bool:
    """``e.is_integer is True``, answered from the structure where it can be: sums,
    products, minima and maxima of integers are integers, so is ``Mod(p, q)`` of integers
    with ``q`` non-zero, and ``floor``/``ceiling`` of a rational combination (sympy's own
    rules say the same). Asking sympy's assumption system instead about a new expression
    such as ``Min(8, Max(0, k - 8*Mod(t, 8)))`` costs milliseconds."""
    if e.is_Integer:
        return True
    if e.is_Symbol:
        return e.is_integer is True
    if e.is_Add or e.is_Mul or isinstance(e, (sympy.Min, sympy.Max)):
        if all(_is_integer(a) for a in e.args):
            return True
    elif isinstance(e, sympy.Mod):
        p, q = e.args
        if _is_integer(p) and (q.is_Integer and q != 0 or q.is_Symbol and q.is_positive):
            return True
    elif isinstance(e, (sympy.floor, sympy.ceiling)) and _is_rational(e.args[0]):
        return True
    return e.is_integer is True


def _is_rational(e: sympy.Basic) -> bool:
    """Whether ``e`` is a sum or product of rationals and integer expressions."""
    if e.is_Rational:
        return True
    if e.is_Add or e.is_Mul:
        return all(_is_rational(a) for a in e.args)
    return _is_integer(e)


def is_nonnegative(ctx: TraceContext, expr: Any) -> bool:
    """Whether ``expr >= 0`` is known (static bounds, symbol facts, or the facts in force)."""
    lo = bounds(ctx, expr)[0]
    if lo is not None and lo >= 0:
        return True
    if isinstance(expr, sympy.Basic):
        if expr.is_nonnegative:
            return True
        return facts.decide(relation(sympy.Ge, expr, 0)) is True
    return False


def _natural_bits(ctx: TraceContext, expr: Any) -> int:
    if ctx.index_bits == 32:
        return 32
    lo, hi = bounds(ctx, expr)
    if lo is not None and hi is not None and lo >= _INT32_MIN and hi <= _INT32_MAX:
        return 32
    return ctx.index_bits


# ---------------------------------------------------------------------------- lowering


def lower_int(ctx: TraceContext, expr: Any, bits: int | None = None) -> ir.Value:
    """Lower integer expression ``expr`` to an IR integer of ``bits`` (default: the
    kernel's index width), reusing values already lowered in an enclosing region."""
    bits = bits or ctx.index_bits
    e = sympy.sympify(expr)
    value = _lower(ctx, e)
    return _resize(ctx, value, bits, e)


def lower_bool(ctx: TraceContext, expr: Any) -> ir.Value:
    """Lower a sympy relational or boolean to an IR ``i1``."""
    e = sympy.sympify(expr)
    if e is sympy.true:
        return _I1(1)
    if e is sympy.false:
        return _I1(0)
    hit = ctx.scope.cached(("bool", e))
    if hit is not None:
        return hit
    b = _builder_for(ctx, e)
    if isinstance(e, sympy.core.relational.Relational):
        ops = {"<": "<", "<=": "<=", ">": ">", ">=": ">=", "==": "==", "!=": "!="}
        op = ops.get(e.rel_op)
        if op is None:
            raise TraceError(f"cannot lower the relation {e} (operator {e.rel_op})")
        lhs, rhs = e.lhs, e.rhs
        bits = max(_natural_bits(ctx, lhs), _natural_bits(ctx, rhs))
        a = _resize(ctx, _lower(ctx, lhs), bits, lhs)
        c = _resize(ctx, _lower(ctx, rhs), bits, rhs)
        value = b.icmp_signed(op, a, c)
    elif isinstance(e, sympy.And):
        parts = [lower_bool(ctx, a) for a in e.args]
        value = parts[0]
        for p in parts[1:]:
            value = b.and_(value, p)
    elif isinstance(e, sympy.Or):
        parts = [lower_bool(ctx, a) for a in e.args]
        value = parts[0]
        for p in parts[1:]:
            value = b.or_(value, p)
    elif isinstance(e, sympy.Not):
        value = b.not_(lower_bool(ctx, e.args[0]))
    else:
        raise TraceError(f"cannot use {e} as a condition: it is not a relation or a boolean")
    _cache_for(ctx, e)[("bool", e)] = value
    return value


def _builder_for(ctx: TraceContext, e: sympy.Basic) -> ir.IRBuilder:
    if free_symbols(e) <= ctx.prologue_symbols:
        return ctx.prologue
    return ctx.builder


def _cache_for(ctx: TraceContext, e: sympy.Basic) -> dict[Any, ir.Value]:
    if free_symbols(e) <= ctx.prologue_symbols:
        return ctx.root.cache
    return ctx.scope.cache


def _const(value: int, bits: int) -> ir.Constant:
    # a constant outside both the signed and the unsigned range of its width would be
    # reduced modulo 2**bits: another number, silently
    if not -(1 << (bits - 1)) <= value < (1 << bits):
        raise TraceError(
            f"the integer {value} does not fit the {bits}-bit index arithmetic it is used "
            "in; it would wrap to another number"
        )
    return ir.IntType(bits)(value & ((1 << bits) - 1))


def _resize(ctx: TraceContext, v: ir.Value, bits: int, e: sympy.Basic) -> ir.Value:
    """``v`` (the value of ``e``) at ``bits``: sign- or zero-extended (by ``e``'s known sign)
    or truncated; emitted next to ``e``'s value (the entry block for parameter-only
    expressions) and cached."""
    have = v.type.width
    if have == bits:
        return v
    if e.is_Integer:
        return _const(int(e), bits)
    key = ("resize", e, bits)
    hit = ctx.scope.cached(key)
    if hit is not None:
        return hit
    b = _builder_for(ctx, e)
    if have > bits:
        out = b.trunc(v, ir.IntType(bits))
    elif is_nonnegative(ctx, e):
        out = b.zext(v, ir.IntType(bits))
    else:
        out = b.sext(v, ir.IntType(bits))
    _cache_for(ctx, e)[key] = out
    return out


def _lower(ctx: TraceContext, e: sympy.Basic) -> ir.Value:
    """``e`` at its natural width (32 bits when its range fits, else the index width)."""
    if e.is_Integer:
        value = int(e)
        bits = 32 if _INT32_MIN <= value <= _INT32_MAX or ctx.index_bits == 32 else 64
        return _const(value, bits)
    hit = ctx.scope.cached(e)
    if hit is not None:
        return hit
    if e.is_Symbol:
        v = ctx.lookup(e)
        if v is None:
            raise TraceError(
                f"the index symbol {e} has no value here: a tylo.range loop index (or a value "
                "derived from data inside a loop or branch) was used outside its loop or branch"
            )
        return v
    b = _builder_for(ctx, e)
    bits = _natural_bits(ctx, e)
    value = _emit(ctx, b, e, bits)
    _cache_for(ctx, e)[e] = value
    return value


def _operand(ctx: TraceContext, b: ir.IRBuilder, e: sympy.Basic, bits: int) -> ir.Value:
    return _resize(ctx, _lower(ctx, e), bits, e)


def _emit(ctx: TraceContext, b: ir.IRBuilder, e: sympy.Basic, bits: int) -> ir.Value:
    if e.is_Add:
        return _emit_add(ctx, b, e, bits)
    if e.is_Mul:
        return _emit_mul(ctx, b, e, bits)
    if e.is_Pow:
        if not (e.exp.is_Integer and int(e.exp) > 0):
            raise TraceError(f"index expression {e} is not an integer (power {e.exp})")
        base = _operand(ctx, b, e.base, bits)
        out = base
        for _ in range(int(e.exp) - 1):
            out = b.mul(out, base)
        return out
    if isinstance(e, sympy.floor):
        return _emit_floor_div(ctx, b, e.args[0], bits)
    if isinstance(e, sympy.ceiling):
        num, den = _fraction(e.args[0])
        # ceil(n/d) == -floor(-n/d)
        inner = _emit_floor_div(ctx, b, -num / den, bits)
        return b.neg(inner)
    if isinstance(e, sympy.Mod):
        return _emit_mod(ctx, b, e.args[0], e.args[1], bits)
    if isinstance(e, (sympy.Min, sympy.Max)):
        w = max(bits, *(_natural_bits(ctx, a) for a in e.args))
        args = [_operand(ctx, b, a, w) for a in e.args]
        out = args[0]
        op = "<" if isinstance(e, sympy.Min) else ">"
        for a in args[1:]:
            out = b.select(b.icmp_signed(op, out, a), out, a)
        return _trunc(b, out, bits)
    if isinstance(e, sympy.Piecewise):
        return _emit_piecewise(ctx, b, e, bits)
    rule = _RULES.get(type(e).__name__)
    if rule is not None:
        out = rule(ctx, b, e)
        return _trunc(b, out, bits) if out.type.width > bits else out
    if e.is_Rational:
        raise TraceError(f"index expression {e} is not an integer")
    raise TraceError(
        f"cannot lower the index expression {e} ({type(e).__name__}) to IR; index "
        "arithmetic supports +, -, *, integer powers, floor division, Mod, Min, Max"
    )


def _trunc(b: ir.IRBuilder, v: ir.Value, bits: int) -> ir.Value:
    return b.trunc(v, ir.IntType(bits)) if v.type.width > bits else v


def _emit_add(ctx: TraceContext, b: ir.IRBuilder, e: sympy.Basic, bits: int) -> ir.Value:
    const = 0
    pos: list[ir.Value] = []
    neg: list[ir.Value] = []
    for term in e.args:
        if term.is_Integer:
            const += int(term)
            continue
        coeff, _ = term.as_coeff_Mul()
        if coeff.is_Integer and int(coeff) < 0:
            neg.append(_operand(ctx, b, -term, bits))
        else:
            pos.append(_operand(ctx, b, term, bits))
    out: ir.Value | None = None
    for v in pos:
        out = v if out is None else b.add(out, v)
    for v in neg:
        out = b.sub(_const(0, bits) if out is None else out, v)
    if const:
        out = _const(const, bits) if out is None else b.add(out, _const(const, bits))
    return out if out is not None else _const(0, bits)


def _emit_mul(ctx: TraceContext, b: ir.IRBuilder, e: sympy.Basic, bits: int) -> ir.Value:
    coeff, rest = e.as_coeff_Mul()
    if not coeff.is_Integer:
        raise TraceError(
            f"index expression {e} is not an integer (coefficient {coeff}); use floor "
            "division (//) for integer quotients"
        )
    c = int(coeff)
    factors = list(rest.args) if rest.is_Mul else [rest]
    out: ir.Value | None = None
    for f in factors:
        v = _operand(ctx, b, f, bits)
        out = v if out is None else b.mul(out, v)
    assert out is not None
    if c == -1:
        return b.neg(out)
    if c != 1:
        if c > 0 and c & (c - 1) == 0:
            return b.shl(out, _const(c.bit_length() - 1, bits))
        return b.mul(out, _const(c, bits))
    return out


def _fraction(x: sympy.Basic) -> tuple[sympy.Basic, sympy.Basic]:
    num, den = sympy.fraction(sympy.together(x))
    if den.is_negative:
        num, den = -num, -den
    return num, den


def _power_of_two(x: sympy.Basic) -> int | None:
    if x.is_Integer and int(x) > 0 and int(x) & (int(x) - 1) == 0:
        return int(x).bit_length() - 1
    return None


def _positive(ctx: TraceContext, x: sympy.Basic) -> bool:
    lo = bounds(ctx, x)[0]
    return (
        (lo is not None and lo > 0)
        or bool(x.is_positive)
        or (facts.decide(relation(sympy.Gt, x, 0)) is True)
    )


def _emit_floor_div(ctx: TraceContext, b: ir.IRBuilder, x: sympy.Basic, bits: int) -> ir.Value:
    num, den = _fraction(x)
    if den == 1:
        return _operand(ctx, b, num, bits)
    if not _positive(ctx, den):
        raise TraceError(f"floor division {num} // {den}: the divisor is not known to be positive")
    w = max(bits, _natural_bits(ctx, num), _natural_bits(ctx, den))
    n = _operand(ctx, b, num, w)
    shift = _power_of_two(den)
    if is_nonnegative(ctx, num):
        if shift is not None:
            out = b.lshr(n, _const(shift, w))
        else:
            out = b.udiv(n, _operand(ctx, b, den, w))
    elif shift is not None:
        out = b.ashr(n, _const(shift, w))  # arithmetic shift is floor division by 2**k
    else:
        d = _operand(ctx, b, den, w)
        q = b.sdiv(n, d)
        r = b.srem(n, d)
        # floor correction: q - 1 when the remainder is non-zero and n < 0 (d > 0 here)
        fix = b.and_(b.icmp_signed("!=", r, _const(0, w)), b.icmp_signed("<", n, _const(0, w)))
        out = b.sub(q, b.zext(fix, ir.IntType(w)))
    return _trunc(b, out, bits)


def _emit_mod(
    ctx: TraceContext, b: ir.IRBuilder, a: sympy.Basic, m: sympy.Basic, bits: int
) -> ir.Value:
    if not _positive(ctx, m):
        raise TraceError(f"Mod({a}, {m}): the modulus is not known to be positive")
    w = max(bits, _natural_bits(ctx, a), _natural_bits(ctx, m))
    x = _operand(ctx, b, a, w)
    shift = _power_of_two(m)
    if shift is not None:
        out = b.and_(x, _const((1 << shift) - 1, w))  # exact for negative a too
    elif is_nonnegative(ctx, a):
        out = b.urem(x, _operand(ctx, b, m, w))
    else:
        d = _operand(ctx, b, m, w)
        r = b.srem(x, d)
        fix = b.icmp_signed("<", r, _const(0, w))
        out = b.select(fix, b.add(r, d), r)
    return _trunc(b, out, bits)


def _emit_piecewise(ctx: TraceContext, b: ir.IRBuilder, e: sympy.Basic, bits: int) -> ir.Value:
    pieces = list(e.args)
    *init, (last_value, last_cond) = pieces
    if last_cond is not sympy.true:
        raise TraceError(f"Piecewise {e} has no default branch (its last condition must be True)")
    out = _operand(ctx, b, last_value, bits)
    for value, cond in reversed(init):
        out = b.select(lower_bool(ctx, cond), _operand(ctx, b, value, bits), out)
    return out
