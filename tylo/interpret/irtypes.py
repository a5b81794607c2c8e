"""IR types and constants as numpy values.

A value of IR type ``iN`` is a numpy ``intN`` array (``i1``: bool), ``float``/``double``
are ``float32``/``float64``, a pointer is an ``int64`` address (:mod:`tylo.interpret.memory`
says which addresses mean what), a vector ``<n x T>`` has a trailing axis of ``n``, and a
struct is a tuple. :func:`constant` evaluates an ``ir.Constant``, including the constant
expressions llvmlite keeps only as text (``getelementptr``/``bitcast``/``addrspacecast``/
``ptrtoint`` of a global).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
from llvmlite import ir

from tylo.interpret.errors import UnsupportedOperation

__all__ = ["constant", "np_dtype", "parse_type", "size_of"]

_INTS = {1: np.bool_, 8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}


def np_dtype(t: ir.Type) -> Any:
    """The numpy dtype of a scalar (or vector element, or pointer) IR type."""
    if isinstance(t, ir.VectorType):
        return np_dtype(t.element)
    if isinstance(t, ir.IntType):
        d = _INTS.get(t.width)
        if d is None:
            raise UnsupportedOperation(f"i{t.width}", f"the interpreter has no i{t.width} values")
        return d
    if isinstance(t, ir.FloatType):
        return np.float32
    if isinstance(t, ir.DoubleType):
        return np.float64
    if isinstance(t, ir.HalfType):
        return np.float16
    if isinstance(t, ir.PointerType):
        return np.int64
    raise UnsupportedOperation(str(t), f"the interpreter has no values of IR type {t}")


def size_of(t: ir.Type) -> int:
    """Bytes of ``t`` in memory (NVVM datalayout: natural alignment, i1 as a byte)."""
    if isinstance(t, ir.IntType):
        return max(1, t.width // 8)
    if isinstance(t, ir.FloatType):
        return 4
    if isinstance(t, (ir.DoubleType, ir.PointerType)):
        return 8
    if isinstance(t, ir.HalfType):
        return 2
    if isinstance(t, (ir.ArrayType, ir.VectorType)):
        return t.count * size_of(t.element)
    if isinstance(t, (ir.LiteralStructType, ir.IdentifiedStructType)):
        off = 0
        for e in t.elements:
            a = align_of(e)
            off = (off + a - 1) // a * a + size_of(e)
        a = max((align_of(e) for e in t.elements), default=1)
        return (off + a - 1) // a * a
    raise UnsupportedOperation(str(t), f"the interpreter cannot size IR type {t}")


def align_of(t: ir.Type) -> int:
    """The ABI alignment of ``t`` (its size for scalars and vectors)."""
    if isinstance(t, ir.ArrayType):
        return align_of(t.element)
    if isinstance(t, (ir.LiteralStructType, ir.IdentifiedStructType)):
        return max((align_of(e) for e in t.elements), default=1)
    return size_of(t)


def field_offset(t: ir.Type, index: int) -> tuple[int, ir.Type]:
    """The byte offset and type of element ``index`` of an aggregate type ``t``."""
    if isinstance(t, (ir.ArrayType, ir.VectorType)):
        return index * size_of(t.element), t.element
    off = 0
    for k, e in enumerate(t.elements):
        a = align_of(e)
        off = (off + a - 1) // a * a
        if k == index:
            return off, e
        off += size_of(e)
    raise UnsupportedOperation("getelementptr", f"struct index {index} out of range of {t}")


# ---------------------------------------------------------------------------- type text

_TOKEN = re.compile(r"\s*(addrspace\(\d+\)|i\d+|float|double|half|void|x|\d+|[\[\]<>{}*,()])")


def parse_type(text: str) -> tuple[ir.Type, str]:
    """Parse one IR type from the start of ``text``; returns it and the rest."""
    m = _TOKEN.match(text)
    if m is None:
        raise UnsupportedOperation("constant expression", f"cannot read a type in {text!r}")
    tok, rest = m.group(1), text[m.end() :]
    if tok.startswith("i") and tok[1:].isdigit():
        t: ir.Type = ir.IntType(int(tok[1:]))
    elif tok in ("float", "double", "half", "void"):
        t = {"float": ir.FloatType(), "double": ir.DoubleType(), "half": ir.HalfType(),
             "void": ir.VoidType()}[tok]  # fmt: skip
    elif tok in "[<":
        n, rest = rest.split("x", 1)
        elem, rest = parse_type(rest)
        rest = rest.lstrip()[1:]
        t = (ir.ArrayType if tok == "[" else ir.VectorType)(elem, int(n))
    elif tok == "{":
        elems = []
        while True:
            e, rest = parse_type(rest)
            elems.append(e)
            rest = rest.lstrip()
            if rest.startswith("}"):
                rest = rest[1:]
                break
            rest = rest[1:]
        t = ir.LiteralStructType(elems)
    else:
        raise UnsupportedOperation("constant expression", f"cannot read a type in {text!r}")
    while True:
        m = _TOKEN.match(rest)
        if m is None or not (m.group(1) == "*" or m.group(1).startswith("addrspace")):
            return t, rest
        space = 0
        if m.group(1).startswith("addrspace"):
            space = int(m.group(1)[10:-1])
            rest = rest[m.end() :]
            m = _TOKEN.match(rest)
            assert m is not None and m.group(1) == "*"
        t = ir.PointerType(t, space)
        rest = rest[m.end() :]


def _split_args(text: str) -> list[str]:
    depth, start, out = 0, 0, []
    for k, ch in enumerate(text):
        if ch in "([<{":
            depth += 1
        elif ch in ")]>}":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(text[start:k].strip())
            start = k + 1
    out.append(text[start:].strip())
    return out


def _expr(text: str, global_address: Callable[[str], int]) -> int:
    """The value (an address or an integer) of a constant expression's text."""
    text = text.strip()
    if text.startswith("@"):
        return global_address(text[1:].strip('"'))
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    if text in ("null", "zeroinitializer"):
        return 0
    m = re.match(r"(getelementptr(?: inbounds)?|bitcast|addrspacecast|ptrtoint|inttoptr)\s*\(",
                 text)  # fmt: skip
    if m is None or not text.endswith(")"):
        raise UnsupportedOperation("constant expression", f"cannot evaluate {text!r}")
    op, body = m.group(1), text[m.end() : -1]
    if op.startswith("getelementptr"):
        args = _split_args(body)
        elem, _ = parse_type(args[0])
        _, value = parse_type(args[1])
        addr = _expr(value, global_address)
        t: ir.Type = elem
        for k, a in enumerate(args[2:]):
            _, idx_text = parse_type(a)
            idx = int(idx_text.strip())
            if k == 0:
                addr += idx * size_of(elem)
            else:
                off, t = field_offset(t, idx)
                addr += off
        return addr
    src, rest = body.rsplit(" to ", 1)
    _, value = parse_type(src)
    addr = _expr(value, global_address)
    if op == "addrspacecast":
        from_t, _ = parse_type(src)
        to_t, _ = parse_type(rest)
        return _cast_space(addr, from_t.addrspace, to_t.addrspace)
    return addr


def _cast_space(addr: int, src: int, dst: int) -> int:
    from tylo.interpret.memory import cast_address

    return int(cast_address(np.int64(addr), src, dst))


def constant(c: ir.Constant, global_address: Callable[[str], int]) -> Any:
    """The numpy value of constant ``c``; ``global_address(name)`` gives a global's
    address (shared globals: their offset in the CTA's shared memory)."""
    t = c.type
    if isinstance(c, ir.FormattedConstant):
        return np.int64(_expr(c.constant, global_address))
    if isinstance(c, ir.GlobalValue):
        return np.int64(global_address(c.name))
    if isinstance(t, (ir.LiteralStructType, ir.ArrayType)):
        raise UnsupportedOperation(str(t), f"aggregate constant {c} in the kernel")
    d = np_dtype(t)
    value = c.constant
    if isinstance(t, ir.VectorType):
        if value is None or value is ir.Undefined:
            return np.zeros(t.count, dtype=d)
        return np.array([constant(v, global_address) for v in value], dtype=d)
    if value is None or value is ir.Undefined:
        return d(0)
    if isinstance(t, ir.IntType):
        v = int(value)
        if t.width == 1:
            return np.bool_(v & 1)
        v &= (1 << t.width) - 1
        if v >= 1 << (t.width - 1):
            v -= 1 << t.width
        return d(v)
    return d(value)
