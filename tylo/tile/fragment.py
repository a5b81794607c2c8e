"""Register fragments: each thread's values plus the ownership saying which they are.

A :class:`Fragment` is what a thread holds of a distributed tile: ``values`` (one kernel
value per value slot) and an :class:`~tylo.tile.ownership.Ownership` mapping ``(thread, slot)``
to a logical coordinate. Elementwise operations keep the ownership; they go through the
tracer's single elementwise funnel (``__tylo_elementwise__``), so arithmetic, comparisons,
``tylo.where``, ``tylo.exp``, ``tylo.maximum``... all broadcast over fragments:

- a scalar (Python number, kernel Value) meets every slot;
- two fragments combine slot by slot when their ownerships are equal, and broadcast when
  one has extent 1 on an axis the other has (a reduced row against the full tile): the
  slot each thread needs is found from the ownerships (:func:`~tylo.tile.ownership.broadcast_map`).

Fragments are loop-carried through ``tylo.range`` loops by ordinary rebinding (they
implement the tracer's flatten protocol: the values are the leaves, the ownership the
static structure). Reductions along a logical axis (``f.max(axis=1)``) live in
:mod:`tylo.tile.reduce`. A fragment can also hold *packed* registers: 32-bit values each
carrying two consecutive 16-bit elements (slots ``2i`` and ``2i+1``), the form ``ldmatrix``
produces and ``mma.sync`` consumes (PTX ISA 9.7.14.5.8, "Matrix Fragments for
mma.m16n8k16"); :meth:`Fragment.pack` and :meth:`Fragment.unpack` convert.

Outside a kernel trace the values may be plain Python numbers; operations then compute in
Python (host emulation, used by tests and documentation).
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Sequence
from typing import Any

from tylo import dtypes as dt
from tylo.hostmath import HOST_MATH
from tylo.tile.ownership import Ownership, OwnershipError, broadcast_map
from tylo.tile.reduce import (
    REDUCTION_OPS,
    ReductionError,
    ReductionPlan,
    fold_pairwise,
    reduction_plan,
)
from tylo.tile.views import SharedTile

__all__ = ["Fragment", "FragmentError", "full", "ptx", "reduce", "zeros"]


class FragmentError(OwnershipError):
    """A fragment operation whose operands do not fit together."""


def _is_value(x: Any) -> bool:
    from tylo.kernel.values import Value

    return isinstance(x, Value)


def _tracing() -> bool:
    from tylo.kernel.context import current_or_none

    return current_or_none() is not None


# host emulation of the funnel's operations (outside a trace, for plain numbers)
_HOST: dict[str, Callable[..., Any]] = {
    "add": operator.add,
    "sub": operator.sub,
    "mul": operator.mul,
    "truediv": operator.truediv,
    "floordiv": operator.floordiv,
    "mod": operator.mod,
    "neg": operator.neg,
    "abs": abs,
    "and": operator.and_,
    "or": operator.or_,
    "xor": operator.xor,
    "shl": operator.lshift,
    "shr": operator.rshift,
    "invert": operator.invert,
    "lt": operator.lt,
    "le": operator.le,
    "gt": operator.gt,
    "ge": operator.ge,
    "eq": operator.eq,
    "ne": operator.ne,
    "maximum": max,
    "minimum": min,
    **HOST_MATH,
    "fma": lambda a, b, c: a * b + c,
    "select": lambda c, a, b: a if c else b,
}


def _apply_scalar(op: str, args: Sequence[Any]) -> Any:
    """One slot of an elementwise operation: the tracer's funnel for kernel values, the
    host emulation for plain numbers."""
    if any(_is_value(a) for a in args):
        from tylo.kernel.values import elementwise

        return elementwise(op, *args)
    fn = _HOST.get(op)
    if fn is None:
        raise FragmentError(f"fragment: operation {op!r} has no host emulation")
    return fn(*args)


class Fragment:
    """``values`` held by each thread, placed by ``ownership``.

    >>> from tylo.layouts.tv import MMA_M16N8K16_C_TV
    >>> own = Ownership(MMA_M16N8K16_C_TV, (16, 8))
    >>> f = Fragment([1.0, 2.0, 3.0, 4.0], own)
    >>> (2 * f + 1).values, f.coords(0)
    ([3.0, 5.0, 7.0, 9.0], [(0, 0), (0, 1), (8, 0), (8, 1)])
    """

    __slots__ = ("ownership", "packed", "values")
    __hash__ = object.__hash__  # identity; == builds an elementwise comparison

    def __init__(self, values: Sequence[Any], ownership: Ownership, *, packed: Any = None) -> None:
        if not isinstance(ownership, Ownership):
            raise FragmentError(
                f"Fragment: ownership must be an Ownership, got {type(ownership).__name__}"
            )
        values = list(values)
        want = ownership.values // 2 if packed is not None else ownership.values
        if packed is not None:
            packed = dt.dtype_of(packed)
            if packed.bits != 16 or ownership.values % 2:
                raise FragmentError(
                    f"Fragment: packed registers hold two 16-bit elements; got {packed} over "
                    f"{ownership.values} slots"
                )
        if len(values) != want:
            raise FragmentError(
                f"Fragment: {len(values)} values given, but the ownership "
                f"{ownership.label} has {ownership.values} slots per thread"
                + (" (packed: two per register)" if packed is not None else "")
            )
        self.values = values
        self.ownership = ownership
        self.packed = packed

    # -- the tracer's flatten protocol (loop-carried fragments) ---------------------------

    def __tylo_flatten__(self) -> tuple[list[Any], Any]:
        return self.values, (self.ownership, self.packed)

    @classmethod
    def __tylo_unflatten__(cls, aux: Any, children: Sequence[Any]) -> Fragment:
        ownership, packed = aux
        return cls(list(children), ownership, packed=packed)

    # -- the elementwise funnel ------------------------------------------------------------

    @classmethod
    def __tylo_elementwise__(cls, op: str, args: Sequence[Any]) -> Fragment:
        if op.startswith("shfl_"):  # tylo.shfl_xor(fragment, ...): every slot shuffled
            from tylo.kernel.intrinsics import _shuffle

            f, rest = args[0], tuple(args[1:])
            return Fragment([_shuffle(op[5:], v, *rest) for v in f.values], f.ownership)
        frags = [a for a in args if isinstance(a, Fragment)]
        for f in frags:
            if f.packed is not None:
                raise FragmentError(
                    f"{op} on a fragment of packed {f.packed} registers: unpack it first "
                    "(fragment.unpack())"
                )
        # the result takes the ownership with the most values (the broadcast target)
        target = max(
            frags, key=lambda f: (f.ownership.values, -sum(s == 1 for s in f.ownership.shape))
        ).ownership
        maps = []
        for a in args:
            if isinstance(a, Fragment):
                maps.append(broadcast_map(target, a.ownership))
            else:
                maps.append(None)
        out = []
        for i in range(target.values):
            ops = [a.values[m[i]] if m is not None else a for a, m in zip(args, maps)]
            out.append(_apply_scalar(op, ops))
        return Fragment(out, target)

    def _ew(self, op: str, *args: Any) -> Fragment:
        return Fragment.__tylo_elementwise__(op, args)

    def __add__(self, o: Any) -> Fragment:
        return self._ew("add", self, o)

    def __radd__(self, o: Any) -> Fragment:
        return self._ew("add", o, self)

    def __sub__(self, o: Any) -> Fragment:
        return self._ew("sub", self, o)

    def __rsub__(self, o: Any) -> Fragment:
        return self._ew("sub", o, self)

    def __mul__(self, o: Any) -> Fragment:
        return self._ew("mul", self, o)

    def __rmul__(self, o: Any) -> Fragment:
        return self._ew("mul", o, self)

    def __truediv__(self, o: Any) -> Fragment:
        return self._ew("truediv", self, o)

    def __rtruediv__(self, o: Any) -> Fragment:
        return self._ew("truediv", o, self)

    def __floordiv__(self, o: Any) -> Fragment:
        return self._ew("floordiv", self, o)

    def __mod__(self, o: Any) -> Fragment:
        return self._ew("mod", self, o)

    def __neg__(self) -> Fragment:
        return self._ew("neg", self)

    def __pos__(self) -> Fragment:
        return self

    def __abs__(self) -> Fragment:
        return self._ew("abs", self)

    def __and__(self, o: Any) -> Fragment:
        return self._ew("and", self, o)

    def __rand__(self, o: Any) -> Fragment:
        return self._ew("and", o, self)

    def __or__(self, o: Any) -> Fragment:
        return self._ew("or", self, o)

    def __ror__(self, o: Any) -> Fragment:
        return self._ew("or", o, self)

    def __xor__(self, o: Any) -> Fragment:
        return self._ew("xor", self, o)

    def __invert__(self) -> Fragment:
        return self._ew("invert", self)

    def __lt__(self, o: Any) -> Fragment:
        return self._ew("lt", self, o)

    def __le__(self, o: Any) -> Fragment:
        return self._ew("le", self, o)

    def __gt__(self, o: Any) -> Fragment:
        return self._ew("gt", self, o)

    def __ge__(self, o: Any) -> Fragment:
        return self._ew("ge", self, o)

    def __eq__(self, o: object) -> Fragment:
        return self._ew("eq", self, o)  # type: ignore[override]

    def __ne__(self, o: object) -> Fragment:
        return self._ew("ne", self, o)  # type: ignore[override]

    def __bool__(self) -> bool:
        raise FragmentError(
            "a fragment has no single truth value; reduce it (f.max(axis=...)) or select "
            "elementwise with tylo.where"
        )

    def where(self, a: Any, b: Any) -> Fragment:
        """Elementwise select: ``a`` where this (bool) fragment holds, else ``b``."""
        return self._ew("select", self, a, b)

    def map(self, fn: Callable[[Any], Any]) -> Fragment:
        """Apply ``fn`` to every value (``fn`` takes and returns one kernel value); the
        ownership is kept."""
        if self.packed is not None:
            raise FragmentError("map over packed registers: unpack the fragment first")
        return Fragment([fn(v) for v in self.values], self.ownership)

    def ptx(self, instruction: str, *args: Any, **kwargs: Any) -> Fragment:
        """``tylo.ptx(instruction, slot, *args)`` for every slot (fragment arguments
        broadcast like elementwise operands): ``f.ptx("tanh.approx.f32")``."""
        return ptx(instruction, self, *args, **kwargs)

    def map_slots(self, fn: Callable[[int, Any], Any]) -> Fragment:
        """Apply ``fn(slot, value)`` to every value; the ownership is kept."""
        return Fragment([fn(i, v) for i, v in enumerate(self.values)], self.ownership)

    # -- conversion ------------------------------------------------------------------------

    @property
    def dtype(self) -> Any:
        """The values' dtype (kernel values), or ``u32`` for packed registers."""
        if self.packed is not None:
            return dt.u32
        v = self.values[0] if self.values else None
        return v.dtype if _is_value(v) else type(v)

    def to(self, dtype: Any) -> Fragment:
        """Every value converted to ``dtype`` (round to nearest even for floats)."""
        d = dt.dtype_of(dtype)
        return self.map(lambda v: v.to(d) if _is_value(v) else v)

    def pack(self, dtype: Any) -> Fragment:
        """Convert to ``dtype`` (bf16 or f16) and pack slots ``2i, 2i+1`` into one 32-bit
        register (``cvt.rn.bf16x2.f32`` / ``cvt.rn.f16x2.f32``, PTX ISA 9.7.9.21, sm_80),
        the register form ``mma.sync`` operands take."""
        d = dt.dtype_of(dtype)
        if d not in (dt.bf16, dt.f16):
            raise FragmentError(f"pack: registers pack bf16 or f16 pairs, not {d}")
        if self.packed is not None:
            raise FragmentError("pack: the fragment is already packed")
        if self.ownership.values % 2:
            raise FragmentError(f"pack: {self.ownership.values} slots per thread cannot be paired")
        from tylo.kernel.context import current
        from tylo.kernel.values import Value, convert
        from tylo.nvgpu.instructions import cvt_pack_f32x2

        b = current().builder
        regs = []
        for i in range(0, len(self.values), 2):
            lo, hi = (convert(v, dt.f32) for v in self.values[i : i + 2])
            regs.append(Value(dt.u32, cvt_pack_f32x2(b, lo.use(), hi.use(), d)))
        return Fragment(regs, self.ownership, packed=d)

    def unpack(self) -> Fragment:
        """Packed registers split back into 16-bit values (slot ``2i`` is the low half)."""
        if self.packed is None:
            return self
        from llvmlite import ir

        from tylo.kernel.context import current
        from tylo.kernel.values import Value

        b = current().builder
        out = []
        for r in self.values:
            x = r.use()
            out.append(Value(self.packed, b.trunc(x, ir.IntType(16))))
            out.append(Value(self.packed, b.trunc(b.lshr(x, ir.IntType(32)(16)), ir.IntType(16))))
        return Fragment(out, self.ownership)

    # -- ownership queries -----------------------------------------------------------------

    def coords(self, thread: Any) -> list[tuple]:
        """The coordinates ``thread`` holds, in slot order."""
        return self.ownership.coords(thread)

    @property
    def shape(self) -> tuple[int, ...]:
        """The logical tile's shape."""
        return self.ownership.shape

    def transpose(self, axes: tuple[int, ...] | None = None) -> Fragment:
        """The same registers seen as the transposed tile (no data movement)."""
        return Fragment(self.values, self.ownership.transpose(axes), packed=self.packed)

    def __len__(self) -> int:
        return len(self.values)

    def __getitem__(self, slot: int) -> Any:
        return self.values[slot]

    def __iter__(self) -> Any:
        return iter(self.values)

    def __repr__(self) -> str:
        kind = f" packed {self.packed}" if self.packed is not None else ""
        return f"Fragment({len(self.values)} values{kind}, {self.ownership.label})"

    # -- reductions (tylo.tile.reduce) ----------------------------------------------------------

    def reduce(self, op: str, axis: int, **kwargs: Any) -> Fragment:
        """Reduce along ``axis`` with ``op`` ('add', 'maximum', 'minimum', ...): the
        thread's values folded pairwise, then shuffles and, across warps, shared memory
        (``scratch=``, ``sync=``), as the ownership requires; see
        :func:`tylo.tile.fragment.reduce`."""
        return reduce(self, op, axis, **kwargs)

    def sum(self, axis: int, **kwargs: Any) -> Fragment:
        """The sum along ``axis`` (see :func:`tylo.tile.fragment.reduce`)."""
        return self.reduce("add", axis, **kwargs)

    def max(self, axis: int, **kwargs: Any) -> Fragment:
        """The maximum along ``axis`` (NaN-ignoring ``max.f32``)."""
        return self.reduce("maximum", axis, **kwargs)

    def min(self, axis: int, **kwargs: Any) -> Fragment:
        """The minimum along ``axis``."""
        return self.reduce("minimum", axis, **kwargs)


def ptx(instruction: str, *args: Any, **kwargs: Any) -> Any:
    """:func:`tylo.ptx` broadcast over fragments: one instruction per slot, fragment
    operands combined as elementwise operations combine them (equal or broadcastable
    ownerships); plain operands are passed to every slot."""
    from tylo.kernel.intrinsics import ptx as _ptx

    frags = [a for a in args if isinstance(a, Fragment)]
    if not frags:
        return _ptx(instruction, *args, **kwargs)
    target = max(frags, key=lambda f: f.ownership.values).ownership
    maps = [broadcast_map(target, a.ownership) if isinstance(a, Fragment) else None for a in args]
    out = []
    for i in range(target.values):
        ops = [a.values[m[i]] if m is not None else a for a, m in zip(args, maps)]
        out.append(_ptx(instruction, *ops, **kwargs))
    if out and isinstance(out[0], tuple):
        return tuple(Fragment([o[j] for o in out], target) for j in range(len(out[0])))
    return Fragment(out, target)


def full(ownership: Ownership, value: Any, dtype: Any = None) -> Fragment:
    """A fragment whose every slot holds ``value`` (as ``dtype`` inside a kernel).

    >>> from tylo.layouts.tv import MMA_M16N8K16_C_TV
    >>> full(Ownership(MMA_M16N8K16_C_TV, (16, 8)), 1.5).values
    [1.5, 1.5, 1.5, 1.5]
    """
    if _tracing() and dtype is not None:
        from tylo.kernel.values import as_value

        v = as_value(value, dt.dtype_of(dtype))
        return Fragment([v] * ownership.values, ownership)
    return Fragment([value] * ownership.values, ownership)


def zeros(ownership: Ownership, dtype: Any = dt.f32) -> Fragment:
    """A fragment of zeros (``dtype`` defaults to f32)."""
    d = dt.dtype_of(dtype)
    return full(ownership, 0.0 if d.is_float else 0, d)


# -- the kernel-side reduction step (the recipe is tylo.tile.reduce.ReductionPlan) ---------


def _combine(op: str, a: Any, b: Any) -> Any:
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

    ``scratch`` (a shared tensor, e.g. from :func:`reduction_scratch`, or a
    :class:`~tylo.tile.access.SharedTile`, of at least ``plan.scratch_elements`` elements of the
    fragment's dtype) is needed only when warps combine; ``tid`` is the thread's index in
    the ownership (default: the block's linear thread index; lanes are ``tid % 32``);
    ``sync=False`` drops the leading barrier of the cross-warp step (see the module
    docstring for when that is safe).
    """
    if not isinstance(fragment, Fragment):
        raise ReductionError(f"reduce: expected a Fragment, got {type(fragment).__name__}")
    if op not in REDUCTION_OPS:
        raise ReductionError(f"reduce: op must be one of {REDUCTION_OPS}, got {op!r}")
    if fragment.packed is not None:
        raise ReductionError("reduce: unpack the fragment first (fragment.unpack())")
    plan = reduction_plan(fragment.ownership, axis)
    combine = functools.partial(_combine, op)
    vals = [fold_pairwise(combine, [fragment.values[i] for i in g]) for g in plan.groups]
    if (plan.lane_masks or plan.warps > 1) and not _all_values(vals):
        raise ReductionError(
            f"reduce along axis {axis} of {fragment.ownership.label}: lanes and warps "
            "exchange values by shuffles and shared memory, so this reduction runs inside a "
            "kernel only (ReductionPlan.simulate runs the recipe on the host)"
        )
    if plan.lane_masks:
        from tylo.kernel.intrinsics import shfl_xor

        for mask in plan.lane_masks:
            vals = [_combine(op, v, shfl_xor(v, mask)) for v in vals]
    if plan.warps > 1:
        vals = _across_warps(plan, op, vals, scratch, tid, sync)
    return Fragment(vals, plan.result)


def _all_values(vals: list) -> bool:
    from tylo.kernel.values import Value

    return all(isinstance(v, Value) for v in vals)


def _scratch_tensor(plan: ReductionPlan, scratch: Any, dtype: Any) -> tuple[Any, Any]:
    """(a flat shared tensor, the element offset of the scratch in it), checked."""
    from tylo.backend.ir import ADDRSPACE_SHARED
    from tylo.kernel.memory import Tensor
    from tylo.layouts import cosize

    what = f"reduce along axis {plan.axis} of {plan.ownership.label}"
    need = plan.scratch_elements
    if scratch is None:
        raise ReductionError(
            f"{what} combines {plan.warps} warps through shared memory: pass scratch= (a "
            f"shared tensor of at least {need} elements; tylo.tile.reduce.reduction_scratch "
            "allocates one, ReductionPlan.scratch_elements says how many)"
        )
    base: Any = 0
    size = None
    if isinstance(scratch, SharedTile):
        base, layout, tensor = scratch.base, scratch.layout, scratch.storage
        size = cosize(layout)
    elif isinstance(scratch, Tensor) and scratch.addrspace == ADDRSPACE_SHARED:
        tensor = scratch
        if scratch.layout is not None:
            size = cosize(scratch.layout)
    else:
        raise ReductionError(
            f"{what}: scratch must be shared memory (tylo.shared, tylo.dynamic_shared or a "
            f"SharedTile), got {scratch!r}"
        )
    if tensor.dtype is not dtype:
        raise ReductionError(
            f"{what}: the scratch holds {tensor.dtype} elements, but the partials are "
            f"{dtype}; allocate the scratch as {dtype}"
        )
    if type(size) is int and size < need:
        raise ReductionError(
            f"{what}: the scratch has {size} elements, the recipe needs {need} "
            f"({plan.warps} warps x {need // plan.warps} reduced elements)"
        )
    flat = Tensor(
        tensor.dtype, tensor.base, addrspace=tensor.addrspace, align=tensor.align, name="scratch"
    )
    return flat, base


def _across_warps(
    plan: ReductionPlan, op: str, vals: list, scratch: Any, tid: Any, sync: bool
) -> list:
    """The cross-warp step (module docstring, step 3): every lane writes its warp's
    partial, one barrier, each lane reads :attr:`~ReductionPlan.partials_per_lane`
    partials and the lanes combine them with the :attr:`~ReductionPlan.exchange_masks`
    butterflies."""
    from tylo.kernel.intrinsics import linear_thread_idx, shfl_xor, sync_threads

    dtype = vals[0].dtype
    flat, base = _scratch_tensor(plan, scratch, dtype)
    t = linear_thread_idx() if tid is None else tid
    if sync:
        sync_threads()
    reads = []
    for j, v in enumerate(vals):
        at, mine = plan.scratch_slots(t, j)
        flat[base + at] = v  # lanes that share a slot hold the same partial
        reads.append(mine)
    sync_threads()
    combine = functools.partial(_combine, op)
    out = [fold_pairwise(combine, [flat[base + i] for i in mine]) for mine in reads]
    for mask in plan.exchange_masks:
        out = [_combine(op, v, shfl_xor(v, mask)) for v in out]
    return out
