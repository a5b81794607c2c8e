"""Atomics: ``atomicrmw`` and ``cmpxchg`` in the IR, and the ``atom``/``red`` PTX
instructions, applied lane after lane (lane order is one order the hardware may choose;
float sums over many lanes may therefore differ from a GPU run in the last bits)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tylo.interpret.errors import UnsupportedOperation
from tylo.interpret.irtypes import np_dtype

__all__ = ["atomic", "atomic_instruction"]


_RMW = {
    "add": np.add, "fadd": np.add, "sub": np.subtract, "and": np.bitwise_and,
    "or": np.bitwise_or, "xor": np.bitwise_xor, "max": np.maximum, "min": np.minimum,
    "xchg": lambda old, v: v, "exch": lambda old, v: v,
}  # fmt: skip


def _half_add(kind: str) -> Any:
    """``atom.add.noftz`` of 16-bit floats (``f16``, ``bf16``) or pairs of them in a 32-bit
    word (``f16x2``, ``bf16x2``): each element added and rounded to nearest even, no
    subnormal flush (the f32 sum rounds first; for addition that double rounding is exact,
    f32 having more than twice the bits plus two)."""
    from tylo.interpret import numerics as nu

    if "bf16" in kind:
        wide, narrow = nu.bf16_to_f32, nu.f32_to_bf16
    else:
        wide, narrow = nu.f16_to_f32, nu.f32_to_f16

    def add16(a: Any, b: Any) -> Any:
        with np.errstate(all="ignore"):
            return (narrow(wide(a) + wide(b)).astype(np.int64) & 0xFFFF).astype(np.uint32)

    if not kind.endswith("x2"):
        return lambda old, x: add16(old, x).astype(np.uint16)

    def pair(old: Any, x: Any) -> Any:
        o, v = np.asarray(old, np.uint32), np.asarray(x, np.uint32)
        lo = add16(o & 0xFFFF, v & 0xFFFF)
        hi = add16(o >> 16, v >> 16)
        return (hi << np.uint32(16)) | lo

    return pair


def atomic(st: Any, op: str, addr: Any, space: int, dtype: Any, value: Any, site: str,
           cmp: Any = None, is_unsigned: bool = False) -> np.ndarray:  # fmt: skip
    """Apply atomic ``op`` of the active lanes one after another in lane order (lanes on
    one address serialize; distinct addresses go at once) and return the old values."""
    lanes = st.idx
    a = np.asarray(st.lane_values(addr), dtype=np.int64)
    v = np.ascontiguousarray(st.lane_values(value)).astype(dtype)
    c = None if cmp is None else np.ascontiguousarray(st.lane_values(cmp)).astype(dtype)
    if op in ("umax", "umin") or (is_unsigned and op in ("max", "min")):
        from tylo.interpret.ops import unsigned

        base = np.maximum if op.endswith("max") else np.minimum

        def f(old: Any, x: Any) -> Any:
            return base(unsigned(old), unsigned(x)).view(np.dtype(dtype))

    elif op == "cas":
        f = None
    elif op == "fmax" or op == "fmin":
        f = np.fmax if op == "fmax" else np.fmin
    elif op.startswith("add.") and op[4:] in ("f16", "bf16", "f16x2", "bf16x2"):
        f = _half_add(op[4:])
    else:
        f = _RMW.get(op)
        if f is None:
            raise UnsupportedOperation(f"atomic {op}", f"{site}: atomic {op!r} is not interpreted")
    order = np.argsort(a, kind="stable")
    sa = a[order]
    first = np.r_[True, sa[1:] != sa[:-1]]
    start = np.maximum.accumulate(np.where(first, np.arange(len(sa)), 0))
    rank = np.empty(len(sa), dtype=np.int64)
    rank[order] = np.arange(len(sa)) - start
    out = np.empty(len(lanes), dtype=dtype)
    mem = st.memory
    for r in range(int(rank.max()) + 1 if len(rank) else 0):
        sel = rank == r
        old = mem.load(lanes[sel], a[sel], space, dtype, 1, site, atomic=True)
        if f is None:
            new = np.where(old == c[sel], v[sel], old)  # type: ignore[index]
        else:
            with np.errstate(all="ignore"):
                new = np.asarray(f(old, v[sel])).astype(dtype)
        mem.store(lanes[sel], a[sel], space, np.ascontiguousarray(new), site, atomic=True)
        out[sel] = old
    return out


def atomic_instruction(program: Any, inst: Any, d: int, srcs: list[int]) -> Any:
    """``atomicrmw`` / ``cmpxchg``."""
    site = program.site(inst)
    ptr = inst.operands[0]
    space = ptr.type.addrspace
    dt = np_dtype(ptr.type.pointee)
    if inst.opname == "cmpxchg":
        p, c, v = srcs

        def cas(st: Any, m: Any) -> None:
            old = atomic(st, "cas", st.regs[p], space, dt, st.regs[v], site, cmp=st.regs[c])
            ok = old == st.lane_values(st.regs[c])
            full_old = np.zeros(st.lanes, dt)
            full_ok = np.zeros(st.lanes, bool)
            full_old[st.idx], full_ok[st.idx] = old, ok
            st.set(d, (full_old, full_ok), m)

        return cas
    op = inst.operation
    p, v = srcs

    def rmw(st: Any, m: Any) -> None:
        st.set_lanes(d, atomic(st, op, st.regs[p], space, dt, st.regs[v], site), m)

    return rmw
