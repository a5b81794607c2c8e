"""Integer tuples: nested tuples of static ints or symbolic integers (CuTe's IntTuple).

A *shape* is a positive integer or a non-empty tuple of shapes; a *stride* has the same
nesting (it is *congruent* to its shape) with any integers as leaves. Coordinates are
colexicographic (the leftmost mode varies fastest), as in CuTe.

Every function here works on static ints without touching sympy, and on symbolic values
through the exact helpers of :mod:`tylo.layouts.symbolic`.
"""

from __future__ import annotations

from typing import Any

from tylo.layouts._depth import check_depth
from tylo.layouts._lazy import is_sympy, sympy
from tylo.layouts._scope import Value
from tylo.layouts.errors import ShapeError
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


def flatten_tuple(t: IntTuple) -> tuple[Value, ...]:
    """The leaves of ``t`` in order.

    >>> flatten_tuple(((2, 2), (8, (3,))))
    (2, 2, 8, 3)
    """
    if type(t) is not tuple:
        return (t,)
    for e in t:
        if type(e) is tuple:
            break
    else:
        return t  # already flat (the common case)
    out: list[Value] = []
    stack = [iter(t)]  # iterative: any nesting depth, no RecursionError
    while stack:
        for e in stack[-1]:
            if type(e) is tuple:
                stack.append(iter(e))
                break
            out.append(e)
        else:
            stack.pop()
    return tuple(out)


def _too_deep(op: str) -> ShapeError:
    return ShapeError(
        f"{op}: the int tuple is nested deeper than Python's recursion limit allows; "
        "real layouts nest a few levels: flatten or regroup the modes"
    )


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


def product_each(t: IntTuple) -> tuple[Value, ...]:
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
    best, level, stack = 0, 0, [iter(t)]  # iterative: any nesting depth
    while stack:
        level = len(stack)
        best = max(best, level)
        for e in stack[-1]:
            if type(e) is tuple:
                stack.append(iter(e))
                break
        else:
            stack.pop()
    return best


def congruent(a: IntTuple, b: IntTuple) -> bool:
    """True when ``a`` and ``b`` have the same nesting structure.

    >>> congruent((2, (3, 4)), (1, (2, 6))), congruent((2, 3), (1, (2, 6)))
    (True, False)
    """
    try:
        if type(a) is tuple:
            return type(b) is tuple and len(a) == len(b) and all(map(congruent, a, b))
        return type(b) is not tuple
    except RecursionError:
        raise _too_deep("congruent") from None


def prefix_product(shape: IntTuple, init: Any = 1) -> IntTuple:
    """Exclusive prefix products, congruent to ``shape``: the compact column-major strides.

    >>> prefix_product((2, (3, 4)))
    (1, (2, 6))
    """
    if type(shape) is not tuple:
        return init
    out = []
    cur = init
    try:
        for s in shape:
            out.append(prefix_product(s, cur))
            cur = vmul(cur, product(s))
    except RecursionError:
        raise _too_deep("prefix_product") from None
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
        try:
            for e in a:
                out.append(shape_div(e, b))
                b = shape_div(b, product(e))
        except RecursionError:
            raise _too_deep("shape_div") from None
        return tuple(out)
    if type(b) is tuple:
        return shape_div(a, product(b))
    if type(a) is int and type(b) is int:
        if a < 1 or b < 1:
            raise ShapeError(
                f"shape_div: {a} and {b} must both be positive extents; a shape is divided "
                "by a positive size"
            )
        if a % b == 0 or b % a == 0:
            return -(-a // b)
    elif divides(b, a) is True or divides(a, b) is True:
        return ceil_div(a, b)
    raise ShapeError(
        f"shape_div: neither {fmt(a)} nor {fmt(b)} divides the other; "
        "use extents that divide each other"
    )


def idx2crd(idx: Any, shape: IntTuple, stride: IntTuple = None) -> IntTuple:
    """The coordinate of index ``idx`` in ``shape`` (colexicographic; CuTe's idx2crd:
    every leaf is ``(idx // stride) % extent``). ``stride`` defaults to compact. A tuple
    ``idx`` must be congruent to ``shape``; extents and strides must be positive.

    >>> idx2crd(16, (3, (2, 3)))
    (1, (1, 2))
    """
    return _guarded("idx2crd", _idx2crd, idx, "the index", shape, stride)


def _guarded(name: str, impl: Any, x: Any, what: str, shape: IntTuple, stride: Any) -> Any:
    """``impl(x, shape, stride)`` (stride defaulting to compact) for :func:`idx2crd` and
    :func:`crd2idx`, with their depth limit checked first and as the recursion's guard."""
    for t, label in ((x, what), (shape, "the shape"), (stride, "the stride")):
        if type(t) is tuple:
            check_depth(t, label, name)
    try:
        if stride is None:
            stride = prefix_product(shape)
        return impl(x, shape, stride)
    except RecursionError:
        raise _too_deep(name) from None


def _idx2crd(idx: Any, shape: IntTuple, stride: IntTuple) -> IntTuple:
    if type(idx) is tuple:
        _same_rank("idx2crd", idx, shape, "index", "shape")
        _same_rank("idx2crd", stride, shape, "stride", "shape")
        return tuple(_idx2crd(i, s, d) for i, s, d in zip(idx, shape, stride))
    if type(shape) is tuple:
        _same_rank("idx2crd", stride, shape, "stride", "shape")
        return tuple(_idx2crd(idx, s, d) for s, d in zip(shape, stride))
    if type(stride) is tuple:
        raise ShapeError(
            f"idx2crd: stride {fmt(stride)} is a tuple where shape {fmt(shape)} is a single "
            "extent; give a stride congruent to the shape"
        )
    if type(idx) is int and type(shape) is int and type(stride) is int:
        if shape < 1 or stride < 1:
            raise ShapeError(
                f"idx2crd: extent {shape} with stride {stride}: extents and strides of an "
                "index split must be positive (>= 1)"
            )
        return (idx // stride) % shape
    return mod(floor_div(idx, stride), shape)


def _same_rank(op: str, a: Any, shape: Any, what: str, against: str) -> None:
    if type(a) is not tuple or type(shape) is not tuple or len(a) != len(shape):
        raise ShapeError(
            f"{op}: {what} {fmt(a)} is not congruent to {against} {fmt(shape)} (every mode "
            f"needs exactly one {what} entry); give one entry per mode"
        )


def crd2idx(crd: Any, shape: IntTuple, stride: IntTuple = None) -> Any:
    """The index of coordinate ``crd`` under ``stride`` (CuTe's crd2idx). An integer
    coordinate of a tuple shape is split colexicographically; the last mode is unbounded.
    ``stride`` must be congruent to ``shape`` (never a coordinate or a mode dropped).

    >>> crd2idx(16, (3, (2, 3)), (3, (12, 1))), crd2idx((1, 5), (3, (2, 3)), (3, (12, 1)))
    (17, 17)
    """
    return _guarded("crd2idx", _crd2idx, crd, "the coordinate", shape, stride)


def _crd2idx(crd: Any, shape: IntTuple, stride: IntTuple) -> Any:
    if type(crd) is tuple:
        if type(shape) is not tuple or len(crd) != len(shape):
            raise ShapeError(
                f"crd2idx: coordinate {fmt(crd)} does not match shape {fmt(shape)}; give one "
                "entry per mode (or a single integer index)"
            )
        _same_rank("crd2idx", stride, shape, "stride", "shape")
        r: Any = 0
        for c, s, d in zip(crd, shape, stride):
            r = vadd(r, _crd2idx(c, s, d))
        return r
    if type(shape) is tuple:
        _same_rank("crd2idx", stride, shape, "stride", "shape")
        r = 0
        n = len(shape)
        for i in range(n - 1):
            s = product(shape[i])
            if type(s) is int and s < 1:
                raise ShapeError(
                    f"crd2idx: mode {i} of shape {fmt(shape)} has size {s}; an integer "
                    "coordinate is split by positive extents only"
                )
            r = vadd(r, _crd2idx(mod(crd, s), shape[i], stride[i]))
            crd = floor_div(crd, s)
        return vadd(r, _crd2idx(crd, shape[n - 1], stride[n - 1]))
    if type(stride) is tuple:
        raise ShapeError(
            f"crd2idx: stride {fmt(stride)} is a tuple where shape {fmt(shape)} is a single "
            "extent; give a stride congruent to the shape"
        )
    return vmul(crd, stride)


def fmt(t: IntTuple) -> str:
    """CuTe notation of an int tuple: ``(2,(3,N/8))``; a 1-tuple prints as ``(4)``.

    >>> fmt((2, (3, 4))), fmt(8), fmt((4,))
    ('(2,(3,4))', '8', '(4)')
    """
    if type(t) is tuple:
        try:
            return "(" + ",".join(fmt(e) for e in t) + ")"
        except RecursionError:
            return "(...)"  # too deep to print; the error that prints it says so
    if type(t) is int:
        return str(t)
    if is_sympy(t):
        return str(sympy.sstr(t)).replace(" ", "")
    return str(t)
