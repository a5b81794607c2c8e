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
from typing import TYPE_CHECKING, Any

from tylo.kernel import guardexpr
from tylo.kernel.errors import KernelArgumentError, TraceError
from tylo.kernel.guardexpr import GuardDataError

if TYPE_CHECKING:
    from tylo.kernel.context import TraceContext
    from tylo.kernel.memory import Tensor

# A launch (and a disk-cache hit) needs only Guard, compile_guards and check_guards: the
# tracer's modules and sympy are imported by assume() and assume_aligned(), at trace time.

__all__ = ["Guard", "GuardDataError", "assume", "assume_aligned", "compile_guards", "divisible"]

MAX_TEXT = 4096


def divisible(expr: Any, divisor: Any) -> Any:
    """The fact ``divisor | expr``, for :func:`assume` (and ``tylo.layouts.assuming``)."""
    from tylo.layouts.symbolic import divisible as _divisible

    return _divisible(expr, divisor)


@dataclass(frozen=True)
class Guard:
    """One launch check: ``text`` describes the fact; ``expr`` is the fact as data, an
    expression tree over ``v`` (the launch's argument values, one per Python parameter)
    in the grammar of :mod:`tylo.kernel.guardexpr`, validated on construction (raises
    :class:`~tylo.kernel.guardexpr.GuardDataError`). A guard is never stored or read
    back as code: :meth:`compile` builds closures from the tree."""

    text: str
    expr: Any

    def __post_init__(self) -> None:
        if type(self.text) is not str or len(self.text) > MAX_TEXT:
            raise GuardDataError(
                f"Guard: text must be a str of at most {MAX_TEXT} characters, got "
                f"{type(self.text).__name__} of length {len(str(self.text))}"
            )
        object.__setattr__(self, "expr", guardexpr.validate(self.expr))

    @property
    def source(self) -> str:
        """The fact as a Python expression over ``v[i]``, rendered from the validated
        tree (for generated launch code; only ints, ``v[i]``, operators, ``min``/``max``)."""
        return guardexpr.render(self.expr)

    def compile(self) -> Callable[[Sequence[Any]], bool]:
        """``f(v)``: whether launch values ``v`` satisfy the fact (closures, no eval; a
        division by zero is a violation)."""
        return guardexpr.compile_expr(self.expr)

    def to_data(self) -> list[Any]:
        """``[text, expr]`` in JSON's types; :meth:`from_data` reads it back."""
        return [self.text, guardexpr.to_data(self.expr)]

    @classmethod
    def from_data(cls, data: Any) -> Guard:
        """The guard :meth:`to_data` wrote, validated; anything else raises
        :class:`~tylo.kernel.guardexpr.GuardDataError` (never evaluated)."""
        if type(data) is not list or len(data) != 2:
            raise GuardDataError(
                f"Guard.from_data: expected [text, expr], got {type(data).__name__}"
            )
        return cls(data[0], data[1])


def compile_guards(guards: Sequence[Guard]) -> Callable[[Sequence[Any]], bool]:
    """One function ``f(v)`` true exactly when ``v`` satisfies every guard (closures, no
    eval; for launch paths that check all guards at once)."""
    return guardexpr.compile_all([g.expr for g in guards])


def _require_top_level(ctx: TraceContext, what: str) -> None:
    if ctx.dynamic_depth:
        raise TraceError(
            f"{what} states a fact for the whole kernel; call it outside dynamic loops and "
            f"branches (it is inside {ctx.scope.describe()})"
        )


def assume(*conditions: Any, message: str | None = None) -> None:
    """Compile the kernel assuming ``conditions`` (relations over runtime integer
    parameters, or :func:`divisible` facts) and check them at every launch."""
    from tylo.kernel import facts
    from tylo.kernel.context import current

    ctx = current()
    _require_top_level(ctx, "tylo.assume")
    for cond in conditions:
        decided = facts.decide(cond)
        if decided is True:
            continue
        if decided is False:
            raise TraceError(f"tylo.assume({cond}): this can never hold")
        ctx.guards.append(_guard(message or f"{cond}", _tree(ctx, cond)))
        ctx.enter_facts(facts.assuming(cond))


def assume_aligned(ptr: Tensor, nbytes: int) -> Tensor:
    """``ptr`` (a pointer parameter, or a view of one) known to be aligned to ``nbytes``
    bytes; launches check the address."""
    from tylo.kernel.context import current
    from tylo.kernel.memory import Tensor

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
            _guard(
                f"{ptr.name} is aligned to {nbytes} bytes",
                ("==", ("%", ("v", ptr.param), nbytes), 0),
            )
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


def _guard(text: str, tree: Any) -> Guard:
    try:
        return Guard(text, tree)
    except GuardDataError as err:
        raise TraceError(f"tylo.assume: cannot check {text} at launch: {err}") from None


def _tree(ctx: TraceContext, e: Any) -> Any:
    """Fact ``e`` as a guard expression tree over ``("v", i)`` (the launch values)."""
    import sympy

    from tylo.layouts.symbolic import Divisible

    if isinstance(e, Divisible):
        return ("==", ("%", _tree(ctx, e.expr), _tree(ctx, e.divisor)), 0)
    if isinstance(e, (bool, int)):
        return e
    e = sympy.sympify(e)
    if e is sympy.true or e is sympy.false:
        return bool(e)
    if e.is_Integer:
        return int(e)
    if e.is_Symbol:
        index = ctx.param_index.get(e)
        if index is None:
            raise TraceError(
                f"tylo.assume: {e} is not a runtime integer parameter of the "
                "kernel, so a launch cannot check it"
            )
        return ("v", index)
    if isinstance(e, sympy.floor):
        num, den = sympy.fraction(sympy.together(e.args[0]))
        return ("//", _tree(ctx, num), _tree(ctx, den))
    op = _sympy_op(e)
    if op is None:
        raise TraceError(
            f"tylo.assume: cannot check {e} ({type(e).__name__}) at launch; use "
            "+, -, *, //, %, min, max, comparisons and divisible()"
        )
    return (op, *(_tree(ctx, a) for a in e.args))


def _sympy_op(e: Any) -> str | None:
    import sympy

    if e.is_Add:
        return "+"
    if e.is_Mul:
        return "*"
    if e.is_Pow and e.exp.is_Integer and int(e.exp) >= 0:
        return "**"
    if isinstance(e, sympy.Mod):
        return "%"
    if isinstance(e, sympy.Min):
        return "min"
    if isinstance(e, sympy.Max):
        return "max"
    if isinstance(e, sympy.core.relational.Relational):
        return e.rel_op
    if isinstance(e, sympy.And):
        return "and"
    if isinstance(e, sympy.Or):
        return "or"
    if isinstance(e, sympy.Not):
        return "not"
    return None


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
