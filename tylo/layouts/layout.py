"""The :class:`Layout`: a function from coordinates to offsets, ``shape:stride``.

A layout maps a coordinate ``c`` of its shape (or a flat index, split
colexicographically) to ``sum(c_i * stride_i)``. Extents and strides are static ints or
symbolic integers; evaluation at a symbolic index (a thread index, say) gives a sympy
expression. Layouts are immutable, hashable and compare structurally.
"""

from __future__ import annotations

import numbers
import reprlib
from collections.abc import Callable
from typing import Any, Protocol, TypeVar, overload

from tylo.layouts._depth import MAX_DEPTH, check_depth  # re-exported here
from tylo.layouts._lazy import is_sympy, sympy
from tylo.layouts._scope import Value
from tylo.layouts.errors import LayoutError, NotationError, ShapeError, UndecidableError
from tylo.layouts.inttuple import (
    IntTuple,
    crd2idx,
    depth_of,
    flatten_tuple,
    fmt,
    prefix_product,
    product,
    rank_of,
    vadd,
    vmul,
)
from tylo.layouts.symbolic import decide_cmp, divides, to_value, undecidable_cmp


class _Composed(Protocol):
    """A composed layout (:class:`tylo.layouts.swizzle.ComposedLayout`) as this module sees
    it: swizzle.py builds on this module, so this module names it without importing it."""

    @property
    def is_composed(self) -> bool: ...


_C = TypeVar("_C", bound=_Composed)

__all__ = [
    "Layout",
    "cosize",
    "depth",
    "flatten",
    "group_modes",
    "make_layout",
    "rank",
    "select",
    "size",
]


def _norm(t: Any, what: str, text: Any, depth: int = 0) -> Any:
    """Normalize a user-given shape or stride: lists become tuples, sympy Integers ints."""
    if type(t) is int:
        return t
    if isinstance(t, (tuple, list)):
        if not t:
            raise ShapeError(
                f"Layout: empty tuple in {what} {text}; every mode needs an extent "
                "(use 1 for a trivial mode)"
            )
        if depth >= MAX_DEPTH:
            raise ShapeError(
                f"Layout: the {what} nests deeper than {MAX_DEPTH} levels (tylo's limit, "
                "tylo.layouts.layout.MAX_DEPTH); flatten it"
            )
        return tuple(_norm(e, what, text, depth + 1) for e in t)
    if isinstance(t, bool):
        raise ShapeError(f"Layout: {what} {text} holds the bool {t}; give integers")
    if is_sympy(t):
        v = to_value(t)
        if type(v) is not int:
            bad = [s for s in v.free_symbols if not s.is_integer]
            if bad or not isinstance(v, sympy.Expr):
                raise ShapeError(
                    f"Layout: {what} {text} holds {v}, which is not an integer expression; "
                    "make symbols with tylo.layouts.dim('name') (positive integers)"
                )
        return v
    try:
        return to_value(t)
    except LayoutError:
        raise ShapeError(
            f"Layout: {what} {text} holds {t!r} ({type(t).__name__}); give ints, sympy "
            "integer expressions or (nested) tuples of them"
        ) from None


def _check_extents(shape: Any, text: str) -> None:
    for s in flatten_tuple(shape):
        if type(s) is int:
            if s < 1:
                raise ShapeError(
                    f"Layout: extent {s} in shape {text} is not positive; every extent must be >= 1"
                )
            continue
        integral = divides(1, s)
        if integral is False:
            raise ShapeError(f"Layout: extent {fmt(s)} in shape {text} is never an integer")
        if integral is None:
            raise UndecidableError(
                f"Layout: extent {fmt(s)} in shape {text} must be an integer, and that "
                "depends on the symbols' values: give the divisibility fact (e.g. "
                "dim('N', multiple_of=...)) or assume it: with assuming(divisible(...))",
                operation="Layout",
                condition=f"{fmt(s)} is an integer",
                hint="dim(name, multiple_of=...) or assuming(divisible(...))",
            )
        positive = decide_cmp(s, ">=", 1)
        if positive is False:
            raise ShapeError(
                f"Layout: extent {fmt(s)} in shape {text} is never positive; every extent "
                "must be >= 1"
            )
        if positive is None:
            raise undecidable_cmp("Layout", s, ">=", 1, f"an extent of shape {text}")


def _check_strides(stride: Any, text: str) -> None:
    for d in flatten_tuple(stride):
        if type(d) is not int and divides(1, d) is not True:
            raise ShapeError(
                f"Layout: stride {fmt(d)} in {text} is not known to be an integer; give "
                "integer strides (symbols from tylo.layouts.dim)"
            )


class Layout:
    """A layout ``shape:stride`` (CuTe). ``stride=None`` means compact column-major.

    >>> L = Layout((4, 8), (1, 4))
    >>> str(L), L(5), L(1, 1), L((1, 1)), repr(L)
    ('(4,8):(1,4)', 5, 5, 5, 'Layout(shape=(4, 8), stride=(1, 4))')
    >>> Layout((2, (2, 2)))
    Layout(shape=(2, (2, 2)), stride=(1, (2, 4)))
    """

    __slots__ = ("_flat", "_hash", "_modes", "_static", "shape", "stride")

    shape: IntTuple
    stride: IntTuple
    _flat: tuple[tuple[Value, ...], tuple[Value, ...]] | None
    _hash: int | None
    _static: bool | None
    _modes: tuple[tuple[tuple[Value, ...], tuple[Value, ...]], ...] | None

    def __init__(self, shape: Any, stride: Any = None) -> None:
        if type(shape) is not int:
            check_depth(shape, "the shape", "Layout")  # before fmt, which recurses
        if stride is not None and type(stride) is not int:
            check_depth(stride, "the stride", "Layout")
        text = fmt(shape) if not isinstance(shape, list) else str(shape)
        shape = _norm(shape, "shape", text)
        if stride is None:
            stride = prefix_product(shape)
        else:
            stride = _norm(stride, "stride", fmt(stride) if not isinstance(stride, list) else "")
            if not _congruent(shape, stride):
                raise ShapeError(
                    f"Layout: shape {fmt(shape)} and stride {fmt(stride)} are not congruent "
                    f"(ranks or nesting differ); give one stride per extent, nested alike"
                )
        self.shape = shape
        self.stride = stride
        self._flat = None
        self._hash = None
        self._static = None
        self._modes = None
        if not self.is_static:
            _check_extents(shape, fmt(shape))
            _check_strides(stride, str(self))
        else:
            for s in flatten_tuple(shape):
                if s < 1:
                    raise ShapeError(
                        f"Layout: extent {s} in shape {fmt(shape)} is not positive; every "
                        "extent must be >= 1"
                    )

    @classmethod
    def _make(cls, shape: Any, stride: Any) -> Layout:
        """Trusted constructor: no validation (results of the algebra)."""
        obj = object.__new__(cls)
        obj.shape = shape
        obj.stride = stride
        obj._flat = None
        obj._hash = None
        obj._static = None
        obj._modes = None
        return obj

    @classmethod
    def parse(cls, text: str, symbols: Any = None) -> Layout:
        """Parse CuTe notation ``"((2,2),8):((1,16),2)"`` (a bare shape means compact).

        Names become :func:`~tylo.layouts.symbolic.dim` symbols unless ``symbols`` (a
        mapping name -> symbol, or an iterable of symbols) supplies them.

        >>> Layout.parse("((2,2),8):((1,16),2)")
        Layout(shape=((2, 2), 8), stride=((1, 16), 2))
        """
        import re

        from tylo.layouts._notation import symbol_table

        if not isinstance(text, str):
            raise NotationError(f"Layout.parse: expected text, got {type(text).__name__}")
        if re.search(r"\s+o\s+|^\s*S<", text):
            kind = "ComposedLayout" if re.search(r"\s+o\s+", text) else "Swizzle"
            raise NotationError(
                f"Layout.parse({text!r}): this is a {kind}, not a Layout; use "
                "tylo.layouts.parse.parse for swizzles and composed layouts"
            )
        return cls._from_text(text, symbol_table(symbols))

    @classmethod
    def _from_text(cls, text: str, table: dict[str, sympy.Symbol]) -> Layout:
        """The plain layout that ``text`` spells (symbols from ``table``), or a
        NotationError naming the text; shared with :func:`tylo.layouts.parse.parse`."""
        from tylo.layouts._notation import read_layout

        shape, stride = read_layout(text, table)
        try:
            return Layout(shape, stride)
        except ShapeError as e:
            if isinstance(e, NotationError):
                raise
            raise NotationError(f"Layout.parse({text!r}): {e}") from None

    # -- structure ---------------------------------------------------------------------

    def flat(self) -> tuple[tuple[Value, ...], tuple[Value, ...]]:
        """The flattened (shape, stride) leaves, cached."""
        f = self._flat
        if f is None:
            f = self._flat = (flatten_tuple(self.shape), flatten_tuple(self.stride))
        return f

    @property
    def is_static(self) -> bool:
        """True when every extent and stride is a plain int."""
        s = self._static
        if s is None:
            fs, fd = self.flat()
            s = self._static = all(type(x) is int for x in fs) and all(type(x) is int for x in fd)
        return s

    @property
    def free_symbols(self) -> set[sympy.Symbol]:
        """The symbols in the shape and stride."""
        out: set[sympy.Symbol] = set()
        for x in self.flat()[0] + self.flat()[1]:
            if is_sympy(x):
                out |= x.free_symbols
        return out

    def __getitem__(self, i: int) -> Layout:
        """Mode ``i`` as a layout (mode 0 of a rank-1 scalar layout is itself)."""
        if type(self.shape) is tuple:
            return Layout._make(self.shape[i], self.stride[i])
        if i in (0, -1):
            return self
        raise IndexError(f"{self} has rank 1; mode {i} does not exist")

    def map_values(self, fn: Callable[[Value], Value]) -> Layout:
        """Apply ``fn`` to every extent and stride (used by ``substitute``)."""

        def m(t: Any) -> Any:
            return tuple(m(e) for e in t) if type(t) is tuple else fn(t)

        return Layout(m(self.shape), m(self.stride))

    # -- evaluation -------------------------------------------------------------------------

    def __call__(self, *args: Any) -> Any:
        """The offset of a coordinate: ``L(i)``, ``L(i, j)`` or ``L((i, (j, k)))``."""
        if len(args) == 1:
            crd = args[0]
            if type(crd) is int and self.is_static:
                fs, fd = self.flat()
                r = 0
                n = len(fs) - 1
                for k in range(n):
                    s = fs[k]
                    r += (crd % s) * fd[k]
                    crd //= s
                return r + crd * fd[n]
        elif not args:
            raise ShapeError(f"{self}: give a coordinate or an index to evaluate the layout")
        else:
            modes = self._modes
            if modes is None and self.is_static and type(self.shape) is tuple:
                modes = self._modes = tuple(
                    (flatten_tuple(s), flatten_tuple(d)) for s, d in zip(self.shape, self.stride)
                )
            if modes is not None and len(args) == len(modes):
                # static: each integer coordinate split over its mode's leaves, the last
                # unbounded (crd2idx's result, without its recursion)
                r = 0
                for crd, (fs, fd) in zip(args, modes):
                    if type(crd) is not int:
                        break
                    n = len(fs) - 1
                    for k in range(n):
                        s = fs[k]
                        r += (crd % s) * fd[k]
                        crd //= s
                    r += crd * fd[n]
                else:
                    return r
            crd = args
        if type(crd) is not tuple and type(crd) is not int:
            crd = to_value(crd)
        return crd2idx(crd, self.shape, self.stride)

    # -- identity and printing -------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if type(other) is not Layout:
            return NotImplemented
        return bool(self.shape == other.shape and self.stride == other.stride)

    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            h = self._hash = hash((Layout, self.shape, self.stride))
        return h

    def __str__(self) -> str:
        return f"{fmt(self.shape)}:{fmt(self.stride)}"

    def __repr__(self) -> str:
        return f"Layout(shape={self.shape!r}, stride={self.stride!r})"

    def _repr_svg_(self) -> str | None:
        """IPython's display hook: the picture of a static layout
        (``tylo.pictures.layout_svg``); None, so the text form shows, for a symbolic or too
        large layout or when ``tylo.pictures`` cannot be imported. Reached through the
        package root, so ``tylo.layouts`` never imports ``tylo.pictures``."""
        from tylo import _notebook_svg

        return _notebook_svg(self)

    def __reduce__(self) -> tuple[type[Layout], tuple[IntTuple, IntTuple]]:
        return (Layout, (self.shape, self.stride))


def _congruent(a: Any, b: Any) -> bool:
    if type(a) is tuple:
        return type(b) is tuple and len(a) == len(b) and all(map(_congruent, a, b))
    return type(b) is not tuple


def _as_layout(x: object, op: str) -> Any:
    """Accept a Layout (or ComposedLayout) or an int (meaning ``n:1``)."""
    if isinstance(x, Layout):
        return x
    if type(x) is int or is_sympy(x):
        try:
            return Layout(x)
        except LayoutError as e:
            raise e.within(f"{op}({reprlib.repr(x)})") from None
    if getattr(x, "is_composed", False):  # a ComposedLayout (tylo.layouts.swizzle)
        return x
    raise ShapeError(
        f"{op}: expected a Layout or an int, got {reprlib.repr(x)} ({type(x).__name__})"
    )


@overload
def make_layout(layout: _C, /) -> _C: ...
@overload
def make_layout(*args: Layout | IntTuple, stride: IntTuple = None) -> Layout: ...
def make_layout(
    *args: Layout | _Composed | IntTuple, stride: IntTuple = None
) -> Layout | _Composed:
    """Build a layout: from a shape (and optional stride), or by concatenating layouts as
    the modes of a new layout (ints count as ``n:1``).

    >>> str(make_layout((2, (2, 2)))), str(make_layout(Layout(4, 2), Layout(3, 8)))
    ('(2,(2,2)):(1,(2,4))', '(4,3):(2,8)')
    """
    if len(args) == 1 and not isinstance(args[0], Layout):
        if stride is None and getattr(args[0], "is_composed", False):
            return args[0]
        return Layout(args[0], stride)
    if (
        len(args) == 2
        and stride is None
        and not any(isinstance(a, Layout) for a in args)
        and (type(args[0]) is tuple or type(args[1]) is tuple)
    ):
        return Layout(args[0], args[1])
    if stride is not None:
        raise ShapeError("make_layout: stride= is only accepted together with a single shape")
    if not args:
        raise ShapeError("make_layout: give a shape or at least one layout")
    layouts: list[Layout | _Composed] = [_as_layout(a, "make_layout") for a in args]
    if len(layouts) == 1:
        return layouts[0]
    plain = [x for x in layouts if isinstance(x, Layout)]
    if len(plain) < len(layouts):
        composed = next(x for x in layouts if not isinstance(x, Layout))
        raise ShapeError(
            f"make_layout: {composed} is a composed layout; its outer function acts on the "
            "sum of all modes' offsets, so it cannot be one mode of a layout: concatenate the "
            "inner layouts and compose the result (composition(swizzle, make_layout(...)))"
        )
    return Layout._make(tuple(x.shape for x in plain), tuple(x.stride for x in plain))


def size(x: Any) -> Any:
    """The number of coordinates: the product of the extents.

    >>> size(Layout((4, (2, 3)))), size((4, 8))
    (24, 32)
    """
    if isinstance(x, Layout):
        fs = x.flat()[0]
        if x.is_static:
            r = 1
            for s in fs:
                r *= s
            return r
        return product(fs)
    shape = _checked_shape(x, "size")
    return product(shape)


def _checked_shape(x: Any, op: str) -> Any:
    """The shape of ``x`` (a layout, anything with a ``shape``, or a shape itself), checked
    to be a shape: positive ints or integer sympy expressions, nested in non-empty tuples
    at most MAX_DEPTH deep. Iterative, so hostile input cannot exhaust the stack."""
    shape = getattr(x, "shape", x)
    if type(shape) is int and shape >= 1:
        return shape
    stack = [(shape, 0)]
    while stack:
        e, d = stack.pop()
        if type(e) is tuple:
            if not e or d >= MAX_DEPTH:
                what = "an empty tuple" if not e else f"nesting deeper than {MAX_DEPTH} levels"
                raise ShapeError(
                    f"{op}: the shape holds {what}; give positive extents in non-empty tuples "
                    f"nested at most {MAX_DEPTH} deep (tylo.layouts.layout.MAX_DEPTH)"
                )
            stack.extend((c, d + 1) for c in e)
        elif isinstance(e, numbers.Integral) and not isinstance(e, bool):
            if e < 1:
                raise ShapeError(f"{op}: extent {e} is not positive; every extent must be >= 1")
        elif not isinstance(e, sympy.Expr):
            raise ShapeError(
                f"{op}: expected a layout or a shape (positive ints, sympy integers, nested "
                f"tuples), got {reprlib.repr(e)} ({type(e).__name__})"
            )
    return shape


def cosize(x: Any) -> Any:
    """One past the largest offset: ``1 + sum((s - 1) * max(d, 0))`` over the modes (for
    non-negative strides, ``L(size(L) - 1) + 1`` as in CuTe).

    >>> cosize(Layout((4, 8), (1, 4))), cosize(Layout((4, 8), (8, 1)))
    (32, 32)
    """
    if getattr(x, "is_composed", False):  # a ComposedLayout knows its own cosize
        return x.cosize()
    if not isinstance(x, Layout):
        x = _as_layout(x, "cosize")
    fs, fd = x.flat()
    if x.is_static:
        return 1 + sum((s - 1) * d for s, d in zip(fs, fd) if d > 0)
    r: Any = 1
    for s, d in zip(fs, fd):
        nonneg = decide_cmp(d, ">=", 0)
        if nonneg is None:
            raise undecidable_cmp("cosize", d, ">=", 0, f"a stride of {x}")
        if nonneg:
            r = vadd(r, vmul(vadd(s, -1), d))
    return r


def rank(x: Any) -> int:
    """The number of top-level modes.

    >>> rank(Layout((2, (3, 4)))), rank(Layout(8))
    (2, 1)
    """
    return rank_of(_checked_shape(x, "rank"))


def depth(x: Any) -> int:
    """The nesting depth of the shape (0 for a scalar extent).

    >>> depth(Layout((2, (3, 4)))), depth(Layout(8))
    (2, 0)
    """
    return depth_of(_checked_shape(x, "depth"))


def _split_composed(x: Any, op: str) -> tuple[Any, Layout]:
    """(wrap, layout): a ComposedLayout's inner layout and a function that puts a result
    back under its outer function and offset; ints mean ``n:1``."""
    if getattr(x, "is_composed", False):  # a ComposedLayout: results go back under it
        return x.with_inner, x.inner
    if isinstance(x, Layout):
        return (lambda r: r), x
    if type(x) is int or isinstance(x, sympy.Expr):
        return (lambda r: r), Layout(x)
    raise ShapeError(
        f"{op}: expected a Layout, a ComposedLayout or an int, got {reprlib.repr(x)} "
        f"({type(x).__name__})"
    )


def _mode_index(i: Any, n: int, op: str, x: Any) -> int:
    if type(i) is not int:
        raise ShapeError(f"{op}({x}, ...): mode index {reprlib.repr(i)} is not an int")
    if not -n <= i < n:
        raise ShapeError(f"{op}({x}, ...): mode index {i} is out of range for rank {n}")
    return i


def flatten(x: Any) -> Any:
    """The same function with every nested mode made a top-level mode: ``flatten(L)(i)
    == L(i)`` for every index, and ``depth(flatten(L)) <= 1``. A composed layout keeps its
    outer function and offset and flattens its inner layout.

    >>> str(flatten(Layout(((2, 2), 8), ((1, 16), 2))))
    '(2,2,8):(1,16,2)'
    """
    wrap, x = _split_composed(x, "flatten")
    if type(x.shape) is not tuple:
        return wrap(x)
    fs, fd = x.flat()
    return wrap(Layout._make(fs, fd))


def select(x: Any, *modes: Any) -> Any:
    """The layout made of the chosen top-level modes, in the given order: mode k of the
    result is mode ``modes[k]`` of ``x`` (negative indices count from the end). A composed
    layout keeps its outer function and offset.

    >>> str(select(Layout((2, 3, 5, 7), (1, 2, 6, 30)), 1, 3))
    '(3,7):(2,30)'
    """
    wrap, x = _split_composed(x, "select")
    if len(modes) == 1 and type(modes[0]) is tuple:
        modes = modes[0]
    if not modes:
        raise ShapeError(f"select({x}): give at least one mode index")
    if type(x.shape) is not tuple:
        x = Layout._make((x.shape,), (x.stride,))
    n = len(x.shape)
    idx = [_mode_index(i, n, "select", x) for i in modes]
    shape = tuple(x.shape[i] for i in idx)
    stride = tuple(x.stride[i] for i in idx)
    return wrap(Layout._make(shape, stride))


def group_modes(x: Any, begin: int, end: int | None = None) -> Any:
    """Group top-level modes ``[begin, end)`` into one nested mode: the same function,
    ``group_modes(L, b, e)(i) == L(i)``, with rank ``rank(L) - (e - b) + 1``. Needs
    ``0 <= begin < end <= rank``. A composed layout keeps its outer function and offset.

    >>> L = Layout((4, 5, 6), (1, 4, 20))
    >>> str(group_modes(L, 0, 2)), str(group_modes(L, 1, 3))
    ('((4,5),6):((1,4),20)', '(4,(5,6)):(1,(4,20))')
    """
    wrap, x = _split_composed(x, "group_modes")
    shape = x.shape if type(x.shape) is tuple else (x.shape,)
    stride = x.stride if type(x.stride) is tuple else (x.stride,)
    n = len(shape)
    end = n if end is None else end
    if type(begin) is not int or type(end) is not int or not (0 <= begin < end <= n):
        raise ShapeError(
            f"group_modes({x}, {reprlib.repr(begin)}, {reprlib.repr(end)}): needs ints "
            f"0 <= begin < end <= {n} (the rank); an empty group would be an empty mode, "
            "which no layout has"
        )
    if depth_of(shape[begin:end]) >= MAX_DEPTH:
        raise ShapeError(
            f"group_modes({x}, {begin}, {end}): the result would nest deeper than {MAX_DEPTH} "
            "levels (tylo's limit, tylo.layouts.layout.MAX_DEPTH)"
        )
    return wrap(
        Layout._make(
            shape[:begin] + (shape[begin:end],) + shape[end:],
            stride[:begin] + (stride[begin:end],) + stride[end:],
        )
    )
