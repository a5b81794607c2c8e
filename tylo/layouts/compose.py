"""Functional composition of layouts: ``composition(A, B)(c) == A(B(c))``.

**How A is evaluated** (the contract every result meets): tylo evaluates a layout ``A`` at
a flat integer index ``i`` by splitting ``i`` colexicographically over A's flattened modes,
the last mode unbounded: ``A(i) = sum_{k<n} ((i // P_k) % s_k) * d_k + (i // P_n) * d_n``
with ``P_k`` the product of the extents before mode k. This defines ``A(i)`` for *every*
integer: past ``size(A)`` the last mode keeps counting (``Layout(1, 1)(4) == 4``,
``Layout((4, 3, 1), (3, 1, 0))(12) == 0``), and below 0 Python's floor division and
remainder apply. ``composition`` coalesces A keeping that extension (CuTe's
``coalesce_x``: an extent-1 last mode stays, unbounded), so the result agrees with this
evaluation at every coordinate of B, including those past ``size(A)``.

For a layout right operand the result has B's shape, each leaf possibly refined. A leaf
``s:d`` of B walks the coalesced modes of A; at a mode of extent ``a``:

- ``d | a``: ``q = a/d`` elements of stride ``d`` stay in this mode; needs ``q | s`` or
  ``s <= q`` (the *shape divisibility condition*);
- ``a | d``: the leaf starts past this mode (``d -> d/a``);
- otherwise, the leaf fits in this mode when ``(s-1)*d < a``; if not, the *stride
  divisibility condition* fails;
- a negative ``d`` is exact where it lands in A's last (unbounded) mode (``P_n | d``).

A right operand with a negative stride reaches indices of A below 0, outside its domain,
where CuTe's C++ (truncating division) and pycute (floor division, as ``A(i)`` above)
extend A differently: it is composed only where the two agree at every such index, else
refused (``_compose_eval.check_negative_reach``), so a result is right in both.

The leaves are composed separately, which is valid when A is *additive* across B's
leaves: no mode of A may receive, summed over B's leaves, digits that reach its extent
(else a carry makes ``A(x + y) != A(x) + A(y)``). When a condition fails for static
operands, tylo decides the question exactly by evaluating ``A(B(c))`` at every coordinate
(when ``size(B) <= 4096``): it returns the layout if one of B's shape (leaves refined in
any way) computes the function, and otherwise raises CompositionError saying no layout
exists. Larger or symbolic operands raise CompositionError naming the failed condition
(never a claim that no layout exists); undecidable symbolic conditions raise
UndecidableError naming the fact to supply.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tylo.layouts._compose_eval import check_negative_reach, search
from tylo.layouts._depth import check_depth
from tylo.layouts._lazy import is_sympy
from tylo.layouts._scope import Value
from tylo.layouts.algebra import (
    is_one,
    is_zero,
    same,
)
from tylo.layouts.errors import CompositionError, LayoutError, ShapeError, UndecidableError
from tylo.layouts.inttuple import fmt, product, vadd, vmul
from tylo.layouts.layout import Layout, _as_layout, size
from tylo.layouts.swizzle import ComposedLayout, Swizzle
from tylo.layouts.symbolic import (
    decide_cmp,
    divides,
    exact_div,
    undecidable_cmp,
    undecidable_divides,
)

__all__ = ["composition"]

SEARCH_LIMIT = 4096  # largest size(B) whose failed condition is settled by evaluation


class _Refusal(Exception):
    """A composition condition failed (internal); ``args[0]`` says which, for the message."""


# -- A, coalesced with its extension --------------------------------------------------------


# memo of _ext_coalesce for static layouts (bounded; layouts are immutable)
_EXT: dict[Layout, tuple[list[Value], list[Value], Value]] = {}


def _ext_coalesce(a: Layout) -> tuple[list[Value], list[Value], Value]:
    """A's flat modes merged like CuTe's ``coalesce_x``: ``(fs, fd, dn)``, the bounded modes
    (extent-1 ones dropped, mergeable pairs merged) and the stride of the last, unbounded
    mode. Every merge keeps ``A(i)`` for every integer ``i``. Callers must not mutate."""
    if a.is_static:
        hit = _EXT.get(a)
        if hit is not None:
            return hit
    fs, fd = a.flat()
    rs: list[Value] = []
    rd: list[Value] = []
    for k in range(len(fs) - 1):
        s, d = fs[k], fd[k]
        if is_one(s):
            continue
        if rs and same(vmul(rs[-1], rd[-1]), d):
            rs[-1] = vmul(rs[-1], s)
        else:
            rs.append(s)
            rd.append(d)
    dn = fd[-1]
    if rs and same(vmul(rs[-1], rd[-1]), dn):
        rs.pop()
        dn = rd.pop()
    out = (rs, rd, dn)
    if a.is_static:
        if len(_EXT) > 4096:
            _EXT.clear()
        _EXT[a] = out
    return out


def _undecided_form(a: Layout) -> str | None:
    """A condition (as text) on which ``_ext_coalesce(a)`` depends: an extent-1 drop or a
    merge it could not decide; None when every one was decided."""
    fs, fd = a.flat()
    for s in fs[:-1]:
        if type(s) is not int and decide_cmp(s, "==", 1) is None:
            return f"{fmt(s)} == 1"
    rs, rd, dn = _ext_coalesce(a)
    nxt = [*rd[1:], dn]
    for s, d, e in zip(rs, rd, nxt):
        reach = vmul(s, d)
        if decide_cmp(e, "==", reach) is None:
            return f"{fmt(e)} == {fmt(reach)}"
    return None


# -- the static fast path ------------------------------------------------------------------


def _static_leaf(fs: list[int], fd: list[int], dn: int, s: int, d: int, used: list[int]) -> Any:
    """Static core of ``_leaf``: (shape, stride), adding the leaf's largest digit in each
    mode of A to ``used``; None when a condition fails (the general path then decides)."""
    if d == 0 or s == 1:
        return (s, 0) if d == 0 else (1, 0)
    if d < 0:
        return None  # the general path checks the negative indices B reaches first
    rs = []
    rd = []
    for k in range(len(fs)):
        a = fs[k]
        if a % d == 0:
            q = a // d
            if s % q == 0:
                if q != 1:
                    rs.append(q)
                    rd.append(d * fd[k])
                    used[k] += a - d
                s //= q
                d = 1
                if s == 1:
                    break
                continue
            if s < q:
                rs.append(s)
                rd.append(d * fd[k])
                used[k] += d * (s - 1)
                s = 1
                break
            return None
        if d % a == 0:
            d //= a
            continue
        if (s - 1) * d < a:
            rs.append(s)
            rd.append(d * fd[k])
            used[k] += d * (s - 1)
            s = 1
            break
        return None
    if s != 1:
        rs.append(s)
        rd.append(d * dn)
    return _pack(rs, rd)


def _static_tree(fs: list[int], fd: list[int], dn: int, bs: Any, bd: Any, used: list[int]) -> Any:
    if type(bs) is tuple:
        shapes = []
        strides = []
        for s, d in zip(bs, bd):
            r = _static_tree(fs, fd, dn, s, d, used)
            if r is None:
                return None
            shapes.append(r[0])
            strides.append(r[1])
        return tuple(shapes), tuple(strides)
    return _static_leaf(fs, fd, dn, bs, bd, used)


def _static_compose(a: Layout, bs: Any, bd: Any) -> Layout | None:
    """composition of static operands when every condition holds, else None."""
    fs, fd, dn = _ext_coalesce(a)
    used = [0] * len(fs)
    r = _static_tree(fs, fd, dn, bs, bd, used)
    if r is None:
        return None
    for k in range(len(fs)):  # a plain loop: faster than any() on a few modes
        if used[k] >= fs[k]:
            return None
    return Layout._make(r[0], r[1])


# -- the general walk (static or symbolic) --------------------------------------------------


class _Walk:
    """One composition's context: A coalesced with its extension, the operands' text."""

    __slots__ = ("a", "b", "dn", "fd", "fs", "used")

    def __init__(self, a: Layout, b: Layout) -> None:
        self.a = a
        self.b = b
        self.fs, self.fd, self.dn = _ext_coalesce(a)
        self.used: list[list[int]] = [[] for _ in self.fs]

    def undecidable(self, d: Any, e: Any, alt: str, what: str) -> UndecidableError:
        return undecidable_divides(
            "composition", d, e, f"{alt}; composing {self.a} with {self.b}: {what}"
        )

    def leaf(self, s: Any, d: Any) -> tuple[Any, Any]:
        """Compose A with the leaf ``s:d`` of B: (shape, stride) with ``R(x) == A(x*d)``
        for ``0 <= x < s``; records the leaf's largest digit in each mode of A."""
        if is_zero(d):
            return s, 0
        if is_one(s):
            return 1, 0
        neg = decide_cmp(d, "<", 0)
        if neg is None:
            raise undecidable_cmp("composition", d, ">=", 0, f"a stride of {self.b}")
        if neg:
            return self.negative(s, d)
        fs, fd = self.fs, self.fd
        rs: list[Value] = []
        rd: list[Value] = []
        orig_d = d
        for k, a in enumerate(fs):
            down = divides(d, a)
            if down is True:
                q = exact_div(a, d, op="composition")
                whole = divides(q, s)
                if whole is True:
                    if not is_one(q):
                        rs.append(q)
                        rd.append(vmul(d, fd[k]))
                        self.used[k].append(vadd(a, -d))
                    s = exact_div(s, q, op="composition")
                    d = 1
                    if is_one(s):
                        break
                    continue
                fits = decide_cmp(s, "<=", q)  # s == q: the same result as q | s
                if fits is True:
                    return self.finish(rs, rd, k, s, d)
                if fits is False and whole is False:
                    raise _Refusal(
                        f"{fmt(s)} remaining elements of the right operand neither fit in "
                        f"nor are divided by the {fmt(q)} elements left in extent {fmt(a)} "
                        f"of {self.a} (the shape divisibility condition)"
                    )
                raise self.undecidable(
                    q,
                    s,
                    f"or {fmt(s)} <= {fmt(q)}",
                    f"the shape divisibility condition at extent {fmt(a)}",
                )
            up = divides(a, d)
            if up is True:
                d = exact_div(d, a, op="composition")
                continue
            fits = decide_cmp(vmul(vadd(s, -1), d), "<", a)
            if fits is True:
                return self.finish(rs, rd, k, s, d)
            if fits is False and down is False and up is False:
                step = "" if d == orig_d else f" (after the earlier modes, stride {fmt(d)})"
                raise _Refusal(
                    f"stride {fmt(orig_d)} of {fmt(s)}:{fmt(orig_d)}{step} does not divide, and "
                    f"is not divided by, extent {fmt(a)} of {self.a} (the stride divisibility "
                    f"condition), and its {fmt(s)} elements do not fit in that extent"
                )
            raise self.undecidable(
                d,
                a,
                f"or {fmt(a)} | {fmt(d)}, or {fmt(vadd(s, -1))}*{fmt(d)} < {fmt(a)}",
                f"the stride divisibility condition at extent {fmt(a)}",
            )
        if not is_one(s):
            rs.append(s)
            rd.append(vmul(d, self.dn))
        return _pack(rs, rd)

    def finish(self, rs: list[Value], rd: list[Value], k: int, s: Any, d: Any) -> tuple[Any, Any]:
        """The leaf's remaining ``s`` elements of stride ``d`` fit in mode ``k``."""
        rs.append(s)
        rd.append(vmul(d, self.fd[k]))
        self.used[k].append(vmul(d, vadd(s, -1)))
        return _pack(rs, rd)

    def negative(self, s: Any, d: Any) -> tuple[Any, Any]:
        """A negative stride is exact where it lands in A's last (unbounded) mode."""
        p = product(tuple(self.fs)) if self.fs else 1
        ok = divides(p, d)
        if ok is True:
            return s, vmul(exact_div(d, p, op="composition"), self.dn)
        if ok is None:
            raise self.undecidable(p, d, "", f"whether stride {fmt(d)} lands in A's last mode")
        raise _Refusal(
            f"stride {fmt(d)} of {fmt(s)}:{fmt(d)} is negative and not a multiple of {fmt(p)} "
            f"(the extents of {self.a} before its last mode), so B's indices fall below 0 "
            "inside A's bounded modes, where tylo evaluates A with floor division and "
            "A(-x) != -A(x)"
        )

    def tree(self, bs: Any, bd: Any) -> tuple[Any, Any]:
        if type(bs) is tuple:
            parts = [self.tree(s, d) for s, d in zip(bs, bd)]
            return tuple(p[0] for p in parts), tuple(p[1] for p in parts)
        return self.leaf(bs, bd)

    def check_additive(self) -> None:
        """No mode of A may receive digits, summed over B's leaves, that reach its extent."""
        for k, digits in enumerate(self.used):
            if len(digits) < 2:
                continue
            total: Any = 0
            for x in digits:
                total = vadd(total, x)
            a = self.fs[k]
            ok = decide_cmp(total, "<", a)
            if ok is True:
                continue
            mode = f"{fmt(a)}:{fmt(self.fd[k])}"
            if ok is None:
                raise undecidable_cmp(
                    "composition",
                    total,
                    "<",
                    a,
                    f"A additive across the modes of {self.b}: their digits in mode {mode} "
                    f"of {self.a} must not carry",
                )
            raise _Refusal(
                f"the modes of {self.b} overlap in mode {mode} of {self.a}: their digits "
                f"there sum to {fmt(total)}, which reaches the extent {fmt(a)}, so a carry "
                f"makes A(x + y) differ from A(x) + A(y) (A is not additive across B's modes)"
            )


def _pack(rs: list[Value], rd: list[Value]) -> tuple[Any, Any]:
    if not rs:
        return 1, 0
    if len(rs) == 1:
        return rs[0], rd[0]
    return tuple(rs), tuple(rd)


_FIX = "use a right operand whose strides divide the left operand's extents, or vice versa"


def _refuse(a: Layout, b: Layout, why: _Refusal) -> Layout:
    """Settle a failed condition: exhaustively for small static operands, else refuse
    naming the condition (never claiming that no layout exists without having checked)."""
    head = f"composition({a}, {b}): {why.args[0]}"
    if a.is_static and b.is_static:
        n = size(b)
        if n <= SEARCH_LIMIT:
            r = search(a, b)
            if r is not None:
                return r
            raise CompositionError(
                f"{head}; A(B(c)) is not a layout: no layout of B's shape (its extents "
                f"refined in any way) computes it at all {n} coordinates of B, so no layout "
                f"exists; {_FIX}"
            )
        raise CompositionError(
            f"{head}; tylo composes only when this condition holds (size(B) = {n} is past "
            f"the {SEARCH_LIMIT} coordinates it checks exhaustively, so whether A(B(c)) is a "
            f"layout was not decided); {_FIX}"
        )
    cond = _undecided_form(a)
    if cond is not None:
        raise UndecidableError(
            f"{head}, judged on a coalesced form of A that depends on whether {cond}, which "
            f"depends on the symbols' values; assume it or its negation to decide: with "
            f"assuming({cond}): ...",
            operation="composition",
            condition=cond,
            hint=f"with assuming({cond}): ...",
        )
    raise CompositionError(
        f"{head}; tylo composes symbolic operands only when this condition holds (A(B(c)) "
        f"may still be a layout for particular values: substitute them to decide); {_FIX}"
    )


# -- entry points ---------------------------------------------------------------------------


def composition(a: Any, b: Any) -> Any:
    """``composition(A, B)``: the layout ``R`` with ``R(c) == A(B(c))`` for every
    coordinate ``c`` of B, A evaluated as the module docstring states (past ``size(A)``
    the last mode of A keeps counting). ``B`` may be a Layout (1-D functional composition;
    R has B's shape, each leaf possibly refined), an int ``n >= 1`` (``n:1``), or a tuple
    *tiler* applied by mode (``<B0, B1>``: mode i of A composed with ``B[i]``; ``None``
    keeps a mode). ``composition(Swizzle, L)`` and ``composition(ComposedLayout, B)`` give
    a ComposedLayout. Raises CompositionError when R cannot be given (saying "no layout
    exists" only when that was checked) and UndecidableError when a symbolic condition
    depends on the values.

    >>> str(composition(Layout((6, 2), (8, 2)), Layout((4, 3), (3, 1))))
    '((2,2),3):((24,2),8)'
    >>> str(composition(Layout((4, 8), (1, 4)), (2, 4))), str(composition(Layout(1, 1), 4))
    ('(2,4):(1,4)', '4:1')
    """
    if type(a) is Layout:
        tb = type(b)
        if tb is tuple:
            return _by_mode(a, b)
        if a.is_static:
            if tb is int:
                if b >= 1:
                    fs, fd, dn = _ext_coalesce(a)
                    # one leaf: its digits stay below each extent by construction
                    r = _static_leaf(fs, fd, dn, b, 1, [0] * len(fs))
                    if r is not None:
                        return Layout._make(r[0], r[1])
            elif tb is Layout and b.is_static:
                r = _static_compose(a, b.shape, b.stride)
                if r is not None:
                    return r
    return _composition(a, b)


def _composition(a: Any, b: Any) -> Any:
    if isinstance(a, Swizzle):
        if isinstance(b, (Layout, int)) or is_sympy(b):
            b = b if isinstance(b, Layout) else Layout(b)
            return ComposedLayout(a, 0, b)
        if isinstance(b, ComposedLayout):
            raise CompositionError(
                f"composition({a}, {b}): a swizzle composed with a composed layout is not "
                "supported (a ComposedLayout holds one outer function); compose the swizzle "
                "with a plain layout"
            )
        return ComposedLayout(a, 0, Layout(b) if type(b) is tuple else b)
    if isinstance(a, ComposedLayout):
        inner = composition(a.inner, b)
        if not isinstance(inner, Layout):
            raise CompositionError(
                f"composition({a}, {b}): a composed layout composed with a swizzled one "
                "would apply two outer functions, and tylo's ComposedLayout holds one; "
                "evaluate A(B(c)) directly"
            )
        return ComposedLayout(a.outer, a.offset, inner)
    if type(a) is int or is_sympy(a):
        a = Layout(a)
    if not isinstance(a, Layout):
        _as_layout(a, "composition")  # raises ShapeError naming the operand (reprlib: any depth)
    if b is None:
        return a
    if type(b) is tuple:
        return _by_mode(a, b)
    if isinstance(b, (Swizzle, ComposedLayout)):
        return _swizzled_right(a, b)
    if type(b) is int and b < 1:
        raise ShapeError(
            f"composition({a}, {b}): the tiler {b} has no coordinates; an int tiler n means "
            "n:1 and needs n >= 1"
        )
    if not isinstance(b, Layout):
        try:
            b = Layout(b)
        except LayoutError as e:
            raise e.within(f"composition({a}, {b!r})") from None
    walk = _Walk(a, b)
    check_negative_reach(a, b, walk.fs)  # its messages name the composition
    try:
        s, d = walk.tree(b.shape, b.stride)
        walk.check_additive()
    except _Refusal as why:
        return _refuse(a, b, why)
    except LayoutError as e:
        raise e.within(f"composition({a}, {b})") from None
    return Layout._make(s, d)


def _swizzled_right(a: Layout, b: Any) -> Any:
    """``A o (outer o offset o inner)``: exact when A is the identity on every index (then
    the result is B); otherwise refused, as tylo's ComposedLayout holds one outer function
    and ``A o swizzle`` is neither a layout nor a swizzle."""
    fs, _, dn = _ext_coalesce(a)
    if not fs and is_one(dn) and isinstance(b, ComposedLayout):
        return b
    raise CompositionError(
        f"composition({a}, {b}): a swizzled right operand is supported only when the left "
        "operand is the identity (it coalesces to n:1, and then the result is B): A o swizzle "
        "is neither a layout nor a swizzle, and tylo's ComposedLayout holds one outer "
        "function; evaluate A(B(c)) directly, or build the swizzled layout you need from "
        "composition(A, B.inner)"
    )


def _by_mode(a: Layout, tiler: tuple[object, ...]) -> Layout:
    def head() -> str:
        return f"composition({a}, <{','.join(_tiler_text(t) for t in tiler)}>)"

    return by_mode(composition, "composition", a, tiler, error=CompositionError, head=head)


def by_mode(
    fn: Callable[[Layout, Any], Layout],
    op: str,
    a: Layout,
    tiler: tuple[object, ...],
    *,
    error: type[LayoutError] = ShapeError,
    head: Callable[[], str] | None = None,
) -> Layout:
    """Apply ``fn(mode_i, tiler[i])`` to the first ``len(tiler)`` modes of ``a`` (a by-mode
    tiler, as composition, the divides and the products take it); other modes stay.
    ``head()`` renders the operation for an error message (default ``op(a, tiler)``)."""
    check_depth(tiler, "the tiler", op)
    shape = a.shape if type(a.shape) is tuple else (a.shape,)
    stride = a.stride if type(a.stride) is tuple else (a.stride,)
    n = len(tiler)
    if n > len(shape):
        what = head() if head else f"{op}({a}, {tiler})"
        raise error(
            f"{what}: the tiler has {n} modes but the layout only {len(shape)}; give at "
            "most one tiler entry per mode"
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
