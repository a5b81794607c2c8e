"""Ownership: which thread holds which logical coordinates of a tile, in which value slot.

An :class:`Ownership` pairs a thread-value (TV) layout with the shape of the logical tile it
distributes. ``tv(thread, value)`` is the column-major index of the element that thread
``thread`` holds in value slot ``value`` (the convention of :mod:`tylo.layouts.tv`).
Elements may be held by several threads (replicated ownership, e.g. an MMA operand shared
by the warps of one row, or a reduced row replicated over the lanes of a quad).

Every analysis here (coordinates, transposition, reduction recipes, broadcasting) works on
the *axis modes* of the ownership: the flat modes of the TV layout, each refined so that it
moves along exactly one axis of the tile with a fixed step (or not at all: a stride-0,
replicated mode). :meth:`Ownership.modes` computes them; a layout whose modes cannot be
refined this way (a mode that wraps around an axis in a way no split can express) is
rejected with an :class:`OwnershipError`.

>>> from tylo.layouts.tv import MMA_M16N8K16_C_TV
>>> own = Ownership(MMA_M16N8K16_C_TV, (16, 8))
>>> own.threads, own.values, own.coords(5)
(32, 4, [(1, 2), (1, 3), (9, 2), (9, 3)])
>>> own.transpose().coords(5)
[(2, 1), (3, 1), (2, 9), (3, 9)]
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from tylo.errors import TyloError
from tylo.layouts import Layout, flatten, size
from tylo.layouts._lazy import sympy
from tylo.layouts.symbolic import to_value

__all__ = [
    "AxisMode",
    "Ownership",
    "OwnershipError",
    "broadcast_map",
    "fit_modes",
]


class OwnershipError(TyloError):
    """An ownership (thread-value layout over a tile) that tylo cannot use as asked."""


@dataclass(frozen=True)
class AxisMode:
    """One refined mode of an ownership: ``extent`` digits of the thread index (when
    ``thread``) or of the value index, each moving ``step`` along tile axis ``axis``
    (``axis`` is None for a replicated, stride-0 mode). ``radix`` is the digit's place
    value: the digit of index ``i`` is ``(i // radix) % extent``."""

    extent: int
    thread: bool
    axis: int | None
    step: int
    radix: int


def _prefix(shape: tuple[int, ...]) -> list[int]:
    out, p = [], 1
    for s in shape:
        out.append(p)
        p *= s
    return out


def _refine(extent: int, stride: int, shape: tuple[int, ...], what: str) -> list[tuple]:
    """Split one flat TV mode ``extent:stride`` (stride = a column-major tile index step)
    into ``(extent, axis, step)`` pieces, each moving along one tile axis only."""
    if stride == 0 or extent == 1:
        return [(extent, None, 0)]
    if stride < 0:
        raise OwnershipError(f"{what}: negative stride {stride} in an ownership layout")
    pre = _prefix(shape)
    # the axis this stride moves along: the largest axis whose place value divides it
    axis = max(a for a in range(len(shape)) if stride % pre[a] == 0)
    step = stride // pre[axis]
    if axis < len(shape) - 1 and step >= shape[axis]:
        raise OwnershipError(
            f"{what}: stride {stride} of an ownership mode does not move along one tile axis "
            f"of {shape} (step {step} >= extent {shape[axis]} of axis {axis})"
        )
    if axis == len(shape) - 1 or extent * step <= shape[axis]:
        return [(extent, axis, step)]
    # the mode wraps: keep the part that fits in this axis and move on to the next one
    if shape[axis] % step != 0:
        raise OwnershipError(
            f"{what}: an ownership mode {extent}:{stride} wraps around axis {axis} of {shape} "
            f"with step {step} not dividing the extent {shape[axis]}; split the mode"
        )
    fit = shape[axis] // step
    if extent % fit != 0:
        raise OwnershipError(
            f"{what}: an ownership mode {extent}:{stride} wraps around axis {axis} of {shape} "
            f"after {fit} steps, which does not divide its extent {extent}"
        )
    return [(fit, axis, step)] + _refine(extent // fit, stride * fit, shape, what)


@dataclass(frozen=True)
class Ownership:
    """A thread-value layout ``tv`` over a logical tile of static ``shape``.

    ``tv`` must be a static rank-2 layout ``(thread, value) -> column-major index``; every
    index must lie in the tile. ``name`` labels it in messages.
    """

    tv: Layout
    shape: tuple[int, ...]
    name: str = ""

    def __post_init__(self) -> None:
        shape = self.shape if isinstance(self.shape, tuple) else (self.shape,)
        shape = tuple(int(s) if isinstance(s, int) else s for s in shape)
        object.__setattr__(self, "shape", shape)
        if not isinstance(self.tv, Layout):
            raise OwnershipError(f"Ownership: tv must be a Layout, got {self.tv!r}")
        if not self.tv.is_static or not all(type(s) is int and s >= 1 for s in shape):
            raise OwnershipError(
                f"Ownership({self.tv}, {self.shape}): an ownership is static; its layout and "
                "tile shape must be plain ints"
            )
        if type(self.tv.shape) is not tuple or len(self.tv.shape) != 2:
            raise OwnershipError(f"Ownership: {self.tv} is not a (thread, value) layout of rank 2")
        n = 1
        for s in shape:
            n *= s
        fs, fd = flatten(self.tv).flat()
        reach = sum((s - 1) * d for s, d in zip(fs, fd) if d > 0)
        if reach >= n:
            raise OwnershipError(
                f"Ownership {self.label}: the layout reaches index {reach}, outside the tile "
                f"{shape} ({n} elements)"
            )
        _ = self.modes  # validate: every mode refines into axis moves

    # -- structure -------------------------------------------------------------------------

    @property
    def label(self) -> str:
        return self.name or f"{self.tv} over {self.shape}"

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def threads(self) -> int:
        """How many threads the ownership spans (the size of the thread mode)."""
        return size(self.tv[0])

    @property
    def values(self) -> int:
        """How many values each thread holds."""
        return size(self.tv[1])

    @functools.cached_property
    def modes(self) -> tuple[AxisMode, ...]:
        """The refined axis modes: thread modes first, then value modes, each in order."""
        out: list[AxisMode] = []
        for part, thread in ((self.tv[0], True), (self.tv[1], False)):
            fs, fd = (
                flatten(part).flat()
                if type(part.shape) is tuple
                else ((part.shape,), (part.stride,))
            )
            radix = 1
            for s, d in zip(fs, fd):
                for ext, axis, step in _refine(s, d, self.shape, self.label):
                    out.append(AxisMode(ext, thread, axis, step, radix))
                    radix *= ext
        return tuple(out)

    @property
    def thread_modes(self) -> tuple[AxisMode, ...]:
        return tuple(m for m in self.modes if m.thread)

    @property
    def value_modes(self) -> tuple[AxisMode, ...]:
        return tuple(m for m in self.modes if not m.thread)

    # -- queries ---------------------------------------------------------------------------

    def coord(self, thread: Any, value: int) -> tuple:
        """The tile coordinate held by ``thread`` (an int or an index expression) in value
        slot ``value`` (an int)."""
        t = self.thread_coord(thread)
        v = self.value_coord(value)
        return tuple(a + b for a, b in zip(t, v))

    def coords(self, thread: Any) -> list[tuple]:
        """Every coordinate ``thread`` holds, in value order."""
        t = self.thread_coord(thread)
        return [tuple(a + b for a, b in zip(t, self.value_coord(v))) for v in range(self.values)]

    def thread_coord(self, thread: Any) -> tuple:
        """The thread's part of its coordinates (value slot 0 is ``thread_coord(t) +
        value_coord(0)``; coordinates are additive in the two parts)."""
        if type(thread) is int:
            return self._digits_coord(thread, True)
        # a kernel asks for the same thread index expression again and again
        memo = self._thread_coords
        got = memo.get(thread)
        if got is None:
            got = memo[thread] = self._digits_coord(thread, True)
        return got

    @functools.cached_property
    def _thread_coords(self) -> dict[Any, tuple]:
        return {}

    def value_coord(self, value: int) -> tuple:
        """The value slot's offset added to every thread's coordinate."""
        if type(value) is not int or not 0 <= value < self.values:
            raise OwnershipError(
                f"{self.label}: value slot {value!r} out of range (0..{self.values - 1})"
            )
        return self._digits_coord(value, False)

    def _digits_coord(self, index: Any, thread: bool) -> tuple:
        out: list[Any] = [0] * self.rank
        modes = [m for m in self.modes if m.thread == thread]
        static = type(index) is int
        if not static:
            index = to_value(index)
            static = type(index) is int
        for k, m in enumerate(modes):
            if m.axis is None or m.extent == 1:
                continue
            last = k == len(modes) - 1
            if static:
                digit = index // m.radix if last else (index // m.radix) % m.extent
            else:
                q = sympy.floor(index / m.radix) if m.radix != 1 else index
                digit = q if last else sympy.Mod(q, m.extent)
            out[m.axis] = out[m.axis] + digit * m.step
        return tuple(out)

    def owners(self) -> dict[tuple, list[tuple[int, int]]]:
        """Every coordinate held, mapped to the ``(thread, value)`` pairs that hold it."""
        out: dict[tuple, list[tuple[int, int]]] = {}
        for t in range(self.threads):
            for v, c in enumerate(self.coords(t)):
                out.setdefault(c, []).append((t, v))
        return out

    def table(self) -> Any:
        """A numpy array ``[thread, value, axis]`` of every coordinate (static)."""
        import numpy as np

        t = np.arange(self.threads)
        v = np.arange(self.values)
        out = np.zeros((self.threads, self.values, self.rank), dtype=np.int64)
        for m in self.modes:
            if m.axis is None:
                continue
            idx = t if m.thread else v
            digit = (idx // m.radix) % m.extent
            if m.thread:
                out[:, :, m.axis] += (digit * m.step)[:, None]
            else:
                out[:, :, m.axis] += (digit * m.step)[None, :]
        return out

    @property
    def covers_once(self) -> bool:
        """True when every tile coordinate is held by exactly one (thread, value)."""
        own = self.owners()
        n = 1
        for s in self.shape:
            n *= s
        return len(own) == n and all(len(x) == 1 for x in own.values())

    # -- construction ----------------------------------------------------------------------

    @classmethod
    def from_modes(
        cls,
        shape: tuple[int, ...],
        thread_modes: list[tuple[int, int | None, int]],
        value_modes: list[tuple[int, int | None, int]],
        name: str = "",
    ) -> Ownership:
        """Build an ownership from ``(extent, axis, step)`` modes (axis None: replicated).

        >>> own = Ownership.from_modes((4, 2), [(4, 0, 1)], [(2, 1, 1)])
        >>> str(own.tv), own.coords(3)
        ('(4,2):(1,4)', [(3, 0), (3, 1)])
        """
        pre = _prefix(tuple(shape))

        def enc(modes: list[tuple[int, int | None, int]]) -> tuple[tuple, tuple]:
            if not modes:
                return (1,), (0,)
            es = tuple(e for e, _, _ in modes)
            ds = tuple(0 if a is None else s * pre[a] for _, a, s in modes)
            return (es, ds) if len(es) > 1 else (es[0], ds[0])

        ts, td = enc(thread_modes)
        vs, vd = enc(value_modes)
        return cls(Layout((ts, vs), (td, vd)), tuple(shape), name)

    def _as_mode_lists(self) -> tuple[list, list]:
        th = [(m.extent, m.axis, m.step) for m in self.thread_modes]
        va = [(m.extent, m.axis, m.step) for m in self.value_modes]
        return th, va

    def tiled(
        self,
        shape: tuple[int, ...],
        threads: list[tuple[int, int | None, int]] = (),  # type: ignore[assignment]
        values: list[tuple[int, int | None, int]] = (),  # type: ignore[assignment]
        name: str = "",
    ) -> Ownership:
        """This ownership placed in a larger tile ``shape``, with more thread modes
        (appended after the existing ones: e.g. warps) and value modes (repetitions).

        >>> from tylo.layouts.tv import MMA_M16N8K16_C_TV
        >>> c = Ownership(MMA_M16N8K16_C_TV, (16, 8))
        >>> big = c.tiled((32, 8), threads=[(2, 0, 16)])
        >>> big.threads, big.coords(37)[0]
        (64, (17, 2))
        """
        if len(shape) != self.rank:
            raise OwnershipError(f"{self.label}.tiled: shape {shape} has rank != {self.rank}")
        th, va = self._as_mode_lists()
        return Ownership.from_modes(tuple(shape), th + list(threads), va + list(values), name)

    def transpose(self, axes: tuple[int, ...] | None = None) -> Ownership:
        """The same values seen through permuted tile axes (default: reversed). The
        coordinate ``c`` becomes ``tuple(c[a] for a in axes)``."""
        axes = tuple(reversed(range(self.rank))) if axes is None else tuple(axes)
        if sorted(axes) != list(range(self.rank)):
            raise OwnershipError(f"{self.label}.transpose: {axes} is not a permutation")
        where = {a: i for i, a in enumerate(axes)}
        th, va = self._as_mode_lists()

        def fix(ms: list[tuple[int, int | None, int]]) -> list[tuple[int, int | None, int]]:
            return [(e, None if a is None else where[a], s) for e, a, s in ms]

        shape = tuple(self.shape[a] for a in axes)
        return Ownership.from_modes(shape, fix(th), fix(va), self.name and self.name + ".T")

    def reduced(self, axis: int) -> Ownership:
        """The ownership of a reduction along ``axis``: the tile keeps rank with extent 1
        there; thread modes along ``axis`` become replicated and value modes along it
        disappear (their values were combined)."""
        if not 0 <= axis < self.rank:
            raise OwnershipError(f"{self.label}: axis {axis} out of range for rank {self.rank}")
        th, va = self._as_mode_lists()
        th = [(e, None if a == axis else a, 0 if a == axis else s) for e, a, s in th]
        va = [m for m in va if m[1] != axis]
        shape = tuple(1 if a == axis else s for a, s in enumerate(self.shape))
        return Ownership.from_modes(shape, th, va, self.name and f"{self.name}.reduced({axis})")

    def __str__(self) -> str:
        return f"Ownership({self.tv} over {self.shape})"

    def _repr_svg_(self) -> str | None:
        """The picture Jupyter shows (:func:`tylo.pictures.repr_svg`)."""
        from tylo.pictures import repr_svg  # lazy: pictures are drawn on demand

        return repr_svg(self)


@functools.lru_cache(maxsize=256)
def broadcast_map(big: Ownership, small: Ownership) -> tuple[int, ...]:
    """For each value slot of ``big``, the slot of ``small`` that holds the same coordinate
    (projected onto ``small``'s extent-1 axes) in every thread. Raises when ownerships are
    not compatible (different threads, or some thread does not hold what it needs).

    >>> from tylo.layouts.tv import MMA_M16N8K16_C_TV
    >>> c = Ownership(MMA_M16N8K16_C_TV, (16, 8))
    >>> broadcast_map(c, c.reduced(1))
    (0, 0, 1, 1)
    """
    if big == small:
        return tuple(range(big.values))
    if big.rank != small.rank or any(s not in (1, b) for b, s in zip(big.shape, small.shape)):
        raise OwnershipError(
            f"fragments of shapes {big.shape} and {small.shape} do not broadcast (each axis "
            "must be equal, or 1 in one of them)"
        )
    if big.threads != small.threads:
        raise OwnershipError(
            f"fragments over {big.threads} and {small.threads} threads cannot be combined"
        )
    import numpy as np

    tb = big.table()
    ts = small.table()
    proj = tb.copy()
    for a, s in enumerate(small.shape):
        if s == 1:
            proj[:, :, a] = 0
    out = []
    for v in range(big.values):
        want = proj[:, v, :]  # [thread, axis]
        hit = np.all(ts == want[:, None, :], axis=2)  # [thread, small value]
        ok = np.all(hit, axis=0)
        if not ok.any():
            raise OwnershipError(
                f"cannot broadcast {small.label} against {big.label}: no value slot holds, in "
                f"every thread, the coordinate value slot {v} needs"
            )
        out.append(int(np.argmax(ok)))
    return tuple(out)


def fit_modes(table: list[tuple], rank: int) -> list[tuple[int, int | None, int]]:
    """Express ``table[i]`` (a coordinate for each index ``i``) as ``(extent, axis, step)``
    modes of the index, or raise: an arithmetic progression along one axis is one mode; a
    power-of-two table is fitted bit by bit (each bit moving along one axis).

    >>> fit_modes([(0, 0), (8, 0), (0, 8), (8, 8)], 2)
    [(2, 0, 8), (2, 1, 8)]
    """
    n = len(table)
    zero = tuple([0] * rank)
    if n == 0 or tuple(table[0]) != zero:
        raise OwnershipError(f"fit_modes: the table must start at the origin, got {table[:1]}")
    if n == 1:
        return [(1, None, 0)]
    step = tuple(table[1])
    if all(tuple(table[i]) == tuple(i * s for s in step) for i in range(n)):
        moving = [a for a in range(rank) if step[a]]
        if len(moving) <= 1:
            return [(n, moving[0] if moving else None, step[moving[0]] if moving else 0)]
    if n & (n - 1):
        raise OwnershipError(f"fit_modes: {table} is not linear in the index")
    modes = []
    bit = 1
    while bit < n:
        d = tuple(table[bit])
        moving = [a for a in range(rank) if d[a]]
        if len(moving) > 1:
            raise OwnershipError(f"fit_modes: index bit {bit} moves along two axes in {table}")
        modes.append((2, moving[0] if moving else None, d[moving[0]] if moving else 0))
        bit *= 2
    for i in range(n):
        want = [0] * rank
        for k, (_, a, s) in enumerate(modes):
            if a is not None and (i >> k) & 1:
                want[a] += s
        if tuple(table[i]) != tuple(want):
            raise OwnershipError(f"fit_modes: {table} is not linear in the index bits")
    return modes
