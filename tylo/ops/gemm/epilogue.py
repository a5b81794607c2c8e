"""The staged epilogue: the accumulator tile through shared memory, out in 16-byte vectors.

D is M-contiguous, but a thread's accumulators (the MMA's C ownership) are pairs along N:
stored by ownership, every warp instruction writes 4-byte words, 8 rows of 4 columns. The
staged form writes the fragment by its ownership into a padded, M-contiguous f32 tile in
shared memory (the pipeline's stages are idle by then), meets the other warps at a
barrier, and reads the tile back so that each thread holds 4 consecutive rows of one
column: one ``st.global.v4.f32`` each, a warp writing 512 contiguous bytes of a column.

:class:`StagedStore` is the host plan. Its proofs, like the rest of the GEMM's plan, come
from the provers and from counting over every lane:

- the fragment's writes land inside the scratch tile, each on its own word, and the
  padding (``pad`` elements per column) makes them bank-conflict free;
- the read-back is a :class:`~tylo.nvgpu.cpasync.CopyPlan` over the transposed (N, M) tile: its
  vectors are unique, contiguous and 16-byte aligned in the scratch layout, and
  (``prove_source``) contiguous and aligned in D's symbolic layout ``(N, M):(ldd, 1)``
  with ``ldd`` a multiple of 4 -- which the kernel states and every launch checks.

>>> import tylo
>>> from tylo.nvgpu.warp.mma import MMAAtom, TiledMMA
>>> st = StagedStore(TiledMMA(MMAAtom((16, 8, 16), tylo.bf16), (2, 4), (4, 8), 64))
>>> str(st.scratch), st.shared_bytes, st.reads.vectors_per_thread
('(128,256):(1,132)', 135168, 32)
>>> {k: getattr(v, "status", v) for k, v in st.proofs.items() if "conflicts" in k}
{'fragment writes: bank conflicts': 0, 'read-back: bank conflicts': 0}
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from llvmlite import ir

import tylo
from tylo.layouts import Layout, composition
from tylo.nvgpu.cpasync import CopyPlan
from tylo.nvgpu.warp.mma import PlanError, TiledMMA

__all__ = ["StagedStore", "staged_store"]

VECTOR = 4  # f32 elements in one 16-byte store
I32 = ir.IntType(32)
F32 = ir.FloatType()


@dataclass(frozen=True)
class StagedStore:
    """Plan the staged store of ``plan``'s f32 accumulator tile (BM, BN): a scratch tile
    ``(BM, BN):(1, BM + pad)`` in shared memory, read back as 16-byte vectors along M."""

    plan: TiledMMA
    pad: int = VECTOR

    def __post_init__(self) -> None:
        bm = self.plan.size[0]
        if self.pad % VECTOR or self.pad < 0 or bm % VECTOR:
            raise PlanError(
                f"StagedStore: the tile's {bm} rows and the padding {self.pad} must be "
                f"multiples of {VECTOR} (16-byte vectors along M)"
            )
        _ = self.proofs

    @property
    def tile(self) -> tuple[int, int]:
        bm, bn, _ = self.plan.size
        return bm, bn

    @property
    def scratch(self) -> Layout:
        """(M, N) -> f32 element offset of the scratch tile: M-contiguous, padded columns."""
        bm, bn = self.tile
        return Layout((bm, bn), (1, bm + self.pad))

    @property
    def elements(self) -> int:
        bm, bn = self.tile
        return (bm + self.pad) * bn

    @property
    def shared_bytes(self) -> int:
        return self.elements * 4

    @functools.cached_property
    def reads(self) -> CopyPlan:
        """The read-back: vectors of 4 rows of one column over the (N, M) tile; a warp
        takes 32 consecutive vectors (512 bytes) of a column."""
        bm, bn = self.tile
        nm = Layout((bn, bm), (bm + self.pad, 1))
        return CopyPlan((bn, bm), tylo.f32, self.plan.threads, nm)

    def write_conflicts(self) -> int:
        """The worst number of extra shared-memory wavefronts of any warp's scalar write
        of one accumulator slot (0: conflict-free), counted over every lane."""
        table = self.plan.acc_ownership.table()
        worst = 0
        for w in range(self.plan.threads // 32):
            for v in range(table.shape[1]):
                banks: dict[int, set[int]] = {}
                for lane in range(32):
                    m, n = (int(x) for x in table[32 * w + lane, v])
                    off = self.scratch(m, n)
                    banks.setdefault(off % 32, set()).add(off)
                worst = max(worst, max(len(s) for s in banks.values()) - 1)
        return worst

    @functools.cached_property
    def proofs(self) -> dict[str, Any]:
        from tylo.layouts import dim
        from tylo.layouts.proofs import prove_bounded, prove_injective

        out: dict[str, Any] = {}
        acc = self.plan.acc_ownership
        writes = composition(self.scratch, acc.tv)
        for what, v in (
            (
                f"scratch within its {self.shared_bytes} shared bytes",
                prove_bounded(self.scratch, extent=self.elements),
            ),
            ("fragment writes unique", prove_injective(writes)),
        ):
            if not v:
                raise PlanError(f"StagedStore {self.scratch}: {what} is {v.status}: {v.reason}")
            out[what] = v
        out["fragment writes: bank conflicts"] = self.write_conflicts()
        for what, v in self.reads.proofs.items():
            what = what.replace("destinations unique", "vectors unique")
            out[f"read-back: {what.replace('destination', 'scratch')}"] = v
        out["read-back: bank conflicts"] = self.reads.bank_conflicts()
        bm, bn = self.tile
        ldd = dim("ldd", multiple_of=VECTOR)
        for what, v in self.reads.prove_source(Layout((bn, bm), (ldd, 1))).items():
            what = what.replace("source", "D")
            out[f"global stores: {what} (ldd a multiple of {VECTOR})"] = v
        return out


def staged_store(st: StagedStore, window: Any, fragment: Any, tid: Any, scratch: Any) -> None:
    """Store the accumulator ``fragment`` (``st.plan``'s ownership) into the global tile
    ``window`` (the full (BM, BN) window of D, M-contiguous, 16-byte aligned, ``ldd`` a
    multiple of 4) through ``scratch`` (a shared f32 tensor of ``st.elements``, which this
    overwrites: every warp must be done with it). Two barriers; call it from every thread."""
    from tylo.kernel import facts
    from tylo.kernel.context import current
    from tylo.nvgpu.instructions import ld_shared_vector, st_shared
    from tylo.tile.access import GlobalTile, shared_address
    from tylo.tile.fragment import Fragment

    if not isinstance(fragment, Fragment) or fragment.ownership != st.plan.acc_ownership:
        raise PlanError("staged_store: expects a fragment with the plan's accumulator ownership")
    if not isinstance(window, GlobalTile) or tuple(window.shape) != st.tile:
        raise PlanError(f"staged_store: the window must be a {st.tile} GlobalTile, got {window!r}")
    if fragment.packed is not None:
        fragment = fragment.unpack()
    own = fragment.ownership
    b = current().builder
    tylo.sync_threads()  # every warp is done reading the pipeline's stages
    # one 32-bit shared base per thread; every access adds a constant (the layout is linear)
    base = shared_address(scratch, st.scratch(*own.thread_coord(tid)), tylo.f32)
    for v in range(own.values):
        off = 4 * st.scratch(*own.value_coord(v))
        st_shared(b, b.add(base, I32(off)) if off else base, fragment.values[v].use())
    tylo.sync_threads()
    origin = window.offset((0, 0))
    if facts.divides(VECTOR, origin) is not True:
        raise PlanError(
            f"staged_store: cannot prove the window's first element offset {origin} a "
            f"multiple of {VECTOR} (state ldd a multiple of {VECTOR}: tylo.assume)"
        )
    reads = st.reads.ownership  # over (N, M)
    n_t, m_t = reads.thread_coord(tid)
    base = shared_address(scratch, st.scratch(m_t, n_t), tylo.f32)
    for j in range(st.reads.vectors_per_thread):
        n_v, m_v = reads.value_coord(VECTOR * j)
        off = 4 * st.scratch(m_v, n_v)
        words = ld_shared_vector(b, b.add(base, I32(off)) if off else base, F32, VECTOR)
        _store_vector(window, (m_t + m_v, n_t + n_v), words)


def _store_vector(window: Any, coord: tuple, values: list) -> None:
    """One 16-byte store of 4 f32 at ``coord`` of the M-contiguous global ``window``: the
    vectors' alignment within the window is proved on the host (:class:`StagedStore`),
    the window's origin in :func:`staged_store`, the base by the kernel's assumption."""
    from tylo.kernel.context import current

    if window.storage.align < 16 or window.dtype is not tylo.f32:
        raise PlanError("staged_store: D must be f32 with a 16-byte aligned base (assume_aligned)")
    b = current().builder
    ptr = window.pointer(coord)
    vt = ir.VectorType(ir.FloatType(), VECTOR)
    vec: Any = ir.Constant(vt, ir.Undefined)
    for i, x in enumerate(values):
        vec = b.insert_element(vec, x, I32(i))
    b.store(vec, b.bitcast(ptr, vt.as_pointer(ptr.type.addrspace)), align=16)
