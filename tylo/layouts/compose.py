"""Functional composition of layouts: ``composition(A, B)(c) == A(B(c))``.

For a layout right operand the result has B's shape. Each mode ``s:d`` of B walks the
coalesced modes of A; the walk needs, at each mode of A with extent ``a`` (except the
last, which is unbounded):

- the *stride divisibility condition*: ``d | a`` or ``a | d``, and
- the *shape divisibility condition*: when B's mode lands inside this mode of A
  (``q = a/d`` elements of it remain), ``q | s`` or ``s <= q``.

If either fails the true function is not a layout: this raises CompositionError naming
both operands (never a silently wrong layout). Symbolic conditions are decided exactly;
when they depend on the values, UndecidableError names the fact to supply.
"""

from __future__ import annotations

from typing import Any

import sympy

from tylo.layouts.algebra import (
    _static_coalesced,
    coalesce,
    is_one,
    is_zero,
    undecided_simplification,
)
from tylo.layouts.errors import CompositionError, LayoutError, ShapeError, UndecidableError
from tylo.layouts.inttuple import fmt, vmul
from tylo.layouts.layout import Layout
from tylo.layouts.swizzle import ComposedLayout, Swizzle
from tylo.layouts.symbolic import decide_cmp, divides, exact_div, undecidable_divides

__all__ = ["composition"]


def _fail_stride(a_lay: Any, b_lay: Any, d: Any, s_b: Any, a: Any, orig_d: Any) -> LayoutError:
    step = "" if d == orig_d else f" (after the earlier modes, stride {fmt(d)})"
    return CompositionError(
        f"composition({a_lay}, {b_lay}): stride {fmt(orig_d)} of {fmt(s_b)}:{fmt(orig_d)}"
        f"{step} does not divide, and is not divided by, extent {fmt(a)} of {a_lay} (the "
        "stride divisibility condition), so A(B(i)) is not a layout; use a right operand "
        "whose strides divide the left operand's extents, or vice versa"
    )


def _compose_mode(a_lay: Layout, fs: tuple, fd: tuple, s: Any, d: Any, b_text: str) -> Any:
    """Compose coalesced flat A (fs, fd) with the single mode ``s:d``; (shape, stride)."""
    if type(d) is int:
        if d == 0:
            return s, 0
        if d < 0:
            raise CompositionError(
                f"composition({a_lay}, {b_text}): negative stride {d} in the right operand "
                "is not supported; compose with the positive stride and reverse the result"
            )
    elif is_zero(d):
        return s, 0
    rs: list = []
    rd: list = []
    rest_s, rest_d = s, d
    n = len(fs) - 1
    for k in range(n):
        if is_one(rest_s):
            break
        a, ad = fs[k], fd[k]
        down = divides(rest_d, a)
        if down is True:
            q = exact_div(a, rest_d, op="composition")
            if divides(q, rest_s) is True:
                if not is_one(q):
                    rs.append(q)
                    rd.append(vmul(rest_d, ad))
                rest_s = exact_div(rest_s, q, op="composition")
                rest_d = 1
                continue
            fits = decide_cmp(rest_s, "<=", q)
            if fits is True:
                rs.append(rest_s)
                rd.append(vmul(rest_d, ad))
                rest_s = 1
                break
            if fits is False and divides(q, rest_s) is False:
                raise _fail_shape(a_lay, b_text, rest_s, q, a)
            err = undecidable_divides(
                "composition",
                q,
                rest_s,
                f"or {fmt(rest_s)} <= {fmt(q)}; composing {a_lay} "
                f"with {b_text}, at extent {fmt(a)}",
            )
            raise err
        up = divides(a, rest_d)
        if up is True:
            rest_d = exact_div(rest_d, a, op="composition")
            continue
        if down is False and up is False:
            raise _fail_stride(a_lay, b_text, rest_d, s, a, d)
        raise undecidable_divides(
            "composition",
            rest_d,
            a,
            f"or {fmt(a)} | {fmt(rest_d)}; composing {a_lay} with "
            f"{b_text}: the stride divisibility condition at extent {fmt(a)}",
        )
    if not is_one(rest_s):
        rs.append(rest_s)
        rd.append(vmul(rest_d, fd[n]))
    if not rs:
        return 1, 0
    if len(rs) == 1:
        return rs[0], rd[0]
    return tuple(rs), tuple(rd)


def _fail_shape(a_lay: Any, b_text: str, rest_s: Any, q: Any, a: Any) -> LayoutError:
    return CompositionError(
        f"composition({a_lay}, {b_text}): {fmt(rest_s)} remaining elements of the right "
        f"operand neither fit in nor are divided by the {fmt(q)} elements left in extent "
        f"{fmt(a)} of {a_lay} (the shape divisibility condition), so A(B(i)) is not a "
        "layout; use a right operand whose extents divide the left operand's"
    )


def _compose_layout(a: Layout, fs: tuple, fd: tuple, bs: Any, bd: Any, b_text: Any) -> Any:
    if type(bs) is tuple:
        parts = [_compose_layout(a, fs, fd, s, d, b_text) for s, d in zip(bs, bd)]
        return tuple(p[0] for p in parts), tuple(p[1] for p in parts)
    return _compose_mode(a, fs, fd, bs, bd, b_text)


def _static_mode(fs: list, fd: list, s: int, d: int) -> Any:
    """Static-int core of ``_compose_mode``; None when a condition fails (the general
    path then raises the detailed error)."""
    if d == 0:
        return s, 0
    if d < 0:
        return None
    rs = []
    rd = []
    n = len(fs) - 1
    for k in range(n):
        if s == 1:
            break
        a = fs[k]
        if a % d == 0:
            q = a // d
            if s % q == 0:
                if q != 1:
                    rs.append(q)
                    rd.append(d * fd[k])
                s //= q
                d = 1
            elif s < q:
                rs.append(s)
                rd.append(d * fd[k])
                s = 1
                break
            else:
                return None
        elif d % a == 0:
            d //= a
        else:
            return None
    if s != 1:
        rs.append(s)
        rd.append(d * fd[n])
    if not rs:
        return 1, 0
    if len(rs) == 1:
        return rs[0], rd[0]
    return tuple(rs), tuple(rd)


def _static_tree(fs: list, fd: list, bs: Any, bd: Any) -> Any:
    if type(bs) is tuple:
        shapes = []
        strides = []
        for s, d in zip(bs, bd):
            r = _static_tree(fs, fd, s, d)
            if r is None:
                return None
            shapes.append(r[0])
            strides.append(r[1])
        return tuple(shapes), tuple(strides)
    return _static_mode(fs, fd, bs, bd)


def composition(a: Any, b: Any) -> Any:
    """``composition(A, B)``: the layout ``R`` with ``R(c) == A(B(c))`` for every
    coordinate ``c`` of B. ``B`` may be a Layout (1-D functional composition; R has B's
    shape), an int ``n`` (``n:1``), or a tuple *tiler* applied by mode (``<B0, B1>``:
    mode i of A composed with ``B[i]``; ``None`` keeps a mode). ``composition(Swizzle,
    L)`` and ``composition(ComposedLayout, B)`` give a ComposedLayout.

    >>> str(composition(Layout((6, 2), (8, 2)), Layout((4, 3), (3, 1))))
    '((2,2),3):((24,2),8)'
    >>> str(composition(Layout((4, 8), (1, 4)), (2, 4))), str(composition(Layout((4, 8), (1, 4)), Layout((2, 4), (1, 2))))
    ('(2,4):(1,4)', '(2,4):(1,2)')
    """
    if type(a) is Layout:
        tb = type(b)
        if tb is tuple:
            return _by_mode(a, b)
        if a.is_static:
            if tb is int:
                fs, fd = a.flat()
                r = _static_mode(*_static_coalesced(fs, fd), b, 1)
                if r is not None:
                    return Layout._make(r[0], r[1])
                b = Layout._make(b, 1)
            elif tb is Layout and b.is_static:
                fs, fd = a.flat()
                r = _static_tree(*_static_coalesced(fs, fd), b.shape, b.stride)
                if r is not None:
                    return Layout._make(r[0], r[1])
    return _composition(a, b)


def _composition(a: Any, b: Any) -> Any:
    if isinstance(a, Swizzle):
        if isinstance(b, (Layout, int, sympy.Basic)):
            b = b if isinstance(b, Layout) else Layout(b)
            return ComposedLayout(a, 0, b)
        if isinstance(b, ComposedLayout):
            raise CompositionError(
                f"composition({a}, {b}): a swizzle composed with a composed layout is not "
                "supported; compose the swizzle with a plain layout"
            )
        return ComposedLayout(a, 0, Layout(b) if type(b) is tuple else b)
    if isinstance(a, ComposedLayout):
        return ComposedLayout(a.outer, a.offset, composition(a.inner, b))
    if type(a) is int or isinstance(a, sympy.Basic):
        a = Layout(a)
    if not isinstance(a, Layout):
        raise ShapeError(f"composition: left operand {a!r} is not a Layout")
    if b is None:
        return a
    if type(b) is tuple:
        return _by_mode(a, b)
    if isinstance(b, (Swizzle, ComposedLayout)):
        raise CompositionError(
            f"composition({a}, {b}): a layout after a swizzle is not a layout in general; "
            "compose the swizzle on the outside (composition(swizzle, layout))"
        )
    if not isinstance(b, Layout):
        b = Layout(b)
    ca = coalesce(a)
    fs, fd = ca.flat()
    try:
        s, d = _compose_layout(a, fs, fd, b.shape, b.stride, b)
    except CompositionError as e:
        cond = None if (a.is_static and b.is_static) else undecided_simplification(a)
        if cond is None:
            raise
        raise UndecidableError(
            f"composition({a}, {b}) fails unless {cond}, which depends on the symbols' "
            f"values ({e}); assume it or its negation: with assuming({cond}): ...",
            operation="composition",
            condition=cond,
            hint=f"with assuming({cond}): ...",
        ) from None
    except LayoutError as e:
        raise e.within(f"composition({a}, {b})") from None
    return Layout._make(s, d)


def _by_mode(a: Layout, tiler: tuple) -> Layout:
    def head() -> str:
        return f"composition({a}, <{','.join(_tiler_text(t) for t in tiler)}>)"

    return by_mode(composition, "composition", a, tiler, error=CompositionError, head=head)


def by_mode(
    fn: Any, op: str, a: Layout, tiler: tuple, *, error: type = ShapeError, head: Any = None
) -> Layout:
    """Apply ``fn(mode_i, tiler[i])`` to the first ``len(tiler)`` modes of ``a`` (a by-mode
    tiler, as composition, the divides and the products take it); other modes stay.
    ``head()`` renders the operation for an error message (default ``op(a, tiler)``)."""
    shape = a.shape if type(a.shape) is tuple else (a.shape,)
    stride = a.stride if type(a.stride) is tuple else (a.stride,)
    n = len(tiler)
    if n > len(shape):
        raise error(
            f"{head() if head else f'{op}({a}, {tiler})'}: the tiler has {n} modes but the layout only "
            f"{len(shape)}; give at most one tiler entry per mode"
        )
    rs = []
    rd = []
    for i in range(n):
        try:
            m = fn(Layout._make(shape[i], stride[i]), tiler[i])
        except LayoutError as e:
            raise e.within(f"{op}({a}, {_tiler_text(tiler)}), mode {i}") from None
        rs.append(m.shape)
        rd.append(m.stride)
    return Layout._make(tuple(rs) + shape[n:], tuple(rd) + stride[n:])


def _tiler_text(t: Any) -> str:
    if t is None:
        return "_"
    if type(t) is tuple:
        return "<" + ",".join(_tiler_text(e) for e in t) + ">"
    return str(t) if isinstance(t, Layout) else fmt(t)
