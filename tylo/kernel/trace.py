"""Trace one specialization of a kernel into NVVM IR text.

:func:`trace_kernel` builds the entry's signature from the runtime parameters (pointers
as ``T addrspace(1)*``, integers as ``i64`` by default, floats), binds each parameter to
its in-kernel form (a :class:`~tylo.kernel.memory.Tensor`, an integer symbol with its
facts, a float Value; static values as they are), runs the rewritten Python function with
a :class:`~tylo.kernel.context.TraceContext` current, and returns the module text.

Any exception raised while the user's code runs becomes a :class:`TraceError` naming the
user's file, line and source line, with tylo's frames stripped from the traceback.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from llvmlite import ir

from tylo.backend.ir import ADDRSPACE_GLOBAL, NVVMModule
from tylo.kernel import clusters, facts, intrinsics
from tylo.kernel import ops as _ops  # noqa: F401 - installs the elementwise funnel
from tylo.kernel.context import TraceContext, tracing
from tylo.kernel.diskcache import Dependencies
from tylo.kernel.errors import TraceError, is_user_file, user_frames
from tylo.kernel.memory import Tensor
from tylo.kernel.spec import Binding, Int, ParamKind, Ptr
from tylo.kernel.tensormap import TensorMapParam
from tylo.kernel.tracker import DependencyTracker, may_run_user_code
from tylo.kernel.values import Value, ir_type, memory_type

__all__ = ["Binding", "TraceResult", "trace_kernel"]


@dataclass
class TraceResult:
    """What a trace produced: IR text, entry name, the runtime parameters in entry order
    (indices into the Python signature), the shared memory needs, and timings."""

    llvm: str
    entry: str
    runtime: tuple[int, ...]
    dynamic_shared_bytes: int
    static_shared_bytes: int
    timings: dict[str, float] = field(default_factory=dict)
    deps: Any = None
    guards: tuple[Any, ...] = ()
    # the bounds guards of guarded accesses (tylo.kernel.bounds_check) and every access
    # with its state (tylo.kernel.accesses.AccessReport)
    bounds: tuple[Any, ...] = ()
    accesses: Any = None
    # the llvmlite module whose text is ``llvm`` (read by the CPU interpreter, tylo.interpret)
    module: Any = field(default=None, repr=False, compare=False)


def _entry_name(name: str) -> str:
    clean = re.sub(r"[^A-Za-z0-9_]", "_", name)
    return clean if clean[:1].isalpha() or clean[:1] == "_" else f"k_{clean}"


def _param_type(b: Binding, index_bits: int) -> ir.Type:
    # CUtensorMap by value (docs/toolchain.md: byval + grid_constant)
    if b.kind is ParamKind.TENSOR_MAP:
        return ir.ArrayType(ir.IntType(8), 128).as_pointer()
    if b.kind is ParamKind.POINTER:
        return memory_type(b.dtype).as_pointer(ADDRSPACE_GLOBAL)  # type: ignore[arg-type]
    if b.kind is ParamKind.INT:
        return ir.IntType(index_bits)
    return ir_type(b.dtype)  # type: ignore[arg-type]


def _int_symbol(ctx: TraceContext, b: Binding, arg: ir.Value) -> Any:
    check: Int = b.check or Int()
    if check.min >= 1:
        sym = facts.dim(b.name, multiple_of=check.multiple_of)
        rels: list[Any] = [sym >= check.min] if check.min > 1 else []
    else:
        sym = facts.index_symbol(b.name)
        rels = []
        if check.multiple_of > 1:
            from tylo.layouts.symbolic import divisible

            rels.append(divisible(sym, check.multiple_of))
    if check.max is not None:
        rels.append(sym <= check.max)
    ctx.bind(sym, arg, prologue=True)
    ctx.symbol_bounds[sym] = (check.min, check.max if check.max is not None else ctx.int_max)
    if rels:
        ctx.enter_facts(facts.assuming(*rels))
    return sym


def trace_kernel(
    fn: Callable[..., Any],
    *,
    name: str,
    bindings: Sequence[Binding],
    block: tuple[int, int, int],
    target: Any,
    index_bits: int,
    track_files: bool = False,
    cluster: tuple[int, int, int] | None = None,
    max_registers: int | None = None,
    bounds: str = "guard",
) -> TraceResult:
    """Trace ``fn`` (already rewritten) for one specialization; see the module docstring.
    ``max_registers`` (``CompileOptions.max_registers``) becomes the entry's ``.maxnreg``;
    ``bounds`` is the access policy (:mod:`tylo.kernel.accesses`)."""
    t0 = time.perf_counter()
    entry = _entry_name(name)
    module = NVVMModule(entry)
    runtime = tuple(i for i, b in enumerate(bindings) if b.kind is not ParamKind.STATIC)
    types = [_param_type(bindings[i], index_bits) for i in runtime]
    by_value = [k for k, i in enumerate(runtime) if bindings[i].kind is ParamKind.TENSOR_MAP]
    function = module.add_kernel(
        entry,
        types,
        maxntid=block,
        param_names=[bindings[i].name for i in runtime],
        grid_constant=by_value,
        byval=by_value,
        cluster=cluster if clusters.SHAPE_IN_PTX else None,
        maxnreg=max_registers,
    )
    for k in by_value:
        function.args[k].attributes.align = 64  # CUtensorMap: .param .align 64 .b8 p[128]
    ctx = TraceContext(
        module, function, kernel_name=name, block=block, index_bits=index_bits, target=target
    )
    ctx.cluster = cluster
    ctx.bounds_policy = bounds
    intrinsics.setup_indices(ctx)
    args: list[Any] = []
    irargs = iter(function.args)
    deps = Dependencies() if track_files else None
    with tracing(ctx):
        try:
            for index, b in enumerate(bindings):
                if b.kind is ParamKind.STATIC:
                    args.append(b.static)
                    continue
                arg = next(irargs)
                if b.kind is ParamKind.POINTER:
                    ptr: Ptr = b.check or Ptr()
                    align = ptr.align or b.dtype.nbytes  # type: ignore[union-attr]
                    args.append(
                        Tensor(
                            b.dtype,
                            arg,
                            addrspace=ADDRSPACE_GLOBAL,  # type: ignore[arg-type]
                            align=max(align, 1),
                            name=b.name,
                            param=index,
                        )
                    )
                elif b.kind is ParamKind.TENSOR_MAP:
                    args.append(TensorMapParam(b.static, arg, b.name))
                elif b.kind is ParamKind.INT:
                    sym = _int_symbol(ctx, b, arg)
                    ctx.param_index[sym] = index
                    args.append(sym)
                else:
                    args.append(Value(b.dtype, arg, ctx.root))  # type: ignore[arg-type]
            yield_line = getattr(fn, "__tylo_generator_line__", None)
            if yield_line is not None:
                raise TraceError(
                    f"a kernel cannot be a generator (`yield` at line {yield_line}): it "
                    "would return without running; store results to memory instead",
                    kernel=name,
                    filename=fn.__code__.co_filename,
                    lineno=yield_line,
                )
            # `return value` in the kernel itself (not in an inline helper) is refused at
            # its line by control.check_return, which recognizes the kernel by its code
            ctx.kernel_code = fn.__code__  # type: ignore[attr-defined]
            # tylo's own kernels given no user code run none: nothing to watch (a user
            # kernel, or a callable / object of the user's among the static values, is)
            watch = deps is not None and may_run_user_code(
                fn, [b.static for b in bindings if b.kind is ParamKind.STATIC]
            )
            profiler = DependencyTracker(deps) if watch else None
            if profiler is not None:
                profiler.start()
            try:
                result = fn(*args)
            finally:
                if profiler is not None:
                    profiler.stop()
            if result is not None:
                raise TraceError(
                    f"a kernel returns nothing; {name} returned "
                    f"{type(result).__name__} {result!r} (store results to memory)"
                )
            ctx.finish()
            report, bounds_guards = _access_results(ctx, name, bindings)
        except BaseException as err:  # noqa: BLE001 - every failure becomes a TraceError
            raise _as_trace_error(err, name) from None
        finally:
            ctx.close_all()
    t1 = time.perf_counter()
    text = module.to_text()
    t2 = time.perf_counter()
    return TraceResult(
        llvm=text,
        entry=entry,
        runtime=runtime,
        dynamic_shared_bytes=ctx.dynamic_shared_bytes,
        static_shared_bytes=ctx.static_shared_bytes,
        timings={"trace_s": t1 - t0, "ir_s": t2 - t1},
        deps=deps,
        guards=tuple(ctx.guards),
        bounds=bounds_guards,
        accesses=report,
        module=module.module,
    )


def _access_results(
    ctx: TraceContext, name: str, bindings: Sequence[Binding]
) -> tuple[Any, tuple[Any, ...]]:
    """The trace's access report and bounds guards; under ``bounds="prove"`` a guarded
    or unproved access raises :class:`~tylo.kernel.errors.BoundsProofError`."""
    from tylo.kernel.accesses import PROVED, AccessReport
    from tylo.kernel.bounds_check import build_guards
    from tylo.kernel.errors import BoundsProofError
    from tylo.kernel.races import check as check_races

    report = AccessReport(
        name, tuple(ctx.accesses), tuple(g.text for g in ctx.guards), check_races(ctx)
    )
    if ctx.bounds_policy == "prove":
        open_ = [a for a in report.accesses if a.state != PROVED]
        if open_:
            listed = "\n".join(f"  {a.describe()}" for a in open_[:20])
            more = f"\n  ... and {len(open_) - 20} more" if len(open_) > 20 else ""
            raise BoundsProofError(
                f'bounds="prove": {len(open_)} of {len(report.accesses)} accesses are not '
                f"proved in bounds:\n{listed}{more}\n(state the missing facts with "
                'tylo.assume, or use bounds="guard" to check them at launch)'
            )
    return report, build_guards(ctx, [b.name for b in bindings])


def _as_trace_error(err: BaseException, kernel: str) -> BaseException:
    if isinstance(err, (KeyboardInterrupt, SystemExit)):
        return err
    tb = err.__traceback__
    filename = lineno = None
    t = tb
    while t is not None:
        if is_user_file(t.tb_frame.f_code.co_filename):
            filename, lineno = t.tb_frame.f_code.co_filename, t.tb_lineno
        t = t.tb_next
    if isinstance(err, TraceError):
        if err.located:
            out = err
        else:
            out = type(err)(  # the subclass kept (OutOfBoundsError, BoundsProofError...)
                err.message,
                kernel=err.kernel or kernel,
                filename=filename,
                lineno=err.lineno or lineno,
                original=err.original,
            )
    else:
        text = f"{type(err).__name__}: {err}"
        out = TraceError(text, kernel=kernel, filename=filename, lineno=lineno, original=err)
    return out.with_traceback(user_frames(tb))
