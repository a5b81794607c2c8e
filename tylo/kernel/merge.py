"""Merging values at the end of dynamic branches, and the values of unbound names.

Shared by :mod:`tylo.kernel.control` (``if``, ``x if c else y``, ``and``/``or``) and
:mod:`tylo.kernel.loops`. A merged name's leaves (see :mod:`tylo.kernel.tree`) are unified
kind by kind: two Values of one dtype give a phi of that dtype; a Value and a Python number
or index expression give a phi of the Value's dtype; two index expressions give an index
phi, seen in Python as a fresh integer symbol (non-negative and bounded when both sides
are); any other object must be the same in both branches. The ends of both branches stay
open until the merge, so conversions can be appended to them; leaves that need a branch's
own region (index expressions over symbols bound inside it) are lowered before it closes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from llvmlite import ir

from tylo import dtypes as dt
from tylo.kernel import facts
from tylo.kernel.context import TraceContext, current
from tylo.kernel.errors import TraceError, Undefined
from tylo.kernel.lower import bounds, is_nonnegative, lower_bool, lower_int
from tylo.kernel.tree import flatten, unflatten
from tylo.kernel.values import Value, as_value, convert, is_relation, to_index
from tylo.layouts._lazy import sympy

__all__ = [
    "Branches",
    "Undefined",
    "classify",
    "close_branch",
    "cond_ir",
    "kind_of",
    "materialize",
    "merge_names",
    "same",
    "snapshot",
    "wrap_phi",
]

_builtin_range = range


# ---------------------------------------------------------------------------- conditions


def classify(x: Any, what: str) -> tuple[str, Any]:
    """('static', bool) | ('sym', relation) | ('value', bool Value)."""
    if isinstance(x, Value):
        if x.dtype is not dt.bool_:
            raise TraceError(f"{what} on a {x.dtype} value: compare it explicitly (x != 0)")
        return "value", x
    if hasattr(type(x), "__tylo_elementwise__"):
        raise TraceError(f"{what} on a {type(x).__name__}: reduce it to one bool first")
    if isinstance(x, sympy.Basic):
        if x is sympy.true or x is sympy.false:
            return "static", bool(x)
        rel = x if is_relation(x) else sympy.Ne(x, 0)
        if rel is sympy.true or rel is sympy.false:
            return "static", bool(rel)
        decided = facts.decide(rel)
        if decided is None:
            return "sym", rel
        return "static", decided
    return "static", bool(x)


def cond_ir(kind: str, cond: Any) -> ir.Value:
    ctx = current()
    return lower_bool(ctx, cond) if kind == "sym" else cond.use()


# ---------------------------------------------------------------------------- merging


def same(a: Any, b: Any) -> bool:
    if a is b:
        return True
    if type(a) is not type(b) or isinstance(a, (Value, sympy.Basic)):
        return isinstance(a, sympy.Basic) and isinstance(b, sympy.Basic) and a == b
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - objects whose == is not a plain bool differ
        return False


def kind_of(x: Any) -> tuple[str, Any]:
    if isinstance(x, Value):
        return "value", x.dtype
    if isinstance(x, Undefined):
        return "undefined", None
    if isinstance(x, (bool, np.bool_)) or is_relation(x):
        return "bool", None
    if isinstance(x, (int, np.integer)):
        return "index", None
    if isinstance(x, (float, np.floating)):
        return "float", None
    if isinstance(x, sympy.Expr):
        return ("index", None) if x.is_integer else ("float", None)
    return "static", None


def _unify(name: str, a: Any, b: Any, where: str) -> tuple[str, Any]:
    """The kind a merged leaf takes: ('index'|'bool'|'dtype', DType|None)."""
    (ka, da), (kb, db) = kind_of(a), kind_of(b)
    if ka == "static" or kb == "static":
        raise TraceError(
            f"{name!r} is bound to different objects ({a!r} and {b!r}) {where}; only "
            "numbers, index expressions and Values can differ there"
        )
    if ka == "value" and kb == "value":
        if da is not db:
            raise TraceError(
                f"{name!r} is a {da} value and a {db} value {where}; convert "
                "one with .to() so both have the same dtype"
            )
        return "dtype", da
    if ka == "value" or kb == "value":
        d, other = (da, kb) if ka == "value" else (db, ka)
        if other == "bool" and d is not dt.bool_:
            raise TraceError(f"{name!r} is a {d} value and a bool {where}")
        return "dtype", d
    if ka == kb == "index":
        return "index", None
    if ka == kb == "bool":
        return "dtype", dt.bool_
    if {ka, kb} <= {"index", "float"}:
        return "dtype", dt.f32
    raise TraceError(f"{name!r} is a {ka} and a {kb} {where}; they cannot be merged")


def materialize(ctx: TraceContext, x: Any, kind: str, d: Any) -> ir.Value:
    """Leaf ``x`` as IR of the merged kind, emitted at the builder's position."""
    if kind == "index":
        if isinstance(x, Value):
            return convert(x, index_dtype(ctx)).use()
        return lower_int(ctx, to_index(x))
    if isinstance(x, Value):
        return convert(x, d).use()
    return as_value(x, d).use()


def index_dtype(ctx: TraceContext) -> Any:
    return dt.i64 if ctx.index_bits == 64 else dt.i32


def wrap_phi(
    ctx: TraceContext,
    name: str,
    kind: str,
    d: Any,
    phi: ir.Value,
    hull: tuple[Any, Any] | None = None,
    nonneg: bool = False,
) -> Any:
    """The Python-side value of a phi: a Value, or a fresh symbol for runtime integers."""
    if kind == "index":
        sym = facts.integer_symbol(ctx.unique(name), nonnegative=nonneg)
        ctx.bind(sym, phi)
        if hull is not None:
            ctx.symbol_bounds[sym] = hull
        return sym
    return Value(d, phi)


def _hull(ctx: TraceContext, a: Any, b: Any) -> tuple[Any, Any] | None:
    if isinstance(a, Value) or isinstance(b, Value):
        return None
    (la, ha), (lb, hb) = bounds(ctx, to_index(a)), bounds(ctx, to_index(b))
    lo = None if la is None or lb is None else min(la, lb)
    hi = None if ha is None or hb is None else max(ha, hb)
    return lo, hi


def _prepare(ctx: TraceContext, leaves: list[Any]) -> list[Any]:
    """Lower, in the current (still open) region, the leaves that need it to be merged
    later: non-constant index expressions and relations become ``(tag, leaf, ir)``."""
    out: list[Any] = []
    for x in leaves:
        if isinstance(x, sympy.Basic) and not x.is_number and x not in (sympy.true, sympy.false):
            if is_relation(x):
                out.append(("ir-bool", x, lower_bool(ctx, x)))
            else:
                out.append(("ir-index", x, lower_int(ctx, to_index(x))))
        else:
            out.append(x)
    return out


class Branches:
    """Two branches traced one after the other, then merged (an ``if``, ``x if c else y``,
    or the short-circuit of ``and``/``or``). Branch ends stay unterminated until the merge,
    so conversions to the merged types can be appended to them."""

    def __init__(self, kind: str, cond: Any, line: int | None, label: str) -> None:
        ctx = current()
        self.ctx = ctx
        self.line = line
        self.label = label
        self.cond_kind, self.cond = kind, cond
        c = cond_ir(kind, cond)
        self.blocks = {
            "then": ctx.new_block(f"{label}_then"),
            "else": ctx.new_block(f"{label}_else"),
        }
        self.merge_block = ctx.new_block(f"{label}_end")
        ctx.builder.cbranch(c, self.blocks["then"], self.blocks["else"])
        self.ends: list[ir.Block] = []
        self.scope: Any = None
        self.opaque = False  # the branch entered holds a condition the facts do not

    def enter(self, which: str) -> None:
        ctx = self.ctx
        ctx.builder.position_at_end(self.blocks[which])
        self.scope = ctx.push_scope(which, self.line)
        captured = self.cond_kind == "sym" and facts.captured(self.cond, which == "then")
        if self.cond_kind == "sym":
            for fact in facts.implied(self.cond, which == "then"):
                try:
                    ctx.enter_facts(facts.assuming(fact))
                except Exception:  # noqa: BLE001 - a fact the solver refuses is a hint
                    captured = False
        if not captured:  # accesses here run under a condition the facts do not hold
            ctx.opaque_branches.append(self.line)
        self.opaque = not captured

    def leave(self, leaves: list[Any] = ()) -> list[Any]:  # type: ignore[assignment]
        """Close the current branch; returns ``leaves`` prepared for merging."""
        prepared = _prepare(self.ctx, list(leaves))
        self.ends.append(self.ctx.builder.block)
        self.ctx.pop_scope(self.scope)
        if self.opaque:
            self.ctx.opaque_branches.pop()
        return prepared

    def merge(
        self,
        labels: list[str],
        orig: tuple[list[Any], list[Any]],
        prep: tuple[list[Any], list[Any]],
    ) -> list[Any]:
        """Phi-merge leaf ``k`` of both branches (``orig[i][k]`` as traced, ``prep[i][k]``
        as prepared by :meth:`leave`); ``labels[k]`` names it in errors."""
        ctx = self.ctx
        b = ctx.builder
        where = f"in the two branches of the dynamic {self.label} at line {self.line}"
        plans: list[Any] = []
        for k, label in enumerate(labels):
            a, c = orig[0][k], orig[1][k]
            plans.append(("same", a) if same(a, c) else _unify(label, a, c, where))
        rows: list[list[Any]] = []
        for i, end in enumerate(self.ends):
            b.position_at_end(end)
            # a throwaway region: what is lowered here serves this branch end only
            tmp = ctx.push_scope("merge", self.line, dynamic=False)
            row: list[Any] = []
            for k, plan in enumerate(plans):
                row.append(None if plan[0] == "same" else _incoming(ctx, prep[i][k], *plan))
            ctx.pop_scope(tmp, dynamic=False)
            rows.append(row)
            b.branch(self.merge_block)
        b.position_at_end(self.merge_block)
        out: list[Any] = []
        for k, plan in enumerate(plans):
            if plan[0] == "same":
                out.append(plan[1])
                continue
            kind, d = plan
            phi = b.phi(rows[0][k].type, name=ctx.unique(labels[k]))
            for end, row in zip(self.ends, rows):
                phi.add_incoming(row[k], end)
            a, c = orig[0][k], orig[1][k]
            hull = nonneg = None
            if kind == "index":
                hull = _hull(ctx, a, c)
                nonneg = all(
                    not isinstance(v, Value) and is_nonnegative(ctx, to_index(v)) for v in (a, c)
                )
            out.append(wrap_phi(ctx, labels[k], kind, d, phi, hull, bool(nonneg)))
        return out


def _incoming(ctx: TraceContext, x: Any, kind: str, d: Any) -> ir.Value:
    """A prepared leaf as IR of the merged kind, emitted at a branch end (its region has
    closed, so only IR and constants are touched)."""
    if isinstance(x, tuple) and len(x) == 3 and x[0] in ("ir-bool", "ir-index"):
        if kind == "index":
            return x[2]
        src = dt.bool_ if x[0] == "ir-bool" else index_dtype(ctx)
        return convert(Value(src, x[2], ctx.scope), d).use()
    if isinstance(x, Value):
        x = Value(x.dtype, x.ir, ctx.scope)  # its IR dominates this branch end
    return materialize(ctx, x, kind, d)


def merge_names(
    br: Branches, names: tuple[str, ...], sides: list[Any], undefined_reason: str
) -> list[Any]:
    """Merge the values bound to ``names`` at the ends of two branches. ``sides[i]`` is
    ``(values, flattened, prepared)`` of branch ``i``."""
    (va, fa, pa), (vb, fb, pb) = sides
    where = f"in the two branches of the dynamic {br.label} at line {br.line}"
    labels: list[str] = []
    leaves: tuple[list[Any], list[Any]] = ([], [])
    prepared: tuple[list[Any], list[Any]] = ([], [])
    slots: list[Any] = []
    for n, name in enumerate(names):
        if va[n] is vb[n]:
            slots.append(("same", va[n]))
            continue
        if isinstance(va[n], Undefined) or isinstance(vb[n], Undefined):
            slots.append(("same", Undefined(name, undefined_reason)))
            continue
        (la, ta), (lb, tb) = fa[n], fb[n]
        if ta != tb:
            raise TraceError(f"{name!r} has a different structure {where} ({ta} and {tb})")
        slots.append(("merged", ta, len(labels), len(la)))
        labels += [name] if len(la) == 1 else [f"{name}.{k}" for k in _builtin_range(len(la))]
        leaves[0].extend(la)
        leaves[1].extend(lb)
        prepared[0].extend(pa[n])
        prepared[1].extend(pb[n])
    merged = br.merge(labels, leaves, prepared)
    out: list[Any] = []
    for slot in slots:
        if slot[0] == "same":
            out.append(slot[1])
        else:
            _, tree, start, count = slot
            out.append(unflatten(tree, merged[start : start + count]))
    return out


def close_branch(
    br: Branches, names: tuple[str, ...], values: list[Any], before: list[Any]
) -> tuple[list[Any], list[Any], list[Any]]:
    """Leave the current branch; leaves of names it rebound are prepared for merging."""
    flat = [flatten(v) for v in values]
    changed = [v is not b for v, b in zip(values, before)]
    todo = [leaf for (ls, _), c in zip(flat, changed) if c for leaf in ls]
    done = iter(br.leave(todo))
    prepared = [[next(done) for _ in ls] if c else list(ls) for (ls, _), c in zip(flat, changed)]
    return values, flat, prepared


def snapshot(names: tuple[str, ...], f_locals: dict[str, Any], reason: str) -> list[Any]:
    return [f_locals[n] if n in f_locals else Undefined(n, reason) for n in names]
