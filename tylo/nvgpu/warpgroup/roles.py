"""Warp specialization: which warpgroup a thread belongs to, register reallocation between
warpgroups (``setmaxnreg``), and electing one thread of a warp (``elect.sync``).

A warp-specialized kernel gives its warpgroups roles: one *producer* issues copies and needs
few registers, the *consumers* issue ``wgmma`` and hold large accumulators. ``setmaxnreg``
(PTX ISA 9.7.17.1, sm_90a) moves registers between them at run time: the producer calls
``set_max_registers(40, increase=False)`` and the consumers
``set_max_registers(232, increase=True)``; every warp of a warpgroup must execute the same
one. The kernel is compiled with the registers per thread of the whole block
(``.maxntid`` and ``.minnctapersm 1``, which tylo emits for a kernel that calls
:func:`set_max_registers`); the counts must be multiples of 8 in [24, 256].
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir

from tylo.backend.inline_ptx import PTXAsm
from tylo.layouts.tv import WARPGROUP_SIZE
from tylo.nvgpu.errors import PlanError

__all__ = ["elect_one", "set_max_registers", "warpgroup_idx"]

I32 = ir.IntType(32)


def warpgroup_idx() -> Any:
    """The index of this thread's warpgroup in the block (``linear_thread_idx // 128``)."""
    from tylo.kernel.intrinsics import linear_thread_idx

    return linear_thread_idx() // WARPGROUP_SIZE


def set_max_registers(count: int, *, increase: bool) -> None:
    """``setmaxnreg.{inc|dec}.sync.aligned.u32 count``: raise (``increase=True``) or lower
    this warpgroup's registers per thread to ``count`` (sm_90a)."""
    from tylo.kernel.context import current
    from tylo.nvgpu.instructions import check_arch

    if type(count) is not int or not 24 <= count <= 256 or count % 8:
        raise PlanError(
            f"set_max_registers: count must be a multiple of 8 in [24, 256] (PTX ISA 9.7.17.1), "
            f"got {count!r}"
        )
    if type(increase) is not bool:
        raise PlanError(f"set_max_registers: increase must be True or False, got {increase!r}")
    ctx = current()
    check_arch("setmaxnreg", ctx.target)
    # ptxas honours setmaxnreg only where the entry register count is fixed (.maxntid, which
    # tylo always emits, and .minnctapersm); otherwise it drops it silently (C7508)
    ctx.module.set_min_ctas_per_sm(ctx.function, 1)
    asm = PTXAsm("setmaxnreg")
    asm.line(f"setmaxnreg.{'inc' if increase else 'dec'}.sync.aligned.u32 {count};")
    asm.emit(ctx.builder, memory=True)


def elect_one() -> Any:
    """``elect.sync _|p, 0xffffffff``: true in exactly one lane of the (fully converged)
    warp, false in the others (sm_90). Returns a bool Value."""
    from tylo import dtypes as dt
    from tylo.kernel.context import current
    from tylo.kernel.values import Value
    from tylo.nvgpu.instructions import check_arch

    ctx = current()
    check_arch("elect.sync", ctx.target)
    asm = PTXAsm("elect.sync")
    out = asm.output(I32)
    asm.line("{")
    asm.line(".reg .pred %e;")
    asm.line("elect.sync _|%e, 0xffffffff;")
    asm.line(f"selp.u32 {out}, 1, 0, %e;")
    asm.line("}")
    (r,) = asm.emit(ctx.builder, side_effects=True)
    return Value(dt.bool_, ctx.builder.icmp_unsigned("!=", r, I32(0)))
