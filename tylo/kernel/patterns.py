"""``match`` statements in a kernel: each case's pattern as a condition and its captures.

:mod:`tylo.kernel.ast_rewrite` turns ``match SUBJECT:`` into a chain of ``if``/``else``
(so a runtime outcome becomes real branches, and a static one runs a single case, as
Python would). Each case's pattern is passed here as a small spec built from the
pattern's syntax; :func:`match_case` evaluates it against the subject and returns the
condition (a Python bool, a relation or a bool Value) and the names the pattern captures.

The patterns of PEP 634, with a runtime subject (an index expression or a Value):

- value (``case 1:``, ``case Color.RED:``) compares with ``==`` (:func:`tylo.kernel.pyops.eq`);
- singleton: ``case None`` never matches a runtime value; ``case True`` / ``case False``
  match a runtime condition (a relation or a bool Value) when it is true / false, and
  never a runtime number (as in Python, where ``1 is True`` is false);
- class: ``case int()`` / ``float()`` / ``bool()`` match by the runtime value's dtype
  (an index expression is an int), and ``case int(0)`` matches the value itself; any
  other class by ``isinstance`` of the trace-time object;
- sequence and mapping patterns never match a runtime scalar; over a tuple, list or dict
  their lengths and keys are static and their elements may be runtime;
- an or-pattern is the disjunction of its alternatives; alternatives that could match at
  run time may not bind names to different runtime values (refused).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from typing import Any

from tylo import dtypes as dt
from tylo.kernel.errors import TraceError, Undefined
from tylo.kernel.merge import classify
from tylo.kernel.pyops import all_of, any_of, eq, is_runtime
from tylo.kernel.values import Value, is_relation
from tylo.layouts._lazy import sympy

__all__ = ["Case", "captured_names", "match_case", "pattern_spec"]


# ---------------------------------------------------------------------------- specs


def _const(value: Any) -> ast.Constant:
    return ast.Constant(value=value)


def captured_names(p: ast.pattern) -> set[str]:
    """The names pattern ``p`` binds (its captures, stars and mapping rest)."""
    names: set[str] = set()
    for n in ast.walk(p):
        if isinstance(n, (ast.MatchAs, ast.MatchStar)) and n.name:
            names.add(n.name)
        elif isinstance(n, ast.MatchMapping) and n.rest:
            names.add(n.rest)
    return names


def _tuple(elts: list[ast.expr]) -> ast.Tuple:
    return ast.Tuple(elts=elts, ctx=ast.Load())


def pattern_spec(p: ast.pattern) -> ast.expr:
    """An expression building the spec of pattern ``p`` that :func:`match_case` reads:
    nested tuples ``(kind, ...)`` holding the pattern's value and class expressions."""
    if isinstance(p, ast.MatchValue):
        return _tuple([_const("value"), p.value])
    if isinstance(p, ast.MatchSingleton):
        return _tuple([_const("singleton"), _const(p.value)])
    if isinstance(p, ast.MatchAs):
        sub = pattern_spec(p.pattern) if p.pattern is not None else _const(None)
        return _tuple([_const("as"), sub, _const(p.name)])
    if isinstance(p, ast.MatchOr):
        return _tuple([_const("or"), _tuple([pattern_spec(q) for q in p.patterns])])
    if isinstance(p, ast.MatchSequence):
        return _tuple([_const("seq"), _tuple([pattern_spec(q) for q in p.patterns])])
    if isinstance(p, ast.MatchStar):
        return _tuple([_const("star"), _const(p.name)])
    if isinstance(p, ast.MatchMapping):
        return _tuple(
            [
                _const("map"),
                _tuple(list(p.keys)),
                _tuple([pattern_spec(q) for q in p.patterns]),
                _const(p.rest),
            ]
        )
    if isinstance(p, ast.MatchClass):
        return _tuple(
            [
                _const("class"),
                p.cls,
                _tuple([pattern_spec(q) for q in p.patterns]),
                _tuple([_const(a) for a in p.kwd_attrs]),
                _tuple([pattern_spec(q) for q in p.kwd_patterns]),
            ]
        )
    raise TraceError(f"unsupported match pattern {ast.dump(p)}", lineno=p.lineno)


# ---------------------------------------------------------------------------- matching


class Case:
    """One case tried against the subject: ``cond`` (static bool, relation or bool Value)
    and ``captures`` (name -> value)."""

    __slots__ = ("captures", "cond", "line")

    def __init__(self, cond: Any, captures: dict[str, Any], line: int) -> None:
        self.cond = cond
        self.captures = captures
        self.line = line

    def bind(self, names: tuple[str, ...], f_locals: dict[str, Any]) -> tuple[Any, ...]:
        """The values of ``names`` after the pattern: a capture, else the name's value
        before it (or an undefined marker)."""
        reason = f"is not bound: the pattern at line {self.line} did not capture it"
        return tuple(
            self.captures[n] if n in self.captures else f_locals.get(n, Undefined(n, reason))
            for n in names
        )


def match_case(subject: Any, spec: tuple[Any, ...], line: int) -> Case:
    """Evaluate pattern ``spec`` (built by the rewriter) against ``subject``."""
    try:
        captures: dict[str, Any] = {}
        cond = _match(subject, spec, captures)
    except TraceError as err:
        if err.lineno is None:
            raise TraceError(err.message, lineno=line, original=err.original) from None
        raise
    if isinstance(cond, (sympy.logic.boolalg.BooleanTrue, sympy.logic.boolalg.BooleanFalse)):
        cond = bool(cond)
    return Case(cond, captures, line)


def _static(c: Any) -> bool | None:
    kind, v = classify(c, "case")
    return v if kind == "static" else None


def _and(parts: Any) -> Any:
    """Conjunction of lazily produced conditions, stopping at the first static False."""
    found = []
    for c in parts:
        s = _static(c)
        if s is False:
            return False
        if s is None:
            found.append(c)
    return all_of(*found) if found else True


def _match(x: Any, spec: tuple[Any, ...], caps: dict[str, Any]) -> Any:
    kind = spec[0]
    if kind == "as":
        _, sub, name = spec
        cond = True if sub is None else _match(x, sub, caps)
        if name is not None and _static(cond) is not False:
            caps[name] = x
        return cond
    if kind == "value":
        return eq(x, spec[1])
    if kind == "singleton":
        return _singleton(x, spec[1])
    if kind == "or":
        return _or(x, spec[1], caps)
    if kind == "seq":
        return _sequence(x, spec[1], caps)
    if kind == "map":
        return _mapping(x, spec[1], spec[2], spec[3], caps)
    if kind == "class":
        return _class(x, *spec[1:], caps)
    raise TraceError(f"unknown pattern kind {kind!r}")


def _singleton(x: Any, v: Any) -> Any:
    if x is v:
        return True
    if not is_runtime(x):
        return False
    if v is None:
        return False
    condition = (isinstance(x, Value) and x.dtype is dt.bool_) or is_relation(x)
    if not condition:
        return False  # a runtime number is never the object True or False
    return x if v else _not(x)


def _not(c: Any) -> Any:
    kind, v = classify(c, "case")
    if kind == "static":
        return not v
    return sympy.Not(v) if kind == "sym" else ~v


def _or(x: Any, alternatives: tuple[Any, ...], caps: dict[str, Any]) -> Any:
    found: list[tuple[Any, dict[str, Any]]] = []
    for alt in alternatives:
        local: dict[str, Any] = {}
        c = _match(x, alt, local)
        s = _static(c)
        if s is False:
            continue
        found.append((c, local))
        if s is True:
            break
    if not found:
        return False
    first = found[0][1]
    for _, other in found[1:]:
        for name, value in other.items():
            if first.get(name) is not value:
                raise TraceError(
                    f"the or-pattern binds {name!r} to different values in alternatives "
                    "that are only decided at run time; split it into separate cases"
                )
    caps.update(first)
    if _static(found[0][0]) is True:
        return True
    return any_of(*(c for c, _ in found))


def _sequence(x: Any, subs: tuple[Any, ...], caps: dict[str, Any]) -> Any:
    if is_runtime(x) or not isinstance(x, Sequence) or isinstance(x, (str, bytes, bytearray)):
        return False
    star = [k for k, s in enumerate(subs) if s[0] == "star"]
    n = len(subs)
    if star:
        if len(x) < n - 1:
            return False
    elif len(x) != n:
        return False

    def parts() -> Any:
        if not star:
            for item, sub in zip(x, subs):
                yield _match(item, sub, caps)
            return
        k = star[0]
        tail = n - k - 1
        for item, sub in zip(x[:k], subs[:k]):
            yield _match(item, sub, caps)
        name = subs[k][1]
        if name is not None:
            caps[name] = list(x[k : len(x) - tail])
        for item, sub in zip(x[len(x) - tail :], subs[k + 1 :]):
            yield _match(item, sub, caps)

    return _and(parts())


def _mapping(
    x: Any, keys: tuple[Any, ...], subs: tuple[Any, ...], rest: str | None, caps: dict[str, Any]
) -> Any:
    if is_runtime(x) or not isinstance(x, Mapping):
        return False
    if any(is_runtime(k) for k in x):
        raise TraceError(
            "a mapping pattern against a dict with runtime keys: its lookups would hash "
            "the expressions, not their runtime values"
        )
    if any(k not in x for k in keys):
        return False

    def parts() -> Any:
        for k, sub in zip(keys, subs):
            yield _match(x[k], sub, caps)
        if rest is not None:
            caps[rest] = {k: v for k, v in x.items() if k not in keys}

    return _and(parts())


_BUILTIN_KINDS = {bool: "b", int: "biu", float: "f"}


def _class(
    x: Any,
    cls: Any,
    positional: tuple[Any, ...],
    attrs: tuple[str, ...],
    keyword: tuple[Any, ...],
    caps: dict[str, Any],
) -> Any:
    if not isinstance(cls, type):
        raise TraceError(f"case {cls!r}(): called match pattern must be a class")
    if is_runtime(x) and cls in _BUILTIN_KINDS:
        if isinstance(x, Value):
            kind = "b" if x.dtype is dt.bool_ else x.dtype.kind
        elif is_relation(x):
            kind = "b"
        else:
            kind = "i" if x.is_integer else "f"
        if kind not in _BUILTIN_KINDS[cls]:
            return False
        if len(positional) > 1 or attrs:
            raise TraceError(
                f"case {cls.__name__}(...): a runtime {cls.__name__} takes one positional "
                "pattern (itself) and no attributes"
            )
        return _match(x, positional[0], caps) if positional else True
    if not isinstance(x, cls):
        return False
    if positional:
        match_args = getattr(cls, "__match_args__", None)
        self_match = cls in (
            bool,
            bytearray,
            bytes,
            dict,
            float,
            frozenset,
            int,
            list,
            set,
            str,
            tuple,
        )
        if self_match and match_args is None:
            if len(positional) > 1:
                raise TraceError(f"case {cls.__name__}(...): accepts one positional pattern")
            names: tuple[Any, ...] = (None,)
        else:
            if match_args is None or len(positional) > len(match_args):
                raise TraceError(
                    f"case {cls.__name__}(...): {len(positional)} positional patterns, but "
                    f"__match_args__ is {match_args!r}"
                )
            names = tuple(match_args[: len(positional)])
    else:
        names = ()

    def parts() -> Any:
        for name, sub in zip(names, positional):
            if name is None:
                yield _match(x, sub, caps)
                continue
            if not hasattr(x, name):
                yield False
                return
            yield _match(getattr(x, name), sub, caps)
        for name, sub in zip(attrs, keyword):
            if not hasattr(x, name):
                yield False
                return
            yield _match(getattr(x, name), sub, caps)

    return _and(parts())
