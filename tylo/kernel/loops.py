"""Dynamic loops: ``for i in tylo.range(start, stop, step)`` as an IR loop.

The loop is a header with one phi for the index and one per carried leaf, a body, a latch
(the end of the body, which adds the next index and the end-of-body values to the phis)
and an exit. Carried values (see :mod:`tylo.kernel.control`): a name assigned in the body
that is bound before the loop. A Value keeps its dtype; a Python int or an index expression
becomes a runtime integer (a fresh symbol bound to its phi, so index arithmetic on it stays
symbolic); a Python float becomes an f32 Value and a bool a bool Value; any other object
must be the same object at the end of the body. The index is a phi of 32 bits when the
bounds fit, else of the index width; inside the body it is an index symbol with the facts
``start <= i < stop`` (for a positive step).

Unrolling is libNVVM's, steered by ``unroll=``: a loop identifier with an
``llvm.loop.unroll.*`` hint on the back-edge branch (see
:meth:`tylo.backend.ir.NVVMModule.loop_id`).
"""

from __future__ import annotations

import contextlib
import operator
from collections.abc import Iterator
from typing import Any

from llvmlite import ir

from tylo import dtypes as dt
from tylo.kernel import facts
from tylo.kernel.context import TraceContext, current, current_or_none
from tylo.kernel.errors import TraceError, Undefined
from tylo.kernel.lower import bounds, lower_int
from tylo.kernel.merge import kind_of, materialize, same, wrap_phi
from tylo.kernel.tree import flatten, unflatten
from tylo.kernel.values import Value, to_index
from tylo.layouts._lazy import sympy

__all__ = ["DynamicLoop", "StaticLoop", "loop_begin", "range"]


class range:  # spelled like the builtin it stands for
    """A dynamic loop: ``for i in tylo.range(start, stop, step)`` is a real loop in the
    kernel, not unrolled. Bounds may be ints, index expressions or integer Values; the step
    must be a non-zero value whose sign is known at trace time (default 1).

    Inside the body ``i`` is the index expression ``start + step * k`` over the iteration
    counter ``k`` (an index symbol, ``0 <= k < trips``), with the fact ``i < stop`` (for a
    positive step), so layouts, alignment and comparisons over it can be reasoned about.

    ``unroll`` asks libNVVM to unroll the loop: ``None`` (the default) leaves it to the
    compiler's heuristics; an int ``N >= 1`` unrolls by ``N`` (a remainder loop runs the
    iterations a trip count not divisible by ``N`` leaves; ``1`` disables unrolling);
    ``True`` unrolls completely and needs a trip count known at trace time.
    """

    __slots__ = ("start", "step", "stop", "unroll")

    def __init__(self, start: Any, stop: Any = None, step: Any = 1, *, unroll: Any = None) -> None:
        if stop is None:
            start, stop = 0, start
        self.start, self.stop, self.step = start, stop, step
        self.unroll = _check_unroll(unroll)

    def __iter__(self) -> Iterator[Any]:
        raise TraceError(
            "tylo.range can only be the iterable of a `for` statement in a kernel or an "
            "@tylo.inline function (it is not a Python sequence); use range() to unroll"
        )

    def __repr__(self) -> str:
        unroll = "" if self.unroll is None else f", unroll={self.unroll!r}"
        return f"tylo.range({self.start}, {self.stop}, {self.step}{unroll})"


_MAX_UNROLL = 2**31 - 1  # the count is an i32 in the loop metadata


def _check_unroll(unroll: Any) -> int | bool | None:
    """``unroll`` as ``tylo.range`` keeps it: None, True, or an int in 1.._MAX_UNROLL."""
    if unroll is None or unroll is True:
        return unroll
    count: int | None = None
    if not isinstance(unroll, bool):
        with contextlib.suppress(TypeError):
            count = operator.index(unroll)  # ints, numpy ints; not floats or symbols
    if count is not None and 1 <= count <= _MAX_UNROLL:
        return count
    if unroll is False or count == 0:
        fix = "; unroll=1 disables unrolling"
    elif isinstance(unroll, (sympy.Basic, Value)):
        fix = "; the count must be a Python int known at trace time (a static argument)"
    else:
        fix = ""
    raise TraceError(
        f"tylo.range: unroll={unroll!r} is not an unroll request; give an int N >= 1 "
        f"(unroll by N), True (unroll completely) or None (the compiler decides){fix}"
    )


class StaticLoop:
    dynamic = False

    def __init__(self, iterable: Any) -> None:
        self.iterable = iterable
        ctx = current_or_none()
        self.depth = 0 if ctx is None else ctx.dynamic_depth

    def iterate(self, f_locals: dict[str, Any]) -> Any:
        return self.iterable

    def next_(self, f_locals: dict[str, Any]) -> None:
        return None


def _fits_i32(ctx: TraceContext, *exprs: Any) -> bool:
    for e in exprs:
        lo, hi = bounds(ctx, e)
        if lo is None or hi is None or lo < -(2**31) or hi > 2**31 - 1:
            return False
    return True


class DynamicLoop:
    dynamic = True

    def __init__(self, rng: range, line: int, names: tuple[str, ...], target: str | None):
        ctx = current()
        if target is None:
            raise TraceError(
                "a tylo.range loop needs a single name as its target (`for i in tylo.range(n)`)",
                lineno=line,
            )
        self.ctx, self.line, self.names, self.target = ctx, line, names, target
        self.depth = ctx.dynamic_depth
        self.start = to_index(rng.start, "tylo.range start")
        self.stop = to_index(rng.stop, "tylo.range stop")
        self.step = to_index(rng.step, "tylo.range step")
        lo, hi = -(1 << (ctx.index_bits - 1)), (1 << (ctx.index_bits - 1)) - 1
        for what, bound in (("start", self.start), ("stop", self.stop), ("step", self.step)):
            if bound.is_Integer and not lo <= int(bound) <= hi:
                raise TraceError(
                    f"tylo.range {what} {bound} does not fit the kernel's "
                    f"{ctx.index_bits}-bit loop counter ([{lo}, {hi}])",
                    lineno=line,
                )
        if self.step.is_Integer and int(self.step) == 0:
            raise TraceError("tylo.range step must not be zero", lineno=line)
        up = facts.decide(sympy.Gt(self.step, 0))
        down = facts.decide(sympy.Lt(self.step, 0)) if up is not True else False
        if up is not True and down is not True:
            raise TraceError(
                f"tylo.range: the sign of the step {self.step} must be known at "
                "trace time (a positive or negative int or expression)",
                lineno=line,
            )
        self.up = up is True
        self.unroll = rng.unroll
        self.carried_names: list[str] = []
        self.plans: list[Any] = []
        self.phis: list[ir.Value] = []
        self.before: dict[str, Any] = {}

    def iterate(self, f_locals: dict[str, Any]) -> Iterator[Any]:
        ctx = self.ctx
        b = ctx.builder
        # the trip count and the carried initial values, in the preheader
        start, stop, step = self.start, self.stop, self.step
        if step == 1:
            trips = stop - start
        else:
            trips = sympy.ceiling((stop - start) / step)
        if self.unroll is True and not trips.is_Integer:
            raise TraceError(
                f"tylo.range(..., unroll=True): the trip count {trips} is not known at trace "
                "time; unroll by a count instead (unroll=4)",
                lineno=self.line,
            )
        narrow = _fits_i32(ctx, trips) and (bounds(ctx, trips)[1] or 0) < 2**31 - 1
        kty = ir.IntType(32 if narrow else ctx.index_bits)
        trips_v = lower_int(ctx, trips, kty.width)
        inits: list[tuple[str, Any, Any]] = []
        for name in self.names:
            if name not in f_locals or isinstance(f_locals[name], Undefined):
                continue
            value = f_locals[name]
            leaves, tree = flatten(value)
            plans = [_carry_plan(name, leaf) for leaf in leaves]
            init_ir = [
                None if p[0] == "static" else materialize(ctx, leaf, *p)
                for leaf, p in zip(leaves, plans)
            ]
            inits.append((name, (leaves, tree, plans), init_ir))
            self.before[name] = value
        preheader = b.block
        header = ctx.new_block("loop")
        body = ctx.new_block("loop_body")
        self.exit = ctx.new_block("loop_exit")
        b.branch(header)
        b.position_at_end(header)
        trivial = start == 0 and step == 1
        counter = ctx.unique(self.target if trivial else f"{self.target}_k")
        iv = b.phi(kty, name=counter)
        iv.add_incoming(kty(0), preheader)
        carried_values: dict[str, Any] = {}
        for name, (leaves, tree, plans), init_ir in inits:
            new_leaves = []
            for leaf, plan, init in zip(leaves, plans, init_ir):
                if plan[0] == "static":
                    new_leaves.append(leaf)
                    self.phis.append(None)  # type: ignore[arg-type]
                    continue
                phi = b.phi(init.type, name=ctx.unique(name))
                phi.add_incoming(init, preheader)
                self.phis.append(phi)
                new_leaves.append(wrap_phi(ctx, name, plan[0], plan[1], phi))
            carried_values[name] = (tree, new_leaves)
            self.carried_names.append(name)
            self.plans.append((tree, plans, leaves))
        b.cbranch(b.icmp_signed("<", iv, trips_v), body, self.exit)
        b.position_at_end(body)
        self.scope = ctx.push_scope("loop", self.line)
        self.var = self._loop_index(counter, iv, trips, trivial)
        self.iv = iv
        self.carried_values = carried_values
        self.latched = False
        yield self.var
        if not self.latched:  # pragma: no cover - the rewrite always latches
            raise TraceError("internal: the loop body did not reach its end", lineno=self.line)

    def _loop_index(self, name: str, iv: ir.Value, trips: Any, trivial: bool) -> Any:
        """The loop index seen by the body: ``start + step * k`` over the iteration
        counter ``k``, an index symbol ``0 <= k < trips`` (so divisibility facts such as
        ``4 | start + 32 * k`` follow from the expression itself)."""
        ctx = self.ctx
        upper = int(trips) if trips.is_Integer else trips
        k = facts.index_symbol(name, upper=upper if upper != 0 else 1)
        hi = bounds(ctx, trips)[1]
        ctx.symbol_bounds[k] = (0, None if hi is None else max(hi - 1, 0))
        ctx.bind(k, iv)
        if trivial:
            return k
        var = self.start + self.step * k
        rel = sympy.Lt(var, self.stop) if self.up else sympy.Gt(var, self.stop)
        if rel is not sympy.true and rel is not sympy.false:
            with contextlib.suppress(Exception):  # a fact the solver cannot take is a hint
                ctx.enter_facts(facts.assuming(rel))
        return var

    def _value(self, name: str, reason: str) -> Any:
        """A fresh container of the phi values of carried ``name`` (the body may mutate
        the one it gets), or Undefined for names not carried."""
        entry = self.carried_values.get(name)
        if entry is None:
            return Undefined(name, reason)
        return unflatten(*entry)

    def carried(self) -> tuple[Any, ...]:
        reason = (
            f"is first assigned inside the tylo.range loop at line {self.line}: read "
            "before its assignment in an iteration (assign it before the loop to carry "
            "it from one iteration to the next)"
        )
        return tuple(self._value(n, reason) for n in self.names)

    def next_(self, f_locals: dict[str, Any]) -> None:
        ctx = self.ctx
        b = ctx.builder
        k = 0
        for name, (tree, plans, init_leaves) in zip(self.carried_names, self.plans):
            value = f_locals.get(name, Undefined(name, "is unbound"))
            if isinstance(value, Undefined):
                raise TraceError(
                    f"{name!r} is carried by the tylo.range loop at line "
                    f"{self.line} but is unbound at the end of its body"
                )
            leaves, new_tree = flatten(value)
            if new_tree != tree:
                raise TraceError(
                    f"{name!r} changes structure in the tylo.range loop at line {self.line} "
                    f"(from {tree} to {new_tree}); a carried value must keep its shape"
                )
            for leaf, plan, init in zip(leaves, plans, init_leaves):
                phi = self.phis[k]
                k += 1
                if plan[0] == "static":
                    if not same(leaf, init):
                        raise TraceError(
                            f"{name!r} is rebound in the tylo.range loop at line {self.line} "
                            f"from {init!r} to {leaf!r}; only numbers, index expressions and "
                            "Values can change from one iteration to the next"
                        )
                    continue
                phi.add_incoming(_latch_value(ctx, name, leaf, plan), b.block)  # type: ignore[union-attr]
        nxt = b.add(self.iv, self.iv.type(1), name=ctx.unique("next"))
        self.iv.add_incoming(nxt, b.block)
        back_edge = b.branch(self.iv.parent)
        if self.unroll is not None:
            back_edge.set_metadata("llvm.loop", ctx.module.loop_id(_unroll_hint(self.unroll)))
        ctx.pop_scope(self.scope)
        b.position_at_end(self.exit)
        self.latched = True

    def finish(self) -> tuple[Any, ...]:
        reason = (
            f"is first assigned inside the tylo.range loop at line {self.line}, so it "
            "has no value after the loop; assign it before the loop to carry it"
        )
        out = [self._value(n, reason) for n in self.names]
        out.append(
            Undefined(
                self.target,
                f"is the index of the tylo.range loop at line "
                f"{self.line}; it has no value after the loop",
            )
        )
        return tuple(out)


def _unroll_hint(unroll: int | bool) -> tuple[str, ...] | tuple[str, int]:
    """The hint on a loop's back edge for ``tylo.range(..., unroll=unroll)``."""
    if unroll is True:
        return ("llvm.loop.unroll.full",)
    if unroll == 1:
        return ("llvm.loop.unroll.disable",)
    return ("llvm.loop.unroll.count", unroll)


def _carry_plan(name: str, leaf: Any) -> tuple[str, Any]:
    kind, d = kind_of(leaf)
    if kind == "value":
        return "dtype", d
    if kind == "index":
        return "index", None
    if kind == "float":
        return "dtype", dt.f32
    if kind == "bool":
        return "dtype", dt.bool_
    return "static", None


def _latch_value(ctx: TraceContext, name: str, leaf: Any, plan: tuple[str, Any]) -> ir.Value:
    kind, d = plan
    lk, ld = kind_of(leaf)
    if kind == "index":
        if lk == "value" and (ld.is_float or ld is dt.bool_ or ld.bits > ctx.index_bits):
            raise TraceError(
                f"{name!r} starts as an integer index and becomes a {ld} value "
                "in the loop body; start it as a Value of that dtype "
                "(e.g. tylo.value(0, tylo.i32))"
            )
        if lk not in ("index", "value"):
            raise TraceError(f"{name!r} starts as an integer and becomes a {lk} in the loop body")
        return materialize(ctx, leaf, kind, d)
    if lk == "value" and ld is not d:
        raise TraceError(
            f"{name!r} starts as a {d} value and becomes a {ld} value in the "
            "loop body; convert with .to() so the dtype stays the same"
        )
    if lk in ("static", "undefined"):
        raise TraceError(f"{name!r} starts as a {d} value and becomes {leaf!r} in the loop body")
    return materialize(ctx, leaf, "dtype", d)


def loop_begin(iterable: Any, line: int, names: tuple[str, ...], target: str | None) -> Any:
    """Start a ``for``: a dynamic loop over a :class:`range`, else a Python loop."""
    if isinstance(iterable, range):
        return DynamicLoop(iterable, line, names, target)
    return StaticLoop(iterable)
