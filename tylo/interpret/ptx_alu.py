"""Scalar PTX arithmetic for inline asm (``tylo.ptx``, ``Fragment.ptx``): ``add``,
``sub``, ``mul`` (``.lo``, ``.hi`` and ``.wide`` of 32-bit integers), ``mad.lo``,
``fma.rn.f32``, ``min``, ``max``, ``neg``, ``abs``, ``and``, ``or``, ``xor``, ``not``,
``shl``, ``shr``, ``popc``, ``clz``, ``brev``, ``div``/``rem`` of integers, and the f32
``rcp``, ``sqrt``, ``rsqrt``, ``ex2``, ``lg2``, ``tanh``, ``sin``, ``cos``.

Exact: integer operations (wrap-around, shifts clamped as PTX clamps them), IEEE ``.rn``
float operations (``fma.rn.f32``: the product exact in f64, one rounding of the sum in
f64 and one to f32, so rarely 1 ulp off a fused result). ``.approx`` functions use numpy's
correctly rounded ones (the GPU's are within a few ulp), ``.ftz`` flushes subnormals.
Other rounding modes and types are refused by name.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tylo.interpret import ops
from tylo.interpret.errors import UnsupportedOperation
from tylo.interpret.numerics import flush_subnormals

__all__ = ["ALU"]

_T = {"f32": np.float32, "f64": np.float64, "u32": np.uint32, "s32": np.int32,
      "b32": np.uint32, "u64": np.uint64, "s64": np.int64, "b64": np.uint64,
      "u16": np.uint16, "s16": np.int16, "b16": np.uint16, "pred": np.bool_}  # fmt: skip
_WIDE = {"u32": np.uint64, "s32": np.int64, "u16": np.uint32, "s16": np.int32}


def _type(op: str, site: str) -> Any:
    t = op.split(".")[-1]
    if t not in _T:
        raise UnsupportedOperation(op, f"{site}: the interpreter has no PTX type .{t} for {op}")
    return t


def _rounding(op: str, site: str) -> None:
    bad = [p for p in op.split(".")[1:] if p in ("rz", "rm", "rp", "rni", "rzi", "sat")]
    if bad:
        raise UnsupportedOperation(op, f"{site}: PTX {op}: .{bad[0]} is not interpreted")


def _ftz(op: str, x: Any) -> Any:
    return flush_subnormals(x) if ".ftz" in op else x


def _arith(env: Any, op: str, o: list[str], sel: Any, site: str) -> None:
    name, t = op.split(".")[0], _type(op, site)
    _rounding(op, site)
    d = np.dtype(_T[t])

    def get(k: int, dt: Any = _T[t]) -> Any:
        return env.get(o[k], dt)

    float_ = d.kind == "f"
    with np.errstate(all="ignore"):
        if name in ("add", "sub"):
            r = np.add(get(1), get(2)) if name == "add" else np.subtract(get(1), get(2))
        elif name == "mul" and not float_ and ".wide" in op:
            w = _WIDE.get(t)
            if w is None:
                raise UnsupportedOperation(op, f"{site}: {op} is not interpreted")
            env.put(o[0], get(1).astype(w) * get(2).astype(w), sel)
            return
        elif name == "mul" and not float_ and ".hi" in op:
            if d.itemsize != 4:
                raise UnsupportedOperation(op, f"{site}: {op} (64-bit .hi) is not interpreted")
            w = np.int64 if t == "s32" else np.uint64
            r = ((get(1).astype(w) * get(2).astype(w)) >> 32).astype(d)
        elif name == "mul":
            r = np.multiply(get(1), get(2))
        elif name == "mad":
            if not float_ and ".lo" not in op:
                raise UnsupportedOperation(op, f"{site}: {op} is not interpreted (mad.lo is)")
            r = np.add(np.multiply(get(1), get(2)), get(3))
        elif name == "fma":
            if t != "f32":
                raise UnsupportedOperation(op, f"{site}: {op} is not interpreted (fma.rn.f32 is)")
            r = (get(1).astype(np.float64) * get(2) + get(3)).astype(np.float32)
        elif name in ("min", "max"):
            f = (
                (np.fmin if name == "min" else np.fmax)
                if float_
                else (np.minimum if name == "min" else np.maximum)
            )
            r = f(get(1), get(2))
        elif name in ("div", "rem"):
            if float_:
                if name == "rem" or not any(p in op for p in (".rn", ".full", ".approx")):
                    raise UnsupportedOperation(op, f"{site}: {op} is not interpreted")
                r = np.divide(get(1), get(2))
            else:
                signed = d.kind == "i"
                key = ("s" if signed else "u") + ("div" if name == "div" else "rem")
                r = ops.BINARY[key](get(1), get(2))
        else:
            raise UnsupportedOperation(op, f"{site}: {op} is not interpreted")
        r = np.asarray(r).astype(d)
    env.put(o[0], _ftz(op, r) if float_ else r, sel)


def _unary(env: Any, op: str, o: list[str], sel: Any, site: str) -> None:
    name, t = op.split(".")[0], _type(op, site)
    d = _T[t]
    x = env.get(o[1], d)
    with np.errstate(all="ignore"):
        if name == "neg":
            r = np.negative(x)
        elif name == "abs":
            r = np.abs(x)
        elif name == "not":
            r = np.invert(x)
        elif name == "popc":
            bits = np.unpackbits(np.ascontiguousarray(x).view(np.uint8).reshape(-1, 1), axis=1)
            r = bits.reshape(np.shape(x) + (-1,)).sum(axis=-1).astype(np.uint32)
        elif name == "clz":
            n = np.dtype(d).itemsize * 8
            v = np.asarray(x).astype(np.uint64) & np.uint64((1 << n) - 1)
            length = np.zeros(np.shape(v), np.int64)  # the bit length, by halving
            for sh in (32, 16, 8, 4, 2, 1):
                big = v >= np.uint64(1 << sh)
                length += np.where(big, sh, 0)
                v = np.where(big, v >> np.uint64(sh), v)
            r = (n - length - (v > 0)).astype(np.uint32)
        elif name == "brev":
            n = np.dtype(d).itemsize * 8
            u = np.asarray(x).astype(np.uint64)
            r = np.zeros_like(u)
            for k in range(n):
                r |= ((u >> np.uint64(k)) & np.uint64(1)) << np.uint64(n - 1 - k)
            r = r.astype(d)
        else:
            if t != "f32" or (
                ".approx" not in op and not (name in ("rcp", "sqrt") and ".rn" in op)
            ):
                raise UnsupportedOperation(op, f"{site}: {op} is not interpreted")
            fn = {"rcp": lambda v: np.float32(1) / v, "sqrt": np.sqrt,
                  "rsqrt": lambda v: np.float32(1) / np.sqrt(v), "ex2": np.exp2,
                  "lg2": np.log2, "tanh": np.tanh, "sin": np.sin, "cos": np.cos}[name]  # fmt: skip
            r = _ftz(op, np.asarray(fn(_ftz(op, np.asarray(x, np.float32)))).astype(np.float32))
    env.put(o[0], r, sel)


def _logic(env: Any, op: str, o: list[str], sel: Any, site: str) -> None:
    name, t = op.split(".")[0], _type(op, site)
    d = _T[t]
    a = env.get(o[1], d)
    if name in ("shl", "shr"):
        s = np.asarray(env.get(o[2], np.uint32)).astype(np.int64)
        signed = t.startswith("s")
        sd = {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}[np.dtype(d).itemsize]
        x = np.asarray(a).view(sd) if np.asarray(a).dtype != sd else np.asarray(a)
        sh = s.astype(sd)
        f = ops.BINARY["shl"] if name == "shl" else ops.BINARY["ashr" if signed else "lshr"]
        r = np.asarray(f(x, sh)).view(np.dtype(d)) if name == "shl" or not signed else f(x, sh)
        env.put(o[0], np.asarray(r).astype(d) if np.asarray(r).dtype != d else r, sel)
        return
    b = env.get(o[2], d)
    f = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[name]
    env.put(o[0], f(a, b), sel)


ALU = {
    "add": _arith, "sub": _arith, "mul": _arith, "mad": _arith, "fma": _arith,
    "min": _arith, "max": _arith, "div": _arith, "rem": _arith,
    "neg": _unary, "abs": _unary, "not": _unary, "popc": _unary, "clz": _unary,
    "brev": _unary, "rcp": _unary, "sqrt": _unary, "rsqrt": _unary, "ex2": _unary,
    "lg2": _unary, "tanh": _unary, "sin": _unary, "cos": _unary,
    "and": _logic, "or": _logic, "xor": _logic, "shl": _logic, "shr": _logic,
}  # fmt: skip
