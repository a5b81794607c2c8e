"""Integer tuples: nested tuples of static ints or symbolic integers (CuTe's IntTuple).

A *shape* is a positive integer or a non-empty tuple of shapes; a *stride* has the same
nesting (it is *congruent* to its shape) with any integers as leaves. Coordinates are
colexicographic (the leftmost mode varies fastest), as in CuTe.

Every function here works on static ints without touching sympy, and on symbolic values
through the exact helpers of :mod:`tylo.layouts.symbolic`.
"""

from __future__ import annotations

from typing import Any

import sympy

from tylo.layouts.symbolic import floor_div, mod, to_value

__all__ = [
    "congruent",
    "crd2idx",
    "depth_of",
    "flatten_tuple",
    "fmt",
    "idx2crd",
    "prefix_product",
    "product",
    "product_each",
    "rank_of",
    "shape_div",
    "vadd",
    "vmul",
]

IntTuple = Any  # int | sympy.Expr | tuple[IntTuple, ...]


def vmul(a: Any, b: Any) -> Any:
    """``a * b`` for ints or sympy values, normalized (a sympy Integer becomes an int)."""
    if type(a) is int and type(b) is int:
        return a * b
    return to_value(a * b)


def vadd(a: Any, b: Any) -> Any:
    """``a + b`` for ints or sympy values, normalized."""
    if type(a) is int and type(b) is int:
        return a + b
    return to_value(a + b)


def flatten_tuple(t: IntTuple) -> tuple:
    """The leaves of ``t`` in order.

    >>> flatten_tuple(((2, 2), (8, (3,))))
    (2, 2, 8, 3)
    """
    if type(t) is not tuple:
        return (t,)
    out: list = []
    _flatten_into(t, out)
    return tuple(out)


def _flatten_into(t: tuple, out: list) -> None:
    for e in t:
        if type(e) is tuple:
            _flatten_into(e, out)
        else:
            out.append(e)


def product(t: IntTuple) -> Any:
    """The product of all leaves (the size of a shape).

    >>> product((2, (3, 4)))
    24
    """
    if type(t) is not tuple:
        return t
    r: Any = 1
    for e in flatten_tuple(t):
        r = vmul(r, e)
    return r


def product_each(t: IntTuple) -> tuple:
    """The product of each top-level mode.

    >>> product_each(((2, 3), 4))
    (6, 4)
    """
    if type(t) is not tuple:
        return (t,)
    return tuple(product(e) for e in t)


def rank_of(t: IntTuple) -> int:
    """Number of top-level modes (1 for a scalar)."""
    return len(t) if type(t) is tuple else 1


def depth_of(t: IntTuple) -> int:
    """Nesting depth (0 for a scalar)."""
    if type(t) is not tuple:
        return 0
    return 1 + max((depth_of(e) for e in t), default=0)


def congruent(a: IntTuple, b: IntTuple) -> bool:
    """True when ``a`` and ``b`` have the same nesting structure.

    >>> congruent((2, (3, 4)), (1, (2, 6))), congruent((2, 3), (1, (2, 6)))
    (True, False)
    """
    if type(a) is tuple:
        return type(b) is tuple and len(a) == len(b) and all(map(congruent, a, b))
    return type(b) is not tuple


def prefix_product(shape: IntTuple, init: Any = 1) -> IntTuple:
    """Exclusive prefix products, congruent to ``shape``: the compact column-major strides.

    >>> prefix_product((2, (3, 4)))
    (1, (2, 6))
    """
    if type(shape) is not tuple:
        return init
    out = []
    cur = init
    for s in shape:
        out.append(prefix_product(s, cur))
        cur = vmul(cur, product(s))
    return tuple(out)


def shape_div(a: IntTuple, b: Any) -> IntTuple:
    """Divide shape ``a`` by ``b`` from the left (CuTe's ``shape_div``): each mode absorbs
    what it can of ``b``. Needs ``a_i | b`` or ``b | a_i`` at every step.

    >>> shape_div((3, 6, 2, 8), 9), shape_div((3, 6, 2, 8), 72)
    ((1, 2, 2, 8), (1, 1, 1, 4))
    """
    from tylo.layouts.symbolic import ceil_div, divides

    if type(a) is tuple:
        out = []
        for e in a:
            out.append(shape_div(e, b))
            b = shape_div(b, product(e))
        return tuple(out)
    if type(b) is tuple:
        return shape_div(a, product(b))
    if type(a) is int and type(b) is int:
        if a % b == 0 or b % a == 0:
            return -(-a // b)
    elif divides(b, a) is True or divides(a, b) is True:
        return ceil_div(a, b)
    from tylo.layouts.errors import ShapeError

    raise ShapeError(
        f"shape_div: neither {fmt(a)} nor {fmt(b)} divides the other; "
        "use extents that divide each other"
    )


def idx2crd(idx: Any, shape: IntTuple, stride: IntTuple = None) -> IntTuple:
    """The coordinate of index ``idx`` in ``shape`` (colexicographic; CuTe's idx2crd:
    every leaf is ``(idx // stride) % extent``). ``stride`` defaults to compact.

    >>> idx2crd(16, (3, (2, 3)))
    (1, (1, 2))
    """
    if stride is None:
        stride = prefix_product(shape)
    if type(idx) is tuple:
        return tuple(idx2crd(i, s, d) for i, s, d in zip(idx, shape, stride))
    if type(shape) is tuple:
        return tuple(idx2crd(idx, s, d) for s, d in zip(shape, stride))
    if type(idx) is int and type(shape) is int and type(stride) is int:
        return (idx // stride) % shape
    return mod(floor_div(idx, stride), shape)


def crd2idx(crd: Any, shape: IntTuple, stride: IntTuple = None) -> Any:
    """The index of coordinate ``crd`` under ``stride`` (CuTe's crd2idx). An integer
    coordinate of a tuple shape is split colexicographically; the last mode is unbounded.

    >>> crd2idx(16, (3, (2, 3)), (3, (12, 1))), crd2idx((1, 5), (3, (2, 3)), (3, (12, 1)))
    (17, 17)
    """
    if stride is None:
        stride = prefix_product(shape)
    if type(crd) is tuple:
        if type(shape) is not tuple or len(crd) != len(shape):
            from tylo.layouts.errors import ShapeError

            raise ShapeError(
                f"crd2idx: coordinate {fmt(crd)} does not match shape {fmt(shape)}; give one "
                "entry per mode (or a single integer index)"
            )
        r: Any = 0
        for c, s, d in zip(crd, shape, stride):
            r = vadd(r, crd2idx(c, s, d))
        return r
    if type(shape) is tuple:
        r = 0
        n = len(shape)
        for i in range(n - 1):
            s = product(shape[i])
            r = vadd(r, crd2idx(mod(crd, s), shape[i], stride[i]))
            crd = floor_div(crd, s)
        return vadd(r, crd2idx(crd, shape[n - 1], stride[n - 1]))
    return vmul(crd, stride)


def fmt(t: IntTuple) -> str:
    """CuTe notation of an int tuple: ``(2,(3,N/8))``; a 1-tuple prints as ``(4)``.

    >>> fmt((2, (3, 4))), fmt(8), fmt((4,))
    ('(2,(3,4))', '8', '(4)')
    """
    if type(t) is tuple:
        return "(" + ",".join(fmt(e) for e in t) + ")"
    if type(t) is int:
        return str(t)
    if isinstance(t, sympy.Basic):
        return sympy.sstr(t).replace(" ", "")
    return str(t)
