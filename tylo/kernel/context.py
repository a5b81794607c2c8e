"""The state of one kernel trace: IR builders, regions (scopes), symbol bindings.

A trace owns one :class:`TraceContext`, made current for the thread while the kernel's
Python function runs. Everything the kernel-facing API does (a load, an ``if``, a
``tylo.range`` loop) goes through it.

Regions and dominance: the kernel body is a tree of :class:`Scope` objects. The root scope
is the function body; a dynamic loop body and each branch of a dynamic ``if`` open a child
scope. A scope holds (a) bindings of sympy symbols to IR values (loop indices, runtime
integers of carried values, opaque indices made from data) and (b) the cache of lowered
index expressions. Lookups walk up the parent chain, so a value computed in an enclosing
region is reused; a closed scope is never consulted again, so a value lowered inside a loop
body or one branch is never reused after it (it would not dominate the use). Expressions
over kernel parameters and special registers only are lowered once into the *prologue*
(the entry block), which dominates everything.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from llvmlite import ir

from tylo.backend.ir import NVVMModule
from tylo.kernel.errors import TraceError
from tylo.layouts._lazy import sympy

__all__ = ["Scope", "TraceContext", "current", "current_or_none", "tracing"]

_state = threading.local()


class Scope:
    """One region of the traced body (see the module docstring)."""

    __slots__ = ("alive", "bindings", "cache", "exits", "kind", "line", "parent")

    def __init__(self, parent: Scope | None, kind: str, line: int | None) -> None:
        self.parent = parent
        self.kind = kind  # 'function', 'loop', 'then', 'else', 'rhs'
        self.line = line
        self.bindings: dict[sympy.Symbol, ir.Value] = {}
        self.cache: dict[Any, ir.Value] = {}
        self.exits: list[Any] = []  # context managers (assumptions) to exit on close
        self.alive = True

    def binding(self, symbol: sympy.Symbol) -> ir.Value | None:
        s: Scope | None = self
        while s is not None:
            v = s.bindings.get(symbol)
            if v is not None:
                return v
            s = s.parent
        return None

    def cached(self, key: Any) -> ir.Value | None:
        s: Scope | None = self
        while s is not None:
            v = s.cache.get(key)
            if v is not None:
                return v
            s = s.parent
        return None

    def describe(self) -> str:
        what = {
            "loop": "the tylo.range loop",
            "then": "the if-branch",
            "else": "the else-branch",
            "rhs": "the right operand of and/or",
            "ifexp": "a conditional expression",
        }
        text = what.get(self.kind, self.kind)
        return f"{text} at line {self.line}" if self.line else text


class TraceContext:
    """Builders, scopes and kernel facts of one trace.

    ``block`` is the static block shape (3 ints), ``index_bits`` the width of index
    arithmetic (64 by default), ``target`` the compile target, ``kernel_name`` the
    entry's name, ``cluster`` the static cluster shape (3 ints) of a cluster kernel or None.
    """

    _wgmma_groups: dict[str, Any]  # set on first use by tylo.nvgpu.warpgroup.mma (type only)

    def __init__(
        self,
        module: NVVMModule,
        function: ir.Function,
        *,
        kernel_name: str,
        block: tuple[int, int, int],
        index_bits: int,
        target: Any,
    ) -> None:
        self.module = module
        self.function = function
        self.kernel_name = kernel_name
        self.block = block
        self.cluster: tuple[int, int, int] | None = None  # set by trace_kernel
        self.index_bits = index_bits
        self.index_type = ir.IntType(index_bits)
        self.int_max = (1 << (index_bits - 1)) - 1  # largest runtime integer
        self.indices: dict[str, Any] = {}  # 'tid.x' -> symbol or 0 (set by intrinsics)
        self.param_index: dict[sympy.Symbol, int] = {}  # runtime int symbol -> parameter
        self.guards: list[Any] = []  # facts launches must check (tylo.kernel.guards)
        # the access facts (tylo.kernel.accesses): the policy, each access, the launch
        # conditions of guarded ones, and the extent symbol of each pointer parameter
        self.bounds_policy = "guard"
        self.accesses: list[Any] = []
        self.bounds_guards: list[Any] = []
        self.extent_params: dict[sympy.Symbol, int] = {}
        # lines of the enclosing dynamic branches whose condition the facts do not hold
        # (a runtime value, a disjunction): an access there may not run for every index
        self.opaque_branches: list[int | None] = []
        # the race check (tylo.kernel.races): block barriers so far, the shared accesses,
        # each tylo.shared allocation's base pointer (by id, kept alive here) -> its name,
        # and whether the kernel synchronizes by other means (tylo.ptx barriers, mbarriers)
        self.barrier_epoch = 0
        self.shared_accesses: list[Any] = []
        self.shared_allocs: dict[int, str] = {}
        self.shared_bases: list[Any] = []
        self.other_sync = False
        self.target = target
        self.kernel_code: Any = None  # the kernel's code object (trace.py; returned values)
        entry = function.append_basic_block("entry")
        body = function.append_basic_block("body")
        self.prologue = ir.IRBuilder(entry)
        self.builder = ir.IRBuilder(body)
        self._body_start = body
        self.root = Scope(None, "function", None)
        self.scope = self.root
        self.prologue_symbols: set[sympy.Symbol] = set()
        self.symbol_bounds: dict[sympy.Symbol, tuple[int | None, int | None]] = {}
        self.lazy_symbols: dict[sympy.Symbol, Any] = {}  # symbol -> callable(prologue) -> ir
        self.bounds_cache: dict[Any, tuple[int | None, int | None]] = {}
        self.dynamic_depth = 0
        self.names: dict[str, int] = {}
        self.static_shared_bytes = 0
        self.dynamic_shared_bytes = 0  # the least `shared=` a launch must give
        self.uses_dynamic_shared = False
        self.line: int | None = None  # user line being traced, when known
        self.filename: str | None = None
        # the most threads a plan used in this trace spans, and that plan (require_threads)
        self.required_threads: tuple[int, str] | None = None

    # ------------------------------------------------------------------ names

    def unique(self, name: str) -> str:
        """``name`` the first time, then ``name_1``, ``name_2``, ... within this trace."""
        n = self.names.get(name, 0)
        self.names[name] = n + 1
        return name if n == 0 else f"{name}_{n}"

    # ------------------------------------------------------------------ scopes

    def push_scope(self, kind: str, line: int | None, *, dynamic: bool = True) -> Scope:
        scope = Scope(self.scope, kind, line)
        self.scope = scope
        if dynamic:
            self.dynamic_depth += 1
        return scope

    def pop_scope(self, scope: Scope, *, dynamic: bool = True) -> None:
        if self.scope is not scope:
            raise TraceError(
                f"internal: closing {scope.describe()} while {self.scope.describe()} is open",
                kernel=self.kernel_name,
            )
        while scope.exits:
            scope.exits.pop().__exit__(None, None, None)
        scope.alive = False
        self.scope = scope.parent  # type: ignore[assignment]
        if dynamic:
            self.dynamic_depth -= 1

    def enter_facts(self, manager: Any) -> None:
        """Enter a context manager (an ``assuming(...)``) for the rest of the scope."""
        manager.__enter__()
        self.scope.exits.append(manager)

    def close_all(self) -> None:
        """Unwind every open scope (after a failed trace)."""
        while self.scope is not self.root:
            self.pop_scope(self.scope, dynamic=False)
        while self.root.exits:
            self.root.exits.pop().__exit__(None, None, None)

    # ------------------------------------------------------------------ bindings

    def bind(self, symbol: sympy.Symbol, value: ir.Value, *, prologue: bool = False) -> None:
        """Bind ``symbol`` to ``value`` in the current scope (or, for values defined in the
        entry block, in the root scope, where every region sees them)."""
        if prologue:
            self.root.bindings[symbol] = value
            self.prologue_symbols.add(symbol)
        else:
            self.scope.bindings[symbol] = value

    def bind_lazy(self, symbol: sympy.Symbol, make: Any) -> None:
        """Bind ``symbol`` to a value made in the prologue on first use (special
        registers: only the ones a kernel reads are read)."""
        self.lazy_symbols[symbol] = make
        self.prologue_symbols.add(symbol)

    def lookup(self, symbol: sympy.Symbol) -> ir.Value | None:
        v = self.scope.binding(symbol)
        if v is None:
            make = self.lazy_symbols.pop(symbol, None)
            if make is not None:
                v = make(self.prologue)
                self.root.bindings[symbol] = v
        return v

    # ------------------------------------------------------------------ finish

    def finish(self) -> None:
        """Terminate the prologue and the body (``ret void``)."""
        if not self.builder.block.is_terminated:
            self.builder.ret_void()
        self.prologue.branch(self._body_start)

    def new_block(self, name: str) -> ir.Block:
        return self.function.append_basic_block(self.unique(name))


def current() -> TraceContext:
    """The trace in progress on this thread; a :class:`TraceError` outside a kernel."""
    ctx = getattr(_state, "ctx", None)
    if ctx is None:
        raise TraceError(
            "this operation is only available while tracing a kernel (inside a function "
            "decorated with @tylo.kernel, or a helper it calls)"
        )
    return ctx


def current_or_none() -> TraceContext | None:
    return getattr(_state, "ctx", None)


def require_threads(count: int, plan: str) -> None:
    """Record that the trace in progress maps a thread index through ``plan``, which spans
    ``count`` threads (an ownership, MMA or copy plan); outside a trace, nothing. A block
    of fewer threads cannot run the plan (some of its threads would not exist, so part of
    its tile would never be loaded, computed or stored): that is a :class:`TraceError`
    naming the plan, so such a compile or launch is refused. A larger block is allowed
    (warp-specialized kernels give each role's plan a part of the block)."""
    ctx = getattr(_state, "ctx", None)
    if ctx is None:
        return
    x, y, z = ctx.block
    if count > x * y * z:
        raise TraceError(
            f"{plan} spans {count} threads, but the block {x}x{y}x{z} has {x * y * z}: "
            f"part of its tile would never be handled; launch (or compile) with a block of "
            f"at least {count} threads, e.g. block={count}",
            kernel=ctx.kernel_name,
        )
    if ctx.required_threads is None or count > ctx.required_threads[0]:
        ctx.required_threads = (count, plan)


@contextlib.contextmanager
def tracing(ctx: TraceContext) -> Iterator[TraceContext]:
    """Make ``ctx`` the current trace for the duration of the block."""
    previous = getattr(_state, "ctx", None)
    _state.ctx = ctx
    try:
        yield ctx
    finally:
        _state.ctx = previous
