"""Operand loads for ``mma.sync``, derived from ownership: which row each lane gives ldmatrix.

``ldmatrix.x{1,2,4}`` (PTX ISA 9.7.14.5.15) delivers, for matrix ``j``, row ``lane // 4``,
columns ``2*(lane % 4) + (0, 1)`` into register ``j`` of every lane, reading 8 rows of 16
bytes whose addresses lanes ``8j .. 8j+7`` supply. An MMA operand register holds two
consecutive slots of the operand's ownership. So register ``r``'s 8x8 matrix is: element
(row ``i``, column ``c``) is the coordinate the ownership gives to lane ``4i + c//2``, slot
``2r + c%2``. When each such row is 8 consecutive elements along the shared tile's
contiguous axis, lane ``8j + i`` points at row ``i``'s first element (no ``.trans``); when
instead the matrix's *columns* are contiguous, the transposed form is used (``.trans``,
e.g. a V operand stored N-contiguous). Nothing about the atom is hard-coded here: the rows
come from :class:`~tylo.tile.ownership.Ownership` alone.

:class:`OperandLoads` is the derivation for one operand of a :class:`~tylo.nvgpu.warp.mma.TiledMMA`:
the loads of one k-step (registers, ``x`` count, ``.trans``), and the *source ownership*:
a thread-value layout over the CTA's operand tile saying, for every thread and load, the 8
elements its row address covers. Composed with a shared layout, it is what the provers
check (each row contiguous and 16-byte aligned) and what the kernel evaluates for
addresses; :meth:`OperandLoads.bank_conflicts` counts shared-memory bank conflicts.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from tylo import dtypes as dt
from tylo.nvgpu.errors import PlanError, as_int
from tylo.tile.ownership import Ownership, OwnershipError, fit_modes

__all__ = ["LdmatrixLoad", "OperandLoads", "load_operand", "operand_loads"]

ROW_ELEMENTS = 8  # one ldmatrix row: 16 bytes of 16-bit elements


WARP = 32


@dataclass(frozen=True)
class MatrixAccess:
    """One ``ldmatrix``/``stmatrix`` ``.x{num}{.trans}``: the packed registers it moves,
    in order (register ``j`` is 8x8 matrix ``j``)."""

    registers: tuple[int, ...]
    trans: bool

    @property
    def num(self) -> int:
        return len(self.registers)


@dataclass(frozen=True)
class LdmatrixLoad(MatrixAccess):
    """One ``ldmatrix.x{num}{.trans}``: fills operand registers ``registers`` (in order)."""


def matrix_rows(
    own: Ownership, warp: int, reg: int, axis: int, trans: bool
) -> list[tuple[int, ...]] | None:
    """The start coordinate of each of the 8 rows of the 8x8 matrix in packed register
    ``reg`` of warp ``warp`` (the register layout ldmatrix fills and stmatrix stores: lane
    ``4i + c//2`` holds row ``i``, columns ``c``, slot ``2*reg + c%2``; ``trans``: the matrix
    stored transposed), when each row is 8 consecutive coordinates along ``axis``; None
    otherwise."""
    if not isinstance(own, Ownership) or own.rank != 2:
        raise PlanError(f"matrix_rows: expected a 2-D Ownership, got {own!r}")
    w, r = as_int(warp), as_int(reg)
    if w is None or not 0 <= w < own.threads // WARP or r is None or not 0 <= r < own.values // 2:
        raise PlanError(
            f"matrix_rows: warp {warp!r} and register {reg!r} must be ints in "
            f"[0, {own.threads // WARP}) and [0, {own.values // 2})"
        )
    if type(axis) is not int or axis not in (0, 1) or type(trans) is not bool:
        raise PlanError(
            f"matrix_rows: axis must be 0 or 1 and trans a bool, got {axis!r}, {trans!r}"
        )
    return rows_in_table(own.table(), w, r, axis, trans)


def rows_in_table(
    table: Any, warp: int, reg: int, axis: int, trans: bool
) -> list[tuple[int, ...]] | None:
    """:func:`matrix_rows` on ``table`` (``Ownership.table()``: [thread, slot, axis])."""
    base = WARP * warp
    starts = []
    for i in range(ROW_ELEMENTS):
        cs = []
        for c in range(ROW_ELEMENTS):
            if trans:  # stored row i, column c <- lane 4c + i//2, slot 2*reg + i%2
                cs.append(table[base + 4 * c + i // 2, 2 * reg + i % 2])
            else:  # stored row i, column c <- lane 4i + c//2, slot 2*reg + c%2
                cs.append(table[base + 4 * i + c // 2, 2 * reg + c % 2])
        first = tuple(int(x) for x in cs[0])
        for c in range(1, ROW_ELEMENTS):
            for a in range(len(first)):
                if int(cs[c][a]) - first[a] != (c if a == axis else 0):
                    return None
        starts.append(first)
    return starts


@dataclass(frozen=True)
class OperandLoads:
    """The ldmatrix loads of ``operand`` ('a' or 'b') of ``plan`` from a shared tile whose
    contiguous axis is ``axis`` (1: K, the usual K-contiguous A and B)."""

    plan: Any
    operand: str
    axis: int = 1

    @functools.cached_property
    def warp_ownership(self) -> Ownership:
        """One warp's operand ownership for one k-step, over (rows of the warp tile, K)."""
        atom = self.plan.atom
        am, an, ak = atom.shape
        base = atom.a if self.operand == "a" else atom.b
        rows = am if self.operand == "a" else an
        rep = self.plan.repeat[0 if self.operand == "a" else 1]
        own: Ownership = base.tiled((rows * rep, ak), values=[(rep, 0, rows)])
        return own

    @functools.cached_property
    def _rows(self) -> tuple[bool, list[list[tuple[int, ...]]]]:
        """(trans, per register the start coordinates of its 8 stored rows)."""

        own = self.warp_ownership
        table = own.table()
        rows: list[tuple[bool, list[tuple[int, ...]]]] = []
        for r in range(own.values // 2):
            found = next(
                ((t, st) for t in (False, True)
                 if (st := rows_in_table(table, 0, r, self.axis, t)) is not None),
                None,
            )  # fmt: skip
            if found is None:
                raise PlanError(
                    f"{self.plan}: operand {self.operand.upper()} register {r} is not an 8x8 "
                    f"matrix with 16-byte rows along axis {self.axis}; it cannot be loaded "
                    "with ldmatrix from this shared layout"
                )
            rows.append(found)
        if len({t for t, _ in rows}) != 1:
            raise PlanError(
                f"{self.plan}: operand {self.operand.upper()} mixes transposed and plain registers"
            )
        return rows[0][0], [starts for _, starts in rows]

    @functools.cached_property
    def loads(self) -> tuple[LdmatrixLoad, ...]:
        trans, starts = self._rows
        nregs = len(starts)
        # one width for every load (x4 when it divides the registers), so that a single
        # source layout describes all of them
        num = next(x for x in (4, 2, 1) if nregs % x == 0)
        return tuple(LdmatrixLoad(tuple(range(r, r + num)), trans) for r in range(0, nregs, num))

    @property
    def trans(self) -> bool:
        return self.loads[0].trans

    def _lane_table(self, load: LdmatrixLoad) -> list[tuple[int, ...]]:
        starts = self._rows[1]
        n = 8 * load.num
        return [starts[load.registers[(lane % n) // 8]][(lane % n) % 8] for lane in range(32)]

    @functools.cached_property
    def source(self) -> Ownership:
        """Thread-value layout over the CTA operand tile (rows, k): thread modes are the
        lanes and warps; value modes are the 8 row elements, the loads of a k-step, and
        the k-steps. Slot ``8 * (g + loads * ks)`` is the first element of load ``g`` of
        k-step ``ks``."""

        plan = self.plan
        own = self.warp_ownership
        tables = [self._lane_table(ld) for ld in self.loads]
        first = [t[0] for t in tables]
        rel = [[tuple(x - y for x, y in zip(c, t[0])) for c in t] for t in tables]
        if any(r != rel[0] for r in rel):
            raise PlanError(
                f"{plan}: the loads of operand {self.operand.upper()} use "
                "different lane patterns; no single source layout describes them"
            )
        try:
            lane_modes = fit_modes(rel[0], own.rank)
            load_modes = fit_modes(first, own.rank) if len(first) > 1 else [(1, None, 0)]
        except OwnershipError as err:
            raise PlanError(
                f"{plan}: operand {self.operand.upper()} row addresses are not "
                f"linear in the lane bits: {err}"
            ) from None
        m, n, k = plan.size
        wm, wn = plan.warp_tile
        ak = plan.atom.shape[2]
        if self.operand == "a":
            warps = [(plan.warps[0], 0, wm), (plan.warps[1], None, 0)]
            shape = (m, k)
        else:
            warps = [(plan.warps[0], None, 0), (plan.warps[1], 0, wn)]
            shape = (n, k)
        values = [(ROW_ELEMENTS, self.axis, 1), *load_modes, (plan.k_steps, 1, ak)]
        return Ownership.from_modes(
            shape, lane_modes + warps, values, f"{plan} {self.operand.upper()} ldmatrix rows"
        )

    def slot(self, load: int, k_step: int) -> int:
        """The source slot of the first element of ``load`` in ``k_step``."""
        g, k = as_int(load), as_int(k_step)
        if g is None or not 0 <= g < len(self.loads) or k is None or not 0 <= k < self.plan.k_steps:
            raise PlanError(
                f"{self.plan}: load {load!r} and k_step {k_step!r} must be ints in "
                f"[0, {len(self.loads)}) and [0, {self.plan.k_steps})"
            )
        return ROW_ELEMENTS * (g + len(self.loads) * k)

    # -- proofs ----------------------------------------------------------------------------

    def prove(self, layout: Any) -> dict[str, Any]:
        """Prove, for shared layout ``layout`` over the operand tile, that every ldmatrix
        row is 8 contiguous elements starting 16-byte aligned. Returns the verdicts."""
        from tylo.layouts import composition
        from tylo.layouts.proofs import prove_aligned, prove_contiguous
        from tylo.nvgpu.bounds import layout_extents
        from tylo.nvgpu.errors import TileBoundsError

        need = self.source.shape
        ext = layout_extents(layout)
        if len(ext) != len(need) or any(e < n for e, n in zip(ext, need)):
            raise TileBoundsError(
                f"{self.plan} operand {self.operand.upper()}: ldmatrix reads the {need} tile, "
                f"but the shared layout {layout} has extents {ext}"
            )
        rows = composition(layout, self.source.tv)
        nbytes = self.plan.atom.dtype.nbytes
        out = {
            "ldmatrix rows contiguous": prove_contiguous(rows, vector=ROW_ELEMENTS, mode=1),
            "ldmatrix rows 16-byte aligned": prove_aligned(
                rows, vector=ROW_ELEMENTS, elem_bytes=nbytes, mode=1, align=16
            ),
        }
        for what, v in out.items():
            if not v:
                raise PlanError(
                    f"{self.plan} operand {self.operand.upper()} from {layout}: "
                    f"{what} is {v.status}: {v.reason}"
                )
        return out

    def bank_conflicts(self, layout: Any) -> int:
        """The worst number of extra shared-memory wavefronts of any 8-lane phase of any
        load (0: conflict-free), from the byte addresses of every lane's row."""
        from tylo.layouts import ComposedLayout, Layout

        if not isinstance(layout, (Layout, ComposedLayout)) or not layout.is_static:
            raise PlanError(f"bank_conflicts: expected a static shared layout, got {layout!r}")
        own = self.source
        nbytes = self.plan.atom.dtype.nbytes
        worst = 0
        for ks in range(self.plan.k_steps):
            for g, ld in enumerate(self.loads):
                slot = self.slot(g, ks)
                for w in range(own.threads // 32):
                    for j in range(ld.num):
                        chunks = []
                        for i in range(8):
                            c = own.coord(32 * w + 8 * j + i, slot)
                            chunks.append((layout(*c) * nbytes) // 16 % 8)
                        worst = max(worst, 8 // len(set(chunks)) - 1 if chunks else 0)
        return worst


def _check_operand(plan: Any, operand: Any, what: str) -> None:
    # by name: warp.mma imports this module, so it is not imported back (no cycle)
    if type(plan).__name__ != "TiledMMA" or not hasattr(plan, "k_steps"):
        raise PlanError(f"{what}: expected a TiledMMA, got {plan!r}")
    if type(operand) is not str or operand not in ("a", "b"):
        raise PlanError(f"{what}: operand must be 'a' or 'b', got {operand!r}")


def operand_loads(plan: Any, operand: str, axis: int = 1) -> OperandLoads:
    """The (cached) :class:`OperandLoads` of ``operand`` of ``plan``."""
    _check_operand(plan, operand, "operand_loads")
    if type(axis) is not int or axis not in (0, 1):
        raise PlanError(f"operand_loads: axis must be 0 or 1, got {axis!r}")
    # one cache key however the axis is passed (planning leaves it out, kernels name it)
    return _operand_loads(plan, operand, axis)


@functools.lru_cache(maxsize=128)
def _operand_loads(plan: Any, operand: str, axis: int) -> OperandLoads:
    loads = OperandLoads(plan, operand, axis)
    _ = loads.source
    return loads


def _contiguous_axis(tile: Any) -> int:

    o = tile.static_offsets([(0, 0), (0, 1), (1, 0)])
    if o[1] - o[0] == 1:
        return 1
    if o[2] - o[0] == 1:
        return 0
    raise PlanError(f"ldmatrix: the shared tile {tile!r} is contiguous along neither axis")


@functools.lru_cache(maxsize=256)
def _tables(
    loads: OperandLoads, k_step: int, threads: int
) -> tuple[tuple[tuple[int, ...], ...], ...]:
    own = loads.source
    table = own.table()
    return tuple(
        tuple(tuple(int(x) for x in table[t, loads.slot(g, k_step)]) for t in range(threads))
        for g in range(len(loads.loads))
    )


def load_operand(
    plan: Any, operand: str, tile: Any, tid: Any, k_step: int, *, share_bases: bool = False
) -> Any:
    """Emit the ldmatrix loads of ``operand`` for ``k_step`` from shared ``tile`` (the
    CTA's operand tile, (M, k) or (N, k)); returns the packed operand fragment.
    ``share_bases``: the row addresses reuse the per-thread bases of earlier loads from the
    same storage and layout, by a constant difference or XOR (a swizzle's k-steps), as
    :func:`~tylo.tile.access.class_addresses` with ``share`` says."""
    from tylo.kernel.context import current, require_threads
    from tylo.kernel.values import Value
    from tylo.nvgpu.bounds import check_region
    from tylo.nvgpu.instructions import check_arch, ldmatrix
    from tylo.tile.access import SharedTile, class_addresses
    from tylo.tile.fragment import Fragment

    _check_operand(plan, operand, "load_operand")
    if not isinstance(tile, SharedTile):
        raise PlanError(f"mma: operand {operand.upper()} must be a SharedTile, got {tile!r}")
    m, n, k = plan.size
    want = (m if operand == "a" else n, k)
    if tuple(tile.shape) != want:
        raise PlanError(
            f"mma: operand {operand.upper()} tile has shape {tile.shape}, the plan needs {want}"
        )
    if tile.dtype is not plan.atom.dtype:
        raise PlanError(
            f"mma: operand {operand.upper()} holds {tile.dtype}, the atom takes {plan.atom.dtype}"
        )
    if type(k_step) is not int or not 0 <= k_step < plan.k_steps:
        raise PlanError(
            f"mma: k_step must be an int in [0, {plan.k_steps}) (the plan's k-steps), "
            f"got {k_step!r}"
        )
    ctx = current()
    check_arch("ldmatrix", ctx.target)
    check_region(
        f"ldmatrix (operand {operand.upper()})", tile, tuple((0, e) for e in want), access="reads"
    )
    loads = operand_loads(plan, operand, _contiguous_axis(tile))
    own = loads.source
    require_threads(plan.threads, f"{plan} (operand {operand.upper()})")
    tables = _tables(loads, k_step, plan.threads)
    coords = [own.coord(tid, loads.slot(g, k_step)) for g in range(len(loads.loads))]
    addrs = class_addresses(tile, list(tables), coords, share=share_bases)
    regs: list[Any] = [None] * sum(ld.num for ld in loads.loads)
    for ld, addr in zip(loads.loads, addrs):
        for r, v in zip(ld.registers, ldmatrix(ctx.builder, addr, num=ld.num, trans=ld.trans)):
            regs[r] = Value(dt.u32, v)
    return Fragment(regs, plan.operand_ownership(operand, k_steps=1), packed=plan.atom.dtype)
