"""The runtime of rewritten kernels: dynamic loops, branches and boolean logic.

:mod:`tylo.kernel.ast_rewrite` turns ``for``/``if``/``and``/``or``/``not``/``x if c else
y`` into calls to this module. Each call decides whether the construct is *static* (plain
Python behaviour, no IR) or *dynamic* (IR control flow):

- a ``for`` over :func:`range` (``tylo.range``) is a real IR loop; any other iterable is
  unrolled by Python;
- an ``if`` on a Python value, or on a relation that :func:`tylo.kernel.facts.decide`
  settles, runs one branch at trace time; on a bool Value or an undecided relation it
  traces both branches and merges the names they rebind with phi nodes.

Python operators whose outcome depends on runtime values (``==``, ``in``, ``is``,
``d[k]``, ``d.get``, ``any``/``all``/``bool``, division by a static zero) are in
:mod:`tylo.kernel.pyops`, and ``match`` patterns in :mod:`tylo.kernel.patterns`; this
module re-exports their entry points, so the rewritten code reaches everything through
one namespace. ``return value`` in the kernel itself, and runtime tests of ``while``,
``assert`` and comprehension filters, raise a TraceError at their line.

Loop-carried values: a name assigned in the loop body that is bound before the loop is
carried. Its leaves (see :mod:`tylo.kernel.tree`) become phi nodes: a Value keeps its
dtype; a Python int or an index expression becomes a runtime integer (a fresh symbol, so
index arithmetic on it stays symbolic); a Python float becomes an f32 Value and a bool a
bool Value; any other object must be the same object at the end of the body. After the
loop, carried names hold their exit values; names first assigned inside the loop and the
loop index itself are unbound (using them is a clear error).
"""

from __future__ import annotations

import operator
import sys
from collections.abc import Callable
from typing import Any

from tylo import dtypes as dt
from tylo.kernel.context import current, current_or_none
from tylo.kernel.errors import TraceError, Undefined
from tylo.kernel.loops import loop_begin, range
from tylo.kernel.merge import (
    Branches,
    classify,
    close_branch,
    merge_names,
    snapshot,
)
from tylo.kernel.patterns import match_case
from tylo.kernel.pyops import (
    all_of,
    any_of,
    builtin,
    contains,
    divide,
    eq,
    get,
    getitem,
    is_,
    is_not,
    ne,
    not_contains,
    setitem,
)
from tylo.kernel.values import Value
from tylo.layouts._lazy import sympy

__all__ = [
    "Undefined",
    "all_of",
    "and_",
    "any_of",
    "builtin",
    "check_exit",
    "check_return",
    "compare_chain",
    "contains",
    "depth",
    "divide",
    "eq",
    "get",
    "getitem",
    "if_begin",
    "ifexp",
    "is_",
    "is_not",
    "loop_begin",
    "match_case",
    "ne",
    "not_",
    "not_contains",
    "or_",
    "range",
    "setitem",
    "static_test",
]


def depth() -> int:
    """How many dynamic regions (loop bodies, branches) enclose the current position."""
    ctx = current_or_none()
    return 0 if ctx is None else ctx.dynamic_depth


def check_exit(start_depth: int, kind: str, line: int) -> None:
    """Raise if ``break``/``continue``/``return`` would leave a dynamic region."""
    ctx = current_or_none()
    if ctx is None or ctx.dynamic_depth == start_depth:
        return
    raise TraceError(
        f"`{kind}` inside {ctx.scope.describe()} is not supported: a dynamic loop or branch "
        "must run to its end (compute a flag and test it instead)",
        lineno=line,
    )


_STATIC_HINTS = {
    "while": "use `for i in tylo.range(...)` with an `if` inside",
    "assert": "an assert cannot stop a GPU thread; state the fact with tylo.assume(...) "
    "(checked at launch for runtime arguments) or test it with `if`",
    "comprehension filter": "a list's length cannot depend on runtime values; build it "
    "from every element and use tylo.where(c, a, b) per element",
}


def static_test(test: Any, line: int, what: str) -> bool:
    """The truth of a ``while`` test, an ``assert`` or a comprehension's ``if`` filter,
    which must be known at trace time: a runtime condition raises a TraceError at
    ``line``."""
    kind, value = classify(test, what)
    if kind != "static":
        hint = _STATIC_HINTS.get(what, "make it static")
        shown = f"`{value}`" if kind == "sym" else f"this {value.dtype} value"
        raise TraceError(
            f"a `{what}` condition must be known at trace time, but {shown} depends on "
            f"runtime values; {hint}",
            lineno=line,
        )
    return value


def check_return(value: Any, line: int) -> Any:
    """``value``, after checking that the kernel itself (not an inline helper) does not
    return a value: a kernel's results go to memory."""
    ctx = current_or_none()
    if value is not None and ctx is not None:
        frame = sys._getframe(1)
        if frame.f_code is getattr(ctx, "kernel_code", None):
            raise TraceError(
                f"a kernel returns nothing, but this returns {type(value).__name__} "
                f"{value!r}; store results to memory (out[i] = value)",
                lineno=line,
            )
    return value


def not_(x: Any) -> Any:
    kind, value = classify(x, "not")
    if kind == "static":
        return not value
    if kind == "sym":
        return sympy.Not(value)
    return Value(dt.bool_, current().builder.not_(value.use()))


# ---------------------------------------------------------------------------- if


class _StaticIf:
    dynamic = False

    def __init__(self, value: bool) -> None:
        self.value = value

    def then_(self, f_locals: dict[str, Any]) -> bool:
        return self.value

    def else_(self, f_locals: dict[str, Any]) -> bool:
        return not self.value


class _DynamicIf:
    dynamic = True

    def __init__(self, kind: str, cond: Any, line: int, names: tuple[str, ...]) -> None:
        self.names = names
        self.line = line
        self.branches = Branches(kind, cond, line, "if")
        self.before: list[Any] = []
        self.sides: list[Any] = []

    def then_(self, f_locals: dict[str, Any]) -> bool:
        self.before = snapshot(
            self.names, f_locals, f"is not bound before the dynamic if at line {self.line}"
        )
        self.branches.enter("then")
        return True

    def else_(self, f_locals: dict[str, Any]) -> bool:
        values = snapshot(self.names, f_locals, "is unbound")
        self.sides.append(close_branch(self.branches, self.names, values, self.before))
        self.branches.enter("else")
        return True

    def restore(self) -> tuple[Any, ...]:
        return tuple(self.before)

    def finish(self, f_locals: dict[str, Any]) -> tuple[Any, ...]:
        values = snapshot(self.names, f_locals, "is unbound")
        self.sides.append(close_branch(self.branches, self.names, values, self.before))
        reason = (
            f"is assigned in only one branch of the dynamic if at line {self.line}, so "
            "it has no value after it; assign it before the if (or in both branches)"
        )
        return tuple(merge_names(self.branches, self.names, self.sides, reason))


def if_begin(test: Any, line: int, names: tuple[str, ...]) -> Any:
    """Start an ``if``: static (one branch runs in Python) or dynamic (both traced)."""
    kind, value = classify(test, "if")
    if kind == "static":
        return _StaticIf(value)
    return _DynamicIf(kind, value, line, names)


def ifexp(test: Any, then: Callable[[], Any], orelse: Callable[[], Any], line: int) -> Any:
    """``then() if test else orelse()``; with a dynamic test both are traced in branches
    (so a load in one is only executed when selected) and merged."""
    kind, value = classify(test, "conditional expression")
    if kind == "static":
        return then() if value else orelse()
    br = Branches(kind, value, line, "ifexp")
    sides = []
    for which, thunk in (("then", then), ("else", orelse)):
        br.enter(which)
        result = thunk()
        sides.append(close_branch(br, ("value",), [result], [_NOTHING]))
    reason = "has no value"
    return merge_names(br, ("value",), sides, reason)[0]


_NOTHING = object()


# ---------------------------------------------------------------------------- and / or


def _short_circuit(is_and: bool, first: Any, thunks: tuple[Callable[[], Any], ...]) -> Any:
    kind, value = classify(first, "and" if is_and else "or")
    if kind == "static":
        if value != is_and or not thunks:  # `False and ...`, `True or ...`, or the last
            return first
        return _short_circuit(is_and, thunks[0](), thunks[1:])
    if not thunks:
        return value
    ctx = current()
    label = "and" if is_and else "or"
    br = Branches(
        kind, value if is_and else sympy.Not(value) if kind == "sym" else value, ctx.line, label
    )
    if not is_and and kind == "value":
        # `a or b`: evaluate b where a is false: swap the roles of the blocks
        br.blocks["then"], br.blocks["else"] = br.blocks["else"], br.blocks["then"]
    br.enter("then")
    rest = _short_circuit(is_and, thunks[0](), thunks[1:])
    rkind, rvalue = classify(rest, label)
    then_block = br.blocks["then"]
    pure = (
        kind == "sym"
        and rkind != "value"
        and not then_block.instructions
        and ctx.builder.block is then_block
        and not (rkind == "sym" and rvalue.free_symbols & set(br.scope.bindings))
    )
    if pure:  # both relations: stay symbolic (the facts can still settle them)
        br.leave()
        br.enter("else")
        br.leave()
        br.merge([], ([], []), ([], []))
        other = rvalue if rkind == "sym" else bool(rvalue)
        return sympy.And(value, other) if is_and else sympy.Or(value, other)
    side_a = close_branch(br, ("rhs",), [rest], [_NOTHING])
    br.enter("else")
    side_b = close_branch(br, ("rhs",), [not is_and], [_NOTHING])
    return merge_names(br, (label,), [side_a, side_b], "has no value")[0]


def and_(first: Any, *rest: Callable[[], Any]) -> Any:
    """``first and rest[0]() and ...`` with Python semantics for static operands and
    short-circuit control flow (a bool Value) for dynamic ones."""
    return _short_circuit(True, first, rest)


def or_(first: Any, *rest: Callable[[], Any]) -> Any:
    """``first or rest[0]() or ...`` (see :func:`and_`)."""
    return _short_circuit(False, first, rest)


_COMPARE = {
    "Lt": operator.lt,
    "LtE": operator.le,
    "Gt": operator.gt,
    "GtE": operator.ge,
    "Eq": eq,
    "NotEq": ne,
    "Is": is_,
    "IsNot": is_not,
    "In": contains,
    "NotIn": not_contains,
}


def compare_chain(left: Any, *pairs: tuple[str, Callable[[], Any]]) -> Any:
    """``a < b < c`` evaluated as ``a < b and b < c`` with each operand evaluated once."""
    (op, thunk), *rest = pairs
    right = thunk()
    result = _COMPARE[op](left, right)
    if not rest:
        return result
    return and_(result, lambda: compare_chain(right, *rest))
