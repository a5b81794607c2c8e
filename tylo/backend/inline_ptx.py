"""Inline PTX for NVVM IR: counted operands, constraint letters by type, escaping.

llvmlite prints an inline-asm string verbatim between double quotes, and LLVM reads it with
its own escapes and operand syntax, so three rules apply (``docs/toolchain.md``):

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
from typing import Any

from llvmlite import ir

from tylo.errors import TyloError

__all__ = [
    "PTX_INSTRUCTIONS",
    "InlinePTXError",
    "PTXAsm",
    "address_operands",
    "constraint_for",
    "escape_asm",
    "has_destination",
    "inline_asm",
    "instruction_effects",
    "unknown_instructions",
]

_PLACEHOLDER_RE = re.compile(r"\{\{(o|i)(\d+)\}\}")
_OPERAND_RE = re.compile(r"\$(\$|\d+)")


# The instruction names of PTX ISA chapter 9.7 ("Instructions"), by their first component.
PTX_INSTRUCTIONS: frozenset[str] = frozenset(
    """
    abs activemask add addc alloca and applypriority atom bar barrier bfe bfi bfind bmsk
    bra brev brkpt brx call clusterlaunchcontrol clz cnot copysign cos cp createpolicy cvt
    cvta discard div dp2a dp4a elect ex2 exit fence fma fns getctarank griddepcontrol
    isspacep istypep ld ldmatrix ldu lg2 lop3 mad mad24 madc mapa match max mbarrier
    membar min mma mov movmatrix mul mul24 multimem nanosleep neg not or pmevent popc
    prefetch prefetchu prmt rcp red redux rem ret rsqrt sad selp set setmaxnreg setp shf
    shfl shl shr sin slct sqrt st stackrestore stacksave stmatrix sub subc suld suq sured
    sust szext tanh tcgen05 tensormap testp tex tld4 trap txq vabsdiff vabsdiff2
    vabsdiff4 vadd vadd2 vadd4 vavrg2 vavrg4 vmad vmax vmax2 vmax4 vmin vmin2 vmin4 vote
    vset vset2 vset4 vshl vshr vsub vsub2 vsub4 wgmma wmma xor
    """.split()
)

# Instructions that read or write memory, or order memory accesses (PTX ISA 9.7.9 data
# movement, 9.7.13 synchronization, 9.7.14-16 matrix units, 9.7.10 texture/surface):
# as inline asm they need side effects (LLVM deletes or merges an asm whose results it
# does not need) and a ``~{memory}`` clobber (LLVM moves loads and stores across an asm
# that does not say it touches memory).
_MEMORY: frozenset[str] = frozenset(
    """
    ld ldu st red atom cp ldmatrix stmatrix prefetch prefetchu mbarrier bar barrier fence
    membar wgmma wmma tcgen05 multimem discard applypriority tensormap suld sust sured tex
    tld4 clusterlaunchcontrol alloca stacksave stackrestore
    """.split()
)
# Instructions with effects beyond their results: control of the thread or the warp
# (trap, exit, nanosleep, setmaxnreg, griddepcontrol, pmevent, brkpt) and warp-wide
# operations whose result depends on which lanes execute them together (vote, shfl,
# match, redux, elect, activemask): they must not be removed, merged or moved.
_EFFECTS: frozenset[str] = frozenset(
    """
    trap exit brkpt nanosleep pmevent setmaxnreg griddepcontrol vote shfl match redux elect
    activemask bra brx call ret
    """.split()
)
# Special registers that change between reads (PTX ISA 10: %clock, %clock64,
# %globaltimer, performance counters): a mov from them is not a pure function.
_VOLATILE_SREG = re.compile(r"%(?:clock|globaltimer|pm\d)")
# Instructions whose short form has no destination operand (PTX ISA 9.7, per instruction).
_NO_DESTINATION: frozenset[str] = frozenset(
    """
    st red bar barrier fence membar prefetch prefetchu trap exit brkpt nanosleep pmevent
    setmaxnreg griddepcontrol discard applypriority stmatrix tensormap cp sust sured
    mbarrier.init mbarrier.inval mbarrier.expect_tx mbarrier.complete_tx multimem.st
    multimem.red wgmma.fence wgmma.commit_group wgmma.wait_group
    """.split()
)
# Input operands that are addresses, written ``[a]`` in the short form (0 = first input).
_ADDRESSES: dict[str, tuple[int, ...]] = {
    "ld": (0,),
    "ldu": (0,),
    "st": (0,),
    "red": (0,),
    "atom": (0,),
    "prefetch": (0,),
    "prefetchu": (0,),
    "discard": (0,),
    "applypriority": (0,),
    "mbarrier": (0,),
    "multimem": (0,),
    "cp.async.ca": (0, 1),
    "cp.async.cg": (0, 1),
}
_INSTRUCTION_RE = re.compile(r"^\s*(?:@!?%?\w+\s+)?([a-z][a-z0-9_]*(?:\.[A-Za-z0-9_:]+)*)")


def _key(instruction: str, table: Any) -> Any:
    """The longest dotted prefix of ``instruction`` that is a key of ``table``."""
    parts = instruction.split(".")
    for k in range(len(parts), 0, -1):
        key = ".".join(parts[:k])
        if key in table:
            return key
    return None


def has_destination(instruction: str) -> bool:
    """Whether the dotted ``instruction`` (``"red.global.add.u32"``) writes a destination
    register in its plain form (PTX ISA 9.7); ``st``, ``red``, ``bar``, ``fence``... do not.

    >>> has_destination("atom.global.add.u32"), has_destination("red.global.add.u32")
    (True, False)
    """
    return _key(instruction, _NO_DESTINATION) is None


def address_operands(instruction: str) -> tuple[int, ...]:
    """The input operands (0 = first input) of the dotted ``instruction`` that are
    addresses, written ``[a]`` in PTX: the first of ``ld``/``st``/``red``/``atom``...

    >>> address_operands("red.global.add.u32"), address_operands("fma.rn.f32")
    ((0,), ())
    """
    key = _key(instruction, _ADDRESSES)
    return _ADDRESSES[key] if key is not None else ()


def instruction_effects(text: str) -> tuple[bool, bool]:
    """``(side_effects, memory)`` that inline PTX ``text`` needs (one instruction name or a
    template of several): memory for instructions that access or order memory, side
    effects for those and for instructions with effects of their own (trap, warp votes
    and shuffles, reads of %clock...).

    >>> instruction_effects("red.global.add.u32"), instruction_effects("fma.rn.f32 $0, $1;")
    ((True, True), (False, False))
    """
    memory = False
    side = bool(_VOLATILE_SREG.search(text))
    for name in _instruction_names(text):
        root = name.split(".")[0]
        if root in _MEMORY:
            side = memory = True
        elif root in _EFFECTS:
            side = True
    return side, memory


def unknown_instructions(text: str) -> list[str]:
    """The instruction names in PTX ``text`` (a template of one or more statements) that
    are not PTX instructions; directives (``.reg``), labels (``done:``), operands and
    predicates are not instruction names.

    >>> unknown_instructions("{ .reg .pred p; setp.ne.b32 p, $1, 0; @p fooo.b32 $0, 1; }")
    ['fooo.b32']
    """
    return [name for name in _instruction_names(text) if name.split(".")[0] not in PTX_INSTRUCTIONS]


_LABEL_RE = re.compile(r"^[$A-Za-z_][$\w]*\s*:(?!:)\s*")


def _instruction_names(text: str) -> list[str]:
    """The dotted instruction name of each statement of PTX ``text`` (labels skipped)."""
    out = []
    for stmt in re.split(r"[;{}\n]", text):
        body = stmt.strip()
        while (label := _LABEL_RE.match(body)) is not None:
            body = body[label.end() :]
        m = _INSTRUCTION_RE.match(body)
        if m is not None:
            out.append(m.group(1))
    return out


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

        ``memory=True`` adds the ``~{memory}`` clobber and implies side effects; an asm
        without outputs always has side effects (LLVM would delete it otherwise).
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
        effects = side_effects or memory or not out_types
        asm = ir.InlineAsm(fnty, escape_asm(text), self.constraints(memory=memory), effects)
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
    and no other. A literal ``$`` must be written ``$$``. Without outputs the asm always
    has side effects (it would be dead code otherwise).
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
            fnty,
            escape_asm(text),
            asm.constraints(memory=memory),
            side_effects or memory or not out_types,
        ),
        list(inputs),
    )
    if len(out_types) <= 1:
        return [call] if out_types else []
    return [builder.extract_value(call, i) for i in range(len(out_types))]
