"""The flatten/unflatten protocol for values carried through dynamic loops and branches.

A name rebound inside a ``tylo.range`` loop (or a dynamic ``if``) may hold a container:
a tuple, a list, a dict, a namedtuple, or any object whose class implements

- ``obj.__tylo_flatten__() -> (children, aux)`` where ``children`` is a sequence of
  values (each flattened in turn) and ``aux`` is hashable static data, and
- ``cls.__tylo_unflatten__(aux, children) -> obj``.

Its leaves (Values, Python numbers, index expressions) become loop-carried values; the
structure (container types, lengths, dict keys, ``aux``) must be the same at the start and
at the end of the loop body, or in both branches.

>>> leaves, tree = flatten((1, [2.0, "s"], {"k": 3}))
>>> leaves
[1, 2.0, 's', 3]
>>> unflatten(tree, [10, 20.0, "s", 30])
(10, [20.0, 's'], {'k': 30})
"""

from __future__ import annotations

from typing import Any

from tylo.kernel.errors import TraceError

__all__ = ["Leaf", "flatten", "unflatten"]


class Leaf:
    """The tree of a single leaf."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Leaf)

    def __hash__(self) -> int:
        return 0

    def __repr__(self) -> str:
        return "*"


_LEAF = Leaf()


def flatten(obj: Any) -> tuple[list[Any], Any]:
    """``(leaves, tree)``: the leaves of ``obj`` in order, and a comparable structure."""
    leaves: list[Any] = []
    tree = _flatten(obj, leaves)
    return leaves, tree


def _flatten(obj: Any, leaves: list[Any]) -> Any:
    t = type(obj)
    hook = getattr(t, "__tylo_flatten__", None)
    if hook is not None and not isinstance(obj, type):
        children, aux = obj.__tylo_flatten__()
        return ("node", t, aux, tuple(_flatten(c, leaves) for c in children))
    if t is tuple or t is list:
        return (t.__name__, tuple(_flatten(c, leaves) for c in obj))
    if isinstance(obj, tuple) and hasattr(t, "_fields"):  # namedtuple
        return ("namedtuple", t, tuple(_flatten(c, leaves) for c in obj))
    if t is dict:
        keys = tuple(obj)
        return ("dict", keys, tuple(_flatten(obj[k], leaves) for k in keys))
    leaves.append(obj)
    return _LEAF


def unflatten(tree: Any, leaves: list[Any]) -> Any:
    """Rebuild the object of ``tree`` with new ``leaves`` (inverse of :func:`flatten`)."""
    it = iter(leaves)
    out = _unflatten(tree, it)
    rest = list(it)
    if rest:
        raise TraceError(f"internal: unflatten has {len(rest)} leaves left over")
    return out


def _unflatten(tree: Any, it: Any) -> Any:
    if isinstance(tree, Leaf):
        return next(it)
    kind = tree[0]
    if kind == "node":
        _, t, aux, children = tree
        return t.__tylo_unflatten__(aux, [_unflatten(c, it) for c in children])
    if kind == "tuple":
        return tuple(_unflatten(c, it) for c in tree[1])
    if kind == "list":
        return [_unflatten(c, it) for c in tree[1]]
    if kind == "namedtuple":
        return tree[1](*(_unflatten(c, it) for c in tree[2]))
    if kind == "dict":
        return {k: _unflatten(c, it) for k, c in zip(tree[1], tree[2])}
    raise TraceError(f"internal: unflatten met an unknown tree node {tree!r}")
