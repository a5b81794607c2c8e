"""Warp-level matrix multiply-accumulate: the MMA atom, tiled MMA plans, and ``mma``.

An :class:`MMAAtom` is one ``mma.sync`` instruction: ``MMAAtom((16, 8, 16), bf16)`` is
``mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32`` (PTX ISA 9.7.14.5.14, sm_80), with
the operand ownerships of PTX ISA 9.7.14.5.8 (:mod:`tylo.layouts.tv`). A :class:`TiledMMA`
arranges ``warps = (wm, wn)`` warps, each repeating the atom ``repeat = (rm, rn)`` times
over a contiguous warp tile, over a CTA tile of ``k`` columns of K::

    plan = TiledMMA(MMAAtom((16, 8, 16), bf16), warps=(2, 2), repeat=(2, 4), k=32)
    size(plan) == (64, 64, 32); threads(plan) == 128

Plans are frozen, hashable, and prove on construction that the accumulator ownership is a
bijection onto the (M, N) tile and that each warp column's operand ownership covers its
operand tile once. Operand loads are *derived*: :class:`OperandLoads` reads, from the
atom's operand ownership, which 8 elements each lane must receive and therefore which
16-byte shared row each lane must point ``ldmatrix`` at (:mod:`tylo.nvgpu.warp.ldmatrix`).

Inside a kernel, :func:`mma` loads A and B fragments for each k-step of 16 from two shared
tiles with ``ldmatrix`` and issues the repeated ``mma.sync``; it allocates nothing and
inserts no barrier. :func:`load_operands` and :func:`mma_atoms` are its two halves, for
kernels that double-buffer fragments in registers. An accumulator becomes the next MMA's A
operand in registers with :func:`tylo.nvgpu.warp.chain.accumulator_as_a_operand`, which
proves the two ownerships agree.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from tylo import dtypes as dt
from tylo.dtypes import DType
from tylo.layouts.tv import (
    MMA_M16N8K16_A_TV,
    MMA_M16N8K16_B_TV,
    MMA_M16N8K16_C_TV,
    WARP_SIZE,
)
from tylo.nvgpu.errors import PlanError, as_int, mma_dtypes
from tylo.tile.ownership import Ownership

__all__ = [
    "MMAAtom",
    "PlanError",
    "TiledMMA",
    "load_operands",
    "mma",
    "mma_atoms",
    "size",
    "threads",
    "zero_accumulator",
]


_ATOMS = {(16, 8, 16): (MMA_M16N8K16_A_TV, MMA_M16N8K16_B_TV, MMA_M16N8K16_C_TV)}


@dataclass(frozen=True)
class MMAAtom:
    """One ``mma.sync`` instruction: ``shape = (M, N, K)``, input ``dtype`` (bf16 or
    f16), accumulator ``acc`` (f32). Operand ownerships: A over (M, K), B over (N, K)
    (B's K-contiguous "col" form), C over (M, N); 32 threads each.

    >>> atom = MMAAtom((16, 8, 16), dt.bf16)
    >>> atom.instruction
    'mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32'
    >>> atom.a.values, atom.b.values, atom.c.values
    (8, 4, 4)
    """

    shape: tuple[int, int, int] = (16, 8, 16)
    dtype: DType = dt.bf16
    acc: DType = dt.f32

    def __post_init__(self) -> None:
        shape = tuple(self.shape) if isinstance(self.shape, (tuple, list)) else None
        if shape is not None:
            shape = tuple(v if (i := as_int(v)) is None else i for v in shape)
        if shape is None or not all(type(v) is int for v in shape) or shape not in _ATOMS:
            raise PlanError(
                f"MMAAtom: shape {self.shape} is not supported; tylo has the warp MMA "
                f"m16n8k16 (shape (16, 8, 16)); supported: {sorted(_ATOMS)}"
            )
        object.__setattr__(self, "shape", shape)
        d, acc = mma_dtypes("MMAAtom", self.dtype, self.acc)
        object.__setattr__(self, "dtype", d)
        object.__setattr__(self, "acc", acc)

    @property
    def instruction(self) -> str:
        m, n, k = self.shape
        d = self.dtype
        return f"mma.sync.aligned.m{m}n{n}k{k}.row.col.f32.{d}.{d}.f32"

    min_arch = (8, 0)

    @property
    def a(self) -> Ownership:
        """A's ownership over (M, K): 8 values per thread (4 packed registers)."""
        m, _, k = self.shape
        return Ownership(_ATOMS[self.shape][0], (m, k), "mma.m16n8k16 A")

    @property
    def b(self) -> Ownership:
        """B's ownership over (N, K): 4 values per thread (2 packed registers)."""
        _, n, k = self.shape
        return Ownership(_ATOMS[self.shape][1], (n, k), "mma.m16n8k16 B")

    @property
    def c(self) -> Ownership:
        """The accumulator's ownership over (M, N): 4 f32 per thread."""
        m, n, _ = self.shape
        return Ownership(_ATOMS[self.shape][2], (m, n), "mma.m16n8k16 C")

    def __str__(self) -> str:
        m, n, k = self.shape
        return f"MMAAtom(m{m}n{n}k{k}, {self.dtype})"

    def _repr_svg_(self) -> str | None:
        """The picture Jupyter shows (:func:`tylo.pictures.repr_svg`)."""
        from tylo.pictures import repr_svg  # lazy: pictures are drawn on demand

        return repr_svg(self)


def _pair(x: Any, what: str) -> tuple[int, int]:
    t = tuple(as_int(v) for v in x) if isinstance(x, (tuple, list)) else None
    if t is None or len(t) != 2 or not all(v is not None and 1 <= v <= 1024 for v in t):
        raise PlanError(f"TiledMMA: {what} must be two positive ints, got {x!r}")
    return t  # type: ignore[return-value]


@dataclass(frozen=True)
class TiledMMA:
    """``warps = (wm, wn)`` warps (warp ``w = wm_i + wm * wn_i``, M-major), each repeating
    the atom ``repeat = (rm, rn)`` times over its contiguous warp tile of
    ``(rm * 16, rn * 8)``; ``k`` columns of K per call (a multiple of the atom's K).

    >>> plan = TiledMMA(MMAAtom((16, 8, 16), dt.bf16), warps=(2, 2), repeat=(2, 4), k=32)
    >>> size(plan), threads(plan), plan.acc_ownership.values
    ((64, 64, 32), 128, 32)
    """

    atom: MMAAtom
    warps: tuple[int, int] = (1, 1)
    repeat: tuple[int, int] = (1, 1)
    k: int | None = None
    proofs: dict[str, Any] = field(default_factory=dict, compare=False, hash=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.atom, MMAAtom):
            raise PlanError(f"TiledMMA: atom must be an MMAAtom, got {self.atom!r}")
        object.__setattr__(self, "warps", _pair(self.warps, "warps"))
        object.__setattr__(self, "repeat", _pair(self.repeat, "repeat"))
        ak = self.atom.shape[2]
        k = ak if self.k is None else as_int(self.k)
        if k is None or k < ak or k % ak or k >= 1 << 31:
            raise PlanError(
                f"TiledMMA: k = {self.k!r} must be a positive multiple of the atom's K ({ak})"
            )
        object.__setattr__(self, "k", k)
        if self.threads > 1024:
            raise PlanError(
                f"TiledMMA: {self.warps[0] * self.warps[1]} warps are {self.threads} threads; "
                "a block holds at most 1024"
            )
        self.proofs.update(self._prove())

    # -- sizes -----------------------------------------------------------------------------

    @property
    def threads(self) -> int:
        return WARP_SIZE * self.warps[0] * self.warps[1]

    @property
    def warp_tile(self) -> tuple[int, int]:
        """(M, N) extent of one warp's accumulator tile."""
        m, n, _ = self.atom.shape
        return m * self.repeat[0], n * self.repeat[1]

    @property
    def size(self) -> tuple[int, int, int]:
        wm, wn = self.warp_tile
        return wm * self.warps[0], wn * self.warps[1], self.k  # type: ignore[return-value]

    @property
    def k_steps(self) -> int:
        return self.k // self.atom.shape[2]  # type: ignore[operator]

    @property
    def registers(self) -> dict[str, int]:
        """Registers per thread: accumulators, and A and B operands of one k-step."""
        rm, rn = self.repeat
        return {"acc": self.atom.c.values * rm * rn, "a": 4 * rm, "b": 2 * rn}

    # -- ownerships ------------------------------------------------------------------------

    @functools.cached_property
    def acc_ownership(self) -> Ownership:
        """The accumulator over (M, N): lanes as the atom, then warps (M-major); values as
        the atom, then repeats along M, then along N."""
        am, an, _ = self.atom.shape
        wm, wn = self.warp_tile
        m, n, _ = self.size
        return self.atom.c.tiled(
            (m, n),
            threads=[(self.warps[0], 0, wm), (self.warps[1], 1, wn)],
            values=[(self.repeat[0], 0, am), (self.repeat[1], 1, an)],
            name=f"{self} accumulator",
        )

    def operand_ownership(self, operand: str, k_steps: int | None = None) -> Ownership:
        """A over (M, k) or B over (N, k) (``k_steps`` steps of the atom's K, default all):
        lanes as the atom, warps (replicated along the other operand's warp axis); values
        as the atom, then repeats, then k-steps."""
        am, an, ak = self.atom.shape
        steps = self.k_steps if k_steps is None else k_steps
        m, n, _ = self.size
        wm, wn = self.warp_tile
        if operand == "a":
            warps = [(self.warps[0], 0, wm), (self.warps[1], None, 0)]
            return self.atom.a.tiled(
                (m, ak * steps),
                threads=warps,
                values=[(self.repeat[0], 0, am), (steps, 1, ak)],
                name=f"{self} A",
            )
        if operand == "b":
            warps = [(self.warps[0], None, 0), (self.warps[1], 0, wn)]
            return self.atom.b.tiled(
                (n, ak * steps),
                threads=warps,
                values=[(self.repeat[1], 0, an), (steps, 1, ak)],
                name=f"{self} B",
            )
        raise PlanError(f"TiledMMA: operand must be 'a' or 'b', got {operand!r}")

    @property
    def a_ownership(self) -> Ownership:
        return self.operand_ownership("a")

    @property
    def b_ownership(self) -> Ownership:
        return self.operand_ownership("b")

    # -- proofs ----------------------------------------------------------------------------

    def _prove(self) -> dict[str, Any]:
        from tylo.layouts.proofs import prove_injective

        out: dict[str, Any] = {}
        acc = self.acc_ownership
        v = prove_injective(acc.tv)
        n = 1
        for s in acc.shape:
            n *= s
        if not v or acc.threads * acc.values != n:
            raise PlanError(
                f"{self}: the accumulator ownership is not a bijection onto {acc.shape}: {v.reason}"
            )
        out["accumulator ownership is a bijection"] = v
        for name in ("a", "b"):
            own = self.operand_ownership(name)
            # one warp column (A) / row (B): drop the replicated warp mode
            th = [
                (mo.extent, mo.axis, mo.step)
                for mo in own.thread_modes
                if mo.axis is not None or mo.extent == 1
            ]
            va = [(mo.extent, mo.axis, mo.step) for mo in own.value_modes]
            part = Ownership.from_modes(own.shape, th, va)
            v = prove_injective(part.tv)
            cover = part.threads * part.values == own.shape[0] * own.shape[1]
            if not v or not cover:
                raise PlanError(
                    f"{self}: the {name.upper()} ownership does not cover its "
                    f"tile once per warp: {v.reason}"
                )
            out[f"{name.upper()} ownership covers its tile once per warp"] = v
        return out

    def __str__(self) -> str:
        return f"TiledMMA({self.atom}, warps={self.warps}, repeat={self.repeat}, k={self.k})"


def size(x: Any) -> Any:
    """The tile a plan covers (``(M, N, K)`` of a :class:`TiledMMA`, the tile of a
    :class:`~tylo.nvgpu.cpasync.CopyPlan`); for anything else (a layout, a shape) the layout
    algebra's :func:`tylo.layouts.size`, so one ``size`` serves both.

    >>> from tylo.layouts import Layout
    >>> size(TiledMMA(MMAAtom((16, 8, 16), dt.bf16), (2, 2), (2, 4), 32)), size(Layout((4, 8)))
    ((64, 64, 32), 32)
    """
    if isinstance(x, (TiledMMA,)) or type(x).__name__ == "CopyPlan":
        return x.size
    from tylo.layouts import ComposedLayout, Layout
    from tylo.layouts import size as layout_size

    if not isinstance(x, (Layout, ComposedLayout, int, tuple)):
        raise PlanError(f"size: {x!r} is neither a plan nor a layout or shape")
    return layout_size(x)


def threads(plan: Any) -> int:
    """The number of threads a plan needs."""
    t: int | None = getattr(plan, "threads", None)
    if t is None:
        raise PlanError(f"threads: {plan!r} is not a plan")
    return t


# ---------------------------------------------------------------------------- kernel side


def zero_accumulator(plan: TiledMMA) -> Any:
    """A fragment of f32 zeros with the plan's accumulator ownership (inside a kernel:
    ``plan.registers['acc']`` values per thread)."""
    from tylo.tile.fragment import zeros

    _need_plan(plan, "zero_accumulator")
    return zeros(plan.acc_ownership, plan.atom.acc)


def _need_plan(plan: Any, what: str) -> None:
    if not isinstance(plan, TiledMMA):
        raise PlanError(f"{what}: expected a TiledMMA, got {plan!r}")


def load_operands(plan: TiledMMA, a: Any, b: Any, tid: Any, k_step: int) -> tuple[Any, Any]:
    """Load the A and B fragments of k-step ``k_step`` (columns ``16*k_step ..``) from
    shared tiles ``a`` (M, k) and ``b`` (N, k) with ``ldmatrix``: packed fragments over
    (M, 16) and (N, 16)."""
    from tylo.nvgpu.warp.ldmatrix import load_operand

    _need_plan(plan, "load_operands")
    if type(k_step) is not int or not 0 <= k_step < plan.k_steps:
        raise PlanError(f"load_operands: k_step {k_step!r} is not an int in 0..{plan.k_steps - 1}")
    return load_operand(plan, "a", a, tid, k_step), load_operand(plan, "b", b, tid, k_step)


@functools.lru_cache(maxsize=64)
def _step_ownership(plan: TiledMMA, operand: str) -> Ownership:
    return plan.operand_ownership(operand, k_steps=1)


def mma_atoms(plan: TiledMMA, a: Any, b: Any, acc: Any) -> Any:
    """``acc + A*B`` for one k-step: ``rm * rn`` ``mma.sync`` instructions per warp, from
    packed operand fragments (as :func:`load_operands` returns) and the accumulator."""
    from tylo.kernel.context import current
    from tylo.kernel.values import Value
    from tylo.nvgpu.instructions import check_arch, mma_m16n8k16
    from tylo.tile.fragment import Fragment

    _need_plan(plan, "mma_atoms")
    ctx = current()
    check_arch("mma.m16n8k16", ctx.target)
    if not isinstance(acc, Fragment) or acc.ownership != plan.acc_ownership:
        raise PlanError(
            f"mma: the accumulator must be a fragment with {plan}'s accumulator "
            "ownership (zero_accumulator(plan))"
        )
    rm, rn = plan.repeat
    for name, f, regs in (("A", a, 4 * rm), ("B", b, 2 * rn)):
        if not isinstance(f, Fragment) or f.packed is None or len(f.values) != regs:
            raise PlanError(
                f"mma: operand {name} must be a packed fragment of {regs} "
                f"registers (load_operands), got {f!r}"
            )
        # the registers feed the instruction by position: only the operand's own ownership
        # (thread and value coordinates, whatever its name) puts each element where it belongs
        own = _step_ownership(plan, name.lower())
        if (f.ownership.tv, f.ownership.shape) != (own.tv, own.shape):
            raise PlanError(
                f"mma: operand {name} has the ownership {f.ownership.label}, not {plan}'s "
                f"{name} ownership of one k-step {own.tv} over {own.shape}; load it with "
                "load_operands, or convert an accumulator with accumulator_as_a_operand"
            )
    vals = list(acc.values)
    c = plan.atom.c.values
    for j in range(rn):
        # serpentine order: consecutive instructions share an operand register set
        order = range(rm) if j % 2 == 0 else range(rm - 1, -1, -1)
        for i in order:
            base = c * (i + rm * j)
            out = mma_m16n8k16(
                ctx.builder,
                [r.use() for r in a.values[4 * i : 4 * i + 4]],
                [r.use() for r in b.values[2 * j : 2 * j + 2]],
                [v.use() for v in vals[base : base + c]],
                plan.atom.dtype,
            )
            for q in range(c):
                vals[base + q] = Value(dt.f32, out[q])
    return Fragment(vals, acc.ownership)


def mma(plan: TiledMMA, a: Any, b: Any, acc: Any, tid: Any) -> Any:
    """``acc + A*B`` over the plan's whole ``k``: for each k-step, ldmatrix loads of A
    (shared tile of (M, k)) and B (shared tile of (N, k)), then the repeated ``mma.sync``.
    No shared memory is allocated and no barrier is inserted."""
    _need_plan(plan, "mma")
    for ks in range(plan.k_steps):
        fa, fb = load_operands(plan, a, b, tid, ks)
        acc = mma_atoms(plan, fa, fb, acc)
    return acc
