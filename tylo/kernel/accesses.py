"""Access facts: every memory access of a traced kernel, and whether it stays in bounds.

While a kernel is traced, each global, shared and local access (a load, a store, a vector
access, ``t.address(i)`` for an instruction operand, an atomic) is recorded with its
element offset, its width, the array it touches, the path condition it sits under and
its source line. Its obligation is ``0 <= offset`` and ``offset + width <= extent`` over
every thread, block and loop iteration the path condition allows
(:mod:`tylo.kernel.access_bounds` eliminates the indices). Each access ends in one of
three states:

- ``proved``: the facts settle both ends;
- ``guarded``: what remains is a condition on launch values (the runtime integers, the
  grid, and each pointer argument's extent in elements), checked before every launch
  (:mod:`tylo.kernel.bounds_check` raises
  :class:`~tylo.kernel.errors.OutOfBoundsLaunchError`);
- ``unproved``: an offset no launch value determines (read from memory), or a bound tylo
  cannot derive; the reason says which.

An access out of bounds for every launch the facts allow (``x[i - 1]`` where thread 0
exists) is an :class:`~tylo.kernel.errors.OutOfBoundsError` while tracing. The kernel's
policy (``@tylo.kernel(bounds=...)``) decides the rest: ``"guard"`` (the default) checks
the guards at launch; ``"prove"`` refuses to compile a kernel with a guarded or unproved
access; ``"off"`` records nothing.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from tylo.errors import TyloError
from tylo.kernel import access_bounds, facts, races
from tylo.kernel.access_counts import summary_line
from tylo.kernel.errors import OutOfBoundsError
from tylo.kernel.spec import BOUNDS_POLICIES
from tylo.layouts._lazy import sympy

__all__ = [
    "POLICIES",
    "Access",
    "AccessReport",
    "extent_symbol",
    "record",
    "summary_line",
]

POLICIES = BOUNDS_POLICIES  # one list: tylo.kernel.spec (imported on the launch path)
PROVED, GUARDED, UNPROVED = "proved", "guarded", "unproved"


@dataclass(frozen=True)
class Access:
    """One access of a traced kernel: ``kind`` (load, store, address, atomic), ``space``
    (global, shared, local), the ``array`` it touches (its parameter index ``param``, or
    None), the element ``offset`` and the ``width`` in elements, the offset's range over
    all indices (``lo``, ``hi``; None where unbounded), the ``condition`` (the path
    facts in force), the ``state`` with its ``guard`` (the launch condition, for a guarded
    access) or ``reason``, and the kernel source ``file`` and ``line``."""

    kind: str
    space: str
    array: str
    param: int | None
    offset_expr: Any
    width: int
    lo_expr: Any
    hi_expr: Any
    relations: tuple[Any, ...]
    state: str
    guard_parts: tuple[Any, ...]
    reason: str
    file: str
    line: int

    # the texts, made when first read (printing sympy expressions costs more than judging
    # them, and most reports are only counted)
    @functools.cached_property
    def offset(self) -> str:
        """The element offset, as text."""
        return str(self.offset_expr)

    @functools.cached_property
    def lo(self) -> str | None:
        """The least offset over all indices, as text (None where unbounded)."""
        return None if self.lo_expr is None else str(self.lo_expr)

    @functools.cached_property
    def hi(self) -> str | None:
        """The greatest offset over all indices, as text (None where unbounded)."""
        return None if self.hi_expr is None else str(self.hi_expr)

    @functools.cached_property
    def condition(self) -> str:
        """The relations of the path condition in force, as text (``true``: none)."""
        return " and ".join(str(r) for r in self.relations) or "true"

    @functools.cached_property
    def guard(self) -> str | None:
        """The launch condition of a guarded access, as text (None otherwise)."""
        if self.state != GUARDED:
            return None
        return " and ".join(str(p) for p in self.guard_parts)

    def describe(self) -> str:
        """One line: ``file:line  state  array[offset] (width)  guard or reason``."""
        wide = f" x{self.width}" if self.width > 1 else ""
        what = self.guard if self.state == GUARDED else self.reason
        return (
            f"{self.file}:{self.line}  {self.state:<8}  {self.space} {self.kind} "
            f"{self.array}[{self.offset}]{wide}  {what}"
        )


@dataclass(frozen=True)
class AccessReport:
    """The accesses of one specialization, in trace order; ``str()`` is the table
    ``tylo compile --accesses`` prints and :meth:`summary` its last line. ``assumed``:
    the facts the kernel states with ``tylo.assume`` / ``tylo.assume_aligned``, which the
    judgements may rely on and every launch checks."""

    kernel: str
    accesses: tuple[Access, ...] = field(default_factory=tuple)
    assumed: tuple[str, ...] = ()
    races: tuple[Any, ...] = ()

    def count(self, state: str) -> int:
        """How many accesses are in ``state`` (``"proved"``, ``"guarded"``, ``"unproved"``)."""
        if state not in (PROVED, GUARDED, UNPROVED):
            raise TyloError(
                f"AccessReport.count: state must be proved, guarded or unproved, got {state!r}"
            )
        return sum(1 for a in self.accesses if a.state == state)

    def counts(self) -> tuple[int, int, int]:
        """``(proved, guarded, unproved)``."""
        return self.count(PROVED), self.count(GUARDED), self.count(UNPROVED)

    def race_summary(self) -> str:
        """``races: N race-free, R races, U not proved`` over the shared-access pairs."""
        states = [r.state for r in self.races]
        return (
            f"races: {states.count('race-free')} race-free, {states.count('race')} races, "
            f"{states.count('not proved')} not proved"
        )

    def summary(self) -> str:
        """``accesses: N proved, G guarded, U unproved``."""
        return summary_line(self.counts())

    def __str__(self) -> str:
        lines = [f"kernel {self.kernel}:"]
        lines += [f"  assumed (checked at every launch): {text}" for text in self.assumed]
        lines += [f"  {a.describe()}" for a in self.accesses]
        lines += [f"  {r.describe()}" for r in self.races]
        lines.append(self.summary())
        if self.races:
            lines.append(self.race_summary())
        return "\n".join(lines)


def extent_symbol(param_name: str) -> sympy.Symbol:
    """The symbol that stands for a pointer argument's extent (elements from its address
    to the end of the array) in guard conditions."""
    return sympy.Symbol(f"len({param_name})", integer=True, nonnegative=True)


def record(
    ctx: Any,
    offset: Any,
    width: int,
    kind: str,
    *,
    name: str,
    space: str,
    extent: int | None,
    param: int | None,
    base: Any = None,
    nbytes: int = 0,
) -> None:
    """Record the access of ``width`` elements at element ``offset`` of the array ``name``
    in ``space`` (``extent`` elements where known statically; ``param``: the kernel
    parameter whose array it is, if any) and judge it (module docstring); an access out
    of bounds for every launch raises :class:`OutOfBoundsError`."""
    if ctx.bounds_policy == "off":
        return
    from tylo.kernel.debug import user_line

    file, line = user_line()
    params = tuple(ctx.param_index)
    in_force = facts.current_facts()
    relations = [r for r in in_force if isinstance(r, sympy.core.relational.Relational)]
    expr = sympy.sympify(offset)
    try:
        lo, hi = access_bounds.offset_range(
            expr, params, relations, facts.decide, facts.divides, facts_key=in_force
        )
    except Exception as err:  # noqa: BLE001 - judging an access never breaks a trace
        lo = hi = None
        failure = f"tylo could not bound the offset ({type(err).__name__}: {err})"
    else:
        failure = ""
    # the extremes are attained by indices every launch has: an out-of-bounds end is an
    # error now (exact_minimum(e) holds exactly when exact_minimum(-e) does)
    exact = access_bounds.exact_minimum(expr) and ctx.dynamic_depth == 0
    parts: list[Any] = []  # launch conditions still to check
    reasons: list[str] = []

    # the low end: 0 <= offset
    if lo is None:
        reasons.append(failure or access_bounds.unbounded_reason(expr, params))
    else:
        low = facts.decide(sympy.Ge(lo, 0))
        if low is False:
            if exact:
                raise OutOfBoundsError(
                    f"{name}[{expr}]: the offset reaches {lo}, before the start of {name}, for a "
                    "thread and iteration every launch has"
                )
            reasons.append(f"the offset may be negative (its least value is {lo})")
        elif low is None:
            parts.append(sympy.Ge(lo, 0))

    # the high end: offset + width <= extent
    if hi is None:
        if lo is not None:
            reasons.append(access_bounds.unbounded_reason(expr, params))
    elif extent is not None:
        high = facts.decide(sympy.Le(hi + width, extent))
        if high is False:
            if exact:
                raise OutOfBoundsError(
                    f"{name}[{expr}]: the offset reaches {hi}, past the {extent} elements of "
                    f"{name}, for a thread and iteration every launch has"
                )
            reasons.append(f"the offset may reach {hi}, past the {extent} elements of {name}")
        elif high is None:
            parts.append(sympy.Le(hi + width, extent))
    elif param is not None and space == "global":
        sym = extent_symbol(name)
        ctx.extent_params[sym] = param
        parts.append(sympy.Le(hi + width, sym))
    else:
        reasons.append(f"the extent of {name} is not known (not a kernel parameter's array)")

    if parts and ctx.opaque_branches:  # a guard would ignore the branch's condition
        line_of = ctx.opaque_branches[-1]
        reasons.append(
            "it runs under a condition tylo cannot read (a runtime value or a disjunction"
            + (f", the branch at line {line_of})" if line_of else ")")
            + ", so a launch check could refuse launches that never reach it"
        )
        parts = []
    state = UNPROVED if reasons else GUARDED if parts else PROVED
    if space == "shared" and nbytes:
        races.note(ctx, base, expr, width, nbytes, kind, tuple(relations), f"{file}:{line}")
    if parts:
        ctx.bounds_guards.append((param, name, parts, f"{file}:{line}", expr))
    ctx.accesses.append(
        Access(
            kind=kind,
            space=space,
            array=name,
            param=param,
            offset_expr=expr,
            width=width,
            lo_expr=lo,
            hi_expr=hi,
            relations=tuple(relations),
            state=state,
            guard_parts=tuple(parts),
            reason="; ".join(reasons) if reasons else ("proved" if state == PROVED else ""),
            file=file,
            line=line,
        )
    )
