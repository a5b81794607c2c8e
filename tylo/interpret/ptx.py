"""Inline PTX: the asm strings tylo emits, parsed once and run over the active lanes.

An asm call's operands are numbered as in LLVM (outputs ``$0..``, then inputs; a tied
input ``"N"`` starts output N's register). Statements may be guarded (``@p``, ``@!p``),
declare local registers (``.reg .pred %p;``) and sit in ``{ }`` scopes. Each instruction
below is interpreted; any other raises :class:`UnsupportedOperation` naming it (the
Hopper instructions ``wgmma``, ``mbarrier``, ``cp.async.bulk`` (TMA), ``setmaxnreg``,
``elect``, ``mapa`` and cluster shared memory among them).
"""

from __future__ import annotations

import re
import struct
from typing import Any

import numpy as np
from llvmlite import ir

from tylo.interpret import warp
from tylo.interpret.atomics import atomic
from tylo.interpret.errors import Trap, UnsupportedOperation
from tylo.interpret.irtypes import np_dtype
from tylo.interpret.numerics import bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16
from tylo.interpret.ops import fcmp, icmp
from tylo.interpret.ptx_alu import ALU

__all__ = ["compile_asm", "parse"]

_TYPES = {"f32": np.float32, "f64": np.float64, "u32": np.uint32, "s32": np.int32,
          "b32": np.int32, "u64": np.uint64, "s64": np.int64, "b64": np.int64,
          "u16": np.uint16, "s16": np.int16, "b16": np.int16, "u8": np.uint8, "s8": np.int8,
          "b8": np.int8, "pred": np.bool_, "f16": np.int16, "bf16": np.int16}  # fmt: skip
_HOPPER = ("wgmma", "mbarrier", "cp.async.bulk", "setmaxnreg", "elect", "mapa", "tensormap",
           "griddepcontrol", "ld.shared::cluster", "st.shared::cluster", "barrier.cluster",
           "fence.proxy.async", "tcgen05")  # fmt: skip


def _unescape(text: str) -> str:
    return (
        text.replace("\\22", '"').replace("\\5C", "\\").replace("\\0A", "\n").replace("\\09", "\t")
    )


def parse(text: str) -> list[tuple[str | None, bool, str, list[str]]]:
    """Statements ``(guard, negated, opcode, operands)`` of an asm text (``$$`` is
    ``$``; declarations and braces dropped)."""
    out = []
    for raw in re.split(r"[;\n]", _unescape(text)):
        s = raw.strip()
        while s.startswith("{") and not re.match(r"\{\s*[$%]", s):  # a scope, not operands
            s = s[1:].strip()
        while s.endswith("}") and s.count("}") > s.count("{"):
            s = s[:-1].strip()
        if not s or s.startswith((".reg", "//")):
            continue
        guard, neg = None, False
        m = re.match(r"@(!?)(\S+)\s+", s)
        if m:
            neg, guard, s = bool(m.group(1)), m.group(2), s[m.end() :]
        op, _, rest = s.partition(" ")
        ops = [o.strip() for o in re.split(r",(?![^{]*\})", rest)] if rest.strip() else []
        out.append((guard, neg, op, ops))
    return out


class _Env:
    """The registers of one asm call over the active lanes."""

    def __init__(self, st: Any, values: dict[int, Any]) -> None:
        self.st = st
        self.values = values
        self.idx = st.idx
        self.n = len(st.idx)

    def get(self, token: str, dtype: Any) -> Any:
        token = token.strip()
        if token.startswith("$"):
            v = self.values[int(token[1:])]
        elif token.startswith("%"):
            v = self.values[token]
        elif token.startswith(("0f", "0F")):
            return np.float32(struct.unpack(">f", bytes.fromhex(token[2:]))[0])
        elif token.startswith(("0d", "0D")):
            return np.float64(struct.unpack(">d", bytes.fromhex(token[2:]))[0])
        else:
            v = int(token, 0)
            return (
                np.array(v & ((1 << (8 * np.dtype(dtype).itemsize)) - 1))
                .astype(np.uint64)
                .astype(dtype)
                if dtype != np.bool_
                else np.bool_(v)
            )
        return _as(v, dtype)

    def put(self, token: str, value: Any, sel: Any) -> None:
        token = token.strip()
        if token == "_":
            return
        key: Any = int(token[1:]) if token.startswith("$") else token
        value = np.broadcast_to(np.asarray(value), (self.n,) + np.shape(value)[1:])
        old = self.values.get(key)
        if sel is None or old is None:
            self.values[key] = np.array(value)
        else:
            self.values[key] = np.where(sel, _as(value, np.asarray(old).dtype), old)


def _as(v: Any, dtype: Any) -> Any:
    v = np.asarray(v)
    d = np.dtype(dtype)
    if v.dtype == d:
        return v
    if d == np.bool_:
        return v != 0
    if v.dtype == np.bool_:
        return v.astype(d)
    if v.dtype.itemsize == d.itemsize:
        return v.view(d)
    if v.dtype.kind in "iu" and d.kind in "iu":  # a wider or narrower register
        return v.astype(d)
    raise UnsupportedOperation("inline PTX", f"a {v.dtype} register used as {d}")


def _suffix_type(op: str) -> Any:
    for part in reversed(op.split(".")):
        if part in _TYPES:
            return _TYPES[part]
    return np.int32


def _addr(token: str) -> tuple[str, int]:
    body = token.strip()[1:-1].strip()
    m = re.match(r"(\S+?)\s*\+\s*(-?\w+)$", body)
    return (m.group(1), int(m.group(2), 0)) if m else (body, 0)


def _space(op: str) -> int:
    return 3 if ".shared" in op else 1 if ".global" in op else 0


def _vec(token: str) -> list[str]:
    return [t.strip() for t in token.strip()[1:-1].split(",")]


def compile_asm(program: Any, inst: Any, site: str) -> Any:
    """The step running inline-asm call ``inst``."""
    asm = inst.callee
    text = asm.asm
    for name in _HOPPER:
        if re.search(rf"(^|[\s;{{}}]){re.escape(name)}", _unescape(text)):
            raise UnsupportedOperation(name, f"kernel {program.kernel}: the interpreter does "
                                             f"not run `{name}` yet (in `{site}`)")  # fmt: skip
    stmts = parse(text)
    cons = [c for c in asm.constraint.split(",") if not c.startswith("~")]
    nout = sum(c.startswith("=") for c in cons)
    args = [program.slot(a) for a in inst.args]
    ties = {k: int(c) for k, c in enumerate(cons[nout:]) if c.isdigit()}
    rtype = inst.type
    out_types = (list(rtype.elements) if isinstance(rtype, ir.LiteralStructType)
                 else [] if isinstance(rtype, ir.VoidType) else [rtype])  # fmt: skip
    out_dt = [np_dtype(t) for t in out_types]
    d = program.slot(inst) if out_types else -1
    for _, _, op, _ in stmts:
        _handler(op, site)  # refuse unknown instructions when compiling

    def run(st: Any, m: Any) -> None:
        values: dict[Any, Any] = {}
        for k, s in enumerate(args):
            values[nout + k] = st.lane_values(st.regs[s])
            if k in ties:
                values[ties[k]] = values[nout + k]
        env = _Env(st, values)
        for guard, neg, op, operands in stmts:
            sel = None
            if guard is not None:
                sel = env.get(guard, np.bool_)
                sel = np.broadcast_to(~sel if neg else sel, (env.n,))
            _handler(op, site)(env, op, operands, sel, site)
        if d < 0:
            return
        outs = [_as(np.broadcast_to(values.get(k, np.zeros(env.n)), (env.n,)), dt)
                for k, dt in enumerate(out_dt)]  # fmt: skip
        if len(outs) == 1 and not isinstance(rtype, ir.LiteralStructType):
            st.set_lanes(d, np.ascontiguousarray(outs[0]), m)
        else:
            full = []
            for o in outs:
                arr = np.zeros(st.lanes, o.dtype)
                arr[st.idx] = o
                full.append(arr)
            st.set(d, tuple(full), m)

    return run


def _handler(op: str, site: str) -> Any:
    base = op.split(".")[0]
    h = _HANDLERS.get(base)
    if h is None or (base == "cp" and not op.startswith("cp.async")):
        raise UnsupportedOperation(op, f"{site}: the interpreter has no PTX instruction {op!r}")
    return h


def _lanes(env: _Env, sel: Any) -> tuple[Any, Any]:
    """The lanes (and their positions among the active lanes) an instruction acts for."""
    if sel is None:
        return env.st.idx, slice(None)
    pos = np.flatnonzero(sel)
    return env.st.idx[pos], pos


def _with_lanes(env: _Env, sel: Any, f: Any) -> Any:
    st = env.st
    saved, saved_mask = st.idx, st.mask
    lanes, _ = _lanes(env, sel)
    st.idx = lanes
    if sel is not None:
        st.mask = np.zeros(st.lanes, bool)
        st.mask[lanes] = True
    try:
        return f()
    finally:
        st.idx, st.mask = saved, saved_mask


def _mov(env: _Env, op: str, o: list[str], sel: Any, site: str) -> None:
    t = _suffix_type(op)
    if o[0].startswith("{") or o[1].startswith("{"):  # mov.bN {lo, hi}, x or x, {lo, hi}
        half = {np.dtype(np.int64): np.uint32, np.dtype(np.int32): np.uint16}.get(np.dtype(t))
        if half is None:
            raise UnsupportedOperation(op, f"{site}: {op} with a vector operand")
        if o[0].startswith("{"):
            parts = np.ascontiguousarray(env.get(o[1], t)).view(half).reshape(env.n, -1)
            for k, dst in enumerate(_vec(o[0])):
                env.put(dst, parts[:, k], sel)
        else:
            cols = [np.broadcast_to(env.get(r, half), (env.n,)) for r in _vec(o[1])]
            both = np.ascontiguousarray(np.stack(cols, axis=1).astype(half))
            env.put(o[0], both.view(t).reshape(env.n), sel)
        return
    if op.startswith("selp"):
        p = env.get(o[3], np.bool_)
        env.put(o[0], np.where(p, env.get(o[1], t), env.get(o[2], t)), sel)
    else:
        env.put(o[0], env.get(o[1], t), sel)


def _setp(env: _Env, op: str, o: list[str], sel: Any, site: str) -> None:
    parts = op.split(".")
    cmp, t = parts[1], _TYPES[parts[-1]]
    a, b = env.get(o[1], t), env.get(o[2], t)
    names = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!=", "lo": "<",
             "ls": "<=", "hi": ">", "hs": ">="}  # fmt: skip
    if np.dtype(t).kind == "f":
        r = fcmp({"ne": "une"}.get(cmp, "o" + cmp if cmp in names else cmp), a, b)
    else:
        r = icmp(names[cmp], a, b, np.dtype(t).kind == "u")
    env.put(o[0], r, sel)


def _cvt(env: _Env, op: str, o: list[str], sel: Any, site: str) -> None:
    parts = op.split(".")
    if parts[-2:] in (["bf16x2", "f32"], ["f16x2", "f32"]):
        to = f32_to_bf16 if parts[-2] == "bf16x2" else f32_to_f16
        hi = to(env.get(o[1], np.float32)).astype(np.int64) & 0xFFFF
        lo = to(env.get(o[2], np.float32)).astype(np.int64) & 0xFFFF
        env.put(o[0], ((hi << 16) | lo).astype(np.uint32).view(np.int32), sel)
    elif parts[-2:] in (["bf16", "f32"], ["f16", "f32"]) and "rn" in parts:
        to = f32_to_bf16 if parts[-2] == "bf16" else f32_to_f16
        env.put(o[0], to(env.get(o[1], np.float32)), sel)
    elif parts[-2:] in (["f32", "bf16"], ["f32", "f16"]):
        frm = bf16_to_f32 if parts[-1] == "bf16" else f16_to_f32
        env.put(o[0], frm(env.get(o[1], np.int16)), sel)
    elif op in ("cvta.to.shared.u64", "cvta.to.shared.u32", "cvta.shared.u64"):
        from tylo.interpret.memory import cast_address

        a = env.get(o[1], np.int64)
        env.put(o[0], cast_address(a, 0, 3) if ".to." in op else cast_address(a, 3, 0), sel)
    elif op in ("cvta.to.global.u64", "cvta.global.u64"):
        env.put(o[0], env.get(o[1], np.int64), sel)
    elif parts[0] == "cvt" and parts[-2] in _NUMERIC and parts[-1] in _NUMERIC:
        env.put(o[0], _numeric_cvt(op, parts, env.get(o[1], _TYPES[parts[-1]])), sel)
    else:
        raise UnsupportedOperation(op, f"{site}: the interpreter has no conversion {op!r}")


_NUMERIC = ("f32", "f64", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64")
_ROUND = {"rzi": np.trunc, "rni": np.rint, "rmi": np.floor, "rpi": np.ceil}


def _numeric_cvt(op: str, parts: list[str], x: np.ndarray) -> np.ndarray:
    """``cvt[.mode].dst.src`` between integer and f32/f64 types (PTX ISA, "cvt"): integer
    to float and f64 to f32 round to nearest even (``.rn``, the only mode taken); float to
    integer rounds by ``.rzi``/``.rni``/``.rmi``/``.rpi`` and saturates, NaN giving 0;
    between integers, truncation or extension by the source's signedness."""
    from tylo.interpret.ops import cast

    dst, src = parts[-2], parts[-1]
    mode = parts[1:-2]
    dt, st = _TYPES[dst], _TYPES[src]
    if dst[0] == "u":
        dt = np.dtype(f"u{np.dtype(dt).itemsize}")
    if src[0] == "u":
        x = x.view(np.dtype(f"u{np.dtype(st).itemsize}"))
    if dst[0] == "f" and src[0] == "f":
        narrowing = np.dtype(dt).itemsize < np.dtype(st).itemsize
        if mode not in ([], ["rn"]) or (narrowing and mode != ["rn"]):
            raise UnsupportedOperation(op, f"the interpreter has no conversion {op!r}")
        return x.astype(dt)
    if dst[0] == "f":  # from an integer
        if mode not in ([], ["rn"]):
            raise UnsupportedOperation(op, f"the interpreter has no conversion {op!r}")
        return x.astype(dt)
    if src[0] == "f":  # to an integer: a rounding mode is required
        if len(mode) != 1 or mode[0] not in _ROUND:
            raise UnsupportedOperation(op, f"the interpreter has no conversion {op!r}")
        signed = np.dtype(f"i{np.dtype(dt).itemsize}")
        op_ = "fptoui" if dst[0] == "u" else "fptosi"
        return np.asarray(cast(op_, _ROUND[mode[0]](x), np.float64, signed)).view(_TYPES[dst])
    if mode:  # .sat between integers
        raise UnsupportedOperation(op, f"the interpreter has no conversion {op!r}")
    return x.astype(dt).view(_TYPES[dst])


def _ld(env: _Env, op: str, o: list[str], sel: Any, site: str) -> None:
    t = _suffix_type(op)
    m = re.search(r"\.v(\d)", op)
    n = int(m.group(1)) if m else 1
    base, off = _addr(o[1])
    a = env.get(base, np.int64) + off
    lanes, pos = _lanes(env, sel)
    vals = env.st.memory.load(lanes, np.asarray(np.broadcast_to(a, (env.n,)))[pos],
                              _space(op), t, n, site)  # fmt: skip
    dests = _vec(o[0]) if n > 1 else [o[0]]
    for k, dst in enumerate(dests):
        col = vals[:, k] if n > 1 else vals
        full = np.zeros(env.n, t)
        full[pos] = col
        env.put(dst, full, sel)


def _st(env: _Env, op: str, o: list[str], sel: Any, site: str) -> None:
    t = _suffix_type(op)
    m = re.search(r"\.v(\d)", op)
    n = int(m.group(1)) if m else 1
    base, off = _addr(o[0])
    a = env.get(base, np.int64) + off
    lanes, pos = _lanes(env, sel)
    srcs = _vec(o[1]) if n > 1 else [o[1]]
    cols = [np.broadcast_to(env.get(s, t), (env.n,))[pos] for s in srcs]
    data = np.stack(cols, axis=1) if n > 1 else cols[0]
    env.st.memory.store(lanes, np.asarray(np.broadcast_to(a, (env.n,)))[pos], _space(op),
                        np.ascontiguousarray(data), site)  # fmt: skip


def _cp(env: _Env, op: str, o: list[str], sel: Any, site: str) -> None:
    lanes, pos = _lanes(env, sel)
    mem = env.st.memory
    if op == "cp.async.commit_group":
        mem.commit_group(lanes)
    elif op == "cp.async.wait_group":
        mem.wait_group(lanes, int(o[0], 0))
    elif op == "cp.async.wait_all":
        mem.commit_group(lanes)
        mem.wait_group(lanes, 0)
    else:
        size = int(o[2], 0)
        dst = np.broadcast_to(env.get(_addr(o[0])[0], np.int64) + _addr(o[0])[1], (env.n,))
        src = np.broadcast_to(env.get(_addr(o[1])[0], np.int64) + _addr(o[1])[1], (env.n,))
        given = (np.broadcast_to(env.get(o[3], np.int64), (env.n,)) if len(o) > 3
                 else np.full(env.n, size))  # fmt: skip
        mem.copy_async(lanes, np.asarray(dst)[pos] % (1 << 32), np.asarray(src)[pos], size,
                       np.asarray(given)[pos], site)  # fmt: skip


def _atom(env: _Env, op: str, o: list[str], sel: Any, site: str) -> None:
    parts = op.split(".")
    name = next((p for p in parts[1:] if p in ("add", "min", "max", "exch", "cas", "and",
                                                "or", "xor", "inc", "dec")), None)  # fmt: skip
    half = name == "add" and "noftz" in parts and parts[-1] in ("f16", "bf16", "f16x2", "bf16x2")
    refused = parts[-1] not in _TYPES or parts[-1] in ("f16", "bf16") or "v2" in parts
    if not half and (refused or name in (None, "inc", "dec") or "noftz" in parts):
        raise UnsupportedOperation(op, f"{site}: the interpreter has no atomic {op!r}")
    t = (np.uint32 if parts[-1].endswith("x2") else np.uint16) if half else _TYPES[parts[-1]]
    is_red = parts[0] == "red"
    addr_tok = o[0] if is_red else o[1]
    ins = o[1:] if is_red else o[2:]
    base, off = _addr(addr_tok)
    a = env.get(base, np.int64) + off
    st = env.st
    kind = "f" + name if np.dtype(t).kind == "f" and name in ("min", "max") else name
    if half:
        kind = f"add.{parts[-1]}"
    cmp = env.get(ins[0], t) if name == "cas" else None
    val = env.get(ins[-1], t)

    fa, fv = _full(st, a, sel, env), _full(st, val, sel, env)
    fc = None if cmp is None else _full(st, cmp, sel, env)

    def go() -> Any:
        return atomic(
            st, kind, fa, _space(op), t, fv, site, cmp=fc, is_unsigned=np.dtype(t).kind == "u"
        )

    old = _with_lanes(env, sel, go)
    if not is_red:
        _, pos = _lanes(env, sel)
        full = np.zeros(env.n, t)
        full[pos] = old
        env.put(o[0], full, sel)


def _full(st: Any, v: Any, sel: Any, env: _Env) -> np.ndarray:
    """A per-active-lane value spread over all lanes (for helpers that index by lane)."""
    out = np.zeros(st.lanes, np.asarray(v).dtype)
    out[env.idx] = np.broadcast_to(v, (env.n,))
    return out


def _bar(env: _Env, op: str, o: list[str], sel: Any, site: str) -> None:
    if op.startswith("bar.warp") or (o and o[0] not in ("0",)) or len(o) > 1:
        raise UnsupportedOperation(op, f"{site}: only `bar.sync 0` is interpreted")
    warp.barrier(env.st, site)


def _nop(env: _Env, op: str, o: list[str], sel: Any, site: str) -> None:
    return None


def _trap(env: _Env, op: str, o: list[str], sel: Any, site: str) -> None:
    lanes, _ = _lanes(env, sel)
    if len(lanes):
        raise Trap(f"`trap` executed by {env.st.where(int(lanes[0]))} at `{site}`")


def _matrix(env: _Env, op: str, o: list[str], sel: Any, site: str) -> None:
    if sel is not None:
        raise UnsupportedOperation(op, f"{site}: a predicated {op.split('.')[0]}")
    st = env.st
    trans = ".trans" in op
    if not op.startswith("mma"):
        base, off = _addr(o[1] if op.startswith("ldmatrix") else o[0])
        a = _full(st, env.get(base, np.int64) + off, sel, env)
    if op.startswith("ldmatrix"):
        num = int(re.search(r"\.x(\d)", op).group(1))  # type: ignore[union-attr]
        outs = warp.ldmatrix(st, num, trans, a, site)
        for dst, v in zip(_vec(o[0]), outs):
            env.put(dst, v, None)
    elif op.startswith("stmatrix"):
        regs = [_full(st, env.get(r, np.int32), sel, env) for r in _vec(o[1])]
        warp.stmatrix(st, trans, a, regs, site)
    else:
        if ".m16n8k16.row.col.f32." not in op or not op.endswith(".f32"):
            raise UnsupportedOperation(op, f"{site}: only mma m16n8k16 row.col with f32 "
                                           "accumulators is interpreted")  # fmt: skip
        kind = "bf16" if ".bf16." in op else "f16" if ".f16." in op else None
        if kind is None:
            raise UnsupportedOperation(op, f"{site}: mma operand type not interpreted")
        d, av, bv, cv = (_vec(x) for x in o[:4])

        def reg(r: str, t: Any) -> Any:
            return _full(st, env.get(r, t), sel, env)

        outs = warp.mma_m16n8k16(st, kind, [reg(r, np.int32) for r in av],
                                 [reg(r, np.int32) for r in bv],
                                 [reg(r, np.float32) for r in cv], site)  # fmt: skip
        for dst, v in zip(d, outs):
            env.put(dst, v, None)


def _shfl_vote(env: _Env, op: str, o: list[str], sel: Any, site: str) -> None:
    st = env.st
    parts = op.split(".")
    if sel is not None or "sync" not in parts:
        raise UnsupportedOperation(op, f"{site}: only unpredicated {parts[0]}.sync")
    if parts[0] == "vote":
        mode = parts[2]
        p = _full(st, env.get(o[1], np.bool_), sel, env)
        r = warp.vote(st, mode, p, _full(st, env.get(o[2], np.uint32), sel, env), site)
        env.put(o[0], np.asarray(r)[st.idx], None)
        return
    mode = parts[2]
    dst = o[0].split("|")[0]
    r = warp.shuffle(st, mode, _full(st, env.get(o[1], np.int32), sel, env),
                     _full(st, env.get(o[2], np.int32), sel, env),
                     _full(st, env.get(o[3], np.int32), sel, env),
                     _full(st, env.get(o[4], np.uint32), sel, env), site)  # fmt: skip
    env.put(dst, r[st.idx], None)


_HANDLERS = {
    "mov": _mov, "selp": _mov, "setp": _setp, "cvt": _cvt, "cvta": _cvt, "ld": _ld,
    "st": _st, "cp": _cp, "atom": _atom, "red": _atom, "bar": _bar, "barrier": _bar,
    "fence": _nop, "membar": _nop, "trap": _trap, "ldmatrix": _matrix, "stmatrix": _matrix,
    "mma": _matrix, "shfl": _shfl_vote, "vote": _shfl_vote,
}  # fmt: skip
_HANDLERS.update(ALU)
