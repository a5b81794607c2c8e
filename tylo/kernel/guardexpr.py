"""Launch-guard expressions as data: validated trees, interpreted or compiled to closures.

A guard (:mod:`tylo.kernel.guards`) is a fact over a launch's argument values ``v`` (one
per Python parameter). It is stored as a small expression tree, never as code, so that a
guard read back from the disk cache cannot run anything but this arithmetic:

- a leaf: an ``int`` or ``bool`` constant, or ``("v", i)``, the value of parameter ``i``;
- ``("+", a, b, ...)``, ``("*", a, b, ...)``, ``("min", a, ...)``, ``("max", a, ...)``;
- ``("-", a, b)``, ``("//", a, b)``, ``("%", a, b)`` (Python's floor semantics),
  ``("**", a, n)`` with ``n`` a constant in ``0..8`` and no ``**`` inside ``a``;
- comparisons ``("==" | "!=" | "<" | "<=" | ">" | ">=", a, b)``;
- ``("and", a, ...)``, ``("or", a, ...)``, ``("not", a)``.

Lists are accepted for tuples (JSON gives lists). :func:`validate` checks a tree against
this grammar and bounds (depth, size, integer width); :func:`evaluate` interprets it (the
definition); :func:`compile_expr` turns a validated tree into nested Python closures that
compute the same (no ``eval``); :func:`render` writes it as a Python expression over
``v[i]`` for code that generates launch functions. A division or remainder by zero makes
the guard false (the launch is refused with the guard's message) instead of raising.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

from tylo.errors import TyloError

__all__ = [
    "GuardDataError",
    "compile_all",
    "compile_expr",
    "evaluate",
    "render",
    "to_data",
    "validate",
]

MAX_DEPTH = 64
MAX_NODES = 4096
MAX_INT_BITS = 129  # constants within +-2**128: launch values are 64-bit
MAX_PARAM = 1 << 16
MAX_POWER = 8  # and no power of a power: the values stay small enough to check quickly

_NARY = {"+": operator.add, "*": operator.mul}
_BINARY = {"-": operator.sub, "//": operator.floordiv, "%": operator.mod, "**": operator.pow}
_COMPARE = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
_EXTREMA = {"min": min, "max": max}
_LOGIC = ("and", "or", "not")
Tree = Any  # int | bool | tuple


class GuardDataError(TyloError):
    """A guard expression is not a tree of the guard grammar (see the module doc): made
    by hand wrongly, or read from a damaged or edited cache entry (which is then a miss)."""


def validate(tree: Any) -> Tree:
    """``tree`` as nested tuples if it is a guard expression within the bounds (depth
    <= 64, <= 4096 nodes, constants within +-2**128, parameter indexes below 2**16);
    otherwise raise :class:`GuardDataError` saying what is wrong."""
    count = [0]
    return _validate(tree, 0, count)


def _bad(what: str, node: Any) -> GuardDataError:
    text = repr(node)
    if len(text) > 80:
        text = text[:77] + "..."
    return GuardDataError(
        f"guard expression: {what} (at {text}); guards are trees of ints, "
        "('v', i), + - * // % ** min max, comparisons, and/or/not"
    )


def _validate(node: Any, depth: int, count: list[int]) -> Tree:
    count[0] += 1
    if count[0] > MAX_NODES:
        raise _bad(f"more than {MAX_NODES} nodes", node)
    if depth > MAX_DEPTH:
        raise _bad(f"nested deeper than {MAX_DEPTH}", node)
    if type(node) is bool:
        return node
    if type(node) is int:
        if node.bit_length() >= MAX_INT_BITS:
            raise _bad(f"a constant of {node.bit_length()} bits (at most {MAX_INT_BITS - 1})", node)
        return node
    if type(node) not in (tuple, list) or not node or type(node[0]) is not str:
        raise _bad(f"a {type(node).__name__} is not a node", node)
    op, args = node[0], node[1:]
    if op == "v":
        if len(args) != 1 or type(args[0]) is not int or not 0 <= args[0] < MAX_PARAM:
            raise _bad(f"('v', i) needs one parameter index in 0..{MAX_PARAM - 1}", node)
        return ("v", args[0])
    if op in _NARY or op in _EXTREMA or op in ("and", "or"):
        arity_ok = len(args) >= 1
    elif op in _BINARY or op in _COMPARE:
        arity_ok = len(args) == 2
    elif op == "not":
        arity_ok = len(args) == 1
    else:
        raise _bad(f"unknown operator {op!r}", node)
    if not arity_ok:
        raise _bad(f"{op!r} with {len(args)} operands", node)
    checked = tuple(_validate(a, depth + 1, count) for a in args)
    if op == "**":
        if not (type(checked[1]) is int and 0 <= checked[1] <= MAX_POWER):
            raise _bad(f"'**' needs a constant exponent in 0..{MAX_POWER}", node)
        if _has_power(checked[0]):
            raise _bad("a power of a power", node)
    return (op, *checked)


def _has_power(tree: Tree) -> bool:
    return isinstance(tree, tuple) and (tree[0] == "**" or any(_has_power(a) for a in tree[1:]))


def to_data(tree: Tree) -> Any:
    """``tree`` with lists for tuples (JSON's form; :func:`validate` reads it back)."""
    if isinstance(tree, tuple):
        return [to_data(t) for t in tree]
    return tree


def evaluate(tree: Tree, v: Sequence[Any]) -> Any:
    """The value of validated ``tree`` on the launch values ``v``, by Python's semantics
    (``//`` and ``%`` floor; ``and``/``or`` give bools). Raises ZeroDivisionError on a
    division by zero (the guard check makes that a violation)."""
    if not isinstance(tree, tuple):
        return tree
    op, args = tree[0], tree[1:]
    if op == "v":
        return v[args[0]]
    if op == "and":
        return all(bool(evaluate(a, v)) for a in args)
    if op == "or":
        return any(bool(evaluate(a, v)) for a in args)
    if op == "not":
        return not evaluate(args[0], v)
    values = [evaluate(a, v) for a in args]
    if op in _NARY:
        result = values[0]
        for x in values[1:]:
            result = _NARY[op](result, x)
        return result
    if op in _EXTREMA:
        return _EXTREMA[op](values)
    return (_BINARY.get(op) or _COMPARE[op])(values[0], values[1])


def render(tree: Tree) -> str:
    """A Python expression over ``v[i]`` computing :func:`evaluate` of validated ``tree``
    (every subexpression parenthesized; the only names are ``v``, ``min`` and ``max``)."""
    if type(tree) is bool:
        return str(tree)
    if type(tree) is int:
        return str(tree) if tree >= 0 else f"({tree})"
    op, args = tree[0], tree[1:]
    if op == "v":
        return f"v[{args[0]}]"
    parts = [render(a) for a in args]
    if op in _EXTREMA:
        return f"{op}({', '.join(parts)})" if len(parts) > 1 else f"{op}(({parts[0]},))"
    if op == "not":
        return f"(not {parts[0]})"
    if op in ("and", "or"):  # a bool, as evaluate() gives (Python's own and/or give operands)
        return "(True if (" + f" {op} ".join(parts) + ") else False)"
    return "(" + f" {op} ".join(parts) + ")"


# ---------------------------------------------------------------------------- closures

# A compiled operand is ("c", constant), ("i", index) or ("f", function of v): constants
# and parameter reads are folded into their parent's closure, so the common guards
# (``v[i] % 16 == 0``, ``v[i] <= c``) are one closure, no nested call.


def compile_all(trees: Sequence[Tree]) -> Callable[[Sequence[Any]], bool]:
    """A function ``f(v)`` true exactly when every validated tree's
    :func:`compile_expr` is (one closure: up to three divisibility checks ``v[i] % d ==
    0``, the common guards, are tested inline, as one generated expression would)."""
    divisible = [_index_divisible(t) for t in trees]
    if trees and all(d is not None for d in divisible) and len(trees) <= 3:
        return _all_divisible(divisible)  # type: ignore[arg-type]
    return _all_of([compile_expr(t) for t in trees])


def _index_divisible(tree: Tree) -> tuple[int, int] | None:
    """``(i, d)`` when ``tree`` is ``v[i] % d == 0`` with a constant ``d != 0``."""
    if (
        isinstance(tree, tuple)
        and tree[0] == "=="
        and tree[2] == 0
        and type(tree[2]) is int
        and _is_mod_by_const(tree[1])
        and isinstance(tree[1][1], tuple)
        and tree[1][1][0] == "v"
    ):
        return tree[1][1][1], tree[1][2]
    return None


def _all_divisible(checks: Sequence[tuple[int, int]]) -> Callable[[Sequence[Any]], bool]:
    if len(checks) == 1:
        ((i, d),) = checks
        return lambda v: v[i] % d == 0
    if len(checks) == 2:
        (i, d), (j, e) = checks
        return lambda v: v[i] % d == 0 and v[j] % e == 0
    (i, d), (j, e), (k, f) = checks
    return lambda v: v[i] % d == 0 and v[j] % e == 0 and v[k] % f == 0


def _all_of(fns: Sequence[Callable[[Sequence[Any]], Any]]) -> Callable[[Sequence[Any]], Any]:
    """The conjunction of ``fns``: a bool when they give bools (compile_expr's do)."""
    if not fns:
        return lambda v: True
    if len(fns) == 1:
        (f,) = fns
        return f
    if len(fns) == 2:
        f, g = fns
        return lambda v: f(v) and g(v)

    def all_of(v: Sequence[Any]) -> bool:
        for g in fns:
            if not g(v):
                return False
        return True

    return all_of


def compile_expr(tree: Tree) -> Callable[[Sequence[Any]], bool]:
    """A function ``f(v)`` that is ``bool(evaluate(tree, v))`` for validated ``tree``,
    False where that divides by zero; built from closures, without ``eval``."""
    kind, x = _compile(tree)
    if kind == "c":
        value = bool(x)
        return lambda v: value
    if kind == "i":
        return lambda v: bool(v[x])
    fn = x
    if tree[0] not in _COMPARE and tree[0] not in _LOGIC:  # arithmetic on top: its truth
        arith = fn
        fn = lambda v: bool(arith(v))  # noqa: E731
    if not _divides_by_nonconstant(tree):
        return fn

    def guarded(v: Sequence[Any]) -> bool:
        try:
            return fn(v)
        except ZeroDivisionError:
            return False

    return guarded


def _divides_by_nonconstant(tree: Tree) -> bool:
    if not isinstance(tree, tuple) or tree[0] == "v":
        return False
    if tree[0] in ("//", "%") and (type(tree[2]) is not int or tree[2] == 0):
        return True
    return any(_divides_by_nonconstant(a) for a in tree[1:])


def _fn(operand: tuple[str, Any]) -> Callable[[Sequence[Any]], Any]:
    kind, x = operand
    if kind == "f":
        return x
    if kind == "i":
        return operator.itemgetter(x)
    return lambda v: x


def _compile(tree: Tree) -> tuple[str, Any]:
    if not isinstance(tree, tuple):
        return "c", tree
    op, args = tree[0], tree[1:]
    if op == "v":
        return "i", args[0]
    if op in ("and", "or", "not"):
        fns = [_fn(_compile(a)) for a in args]
        return "f", _logic(op, fns)
    operands = [_compile(a) for a in args]
    if op in _EXTREMA:
        fns = [_fn(o) for o in operands]
        pick = _EXTREMA[op]
        return "f", lambda v: pick([f(v) for f in fns])
    if op in _NARY:
        result = operands[0]
        for o in operands[1:]:
            result = _binary(_NARY[op], result, o)
        return result
    if op in _COMPARE and op == "==" and operands[1] == ("c", 0) and _is_mod_by_const(tree[1]):
        return "f", _divisible(_compile(tree[1][1]), tree[1][2])
    return _binary(_BINARY.get(op) or _COMPARE[op], operands[0], operands[1])


def _is_mod_by_const(node: Tree) -> bool:
    return isinstance(node, tuple) and node[0] == "%" and type(node[2]) is int and node[2] != 0


def _divisible(a: tuple[str, Any], d: int) -> Callable[[Sequence[Any]], bool]:
    kind, x = a
    if kind == "i":
        return lambda v: v[x] % d == 0
    f = _fn(a)
    return lambda v: f(v) % d == 0


def _logic(op: str, fns: list[Callable[[Sequence[Any]], Any]]) -> Callable[..., bool]:
    if op == "not":
        (g,) = fns
        return lambda v: not g(v)
    if op == "and":  # a bool, whatever its operands give
        if len(fns) == 1:
            (f,) = fns
            return lambda v: not not f(v)
        if len(fns) == 2:
            f, g = fns
            return lambda v: not not (f(v) and g(v))
        return _all_of(fns)

    def any_of(v: Sequence[Any]) -> bool:
        for g in fns:
            if g(v):
                return True
        return False

    return any_of


def _binary(op: Callable[[Any, Any], Any], a: tuple[str, Any], b: tuple[str, Any]) -> Any:
    (ka, xa), (kb, xb) = a, b
    if ka == "c" and kb == "c":
        try:
            return "c", op(xa, xb)
        except ArithmeticError:
            pass  # a constant division by zero: raised (and made false) at launch
    if ka == "i" and kb == "c":
        return "f", lambda v: op(v[xa], xb)
    if ka == "i" and kb == "i":
        return "f", lambda v: op(v[xa], v[xb])
    if ka == "c" and kb == "i":
        return "f", lambda v: op(xa, v[xb])
    fa, fb = _fn(a), _fn(b)
    if kb == "c":
        return "f", lambda v: op(fa(v), xb)
    return "f", lambda v: op(fa(v), fb(v))
