"""Python operators whose outcome depends on runtime values, lowered or refused.

Inside a kernel an index expression (a sympy expression over runtime symbols) or a
:class:`~tylo.kernel.values.Value` stands for a number that is only known on the GPU.
Python's own ``==`` on sympy expressions is structural, its ``in`` and ``dict`` lookups go
through ``==`` and ``hash``, ``is`` compares trace-time objects and ``bool(n)`` of a sympy
symbol is always ``True``: each would decide, while tracing, something that depends on the
runtime value. :mod:`tylo.kernel.ast_rewrite` routes these constructs here; each one either
lowers to a runtime condition or value (a relation, a bool Value, a select) or raises a
:class:`~tylo.kernel.errors.TraceError` that says what to write instead. With only static
operands each behaves exactly as Python does.

- ``a == b`` / ``a != b`` (:func:`eq`, :func:`ne`): a relation or a bool Value; tuples and
  lists compare element by element; a runtime value never equals a str, None or another
  non-number object (as in Python, where objects of unrelated types are unequal).
- ``x in c`` (:func:`contains`): for a runtime ``x`` (or runtime elements) over a tuple,
  list, set, dict or range, the disjunction of the equalities.
- ``a is b`` (:func:`is_`): a runtime value is never None; any other identity test of a
  runtime value is refused (its identity is not its value).
- ``d[k]`` / ``d.get(k, default)`` with a runtime key (:func:`getitem`, :func:`get`): a
  select over the entries; ``seq[i]`` of a tuple or list with a runtime index whose range
  the facts bound within the sequence: a select over the possible elements.
- ``any(...)``, ``all(...)``, ``bool(x)`` (:func:`builtin`): the disjunction, conjunction
  or truth of runtime conditions.
- ``n // 0``, ``n % 0``, ``n / 0`` with a runtime ``n`` (:func:`divide`): refused.
"""

from __future__ import annotations

import builtins as _builtins
import operator
from collections.abc import Callable, Collection, Mapping
from typing import Any

import numpy as np

from tylo import dtypes as dt
from tylo.kernel.context import current
from tylo.kernel.errors import TraceError, Undefined
from tylo.kernel.lower import bounds, lower_bool
from tylo.kernel.merge import classify
from tylo.kernel.values import Value, as_value, is_relation, to_index
from tylo.layouts._lazy import sympy

__all__ = [
    "all_of",
    "any_of",
    "builtin",
    "contains",
    "divide",
    "eq",
    "get",
    "getitem",
    "is_",
    "is_not",
    "is_runtime",
    "ne",
    "not_contains",
    "select",
    "setitem",
]

_MAX_SELECT = 1024  # entries a runtime lookup may select between


def is_runtime(x: Any) -> bool:
    """Whether ``x`` stands for a value only known on the GPU: a Value, an index expression
    or relation over runtime symbols, or a container with ``__tylo_elementwise__``."""
    if isinstance(x, Value) or hasattr(type(x), "__tylo_elementwise__"):
        return True
    if isinstance(x, sympy.Basic):
        return not (x.is_number or x is sympy.true or x is sympy.false)
    return False


def _defined(*xs: Any) -> None:
    """Raise the reason of a name without a value (Undefined compares by identity)."""
    for x in xs:
        if isinstance(x, Undefined):
            x._fail()


def _elementwise(x: Any) -> bool:
    return hasattr(type(x), "__tylo_elementwise__")


def _has_runtime(x: Any) -> bool:
    if isinstance(x, (tuple, list)):
        return any(_has_runtime(e) for e in x)
    return is_runtime(x)


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating, np.bool_)) or (
        isinstance(x, sympy.Basic) and (x.is_number or x is sympy.true or x is sympy.false)
    )


def _is_condition(x: Any) -> bool:
    """A bool-valued runtime value: a relation or a bool Value."""
    return (isinstance(x, Value) and x.dtype is dt.bool_) or (
        is_relation(x) and x is not sympy.true and x is not sympy.false
    )


def _negate(c: Any) -> Any:
    kind, v = classify(c, "not")
    if kind == "static":
        return not v
    if kind == "sym":
        return sympy.Not(v)
    return Value(dt.bool_, current().builder.not_(v.use()))


# ---------------------------------------------------------------------------- == and !=


def _eq_condition(c: Any, other: Any) -> Any:
    """``c == other`` for a runtime condition ``c`` (True == 1, False == 0, as Python)."""
    if _is_condition(other):
        if isinstance(c, Value) or isinstance(other, Value):
            return as_value(c, dt.bool_) == as_value(other, dt.bool_)
        return sympy.Or(sympy.And(c, other), sympy.And(sympy.Not(c), sympy.Not(other)))
    if _is_number(other) and not is_runtime(other):
        v = other
        if v == 1:
            return c
        if v == 0:
            return _negate(c)
        return False
    if is_runtime(other):
        raise TraceError(
            f"comparing the runtime condition {c} with the number {other}: convert the "
            "condition first (tylo.where(c, 1, 0)) or compare conditions with conditions"
        )
    return False  # a runtime bool never equals a str, None or another object


def eq(a: Any, b: Any) -> Any:
    """``a == b`` in a kernel: a relation (index expressions), a bool Value (Values), the
    element-wise conjunction (tuples, lists), or Python's answer for static operands."""
    _defined(a, b)
    if _elementwise(a) or _elementwise(b):
        return a == b  # a register fragment compares slot by slot itself
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        if type(a) is not type(b) or len(a) != len(b):
            return a == b if not (_has_runtime(a) or _has_runtime(b)) else False
        if not (_has_runtime(a) or _has_runtime(b)):
            return a == b
        return _conjunction(lambda: (eq(x, y) for x, y in zip(a, b)), "==")
    if _is_condition(a):
        return _eq_condition(a, b)
    if _is_condition(b):
        return _eq_condition(b, a)
    if isinstance(a, Value) or isinstance(b, Value):
        other = b if isinstance(a, Value) else a
        if not (_is_number(other) or is_runtime(other)):
            return False
        return a == b if isinstance(a, Value) else b == a
    if is_runtime(a) or is_runtime(b):
        other = b if is_runtime(a) else a
        if isinstance(other, (bool, np.bool_)):
            other = int(other)
        if not (_is_number(other) or is_runtime(other)):
            return False
        rel = sympy.Eq(a if is_runtime(a) else other, other if is_runtime(a) else b)
        return rel
    return a == b


def ne(a: Any, b: Any) -> Any:
    """``a != b`` in a kernel: the negation of :func:`eq` (Python's ``!=`` when static)."""
    _defined(a, b)
    if not (_has_runtime(a) or _has_runtime(b)) or _elementwise(a) or _elementwise(b):
        return a != b
    e = eq(a, b)
    if isinstance(e, sympy.Eq):
        return sympy.Ne(*e.args)
    if e is sympy.true or e is sympy.false:
        return sympy.false if e is sympy.true else sympy.true
    return _negate(e)


# ---------------------------------------------------------------------------- and / or


def _conjunction(parts: Callable[[], Any], what: str) -> Any:
    """The conjunction of conditions produced one at a time; stops at a static False."""
    found: list[Any] = []
    for c in parts():
        kind, v = classify(c, what)
        if kind == "static":
            if not v:
                return False
        else:
            found.append(c)
    return all_of(*found) if found else True


def all_of(*conditions: Any) -> Any:
    """The conjunction of all ``conditions`` without short-circuit (every operand is
    evaluated): for helpers not rewritten by @tylo.inline, where ``and`` cannot see runtime
    values. Relations stay symbolic; bool Values are combined with ``&``."""
    return _fold(conditions, True)


def any_of(*conditions: Any) -> Any:
    """The disjunction of all ``conditions`` without short-circuit (see :func:`all_of`)."""
    return _fold(conditions, False)


def _fold(conditions: tuple[Any, ...], is_and: bool) -> Any:
    sym: list[Any] = []
    values: list[Value] = []
    for c in conditions:
        kind, v = classify(c, "all_of" if is_and else "any_of")
        if kind == "static":
            if v != is_and:
                return not is_and
        elif kind == "sym":
            sym.append(v)
        else:
            values.append(v)
    if not values:
        if not sym:
            return is_and
        return sympy.And(*sym) if is_and else sympy.Or(*sym)
    b = current().builder
    acc = values[0].use()
    rest = [v.use() for v in values[1:]] + [lower_bool(current(), s) for s in sym]
    for r in rest:
        acc = b.and_(acc, r) if is_and else b.or_(acc, r)
    return Value(dt.bool_, acc)


# ---------------------------------------------------------------------------- in


def contains(item: Any, container: Any) -> Any:
    """``item in container``: Python's answer when both are static; for a runtime item or
    runtime elements, the disjunction of ``item == e`` over the elements of a tuple, list,
    set, dict (its keys) or range."""
    _defined(item, container)
    if is_runtime(container) or _is_tensor(container):
        raise TraceError(
            f"`in` on {_describe(container)}: its elements are only known on the GPU; "
            "compare explicitly (x == a) or test the elements in a loop"
        )
    if not is_runtime(item) and not _has_runtime_elements(container):
        return item in container
    if isinstance(container, range):
        return _in_range(item, container)
    if isinstance(container, (str, bytes, bytearray)):
        raise TraceError(
            f"`in` of {_describe(item)} in the string {container!r}: a runtime number is "
            "never a substring"
        )
    if isinstance(container, Mapping):
        elements = list(container.keys())
    elif isinstance(container, Collection):
        elements = list(container)
    else:
        raise TraceError(
            f"`in` of {_describe(item)} in a {type(container).__name__}: only a tuple, "
            "list, set, dict or range can be searched for a runtime value"
        )
    if len(elements) > _MAX_SELECT:
        raise TraceError(
            f"`in` of {_describe(item)} in a container of {len(elements)} elements: at "
            f"most {_MAX_SELECT} comparisons are emitted; use a range or a table in memory"
        )
    found: list[Any] = []
    for e in elements:
        if e is item:
            return True
        c = eq(item, e)
        kind, v = classify(c, "in")
        if kind == "static":
            if v:
                return True
        else:
            found.append(c)
    return any_of(*found) if found else False


def not_contains(item: Any, container: Any) -> Any:
    """``item not in container`` (see :func:`contains`)."""
    return _negate(contains(item, container))


def _has_runtime_elements(container: Any) -> bool:
    if isinstance(container, Mapping):
        return any(is_runtime(k) for k in container)
    if isinstance(container, (tuple, list, set, frozenset)):
        return any(_has_runtime(e) for e in container)
    return False


def _in_range(item: Any, r: range) -> Any:
    if isinstance(item, Value) and (item.dtype.is_float or item.dtype is dt.bool_):
        raise TraceError(f"`in range(...)` of a {item.dtype} value: convert it to an int first")
    if isinstance(item, sympy.Basic) and item.is_integer is False:
        return False
    x = item
    if r.step > 0:
        lo, hi = r.start, r.stop
        parts = [x >= lo, x < hi]
    else:
        lo, hi = r.stop, r.start
        parts = [x > lo, x <= hi]
    if abs(r.step) != 1:
        parts.append(eq((x - r.start) % abs(r.step), 0))
    return _conjunction(lambda: iter(parts), "in range")


def _is_tensor(x: Any) -> bool:
    from tylo.kernel.memory import Tensor

    return isinstance(x, Tensor)


def _describe(x: Any) -> str:
    if isinstance(x, Value):
        return f"a runtime {x.dtype} value"
    if isinstance(x, sympy.Basic):
        return f"the runtime expression {x}"
    if _is_tensor(x):
        return f"the tensor {x.name}"
    return f"{type(x).__name__} {x!r}"


# ---------------------------------------------------------------------------- is


def is_(a: Any, b: Any) -> Any:
    """``a is b``: a runtime value is never None; other identity tests of runtime values
    are refused (a trace-time object's identity says nothing about its runtime value)."""
    _defined(a, b)
    if a is b:
        return True
    ra, rb = is_runtime(a), is_runtime(b)
    if not (ra or rb):
        return False
    if (ra and b is None) or (rb and a is None):
        return False
    other = b if ra else a
    hint = (
        "test the condition itself (`if c:` / `if not c:`)"
        if other is True or other is False
        else "compare values with =="
    )
    raise TraceError(
        f"`is` with {_describe(a if ra else b)}: its identity at trace time is not its "
        f"value at run time; {hint}"
    )


def is_not(a: Any, b: Any) -> Any:
    """``a is not b`` (see :func:`is_`)."""
    return not is_(a, b)


# ---------------------------------------------------------------------------- lookups


def select(cond: Any, a: Any, b: Any, what: str) -> Any:
    """``a`` where ``cond`` holds else ``b``: stays an index expression (a Piecewise) when
    both are integers and the condition a relation, else a select of Values."""
    kind, c = classify(cond, what)
    if kind == "static":
        return a if c else b
    for x in (a, b):
        if not (_is_number(x) or is_runtime(x)):
            raise TraceError(
                f"{what}: {x!r} would be selected at run time, but only numbers, index "
                "expressions and Values can be; give every entry (and the default) a number"
            )
    ints = all(
        (isinstance(x, (int, np.integer)) and not isinstance(x, bool))
        or (isinstance(x, sympy.Expr) and x.is_integer)
        for x in (a, b)
    )
    if kind == "sym" and ints:
        return sympy.Piecewise((to_index(a), c), (to_index(b), True))
    from tylo.kernel.mathfn import where

    return where(c, a, b)


def _select_chain(key: Any, pairs: list[tuple[Any, Any]], default: Any, what: str) -> Any:
    if len(pairs) > _MAX_SELECT:
        raise TraceError(
            f"{what}: a runtime key selects between {len(pairs)} entries (at most "
            f"{_MAX_SELECT}); put the table in memory"
        )
    conds = []
    for k, v in pairs:
        c = eq(key, k)
        kind, s = classify(c, what)
        if kind == "static" and s:
            return v  # keys are distinct: this is the entry
        if kind != "static":
            conds.append((c, v))
    result = default
    if result is _MISSING:
        if not conds:
            raise TraceError(f"{what}: no entry matches the key {key}")
        *conds, (_, result) = conds  # the facts leave one entry
    for c, v in reversed(conds):
        result = select(c, v, result, what)
    return result


_MISSING = object()


def getitem(obj: Any, key: Any) -> Any:
    """``obj[key]``: a dict with a runtime key is refused (a missing key cannot raise at
    run time; use ``.get(key, default)``); a tuple or list with a runtime index selects
    among the elements the index's proved range can reach; anything else is Python's."""
    if isinstance(obj, (dict, Mapping)) and _has_runtime(key) and not _is_tensor(obj):
        raise TraceError(
            f"indexing a {type(obj).__name__} with {_describe(key)}: Python's lookup "
            "would hash the expression, not its runtime value; use "
            "table.get(key, default) (a select over the entries)"
        )
    if isinstance(obj, (tuple, list)) and is_runtime(key):
        return _sequence_select(obj, key)
    return obj[key]


def setitem(obj: Any, key: Any, value: Any) -> None:
    """``obj[key] = value``, refusing a dict (or other mapping) with a runtime key: its
    entry would be filed under the expression, not under the key's runtime value."""
    if isinstance(obj, Mapping) and _has_runtime(key) and not _is_tensor(obj):
        raise TraceError(
            f"storing into a {type(obj).__name__} under {_describe(key)}: the entry would "
            "be keyed by the expression, not by its runtime value (two keys equal at run "
            "time would be two entries); use static keys, or memory (tylo.shared)"
        )
    obj[key] = value


def _sequence_select(seq: tuple | list, key: Any) -> Any:
    n = len(seq)
    what = f"{type(seq).__name__}[{_describe(key)}]"
    index = to_index(key, what)
    lo, hi = bounds(current(), index)
    if lo is None or hi is None or lo < -n or hi >= n:
        have = f"[{lo}, {hi}]" if lo is not None or hi is not None else "unbounded"
        raise TraceError(
            f"{what}: the index is only known at run time and its range {have} is not "
            f"within the {n} elements (an out-of-range index cannot raise on the GPU); "
            "bound it (i % n) or put the table in memory"
        )
    if hi - lo + 1 > _MAX_SELECT:
        raise TraceError(f"{what}: {hi - lo + 1} possible indices (at most {_MAX_SELECT})")
    pairs = [(i, seq[i]) for i in _builtins.range(lo, hi + 1)]
    return _select_chain(index, pairs, _MISSING, what)


def get(obj: Any, *args: Any, **kwargs: Any) -> Any:
    """``obj.get(key[, default])``: for a dict with a runtime key, a select over its
    entries (``default``, or None, where no key matches); otherwise the method itself."""
    if not isinstance(obj, Mapping) or kwargs or not 1 <= len(args) <= 2 or _is_tensor(obj):
        return obj.get(*args, **kwargs)
    key = args[0]
    default = args[1] if len(args) == 2 else None
    if not _has_runtime(key) and not any(is_runtime(k) for k in obj):
        return obj.get(key, default)
    return _select_chain(key, list(obj.items()), default, f"{type(obj).__name__}.get")


# ---------------------------------------------------------------------------- builtins


def builtin(fn: Any, name: str, *args: Any) -> Any:
    """``any(x)``, ``all(x)``, ``bool(x)``, ``min(...)`` or ``max(...)``, where ``fn`` is what
    the name refers to: Python's builtin gives the runtime disjunction / conjunction /
    truth of runtime conditions (static elements short-circuit as in Python) and the
    runtime minimum / maximum (``tylo.minimum`` / ``tylo.maximum``: ``Min``/``Max`` of
    index expressions, a min/max instruction of Values); anything else is called."""
    if fn is not getattr(_builtins, name, None):
        return fn(*args)
    if name in ("min", "max"):
        return _extremum(fn, name, args)
    (arg,) = args
    if name == "bool":
        kind, v = classify(arg, "bool()")
        return v if kind != "static" else bool(v)
    is_any = name == "any"
    found: list[Any] = []
    for c in arg:
        kind, v = classify(c, f"{name}()")
        if kind == "static":
            if bool(v) == is_any:
                return is_any
        else:
            found.append(c)
    if not found:
        return not is_any
    return any_of(*found) if is_any else all_of(*found)


def _extremum(fn: Any, name: str, args: tuple[Any, ...]) -> Any:
    items = list(args[0]) if len(args) == 1 else list(args)
    if not any(is_runtime(x) for x in items):
        return fn(items)
    from tylo.kernel.mathfn import maximum, minimum

    pick = maximum if name == "max" else minimum
    out = items[0]
    for x in items[1:]:
        out = pick(out, x)
    return out


# ---------------------------------------------------------------------------- division

_DIVIDE = {"//": operator.floordiv, "%": operator.mod, "/": operator.truediv}


def _static_zero(x: Any) -> bool:
    if isinstance(x, (bool, np.bool_)):
        return not x
    if isinstance(x, (int, float, np.integer, np.floating)):
        return x == 0
    return isinstance(x, sympy.Basic) and x.is_number and x.is_zero is True


def divide(a: Any, b: Any, op: str) -> Any:
    """``a // b``, ``a % b`` or ``a / b``, refusing a static zero divisor of a runtime
    index expression (sympy would give ``zoo``); Values check their own divisor."""
    if _static_zero(b) and isinstance(a, sympy.Basic) and is_runtime(a):
        raise TraceError(f"division by zero: {a} {op} {b}")
    return _DIVIDE[op](a, b)
