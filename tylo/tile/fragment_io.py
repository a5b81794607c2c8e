"""Loads and stores of fragments by ownership, in vectors, with bounds.

A thread's fragment is a set of coordinates (its :class:`~tylo.tile.ownership.Ownership`);
moving it between registers and memory is one access per coordinate, or, when the
ownership places ``vector`` consecutive slots on consecutive elements of one axis, one
vector access per group of slots (``ld.global.v4.f32``: 16 bytes at once).

- :func:`load_fragment` reads what the calling thread owns. Every access is issued
  unconditionally, so all of a thread's loads are in flight before any value is used:
  an element past ``bounds`` is read from a clamped, in-bounds address and replaced by
  ``fill`` (a select, no branch); along a ``clamp`` axis it is not replaced at all (it
  reads the last element there, for rows whose results are discarded anyway).
- :func:`store_fragment` writes a fragment by its ownership; a group of slots past
  ``bounds`` is skipped (the group is stored under one condition).
- :func:`coordinates` is each slot's coordinate along one axis, as index values: the
  operand of masks (``coordinates(own, tid, 1, origin=o) < lengths``) and iotas.

Bounds are checked only where the facts in force do not settle them
(:func:`tylo.assume`): a kernel that states ``cols >= 1024`` for a 1024-column tile
gets no column checks at all. A vector group is checked by its first element, so along
the vector's axis the extent and the group's start must be provably multiples of the
vector (``tylo.assume(tylo.divisible(cols, 4))``); otherwise the trace fails saying so.
Accesses of more than 16 bytes are split into 16-byte pieces, and vectors of fewer than
4 bytes (two bf16, four bools) are moved element by element.

Sources and destinations are kernel tensors seen through a layout (``tylo.view(ptr,
Layout((rows, cols), (ld, 1)))``), pointer parameters (1-D ownerships), or
:class:`~tylo.tile.access.GlobalTile` / :class:`~tylo.tile.access.SharedTile` views.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from tylo import dtypes as dt
from tylo.layouts._lazy import sympy
from tylo.tile.access import TileError
from tylo.tile.ownership import Ownership

__all__ = ["coordinates", "load_fragment", "store_fragment", "vector_axis"]

_MAX_VECTOR_BYTES = 16  # the widest ld/st (PTX ISA 9.7.9.8 ld, .v4 of 32-bit elements)
_MIN_VECTOR_BYTES = 4


def vector_axis(ownership: Ownership, vector: int, *, what: str = "vector_axis") -> int | None:
    """The axis along which every group of ``vector`` consecutive slots of ``ownership``
    holds consecutive elements (None for ``vector == 1``); raises :class:`TileError` when
    the groups are not such runs.

    >>> own = Ownership.from_modes((2, 16), [(4, 1, 4), (2, 0, 1)], [(4, 1, 1)])
    >>> vector_axis(own, 4), vector_axis(own, 2)
    (1, 1)
    """
    if not isinstance(ownership, Ownership):
        raise TileError(f"{what}: expected an Ownership, got {ownership!r}")
    if type(vector) is not int or vector < 1 or ownership.values % vector:
        raise TileError(
            f"{what}: vector must be a positive int dividing the {ownership.values} slots per "
            f"thread of {ownership.label}, got {vector!r}"
        )
    axis = None
    for g in range(0, ownership.values, vector):
        base = ownership.value_coord(g)
        for j in range(1, vector):
            step = [c - b for c, b in zip(ownership.value_coord(g + j), base)]
            moving = [a for a, d in enumerate(step) if d]
            if len(moving) != 1 or step[moving[0]] != j or axis not in (None, moving[0]):
                raise TileError(
                    f"{what}: slots {g}..{g + vector - 1} of {ownership.label} are not "
                    f"{vector} consecutive elements along one axis (slot {g + j} is at "
                    f"offset {tuple(step)} from slot {g}); use a smaller vector"
                )
            axis = moving[0]
    return axis


class _Access:
    """Coordinate-addressed vector access to a kernel tensor or a tile."""

    def __init__(self, mem: Any, rank: int, what: str) -> None:
        from tylo.kernel.memory import Tensor
        from tylo.tile.access import GlobalTile, SharedTile

        self.what = what
        if isinstance(mem, (GlobalTile, SharedTile)):
            if mem.rank != rank:
                raise TileError(f"{what}: a {rank}-D ownership and the {mem.rank}-D tile {mem!r}")
            self.tile = mem
            self.flat = Tensor(  # the storage's array: accesses are judged against it
                mem.dtype,
                mem.storage.base,
                addrspace=mem.storage.addrspace,
                align=mem.storage.align,
                name=mem.storage.name,
                param=mem.storage.param,
                extent=mem.storage.extent,
            )
        elif isinstance(mem, Tensor):
            have = 1 if mem.layout is None else _rank(mem.layout)
            if have != rank:
                raise TileError(
                    f"{what}: a {rank}-D ownership and {mem!r}, whose coordinates are "
                    f"{have}-D; view it with a {rank}-D layout (tylo.view)"
                )
            self.tile = None
            self.flat = mem
        else:
            raise TileError(
                f"{what}: expected a kernel tensor (a pointer parameter, tylo.view, "
                f"tylo.shared) or a GlobalTile/SharedTile, got {type(mem).__name__}"
            )
        self.dtype = mem.dtype

    def _stride(self, axis: int) -> Any:
        """The element stride along ``axis`` (None when it is not one flat stride)."""
        from tylo.layouts import ComposedLayout

        if self.tile is not None:
            layout, mode = self.tile.layout, self.tile.modes[axis]
        elif self.flat.layout is None:
            return 1
        else:
            layout, mode = self.flat.layout, axis
        if isinstance(layout, ComposedLayout):
            return None
        sub = layout[mode] if _rank(layout) > 1 else layout
        return None if type(sub.shape) is tuple else sub.stride

    def require_unit_stride(self, axis: int, vector: int) -> None:
        stride = self._stride(axis)
        if not (type(stride) is int and stride == 1):
            raise TileError(
                f"{self.what}: vectors of {vector} run along axis {axis}, but the memory's "
                f"element stride there is {stride if stride is not None else 'not one flat stride'}"
                "; vector accesses need stride 1 (use vector=1, or a layout contiguous there)"
            )

    def _at(self, coord: tuple) -> Any:
        if self.tile is not None:
            return _expr(self.tile.offset(coord))
        return coord[0] if self.flat.layout is None else coord

    def load(self, coord: tuple, n: int, cache: str | None) -> list:
        return list(_vector(self.flat.load(self._at(coord), vector=n, cache=cache), n))

    def store(self, coord: tuple, values: list, cache: str | None) -> None:
        self.flat.store(self._at(coord), values if len(values) > 1 else values[0], cache=cache)

    def pieces(self, vector: int) -> tuple[int, ...]:
        """Element counts of the accesses that move one group of ``vector`` elements."""
        nbytes = vector * self.dtype.nbytes
        if vector == 1 or nbytes < _MIN_VECTOR_BYTES:
            return (1,) * vector
        piece = min(vector, _MAX_VECTOR_BYTES // self.dtype.nbytes)
        return (piece,) * (vector // piece)


def _vector(x: Any, n: int) -> tuple:
    return tuple(x) if n > 1 else (x,)


def _rank(layout: Any) -> int:
    return len(layout.shape) if type(layout.shape) is tuple else 1


def _expr(x: Any) -> Any:
    return sympy.Integer(x) if isinstance(x, int) else x


def _floor_div(a: Any, n: int) -> Any:
    """``floor(a / n)``, an integer expression (a sympy ``floor`` for a symbolic ``a``)."""
    return a // n if isinstance(a, int) else sympy.floor(_expr(a) / n)


def _plus(a: Any, b: Any) -> Any:
    """``a + b`` that leaves ``a`` (maybe a runtime Value) untouched when ``b`` is 0."""
    if isinstance(b, int) and b == 0:
        return a
    if isinstance(a, int) and a == 0:
        return b
    return a + b


def _start(ownership: Ownership, tid: Any, origin: Sequence[Any] | None, what: str) -> list:
    from tylo.kernel.context import require_threads

    require_threads(ownership.threads, ownership.label)  # the block must hold its threads
    tc = ownership.thread_coord(tid)
    if origin is None:
        return list(tc)
    origin = tuple(origin)
    if len(origin) != ownership.rank:
        raise TileError(f"{what}: origin {origin} has rank != {ownership.rank}")
    return [_plus(o, c) for o, c in zip(origin, tc)]


def _bounds(bounds: Sequence[Any] | None, rank: int, what: str) -> tuple:
    if bounds is None:
        return (None,) * rank
    bounds = tuple(bounds)
    if len(bounds) != rank:
        raise TileError(f"{what}: bounds {bounds} has rank != {rank}")
    return bounds


def _index(x: Any) -> Any:
    """An index expression for ``x`` (a runtime integer Value becomes a bound symbol)."""
    from tylo.kernel.values import Value, to_index

    return to_index(x) if isinstance(x, Value) else _expr(x)


def _inside(coord: Any, bound: Any) -> Any:
    """``coord < bound``: True/False when the facts settle it, else the relation."""
    from tylo.kernel import facts

    rel = sympy.Lt(_index(coord), _index(bound))
    decided = facts.decide(rel)
    return rel if decided is None else decided


def _check_vector_bound(coord: Any, bound: Any, vector: int, axis: int, what: str) -> None:
    """A vector group is checked by its first element: exact when the bound and the
    group's start are multiples of the vector."""
    from tylo.kernel import facts

    for x, name in ((bound, "the extent"), (coord, "the group's start")):
        if facts.divides(vector, _index(x)) is not True:
            raise TileError(
                f"{what}: vectors of {vector} along axis {axis} are checked against the bound "
                f"{bound} by their first element, but {name} ({x}) is not provably a multiple "
                f"of {vector}; state it (tylo.assume(tylo.divisible({bound}, {vector}))) or use "
                "a smaller vector"
            )


def _conjunction(conds: list) -> Any:
    if not conds:
        return True
    if len(conds) == 1:
        return conds[0]
    from tylo.kernel.control import all_of

    return all_of(*conds)


def load_fragment(
    src: Any,
    ownership: Ownership,
    tid: Any,
    *,
    origin: Sequence[Any] | None = None,
    bounds: Sequence[Any] | None = None,
    clamp: Sequence[int] = (),
    vector: int = 1,
    fill: Any = 0.0,
    dtype: Any = None,
    cache: str | None = None,
    overread: bool = False,
    keep: Any = None,
) -> Any:
    """The fragment of ``ownership`` that thread ``tid`` reads from ``src``.

    Slot ``v`` is the element at ``origin + ownership.coord(tid, v)`` (``origin``
    defaults to the zero coordinate), converted to ``dtype`` when given. ``vector``
    consecutive slots move as one access (:func:`vector_axis` says along which axis;
    the memory's stride there must be 1). With ``bounds`` (an extent per axis, None for
    no check), elements at or past the extent read as ``fill`` (converted like the
    values), except along the axes in ``clamp``, where the coordinate is clamped to the
    last element and nothing is replaced. Every access is made, from an in-bounds
    address, so no load waits for a branch; checks the facts settle are not emitted.

    ``cache`` is a PTX cache qualifier of global loads ('nc', 'cs', 'L1::no_allocate').
    ``overread=True`` says the memory past ``bounds`` may be read (a staging buffer as
    large as the tile): elements there still read as ``fill``, but from their own
    address, which saves the clamping arithmetic. ``keep`` (a bool fragment of
    ``ownership``, or of a reduced ownership that broadcasts to it) masks the values:
    slots where it is False read as ``fill`` too (the load is still made), under the
    same select as the bounds.
    """
    from tylo.kernel.mathfn import minimum, where
    from tylo.tile.fragment import Fragment

    what = "load_fragment"
    axis = vector_axis(ownership, vector, what=what)
    rank = ownership.rank
    access = _Access(src, rank, what)
    bounds = _bounds(bounds, rank, what)
    clamp = tuple(clamp)
    for a in clamp:
        if type(a) is not int or not 0 <= a < rank or bounds[a] is None:
            raise TileError(f"{what}: clamp axis {a!r} has no bound (bounds={bounds})")
        if a == axis:
            raise TileError(
                f"{what}: axis {a} carries the vectors; it cannot be clamped (its elements "
                "past the bound read as fill)"
            )
    if axis is not None:
        access.require_unit_stride(axis, vector)
    out = dt.dtype_of(dtype) if dtype is not None else access.dtype
    start = _start(ownership, tid, origin, what)
    mask = _keep(keep, ownership, what)
    values: list[Any] = []
    for g in range(0, ownership.values, vector):
        coord = [_plus(s, c) for s, c in zip(start, ownership.value_coord(g))]
        at = list(coord)
        conds: list[Any] = []  # the bounds the facts do not settle
        for a, n in enumerate(bounds):
            if n is None:
                continue
            inside = _inside(coord[a], n)
            if inside is True:
                continue
            if a in clamp:
                at[a] = minimum(coord[a], n - 1)
                continue
            conds.append(inside)
            if a == axis:
                _check_vector_bound(coord[a], n, vector, a, what)
                if not overread:
                    last = _floor_div(n, vector) - 1  # the last whole vector
                    at[a] = vector * minimum(_floor_div(coord[a], vector), last)
            elif not overread:
                at[a] = minimum(coord[a], n - 1)
        if any(c is False for c in conds):  # outside for certain: no access
            values += [_convert_fill(fill, out)] * vector
            continue
        for p, n in _offsets(access.pieces(vector)):
            piece_at = tuple(_plus(c, p) if a == axis else c for a, c in enumerate(at))
            for v in access.load(piece_at, n, cache):
                v = v.to(out) if v.dtype is not out else v
                ok = _conjunction(conds + ([] if mask is None else [mask[len(values)]]))
                values.append(v if ok is True else where(ok, v, fill))
    return Fragment(values, ownership)


def _keep(keep: Any, ownership: Ownership, what: str) -> list | None:
    """The mask's value for every slot of ``ownership`` (None: no mask)."""
    from tylo.tile.fragment import Fragment
    from tylo.tile.ownership import OwnershipError, broadcast_map

    if keep is None:
        return None
    if not isinstance(keep, Fragment):
        raise TileError(f"{what}: keep must be a bool Fragment, got {type(keep).__name__}")
    try:
        slots = broadcast_map(ownership, keep.ownership)
    except OwnershipError as err:
        raise TileError(f"{what}: the keep mask does not fit the ownership: {err}") from None
    return [keep.values[i] for i in slots]


def _convert_fill(fill: Any, dtype: Any) -> Any:
    from tylo.kernel.values import as_value

    return as_value(fill, dtype)


def _offsets(pieces: tuple[int, ...]) -> list[tuple[int, int]]:
    out, p = [], 0
    for n in pieces:
        out.append((p, n))
        p += n
    return out


def store_fragment(
    dst: Any,
    fragment: Any,
    tid: Any,
    *,
    origin: Sequence[Any] | None = None,
    bounds: Sequence[Any] | None = None,
    vector: int = 1,
    cache: str | None = None,
) -> None:
    """Store ``fragment`` by its ownership into ``dst``: thread ``tid`` writes slot ``v``
    at ``origin + ownership.coord(tid, v)``, converted to ``dst``'s dtype, ``vector``
    slots per access (pieces of at most 16 bytes; see :func:`load_fragment`). With
    ``bounds``, a group of slots at or past an extent is not stored (one condition per
    group; the facts may settle it). ``cache`` is a PTX cache qualifier of global stores
    ('cs', 'wt', 'L1::no_allocate')."""
    from tylo.kernel.values import convert
    from tylo.tile.fragment import Fragment

    what = "store_fragment"
    if not isinstance(fragment, Fragment):
        raise TileError(f"{what}: expected a Fragment, got {type(fragment).__name__}")
    if fragment.packed is not None:
        fragment = fragment.unpack()
    own = fragment.ownership
    access = _Access(dst, own.rank, what)
    axis = vector_axis(own, vector, what=what)
    if axis is not None:
        access.require_unit_stride(axis, vector)
    bounds = _bounds(bounds, own.rank, what)
    d = access.dtype
    start = _start(own, tid, origin, what)
    for g in range(0, own.values, vector):
        coord = [_plus(s, c) for s, c in zip(start, own.value_coord(g))]
        vals = [_as_value(fragment.values[g + j], d, convert) for j in range(vector)]
        conds = []
        for a, n in enumerate(bounds):
            if n is None:
                continue
            inside = _inside(coord[a], n)
            if inside is not True:
                if a == axis:
                    _check_vector_bound(coord[a], n, vector, a, what)
                conds.append(inside)
        if any(c is False for c in conds):  # outside for certain: nothing to store
            continue
        stores = [
            (tuple(_plus(c, p) if a == axis else c for a, c in enumerate(coord)), vals[p : p + n])
            for p, n in _offsets(access.pieces(vector))
        ]
        _guarded()(_conjunction(conds), functools.partial(_store_all, access, stores, cache))


def _as_value(v: Any, d: Any, convert: Callable[..., Any]) -> Any:
    from tylo.kernel.values import Value, as_value

    if not isinstance(v, Value):
        return as_value(v, d)
    return v if v.dtype is d else convert(v, d)


def _store_all(access: _Access, stores: list, cache: str | None) -> None:
    for coord, vals in stores:
        access.store(coord, vals, cache)


def _when(cond: Any, emit: Callable[[], None]) -> None:
    if cond:
        emit()


@functools.cache
def _guarded() -> Callable[[Any, Callable[[], None]], None]:
    """:func:`_when` with its ``if`` rewritten by the tracer (a runtime branch when the
    condition is a runtime relation; made on first use: the tracer imports this module's
    neighbours)."""
    from tylo.kernel.decorator import inline

    return inline(_when)


def coordinates(
    ownership: Ownership, tid: Any, axis: int, *, origin: Sequence[Any] | None = None
) -> Any:
    """The coordinate along ``axis`` of every slot thread ``tid`` holds (plus ``origin``),
    as a fragment of ``ownership`` whose values are index values: compare it to build
    masks (``tylo.where(coordinates(own, tid, 1) < n, f, 0.0)``)."""
    from tylo.kernel.values import as_value
    from tylo.tile.fragment import Fragment

    what = "coordinates"
    if not isinstance(ownership, Ownership):
        raise TileError(f"{what}: expected an Ownership, got {ownership!r}")
    if type(axis) is not int or not 0 <= axis < ownership.rank:
        raise TileError(f"{what}: axis {axis!r} out of range for the {ownership.rank}-D tile")
    start = _start(ownership, tid, origin, what)[axis]
    return Fragment(
        [as_value(_plus(start, ownership.value_coord(v)[axis])) for v in range(ownership.values)],
        ownership,
    )
