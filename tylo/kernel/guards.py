"""Launch guards: facts a kernel is compiled to assume, checked before every launch.

A parameter annotation (``tylo.Int(multiple_of=8)``, ``tylo.Ptr(align=16)``) states a fact
for every specialization. When the fact depends on a static choice (say, vector loads only
when the host decided the row stride allows them), state it in the kernel instead:

.. code-block:: python

    if vec > 1:                                  # vec is static
        x = tylo.assume_aligned(x, 4 * vec)      # the pointer parameter's alignment
        tylo.assume(tylo.divisible(ld, vec))     # a fact over runtime integers

The trace proceeds with the fact in force (so ``x.load(..., vector=vec)`` can be proved
aligned), and the compiled kernel checks it at each launch: a violation is a
:class:`~tylo.kernel.errors.KernelArgumentError` naming the fact, before anything runs.
Facts may use the kernel's runtime integer parameters, constants, ``+ - * // %``,
``min``/``max`` and comparisons; checking one costs one small Python function call.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sympy

from tylo.kernel import facts
from tylo.kernel.context import TraceContext, current
from tylo.kernel.errors import KernelArgumentError, TraceError
from tylo.kernel.memory import Tensor

__all__ = ["Guard", "assume", "assume_aligned", "divisible"]


def divisible(expr: Any, divisor: Any) -> Any:
    """The fact ``divisor | expr``, for :func:`assume` (and ``tylo.layouts.assuming``)."""
    from tylo.layouts.symbolic import divisible as _divisible

    return _divisible(expr, divisor)


@dataclass(frozen=True)
class Guard:
    """One launch check: ``text`` describes the fact, ``source`` is the Python expression
    over ``v`` (the launch's argument values, one per Python parameter)."""

    text: str
    source: str

    def compile(self) -> Callable[[Sequence[Any]], bool]:
        return eval(f"lambda v: {self.source}", {"__builtins__": {"min": min, "max": max}})


def _require_top_level(ctx: TraceContext, what: str) -> None:
    if ctx.dynamic_depth:
        raise TraceError(
            f"{what} states a fact for the whole kernel; call it outside dynamic loops and "
            f"branches (it is inside {ctx.scope.describe()})"
        )


def assume(*conditions: Any, message: str | None = None) -> None:
    """Compile the kernel assuming ``conditions`` (relations over runtime integer
    parameters, or :func:`divisible` facts) and check them at every launch."""
    ctx = current()
    _require_top_level(ctx, "tylo.assume")
    for cond in conditions:
        decided = facts.decide(cond)
        if decided is True:
            continue
        if decided is False:
            raise TraceError(f"tylo.assume({cond}): this can never hold")
        source = _python(ctx, cond)
        ctx.guards.append(Guard(message or f"{cond}", source))
        ctx.enter_facts(facts.assuming(cond))


def assume_aligned(ptr: Tensor, nbytes: int) -> Tensor:
    """``ptr`` (a pointer parameter, or a view of one) known to be aligned to ``nbytes``
    bytes; launches check the address."""
    ctx = current()
    _require_top_level(ctx, "tylo.assume_aligned")
    if not isinstance(ptr, Tensor) or ptr.param is None:
        raise TraceError(
            "tylo.assume_aligned: expected a pointer parameter of the kernel "
            f"(or a view of one), got {ptr!r}"
        )
    if type(nbytes) is not int or nbytes < 1 or nbytes & (nbytes - 1):
        raise TraceError(f"tylo.assume_aligned: nbytes must be a power of two, got {nbytes!r}")
    if nbytes > ptr.align:
        ctx.guards.append(
            Guard(f"{ptr.name} is aligned to {nbytes} bytes", f"v[{ptr.param}] % {nbytes} == 0")
        )
    return Tensor(
        ptr.dtype,
        ptr.base,
        addrspace=ptr.addrspace,
        align=max(ptr.align, nbytes),
        layout=ptr.layout,
        name=ptr.name,
        param=ptr.param,
    )


def _python(ctx: TraceContext, e: Any) -> str:
    """Python source for fact ``e`` over ``v[i]`` (the launch values)."""
    from tylo.layouts.symbolic import Divisible

    if isinstance(e, Divisible):
        return f"({_python(ctx, e.expr)}) % ({_python(ctx, e.divisor)}) == 0"
    if isinstance(e, bool):
        return str(e)
    if isinstance(e, int):
        return str(e)
    e = sympy.sympify(e)
    if e.is_Integer:
        return str(int(e))
    if e.is_Symbol:
        index = ctx.param_index.get(e)
        if index is None:
            raise TraceError(
                f"tylo.assume: {e} is not a runtime integer parameter of the "
                "kernel, so a launch cannot check it"
            )
        return f"v[{index}]"
    args = [_python(ctx, a) for a in e.args]
    if e.is_Add:
        return "(" + " + ".join(args) + ")"
    if e.is_Mul:
        return "(" + " * ".join(args) + ")"
    if e.is_Pow and e.exp.is_Integer and int(e.exp) >= 0:
        return f"({args[0]}) ** {int(e.exp)}"
    if isinstance(e, sympy.Mod):
        return f"({args[0]}) % ({args[1]})"
    if isinstance(e, sympy.floor):
        num, den = sympy.fraction(sympy.together(e.args[0]))
        return f"({_python(ctx, num)}) // ({_python(ctx, den)})"
    if isinstance(e, (sympy.Min, sympy.Max)):
        return f"{'min' if isinstance(e, sympy.Min) else 'max'}({', '.join(args)})"
    if isinstance(e, sympy.core.relational.Relational):
        return f"({args[0]}) {e.rel_op} ({args[1]})"
    if isinstance(e, sympy.And):
        return "(" + " and ".join(args) + ")"
    if isinstance(e, sympy.Or):
        return "(" + " or ".join(args) + ")"
    if isinstance(e, sympy.Not):
        return f"(not {args[0]})"
    raise TraceError(
        f"tylo.assume: cannot check {e} ({type(e).__name__}) at launch; use "
        "+, -, *, //, %, min, max, comparisons and divisible()"
    )


def check_guards(
    guards: Sequence[tuple[Guard, Callable[[Sequence[Any]], bool]]],
    values: Sequence[Any],
    kernel: str,
) -> None:
    """Raise :class:`KernelArgumentError` for the first guard ``values`` violate."""
    for guard, fn in guards:
        if not fn(values):
            raise KernelArgumentError(
                f"{kernel}: the kernel was compiled assuming {guard.text}, which these "
                "arguments violate"
            )
