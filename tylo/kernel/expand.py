"""``sympy.expand`` with its per-node work memoized.

Splitting an address into loop-invariant and varying terms needs the expanded sum; the
tile copies of a bounded GEMM expand ~50 addresses that share their large sub-expressions
(the tile origin, the row clamp), and sympy's ``expand`` walks every one of them again
(~0.8 ms each, most of it re-expanding the shared parts). :func:`expand` runs sympy's own
algorithm (``Expr.expand`` with the default hints: each hint once in sorted order, then
multinomial, mul and log until nothing changes) with ``Expr._expand_hint``'s per-node
result memoized: a node's expansion depends only on its structure and the hint, so the
result is exactly sympy's.
"""

from __future__ import annotations

from typing import Any

from tylo.layouts._lazy import sympy

__all__ = ["expand"]

# sympy.expand's default hints (sympy.core.function.expand), as Expr.expand passes them on
_HINTS = {
    "power_base": True,
    "power_exp": True,
    "mul": True,
    "log": True,
    "multinomial": True,
    "basic": True,
}
# Expr.expand's order: sorted, with multinomial before mul
_ORDER = tuple(
    "_eval_expand_" + h for h in sorted(_HINTS, key=lambda h: "mulz" if h == "mul" else h)
)
_REPEAT = ("_eval_expand_multinomial", "_eval_expand_mul", "_eval_expand_log")
_MEMO: dict[tuple[Any, str], tuple[Any, bool]] = {}


def expand(e: Any) -> Any:
    """``sympy.expand(e)``.

    >>> x, y = sympy.symbols("x y", integer=True)
    >>> expand(3 * (x + 2) * (y + 1)) == sympy.expand(3 * (x + 2) * (y + 1))
    True
    """
    expr = sympy.sympify(e)
    if not isinstance(expr, sympy.Expr) or not sympy.core.parameters.global_parameters.evaluate:
        return sympy.expand(expr)
    for hint in _ORDER:
        expr, _ = _expand_hint(expr, hint)
    while True:
        was = expr
        for hint in _REPEAT:
            expr, _ = _expand_hint(expr, hint)
        if expr == was:
            return expr


def _expand_hint(expr: Any, hint: str) -> tuple[Any, bool]:
    """``Expr._expand_hint(expr, hint, deep=True, **hints)``, memoized."""
    key = (expr, hint)
    got = _MEMO.get(key)
    if got is not None:
        return got
    hit = False
    out = expr
    if getattr(expr, "args", ()) and not expr.is_Atom:
        sargs = []
        for arg in expr.args:
            arg, arghit = _expand_hint(arg, hint)
            hit |= arghit
            sargs.append(arg)
        if hit:
            out = expr.func(*sargs)
    got = (out, hit)
    if hasattr(out, hint):
        new = getattr(out, hint)(**_HINTS)
        if new != out:
            got = (new, True)
    if len(_MEMO) > 200_000:
        _MEMO.clear()
    _MEMO[key] = got
    return got
