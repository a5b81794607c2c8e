"""Calls in the kernel's IR: special registers, barriers, shuffles, math intrinsics,
atomics, and inline PTX (handed to :mod:`tylo.interpret.ptx`)."""

from __future__ import annotations

from typing import Any

import numpy as np
from llvmlite import ir

from tylo.interpret import warp
from tylo.interpret.errors import UnsupportedOperation
from tylo.interpret.irtypes import np_dtype
from tylo.interpret.numerics import flush_subnormals

__all__ = ["MATH", "compile_call"]


def _fma32(a: Any, b: Any, c: Any) -> Any:
    # the f32 product is exact in f64; the sum rounds twice (rarely 1 ulp off a fused fma)
    return (np.asarray(a, np.float64) * b + c).astype(np.float32)


def _approx(f: Any) -> Any:
    def g(x: Any) -> Any:
        x = np.asarray(x, np.float32)
        return flush_subnormals(f(flush_subnormals(x)).astype(np.float32))

    return g


MATH = {
    "llvm.nvvm.fabs.f": np.abs, "llvm.nvvm.fabs.d": np.abs,
    "llvm.fabs.f32": np.abs, "llvm.fabs.f64": np.abs,
    "llvm.maxnum.f32": np.fmax, "llvm.maxnum.f64": np.fmax,
    "llvm.minnum.f32": np.fmin, "llvm.minnum.f64": np.fmin,
    "llvm.fma.f32": _fma32, "llvm.fma.f64": lambda a, b, c: a * b + c,
    "llvm.sqrt.f32": np.sqrt, "llvm.sqrt.f64": np.sqrt,
    "llvm.nvvm.ex2.approx.ftz.f": _approx(np.exp2),
    "llvm.nvvm.lg2.approx.ftz.f": _approx(np.log2),
    "llvm.nvvm.rsqrt.approx.ftz.f": _approx(lambda x: np.float32(1) / np.sqrt(x)),
    "llvm.nvvm.rsqrt.approx.d": lambda x: 1.0 / np.sqrt(x),
}  # fmt: skip


def compile_call(program: Any, inst: Any) -> Any:
    """The step that runs call ``inst`` (see the module docstring)."""
    callee = inst.callee
    site = program.site(inst)
    if isinstance(callee, ir.InlineAsm):
        from tylo.interpret.ptx import compile_asm

        return compile_asm(program, inst, site)
    name = callee.name
    args = [program.slot(a) for a in inst.args]
    d = program.slot(inst) if not isinstance(inst.type, ir.VoidType) else -1
    if name.startswith("llvm.nvvm.read.ptx.sreg."):
        reg = name[len("llvm.nvvm.read.ptx.sreg.") :]
        return lambda st, m: st.set(d, st.sreg[reg], m)
    if name == "llvm.nvvm.barrier0":
        return lambda st, m: warp.barrier(st, site)
    if name == "llvm.nvvm.bar.warp.sync":
        return lambda st, m: warp.warp_sync(st, st.regs[args[0]], site)
    if name.startswith("llvm.nvvm.shfl.sync."):
        mode = name.split(".")[4]
        mk, x, b, c = args

        def shuffle(st: Any, m: Any) -> None:
            r = st.regs
            st.set(d, warp.shuffle(st, mode, r[x], r[b], r[c], r[mk], site), m)

        return shuffle
    if name == "vprintf":
        from tylo.interpret.printf import vprintf

        fmt, buf = args
        return lambda st, m: st.set_lanes(d, vprintf(st, st.regs[fmt], st.regs[buf], site), m)
    f = MATH.get(name)
    if f is not None:
        dt = np_dtype(inst.type)

        def math(st: Any, m: Any) -> None:
            with np.errstate(all="ignore"):
                st.set(d, np.asarray(f(*(st.regs[a] for a in args))).astype(dt), m)

        return math
    raise UnsupportedOperation(name, f"kernel {program.kernel}: the interpreter has no "
                                     f"function {name!r} (`{str(inst).strip()}`)")  # fmt: skip
