"""Reductions of fragments along a logical axis, with communication derived from ownership.

``f.sum(axis=1)`` combines every value of a row of the logical tile. Who must talk to whom
follows from the fragment's :class:`~tylo.ownership.Ownership` alone; :class:`ReductionPlan`
works it out on the host, in three steps:

1. **within a thread**: the thread's slots that differ only along ``axis`` are folded
   (one group per kept coordinate);
2. **within a warp**: lanes that hold the same kept coordinates differ in a set of lane
   bits (the thread modes along ``axis`` below the warp size); one butterfly shuffle
   (``shfl.sync.bfly``) per bit combines them, after which every such lane holds the result.
   The MMA accumulator's rows are spread over the 4 lanes of a quad: 2 shuffles;
3. **across warps** (thread modes along ``axis`` at or above the warp size): an explicit
   shared-memory recipe. One lane per group writes its partial to ``scratch`` (a shared
   tensor of :attr:`ReductionPlan.scratch_elements` elements that the caller allocates),
   a barrier, then every thread reads the partials of its rows in the same order and folds
   them; a leading barrier (``sync=True``, the default) protects a scratch just read by a
   previous reduction. These barriers are the recipe's only ones.

The result is a fragment over the reduced tile (extent 1 along ``axis``), held by every
thread that held part of the row, so it broadcasts back against the original fragment
(``f - f.max(axis=1)``). An ownership whose lanes along ``axis`` do not form whole lane
bits (a non-power-of-two spread) has no butterfly recipe and raises :class:`ReductionError`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tylo.ownership import Ownership, OwnershipError

__all__ = ["REDUCTION_OPS", "ReductionError", "ReductionPlan", "reduce", "reduction_plan"]

WARP_SIZE = 32

# reduction operator -> the elementwise funnel operation that combines two values
REDUCTION_OPS = ("add", "mul", "maximum", "minimum", "and", "or", "xor")


class ReductionError(OwnershipError):
    """A reduction with no recipe for the fragment's ownership, or missing scratch."""


def _pow2(x: int) -> bool:
    return x > 0 and x & (x - 1) == 0


@dataclass(frozen=True)
class ReductionPlan:
    """How a fragment of ``ownership`` is reduced along ``axis`` (see the module docs).

    Derived fields: ``result`` (the reduced ownership), ``groups`` (for each result slot,
    the input slots folded in the thread, in order), ``lane_masks`` (butterfly XOR masks,
    in order), ``warp_modes`` (``(radix, extent)`` of the thread-index digits along
    ``axis`` at or above the warp size), ``warps`` (how many warps combine: their product)
    and ``scratch_elements``.

    >>> from tylo.layouts.tv import MMA_M16N8K16_C_TV
    >>> p = ReductionPlan(Ownership(MMA_M16N8K16_C_TV, (16, 8)), axis=1)
    >>> p.groups, p.lane_masks, p.warps
    (((0, 1), (2, 3)), (1, 2), 1)
    """

    ownership: Ownership
    axis: int

    def __post_init__(self) -> None:
        own = self.ownership
        if not isinstance(own, Ownership):
            raise ReductionError(f"ReductionPlan: expected an Ownership, got {own!r}")
        if type(self.axis) is not int or not 0 <= self.axis < own.rank:
            raise ReductionError(
                f"reduce: axis {self.axis!r} out of range for the {own.rank}-D tile {own.shape}"
            )
        _ = self.lane_masks  # derive now: errors surface at plan time

    @functools.cached_property
    def result(self) -> Ownership:
        return self.ownership.reduced(self.axis)

    @functools.cached_property
    def groups(self) -> tuple[tuple[int, ...], ...]:
        own = self.ownership
        kept = [m for m in own.value_modes if m.axis != self.axis]
        out: dict[int, list[int]] = {}
        for v in range(own.values):
            key, radix = 0, 1
            for m in kept:
                key += ((v // m.radix) % m.extent) * radix
                radix *= m.extent
            out.setdefault(key, []).append(v)
        return tuple(tuple(out[k]) for k in sorted(out))

    def _thread_axis_modes(self) -> list[tuple[int, int]]:
        """(radix, extent) of the thread modes along ``axis``, split at the warp size."""
        out = []
        for m in self.ownership.thread_modes:
            if m.axis != self.axis or m.extent == 1:
                continue
            lo, hi = m.radix, m.radix * m.extent
            if lo < WARP_SIZE < hi:
                if WARP_SIZE % lo or hi % WARP_SIZE:
                    raise ReductionError(self._no_recipe(m.extent, m.radix))
                out.append((lo, WARP_SIZE // lo))
                out.append((WARP_SIZE, hi // WARP_SIZE))
            else:
                out.append((lo, m.extent))
        return out

    def _no_recipe(self, extent: int, radix: int) -> str:
        return (
            f"reduce along axis {self.axis} of {self.ownership.label}: the lanes that share "
            f"a kept coordinate differ in a thread digit of extent {extent} at place value "
            f"{radix}, which is not a set of whole lane bits (butterfly shuffles need power-"
            "of-two extents and place values within a warp); reshape the ownership so the "
            "reduced axis spans 1, 2, 4, 8, 16 or 32 lanes"
        )

    @functools.cached_property
    def lane_masks(self) -> tuple[int, ...]:
        masks = []
        for radix, extent in self._thread_axis_modes():
            if radix >= WARP_SIZE:
                continue
            if not (_pow2(radix) and _pow2(extent)):
                raise ReductionError(self._no_recipe(extent, radix))
            if self.ownership.threads % WARP_SIZE:
                raise ReductionError(
                    f"reduce along axis {self.axis} of {self.ownership.label}: shuffles need "
                    f"whole warps, but the ownership spans {self.ownership.threads} threads"
                )
            k = radix
            while k < radix * extent:
                masks.append(k)
                k *= 2
        return tuple(masks)

    @functools.cached_property
    def warp_modes(self) -> tuple[tuple[int, int], ...]:
        return tuple((r, e) for r, e in self._thread_axis_modes() if r >= WARP_SIZE)

    @property
    def warps(self) -> int:
        n = 1
        for _, e in self.warp_modes:
            n *= e
        return n

    @property
    def scratch_elements(self) -> int:
        """Shared elements the cross-warp step needs (0 when the warps do not combine)."""
        if self.warps == 1:
            return 0
        n = 1
        for s in self.result.shape:
            n *= s
        return n * self.warps

    def warp_digit(self, thread: Any) -> Any:
        """The thread's combined digit over the warp modes along ``axis`` (mixed radix)."""
        import sympy

        out: Any = 0
        place = 1
        static = type(thread) is int
        for radix, extent in self.warp_modes:
            if static:
                d = (thread // radix) % extent
            else:
                d = sympy.Mod(sympy.floor(thread / radix), extent)
            out = out + d * place
            place *= extent
        return out

    @property
    def writer_mask(self) -> int:
        """Lane bits that must be zero for a lane to write its partial to scratch."""
        m = 0
        for x in self.lane_masks:
            m |= x
        return m

    # -- host simulation -------------------------------------------------------------------

    def simulate(self, op: Callable[[Any, Any], Any], data: Sequence[Sequence[Any]]) -> list:
        """Run the recipe on the host: ``data[thread][slot]`` -> ``out[thread][slot']``,
        combining with ``op`` exactly as the kernel does (tests compare it with a direct
        reduction over coordinates)."""
        own = self.ownership
        n = own.threads
        part = []
        for t in range(n):
            row = []
            for g in self.groups:
                acc = data[t][g[0]]
                for i in g[1:]:
                    acc = op(acc, data[t][i])
                row.append(acc)
            part.append(row)
        for mask in self.lane_masks:
            part = [
                [op(part[t][j], part[t ^ mask][j]) for j in range(len(part[t]))] for t in range(n)
            ]
        if self.warps == 1:
            return part
        size = self.scratch_elements // self.warps
        scratch: dict[int, Any] = {}
        for t in range(n):
            if (t % WARP_SIZE) & self.writer_mask:
                continue
            for j, val in enumerate(part[t]):
                scratch[self.result.tv(t, j) + size * self.warp_digit(t)] = val
        out = []
        for t in range(n):
            row = []
            for j in range(len(part[t])):
                k = self.result.tv(t, j)
                acc = scratch[k]
                for r in range(1, self.warps):
                    acc = op(acc, scratch[k + size * r])
                row.append(acc)
            out.append(row)
        return out


@functools.lru_cache(maxsize=512)
def reduction_plan(ownership: Ownership, axis: int) -> ReductionPlan:
    """The (cached) :class:`ReductionPlan` of ``ownership`` along ``axis``."""
    return ReductionPlan(ownership, axis)


def _combine(op: str, a: Any, b: Any) -> Any:
    from tylo.fragment import _apply_scalar

    return _apply_scalar(op, (a, b))


def reduce(
    fragment: Any,
    op: str,
    axis: int,
    *,
    scratch: Any = None,
    tid: Any = None,
    sync: bool = True,
) -> Any:
    """Reduce ``fragment`` along ``axis`` with ``op`` (one of :data:`REDUCTION_OPS`).

    ``scratch`` (a shared :class:`~tylo.kernel.memory.Tensor` or
    :class:`~tylo.tiles.SharedTile` of at least ``plan.scratch_elements`` elements of the
    fragment's dtype) is needed only when warps combine; ``tid`` is the thread's index in
    the ownership (default: the block's linear thread index); ``sync=False`` drops the
    leading barrier of the cross-warp step (when the scratch is known to be free).
    """
    from tylo.fragment import Fragment

    if not isinstance(fragment, Fragment):
        raise ReductionError(f"reduce: expected a Fragment, got {type(fragment).__name__}")
    if op not in REDUCTION_OPS:
        raise ReductionError(f"reduce: op must be one of {REDUCTION_OPS}, got {op!r}")
    if fragment.packed is not None:
        raise ReductionError("reduce: unpack the fragment first (fragment.unpack())")
    plan = reduction_plan(fragment.ownership, axis)
    vals = []
    for g in plan.groups:
        acc = fragment.values[g[0]]
        for i in g[1:]:
            acc = _combine(op, acc, fragment.values[i])
        vals.append(acc)
    if plan.lane_masks:
        from tylo.kernel.intrinsics import shfl_xor

        for mask in plan.lane_masks:
            vals = [_combine(op, v, shfl_xor(v, mask)) for v in vals]
    if plan.warps > 1:
        vals = _across_warps(plan, op, vals, scratch, tid, sync)
    return Fragment(vals, plan.result)


def _across_warps(
    plan: ReductionPlan, op: str, vals: list, scratch: Any, tid: Any, sync: bool
) -> list:
    from tylo.kernel.context import current
    from tylo.kernel.intrinsics import linear_thread_idx, sync_threads
    from tylo.kernel.values import Value
    from tylo.ptx_ops import ld_shared, st_shared
    from tylo.tiles import shared_address

    if scratch is None:
        raise ReductionError(
            f"reduce along axis {plan.axis} of {plan.ownership.label} combines {plan.warps} "
            f"warps through shared memory: pass scratch= (a shared tensor of at least "
            f"{plan.scratch_elements} elements; ReductionPlan.scratch_elements says how many)"
        )
    ctx = current()
    b = ctx.builder
    t = linear_thread_idx() if tid is None else tid
    size = plan.scratch_elements // plan.warps
    digit = plan.warp_digit(t)
    if sync:
        sync_threads()
    lane_bits = None
    if plan.writer_mask:
        import sympy

        from tylo.kernel.lower import lower_bool

        lane = sympy.Mod(t, WARP_SIZE)
        bits = [sympy.Eq(sympy.Mod(sympy.floor(lane / m), 2), 0) for m in plan.lane_masks]
        lane_bits = lower_bool(ctx, sympy.And(*bits))
    for j, v in enumerate(vals):
        addr = shared_address(scratch, plan.result.tv(t, j) + size * digit, v.dtype)
        st_shared(b, addr, v.use(), pred=lane_bits)
    sync_threads()
    out = []
    for j, v in enumerate(vals):
        k = plan.result.tv(t, j)
        acc = None
        for r in range(plan.warps):
            addr = shared_address(scratch, k + size * r, v.dtype)
            x = Value(v.dtype, ld_shared(b, addr, v.ir.type))
            acc = x if acc is None else _combine(op, acc, x)
        out.append(acc)
    return out
