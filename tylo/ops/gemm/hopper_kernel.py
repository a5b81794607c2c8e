"""A persistent, warp-specialized Hopper GEMM.

The kernel computes ``C = epilogue(alpha * X @ Yᵀ)`` with X (R, K) and Y (S, K) K-contiguous and
C (R, S) row-major (leading dimension ``ldc``). The host (:mod:`tylo.ops.gemm.hopper_host`)
computes the example's ``D = alpha * A @ B`` (D M-contiguous, as ``tylo/ops/gemm``) as
``Dᵀ = B Aᵀ``: X is B, Y is A, and C is D seen as (N, M) row-major, so that each thread's
accumulator pairs, which are adjacent columns of C, are adjacent elements of D in memory.

One CTA per SM walks the ``bm x bn`` output tiles in a rasterized order (groups of
``group`` tile-rows, so that the tiles in flight at once share their X and Y panels in L2),
with three warpgroups:

- warpgroup 0, the *producer*, gives registers back (``setmaxnreg.dec 40``) and one of its
  threads streams X and Y tiles (``bm x bk`` and ``bn x bk``) by TMA into a ring of
  ``stages`` shared buffers, each stage completing on its *full* mbarrier; the ring runs on
  across tiles, so the next tile's loads overlap this tile's epilogue;
- warpgroups 1 and 2, the *consumers*, take registers (``setmaxnreg.inc 232``); consumer ``c``
  owns rows ``64 m_atoms c ..`` of the tile. Per k-tile it waits on the stage, issues
  ``bk/16`` wgmma (descriptors derived from the stage's tile layouts), commits them as one
  group, and waits for the *previous* group only (``wait_group(1)``), so the tensor cores
  always have the next group queued; then it releases the previous stage;
- the epilogue scales (``alpha``), optionally applies ReLU, converts to C's dtype and stores
  by ownership: whole interior tiles with one vector store per accumulator pair, edge tiles
  bounded element by element. TMA fills the out-of-bounds parts of edge tiles with zeros.
  With ``tma_store`` (bf16/f16 C) it writes the consumer's tile into a shared buffer of its
  own with ``stmatrix`` instead, and one thread hands it to the copy engine (TMA stores of
  64-column boxes, clipped at C's edges) while the warpgroup goes on to its next tile.

The shared tiles are the 128-byte-swizzled K-major layout ``S<3,3,3> o (rows, 64):(64, 1)``
(bf16/f16), which TMA writes and wgmma reads: the plans prove both facts on the host.
"""

from __future__ import annotations

from dataclasses import dataclass

import tylo
from tylo.kernel.values import to_index
from tylo.layouts import ComposedLayout, Layout, byte_swizzle
from tylo.nvgpu import tma
from tylo.nvgpu.cluster import cluster_ctarank, cluster_sync
from tylo.nvgpu.errors import PlanError
from tylo.nvgpu.mbarrier import Barriers, Pipeline, PipelinePlan, fence_barrier_init
from tylo.nvgpu.warp.stmatrix import store_fragment
from tylo.nvgpu.warpgroup.mma import (
    WarpgroupMMAAtom,
    commit_group,
    fence,
    fence_shared_to_async,
    mma_async,
    wait_group,
)
from tylo.nvgpu.warpgroup.roles import set_max_registers
from tylo.target import Target
from tylo.tile.access import store
from tylo.tile.fragment import zeros
from tylo.tile.views import GlobalTile, SharedTile

Dim = tylo.Dim
# setmaxnreg: 128 * (producer + 2 * consumer) <= 65536 registers of the SM. The cluster
# kernel's producer (multicast masks, peer ranks) spilled at 40 on an H200: it gets 56.
REGISTERS = {1: (40, 232), 2: (56, 224)}  # cluster -> (producer, consumer)
CONSUMERS = 2
THREADS = 128 * (1 + CONSUMERS)
OUT_DTYPES = ("f32", "bf16", "f16")
STMATRIX_DTYPES = ("bf16", "f16")  # what the TMA-store epilogue writes (stmatrix: 16-bit)
EPILOGUE_BOX = 64  # columns of one C box: 128 bytes of bf16/f16, one 128-byte swizzled row
SHARED_LIMIT = Target.parse("sm_90a").max_shared_bytes  # dynamic shared memory per block


# --8<-- [start:config]
@dataclass(frozen=True)
class HopperGemmConfig:
    """The tile (``bm`` = 64 * ``m_atoms`` rows per consumer warpgroup, ``bn`` columns,
    ``bk`` = 64: one 128-byte swizzled row of bf16/f16), the ring depth, the input dtype, the
    output dtype (``out``: f32, bf16 or f16), ReLU, and the tile order (``group`` tile-rows
    per raster band). With ``m_atoms = 2`` each consumer issues two independent wgmma chains
    per k-step."""

    bn: int = 128
    stages: int = 4
    dtype: object = tylo.bf16
    bk: int = 64
    m_atoms: int = 1
    out: object = tylo.f32
    relu: bool = False
    group: int = 8
    loads: bool = True  # False: the benchmark's wgmma ceiling (no TMA; wrong results)
    pairs: bool = True  # interior tiles store accumulator pairs as one vector (C's leading
    # dimension even, its base aligned to a pair: checked at launch)
    pingpong: bool = False  # each consumer takes every other tile (see the module docstring)
    cluster: int = 1  # 2: CTA pairs share the Y tile, each loading half for both (multicast)
    tma_store: bool = False  # the epilogue through shared memory: stmatrix, then TMA stores
    # (bf16/f16 out; gemm() falls back to the stores above where D's rows TMA cannot write)

    def __post_init__(self) -> None:
        if self.m_atoms not in (1, 2) or self.bn not in (64, 128, 256):
            raise PlanError(f"HopperGemmConfig: m_atoms 1 or 2, bn 64/128/256; got {self}")
        if self.m_atoms * self.bn > 256:  # the accumulators: m_atoms * bn / 2 f32 per thread
            raise PlanError(
                f"HopperGemmConfig: {self.m_atoms} x {self.bn} columns of accumulators need "
                f"{self.m_atoms * self.bn // 2} registers per thread, over the 128 that leave "
                "room under setmaxnreg 232; use m_atoms * bn <= 256"
            )
        if self.dtype not in (tylo.bf16, tylo.f16):
            raise PlanError(f"HopperGemmConfig: dtype must be bf16 or f16, got {self.dtype!r}")
        if getattr(self.out, "name", None) not in OUT_DTYPES:
            raise PlanError(f"HopperGemmConfig: out must be one of {OUT_DTYPES}, got {self.out!r}")
        if type(self.relu) is not bool:
            raise PlanError(f"HopperGemmConfig: relu must be a bool, got {self.relu!r}")
        for flag in ("loads", "pairs", "pingpong", "tma_store"):
            if type(getattr(self, flag)) is not bool:
                raise PlanError(
                    f"HopperGemmConfig: {flag} must be a bool, got {getattr(self, flag)!r}"
                )
        if self.cluster not in (1, 2) or type(self.cluster) is not int:
            raise PlanError(f"HopperGemmConfig: cluster must be 1 or 2, got {self.cluster!r}")
        if type(self.group) is not int or not 1 <= self.group <= 64:
            raise PlanError(
                f"HopperGemmConfig: group must be an int in [1, 64], got {self.group!r}"
            )
        if type(self.stages) is not int or not 2 <= self.stages <= 8:
            raise PlanError(
                f"HopperGemmConfig: stages must be an int in [2, 8], got {self.stages!r}"
            )
        if self.tma_store and self.out.name not in STMATRIX_DTYPES:
            raise PlanError(
                f"HopperGemmConfig: tma_store=True stages the output tile in shared memory with "
                f"stmatrix, which stores 16-bit elements; out is {self.out}: use out bf16 or "
                "f16, or tma_store=False"
            )
        if self.shared_bytes() > SHARED_LIMIT:
            raise PlanError(
                f"HopperGemmConfig: {self.shared_bytes()} B of shared memory (ring "
                f"{self.ring_bytes()} B + epilogue buffers {self.epilogue_bytes()} B) > 227 KiB;"
                " use fewer stages"
            )

    @property
    def bm(self) -> int:
        return 64 * self.m_atoms * (1 if self.pingpong else CONSUMERS)

    @property
    def stage_consumers(self) -> int:
        """The threads that read each stage of the ring."""
        return 128 * (1 if self.pingpong else CONSUMERS)

    @property
    def releases(self) -> int:
        """Arrivals that free a stage: one per consumer warp, of every CTA the stage's
        multicast half was written into."""
        return self.stage_consumers // 32 * self.cluster

    def smem_layouts(self) -> tuple:
        """The shared layouts of one stage's X and Y tiles: ``bm`` and ``bn`` rows of ``bk``
        elements, 128-byte swizzled (the K-major layout wgmma reads)."""
        swz = byte_swizzle(128, self.dtype.nbytes)
        return tuple(
            ComposedLayout(swz, 0, Layout((rows, self.bk), (self.bk, 1)))
            for rows in (self.bm, self.bn)
        )

    def stage_elements(self) -> tuple[int, int]:
        return self.bm * self.bk, self.bn * self.bk

    def ring_bytes(self) -> int:
        """The bytes of the ring's ``stages`` X and Y tiles (the start of dynamic shared
        memory; a multiple of 1024, so the epilogue buffers after it stay 1024-aligned)."""
        a, b = self.stage_elements()
        return self.stages * (a + b) * self.dtype.nbytes

    def epilogue_layout(self) -> ComposedLayout:
        """The shared layout of one consumer's epilogue buffer (``tma_store``): its
        ``64 m_atoms x bn`` output tile (in ``out``) as ``bn / 64`` TMA boxes one after
        another, box ``b`` holding columns ``64 b ..``, each ``(64 m_atoms, 64)`` row-major
        with the 128-byte swizzle; coordinates (row, column) of the tile. The host
        (``host.c_plan``) proves each box is the layout TMA reads for the C box."""
        rows = 64 * self.m_atoms
        swz = byte_swizzle(128, self.out.nbytes)
        boxes = self.bn // EPILOGUE_BOX
        return ComposedLayout(
            swz, 0, Layout((rows, (EPILOGUE_BOX, boxes)), (EPILOGUE_BOX, (1, self.box_elements)))
        )

    @property
    def box_elements(self) -> int:
        """Elements of one C box in the epilogue buffer (box ``b`` starts at ``b`` times
        this): ``64 m_atoms`` rows of 64."""
        return 64 * self.m_atoms * EPILOGUE_BOX

    def epilogue_elements(self) -> int:
        """Elements of one consumer's epilogue buffer (0 without ``tma_store``)."""
        return 64 * self.m_atoms * self.bn if self.tma_store else 0

    def epilogue_bytes(self) -> int:
        """The bytes of the consumers' epilogue buffers, one each (0 without ``tma_store``)."""
        return CONSUMERS * self.epilogue_elements() * self.out.nbytes

    def shared_bytes(self) -> int:
        """The dynamic shared memory a launch needs: the ring, then the epilogue buffers."""
        return self.ring_bytes() + self.epilogue_bytes()

    def describe(self) -> str:
        return (
            f"{self.bm}x{self.bn}x{self.bk} tile, {self.stages} stages, {CONSUMERS} consumer "
            f"warpgroups ({'ping-pong' if self.pingpong else 'cooperative'}) + 1 producer, "
            f"{self.shared_bytes() // 1024} KiB shared, "
            f"{self.dtype} in, {self.out} out{', ReLU' if self.relu else ''}, persistent "
            f"(raster bands of {self.group} tile-rows)"
            + (", 2-CTA clusters (Y multicast)" if self.cluster == 2 else "")
            + (", TMA-store epilogue" if self.tma_store else "")
        )


# --8<-- [end:config]


# --8<-- [start:schedule]
@tylo.inline
def _tile_coords(cfg, t, tiles_r, tiles_c):
    """Tile ``t`` of the rasterized order: bands of ``cfg.group`` tile-rows, walked
    column by column inside a band (the last band may be narrower)."""
    # runtime u32 arithmetic (the order needs no proofs), then back to index symbols (>= 0)
    # so that the stores' alignment facts (tile origins are multiples of the tile) follow
    t = tylo.value(t, tylo.u32)
    per_band = tylo.value(tiles_c, tylo.u32) * cfg.group
    band = t // per_band
    first = band * cfg.group
    rows = tylo.minimum(tylo.value(tiles_r, tylo.u32) - first, cfg.group)
    local = t - band * per_band
    return to_index(first + local % rows), to_index(local // rows)


@tylo.inline
def _schedule(cfg, r, s, k):
    """What every role needs to walk this CTA's tiles in the same order: the k-tiles per
    tile, this CTA's tile count, the grid of tile *units* (a unit: ``cluster`` tiles one
    above the other, one per CTA of a cluster) and this CTA's rank in its cluster."""
    tiles_r = (r + cfg.bm - 1) // cfg.bm
    tiles_c = (s + cfg.bn - 1) // cfg.bn
    units_r = (tiles_r + cfg.cluster - 1) // cfg.cluster
    # this cluster's units: cluster_id, cluster_id + clusters, ... (u32: a 64-bit division by
    # a runtime value is a subroutine call in SASS, and ptxas serializes every wgmma of a
    # function that makes calls)
    clusters = tylo.value(tylo.grid_dim.x // cfg.cluster, tylo.u32)
    work = tylo.value(units_r * tiles_c - tylo.block_idx.x // cfg.cluster, tylo.u32)
    my_tiles = to_index((work + clusters - 1) // clusters)
    # the ring's iteration counts (tile * k_tiles + kt) are runtime u32 values: their stage
    # and phase (mod / div by the ring depth) need no proof
    k_tiles = to_index(tylo.value((k + cfg.bk - 1) // cfg.bk, tylo.u32))
    rank = cluster_ctarank() if cfg.cluster == 2 else 0
    return (k_tiles, my_tiles, units_r, tiles_c, rank)


@tylo.inline
def _my_tile(cfg, i, sched):
    """The (row, column) tile of this CTA's ``i``-th unit."""
    unit = tylo.block_idx.x // cfg.cluster + i * (tylo.grid_dim.x // cfg.cluster)
    ur, tcol = _tile_coords(cfg, unit, sched[2], sched[3])
    return ur * cfg.cluster + sched[4], tcol


# --8<-- [end:schedule]


# --8<-- [start:epilogue]
@tylo.inline
def _epilogue(cfg, acc, c, r, s, ldc, alpha, row0, col0, tid):
    """Scale, ReLU, convert and store one 64-row accumulator at (row0, col0) of C."""
    out = acc * alpha
    if cfg.relu:
        out = tylo.where(out < 0.0, 0.0, out)  # NaN stays NaN, as torch.relu
    own = out.ownership
    tc = own.thread_coord(tid)
    if cfg.pairs and row0 + 64 <= r and col0 + own.shape[1] <= s:  # interior: pairs
        for v in range(0, own.values, 2):
            vc = own.value_coord(v)
            at = (row0 + tc[0] + vc[0]) * ldc + col0 + tc[1] + vc[1]
            c.store(
                at, (tylo.value(out.values[v], cfg.out), tylo.value(out.values[v + 1], cfg.out))
            )
    else:
        store(None, GlobalTile(c, Layout((r, s), (ldc, 1))), out, tid, origin=(row0, col0))


# --8<-- [end:epilogue]


# --8<-- [start:tma_epilogue]
def _consumer_barrier(w: int) -> None:
    """``bar.sync 1 + w, 128`` (PTX ISA 9.7.13.4 bar): consumer ``w``'s 128 threads meet on
    a named barrier of their own (0 is the CTA's ``sync_threads``; the ring and the ping-pong
    turns are mbarriers), so the other consumer's MMAs run on."""
    tylo.ptx(f"bar.sync {1 + w}, 128;")


@tylo.inline
def _tma_epilogue(cfg, accs, tc, buf, alpha, row0, col0, tid, w):
    """Consumer ``w``'s TMA-store epilogue: scale, ReLU, and hand the ``64 m_atoms x bn``
    tile at (row0, col0) of C to the copy engine: stmatrix into the consumer's buffer, then
    one TMA store per 64-column box, issued by thread 0 of the warpgroup. TMA writes only the
    part of a box inside C, so edge tiles take the same path."""
    outs = []
    for j in range(cfg.m_atoms):
        out = accs[j] * alpha
        if cfg.relu:
            out = tylo.where(out < 0.0, 0.0, out)  # NaN stays NaN, as torch.relu
        outs.append(out)
    base = w * cfg.epilogue_elements()  # this consumer's buffer
    if tid == 0:
        tma.wait_stores(0, read=True)  # the previous tile's stores have read the buffer
    _consumer_barrier(w)
    tile = SharedTile(buf, cfg.epilogue_layout(), base=base)
    for j in range(cfg.m_atoms):
        store_fragment(outs[j], tile.window((64 * j, 0), (64, cfg.bn)), tid)
    fence_shared_to_async()  # the stmatrix writes, visible to the TMA unit (async proxy)
    _consumer_barrier(w)
    if tid == 0:
        for b in range(cfg.bn // EPILOGUE_BOX):
            box = SharedTile(buf, tc.plan.smem_layout, base=base + b * cfg.box_elements)
            tma.store(tc, box, (row0, col0 + b * EPILOGUE_BOX))
        tma.commit_stores()


# --8<-- [end:tma_epilogue]


# --8<-- [start:consumer]
@tylo.inline
def _k_tile(cfg, atom, w, smem, pipe, it, pending, start):
    """Wait for ring iteration ``it``'s stage and issue its ``bk/16`` k-steps into the
    accumulators (one group, committed); returns the pending accumulators. ``start``: the
    tile's first k-tile, whose first k-step overwrites the accumulators (D = A*B) instead of
    adding, so no register is zeroed between tiles."""
    a_elems, b_elems = cfg.stage_elements()
    pipe.consumer_wait(it)
    base = pipe.stage(it) * (a_elems + b_elems)
    lx, ly = cfg.smem_layouts()
    sx = SharedTile(smem, lx, base=base)
    sy = SharedTile(smem, ly, base=base + a_elems)
    fence()
    out = list(pending)
    for kk in range(cfg.bk // 16):
        for j in range(cfg.m_atoms):
            row = 64 * j if cfg.pingpong else 64 * cfg.m_atoms * w + 64 * j
            x_rows = sx.window((row, 0), (64, cfg.bk))
            fresh = start and kk == 0
            out[j] = mma_async(atom, x_rows, sy, out[j], k_offset=16 * kk, accumulate=not fresh)
    commit_group()
    return out


@tylo.inline
def _release(cfg, pipe, it, rank, tid):
    """One arrival per consumer warp frees stage ``it`` (its wgmma reads are complete: the
    warpgroup waited for them); with a cluster, on the peer CTA's empty barrier too, since
    this CTA's stage also holds the peer's multicast half."""
    if tid % 32 == 0:
        pipe.consumer_release(it)
        if cfg.cluster == 2:
            pipe.consumer_release(it, cta=1 - rank)


@tylo.inline
def _consume(cfg, w, smem, pipe, turn, sched, c, tc, r, s, ldc, alpha, tid):
    """Consumer warpgroup ``w`` (static): its ``64 * m_atoms`` rows of every tile this CTA
    computes, all of the tile's columns, one accumulator per 64-row block."""
    atom = WarpgroupMMAAtom((64, cfg.bn, 16), cfg.dtype)
    rows = 64 * cfg.m_atoms
    lt = tid - 128 * (1 + w)  # the thread's index in its warpgroup
    if cfg.tma_store:  # the consumers' epilogue buffers, after the ring
        buf = tylo.dynamic_shared(
            cfg.out, CONSUMERS * cfg.epilogue_elements(), offset_bytes=cfg.ring_bytes(), align=1024
        )
    k_tiles, my_tiles, rank = sched[0], sched[1], sched[4]
    accs = tuple(zeros(atom.c) for _ in range(cfg.m_atoms))  # registers, reused per tile
    # cooperative: both consumers on every tile; ping-pong: consumer w on tiles w, w + 2, ..
    for i in tylo.range(w if cfg.pingpong else 0, my_tiles, 2 if cfg.pingpong else 1):
        tr, tcol = _my_tile(cfg, i, sched)
        first = i * k_tiles  # the ring's iteration count at this tile's first k-tile
        if cfg.pingpong:
            # a ring wait must not run ahead of the ring by a whole pass (a parity wait
            # cannot tell phase n from phase n + 2): wait for the other consumer's turn
            # to end, i.e. for its last wait on the ring, before the first wait of ours
            j = (i - w) // 2  # this consumer's tile count
            if w == 1:
                turn.wait(1, j % 2)
            elif j > 0:
                turn.wait(0, (j - 1) % 2)
        pending = _k_tile(cfg, atom, w, smem, pipe, first, accs, True)
        for kt in tylo.range(1, k_tiles):
            pending = _k_tile(cfg, atom, w, smem, pipe, first + kt, pending, False)
            # the previous k-tile's group is complete after this; this one stays queued
            wait_group(1)
            _release(cfg, pipe, first + kt - 1, rank, tid)
        if cfg.pingpong:
            turn.arrive(1 - w)  # our waits are done: the other consumer's turn
        done = wait_group(0, *pending)
        _release(cfg, pipe, first + k_tiles - 1, rank, tid)
        accs = done if cfg.m_atoms > 1 else (done,)
        row0 = tr * cfg.bm + (0 if cfg.pingpong else rows * w)
        if cfg.tma_store:
            _tma_epilogue(cfg, accs, tc, buf, alpha, row0, tcol * cfg.bn, lt, w)
        else:
            for j in range(cfg.m_atoms):
                _epilogue(cfg, accs[j], c, r, s, ldc, alpha, row0 + 64 * j, tcol * cfg.bn, lt)
    if cfg.tma_store and lt == 0:
        tma.wait_stores(0, read=False)  # this consumer's last stores are written


# --8<-- [end:consumer]


# --8<-- [start:producer]
@tylo.inline
def _produce(cfg, tx, ty, smem, pipe, sched):
    """The producer thread: for each k-tile of each of this CTA's tiles, wait until the
    stage is free, expect its bytes, and load X (this CTA's rows) and Y; in a 2-CTA cluster
    each CTA loads half of the Y tile, multicast into both CTAs' stages."""
    a_elems, b_elems = cfg.stage_elements()
    k_tiles, my_tiles, rank = sched[0], sched[1], sched[4]
    lx, ly = cfg.smem_layouts()
    half = cfg.bn // cfg.cluster  # the Y rows this CTA loads
    for i in tylo.range(my_tiles):
        tr, tcol = _my_tile(cfg, i, sched)
        for kt in tylo.range(k_tiles):
            it = i * k_tiles + kt
            st = pipe.stage(it)
            # the stage's consumers, in this CTA and (cluster) the peer, released it (their
            # arrives say their reads are done: no cluster-scope acquire needed)
            pipe.producer_acquire(it)
            if cfg.loads:
                pipe.producer_commit(it, tx_bytes=(a_elems + b_elems) * cfg.dtype.nbytes)
                base = st * (a_elems + b_elems)
                tma.load(
                    tx, SharedTile(smem, lx, base=base), (tr * cfg.bm, kt * cfg.bk), pipe.full, st
                )
                if cfg.cluster == 1:
                    sy = SharedTile(smem, ly, base=base + a_elems)
                    tma.load(ty, sy, (tcol * cfg.bn, kt * cfg.bk), pipe.full, st)
                else:
                    sy = SharedTile(
                        smem, ty.plan.smem_layout, base=base + a_elems + rank * half * cfg.bk
                    )
                    tma.load(
                        ty,
                        sy,
                        (tcol * cfg.bn + rank * half, kt * cfg.bk),
                        pipe.full,
                        st,
                        multicast=0b11,
                    )
            else:
                pipe.producer_commit(it)


# --8<-- [end:producer]


# --8<-- [start:kernel]
@tylo.kernel
def hopper_gemm_kernel(
    c, tx, ty, tc, r: Dim, s: Dim, k: Dim, ldc: Dim, alpha: float, cfg: tylo.Static
):
    if cfg.tma_store != (tc is not None):
        raise PlanError(
            f"hopper_gemm_kernel: tma_store={cfg.tma_store} takes "
            f"{'a C tensor map (host.c_plan)' if cfg.tma_store else 'tc=None'}; got {tc!r}"
        )
    if cfg.pairs:  # checked at every launch
        tylo.assume(tylo.divisible(ldc, 2))
        c = tylo.assume_aligned(c, 2 * cfg.out.nbytes)
    a_elems, b_elems = cfg.stage_elements()
    smem = tylo.dynamic_shared(cfg.dtype, cfg.stages * (a_elems + b_elems), align=1024)
    pipe = Pipeline(PipelinePlan(stages=cfg.stages, consumers=cfg.releases))
    turn = Barriers(2, name="turn") if cfg.pingpong else None  # ping-pong's turn-taking
    tid = tylo.thread_idx.x
    if tid == 0:
        pipe.init()
        if cfg.pingpong:
            turn.init(0, 128)
            turn.init(1, 128)
        if cfg.cluster == 2:
            fence_barrier_init()
    if cfg.cluster == 2:
        cluster_sync()  # the peer's barriers exist before anything arrives on them
    else:
        tylo.sync_threads()
    sched = _schedule(cfg, r, s, k)
    wg = tid // 128
    if wg == 0:
        set_max_registers(REGISTERS[cfg.cluster][0], increase=False)
        if tid == 0:
            _produce(cfg, tx, ty, smem, pipe, sched)
    elif wg == 1:
        set_max_registers(REGISTERS[cfg.cluster][1], increase=True)
        _consume(cfg, 0, smem, pipe, turn, sched, c, tc, r, s, ldc, alpha, tid)
    else:
        set_max_registers(REGISTERS[cfg.cluster][1], increase=True)
        _consume(cfg, 1, smem, pipe, turn, sched, c, tc, r, s, ldc, alpha, tid)
    if cfg.cluster == 2:
        cluster_sync()  # no CTA leaves while its peer may still arrive on its barriers


# --8<-- [end:kernel]
