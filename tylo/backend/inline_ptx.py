"""Inline PTX for NVVM IR: counted operands, constraint letters by type, escaping.

llvmlite prints an inline-asm string verbatim between double quotes, and LLVM reads it with
its own escapes and operand syntax, so three rules apply (``shared/design/TOOLCHAIN.md``):

- ``"`` is written ``\\22`` and ``\\`` is written ``\\5C`` (LLVM string escapes);
- ``$N`` names operand N (outputs first, then inputs) and a literal ``$`` is ``$$``;
- asm that reads or writes memory needs side effects and a ``~{memory}`` clobber, so LLVM
  neither drops it nor moves loads and stores across it.

:class:`PTXAsm` builds one asm call: declare outputs and inputs (each returns the
placeholder to put in the text), add PTX lines, then :meth:`PTXAsm.emit`, which numbers the
operands, checks that every declared operand is used and no undeclared one is, escapes the
text and returns the output values. Operand constraints follow the NVPTX backend
(``r`` b32, ``l`` b64, ``h`` b16, ``f`` f32, ``d`` f64; LLVM "Supported Constraint Code
List", NVPTX).

>>> from llvmlite import ir
>>> fn = ir.Function(ir.Module(), ir.FunctionType(ir.FloatType(), [ir.FloatType()] * 3), "f")
>>> b = ir.IRBuilder(fn.append_basic_block())
>>> asm = PTXAsm("fma")
>>> d = asm.output(ir.FloatType())
>>> x, y, z = (asm.input(a) for a in fn.args)
>>> asm.line(f"fma.rn.f32 {d}, {x}, {y}, {z};")
>>> (r,) = asm.emit(b)
>>> 'asm  "fma.rn.f32 $0, $1, $2, $3;", "=f,f,f,f"' in str(r)
True
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from llvmlite import ir

from tylo.errors import TyloError

__all__ = [
    "InlinePTXError",
    "PTXAsm",
    "constraint_for",
    "escape_asm",
    "inline_asm",
]

_PLACEHOLDER_RE = re.compile(r"\{\{(o|i)(\d+)\}\}")
_OPERAND_RE = re.compile(r"\$(\$|\d+)")


class InlinePTXError(TyloError):
    """An inline PTX call whose operands and text do not agree, or an unsupported type."""


def constraint_for(ty: ir.Type, what: str = "operand") -> str:
    """The NVPTX inline-asm constraint letter for a value of IR type ``ty``.

    >>> constraint_for(ir.IntType(32)), constraint_for(ir.DoubleType())
    ('r', 'd')
    """
    if isinstance(ty, ir.IntType):
        letter = {16: "h", 32: "r", 64: "l"}.get(ty.width)
        if letter is not None:
            return letter
    elif isinstance(ty, ir.FloatType):
        return "f"
    elif isinstance(ty, ir.DoubleType):
        return "d"
    elif isinstance(ty, ir.HalfType):
        return "h"
    elif isinstance(ty, ir.PointerType):
        return "l"
    raise InlinePTXError(
        f"inline PTX: {what} of IR type {ty} has no register constraint; use i16, i32, i64, "
        "f32, f64 or a pointer (widen i1/i8 values to i32 first)"
    )


def escape_asm(text: str) -> str:
    """Escape PTX text for an LLVM inline-asm string literal (after operand numbering):
    backslash to ``\\5C``, double quote to ``\\22``, newline to ``\\0A``, tab to ``\\09``.

    >>> escape_asm('a\\\\b "c"')
    'a\\\\5Cb \\\\22c\\\\22'
    """
    return (
        text.replace("\\", "\\5C").replace('"', "\\22").replace("\n", "\\0A").replace("\t", "\\09")
    )


class PTXAsm:
    """One inline-asm call under construction (see the module docstring).

    ``name`` identifies the call in error messages. Placeholders returned by
    :meth:`output`, :meth:`input` and :meth:`inout` look like ``{{o0}}`` / ``{{i0}}``;
    literal ``$`` in the PTX text is escaped for you.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._outputs: list[tuple[ir.Type, str]] = []
        self._inputs: list[tuple[ir.Value, str]] = []
        self._lines: list[str] = []

    def output(self, ty: ir.Type, constraint: str | None = None) -> str:
        """Declare an output register of IR type ``ty``; returns its placeholder."""
        c = constraint or constraint_for(ty, f"{self.name}: output {len(self._outputs)}")
        self._outputs.append((ty, "=" + c))
        return f"{{{{o{len(self._outputs) - 1}}}}}"

    def input(self, value: ir.Value, constraint: str | None = None) -> str:
        """Declare an input; returns its placeholder. Constant ints may use ``n``."""
        c = constraint or constraint_for(value.type, f"{self.name}: input {len(self._inputs)}")
        self._inputs.append((value, c))
        return f"{{{{i{len(self._inputs) - 1}}}}}"

    def inout(self, value: ir.Value) -> str:
        """An operand read and written in place (an output tied to an input, e.g. an MMA
        accumulator); returns the output's placeholder, which stands for both."""
        out = self.output(value.type)
        index = len(self._outputs) - 1
        self._inputs.append((value, f"{{{{tie{index}}}}}"))
        return out

    def line(self, text: str) -> None:
        """Append one line of PTX (use the placeholders; ``$`` is literal)."""
        self._lines.append(text)

    @property
    def operand_count(self) -> int:
        return len(self._outputs) + len(self._inputs)

    def text(self) -> str:
        """The PTX text with operands numbered ``$0..`` (outputs first), before escaping."""
        n_out = len(self._outputs)
        used: set[int] = set()

        def number(m: re.Match[str]) -> str:
            k = int(m.group(2))
            idx = k if m.group(1) == "o" else n_out + k
            limit = n_out if m.group(1) == "o" else len(self._inputs)
            if k >= limit:
                kind = "output" if m.group(1) == "o" else "input"
                raise InlinePTXError(
                    f"inline PTX {self.name!r}: the text names {kind} {k}, but only {limit} "
                    f"{kind}(s) were declared"
                )
            used.add(idx)
            return f"${idx}"

        body = "\n\t".join(line.replace("$", "$$") for line in self._lines)
        body = _PLACEHOLDER_RE.sub(number, body)
        tied = {n_out + k for k, (_, c) in enumerate(self._inputs) if c.startswith("{{tie")}
        missing = sorted(set(range(self.operand_count)) - used - tied)
        if missing:
            raise InlinePTXError(
                f"inline PTX {self.name!r}: operand(s) {missing} declared but not used in the "
                f"text ({self.operand_count} declared: {n_out} output(s), "
                f"{len(self._inputs)} input(s)): {body!r}"
            )
        return body

    def constraints(self, *, memory: bool = False) -> str:
        parts = [c for _, c in self._outputs]
        for _, c in self._inputs:
            parts.append(c[5:-2] if c.startswith("{{tie") else c)
        if memory:
            parts.append("~{memory}")
        return ",".join(parts)

    def emit(
        self, builder: ir.IRBuilder, *, side_effects: bool = False, memory: bool = False
    ) -> list[ir.Value]:
        """Insert the asm call at ``builder``; returns the output values in order.

        ``memory=True`` adds the ``~{memory}`` clobber and implies side effects.
        """
        if not self._lines:
            raise InlinePTXError(f"inline PTX {self.name!r}: no PTX text was added")
        text = self.text()
        out_types = [t for t, _ in self._outputs]
        if not out_types:
            ret: ir.Type = ir.VoidType()
        elif len(out_types) == 1:
            ret = out_types[0]
        else:
            ret = ir.LiteralStructType(out_types)
        fnty = ir.FunctionType(ret, [v.type for v, _ in self._inputs])
        asm = ir.InlineAsm(
            fnty, escape_asm(text), self.constraints(memory=memory), side_effects or memory
        )
        result = builder.call(asm, [v for v, _ in self._inputs])
        if len(out_types) <= 1:
            return [result] if out_types else []
        return [builder.extract_value(result, i) for i in range(len(out_types))]


def inline_asm(
    builder: ir.IRBuilder,
    text: str,
    outputs: Sequence[ir.Type],
    inputs: Sequence[ir.Value],
    *,
    side_effects: bool = False,
    memory: bool = False,
    name: str | None = None,
) -> list[ir.Value]:
    """Emit PTX ``text`` that already uses ``$0..`` numbering (outputs first).

    The count check applies: every operand ``0 .. len(outputs)+len(inputs)-1`` must appear,
    and no other. A literal ``$`` must be written ``$$``.
    """
    label = name or text.split(None, 1)[0] if text.strip() else "asm"
    n = len(outputs) + len(inputs)
    seen = {int(m.group(1)) for m in _OPERAND_RE.finditer(text) if m.group(1) != "$"}
    if seen != set(range(n)):
        raise InlinePTXError(
            f"inline PTX {label!r}: {len(outputs)} output(s) and {len(inputs)} input(s) "
            f"declare operands {list(range(n))}, but the text uses {sorted(seen)}: {text!r}"
        )
    asm = PTXAsm(label)
    for t in outputs:
        asm.output(t)
    for v in inputs:
        asm.input(v)
    # already numbered: bypass placeholder numbering but keep the escaping
    out_types = list(outputs)
    ret: ir.Type
    if not out_types:
        ret = ir.VoidType()
    elif len(out_types) == 1:
        ret = out_types[0]
    else:
        ret = ir.LiteralStructType(out_types)
    fnty = ir.FunctionType(ret, [v.type for v in inputs])
    call = builder.call(
        ir.InlineAsm(
            fnty, escape_asm(text), asm.constraints(memory=memory), side_effects or memory
        ),
        list(inputs),
    )
    if len(out_types) <= 1:
        return [call] if out_types else []
    return [builder.extract_value(call, i) for i in range(len(out_types))]
