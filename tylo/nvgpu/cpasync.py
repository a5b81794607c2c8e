"""Asynchronous global-to-shared copies: the copy plan, ``copy_async`` and its groups.

A :class:`CopyPlan` distributes a tile of ``shape = (rows, cols)`` over ``threads``
threads in vectors of ``vector_bytes`` (16) along the tile's last axis (logical K for both
GEMM operands, which are stored K-contiguous): consecutive threads take consecutive
vectors of a row, so a warp reads whole 128-byte lines. Its :attr:`CopyPlan.ownership` is
the thread-value layout (slots ``V*j .. V*j+V-1`` are vector ``j``). Construction proves,
for the shared destination layout, that destinations are unique, that each vector lands
on ``V`` contiguous elements, and that each starts 16-byte aligned
(:mod:`tylo.layouts.proofs`); :meth:`CopyPlan.prove_source` does the same for a (symbolic)
global layout under the kernel's facts.

Inside a kernel :func:`copy_async` issues one ``cp.async.cg`` per vector (PTX ISA
9.7.9.25, sm_80); :func:`commit_copies` closes a group and :func:`wait_copies` waits
until at most ``n`` groups are pending. The bounded form (``origin=``, with the full
source matrix as ``src``) copies vectors inside the matrix, zero-fills what lies outside
(``cp.async`` with a source size below 16 bytes fills the rest with zeros; rows outside
copy nothing and fill zeros), and handles the K edge inside a vector the same way. With
``clamp_rows=True`` rows past the matrix read its last row instead (no predicate, the same
pointers as a full tile: for GEMM operands, whose extra rows reach only outputs that are
never stored); where the facts in force prove the columns inside (a whole K-tile), no
column check is emitted either. When the
source cannot be proved 16-byte aligned (a leading dimension that is not a multiple of
the vector), vectors are never used: each element is loaded on its own (zero outside) and
stored to shared memory.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any

from tylo import dtypes as dt
from tylo.dtypes import DType
from tylo.errors import TyloError
from tylo.layouts import ComposedLayout, Layout, composition
from tylo.layouts._lazy import sympy
from tylo.nvgpu.errors import PlanError, TileBoundsError, as_int
from tylo.tile.ownership import Ownership

__all__ = ["CopyPlan", "commit_copies", "copy_async", "wait_copies"]


@dataclass(frozen=True)
class CopyPlan:
    """``threads`` threads copy a ``shape`` tile of ``dtype`` into shared layout ``smem``
    (static; Layout or swizzled ComposedLayout over ``shape``) in ``vector_bytes`` vectors
    along axis 1.

    >>> from tylo.layouts import Layout
    >>> p = CopyPlan((16, 64), dt.bf16, 128, Layout((16, 64), (64, 1)))
    >>> str(p.ownership.tv), p.vectors_per_thread
    ('((8,16),8):((128,1),16)', 1)
    """

    shape: tuple[int, int]
    dtype: DType
    threads: int
    smem: Any
    vector_bytes: int = 16
    proofs: dict[str, Any] = field(default_factory=dict, compare=False, hash=False, repr=False)

    def __post_init__(self) -> None:
        given = (
            tuple(as_int(s) for s in self.shape) if isinstance(self.shape, (tuple, list)) else ()
        )
        shape = tuple(s for s in given if s is not None and 1 <= s < 1 << 31)
        if len(given) != 2 or len(shape) != 2:
            raise PlanError(f"CopyPlan: shape must be two positive ints, got {self.shape!r}")
        object.__setattr__(self, "shape", shape)
        try:
            d = dt.dtype_of(self.dtype)
        except TyloError as err:
            raise PlanError(f"CopyPlan: {err}") from None
        object.__setattr__(self, "dtype", d)
        vb = as_int(self.vector_bytes)
        if vb is None or vb not in (4, 8, 16) or vb % d.nbytes:
            raise PlanError(
                f"CopyPlan: vector_bytes must be 4, 8 or 16 (a multiple of the {d} size), got "
                f"{self.vector_bytes!r}"
            )
        object.__setattr__(self, "vector_bytes", vb)
        threads = as_int(self.threads)
        if threads is None or not 1 <= threads <= 1024:
            raise PlanError(f"CopyPlan: threads must be an int in [1, 1024], got {self.threads!r}")
        object.__setattr__(self, "threads", threads)
        v = self.vector
        rows, cols = shape
        if cols % v:
            raise PlanError(
                f"CopyPlan: the tile's {cols} columns are not a multiple of the {v}-element "
                f"({self.vector_bytes}-byte) vector"
            )
        if type(self.threads) is not int or self.threads < 1 or (rows * cols // v) % self.threads:
            raise PlanError(
                f"CopyPlan: {rows * cols // v} vectors of {self.vector_bytes} bytes cannot be "
                f"split evenly over {self.threads} threads"
            )
        if not isinstance(self.smem, (Layout, ComposedLayout)) or not self.smem.is_static:
            raise PlanError(f"CopyPlan: smem must be a static layout, got {self.smem!r}")
        from tylo.nvgpu.bounds import layout_extents

        ext = layout_extents(self.smem)
        if len(ext) != 2 or ext[0] < rows or ext[1] < cols:
            raise TileBoundsError(
                f"CopyPlan: the copy writes rows 0..{rows - 1} x columns 0..{cols - 1} of its "
                f"shared layout {self.smem}, whose extents are {ext}; give a layout over at "
                f"least {shape}"
            )
        self.proofs.update(self._prove_destination())

    @property
    def vector(self) -> int:
        """Elements per vector."""
        return self.vector_bytes // self.dtype.nbytes

    @property
    def size(self) -> tuple[int, int]:
        return self.shape

    @property
    def vectors_per_thread(self) -> int:
        rows, cols = self.shape
        return rows * cols // self.vector // self.threads

    @functools.cached_property
    def ownership(self) -> Ownership:
        """Threads along the vector axis first (coalesced rows), then down the rows; a
        thread's further vectors follow along the row, then down the rows."""
        rows, cols = self.shape
        v = self.vector
        per_row = cols // v
        tk = math.gcd(per_row, self.threads)  # threads side by side along a row
        tr = self.threads // tk
        if rows % tr:
            raise PlanError(
                f"CopyPlan: {self.threads} threads as {tr} rows of {tk} do not tile the "
                f"{rows} rows of {per_row} vectors"
            )
        values: list[tuple[int, int | None, int]] = [(v, 1, 1)]
        if per_row > tk:
            values.append((per_row // tk, 1, v * tk))
        if rows > tr:
            values.append((rows // tr, 0, tr))
        threads: list[tuple[int, int | None, int]] = [(tk, 1, v), (tr, 0, 1)]
        return Ownership.from_modes(self.shape, threads, values, f"copy {self.shape}")

    def vector_coord(self, thread: Any, j: int) -> tuple[Any, ...]:
        """The tile coordinate of the first element of vector ``j`` of ``thread``."""
        v = as_int(j)
        if v is None or not 0 <= v < self.vectors_per_thread:
            raise PlanError(
                f"{self}.vector_coord: j must be an int in [0, {self.vectors_per_thread}), "
                f"got {j!r}"
            )
        return self.ownership.coord(_thread(thread, self.threads), self.vector * v)

    def _vectors_layout(self, layout: Any) -> Any:
        """``layout`` composed with the ownership: (thread, (element, vector)) -> offset."""
        return composition(layout, self.ownership.tv)

    def _prove_destination(self) -> dict[str, Any]:
        from tylo.layouts.proofs import prove_aligned, prove_contiguous, prove_injective

        dst = self._vectors_layout(self.smem)
        out = {
            "destinations unique": prove_injective(dst),
            "destination vectors contiguous": prove_contiguous(dst, vector=self.vector, mode=1),
            "destination vectors aligned": prove_aligned(
                dst,
                vector=self.vector,
                elem_bytes=self.dtype.nbytes,
                mode=1,
                align=self.vector_bytes,
            ),
        }
        for what, v in out.items():
            if not v:
                raise PlanError(
                    f"CopyPlan {self.shape} into {self.smem}: {what} is {v.status}: {v.reason}"
                )
        return out

    def bank_conflicts(self) -> int:
        """The worst number of extra shared-memory wavefronts of any group of threads that
        writes one 128-byte wavefront (0: conflict-free), from every destination address."""
        per = max(1, 128 // self.vector_bytes)  # threads whose vectors fill one wavefront
        nbytes = self.dtype.nbytes
        worst = 0
        for j in range(self.vectors_per_thread):
            for t0 in range(0, self.threads, per):
                chunks = set()
                for t in range(t0, min(t0 + per, self.threads)):
                    r, c = self.vector_coord(t, j)
                    chunks.add((self.smem(r, c) * nbytes) % 128 // self.vector_bytes)
                worst = max(worst, -(-per // len(chunks)) - 1)
        return worst

    def prove_source(self, layout: Any, *, base: Any = 0, assuming: Any = ()) -> dict[str, Any]:
        """Verdicts that each source vector of ``layout`` (the tile's global layout, e.g.
        ``Layout((BM, BK), (lda, 1))``, at element offset ``base``) is contiguous and
        aligned. Not proved means the scalar path (see the module docstring)."""
        from tylo.layouts.proofs import prove_aligned, prove_contiguous

        src = self._vectors_layout(layout)
        return {
            "source vectors contiguous": prove_contiguous(
                src, vector=self.vector, mode=1, assuming=assuming
            ),
            "source vectors aligned": prove_aligned(
                src,
                vector=self.vector,
                elem_bytes=self.dtype.nbytes,
                mode=1,
                base=base,
                align=self.vector_bytes,
                assuming=assuming,
            ),
        }

    def __str__(self) -> str:
        return (
            f"CopyPlan({self.shape}, {self.dtype}, {self.threads} threads, "
            f"{self.vector_bytes}-byte vectors, into {self.smem})"
        )


def _thread(t: Any, threads: int) -> Any:
    """A thread index: a static int in ``[0, threads)`` or an index expression (traced)."""
    v = as_int(t)
    if v is None and (isinstance(t, sympy.Basic) or hasattr(t, "dtype")):
        return t
    if v is None or not 0 <= v < threads:
        raise PlanError(f"thread index must be an int in [0, {threads}) or an index, got {t!r}")
    return v


# ---------------------------------------------------------------------------- kernel side


def commit_copies() -> None:
    """``cp.async.commit_group``: the copies issued since the last commit form a group."""
    from tylo.kernel.context import current
    from tylo.nvgpu.instructions import check_arch, cp_async_commit_group

    ctx = current()
    check_arch("cp.async.commit_group", ctx.target)
    cp_async_commit_group(ctx.builder)


def wait_copies(n: int = 0) -> None:
    """``cp.async.wait_group n``: wait until at most ``n`` of this thread's committed
    groups are pending. Make other threads' copies visible with a barrier after it."""
    from tylo.kernel.context import current
    from tylo.nvgpu.instructions import check_arch, cp_async_wait_group

    count = as_int(n)
    if count is None or not 0 <= count < 1 << 31:
        raise PlanError(f"wait_copies: n must be a static int in [0, 2**31), got {n!r}")
    ctx = current()
    check_arch("cp.async.wait_group", ctx.target)
    cp_async_wait_group(ctx.builder, count)


def _split(ctx: Any, expr: Any) -> tuple[Any, Any]:
    """(part over kernel parameters and thread indices only, the rest)."""
    from tylo.kernel.expand import expand
    from tylo.kernel.freesyms import free_symbols

    expr = expand(expr)
    terms = expr.args if expr.is_Add else (expr,)
    inv = [t for t in terms if free_symbols(t) <= ctx.prologue_symbols]
    var = [t for t in terms if not free_symbols(t) <= ctx.prologue_symbols]
    return sympy.Add(*inv), sympy.Add(*var)


def _global_pointer(ctx: Any, tile: Any, coord: tuple[Any, ...]) -> Any:
    from tylo.kernel.lower import lower_int

    inv, var = _split(ctx, tile.offset(coord))
    b = ctx.builder
    p = tile.storage.base
    if inv != 0:
        p = b.gep(p, [lower_int(ctx, inv)], inbounds=True)
    if var != 0:
        p = b.gep(p, [lower_int(ctx, var)], inbounds=True)
    return p


@functools.lru_cache(maxsize=256)
def _dst_tables(
    plan: CopyPlan, layout_key: Any, modes: tuple[int, ...], origin: tuple[Any, ...]
) -> tuple[tuple[tuple[int, ...], ...], ...]:
    table = plan.ownership.table()
    v = plan.vector
    return tuple(
        tuple(tuple(int(x) for x in table[t, v * j]) for t in range(plan.threads))
        for j in range(plan.vectors_per_thread)
    )


def _source_aligned(plan: CopyPlan, src: Any, origin: tuple[Any, ...] | None) -> bool:
    """Whether every source vector is provably 16-byte aligned under the facts in force."""
    if src.storage.align < plan.vector_bytes:
        return False
    window = src.window(tuple(origin), plan.shape) if origin is not None else src
    if window.rank != 2:
        return False
    inner = src.layout
    if isinstance(inner, ComposedLayout):
        return False
    strides = []
    for m in window.modes:
        sub = inner[m] if type(inner.shape) is tuple else inner
        if type(sub.shape) is tuple:
            return False
        strides.append(sub.stride)
    layout = Layout(plan.shape, tuple(strides))
    verdicts = plan.prove_source(layout, base=window.offset((0, 0)))
    return all(bool(v) for v in verdicts.values())


def copy_async(
    plan: CopyPlan,
    src: Any,
    dst: Any,
    tid: Any,
    *,
    origin: tuple[Any, ...] | None = None,
    prefetch: int | None = None,
    clamp_rows: bool = False,
) -> None:
    """Copy the tile from global ``src`` to shared ``dst`` by ``plan``: thread ``tid``
    issues its ``cp.async`` vectors (commit them with :func:`commit_copies`).

    Full form: ``src`` is the (M, K)-window of the tile, fully inside the matrix. Bounded
    form: ``src`` is the whole matrix (its shape is the bounds) and ``origin`` the tile's
    corner; vectors are clipped and zero-filled at the edges, or, with ``clamp_rows``,
    rows past the last one read the last row (columns are still clipped).
    """
    from tylo.kernel.context import current, require_threads
    from tylo.nvgpu.bounds import check_region
    from tylo.nvgpu.instructions import check_arch
    from tylo.tile.access import GlobalTile, SharedTile, class_addresses

    if not isinstance(plan, CopyPlan):
        raise PlanError(f"copy_async: expected a CopyPlan, got {plan!r}")
    if not isinstance(src, GlobalTile) or not isinstance(dst, SharedTile):
        raise PlanError(f"copy_async: copies a GlobalTile into a SharedTile, got {src!r}, {dst!r}")
    if tuple(dst.shape) != plan.shape or (origin is None and tuple(src.shape) != plan.shape):
        raise PlanError(
            f"copy_async: tiles {src.shape} -> {dst.shape} do not match the plan's {plan.shape}"
        )
    if src.dtype is not plan.dtype or dst.dtype is not plan.dtype:
        raise PlanError(
            f"copy_async: the plan copies {plan.dtype}, the tiles hold {src.dtype} and {dst.dtype}"
        )
    if clamp_rows and origin is None:
        raise PlanError("copy_async: clamp_rows is for the bounded form (origin=...)")
    ctx = current()
    check_arch("cp.async", ctx.target)
    check_region("cp.async", dst, tuple((0, e) for e in plan.shape), access="writes")
    nv = plan.vectors_per_thread
    require_threads(plan.threads, str(plan))  # the block must hold the plan's threads
    coords = [plan.vector_coord(tid, j) for j in range(nv)]
    key = (dst.layout, dst.modes, dst.origin)
    tables = _dst_tables(plan, *key)
    dst_addr = class_addresses(dst, list(tables), coords)
    if not _source_aligned(plan, src, origin):
        _copy_scalar(plan, src, dst_addr, coords, origin, clamp_rows)
        return
    for c, addr in zip(coords, dst_addr):
        _copy_vector(ctx, plan, src, addr, c, origin, prefetch, clamp_rows)


def _copy_vector(
    ctx: Any,
    plan: CopyPlan,
    src: Any,
    addr: Any,
    c: tuple[Any, ...],
    origin: tuple[Any, ...] | None,
    prefetch: int | None,
    clamp_rows: bool = False,
) -> None:
    from llvmlite import ir

    from tylo.kernel import facts
    from tylo.kernel.lower import lower_bool, lower_int
    from tylo.kernel.minmax import relation
    from tylo.nvgpu.instructions import cp_async

    b = ctx.builder
    if origin is None:
        cp_async(
            b, addr, _global_pointer(ctx, src, c), cp_size=plan.vector_bytes, prefetch=prefetch
        )
        return
    row, col = (o + x for o, x in zip(origin, c))
    rows, cols = src.shape
    row_ok = relation(sympy.Lt, row, rows)
    if clamp_rows:  # past the last row: read the last row (loop-invariant, no predicate)
        row, row_ok = facts.minimum(row, rows - 1), sympy.true
    full = sympy.And(row_ok, relation(sympy.Le, col + plan.vector, cols))
    if facts.decide(full) is True:  # inside, by the facts in force (a whole K-tile, say)
        cp_async(
            b,
            addr,
            _global_pointer(ctx, src, (row, col)),
            cp_size=plan.vector_bytes,
            prefetch=prefetch,
        )
        return
    # bytes inside the matrix: (cols - col) elements, clipped to [0, vector]; 0 off the rows
    inside = facts.minimum(facts.maximum(cols - col, 0), plan.vector) * plan.dtype.nbytes
    if clamp_rows:  # the full tile's pointer; a source size of 0 reads nothing
        nbytes = lower_int(ctx, inside, 32)
        ptr = _global_pointer(ctx, src, (row, col))
        cp_async(b, addr, ptr, cp_size=plan.vector_bytes, src_size=nbytes, prefetch=prefetch)
        return
    ok = lower_bool(ctx, sympy.And(row_ok, relation(sympy.Lt, col, cols)))
    nbytes = lower_int(ctx, inside, 32)
    nbytes = b.select(ok, nbytes, ir.IntType(32)(0))
    ptr = b.select(ok, _global_pointer(ctx, src, (row, col)), src.storage.base)
    cp_async(b, addr, ptr, cp_size=plan.vector_bytes, src_size=nbytes, prefetch=prefetch)


def _copy_scalar(
    plan: CopyPlan,
    src: Any,
    dst_addr: list[Any],
    coords: list[tuple[Any, ...]],
    origin: tuple[Any, ...] | None,
    clamp_rows: bool = False,
) -> None:
    """One element at a time: no vector is ever formed from an unaligned source."""
    from llvmlite import ir

    from tylo.kernel import facts
    from tylo.kernel.context import current
    from tylo.kernel.lower import lower_bool
    from tylo.kernel.minmax import relation
    from tylo.nvgpu.instructions import ld_global_b16, st_shared

    ctx = current()
    b = ctx.builder
    nbytes = plan.dtype.nbytes
    if nbytes != 2:
        raise PlanError(
            f"copy_async: the element-wise path copies 16-bit elements, not {plan.dtype}"
        )
    for c, addr in zip(coords, dst_addr):
        for e in range(plan.vector):
            at = (c[0], c[1] + e)
            pred = None
            if origin is not None:
                at = tuple(o + x for o, x in zip(origin, at))
                if clamp_rows:
                    at = (facts.minimum(at[0], src.shape[0] - 1), at[1])
                rel = sympy.And(*(relation(sympy.Lt, x, n) for x, n in zip(at, src.shape)))
                if rel is not sympy.true:
                    pred = lower_bool(ctx, rel)
            if pred is not None:
                ptr = b.select(pred, _global_pointer(ctx, src, at), src.storage.base)
            else:
                ptr = _global_pointer(ctx, src, at)
            v = ld_global_b16(b, ptr, pred)
            st_shared(b, b.add(addr, ir.IntType(32)(e * nbytes)), v)
