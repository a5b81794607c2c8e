"""Short wrappers of the PTX instructions the tile operations emit, as inline PTX.

Each function takes an ``llvmlite`` IR builder and IR values and returns IR values; it
names its PTX instruction, the PTX ISA section that defines it and the oldest architecture
that has it (:data:`MIN_ARCH`). cp.async, ldmatrix and mma.sync have no NVVM intrinsic on
the LLVM 7 path libNVVM takes, so they are inline PTX (``docs/toolchain.md``);
shared-memory addresses are 32-bit (``[r]`` operands of ``.shared`` instructions).

The kernel-facing operations (:mod:`tylo.nvgpu.cpasync`, :mod:`tylo.nvgpu.warp.mma`,
:mod:`tylo.tile.reduce`,
:mod:`tylo.tile.access`) are built on these; kernels rarely call them directly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llvmlite import ir

from tylo import dtypes as dt
from tylo.backend.inline_ptx import PTXAsm
from tylo.errors import TyloError

__all__ = [
    "MIN_ARCH",
    "PTXOpError",
    "bar_sync",
    "check_arch",
    "cp_async",
    "cp_async_commit_group",
    "cp_async_wait_group",
    "cvt_pack_f32x2",
    "ld_global_b16",
    "ld_shared",
    "ld_shared_vector",
    "ldmatrix",
    "mma_m16n8k16",
    "shfl_bfly",
    "st_global",
    "st_shared",
    "stmatrix",
]

I16 = ir.IntType(16)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
F32 = ir.FloatType()

# instruction -> (compute capability, PTX ISA section)
MIN_ARCH: dict[str, tuple[tuple[int, int], str]] = {
    "cp.async": ((8, 0), "9.7.9.25 Data Movement: cp.async"),
    "cp.async.commit_group": ((8, 0), "9.7.9.25.3.2 cp.async.commit_group"),
    "cp.async.wait_group": ((8, 0), "9.7.9.25.3.3 cp.async.wait_group"),
    "ldmatrix": ((7, 5), "9.7.14.5.15 Warp-level matrix load: ldmatrix"),
    "mma.m16n8k16": ((8, 0), "9.7.14.5.14 mma; fragments 9.7.14.5.8 (m16n8k16)"),
    "cvt.rn.bf16x2.f32": ((8, 0), "9.7.9.21 cvt (packed .bf16x2/.f16x2 destination)"),
    "shfl.sync.bfly": ((7, 0), "9.7.9.6 shfl.sync"),
    "mbarrier": ((9, 0), "9.7.13.15 mbarrier (expect_tx, try_wait.parity: sm_90)"),
    "setmaxnreg": ((9, 0), "9.7.17.1 setmaxnreg (sm_90a)"),
    "elect.sync": ((9, 0), "9.7.13.13 elect.sync"),
    "wgmma": ((9, 0), "9.7.15 Asynchronous warpgroup-level matrix instructions (sm_90a)"),
    "cluster": ((9, 0), "barrier.cluster, mapa, %cluster_* special registers (sm_90)"),
    "multicast": ((9, 0), "cp.async.bulk.tensor .multicast::cluster (sm_90)"),
    "stmatrix": ((9, 0), "9.7.14.5.16 Warp-level matrix store: stmatrix (sm_90)"),
}

# instructions that exist only on the arch-specific target (sm_90a, not sm_90)
ARCH_SPECIFIC = frozenset({"wgmma", "setmaxnreg"})


class PTXOpError(TyloError):
    """An instruction wrapper used with operands or a target it does not support."""


def check_arch(instruction: str, target: Any) -> None:
    """Raise when ``target`` (a :class:`~tylo.target.Target`) predates ``instruction``."""
    from tylo.target import Target

    if type(instruction) is not str or instruction not in MIN_ARCH:
        raise PTXOpError(
            f"check_arch: unknown instruction {instruction!r}; known: {sorted(MIN_ARCH)}"
        )
    if target is not None and not isinstance(target, Target):
        raise PTXOpError(f"check_arch: target must be a tylo Target or None, got {target!r}")
    need, section = MIN_ARCH[instruction]
    if target is not None and tuple(target.cc) < need:
        raise PTXOpError(
            f"{instruction} needs sm_{need[0]}{need[1]} or newer (PTX ISA {section}); the "
            f"kernel is compiled for {target}"
        )
    if target is not None and instruction in ARCH_SPECIFIC and not target.arch_specific:
        raise PTXOpError(
            f"{instruction} needs the arch-specific target sm_{need[0]}{need[1]}a (PTX ISA "
            f"{section}); the kernel is compiled for {target}"
        )


def _pred_prefix(asm: PTXAsm, pred: ir.Value | None) -> tuple[str, str, str]:
    """(block open, guard, block close) for an optional i32 predicate operand."""
    if pred is None:
        return "", "", ""
    p = asm.input(pred)
    return "{\n.reg .pred %p;\nsetp.ne.b32 %p, " + p + ", 0;", "@%p ", "}"


def _pred32(b: ir.IRBuilder, pred: ir.Value | None) -> ir.Value | None:
    if pred is None or pred.type == I32:
        return pred
    return b.zext(pred, I32)


def _global_address(b: ir.IRBuilder, ptr: ir.Value) -> ir.Value:
    return b.ptrtoint(ptr, I64) if isinstance(ptr.type, ir.PointerType) else ptr


def cp_async(
    b: ir.IRBuilder,
    dst: ir.Value,
    src: ir.Value,
    *,
    cp_size: int = 16,
    src_size: ir.Value | None = None,
    pred: ir.Value | None = None,
    prefetch: int | None = None,
) -> None:
    """``cp.async.{cg|ca}.shared.global [dst], [src], cp_size{, src_size}`` (sm_80; PTX ISA
    9.7.9.25). ``dst`` is a 32-bit shared address, ``src`` a global pointer or 64-bit
    address, both aligned to ``cp_size``. ``src_size`` (i32, at most ``cp_size``) copies
    that many bytes and zero-fills the rest; ``pred`` (i1/i32) skips the copy when false.
    16-byte copies bypass L1 (``.cg``); ``prefetch`` (64/128/256) adds an L2 prefetch hint.
    """
    if cp_size not in (4, 8, 16):
        raise PTXOpError(f"cp.async: cp-size must be 4, 8 or 16 bytes, got {cp_size}")
    asm = PTXAsm("cp.async")
    d = asm.input(dst)
    s = asm.input(_global_address(b, src))
    cache = "cg" if cp_size == 16 else "ca"
    hint = f".L2::{prefetch}B" if prefetch else ""
    tail = f", {asm.input(src_size)}" if src_size is not None else ""
    open_, guard, close = _pred_prefix(asm, _pred32(b, pred))
    lines = [open_] if open_ else []
    lines.append(f"{guard}cp.async.{cache}.shared.global{hint} [{d}], [{s}], {cp_size}{tail};")
    if close:
        lines.append(close)
    for line in lines:
        asm.line(line)
    asm.emit(b, memory=True)


def cp_async_commit_group(b: ir.IRBuilder) -> None:
    """``cp.async.commit_group`` (sm_80; PTX ISA 9.7.9.25.3.2): close the group of
    cp.async operations issued by this thread since the last commit."""
    b.call(
        ir.InlineAsm(
            ir.FunctionType(ir.VoidType(), []), "cp.async.commit_group;", "~{memory}", True
        ),
        [],
    )


def cp_async_wait_group(b: ir.IRBuilder, n: int) -> None:
    """``cp.async.wait_group n`` (sm_80; PTX ISA 9.7.9.25.3.3): wait until at most ``n``
    of this thread's committed groups are pending. Other threads' copies become visible
    only after a barrier."""
    if type(n) is not int or n < 0:
        raise PTXOpError(f"cp.async.wait_group: n must be a static int >= 0, got {n!r}")
    b.call(
        ir.InlineAsm(
            ir.FunctionType(ir.VoidType(), []), f"cp.async.wait_group {n};", "~{memory}", True
        ),
        [],
    )


def ldmatrix(
    b: ir.IRBuilder, addr: ir.Value, *, num: int = 4, trans: bool = False
) -> list[ir.Value]:
    """``ldmatrix.sync.aligned.m8n8.x{num}{.trans}.shared.b16`` (sm_75; PTX ISA
    9.7.14.5.15): each of the 8*num first lanes gives the 32-bit shared address of one
    16-byte row; each lane receives ``num`` 32-bit registers, register ``j`` holding row
    ``lane // 4``, columns ``2*(lane % 4) + (0, 1)`` of matrix ``j`` (transposed with
    ``.trans``). Returns the i32 registers."""
    if num not in (1, 2, 4):
        raise PTXOpError(f"ldmatrix: num must be 1, 2 or 4, got {num}")
    asm = PTXAsm("ldmatrix")
    outs = [asm.output(I32) for _ in range(num)]
    a = asm.input(addr)
    t = ".trans" if trans else ""
    asm.line(f"ldmatrix.sync.aligned.m8n8.x{num}{t}.shared.b16 {{{', '.join(outs)}}}, [{a}];")
    # reads shared memory written by other threads before a barrier: keep it ordered
    return asm.emit(b, memory=True)


def stmatrix(
    b: ir.IRBuilder, addr: ir.Value, regs: Sequence[ir.Value], *, trans: bool = False
) -> None:
    """``stmatrix.sync.aligned.m8n8.x{num}{.trans}.shared.b16 [addr], {regs}`` (sm_90; PTX
    ISA 9.7.14.5.16): ldmatrix's store counterpart, ``num = len(regs)`` (1, 2 or 4) i32
    registers per lane, register ``j`` holding row ``lane // 4``, columns
    ``2*(lane % 4) + (0, 1)`` of matrix ``j``; lanes ``8j..8j+7`` give the 32-bit shared
    addresses of matrix ``j``'s 8 rows (transposed with ``.trans``)."""
    if len(regs) not in (1, 2, 4):
        raise PTXOpError(f"stmatrix: 1, 2 or 4 registers, got {len(regs)}")
    asm = PTXAsm("stmatrix")
    a = asm.input(addr)
    rs = [asm.input(r) for r in regs]
    t = ".trans" if trans else ""
    asm.line(f"stmatrix.sync.aligned.m8n8.x{len(rs)}{t}.shared.b16 [{a}], {{{', '.join(rs)}}};")
    asm.emit(b, memory=True)


def mma_m16n8k16(
    b: ir.IRBuilder,
    a: Sequence[ir.Value],
    bb: Sequence[ir.Value],
    c: Sequence[ir.Value],
    dtype: Any,
) -> list[ir.Value]:
    """``mma.sync.aligned.m16n8k16.row.col.f32.{bf16|f16}.{..}.f32`` (sm_80; PTX ISA
    9.7.14.5.14): D = A*B + C for one warp, A as 4 packed registers, B as 2, C and D as 4
    f32 (the fragments of PTX ISA 9.7.14.5.8). D is tied to C (accumulates in place)."""
    d = dt.dtype_of(dtype)
    if d not in (dt.bf16, dt.f16):
        raise PTXOpError(f"mma.m16n8k16: inputs must be bf16 or f16, got {d}")
    if len(a) != 4 or len(bb) != 2 or len(c) != 4:
        raise PTXOpError(
            f"mma.m16n8k16: needs 4 A, 2 B and 4 C registers, got {len(a)}, {len(bb)}, {len(c)}"
        )
    asm = PTXAsm("mma.m16n8k16")
    outs = [asm.inout(x) for x in c]
    ai = [asm.input(x) for x in a]
    bi = [asm.input(x) for x in bb]
    asm.line(
        f"mma.sync.aligned.m16n8k16.row.col.f32.{d}.{d}.f32 {{{', '.join(outs)}}}, "
        f"{{{', '.join(ai)}}}, {{{', '.join(bi)}}}, {{{', '.join(outs)}}};"
    )
    return asm.emit(b)


def cvt_pack_f32x2(b: ir.IRBuilder, lo: ir.Value, hi: ir.Value, dtype: Any) -> ir.Value:
    """``cvt.rn.{bf16x2|f16x2}.f32 d, hi, lo`` (sm_80; PTX ISA 9.7.9.21): two f32 rounded
    to nearest even and packed, ``lo`` in the low half."""
    d = dt.dtype_of(dtype)
    if d not in (dt.bf16, dt.f16):
        raise PTXOpError(f"cvt pack: destination must be bf16 or f16, got {d}")
    asm = PTXAsm("cvt.pack")
    o = asm.output(I32)
    h = asm.input(hi)
    lo_ = asm.input(lo)
    asm.line(f"cvt.rn.{d}x2.f32 {o}, {h}, {lo_};")
    return asm.emit(b)[0]


def shfl_bfly(b: ir.IRBuilder, module: Any, value: ir.Value, lane_mask: int) -> ir.Value:
    """``shfl.sync.bfly.b32`` over the full warp (sm_70; PTX ISA 9.7.9.6): the value of
    lane ``lane ^ lane_mask``. f32 and i32 directly; 16-bit values travel widened, f64 as
    two halves."""
    t = value.type
    full = I32(0xFFFFFFFF)
    clamp = I32(0x1F)
    if isinstance(t, ir.FloatType) or t == I32:
        name = "llvm.nvvm.shfl.sync.bfly." + ("f32" if isinstance(t, ir.FloatType) else "i32")
        fn = module.intrinsic(name, t, [I32, t, I32, I32])
        return b.call(fn, [full, value, I32(lane_mask), clamp])
    if isinstance(t, ir.IntType) and t.width < 32:
        wide = shfl_bfly(b, module, b.zext(value, I32), lane_mask)
        return b.trunc(wide, t)
    if isinstance(t, ir.DoubleType) or t == I64:
        bits = b.bitcast(value, I64) if isinstance(t, ir.DoubleType) else value
        lo = shfl_bfly(b, module, b.trunc(bits, I32), lane_mask)
        hi = shfl_bfly(b, module, b.trunc(b.lshr(bits, I64(32)), I32), lane_mask)
        out = b.or_(b.zext(lo, I64), b.shl(b.zext(hi, I64), I64(32)))
        return b.bitcast(out, t) if isinstance(t, ir.DoubleType) else out
    raise PTXOpError(f"shfl.sync.bfly: cannot shuffle a value of IR type {t}")


_PTX_TYPE = {16: "b16", 32: "b32", 64: "b64"}


def _bits(t: ir.Type) -> int:
    if isinstance(t, ir.FloatType):
        return 32
    if isinstance(t, ir.DoubleType):
        return 64
    if isinstance(t, ir.IntType) and t.width in (16, 32, 64):
        width: int = t.width
        return width
    raise PTXOpError(f"shared/global access: unsupported IR type {t}")


def st_shared(
    b: ir.IRBuilder, addr: ir.Value, value: ir.Value, pred: ir.Value | None = None
) -> None:
    """``[@p] st.shared.b{16,32,64} [addr], value`` (PTX ISA 9.7.9.10 st): a store to a
    32-bit shared address, optionally predicated (no branch)."""
    asm = PTXAsm("st.shared")
    a = asm.input(addr)
    v = asm.input(value)
    open_, guard, close = _pred_prefix(asm, _pred32(b, pred))
    for line in (
        ([open_] if open_ else [])
        + [f"{guard}st.shared.{_PTX_TYPE[_bits(value.type)]} [{a}], {v};"]
        + ([close] if close else [])
    ):
        asm.line(line)
    asm.emit(b, memory=True)


def ld_shared(b: ir.IRBuilder, addr: ir.Value, ty: ir.Type) -> ir.Value:
    """``ld.shared.b{16,32,64} value, [addr]`` (PTX ISA 9.7.9.8 ld) from a 32-bit shared
    address."""
    asm = PTXAsm("ld.shared")
    o = asm.output(ty)
    a = asm.input(addr)
    asm.line(f"ld.shared.{_PTX_TYPE[_bits(ty)]} {o}, [{a}];")
    return asm.emit(b, memory=True)[0]


def ld_shared_vector(b: ir.IRBuilder, addr: ir.Value, ty: ir.Type, n: int) -> list[ir.Value]:
    """``ld.shared.v{n}.b32`` (PTX ISA 9.7.9.8 ld; n = 2 or 4) of 32-bit values from a
    16-byte (v4) or 8-byte (v2) aligned 32-bit shared address; returns the values."""
    if n not in (2, 4) or _bits(ty) != 32:
        raise PTXOpError(f"ld.shared vector: 2 or 4 32-bit values, got {n} of {ty}")
    asm = PTXAsm("ld.shared.v")
    outs = [asm.output(ty) for _ in range(n)]
    a = asm.input(addr)
    asm.line(f"ld.shared.v{n}.b32 {{{', '.join(outs)}}}, [{a}];")
    return asm.emit(b, memory=True)


def ld_global_b16(b: ir.IRBuilder, ptr: ir.Value, pred: ir.Value | None = None) -> ir.Value:
    """``ld.global.nc.b16`` (PTX ISA 9.7.9.8 ld; read-only path) of one 16-bit element,
    giving 0 when ``pred`` is false (no access is made then)."""
    asm = PTXAsm("ld.global.b16")
    o = asm.output(I16)
    a = asm.input(_global_address(b, ptr))
    open_, guard, close = _pred_prefix(asm, _pred32(b, pred))
    lines = [open_] if open_ else []
    if guard:
        lines.append(f"mov.b16 {o}, 0;")
    lines.append(f"{guard}ld.global.nc.b16 {o}, [{a}];")
    if close:
        lines.append(close)
    for line in lines:
        asm.line(line)
    return asm.emit(b, side_effects=True)[0]


def st_global(
    b: ir.IRBuilder, ptr: ir.Value, value: ir.Value, pred: ir.Value | None = None
) -> None:
    """A global store of one value; with ``pred``, ``@p st.global.b{32,..}`` (PTX ISA
    9.7.9.10 st), branch-free."""
    if pred is None:
        b.store(value, ptr)
        return
    asm = PTXAsm("st.global")
    a = asm.input(_global_address(b, ptr))
    v = asm.input(value)
    open_, guard, close = _pred_prefix(asm, _pred32(b, pred))
    for line in [open_, f"{guard}st.global.{_PTX_TYPE[_bits(value.type)]} [{a}], {v};", close]:
        asm.line(line)
    asm.emit(b, memory=True)


def bar_sync(b: ir.IRBuilder, module: Any) -> None:
    """``bar.sync 0`` (``llvm.nvvm.barrier0``; PTX ISA 9.7.13.4 bar): all threads of the
    block meet, and their earlier shared and global accesses are ordered before later ones."""
    fn = module.intrinsic("llvm.nvvm.barrier0", ir.VoidType(), [])
    b.call(fn, [])


# -- warpgroup MMA (sm_90a; PTX ISA 9.7.15) ----------------------------------------------------


def wgmma_fence(b: ir.IRBuilder) -> None:
    """``wgmma.fence.sync.aligned`` (PTX ISA 9.7.15.6.1)."""
    asm = PTXAsm("wgmma.fence")
    asm.line("wgmma.fence.sync.aligned;")
    asm.emit(b, memory=True)


def wgmma_commit_group(b: ir.IRBuilder) -> None:
    """``wgmma.commit_group.sync.aligned`` (PTX ISA 9.7.15.6.2)."""
    asm = PTXAsm("wgmma.commit_group")
    asm.line("wgmma.commit_group.sync.aligned;")
    asm.emit(b, memory=True)


def wgmma_wait_group(b: ir.IRBuilder, n: int, registers: Sequence[ir.Value]) -> list[ir.Value]:
    """``wgmma.wait_group.sync.aligned n`` (PTX ISA 9.7.15.6.3), with ``registers`` (the
    pending accumulators) threaded through as in-out operands: their later reads depend on
    the wait, so the compiler cannot hoist them above it."""
    asm = PTXAsm("wgmma.wait_group")
    outs = [asm.inout(r) for r in registers]
    asm.line(f"wgmma.wait_group.sync.aligned {int(n)};")
    if outs:
        asm.line("// accumulators " + " ".join(outs))
    return asm.emit(b, memory=True)


def wgmma_mma_async(
    b: ir.IRBuilder,
    instruction: str,
    acc: Sequence[ir.Value],
    a: Any,
    b_desc: ir.Value,
    scale_d: ir.Value,
    *,
    trans_a: int | None,
    trans_b: int,
) -> list[ir.Value]:
    """``wgmma.mma_async.sync.aligned.m64nNk16.f32.T.T`` (PTX ISA 9.7.15.5.2): ``acc`` the
    N/2 f32 accumulators (in-out), ``a`` an i64 descriptor or 4 packed i32 registers (then
    ``trans_a`` is None), ``b_desc`` an i64 descriptor, ``scale_d`` an i1 (0: D = A*B)."""
    asm = PTXAsm("wgmma.mma_async")
    outs = [asm.inout(r) for r in acc]
    if trans_a is None:
        a_text = "{" + ", ".join(asm.input(r) for r in a) + "}"
        imm = f"1, 1, {int(trans_b)}"
    else:
        a_text = asm.input(a)
        imm = f"1, 1, {int(trans_a)}, {int(trans_b)}"
    bd = asm.input(b_desc)
    p = asm.input(b.zext(scale_d, I32) if scale_d.type != I32 else scale_d)
    asm.line("{\n.reg .pred %p;")
    asm.line(f"setp.ne.b32 %p, {p}, 0;")
    asm.line(f"{instruction} {{{', '.join(outs)}}}, {a_text}, {bd}, %p, {imm};")
    asm.line("}")
    return asm.emit(b, memory=True)


def fence_proxy_async_shared(b: ir.IRBuilder) -> None:
    """``fence.proxy.async.shared::cta`` (sm_90; PTX ISA 9.7.13.4 membar/fence): make this
    thread's ordinary (generic-proxy) writes to shared memory visible to the async proxy
    (``wgmma`` operand reads, TMA stores) that a later barrier orders after them."""
    asm = PTXAsm("fence.proxy.async")
    asm.line("fence.proxy.async.shared::cta;")
    asm.emit(b, memory=True)


# ---------------------------------------------------------------------------- operand checks
# The wrappers above are called by tylo's operations with IR values; called directly with
# anything else they refuse with PTXOpError naming the operand, instead of failing inside
# llvmlite. The checks read each wrapper's annotations (strings, as written above).


def _accepts(note: str, name: str, v: Any) -> bool:
    from tylo.backend.ir import NVVMModule

    if note.endswith(" | None"):
        return v is None or _accepts(note[: -len(" | None")], name, v)
    if note == "ir.IRBuilder":
        return isinstance(v, ir.IRBuilder)
    if note == "ir.Value":
        return isinstance(v, ir.Value)
    if note == "ir.Type":
        return isinstance(v, ir.Type)
    if note == "Sequence[ir.Value]":
        return isinstance(v, (list, tuple)) and all(isinstance(x, ir.Value) for x in v)
    if note in ("int", "bool", "str"):
        return type(v).__name__ == note
    if name == "module":
        return isinstance(v, NVVMModule)
    return True  # Any: checked by the wrapper itself (a dtype, say)


def _checked(fn: Any) -> Any:
    import functools
    import inspect

    sig = inspect.signature(fn)

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as err:
            raise PTXOpError(f"{fn.__name__}: {err}") from None
        for name, v in bound.arguments.items():
            note = sig.parameters[name].annotation
            if isinstance(note, str) and not _accepts(note, name, v):
                raise PTXOpError(
                    f"{fn.__name__}: operand {name} must be {note}, got {v!r} ({type(v).__name__})"
                )
        return fn(*args, **kwargs)

    return call


for _name in __all__:
    if _name not in ("MIN_ARCH", "PTXOpError", "check_arch"):
        globals()[_name] = _checked(globals()[_name])
