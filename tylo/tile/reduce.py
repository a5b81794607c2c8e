"""Reductions of fragments along a logical axis, with communication derived from ownership.

``f.sum(axis=1)`` combines every value of a row of the logical tile. Who must talk to whom
follows from the fragment's :class:`~tylo.tile.ownership.Ownership` alone; :class:`ReductionPlan`
works it out on the host, in three steps:

1. **within a thread**: the thread's slots that differ only along ``axis`` are folded
   (one group per kept coordinate) *pairwise*, ``(v0 + v1) + (v2 + v3)``, so the
   dependency chain is ``ceil(log2(n))`` operations for ``n`` values, not ``n - 1``
   (:func:`fold_pairwise`, :attr:`ReductionPlan.fold_depth`);
2. **within a warp**: lanes that hold the same kept coordinates differ in a set of lane
   bits (the thread modes along ``axis`` below the warp size); one butterfly shuffle
   (``shfl.sync.bfly``) per bit combines them, after which every such lane holds the result.
   The MMA accumulator's rows are spread over the 4 lanes of a quad: 2 shuffles;
3. **across warps** (thread modes along ``axis`` at or above the warp size), in two
   levels through a shared ``scratch`` that the caller allocates
   (:attr:`ReductionPlan.scratch_elements` elements; :func:`reduction_scratch`): every
   lane writes its warp's partial to element ``k * warps + w`` (``k`` the index of the
   kept coordinate in the reduced tile, ``w`` the warp's digit along ``axis``; the lanes
   of a warp that share ``k`` hold the same partial, so their writes agree and need no
   predicate); one barrier; then each lane reads the partial of one warp, chosen by its
   lane bits along ``axis`` (warp ``lane % warps`` when a warp's 32 lanes share the row),
   and the lanes combine them with ``log2(warps)`` more butterflies
   (:attr:`~ReductionPlan.exchange_masks`). One shared load per lane and reduction,
   whatever the number of warps. When the row spans fewer lane bits than ``log2(warps)``
   (or ``warps`` is not a power of two) each lane reads
   :attr:`~ReductionPlan.partials_per_lane` partials and folds them pairwise first.

**Barriers.** The step between warps has one barrier between the writes and the reads,
and (``sync=True``, the default) one before the writes, so that a scratch still being
read by a previous reduction is not overwritten. ``sync=False`` drops the leading barrier;
it is safe when every reader of the scratch's previous contents has passed another
barrier since: e.g. two scratch arrays used alternately (a softmax's maximum in one, its
sum in the other, also across iterations of a loop that does both), where each
reduction's own barrier protects the other array. A single scratch reused by consecutive
reductions (or by one reduction in a loop) needs ``sync=True``.

The kernel-side step (``f.reduce(...)``, :func:`tylo.tile.fragment.reduce`) lives with the
fragments it builds, in :mod:`tylo.tile.fragment`; this module holds the host-side recipe.

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

from tylo.tile.ownership import Ownership, OwnershipError

__all__ = [
    "REDUCTION_OPS",
    "ReductionError",
    "ReductionPlan",
    "fold_pairwise",
    "reduction_plan",
    "reduction_scratch",
]

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
    the input slots folded in the thread, in order), ``fold_depth``, ``lane_masks``
    (butterfly XOR masks, in order), ``warp_modes`` (``(radix, extent)`` of the
    thread-index digits along ``axis`` at or above the warp size), ``warps`` (how many
    warps combine: their product), ``scratch_elements``, ``exchange_masks`` and
    ``partials_per_lane`` (the cross-warp step's second level).

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
        """Shared elements the cross-warp step needs (0 when the warps do not combine): one
        partial per warp for every element of the reduced tile."""
        if self.warps == 1:
            return 0
        n = 1
        for s in self.result.shape:
            n *= s
        return n * self.warps

    @functools.cached_property
    def exchange_masks(self) -> tuple[int, ...]:
        """Butterfly masks of the cross-warp step's second level: lanes that differ in
        these bits share a kept coordinate, so after reading different warps' partials
        they combine them by shuffles. The first ``log2(warps)`` of :attr:`lane_masks`
        (all of them when the row spans fewer lane bits); none when ``warps`` is 1 or not
        a power of two."""
        w = self.warps
        if w == 1 or not _pow2(w):
            return ()
        return self.lane_masks[: w.bit_length() - 1]

    @property
    def partials_per_lane(self) -> int:
        """Partials each lane reads from the scratch (then folds pairwise) before the
        :attr:`exchange_masks` butterflies: ``warps / 2**len(exchange_masks)``; 0 when
        the warps do not combine."""
        if self.warps == 1:
            return 0
        return self.warps >> len(self.exchange_masks)

    @property
    def fold_depth(self) -> int:
        """Dependent operations of the in-thread fold: ``ceil(log2(n))`` for the largest
        group of ``n`` slots (:func:`fold_pairwise`)."""
        n = max(len(g) for g in self.groups)
        return (n - 1).bit_length()

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

    def exchange_digit(self, thread: Any) -> Any:
        """The warp (digit along ``axis``) whose partial lane ``thread % 32`` reads first:
        the thread's bits of :attr:`exchange_masks`, as a number (``lane % warps`` when
        they are the lowest lane bits); it then reads every ``2**len(exchange_masks)``-th
        warp after it."""
        import sympy

        masks = self.exchange_masks
        if not masks:
            return 0
        static = type(thread) is int
        lane = thread % WARP_SIZE if static else sympy.Mod(thread, WARP_SIZE)
        low = masks[0]
        if masks == tuple(low << i for i in range(len(masks))):  # consecutive lane bits
            n = 1 << len(masks)
            return (lane // low) % n if static else sympy.Mod(sympy.floor(lane / low), n)
        out: Any = 0
        for i, m in enumerate(masks):
            bit = (lane // m) % 2 if static else sympy.Mod(sympy.floor(lane / m), 2)
            out = out + bit * (1 << i)
        return out

    def scratch_slots(self, thread: Any, slot: int) -> tuple[Any, list[Any]]:
        """Where thread ``thread``'s result slot ``slot`` goes through the scratch: the
        element its partial is written to, and the elements it reads back (in folding
        order). Index expressions for a symbolic thread."""
        k = self.result.tv(thread, slot) * self.warps
        first = self.exchange_digit(thread)
        step = 1 << len(self.exchange_masks)
        reads = [k + first + q * step for q in range(self.partials_per_lane)]
        return k + self.warp_digit(thread), reads

    # -- host simulation -------------------------------------------------------------------

    def simulate(self, op: Callable[[Any, Any], Any], data: Sequence[Sequence[Any]]) -> list:
        """Run the recipe on the host: ``data[thread][slot]`` -> ``out[thread][slot']``,
        combining with ``op`` exactly as the kernel does, in the same order (tests
        compare it with a direct reduction over coordinates). Raises
        :class:`ReductionError` if two lanes would write different partials to one
        scratch element (a recipe that does not hold for this ownership)."""
        own = self.ownership
        n = own.threads
        part = [[fold_pairwise(op, [data[t][i] for i in g]) for g in self.groups] for t in range(n)]
        for mask in self.lane_masks:
            part = [
                [op(part[t][j], part[t ^ mask][j]) for j in range(len(part[t]))] for t in range(n)
            ]
        if self.warps == 1:
            return part
        scratch: dict[int, Any] = {}
        for t in range(n):
            for j, val in enumerate(part[t]):
                at, _ = self.scratch_slots(t, j)
                if at in scratch and scratch[at] != val:
                    raise ReductionError(
                        f"reduce along axis {self.axis} of {self.ownership.label}: threads "
                        f"write different partials to scratch element {at}"
                    )
                scratch[at] = val
        out = [
            [
                fold_pairwise(op, [scratch[i] for i in self.scratch_slots(t, j)[1]])
                for j in range(len(part[t]))
            ]
            for t in range(n)
        ]
        for mask in self.exchange_masks:
            out = [[op(out[t][j], out[t ^ mask][j]) for j in range(len(out[t]))] for t in range(n)]
        return out


@functools.lru_cache(maxsize=512)
def reduction_plan(ownership: Ownership, axis: int) -> ReductionPlan:
    """The (cached) :class:`ReductionPlan` of ``ownership`` along ``axis``."""
    return ReductionPlan(ownership, axis)


def fold_pairwise(op: Callable[[Any, Any], Any], values: Sequence[Any]) -> Any:
    """``values`` combined with ``op`` as a balanced tree: neighbours pairwise, then the
    pairs' results pairwise, an odd one out carried to the end of the next round. A
    dependency chain of ``ceil(log2(n))`` operations for ``n`` values (a sequential fold
    has ``n - 1``), for the same number of operations.

    >>> fold_pairwise(lambda a, b: f"({a}+{b})", ["a", "b", "c", "d", "e"])
    '(((a+b)+(c+d))+e)'
    """
    vals = list(values)
    if not vals:
        raise ReductionError("fold_pairwise: no values to fold")
    while len(vals) > 1:
        pairs = [op(vals[k], vals[k + 1]) for k in range(0, len(vals) - 1, 2)]
        vals = pairs + vals[len(vals) - len(vals) % 2 :]
    return vals[0]


def reduction_scratch(
    ownership: Ownership, axis: int, dtype: Any, *, name: str = "reduce_scratch"
) -> Any:
    """Static shared memory for reducing fragments of ``ownership`` along ``axis`` across
    warps (``scratch_elements`` elements of ``dtype``), or None when the reduction stays
    within warps; inside a kernel. Allocate one per reduction that may be in flight at once
    (see the module docstring on ``sync``)."""
    from tylo.kernel.memory import shared

    n = reduction_plan(ownership, axis).scratch_elements
    return shared(dtype, n, name=name) if n else None
