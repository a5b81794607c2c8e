"""Fragment stores to shared memory with ``stmatrix`` (sm_90), derived from ownership.

``stmatrix.sync.aligned.m8n8.x{1,2,4}{.trans}.shared.b16 [p], {r...}`` (PTX ISA
9.7.14.5.16) is ldmatrix's store counterpart: every lane holds ``num`` 32-bit registers;
register ``j`` holds, of matrix ``j``, row ``lane // 4``, columns ``2*(lane % 4) + (0, 1)``
(low half first); lanes ``8j .. 8j+7`` give the 32-bit shared addresses of the matrix's 8
rows of 16 bytes, and row ``i`` is written at lane ``8j + i``'s address. With ``.trans``
the matrix is stored transposed: stored row ``i``, column ``c`` is matrix element
``(c, i)``.

A packed fragment register ``r`` holds slots ``2r, 2r+1`` of its ownership. So register
``r``'s stored 8x8 matrix is, without ``.trans``: stored row ``i``, column ``c`` is the
coordinate the ownership gives to lane ``4i + c//2``, slot ``2r + c%2``; with ``.trans``:
lane ``4c + i//2``, slot ``2r + i%2``. A register can be stored when, in one of the two
forms, each stored row is 8 consecutive coordinates along the shared tile's contiguous
axis; then the lane giving row ``i`` points at the row's first coordinate. Nothing about
the producer is hard-coded: :class:`StmatrixPlan` derives every address from the
:class:`~tylo.tile.ownership.Ownership` alone (every warp separately), and refuses, with
the register and warp named, a fragment whose registers are not such matrices.

:func:`store_fragment` stores a fragment (packed 16-bit registers, or f32 values such as a
``wgmma`` accumulator, converted and packed on the way) into a
:class:`~tylo.tile.views.SharedTile` of bf16 or f16, after checking, element by element,
that every stored row lands on 8 consecutive, 16-byte aligned elements of the tile's layout
(swizzled layouts included): the epilogue's register-to-shared step before a TMA store.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from tylo import dtypes as dt
from tylo.layouts._lazy import sympy
from tylo.nvgpu.errors import PlanError, as_int, memoized
from tylo.nvgpu.warp.ldmatrix import (
    ROW_ELEMENTS,
    WARP,
    MatrixAccess,
    matrix_rows,
    rows_in_table,
)
from tylo.tile.ownership import Ownership, OwnershipError, fit_modes

Mode = tuple[int, int | None, int]  # (extent, axis, step) of an index, as fit_modes gives

__all__ = [
    "ROW_ELEMENTS",
    "StmatrixError",
    "StmatrixPlan",
    "StmatrixStore",
    "matrix_rows",
    "stmatrix_plan",
    "store_fragment",
]


class StmatrixError(PlanError):
    """A fragment or shared tile that ``stmatrix`` cannot store (see the module docstring)."""


@dataclass(frozen=True)
class StmatrixStore(MatrixAccess):
    """One ``stmatrix.x{num}{.trans}``: stores packed registers ``registers`` (in order)."""


def _unit(rank: int, axis: int) -> tuple[int, ...]:
    return tuple(1 if a == axis else 0 for a in range(rank))


@dataclass(frozen=True)
class StmatrixPlan:
    """The stmatrix stores of a fragment of ``ownership`` (over a 2-D tile; threads a
    multiple of 32, two slots per packed register) into a shared tile whose contiguous axis
    is ``axis``. Construction derives, for every warp and register, the 8 stored rows
    (:func:`matrix_rows`), preferring the plain form and using ``.trans`` when the rows run
    along the other axis; :class:`StmatrixError` when some register has neither form, or
    registers need different forms.

    >>> from tylo.layouts.tv import wgmma_m64_c_tv
    >>> p = StmatrixPlan(Ownership(wgmma_m64_c_tv(16), (64, 16)), axis=1)
    >>> len(p.stores), p.stores[0].registers, p.stores[0].trans
    (1, (0, 1, 2, 3), False)
    >>> StmatrixPlan(Ownership(wgmma_m64_c_tv(16), (64, 16)), axis=0).trans
    True
    """

    ownership: Ownership
    axis: int = 1
    trans: bool = field(init=False)
    # per warp, per packed register: the start coordinates of the matrix's 8 stored rows
    rows: tuple[tuple[tuple[tuple[int, ...], ...], ...], ...] = field(
        init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        own = self.ownership
        if not isinstance(own, Ownership):
            raise StmatrixError(f"stmatrix: expected an Ownership, got {own!r}")
        if as_int(self.axis) is not None:
            object.__setattr__(self, "axis", as_int(self.axis))
        if own.rank != 2 or self.axis not in (0, 1) or type(self.axis) is not int:
            raise StmatrixError(
                f"stmatrix: stores 2-D fragments along axis 0 or 1; got the {own.rank}-D "
                f"{own.label} and axis {self.axis!r}"
            )
        if own.threads % WARP or own.values % 2 or own.values == 0:
            raise StmatrixError(
                f"stmatrix: {own.label} has {own.threads} threads and {own.values} slots per "
                "thread; stmatrix needs whole warps and pairs of 16-bit slots per register"
            )
        regs = own.values // 2
        table = own.table()
        found = None
        for trans in (False, True):
            rows = []
            for w in range(own.threads // WARP):
                per_warp = []
                for r in range(regs):
                    starts = rows_in_table(table, w, r, self.axis, trans)
                    if starts is None:
                        break
                    per_warp.append(tuple(starts))
                else:
                    rows.append(tuple(per_warp))
                    continue
                break
            else:
                found = (trans, tuple(rows))
                break
        if found is None:
            raise StmatrixError(self._why_not(regs))
        object.__setattr__(self, "trans", found[0])
        object.__setattr__(self, "rows", found[1])

    def _why_not(self, regs: int) -> str:
        own = self.ownership
        table = own.table()
        for w in range(own.threads // WARP):
            for r in range(regs):
                if all(rows_in_table(table, w, r, self.axis, t) is None for t in (False, True)):
                    return (
                        f"stmatrix: packed register {r} (slots {2 * r}, {2 * r + 1}) of warp {w} "
                        f"of {own.label} is not an 8x8 matrix whose stored rows are 8 "
                        f"consecutive elements along axis {self.axis}, plain or transposed; "
                        "store this fragment by ownership instead (tylo.tile.access.store)"
                    )
        return (
            f"stmatrix: the registers of {own.label} need both the plain and the transposed "
            f"form along axis {self.axis}; one stmatrix has one form"
        )

    @functools.cached_property
    def stores(self) -> tuple[StmatrixStore, ...]:
        """The stores, ``x4`` when four divides the register count (else ``x2``, ``x1``)."""
        regs = self.ownership.values // 2
        num = next(x for x in (4, 2, 1) if regs % x == 0)
        return tuple(
            StmatrixStore(tuple(range(r, r + num)), self.trans) for r in range(0, regs, num)
        )

    @functools.cached_property
    def tables(self) -> tuple[tuple[tuple[int, ...], ...], ...]:
        """Per store, per thread: the coordinate whose address the thread gives (lane
        ``8j + i`` of a warp: row ``i`` of the store's matrix ``j``; lanes past ``8 * num``
        repeat the first ones, whose addresses stmatrix ignores)."""
        out = []
        for s in self.stores:
            n = ROW_ELEMENTS * s.num
            out.append(
                tuple(
                    tuple(int(x) for x in self.rows[t // WARP][s.registers[(t % n) // 8]][t % 8])
                    for t in range(self.ownership.threads)
                )
            )
        return tuple(out)

    def row_coords(self, store: int, thread: int) -> list[tuple[int, ...]]:
        """The 8 coordinates of the row that ``thread`` addresses in ``store``."""
        s, t = as_int(store), as_int(thread)
        if s is None or not 0 <= s < len(self.stores) or t is None:
            raise StmatrixError(
                f"row_coords: store {store!r} is not an int in [0, {len(self.stores)})"
            )
        if not 0 <= t < self.ownership.threads:
            raise StmatrixError(
                f"row_coords: thread {thread!r} is not an int in [0, {self.ownership.threads})"
            )
        start = self.tables[s][t]
        unit = _unit(2, self.axis)
        return [tuple(s + c * u for s, u in zip(start, unit)) for c in range(ROW_ELEMENTS)]

    @functools.cached_property
    def address_modes(self) -> tuple[tuple[list[Mode], list[Mode]], ...]:
        """Per store, the thread index's lane and warp modes ``(extent, axis, step)`` giving
        ``tables[store][t] - tables[store][0]`` (so the address is an expression of the
        thread index); :class:`StmatrixError` when the addresses are not linear in the
        lane bits or the warps differ by more than an offset."""
        out = []
        for g, table in enumerate(self.tables):
            origin = table[0]
            rel = [tuple(a - b for a, b in zip(c, origin)) for c in table]
            lanes = rel[:WARP]
            warps = [rel[WARP * w] for w in range(len(rel) // WARP)]
            for t, c in enumerate(rel):
                base = warps[t // WARP]
                if tuple(a - b for a, b in zip(c, base)) != lanes[t % WARP]:
                    raise StmatrixError(
                        f"stmatrix: the warps of {self.ownership.label} address store {g} "
                        "with different lane patterns; no single address expression exists"
                    )
            try:
                lane_modes = fit_modes(lanes, 2)
                warp_modes = fit_modes(warps, 2)
            except OwnershipError as err:
                raise StmatrixError(
                    f"stmatrix: the row addresses of store {g} of {self.ownership.label} are not "
                    f"linear in the thread index: {err}"
                ) from None
            out.append((lane_modes, warp_modes))
        return tuple(out)

    def address_coord(self, store: int, tid: Any) -> tuple[Any, ...]:
        """The coordinate thread ``tid`` (an int or index expression) addresses in
        ``store``: ``tables[store][tid]`` as an expression."""
        from tylo.layouts.symbolic import floor_div, mod

        s = as_int(store)
        if s is None or not 0 <= s < len(self.stores):
            raise StmatrixError(
                f"address_coord: store {store!r} is not an int in [0, {len(self.stores)})"
            )
        store = s
        if as_int(tid) is not None or not (isinstance(tid, sympy.Basic) or hasattr(tid, "dtype")):
            t = as_int(tid)
            if t is None or not 0 <= t < self.ownership.threads:
                raise StmatrixError(
                    f"address_coord: tid {tid!r} is not a thread in [0, "
                    f"{self.ownership.threads}) or an index expression"
                )
            tid = t
        lane_modes, warp_modes = self.address_modes[store]
        out: list[Any] = list(self.tables[store][0])
        parts = ((lane_modes, mod(tid, WARP)), (warp_modes, floor_div(tid, WARP)))
        for modes, index in parts:
            radix = 1
            for k, (extent, axis, step) in enumerate(modes):
                q = floor_div(index, radix) if radix != 1 else index
                digit = q if k == len(modes) - 1 else mod(q, extent)
                if axis is not None and extent > 1:
                    out[axis] = out[axis] + digit * step
                radix *= extent
        return tuple(out)


@memoized(128)
def stmatrix_plan(ownership: Ownership, axis: int = 1) -> StmatrixPlan:
    """The (cached) :class:`StmatrixPlan` of ``ownership`` along ``axis``."""
    return StmatrixPlan(ownership, axis)


def _contiguous_axis(tile: Any) -> int:
    o = tile.static_offsets([(0, 0), (0, 1), (1, 0)])
    if o[1] - o[0] == 1:
        return 1
    if o[2] - o[0] == 1:
        return 0
    raise StmatrixError(f"stmatrix: the shared tile {tile!r} is contiguous along neither axis")


_CHECKED: set[tuple[object, ...]] = set()


def _check_rows(plan: StmatrixPlan, tile: Any) -> None:
    """Every stored row lands on 8 consecutive elements of the tile starting on a multiple
    of 8 (16 bytes), checked for every store and thread (memoized per plan and view: a
    layout is an immutable value)."""
    try:
        key: Any = (plan, tile.layout, tuple(tile.modes), tuple(tile.origin))
        if key in _CHECKED:
            return
    except TypeError:  # an unhashable view: check every time
        key = None
    _check_rows_now(plan, tile)
    if key is not None:
        if len(_CHECKED) > 1024:
            _CHECKED.clear()
        _CHECKED.add(key)


def _check_rows_now(plan: StmatrixPlan, tile: Any) -> None:
    for g in range(len(plan.stores)):
        for t in range(plan.ownership.threads):
            coords = plan.row_coords(g, t)
            offs = tile.static_offsets(coords)
            if offs != list(range(offs[0], offs[0] + ROW_ELEMENTS)) or offs[0] % ROW_ELEMENTS:
                raise StmatrixError(
                    f"stmatrix: thread {t} stores the row {coords[0]}..{coords[-1]} of "
                    f"{plan.ownership.label} at tile offsets {offs}; stmatrix writes 8 "
                    f"consecutive elements from a 16-byte boundary, which {tile!r} does not hold "
                    "there"
                )


def store_fragment(fragment: Any, tile: Any, tid: Any) -> None:
    """Store ``fragment`` into shared ``tile`` (bf16 or f16, the fragment's shape) with
    ``stmatrix``: thread ``tid`` (its index in the fragment's ownership) holds slots that
    land at their ownership coordinates, exactly as a store by ownership would put them. A
    packed fragment must hold the tile's dtype; f32 (or other) values are rounded to the
    tile's dtype and packed (``cvt.rn``). Every warp of the ownership executes it together.
    """
    from tylo.kernel.context import current
    from tylo.kernel.values import Value
    from tylo.nvgpu.bounds import check_region
    from tylo.nvgpu.instructions import check_arch, stmatrix
    from tylo.tile.access import class_addresses
    from tylo.tile.fragment import Fragment
    from tylo.tile.views import SharedTile

    ctx = current()
    check_arch("stmatrix", ctx.target)
    if not isinstance(fragment, Fragment):
        raise StmatrixError(f"stmatrix: expected a Fragment, got {type(fragment).__name__}")
    if not isinstance(tile, SharedTile):
        raise StmatrixError(f"stmatrix: the destination must be a SharedTile, got {tile!r}")
    if tile.dtype not in (dt.bf16, dt.f16):
        raise StmatrixError(f"stmatrix: stores 16-bit elements; the tile holds {tile.dtype}")
    own = fragment.ownership
    if tuple(tile.shape) != tuple(own.shape):
        raise StmatrixError(
            f"stmatrix: the fragment covers {own.shape}, the tile is {tuple(tile.shape)}"
        )
    if fragment.packed is not None and fragment.packed is not tile.dtype:
        raise StmatrixError(
            f"stmatrix: the fragment packs {fragment.packed}, the tile holds {tile.dtype}"
        )
    if any(type(o) is not int for o in tile.origin):
        raise StmatrixError(
            f"stmatrix: the window origin {tile.origin} of {tile!r} is not static, so the rows "
            "cannot be checked; put a runtime offset in the tile's base instead "
            "(SharedTile(storage, layout, base=offset), a proved multiple of 8 elements)"
        )
    packed = fragment if fragment.packed is not None else fragment.pack(tile.dtype)
    plan = stmatrix_plan(own, _contiguous_axis(tile))
    _check_rows(plan, tile)
    from tylo.kernel import facts

    if facts.divides(ROW_ELEMENTS, tile.base) is not True or tile.storage.align < 16:
        raise StmatrixError(
            f"stmatrix: the tile's start {tile.base} must be a proved multiple of 8 elements in "
            "a 16-byte aligned allocation (tylo.shared(..., align=16))"
        )
    check_region("stmatrix", tile, tuple((0, e) for e in own.shape), access="writes")
    coords = [plan.address_coord(g, tid) for g in range(len(plan.stores))]
    addrs = class_addresses(tile, list(plan.tables), coords)
    for s, addr in zip(plan.stores, addrs):
        regs = [packed.values[r] for r in s.registers]
        words = [r.use() if isinstance(r, Value) else r for r in regs]
        stmatrix(ctx.builder, addr, words, trans=s.trans)
