"""Thread and block indices, barriers, warp shuffles, and the inline-PTX escape hatch.

Index space is symbolic: ``thread_idx.x`` is an index symbol ``tid_x`` with the fact
``tid_x < block_dim.x`` (the block shape is static, part of the specialization, and
``block_dim.x`` is a Python int); ``block_idx.x`` is ``bid_x < grid_dim.x``; ``grid_dim``
components are runtime extents. :func:`lane_id` and :func:`warp_id` are expressions over
the linear thread index and ``WARP_SIZE``. Special registers are read once, in the
kernel's entry block, and only when used; an axis of extent 1 is the constant 0.
"""

from __future__ import annotations

import re
from typing import Any

from llvmlite import ir

from tylo import dtypes as dt
from tylo.backend.inline_ptx import (
    PTX_INSTRUCTIONS,
    address_operands,
    has_destination,
    inline_asm,
    instruction_effects,
    unknown_instructions,
)
from tylo.kernel import facts
from tylo.kernel.context import TraceContext, current
from tylo.kernel.errors import TraceError
from tylo.kernel.values import Value, as_value, convert, ir_type

__all__ = [
    "FULL_MASK",
    "WARP_SIZE",
    "block_dim",
    "block_idx",
    "grid_dim",
    "lane_id",
    "linear_thread_idx",
    "ptx",
    "setup_indices",
    "shfl_down",
    "shfl_idx",
    "shfl_up",
    "shfl_xor",
    "sync_threads",
    "sync_warp",
    "thread_idx",
    "value",
    "warp_id",
]

WARP_SIZE = 32  # threads per warp (CUDA C++ Programming Guide, "SIMT Architecture")
FULL_MASK = 0xFFFFFFFF
# Grid limits (CUDA C++ Programming Guide, "Compute Capabilities", table of features):
# grid x up to 2**31 - 1 blocks, y and z up to 65535.
_GRID_MAX = {"x": 2**31 - 1, "y": 65535, "z": 65535}
_AXES = "xyz"


def setup_indices(ctx: TraceContext) -> None:
    """Create the index symbols of a trace (called once, before the kernel body runs)."""
    for axis, extent in zip(_AXES, ctx.block):
        if extent == 1:
            ctx.indices[f"tid.{axis}"] = 0
        else:
            sym = facts.index_symbol(f"tid_{axis}", upper=extent)
            ctx.bind_lazy(sym, _sreg(ctx, f"tid.{axis}"))
            ctx.symbol_bounds[sym] = (0, extent - 1)
            ctx.indices[f"tid.{axis}"] = sym
        n = facts.dim(f"grid_dim_{axis}")
        ctx.bind_lazy(n, _sreg(ctx, f"nctaid.{axis}"))
        ctx.symbol_bounds[n] = (1, _GRID_MAX[axis])
        b = facts.index_symbol(f"bid_{axis}", upper=n)
        ctx.bind_lazy(b, _sreg(ctx, f"ctaid.{axis}"))
        ctx.symbol_bounds[b] = (0, _GRID_MAX[axis] - 1)
        ctx.indices[f"nctaid.{axis}"] = n
        ctx.indices[f"ctaid.{axis}"] = b


def _sreg(ctx: TraceContext, name: str) -> Any:
    def make(prologue: ir.IRBuilder) -> ir.Value:
        return ctx.module.sreg(prologue, name)

    return make


class Axes3:
    """``.x``, ``.y``, ``.z`` of an index space, read from the trace in progress by
    ``_get(axis)``; ``kind`` says which space, ``what`` is the public name (``repr``). The
    base of ``tylo.thread_idx`` and its kin, and of :mod:`tylo.nvgpu.cluster`'s."""

    __slots__ = ("_kind", "_what")
    _prefix = "tylo."

    def __init__(self, kind: str, what: str) -> None:
        self._kind = kind
        self._what = what

    def _get(self, axis: str) -> Any:
        raise NotImplementedError

    @property
    def x(self) -> Any:
        return self._get("x")

    @property
    def y(self) -> Any:
        return self._get("y")

    @property
    def z(self) -> Any:
        return self._get("z")

    def __repr__(self) -> str:
        return f"{self._prefix}{self._what}"


class _Dim3(Axes3):
    """The CTA's index spaces: thread and block indices, grid and block shapes."""

    __slots__ = ()

    def _get(self, axis: str) -> Any:
        ctx = current()
        if self._kind == "ntid":
            return ctx.block[_AXES.index(axis)]
        return ctx.indices[f"{self._kind}.{axis}"]


thread_idx = _Dim3("tid", "thread_idx")
block_idx = _Dim3("ctaid", "block_idx")
grid_dim = _Dim3("nctaid", "grid_dim")
block_dim = _Dim3("ntid", "block_dim")


def linear_thread_idx() -> Any:
    """``tid.x + bx * (tid.y + by * tid.z)``: the thread's rank in its block."""
    ctx = current()
    bx, by, _ = ctx.block
    t = ctx.indices
    return t["tid.x"] + bx * (t["tid.y"] + by * t["tid.z"])


def lane_id() -> Any:
    """The thread's lane in its warp: ``linear_thread_idx() mod WARP_SIZE``."""
    from tylo.layouts.symbolic import mod

    return mod(linear_thread_idx(), WARP_SIZE)


def warp_id() -> Any:
    """The warp's rank in the block: ``linear_thread_idx() // WARP_SIZE``."""
    from tylo.layouts.symbolic import floor_div

    return floor_div(linear_thread_idx(), WARP_SIZE)


def value(x: Any, dtype: Any = None) -> Value:
    """``x`` (a number or an index expression) as a runtime Value of ``dtype`` (default:
    f32 for floats, the index width for ints). Use it to start a loop-carried Value
    (``acc = tylo.value(0.0)``) or to compute with an index in data space."""
    d = None if dtype is None else dt.dtype_of(dtype)
    v = as_value(x, d)
    return v if d is None else convert(v, d)


# ---------------------------------------------------------------------------- barriers


def sync_threads() -> None:
    """Barrier for all threads of the block (``bar.sync 0``, ``__syncthreads``)."""
    ctx = current()
    fn = ctx.module.intrinsic("llvm.nvvm.barrier0", ir.VoidType(), [])
    ctx.builder.call(fn, [])
    ctx.barrier_epoch += 1  # the race check's epochs (tylo.kernel.races)


def sync_warp(mask: int = FULL_MASK) -> None:
    """Barrier for the lanes of ``mask`` in the warp (``bar.warp.sync``, ``__syncwarp``)."""
    ctx = current()
    ctx.other_sync = True  # orders a warp's lanes: the race check claims no race then
    fn = ctx.module.intrinsic("llvm.nvvm.bar.warp.sync", ir.VoidType(), [ir.IntType(32)])
    ctx.builder.call(fn, [_i32(mask, "sync_warp mask")])


def _i32(x: Any, what: str) -> ir.Value:
    if isinstance(x, int):
        return ir.IntType(32)(x & 0xFFFFFFFF)
    v = as_value(x, dt.i32) if not isinstance(x, Value) else x
    if v.dtype.is_float or v.dtype is dt.bool_:
        raise TraceError(f"{what} must be an integer, got a {v.dtype} value")
    return convert(v, dt.u32 if v.dtype.kind == "u" else dt.i32).use()


# ---------------------------------------------------------------------------- shuffles


def _shuffle(mode: str, v: Any, lane: Any, width: int, mask: int) -> Any:
    """``shfl.sync.<mode>`` of one Value (PTX ISA, "shfl.sync"; needs sm_30+ and, with
    ``.sync``, CUDA 9 semantics: every lane in ``mask`` must execute it)."""
    hook = getattr(type(v), "__tylo_elementwise__", None)
    if hook is not None:
        return hook(f"shfl_{mode}", (v, lane, width, mask))
    if width not in (1, 2, 4, 8, 16, 32):
        raise TraceError(f"shfl_{mode}: width must be a power of two <= 32, got {width}")
    if not isinstance(v, Value):
        raise TraceError(
            f"shfl_{mode}: shuffles a runtime Value, got {type(v).__name__} "
            f"{v!r} (a value known at trace time is the same in every lane)"
        )
    ctx = current()
    b = ctx.builder
    # c = ((WARP_SIZE - width) << 8) | clamp; clamp 0 for up, 31 otherwise (PTX ISA shfl)
    c = ir.IntType(32)(((WARP_SIZE - width) << 8) | (0 if mode == "up" else 0x1F))
    lane_v = _i32(lane, f"shfl_{mode} lane")
    mask_v = _i32(mask, f"shfl_{mode} mask")
    d = v.dtype
    if d is dt.f32:
        fn = ctx.module.intrinsic(
            f"llvm.nvvm.shfl.sync.{mode}.f32",
            ir.FloatType(),
            [ir.IntType(32), ir.FloatType(), ir.IntType(32), ir.IntType(32)],
        )
        return Value(d, b.call(fn, [mask_v, v.use(), lane_v, c]))
    i32fn = ctx.module.intrinsic(
        f"llvm.nvvm.shfl.sync.{mode}.i32", ir.IntType(32), [ir.IntType(32)] * 4
    )
    raw = v.use()
    if d.bits == 64:
        pair = b.bitcast(raw, ir.VectorType(ir.IntType(32), 2))
        halves = [
            b.call(i32fn, [mask_v, b.extract_element(pair, ir.IntType(32)(k)), lane_v, c])
            for k in (0, 1)
        ]
        out: ir.Value = ir.Constant(ir.VectorType(ir.IntType(32), 2), ir.Undefined)
        for k, h in enumerate(halves):
            out = b.insert_element(out, h, ir.IntType(32)(k))
        return Value(d, b.bitcast(out, ir_type(d)))
    if d.bits == 32:
        word = raw if not d.is_float else b.bitcast(raw, ir.IntType(32))
        return Value(d, b.call(i32fn, [mask_v, word, lane_v, c]))
    word = b.zext(raw, ir.IntType(32))
    return Value(d, b.trunc(b.call(i32fn, [mask_v, word, lane_v, c]), ir_type(d)))


def shfl_xor(v: Any, lane_mask: Any, *, width: int = WARP_SIZE, mask: int = FULL_MASK) -> Any:
    """``v`` from lane ``lane ^ lane_mask`` (butterfly; ``shfl.sync.bfly``)."""
    return _shuffle("bfly", v, lane_mask, width, mask)


def shfl_idx(v: Any, src_lane: Any, *, width: int = WARP_SIZE, mask: int = FULL_MASK) -> Any:
    """``v`` from lane ``src_lane`` (broadcast; ``shfl.sync.idx``)."""
    return _shuffle("idx", v, src_lane, width, mask)


def shfl_down(v: Any, delta: Any, *, width: int = WARP_SIZE, mask: int = FULL_MASK) -> Any:
    """``v`` from lane ``lane + delta`` (own value past the segment end; ``shfl.sync.down``)."""
    return _shuffle("down", v, delta, width, mask)


def shfl_up(v: Any, delta: Any, *, width: int = WARP_SIZE, mask: int = FULL_MASK) -> Any:
    """``v`` from lane ``lane - delta`` (own value before the segment start; ``shfl.sync.up``)."""
    return _shuffle("up", v, delta, width, mask)


# ---------------------------------------------------------------------------- inline PTX

_PTX_TYPES = {
    "f64": dt.f64,
    "f32": dt.f32,
    "f16": dt.f16,
    "bf16": dt.bf16,
    "f16x2": dt.u32,
    "bf16x2": dt.u32,
    "s64": dt.i64,
    "s32": dt.i32,
    "s16": dt.i16,
    "u64": dt.u64,
    "u32": dt.u32,
    "u16": dt.u16,
    "b64": dt.u64,
    "b32": dt.u32,
    "b16": dt.u16,
}
_WIDER = {dt.i32: dt.i64, dt.u32: dt.u64, dt.i16: dt.i32, dt.u16: dt.u32, dt.f32: dt.f64}
_NAME_RE = re.compile(r"^[a-z][a-z0-9_]*(\.[A-Za-z0-9_:]+)*$")


def _result_dtype(instruction: str) -> Any:
    parts = instruction.split(".")
    for part in parts[1:]:
        d = _PTX_TYPES.get(part)
        if d is not None:
            if "wide" in parts[1:]:
                return _WIDER.get(d, d)
            return d
    return None


_CONTROL = ("bra", "brx", "call", "ret")


def _short_form(instruction: str, out: Any) -> tuple[Any, ...]:
    """The result dtypes of the plain instruction name ``instruction`` (checked)."""
    root = instruction.split(".")[0]
    if root not in PTX_INSTRUCTIONS:
        raise TraceError(
            f"tylo.ptx: {root!r} (in {instruction!r}) is not a PTX instruction (PTX ISA "
            "9.7); check the spelling, or pass a full template with $0.. operands"
        )
    if root in _CONTROL:
        raise TraceError(
            f"tylo.ptx: {instruction!r} transfers control, which inline asm cannot do "
            "inside the kernel's IR; use `if`, loops and helpers instead"
        )
    if root == "setp":
        raise TraceError(
            "tylo.ptx: setp writes a predicate; compare Values instead (a < b gives a bool Value)"
        )
    if out != "auto":
        return _explicit_outs(out)
    if not has_destination(instruction):
        return ()
    res = _result_dtype(instruction)
    if res is None:
        raise TraceError(
            f"tylo.ptx: cannot infer the result type of {instruction!r} (no type suffix "
            "such as .f32 or .u32); pass out=tylo.<dtype>, or out=None if it writes no "
            "register"
        )
    return (res,)


def _explicit_outs(out: Any) -> tuple[Any, ...]:
    if out is None:
        return ()
    if isinstance(out, tuple):
        return tuple(dt.dtype_of(o) for o in out)
    return (dt.dtype_of(out),)


def ptx(
    instruction: str,
    *args: Any,
    out: Any = "auto",
    side_effects: bool = False,
    memory: bool = False,
) -> Any:
    """Emit one PTX instruction as inline asm and return its result Value(s).

    ``ptx("fma.rn.f32", a, b, c)`` writes ``fma.rn.f32 $0, $1, $2, $3;`` with operand
    constraints from the argument dtypes and the result dtype from the instruction's type
    suffix (the first one, so ``cvt.rn.f16.f32`` gives f16; ``.wide`` doubles it).
    Instructions without a destination (``st``, ``red``, ``bar``, ``fence``...) return
    None, and the address operand of a memory instruction is written ``[a]``:
    ``ptx("red.global.add.u32", out.address(i), v)`` is ``red.global.add.u32 [$0], $1;``
    (``out.address(i)`` is a u64 global or u32 shared address). An unknown instruction
    name is a TraceError. Python numbers become values of the result dtype. A full
    template with ``$0..`` (outputs first) is accepted too: ``ptx("mov.b64 {$0, $1}, $2;",
    x, out=(tylo.u32, tylo.u32))``; ``out`` is a dtype, a tuple of dtypes, or None (no
    result). Instructions that access or order memory (ld, st, red, atom, cp, bar, fence,
    mbarrier...) get side effects and a memory clobber, and those with other effects
    (trap, vote, shfl, reads of %clock...) side effects, from their names; an asm without
    results always keeps its side effects. ``side_effects`` / ``memory`` add them to
    any other instruction.
    """
    ctx = current()
    if not isinstance(instruction, str):
        raise TraceError(f"tylo.ptx: the instruction must be a str, got {instruction!r}")
    template = any(ch in instruction for ch in " ${};")
    if any(w in instruction for w in ("bar", "fence", "membar")):
        ctx.other_sync = True  # synchronization the race check does not model
    if not template and not _NAME_RE.match(instruction):
        raise TraceError(f"tylo.ptx: {instruction!r} is not a PTX instruction name")
    if template:
        unknown = unknown_instructions(instruction)
        if unknown:
            raise TraceError(
                f"tylo.ptx: {', '.join(map(repr, unknown))} in {instruction!r} is not a PTX "
                "instruction (PTX ISA 9.7); check the spelling"
            )
        outs = _explicit_outs(None if out == "auto" else out)
        if out == "auto":
            res = _result_dtype(instruction.split()[0])
            outs = () if res is None or not has_destination(instruction.split()[0]) else (res,)
    else:
        outs = _short_form(instruction, out)
    like = outs[0] if outs else None
    values = []
    for a in args:
        if isinstance(a, Value):
            values.append(a)
        else:
            if like is None:
                raise TraceError(
                    f"tylo.ptx: give {a!r} as a Value (tylo.value(x, dtype)); "
                    "its type cannot be inferred"
                )
            values.append(as_value(a, like))
    for v in values:
        if v.dtype is dt.bool_ or v.dtype.bits == 8:
            raise TraceError(
                f"tylo.ptx: a {v.dtype} operand has no PTX register "
                "constraint; convert it to a 16- to 64-bit type"
            )
    if template:
        text = instruction
    else:
        addresses = address_operands(instruction)
        for k in addresses:
            if k < len(values) and (values[k].dtype.is_float or values[k].dtype.bits < 32):
                raise TraceError(
                    f"tylo.ptx: operand {k + 1} of {instruction!r} is an address; got a "
                    f"{values[k].dtype} value (use t.address(i): u64 global, u32 shared)"
                )
        ops = [f"${k}" for k in range(len(outs))]
        ops += [
            f"[${len(outs) + k}]" if k in addresses else f"${len(outs) + k}"
            for k in range(len(values))
        ]
        text = f"{instruction} {', '.join(ops)};" if ops else f"{instruction};"
    auto_side, auto_memory = instruction_effects(text)
    memory = memory or auto_memory
    results = inline_asm(
        ctx.builder,
        text,
        [ir_type(d) for d in outs],
        [v.use() for v in values],
        side_effects=side_effects or memory or auto_side or not outs,
        memory=memory,
        name=instruction.split()[0],
    )
    wrapped = [Value(d, r) for d, r in zip(outs, results)]
    if not wrapped:
        return None
    return wrapped[0] if len(wrapped) == 1 and not isinstance(out, tuple) else tuple(wrapped)
