"""Thread-block clusters inside a kernel (sm_90): who am I in my cluster, the cluster
barrier, and a peer CTA's shared memory (distributed shared memory).

A cluster kernel is launched ``kern[grid, block, cluster]`` (:mod:`tylo.kernel.clusters`);
its cluster shape is static, so :data:`cluster_dim` and :func:`cluster_nctarank` are Python
ints and the CTA indices below carry exact bounds. A kernel launched without a cluster is a
grid of implicit 1x1x1 clusters (PTX ISA, "Cluster of Cooperative Thread Arrays"): there the
rank is 0, the cluster count per axis is the grid's, and every op still works. The
numbering is the CUDA C++ Programming Guide's ("Thread Block Clusters"), per axis ``a``::

    cluster_cta_idx.a = block_idx.a % cluster_dim.a      (%cluster_ctaid)
    cluster_idx.a     = block_idx.a // cluster_dim.a     (%clusterid)
    cluster_ctarank() = x + cluster_dim.x * (y + cluster_dim.y * z)  of cluster_cta_idx
                                                         (%cluster_ctarank)

Read from the special registers (PTX ISA, "Special Registers"), not computed, so the GPU
tests check the hardware against the formulas.

Synchronization (PTX ISA, ``barrier.cluster``): :func:`cluster_sync` is
``barrier.cluster.arrive.release`` then ``barrier.cluster.wait.acquire``: every
non-exited thread of every CTA of the cluster arrives, and each thread's earlier shared and
global writes are visible to the others after the wait. :func:`cluster_arrive` and
:func:`cluster_wait` are the two halves, to overlap work with the barrier
(``relaxed=True``: an arrive that orders nothing, e.g. the first one after the barriers'
init when only ``fence_barrier_init`` needs publishing).

Distributed shared memory (PTX ISA, ``mapa``; the ``.shared::cluster`` state space):
:func:`map_shared` gives a view of a peer CTA's copy of a shared allocation; loads and
stores through it are ``ld.shared::cluster`` / ``st.shared::cluster``. A peer's shared
memory is valid only while the peer runs: end with a :func:`cluster_sync` so that no CTA
exits while another still reads it.
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir

from tylo import dtypes as dt
from tylo.backend.inline_ptx import PTXAsm
from tylo.backend.ir import ADDRSPACE_SHARED
from tylo.kernel.intrinsics import Axes3
from tylo.nvgpu.errors import PlanError

__all__ = [
    "ClusterOpError",
    "RemoteShared",
    "cluster_arrive",
    "cluster_cta_idx",
    "cluster_ctarank",
    "cluster_dim",
    "cluster_idx",
    "cluster_nctarank",
    "cluster_sync",
    "cluster_wait",
    "map_shared",
    "map_shared_address",
]

I32 = ir.IntType(32)
_AXES = "xyz"
_GRID_MAX = {"x": 2**31 - 1, "y": 65535, "z": 65535}


class ClusterOpError(PlanError):
    """A cluster operation used with operands it cannot take."""


def _ctx() -> Any:
    from tylo.kernel.context import current
    from tylo.nvgpu.instructions import check_arch

    ctx = current()
    check_arch("cluster", ctx.target)
    return ctx


def _shape(ctx: Any) -> tuple[int, int, int]:
    """The static cluster shape of the kernel being traced ((1, 1, 1) without clusters)."""
    return ctx.cluster or (1, 1, 1)


def _sreg_symbol(ctx: Any, reg: str, upper: Any, hi: int) -> Any:
    """An index symbol bound (lazily, in the prologue) to ``mov.u32 r, %reg``; one per
    trace and register, with bounds ``0 <= s < upper`` (``hi``: the largest value)."""
    from tylo.kernel import facts

    key = f"cluster:{reg}"
    sym = ctx.indices.get(key)
    if sym is not None:
        return sym
    sym = facts.index_symbol(reg.replace("%", "").replace(".", "_"), upper=upper)

    def make(prologue: ir.IRBuilder) -> ir.Value:
        asm = PTXAsm(reg)
        out = asm.output(I32)
        asm.line(f"mov.u32 {out}, {reg};")
        return asm.emit(prologue)[0]

    ctx.bind_lazy(sym, make)
    ctx.symbol_bounds[sym] = (0, hi)
    ctx.indices[key] = sym
    return sym


def cluster_ctarank() -> Any:
    """This CTA's rank in its cluster, ``%cluster_ctarank``: an index in
    ``[0, cluster_nctarank())``, x fastest (see the module docstring); 0 without clusters."""
    ctx = _ctx()
    n = cluster_nctarank()
    return 0 if n == 1 else _sreg_symbol(ctx, "%cluster_ctarank", n, n - 1)


def cluster_nctarank() -> int:
    """The number of CTAs in a cluster (static: the product of :data:`cluster_dim`)."""
    x, y, z = _shape(_ctx())
    return x * y * z


class _ClusterDim3(Axes3):
    """``.x``, ``.y``, ``.z`` of a cluster index space, read from the trace in progress."""

    __slots__ = ()
    _prefix = "tylo.nvgpu.cluster."

    def _get(self, axis: str) -> Any:
        ctx = _ctx()
        i = _AXES.index(axis)
        c = _shape(ctx)[i]
        if self._kind == "dim":
            return c
        if self._kind == "cta":  # position inside the cluster
            return 0 if c == 1 else _sreg_symbol(ctx, f"%cluster_ctaid.{axis}", c, c - 1)
        if c == 1:  # implicit 1-CTA clusters along this axis: the block index
            return ctx.indices[f"ctaid.{axis}"]
        grid = ctx.indices[f"nctaid.{axis}"]
        return _sreg_symbol(ctx, f"%clusterid.{axis}", grid, _GRID_MAX[axis] // c - 1)


#: The cluster shape, per axis (Python ints; 1 without clusters).
cluster_dim = _ClusterDim3("dim", "cluster_dim")
#: This CTA's position inside its cluster, per axis (``%cluster_ctaid``).
cluster_cta_idx = _ClusterDim3("cta", "cluster_cta_idx")
#: This CTA's cluster's position in the grid of clusters, per axis (``%clusterid``).
cluster_idx = _ClusterDim3("cluster", "cluster_idx")


# ---------------------------------------------------------------------------- barrier


def _emit(text: str) -> None:
    ctx = _ctx()
    asm = PTXAsm(text.split()[0].rstrip(";"))
    asm.line(text)
    asm.emit(ctx.builder, memory=True)


def _flag(value: Any, what: str) -> bool:
    if type(value) is not bool:
        raise ClusterOpError(f"{what} must be True or False, got {value!r}")
    return value


def cluster_arrive(*, relaxed: bool = False, aligned: bool = False) -> None:
    """``barrier.cluster.arrive.release`` (``relaxed=True``: ``.relaxed``, no ordering):
    this thread arrives on the cluster barrier; pair with :func:`cluster_wait`.
    ``aligned=True`` adds ``.aligned``: every thread of the warp executes this same arrive
    (the cheaper form when the warp is converged)."""
    sem = "relaxed" if _flag(relaxed, "cluster_arrive: relaxed") else "release"
    tail = ".aligned" if _flag(aligned, "cluster_arrive: aligned") else ""
    _emit(f"barrier.cluster.arrive.{sem}{tail};")


def cluster_wait(*, aligned: bool = False) -> None:
    """``barrier.cluster.wait.acquire``: wait until every non-exited thread of the cluster
    arrived; writes released by their arrives are visible afterwards (``aligned``: as for
    :func:`cluster_arrive`)."""
    tail = ".aligned" if _flag(aligned, "cluster_wait: aligned") else ""
    _emit(f"barrier.cluster.wait.acquire{tail};")


def cluster_sync(*, aligned: bool = False) -> None:
    """Every thread of every CTA of the cluster meets (``barrier.cluster.arrive.release``,
    ``barrier.cluster.wait.acquire``): the cluster-wide ``sync_threads``. Call it from every
    thread (``aligned=True``: from converged warps, with the ``.aligned`` forms)."""
    cluster_arrive(aligned=aligned)
    cluster_wait(aligned=aligned)


# ---------------------------------------------------------------------------- distributed shared


def _check_rank(ctx: Any, rank: Any, what: str) -> None:
    """Refuse a static rank (or a bool) that names no CTA of the kernel's cluster."""
    n = cluster_nctarank()
    if type(rank) is bool or (type(rank) is int and not 0 <= rank < n):
        raise ClusterOpError(
            f"{what}: CTA rank {rank!r} is not in this kernel's cluster of {n} CTA(s) "
            f"(ranks 0..{n - 1}, cluster shape {_shape(ctx)})"
        )


def _rank_i32(ctx: Any, rank: Any, what: str) -> ir.Value:
    from tylo.kernel.lower import lower_int
    from tylo.kernel.values import Value, convert, to_index

    _check_rank(ctx, rank, what)
    if isinstance(rank, Value):
        if rank.dtype.is_float or rank.dtype is dt.bool_:
            raise ClusterOpError(f"{what}: the CTA rank must be an integer, got a {rank.dtype}")
        return convert(rank, dt.u32).use()
    return lower_int(ctx, to_index(rank, f"{what} rank"), 32)


def map_shared_address(address: ir.Value, rank: Any) -> ir.Value:
    """``mapa.shared::cluster.u32 d, address, rank``: the ``.shared::cluster`` address of
    the variable at 32-bit shared ``address`` of this CTA in the CTA of cluster rank
    ``rank`` (an int or index expression; a static rank must exist in the cluster)."""
    ctx = _ctx()
    if not isinstance(address, ir.Value) or address.type != I32:
        raise ClusterOpError(f"map_shared_address: expected an i32 shared address, got {address}")
    r = _rank_i32(ctx, rank, "map_shared")
    asm = PTXAsm("mapa")
    out = asm.output(I32)
    a, rr = asm.input(address), asm.input(r)
    asm.line(f"mapa.shared::cluster.u32 {out}, {a}, {rr};")
    return asm.emit(ctx.builder)[0]


class RemoteShared:
    """A shared allocation (a shared tensor from ``tylo.shared`` or a
    :class:`~tylo.tile.views.SharedTile`) as it lives in the CTA of cluster rank ``rank``:
    ``view[i]`` loads and ``view[i] = v`` stores through ``.shared::cluster`` addresses
    (``i``: an element offset of a tensor, a coordinate of a tile). Made by
    :func:`map_shared`."""

    def __init__(self, storage: Any, rank: Any) -> None:
        self.storage = storage
        self.rank = rank

    def _offset(self, key: Any) -> Any:
        from tylo.tile.views import SharedTile

        if isinstance(self.storage, SharedTile):
            return self.storage.offset(key if isinstance(key, tuple) else (key,))
        extent = getattr(self.storage, "extent", None)
        if type(key) is int and extent is not None and not 0 <= key < extent:
            raise ClusterOpError(
                f"map_shared: element {key} is outside the {extent}-element allocation"
            )
        return key

    def address(self, key: Any = 0) -> ir.Value:
        """The ``.shared::cluster`` address (i32) of element ``key`` in the peer."""
        from tylo.tile.views import shared_address

        local = shared_address(self.storage, self._offset(key))
        return map_shared_address(local, self.rank)

    @property
    def dtype(self) -> Any:
        return self.storage.dtype

    def __getitem__(self, key: Any) -> Any:
        from tylo.kernel.values import Value, ir_type

        ctx = _ctx()
        d = self.dtype
        asm = PTXAsm("ld.shared::cluster")
        out = asm.output(ir_type(d))
        a = asm.input(self.address(key))
        asm.line(f"ld.shared::cluster.b{8 * d.nbytes} {out}, [{a}];")
        return Value(d, asm.emit(ctx.builder, memory=True)[0])

    def __setitem__(self, key: Any, value: Any) -> None:
        from tylo.kernel.values import as_value, convert

        ctx = _ctx()
        d = self.dtype
        v = convert(as_value(value, d), d).use()
        asm = PTXAsm("st.shared::cluster")
        a = asm.input(self.address(key))
        x = asm.input(v)
        asm.line(f"st.shared::cluster.b{8 * d.nbytes} [{a}], {x};")
        asm.emit(ctx.builder, memory=True)

    def __repr__(self) -> str:
        return f"RemoteShared({self.storage!r}, rank={self.rank!r})"


def map_shared(storage: Any, rank: Any) -> RemoteShared:
    """The view of shared ``storage`` (a ``tylo.shared`` tensor or a SharedTile) in the CTA
    of cluster rank ``rank`` (``mapa``): every CTA allocates the same static shared
    variables at the same offsets, so element ``i`` of the view is the peer's element
    ``i``. A static rank must exist in the kernel's cluster."""
    from tylo.tile.views import SharedTile

    ctx = _ctx()
    is_shared = getattr(storage, "addrspace", None) == ADDRSPACE_SHARED
    if not (isinstance(storage, SharedTile) or is_shared):
        raise ClusterOpError(
            f"map_shared: expected a shared tensor (tylo.shared) or a SharedTile, got {storage!r}"
        )
    if storage.dtype in (dt.bool_,) or storage.dtype.nbytes not in (2, 4, 8):
        raise ClusterOpError(
            f"map_shared: {storage.dtype} elements cannot be accessed in a peer CTA; use "
            "16-, 32- or 64-bit elements"
        )
    _check_rank(ctx, rank, "map_shared")  # now, not at the first access
    return RemoteShared(storage, rank)
