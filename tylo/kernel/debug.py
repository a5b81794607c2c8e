"""The bounds-debug mode: ``TYLO_DEBUG_BOUNDS=1`` checks every dynamic memory access.

With the variable set when a kernel is traced, every global, shared and local access
whose element offset is not a trace-time constant is compared with its bound at run time;
a thread that is out of bounds prints (through ``vprintf``)::

    tylo: out-of-bounds <what> in kernel <name> at <file>:<line>: index <i>, bound <n>

(for a bare global pointer: ``index <i> is negative (the pointer's length is not known)``)

and executes ``trap;`` (PTX ISA, miscellaneous instructions: "trap"), which ends the
launch with an error; the context is unusable afterwards, so the process must start over
(run such checks in a separate process, as tests/gpu/test_kernel_basics_gpu.py does).
Offsets known while tracing are always checked, debug mode or not
(:class:`~tylo.kernel.memory.Tensor`); offsets that the facts in force prove in bounds
are not checked again at run time, and a check that dominates a later identical one
(same offset and bound, earlier in the region or an enclosing one) covers it.

The bound of each access:

- shared memory and :func:`tylo.local` arrays: the allocation's element count;
- a global tensor whose layout has a static cosize (``tylo.view(ptr, Layout(...))``): the
  cosize, the footprint the view declares;
- a bare global pointer: its length is unknown to the kernel, so only ``index >= 0`` is
  checked (view it with a layout whose cosize is the array's length to check the end).

The mode is read (:func:`enabled`) when a kernel is traced; :func:`key_text` is its part
of the specialization key, so that a kernel traced in one mode is not reused in the other.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

from tylo.kernel.errors import is_user_file

if TYPE_CHECKING:
    from llvmlite import ir

# :func:`key_text` is part of every specialization key, so the disk cache imports this
# module: the tracer's modules (and sympy) are imported by the functions that emit checks.

__all__ = ["ENV", "bound_of", "check_access", "check_index", "enabled", "key_text", "trap"]

ENV = "TYLO_DEBUG_BOUNDS"
_ON = ("1", "true", "yes", "on")


def enabled() -> bool:
    """Whether ``TYLO_DEBUG_BOUNDS`` asks for the bounds-debug mode (1/true/yes/on)."""
    return os.environ.get(ENV, "").strip().lower() in _ON


def key_text() -> str:
    """The mode's part of a specialization key: ``"bounds"`` or ``""``."""
    return "bounds" if enabled() else ""


def user_line() -> tuple[str, int]:
    """``(file, line)`` of the innermost user frame on the stack (the traced source line)."""
    f = sys._getframe(1)
    while f is not None:
        if is_user_file(f.f_code.co_filename):
            return os.path.basename(f.f_code.co_filename), f.f_lineno
        f = f.f_back  # type: ignore[assignment]
    return "<kernel>", 0


def bound_of(t: Any) -> int | None:
    """The element bound that debug mode checks ``t``'s offsets against (see the module
    docstring), or None when only ``offset >= 0`` can be checked."""
    if t.extent is not None:
        return int(t.extent)
    if t.layout is not None:
        import sympy

        from tylo.layouts import cosize

        try:
            n = sympy.sympify(cosize(t.layout))
        except Exception:  # noqa: BLE001 - a layout without a cosize checks the sign only
            return None
        if n.is_Integer:
            return int(n)
    return None


def trap(message: str, args: list[ir.Value]) -> None:
    """Print ``message`` (a C format) with ``args`` and execute ``trap;`` at the builder's
    position; the block is left terminated by ``unreachable``."""
    from tylo.backend.inline_ptx import PTXAsm
    from tylo.kernel.context import current
    from tylo.kernel.printf import vprintf

    ctx = current()
    vprintf(ctx, message, args, shared_slot=True)
    asm = PTXAsm("trap")
    asm.line("trap;")
    asm.emit(ctx.builder, side_effects=True)
    ctx.builder.unreachable()


def check_index(offset: Any, bound: int | None, what: str, count: int = 1) -> None:
    """In debug mode, trap unless elements ``offset .. offset + count - 1`` lie in
    ``0 .. bound - 1`` (``bound`` None: unless ``offset >= 0``) at run time. Offsets that
    are trace-time constants are left to the static checks."""
    if not enabled():
        return
    import sympy
    from llvmlite import ir

    from tylo.kernel.context import current
    from tylo.kernel.lower import bounds, lower_int

    e = sympy.sympify(offset)
    if e.is_Integer:
        return
    ctx = current()
    limit = None if bound is None else bound - count + 1  # the largest valid offset + 1
    lo, hi = bounds(ctx, e)
    if lo is not None and lo >= 0 and (limit is None or (hi is not None and hi < limit)):
        return  # the facts in force prove the access in bounds
    key = ("tylo-debug-bounds", e, limit)
    if ctx.scope.cached(key) is not None:
        return  # checked earlier in this region or an enclosing one, which dominates here
    b = ctx.builder
    off = lower_int(ctx, e, 64)
    i64 = ir.IntType(64)
    if limit is None:
        bad = b.icmp_signed("<", off, i64(0))
        tail, args = "index %lld is negative (the pointer's length is not known)", [off]
    else:
        # one unsigned comparison: a negative offset is a huge unsigned one
        bad = b.icmp_unsigned(">=", off, i64(max(limit, 0)))
        vector = f" (a vector of {count} elements)" if count > 1 else ""
        tail, args = f"index %lld{vector}, bound {bound}", [off]
    file, line = user_line()
    fail = ctx.new_block("bounds_fail")
    ok = ctx.new_block("bounds_ok")
    b.cbranch(bad, fail, ok)
    b.position_at_end(fail)
    text = (
        (f"tylo: out-of-bounds {what} in kernel {ctx.kernel_name} at {file}:{line}: ").replace(
            "%", "%%"
        )
        + tail
        + "\n"
    )
    trap(text, args)
    b.position_at_end(ok)
    ctx.scope.cache[key] = off


def check_access(t: Any, offset: Any, count: int, what: str) -> None:
    """Debug-mode check of one access to tensor ``t``: elements ``offset .. offset + count
    - 1`` must lie within :func:`bound_of`."""
    if enabled():
        check_index(offset, bound_of(t), f"{t.space} access {what}", count)
