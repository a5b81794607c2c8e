"""Normal forms the provers work on (private).

Every prover first turns its argument into a :class:`Form`: the inner :class:`Layout`, an
optional outer map (a :class:`Swizzle`, or a :class:`Layout` applied to the flat offset)
and the offset added in between, as in ``ComposedLayout`` (``outer(offset + inner(c))``).
The form exposes the layout's top-level modes flattened to ``(extent, stride)`` pairs,
its symbols, and a canonical key for the verdict cache.

:meth:`Form.instantiate` evaluates a symbolic form at concrete symbol values through
precompiled closures (no sympy in the loop) and gives a :class:`Concrete` form, which the
exact static checks of :mod:`tylo.layouts.proofs.static` run on.

Simplification (drop extent-1 modes, merge ``s0:d0, s1:d1`` when ``d1 == s0*d0`` is a
decided identity) is the layouts package's own :func:`~tylo.layouts.algebra.coalesce`.
"""

from __future__ import annotations

import reprlib
from collections.abc import Iterable, Mapping
from functools import cached_property
from typing import Any

from tylo.layouts._lazy import is_sympy, sympy
from tylo.layouts.algebra import coalesce
from tylo.layouts.inttuple import flatten_tuple
from tylo.layouts.layout import Layout
from tylo.layouts.proofs.errors import ProofArgumentError
from tylo.layouts.proofs.obligation import compile_expr
from tylo.layouts.swizzle import ComposedLayout, Swizzle

__all__ = [
    "Concrete",
    "Form",
    "Pairs",
    "simplify",
    "swizzle_bits",
    "swizzle_block_bits",
    "to_form",
]

Value = Any  # int | sympy.Expr
Pairs = tuple[tuple[Value, Value], ...]
Source = Layout | ComposedLayout  # what a Form is made from (and replays on)


def _symbols_of(values: Iterable[Value]) -> frozenset[sympy.Symbol]:
    out: set[sympy.Symbol] = set()
    for x in values:
        if is_sympy(x):
            out |= x.free_symbols
    return frozenset(out)


class Form:
    """A layout (or composed layout) as the provers see it.

    ``modes[k]`` is top-level mode ``k`` flattened to ``(extent, stride)`` pairs; ``flat``
    is every pair in colexicographic order; ``outer`` is None, a Swizzle or a Layout;
    ``offset`` is added before ``outer``.
    """

    __slots__ = ("__dict__", "inner", "offset", "outer", "source")

    def __init__(self, inner: Layout, outer: Any = None, offset: Value = 0, source: Any = None):
        if isinstance(outer, Swizzle) and outer.bits == 0:
            outer = None  # S<0,m,s> is the identity
        self.inner = inner
        self.outer = outer
        self.offset = offset
        self.source = inner if source is None else source

    @cached_property
    def modes(self) -> tuple[Pairs, ...]:
        shape, stride = self.inner.shape, self.inner.stride
        if type(shape) is not tuple:
            return (((shape, stride),),)
        return tuple(tuple(zip(flatten_tuple(s), flatten_tuple(d))) for s, d in zip(shape, stride))

    @cached_property
    def flat(self) -> Pairs:
        fs, fd = self.inner.flat()
        return tuple(zip(fs, fd))

    @property
    def rank(self) -> int:
        return len(self.modes)

    @cached_property
    def outer_flat(self) -> Pairs | None:
        if isinstance(self.outer, Layout):
            fs, fd = self.outer.flat()
            return tuple(zip(fs, fd))
        return None

    @cached_property
    def symbols(self) -> frozenset[sympy.Symbol]:
        vals = [v for p in self.flat for v in p] + [self.offset]
        if self.outer_flat is not None:
            vals += [v for p in self.outer_flat for v in p]
        return _symbols_of(vals)

    @property
    def is_static(self) -> bool:
        return not self.symbols

    @cached_property
    def key(self) -> tuple[object, ...]:
        outer = self.outer
        okey: tuple[object, ...] | None = None
        if isinstance(outer, Swizzle):
            okey = ("S", outer.bits, outer.base, outer.shift)
        elif outer is not None:
            okey = ("L", outer.shape, outer.stride)
        return (self.inner.shape, self.inner.stride, okey, self.offset)

    @cached_property
    def swizzle(self) -> tuple[int, int, int] | None:
        o = self.outer
        return (o.bits, o.base, o.shift) if isinstance(o, Swizzle) else None

    def __str__(self) -> str:
        return str(self.source)

    def __getstate__(self) -> tuple[None, dict[str, object]]:
        """The form without its compiled closures (rebuilt on first use): a verdict's
        guard keeps its forms, and must pickle."""
        state = {k: v for k, v in self.__dict__.items() if k != "_compiled"}
        slots = {k: getattr(self, k) for k in ("inner", "offset", "outer", "source")}
        return None, {**state, **slots}

    def __setstate__(self, state: tuple[None, dict[str, object]]) -> None:
        for k, v in state[1].items():
            if k in ("inner", "offset", "outer", "source"):
                object.__setattr__(self, k, v)
            else:
                self.__dict__[k] = v

    # -- concrete instances ------------------------------------------------------------

    @cached_property
    def _compiled(self) -> Any:
        flat = [(compile_expr(e), compile_expr(d)) for e, d in self.flat]
        outer = None
        if self.outer_flat is not None:
            outer = [(compile_expr(e), compile_expr(d)) for e, d in self.outer_flat]
        return flat, outer, compile_expr(self.offset)

    def instantiate(self, env: Mapping[Any, int]) -> Concrete:
        """The concrete form at ``env`` (``{symbol: int}``); raises ValueError when an
        extent is not a positive integer or a stride not an integer there."""
        if self.is_static:
            return self.static_concrete
        flat_c, outer_c, off_c = self._compiled
        flat = tuple((_int(e(env), True), _int(d(env), False)) for e, d in flat_c)
        outer = None
        if outer_c is not None:
            outer = tuple((_int(e(env), True), _int(d(env), False)) for e, d in outer_c)
        return Concrete(self, flat, self.swizzle, outer, _int(off_c(env), False))

    @cached_property
    def static_concrete(self) -> Concrete:
        return Concrete(self, self.flat, self.swizzle, self.outer_flat, self.offset)


def swizzle_bits(sw: Swizzle) -> tuple[int, int]:
    """``(low, high)``: a swizzle changes only bits ``low .. high-1`` of an offset (its
    destination bits, ``zzz_mask``), so it keeps residues modulo ``2^low`` and keeps every
    offset in its aligned block of ``2^high``. (Whether it moves aligned runs as blocks
    depends on its source bits too: :func:`swizzle_block_bits`.)

    >>> swizzle_bits(Swizzle(3, 3, 3)), swizzle_bits(Swizzle(2, 1, -3))
    ((3, 6), (4, 6))
    """
    z = sw.zzz_mask
    return (z & -z).bit_length() - 1, z.bit_length()


def swizzle_block_bits(sw: Swizzle) -> int:
    """``k`` such that a swizzle moves every aligned run of ``2^k`` offsets as a block, in
    order: below both its source bits (``yyy_mask``: every offset of the run gets the same
    XOR) and its destination bits (the XOR leaves the position in the run alone). With a
    positive shift that is the lowest destination bit; with a negative shift the source
    bits are the lower ones (``S<1,0,-1>`` maps offsets 0, 1 to 0, 3).

    >>> swizzle_block_bits(Swizzle(3, 3, 3)), swizzle_block_bits(Swizzle(2, 1, -3))
    (3, 1)
    """
    low = [(m & -m).bit_length() - 1 for m in (sw.yyy_mask, sw.zzz_mask) if m]
    return min(low) if low else 64


def _int(v: Any, positive: bool) -> int:
    if type(v) is not int:
        raise ValueError(f"not an integer: {v}")
    if positive and v < 1:
        raise ValueError(f"not a positive extent: {v}")
    return v


class Concrete:
    """A form with every value an int: ``flat`` pairs, ``swizzle`` ``(b, m, s)`` or None,
    ``outer`` flat pairs of an outer layout or None, and ``offset``."""

    __slots__ = ("flat", "form", "offset", "outer", "sizes", "swizzle")

    def __init__(self, form: Form, flat: Pairs, swizzle: Any, outer: Any, offset: int) -> None:
        self.form = form
        self.flat = flat
        self.swizzle = swizzle
        self.outer = outer
        self.offset = offset
        sizes = []
        k = 0
        for m in form.modes:
            n = 1
            for e, _ in flat[k : k + len(m)]:
                n *= e
            sizes.append(n)
            k += len(m)
        self.sizes = tuple(sizes)

    @property
    def size(self) -> int:
        n = 1
        for s in self.sizes:
            n *= s
        return n

    def mode_pairs(self, k: int) -> Pairs:
        """The flat pairs of top-level mode ``k``."""
        start = sum(len(m) for m in self.form.modes[:k])
        return self.flat[start : start + len(self.form.modes[k])]

    def mode_range(self, k: int) -> tuple[int, int]:
        """Flat positions ``[start, stop)`` of top-level mode ``k``."""
        start = sum(len(m) for m in self.form.modes[:k])
        return start, start + len(self.form.modes[k])

    @property
    def plain(self) -> bool:
        """True when there is no outer map (offsets are ``offset + inner``)."""
        return self.swizzle is None and self.outer is None

    def apply_outer(self, x: int) -> int:
        """``outer(x)`` on one int (``x`` already includes the offset)."""
        if self.swizzle is not None:
            return int(self.form.outer(x))
        if self.outer is not None:
            r = 0
            n = len(self.outer)
            for i, (e, d) in enumerate(self.outer):
                if i == n - 1:
                    return int(r + x * d)
                r += (x % e) * d
                x //= e
        return x

    def flat_coords(self, index: int) -> list[int]:
        """The flat coordinate of a 1-D (colexicographic) index."""
        out = []
        for e, _ in self.flat:
            out.append(index % e)
            index //= e
        return out

    def index_of(self, flat_coords: list[int]) -> int:
        """The 1-D index of a flat coordinate."""
        i, w = 0, 1
        for c, (e, _) in zip(flat_coords, self.flat):
            i += c * w
            w *= e
        return i

    def coordinate(self, index: int) -> Any:
        """The natural (nested, per the layout's shape) coordinate of a 1-D index."""
        it = iter(self.flat_coords(index))
        return _nest(self.form.inner.shape, it)

    def inner_offset(self, index: int) -> int:
        return sum(c * d for c, (_, d) in zip(self.flat_coords(index), self.flat))

    def offset_of(self, index: int) -> int:
        """The layout's value at a 1-D index (offset and outer map included)."""
        return self.apply_outer(self.offset + self.inner_offset(index))


def _nest(shape: Any, it: Any) -> Any:
    if type(shape) is tuple:
        return tuple(_nest(s, it) for s in shape)
    return next(it)


def simplify(pairs: Pairs) -> Pairs:
    """Drop extent-1 pairs and merge ``s0:d0, s1:d1`` when ``d1 == s0*d0`` is decided
    (the layouts package's coalesce); static or symbolic.

    >>> from tylo.layouts.symbolic import dim
    >>> M = dim("M")
    >>> simplify(((M, 1), (4, M))), simplify(((2, 1), (1, 7), (3, 2)))
    (((4*M, 1),), ((6, 1),))
    """
    if not pairs:
        return ()
    fs = tuple(e for e, _ in pairs)
    fd = tuple(d for _, d in pairs)
    lay = coalesce(Layout._make(fs, fd))
    out_s, out_d = lay.flat()
    return tuple((e, d) for e, d in zip(out_s, out_d) if not (type(e) is int and e == 1))


def to_form(obj: object, what: str) -> Form:
    """The :class:`Form` of a Layout, a ComposedLayout or an int ``n`` (``n:1``)."""
    if isinstance(obj, Form):
        return obj
    if isinstance(obj, Layout):
        return Form(obj)
    if isinstance(obj, ComposedLayout):
        return Form(obj.inner, obj.outer, obj.offset, source=obj)
    if type(obj) is int or isinstance(obj, sympy.Expr):
        return Form(Layout(obj))
    raise ProofArgumentError(
        f"{what}: expected a Layout or a ComposedLayout, got {reprlib.repr(obj)} "
        f"({type(obj).__name__}); "
        "build one with tylo.layouts.Layout(shape, stride) or composition(Swizzle(...), layout)"
    )
