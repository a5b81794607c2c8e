"""Warpgroup matrix multiply-accumulate (Hopper, sm_90a): the ``wgmma`` atom and its explicit
completion.

A :class:`WarpgroupMMAAtom` is one ``wgmma.mma_async.sync.aligned.m64nNk16.f32.{bf16|f16}``
(PTX ISA 9.7.15.5.2): the 128 threads of a warpgroup multiply a 64x16 A by a 16xN B into a
64xN f32 accumulator. A comes from shared memory (a descriptor) or from registers (the register
A form, the ownership :data:`WGMMA_M64K16_A_TV`); B always from shared memory. The accumulator
is a :class:`~tylo.tile.fragment.Fragment` whose ownership is the atom's ``c``
(:func:`~tylo.layouts.tv.wgmma_m64_c_tv`), so reductions, elementwise epilogues and stores by
ownership work on it.

Completion is explicit, as in the PTX ISA (9.7.15.6): :func:`fence` before the first
``mma_async`` that reads registers written since (``wgmma.fence``), :func:`commit_group` to
close a group of issued MMAs, :func:`wait_group` to wait until at most ``n`` groups are
pending. :func:`mma_async` returns a :class:`PendingAccumulator`: reading it elementwise is a
trace-time error until :func:`wait_group` hands back the fragment.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tylo import dtypes as dt
from tylo.dtypes import DType
from tylo.layouts import Layout
from tylo.layouts.tv import WARPGROUP_SIZE, wgmma_m64_c_tv
from tylo.nvgpu.errors import PlanError, as_int, mma_dtypes
from tylo.nvgpu.warpgroup.descriptor import MatrixDescriptor, derive_descriptor
from tylo.tile.ownership import Ownership

__all__ = [
    "WGMMA_M64K16_A_TV",
    "PendingAccumulator",
    "PendingAccumulatorError",
    "WarpgroupMMAAtom",
    "check_warpgroups",
    "commit_group",
    "fence",
    "fence_shared_to_async",
    "mma_async",
    "operand_descriptor",
    "wait_group",
]

# The register A of wgmma m64nNk16 (PTX ISA 9.7.15.5.1.1, "Register fragments"): warp w of the
# warpgroup holds rows 16w..16w+15 exactly as mma.m16n8k16 holds its A (tv.MMA_M16N8K16_A_TV).
# Index m + 64*k; value v = v0 + 2*v1 + 4*v2: m = 16*warp + groupID + 8*v1,
# k = 2*threadID_in_group + v0 + 8*v2.
WGMMA_M64K16_A_TV = Layout(((4, 8, 4), (2, 2, 2)), ((128, 1, 16), (64, 8, 512)))

_SOURCES = ("shared", "registers")


@dataclass(frozen=True)
class WarpgroupMMAAtom:
    """One ``wgmma``: ``shape = (64, N, 16)`` with N a multiple of 8 in [8, 256], input
    ``dtype`` bf16 or f16, f32 accumulator, and A from ``a = "shared"`` or ``"registers"``.

    >>> atom = WarpgroupMMAAtom((64, 128, 16), dt.bf16)
    >>> atom.instruction, atom.c.values
    ('wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16', 64)
    """

    shape: tuple[int, int, int] = (64, 64, 16)
    dtype: DType = dt.bf16
    acc: DType = dt.f32
    a: str = "shared"

    min_arch = (9, 0)

    def __post_init__(self) -> None:
        shape = tuple(self.shape) if isinstance(self.shape, (tuple, list)) else self.shape
        if type(shape) is tuple:
            shape = tuple(v if (i := as_int(v)) is None else i for v in shape)
        ok = (
            type(shape) is tuple
            and len(shape) == 3
            and all(type(v) is int for v in shape)
            and shape[0] == 64
            and shape[2] == 16
            and 8 <= shape[1] <= 256
            and shape[1] % 8 == 0
        )
        if not ok:
            raise PlanError(
                f"WarpgroupMMAAtom: shape must be (64, N, 16) with N a multiple of 8 in "
                f"[8, 256] (PTX ISA 9.7.15.5.2, 16-bit inputs), got {self.shape!r}"
            )
        d, acc = mma_dtypes("WarpgroupMMAAtom", self.dtype, self.acc)
        if type(self.a) is not str or self.a not in _SOURCES:
            raise PlanError(f"WarpgroupMMAAtom: a must be one of {_SOURCES}, got {self.a!r}")
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "dtype", d)
        object.__setattr__(self, "acc", acc)

    @property
    def n(self) -> int:
        return self.shape[1]

    @property
    def instruction(self) -> str:
        return f"wgmma.mma_async.sync.aligned.m64n{self.n}k16.f32.{self.dtype}.{self.dtype}"

    @property
    def c(self) -> Ownership:
        """The accumulator's ownership over (64, N): N/2 f32 per thread, 128 threads."""
        return Ownership(wgmma_m64_c_tv(self.n), (64, self.n), f"wgmma m64n{self.n}k16 C")

    @property
    def a_registers(self) -> Ownership:
        """The register A's ownership over (64, 16): 8 values per thread (4 packed)."""
        return Ownership(WGMMA_M64K16_A_TV, (64, 16), "wgmma m64k16 A (registers)")

    threads = WARPGROUP_SIZE

    def __str__(self) -> str:
        return f"WarpgroupMMAAtom(m64n{self.n}k16, {self.dtype}, A from {self.a})"


class PendingAccumulatorError(PlanError):
    """A wgmma accumulator used before :func:`wait_group` completed it."""


class PendingAccumulator:
    """The accumulator of issued, not yet completed ``wgmma``: only :func:`mma_async` (to
    chain more MMAs into it) and :func:`wait_group` accept it."""

    __slots__ = ("atom", "fragment", "group")

    def __init__(self, atom: WarpgroupMMAAtom, fragment: Any) -> None:
        from tylo.tile.fragment import Fragment

        if not isinstance(atom, WarpgroupMMAAtom) or not isinstance(fragment, Fragment):
            raise PlanError(
                f"PendingAccumulator: expected a WarpgroupMMAAtom and a Fragment, got "
                f"{atom!r}, {fragment!r}"
            )
        self.atom = atom
        self.fragment = fragment
        self.group: int | None = None  # set by commit_group: the group it completes with

    def _refuse(self, *_: Any, **__: Any) -> Any:
        raise PendingAccumulatorError(
            f"the accumulator of {self.atom} is pending (wgmma.mma_async is asynchronous): "
            "call tylo.nvgpu.warpgroup.mma.wait_group(n, acc) before reading it"
        )

    __getitem__ = __iter__ = __len__ = __add__ = __radd__ = __mul__ = __rmul__ = _refuse
    __sub__ = __rsub__ = __truediv__ = __neg__ = __bool__ = _refuse

    def __getattr__(self, name: str) -> Any:
        self._refuse()

    # Carried through a tylo.range loop (or a dynamic if): the leaves are the fragment's
    # registers; the static part is the atom and the group's position *relative to* the
    # latest commit, so that a loop whose body issues, commits and waits the same way each
    # iteration (the accumulator stays one group behind the latest commit, say) carries it
    # still pending, and a body that changes that position is refused as a change of
    # structure. The registers stay in flight across the back edge: ptxas keeps the
    # accumulator of chained wgmma in place (it serializes, and says so, if it cannot).
    def __tylo_flatten__(self) -> tuple[list[Any], Any]:
        state = _groups()
        rel = None if self.group is None else state["committed"] - self.group
        return [self.fragment], (self.atom, rel)

    @classmethod
    def __tylo_unflatten__(cls, aux: Any, children: list[Any]) -> PendingAccumulator:
        atom, rel = aux
        out = cls(atom, children[0])
        state = _groups()
        if rel is None:
            state["open"].append(out)
        else:
            out.group = state["committed"] - rel
        return out

    def __repr__(self) -> str:
        return f"PendingAccumulator({self.atom})"


def operand_descriptor(
    tile: Any, rows: int, *, k_offset: int = 0, what: str = "wgmma operand"
) -> MatrixDescriptor:
    """The descriptor of one k-step of a :class:`~tylo.tile.views.SharedTile` operand (see
    :func:`~tylo.nvgpu.warpgroup.descriptor.derive_descriptor`): the (rows, 16) k-step at
    ``k_offset`` must lie inside the tile's extents, the tile (a window) inside its layout,
    and the layout's offsets from the tile's base inside the shared allocation
    (:func:`tylo.nvgpu.bounds.check_region`), or :class:`~tylo.nvgpu.errors.TileBoundsError`
    names the k-step, the extents and the offset."""
    from tylo.nvgpu.bounds import check_region, view_extents
    from tylo.tile.views import SharedTile

    if not isinstance(tile, SharedTile):
        raise PlanError(f"{what}: shared operands must be SharedTiles, got {tile!r}")
    if tile.rank != 2:
        raise PlanError(f"{what}: operand tiles have rank 2 (rows, k), got {tile!r}")
    if any(type(o) is not int for o in tile.origin):
        raise PlanError(
            f"{what}: the window origin {tile.origin} of {tile!r} is not static, so the "
            "descriptor cannot be derived; put a runtime offset in the tile's base instead"
        )
    desc = derive_descriptor(
        tile.layout,
        tile.dtype,
        rows,
        k_offset=k_offset,
        coordinate=tile.coordinate,
        what=what,
        extents=view_extents(tile),
    )
    check_region(what, tile, ((0, rows), (k_offset, k_offset + 16)), access="reads")
    return desc


def _descriptor_value(tile: Any, desc: MatrixDescriptor) -> Any:
    """The 64-bit descriptor of ``tile``'s k-step, built in the kernel (i64 IR value)."""
    from llvmlite import ir

    from tylo.kernel import facts
    from tylo.kernel.context import current
    from tylo.tile.views import shared_address

    b = current().builder
    period = desc.align // tile.dtype.nbytes
    if desc.align > 16 and facts.divides(period, tile.base) is not True:
        raise PlanError(
            f"wgmma: the {desc.swizzle} swizzle needs the tile's start aligned to {desc.align} "
            f"bytes; its element offset {tile.base} is not a proved multiple of {period}"
        )
    if tile.storage.align < desc.align:
        raise PlanError(
            f"wgmma: the {desc.swizzle} swizzle needs shared memory aligned to {desc.align} "
            f"bytes; allocate it with tylo.shared(..., align={desc.align})"
        )
    addr = shared_address(tile.storage, tile.base + desc.start, tile.dtype)
    i64 = ir.IntType(64)
    low = b.and_(b.lshr(b.zext(addr, i64), i64(4)), i64(0x3FFF))
    return b.or_(low, i64(desc.high_bits))


def check_warpgroups(op: str) -> None:
    """Refuse a warpgroup instruction (``.sync.aligned`` over 128 threads) traced for a CTA
    that is not a whole number of warpgroups: the last, partial warpgroup would execute it
    with missing threads (undefined behaviour, PTX ISA 9.7.15.5)."""
    from tylo.kernel.context import current

    bx, by, bz = current().block
    n = bx * by * bz
    if n % WARPGROUP_SIZE:
        raise PlanError(
            f"{op}: the CTA has {n} threads (block {(bx, by, bz)}), not a whole number of "
            f"{WARPGROUP_SIZE}-thread warpgroups; wgmma needs every warpgroup complete: "
            f"launch a multiple of {WARPGROUP_SIZE} threads"
        )


def fence() -> None:
    """``wgmma.fence.sync.aligned`` (PTX ISA 9.7.15.6.1): order this warpgroup's register and
    shared-memory accesses before the ``wgmma`` issued after it."""
    from tylo.nvgpu.instructions import wgmma_fence

    check_warpgroups("wgmma.fence")
    _emit(wgmma_fence)


def fence_shared_to_async() -> None:
    """``fence.proxy.async.shared::cta``: shared memory written by ordinary stores becomes
    visible to ``wgmma``'s operand reads once a barrier (``tylo.sync_threads()``) follows;
    every thread that wrote calls it before the barrier."""
    from tylo.nvgpu.instructions import fence_proxy_async_shared

    _emit(fence_proxy_async_shared)


def _groups() -> dict[str, Any]:
    """This trace's wgmma group bookkeeping: the accumulators issued since the last commit,
    how many groups were committed (in program order, as traced), and the region each
    commit was traced in (``scopes``, one per group)."""
    from tylo.kernel.context import current

    ctx = current()
    state: dict[str, Any] | None = getattr(ctx, "_wgmma_groups", None)
    if state is None:
        state = {"open": [], "committed": 0, "scopes": []}
        ctx._wgmma_groups = state
    return state


def _on_path(scope: Any, here: Any) -> bool:
    """Whether region ``scope`` encloses (or is) region ``here``: code traced in it has run,
    at run time, before code traced now at ``here``. A commit traced in a loop body or a
    branch that has ended may have run any number of times, or not at all."""
    s = here
    while s is not None:
        if s is scope:
            return True
        s = s.parent
    return False


def commit_group() -> None:
    """``wgmma.commit_group.sync.aligned`` (PTX ISA 9.7.15.6.2): close the group of the
    ``wgmma`` issued since the last commit."""
    from tylo.kernel.context import current
    from tylo.nvgpu.instructions import wgmma_commit_group

    check_warpgroups("wgmma.commit_group")
    _emit(wgmma_commit_group)
    state = _groups()
    state["committed"] += 1
    state["scopes"].append(current().scope)
    for acc in state["open"]:
        acc.group = state["committed"]
    state["open"].clear()


def _emit(fn: Any, *args: Any) -> Any:
    from tylo.kernel.context import current
    from tylo.nvgpu.instructions import check_arch

    ctx = current()
    check_arch("wgmma", ctx.target)
    return fn(ctx.builder, *args)


def mma_async(
    atom: WarpgroupMMAAtom, a: Any, b: Any, acc: Any, *, k_offset: int = 0, accumulate: Any = True
) -> PendingAccumulator:
    """Issue ``acc + A*B`` for the k-step at ``k_offset`` of the operand tiles: ``a`` a
    (64, K) SharedTile (or, with ``atom.a == "registers"``, a packed fragment of
    ``atom.a_registers``), ``b`` an (N, K) SharedTile. ``acc`` is a fragment of ``atom.c``
    (or a pending accumulator of the same atom). ``accumulate=False`` ignores ``acc``'s values
    (D = A*B). Returns the pending accumulator; nothing waits."""
    from tylo.kernel.context import current
    from tylo.kernel.values import Value, as_value, convert
    from tylo.nvgpu.instructions import wgmma_mma_async
    from tylo.tile.fragment import Fragment

    if not isinstance(atom, WarpgroupMMAAtom):
        raise PlanError(f"mma_async: expected a WarpgroupMMAAtom, got {atom!r}")
    frag = acc.fragment if isinstance(acc, PendingAccumulator) else acc
    if not isinstance(frag, Fragment) or frag.ownership != atom.c:
        raise PlanError(f"mma_async: the accumulator must be a fragment of {atom}'s ownership c")
    ctx = current()
    check_warpgroups("mma_async")
    desc_b = operand_descriptor(b, atom.n, k_offset=k_offset, what=f"{atom.instruction} B")
    b_val = _descriptor_value(b, desc_b)
    if atom.a == "shared":
        desc_a = operand_descriptor(a, 64, k_offset=k_offset, what=f"{atom.instruction} A")
        a_op: Any = _descriptor_value(a, desc_a)
        trans_a = desc_a.transposed
    else:
        if not isinstance(a, Fragment) or a.ownership != atom.a_registers or a.packed is None:
            raise PlanError(
                "mma_async: a register A must be a packed fragment of atom.a_registers "
                f"(4 registers of two {atom.dtype}), got {a!r}"
            )
        a_op = [r.use() for r in a.values]
        trans_a = None
    if isinstance(accumulate, Value) and accumulate.dtype is dt.bool_:
        scale = accumulate
    elif type(accumulate) is bool:
        scale = as_value(accumulate)
    else:
        raise PlanError(
            f"mma_async: accumulate must be a bool (static) or a runtime bool, got "
            f"{accumulate!r}; write accumulate=(x != 0) for a number"
        )
    _emit(lambda _b: None)  # the architecture check
    out = wgmma_mma_async(
        ctx.builder,
        atom.instruction,
        [convert(v, dt.f32).use() for v in frag.values],
        a_op,
        b_val,
        scale.use(),
        trans_a=trans_a,
        trans_b=desc_b.transposed,
    )
    pending = PendingAccumulator(atom, Fragment([Value(dt.f32, v) for v in out], frag.ownership))
    _groups()["open"].append(pending)
    return pending


def wait_group(n: int, *accumulators: Any) -> Any:
    """``wgmma.wait_group.sync.aligned n`` (PTX ISA 9.7.15.6.3): wait until at most ``n``
    committed groups are pending, and return the given accumulators as fragments (one, or a
    tuple). The accumulators' registers are threaded through the wait, so no read of them can
    be scheduled before it."""
    from tylo.kernel.context import current
    from tylo.kernel.values import Value
    from tylo.nvgpu.instructions import wgmma_wait_group
    from tylo.tile.fragment import Fragment

    if as_int(n) is None or not 0 <= as_int(n) <= 7:  # type: ignore[operator]
        raise PlanError(f"wait_group: n must be a static int in [0, 7], got {n!r}")
    n = as_int(n)  # type: ignore[assignment]
    check_warpgroups("wgmma.wait_group")
    frags = []
    state = _groups()
    for a in accumulators:
        if not isinstance(a, PendingAccumulator):
            raise PlanError(f"wait_group: expected pending accumulators, got {a!r}")
        if a.group is None:
            raise PendingAccumulatorError(
                "wait_group: this accumulator's wgmma was never committed (call "
                "commit_group() after issuing it), so no wait completes it"
            )
        if a.group > state["committed"] - n:
            raise PendingAccumulatorError(
                f"wait_group({n}): this accumulator's group is one of the {n} most recent, "
                f"which may still be in flight after the wait; wait with n <= "
                f"{state['committed'] - a.group}"
            )
        # only the later commits that surely ran on the way here count: not those traced in
        # a loop body or branch that has ended (a loop may run 0 times, a branch not run)
        here = current().scope
        sure = sum(1 for sc in state["scopes"][a.group :] if _on_path(sc, here))
        if sure < n:
            raise PendingAccumulatorError(
                f"wait_group({n}): of the groups committed after this accumulator's, only "
                f"{sure} surely ran before this wait (the others were committed in a loop "
                "or branch that has ended, which may have run no time); the accumulator may "
                f"be one of the {n} most recent groups: wait with n <= {sure}"
            )
        frags.append(a.fragment)
    flat = [v.use() for f in frags for v in f.values]
    out = _emit(wgmma_wait_group, n, flat)
    result, at = [], 0
    for f in frags:
        k = len(f.values)
        result.append(Fragment([Value(dt.f32, v) for v in out[at : at + k]], f.ownership))
        at += k
    if len(result) == 1:
        return result[0]
    return tuple(result)
