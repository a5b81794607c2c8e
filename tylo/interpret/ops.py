"""The IR instructions as numpy operations over lanes.

Each function here is pure: it takes per-lane operand arrays (or uniform numpy scalars)
and returns the result, with LLVM's (and, where LLVM leaves it open, PTX's) semantics:
integers wrap, shifts by the width or more give 0 (``ashr``: the sign), signed division
truncates toward zero, float-to-int conversions saturate with NaN giving 0 (``cvt.rzi``),
floats round as their numpy dtype does (IEEE, nearest even).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tylo.interpret.errors import UnsupportedOperation

__all__ = ["BINARY", "cast", "fcmp", "icmp", "unsigned"]

_UNSIGNED = {np.dtype(np.int8): np.uint8, np.dtype(np.int16): np.uint16,
             np.dtype(np.int32): np.uint32, np.dtype(np.int64): np.uint64,
             np.dtype(np.bool_): np.bool_}  # fmt: skip


def unsigned(x: Any) -> Any:
    """The same bits as an unsigned integer array."""
    x = np.asarray(x)
    if x.dtype.kind in "uf":
        return x
    return x.view(_UNSIGNED[x.dtype])


def _bits(x: Any) -> int:
    return np.asarray(x).dtype.itemsize * 8


def _shl(a: Any, b: Any) -> Any:
    w = _bits(a)
    s = unsigned(b).astype(np.uint64)
    return np.where(s >= w, 0, a << np.minimum(s, w - 1).astype(np.asarray(a).dtype)).astype(
        np.asarray(a).dtype
    )


def _lshr(a: Any, b: Any) -> Any:
    w = _bits(a)
    ua = unsigned(a)
    s = unsigned(b).astype(np.uint64)
    r = np.where(s >= w, 0, ua >> np.minimum(s, w - 1).astype(ua.dtype)).astype(ua.dtype)
    return r.view(np.asarray(a).dtype)


def _ashr(a: Any, b: Any) -> Any:
    w = _bits(a)
    s = np.minimum(unsigned(b).astype(np.uint64), w - 1).astype(np.asarray(a).dtype)
    return a >> s


def _sdiv(a: Any, b: Any) -> Any:
    a, b = np.asarray(a), np.asarray(b)
    zero = b == 0
    bb = np.where(zero, 1, b).astype(b.dtype)
    q = np.floor_divide(a, bb)
    fix = (np.remainder(a, bb) != 0) & ((a < 0) != (bb < 0))
    q = (q + fix).astype(a.dtype)
    return np.where(zero, -1, q).astype(a.dtype)


def _srem(a: Any, b: Any) -> Any:
    a, b = np.asarray(a), np.asarray(b)
    zero = b == 0
    bb = np.where(zero, 1, b).astype(b.dtype)
    r = np.fmod(a, bb).astype(a.dtype)
    return np.where(zero, a, r).astype(a.dtype)


def _udiv(a: Any, b: Any) -> Any:
    ua, ub = unsigned(a), unsigned(b)
    zero = ub == 0
    q = np.floor_divide(ua, np.where(zero, 1, ub).astype(ub.dtype))
    return np.where(zero, ~ub.dtype.type(0), q).astype(ua.dtype).view(np.asarray(a).dtype)


def _urem(a: Any, b: Any) -> Any:
    ua, ub = unsigned(a), unsigned(b)
    zero = ub == 0
    r = np.remainder(ua, np.where(zero, 1, ub).astype(ub.dtype))
    return np.where(zero, ua, r).astype(ua.dtype).view(np.asarray(a).dtype)


def _same(f: Any) -> Any:
    def g(a: Any, b: Any) -> Any:
        r = f(a, b)
        return r.astype(np.result_type(a), copy=False) if hasattr(r, "astype") else r

    return g


BINARY = {
    "add": _same(np.add), "sub": _same(np.subtract), "mul": _same(np.multiply),
    "and": _same(np.bitwise_and), "or": _same(np.bitwise_or), "xor": _same(np.bitwise_xor),
    "shl": _shl, "lshr": _lshr, "ashr": _ashr, "sdiv": _sdiv, "srem": _srem,
    "udiv": _udiv, "urem": _urem,
    "fadd": np.add, "fsub": np.subtract, "fmul": np.multiply, "fdiv": np.divide,
    "frem": np.fmod,
}  # fmt: skip

_ICMP = {"eq": np.equal, "ne": np.not_equal, "<": np.less, "<=": np.less_equal,
         ">": np.greater, ">=": np.greater_equal, "slt": np.less, "sle": np.less_equal,
         "sgt": np.greater, "sge": np.greater_equal, "ult": np.less, "ule": np.less_equal,
         "ugt": np.greater, "uge": np.greater_equal, "==": np.equal, "!=": np.not_equal,
         "lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal}  # fmt: skip


def icmp(op: str, a: Any, b: Any, is_unsigned: bool) -> Any:
    """``icmp op`` (llvmlite spells the predicates ``<``, ``==``, ... plus a signedness)."""
    if is_unsigned or op.startswith("u"):
        a, b = unsigned(a), unsigned(b)
    return _ICMP[op](a, b)


def fcmp(op: str, a: Any, b: Any) -> Any:
    """``fcmp op``: ordered predicates are false on NaN, unordered ones true."""
    if op in ("ord", "uno"):
        ordered = ~(np.isnan(a) | np.isnan(b))
        return ordered if op == "ord" else ~ordered
    if op in ("true", "false"):
        return np.full(np.broadcast(a, b).shape, op == "true")
    base = op[1:] if op[0] in "ou" and len(op) > 2 else op
    if base == "ne" and op.startswith("o"):
        return (a != b) & ~(np.isnan(a) | np.isnan(b))
    r = _ICMP[base](a, b)
    if op.startswith("u") and base != "ne":
        r = r | np.isnan(a) | np.isnan(b)
    return r


def _to_int(x: Any, dtype: Any, is_unsigned: bool) -> Any:
    x = np.asarray(x, dtype=np.float64)
    d = np.dtype(dtype)
    target = _UNSIGNED[d] if is_unsigned and d != np.bool_ else d
    info = np.iinfo(target) if target != np.bool_ else None
    if info is None:
        return np.where(np.isnan(x), False, x != 0)
    lo, hi = float(info.min), float(info.max)
    r = np.where(np.isnan(x), 0, np.clip(np.trunc(x), lo, hi))
    big = r >= hi  # hi may not be representable in f64: set it exactly
    out = r.astype(target) if not big.any() else np.where(big, info.max, r.astype(target))
    return np.asarray(out, dtype=target).view(d)


def cast(op: str, x: Any, src: Any, dst: Any) -> Any:
    """``op`` (``trunc``, ``zext``, ``sext``, ``fptrunc``, ``fpext``, ``fptosi``,
    ``fptoui``, ``sitofp``, ``uitofp``) of ``x`` from numpy dtype ``src`` to ``dst``."""
    x = np.asarray(x)
    if op in ("trunc", "sext", "fptrunc", "fpext", "sitofp"):
        if op == "trunc" and dst == np.bool_:
            return (x & 1).astype(bool)
        return x.astype(dst)
    if op == "zext":
        if src == np.bool_:
            return x.astype(dst)
        return unsigned(x).astype(_UNSIGNED[np.dtype(dst)]).view(dst)
    if op == "uitofp":
        return (x if src == np.bool_ else unsigned(x)).astype(dst)
    if op in ("fptosi", "fptoui"):
        return _to_int(x, dst, op == "fptoui")
    raise UnsupportedOperation(op, f"the interpreter has no cast {op!r}")


def bitcast(x: Any, dst: Any, src_count: int, count: int) -> Any:
    """Reinterpret the bits of ``x`` as ``dst``: ``src_count`` elements per lane before
    and ``count`` after (0 for a scalar). Uniform values have no lane axis."""
    x = np.ascontiguousarray(x)
    uniform = x.ndim == (1 if src_count else 0)
    rows = x.reshape(1 if uniform else x.shape[0], max(src_count, 1)).view(dst)
    if uniform:
        return rows[0] if count else rows[0, 0]
    return rows if count else rows[:, 0]
