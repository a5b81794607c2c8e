"""Shared-memory barriers (``mbarrier``, sm_90) and the pipelines built on them.

An mbarrier (PTX ISA 9.7.13.15) is a 64-bit object in shared memory that completes a *phase*
when the expected number of threads have arrived *and* every byte announced with
``expect_tx`` has landed (asynchronous copies such as ``cp.async.bulk`` and TMA count their
bytes off it). Waiting names the phase by its parity: ``wait(i, parity)`` returns once the
phase with that parity has completed. Right after ``init`` the barrier is in phase 0, so
waiting on parity 1 returns at once (the "previous" phase counts as complete).

:class:`Barriers` is an array of mbarriers with the PTX operations as methods. A
:class:`Pipeline` is the usual ring of ``stages`` buffers between producers and consumers
(CUTLASS's TMA pipeline, in spirit): a *full* and an *empty* barrier per stage, and the
phase bookkeeping derived from the iteration count, so the kernel says only which iteration
it is on::

    pipe = Pipeline(PipelinePlan(stages=4, consumers=128))
    pipe.init()                      # one thread; then a CTA barrier
    # producer, iteration it:
    pipe.producer_acquire(it); ...issue copies completing on pipe.full_address(it)...
    pipe.producer_commit(it, tx_bytes=nbytes)
    # consumers, iteration it:
    pipe.consumer_wait(it); ...read stage pipe.stage(it)...; pipe.consumer_release(it)

A stage filled in *parts* that consumers may use as each lands (the K and the V tile of an
attention stage) takes ``PipelinePlan(..., parts=2)``: a full barrier per part and stage
(``pipe.fulls[p]``), armed and waited for by part (``producer_commit(it, tx_bytes=n,
part=p)``, ``consumer_wait(it, part=p)``), and by default still one empty barrier per stage,
released once the consumers are done with every part. Each part's full barrier completes
once per use of its stage, so every part has the same phase parity as the stage.

A stage whose parts consumers are done with at different times (K of an attention tile
after ``S = Q Kᵀ``, V only after ``P V``) also takes ``empty_parts=parts``: an empty
barrier per part and stage (``pipe.empties[p]``), each released on its own
(``consumer_release(it, part=p)``) and acquired on its own before its part is refilled
(``producer_acquire(it, part=p)``). Every consumer releases every part once per use of the
stage, so each part's empty barrier too completes once per use: the producer waits on
parity ``1 - (it // stages) % 2`` for every part, and a part is refilled as soon as it alone
is free. With several empty barriers per stage the part must be named (a trace-time
:class:`PipelineError` otherwise: a release of one part cannot stand for the others).

Stage ``it % stages`` is reused every ``stages`` iterations; the parity a consumer waits on is
``(it // stages) % 2``, and a producer waits on the opposite parity of the empty barrier (its
first pass through the ring does not wait). Misuse caught at trace time raises
:class:`PipelineError`: arrival counts that do not fit the block, a consumer that waits on a
pipeline whose producer side was never armed in the kernel, or a full barrier armed with
bytes that are not a multiple of 16.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from llvmlite import ir

from tylo import dtypes as dt
from tylo.backend.inline_ptx import PTXAsm
from tylo.nvgpu.errors import PlanError, as_int

__all__ = [
    "Barriers",
    "Pipeline",
    "PipelineError",
    "PipelinePlan",
    "bulk_copy_to_shared",
    "fence_barrier_init",
]

I32 = ir.IntType(32)
I64 = ir.IntType(64)
_MAX_COUNT = (1 << 20) - 1  # mbarrier arrival counts are 20-bit (PTX ISA 9.7.13.15.1)
_MAX_TX = (1 << 20) - 1  # and so are transaction counts


class PipelineError(PlanError):
    """A barrier or pipeline used in a way that would hang or race."""


def _ctx() -> Any:
    from tylo.kernel.context import current
    from tylo.nvgpu.instructions import check_arch

    ctx = current()
    check_arch("mbarrier", ctx.target)
    ctx.other_sync = True  # mbarriers order threads: the race check claims no race then
    return ctx


def _i32(x: Any, what: str) -> ir.Value:
    from tylo.kernel.context import current
    from tylo.kernel.lower import lower_int
    from tylo.kernel.values import to_index

    if type(x) is int:
        if not 0 <= x < 2**31:
            raise PipelineError(f"{what} must be in [0, 2**31), got {x}")
        return I32(x)
    return lower_int(current(), to_index(x, what), 32)


class Barriers:
    """``n`` mbarriers in static shared memory (8-byte aligned), inside a kernel."""

    def __init__(self, n: int, *, name: str = "mbar") -> None:
        from tylo.kernel.memory import shared

        if type(n) is not int or n < 1:
            raise PipelineError(f"Barriers: n must be a positive int, got {n!r}")
        _ctx()
        self.n = n
        self.storage = shared(dt.u64, n, align=8, name=name)

    def address(self, i: Any) -> ir.Value:
        """The i32 shared address of barrier ``i`` (static or an index expression)."""
        from tylo.kernel.values import to_index
        from tylo.tile.views import shared_address

        if type(i) is int and not 0 <= i < self.n:
            raise PipelineError(f"Barriers: index {i} out of range for {self.n} barriers")
        return shared_address(self.storage, to_index(i, "barrier index"), dt.u64)

    def init(self, i: Any, count: int) -> None:
        """``mbarrier.init.shared::cta.b64 [bar], count``: expect ``count`` arrivals per phase.
        One thread initializes; the others must not touch the barrier before a CTA barrier
        (``tylo.sync_threads()``) or :func:`fence_barrier_init` plus a cluster barrier."""
        if type(count) is not int or not 1 <= count <= _MAX_COUNT:
            raise PipelineError(f"mbarrier.init: count must be an int in [1, {_MAX_COUNT}]")
        ctx = _ctx()
        asm = PTXAsm("mbarrier.init")
        a = asm.input(self.address(i))
        c = asm.input(I32(count))
        asm.line(f"mbarrier.init.shared::cta.b64 [{a}], {c};")
        asm.emit(ctx.builder, memory=True)

    def arrive(self, i: Any, *, cta: Any = None, scope: str | None = None) -> None:
        """``mbarrier.arrive.shared::cta.b64 _, [bar]``: this thread arrives on barrier
        ``i``. With ``cta=rank`` (a cluster kernel), it arrives on barrier ``i`` of the CTA of
        cluster rank ``rank`` instead (``mapa``, then an arrive on ``.shared::cluster``).

        ``scope`` is the arrive's release scope. A remote arrive defaults to ``"cluster"``
        (``.release.cluster``): it publishes this thread's earlier *writes* to the peer CTA,
        whose waiter acquires them with ``wait(..., scope="cluster")``; in SASS that is a
        GPU-wide memory barrier (``MEMBAR.ALL.GPU``) before the arrive, which waits for every
        store the thread has in flight. ``scope="cta"`` (the default for a local arrive) has
        no such fence: enough when the arrive only says that this thread's *reads* of a
        buffer are complete (a read whose value has returned cannot see a later write), as a
        consumer releasing a pipeline stage does."""
        if scope not in (None, "cta", "cluster"):
            raise PipelineError(f"mbarrier arrive: scope must be 'cta' or 'cluster', got {scope!r}")
        sem = (
            ".release.cluster" if scope == "cluster" or (scope is None and cta is not None) else ""
        )
        ctx = _ctx()
        if cta is None:
            asm = PTXAsm("mbarrier.arrive")
            a = asm.input(self.address(i))
            asm.line(f"mbarrier.arrive{sem}.shared::cta.b64 _, [{a}];")
            asm.emit(ctx.builder, memory=True)
            return
        from tylo.nvgpu.cluster import map_shared_address

        remote = map_shared_address(self.address(i), cta)
        asm = PTXAsm("mbarrier.arrive remote")
        a = asm.input(remote)
        asm.line(f"mbarrier.arrive{sem}.shared::cluster.b64 _, [{a}];")
        asm.emit(ctx.builder, memory=True)

    def arrive_expect_tx(self, i: Any, nbytes: Any) -> None:
        """``mbarrier.arrive.expect_tx.shared::cta.b64 _, [bar], nbytes``: arrive, and make
        the current phase also wait for ``nbytes`` of asynchronous copies."""
        if type(nbytes) is int and not 0 <= nbytes <= _MAX_TX:
            raise PipelineError(f"mbarrier.expect_tx: {nbytes} bytes is outside [0, {_MAX_TX}]")
        ctx = _ctx()
        asm = PTXAsm("mbarrier.arrive.expect_tx")
        a = asm.input(self.address(i))
        t = asm.input(_i32(nbytes, "expect_tx bytes"))
        asm.line(f"mbarrier.arrive.expect_tx.shared::cta.b64 _, [{a}], {t};")
        asm.emit(ctx.builder, memory=True)

    def wait(self, i: Any, parity: Any, *, scope: str = "cta") -> None:
        """Spin on ``mbarrier.try_wait.parity.shared::cta.b64`` until the phase of ``parity``
        (0 or 1, static or runtime) of barrier ``i`` has completed. ``scope="cluster"``
        acquires at cluster scope (``.acquire.cluster``): writes that peer CTAs released
        with their remote arrives (``arrive(i, cta=...)``) are visible afterwards."""
        if scope not in ("cta", "cluster"):
            raise PipelineError(f"mbarrier wait: scope must be 'cta' or 'cluster', got {scope!r}")
        ctx = _ctx()
        sem = "" if scope == "cta" else ".acquire.cluster"
        asm = PTXAsm("mbarrier.try_wait.parity")
        a = asm.input(self.address(i))
        p = asm.input(_i32(parity, "parity"))
        for line in (
            "{",
            ".reg .pred %done;",
            "TYLO_MBAR_WAIT:",
            f"mbarrier.try_wait.parity{sem}.shared::cta.b64 %done, [{a}], {p};",
            "@!%done bra TYLO_MBAR_WAIT;",
            "}",
        ):
            asm.line(line)
        asm.emit(ctx.builder, memory=True)


def fence_barrier_init() -> None:
    """``fence.mbarrier_init.release.cluster``: make barrier initializations visible to the
    cluster (before a cluster barrier); inside one CTA, ``tylo.sync_threads()`` suffices."""
    ctx = _ctx()
    asm = PTXAsm("fence.mbarrier_init")
    asm.line("fence.mbarrier_init.release.cluster;")
    asm.emit(ctx.builder, memory=True)


def bulk_copy_to_shared(
    dst: Any, dst_offset: Any, src: Any, src_offset: Any, nbytes: int, barriers: Barriers, i: Any
) -> None:
    """``cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes`` (sm_90; PTX ISA
    9.7.9.25.4.1): copy ``nbytes`` (a multiple of 16) from element ``src_offset`` of global
    ``src`` to element ``dst_offset`` of shared ``dst``; the bytes complete on barrier ``i``
    (arm it with ``arrive_expect_tx`` for the same number of bytes). Both addresses must be
    16-byte aligned; issued by one thread."""
    from tylo.kernel.values import to_index
    from tylo.tile.views import shared_address

    if type(nbytes) is not int or nbytes <= 0 or nbytes % 16 or nbytes > _MAX_TX:
        raise PipelineError(
            f"cp.async.bulk: nbytes must be a positive multiple of 16 up to {_MAX_TX}, "
            f"got {nbytes!r}"
        )
    ctx = _ctx()
    b = ctx.builder
    d = shared_address(dst, to_index(dst_offset, "bulk copy destination"), dst.dtype)
    s = b.ptrtoint(src._pointer(to_index(src_offset, "bulk copy source")), I64)
    asm = PTXAsm("cp.async.bulk")
    da, sa, n, m = (
        asm.input(d),
        asm.input(s),
        asm.input(I32(nbytes)),
        asm.input(barriers.address(i)),
    )
    asm.line(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes "
        f"[{da}], [{sa}], {n}, [{m}];"
    )
    asm.emit(b, memory=True)


@dataclass(frozen=True)
class PipelinePlan:
    """A ring of ``stages`` buffers: ``producers`` arrivals complete a full barrier (1 for
    a single thread issuing TMA or bulk copies with ``expect_tx``), ``consumers`` arrivals
    complete an empty barrier (every consumer thread, or one elected thread per warp).
    ``parts``: full barriers per stage, one per part of the stage that completes on its own
    (each armed with its own bytes and waited for on its own). ``empty_parts``: empty
    barriers per stage, 1 (the stage is released once, when every part is done) or
    ``parts`` (each part released by the consumers and acquired by the producer on its own).
    Every empty barrier of a stage expects ``consumers`` arrivals per phase."""

    stages: int
    consumers: int
    producers: int = 1
    parts: int = 1
    empty_parts: int = 1

    def __post_init__(self) -> None:
        for name in ("stages", "consumers", "producers", "parts", "empty_parts"):
            v = getattr(self, name)
            if type(v) is not int or not 1 <= v <= _MAX_COUNT:
                raise PipelineError(
                    f"PipelinePlan: {name} must be an int in [1, {_MAX_COUNT}], got {v!r}"
                )
        if self.empty_parts not in (1, self.parts):
            raise PipelineError(
                f"PipelinePlan: empty_parts must be 1 (one empty barrier per stage) or parts "
                f"= {self.parts} (one per part), got {self.empty_parts}; a part's release "
                "names the part its full barrier does"
            )

    def stage(self, it: Any) -> Any:
        """The stage iteration ``it`` (a non-negative int or an index expression) uses."""
        return _iteration(it, "stage") % self.stages

    def parity(self, it: Any) -> Any:
        """The parity of the full barrier's phase that iteration ``it`` consumes."""
        return (_iteration(it, "parity") // self.stages) % 2


def _iteration(it: Any, op: str) -> Any:
    """An iteration count: a non-negative static int (numpy integers too), or a traced
    index (an expression or an integer Value); a PipelineError otherwise."""
    import sympy

    if isinstance(it, sympy.Basic) or (hasattr(it, "dtype") and not isinstance(it, np.generic)):
        return it
    v = as_int(it)
    if v is None or v < 0:
        raise PipelineError(f"PipelinePlan.{op}: it must be an iteration count >= 0, got {it!r}")
    return v


class Pipeline:
    """The barriers of a :class:`PipelinePlan` inside a kernel, and its four operations,
    each given the iteration count ``it`` (0, 1, 2, ...; static or an index expression)."""

    def __init__(self, plan: PipelinePlan, *, name: str = "pipe") -> None:
        from tylo.kernel.context import current

        if not isinstance(plan, PipelinePlan):
            raise PipelineError(f"Pipeline: expected a PipelinePlan, got {plan!r}")
        ctx = current()
        bx, by, bz = ctx.block
        cx, cy, cz = ctx.cluster or (1, 1, 1)
        block = bx * by * bz
        # arrivals may come from every CTA of the cluster (remote arrives, cta=rank)
        threads, where = block * cx * cy * cz, "block" if ctx.cluster is None else "cluster"
        for what, count in (("consumers", plan.consumers), ("producers", plan.producers)):
            if count > threads:
                raise PipelineError(
                    f"Pipeline: {count} {what} arrive per phase, but the {where} has {threads} "
                    "threads: the barrier would never complete"
                )
        self.plan = plan
        self.full = Barriers(plan.stages, name=f"{name}_full")
        self.empty = Barriers(plan.stages, name=f"{name}_empty")
        # part p > 0 of every stage: its own full barriers (part 0's are ``full``), and with
        # empty_parts its own empty barriers (part 0's are ``empty``)
        self.fulls = (self.full,) + tuple(
            Barriers(plan.stages, name=f"{name}_full{p}") for p in range(1, plan.parts)
        )
        self.empties = (self.empty,) + tuple(
            Barriers(plan.stages, name=f"{name}_empty{p}") for p in range(1, plan.empty_parts)
        )
        self._armed: set[int] = set()

    def init(self) -> None:
        """Initialize every barrier (call from one thread, then ``tylo.sync_threads()``)."""
        for s in range(self.plan.stages):
            for full in self.fulls:
                full.init(s, self.plan.producers)
            for empty in self.empties:
                empty.init(s, self.plan.consumers)

    def stage(self, it: Any) -> Any:
        return self.plan.stage(it)

    def _part(self, part: Any, op: str) -> int:
        if type(part) is not int or not 0 <= part < self.plan.parts:
            raise PipelineError(
                f"{op}: part must be an int in [0, {self.plan.parts}) for a pipeline of "
                f"{self.plan.parts} part(s) per stage, got {part!r}; use "
                "PipelinePlan(..., parts=n) for stages filled in n parts"
            )
        return part

    def _empty_part(self, part: Any, op: str) -> int:
        n = self.plan.empty_parts
        if part is None:
            if n > 1:
                raise PipelineError(
                    f"{op}: this pipeline has {n} empty barriers per stage "
                    f"(PipelinePlan(empty_parts={n})), each released and acquired on its own; "
                    f"name the part: {op}(it, part=p) with p in [0, {n})"
                )
            return 0
        if type(part) is not int or not 0 <= part < n:
            fix = (
                "PipelinePlan(..., parts=n, empty_parts=n) for a stage of n parts released "
                "on their own"
                if n == 1
                else f"one of the {n} parts"
            )
            raise PipelineError(
                f"{op}: part must be an int in [0, {n}) for a pipeline of {n} empty "
                f"barrier(s) per stage, got {part!r}; use {fix}"
            )
        return part

    def full_address(self, it: Any, *, part: int = 0) -> ir.Value:
        """The shared address of the full barrier of iteration ``it``'s stage (its part
        ``part``)."""
        return self.fulls[self._part(part, "full_address")].address(self.plan.stage(it))

    def producer_acquire(self, it: Any, *, scope: str = "cta", part: int | None = None) -> None:
        """Wait until the consumers released the stage of iteration ``it`` (returns at once
        on the first pass through the ring), also when consumers of other CTAs release it
        (``consumer_release(it, cta=...)``: their arrives say only that reads are done).
        ``scope="cluster"`` acquires at cluster scope, for arrives made with
        ``Barriers.arrive(..., scope="cluster")`` that publish writes (an L1 invalidation in
        SASS after every wait). With ``empty_parts > 1``: wait for part ``part`` alone
        (required), on the same parity as the stage's (each part's empty barrier completes
        once per use of the stage)."""
        empty = self.empties[self._empty_part(part, "producer_acquire")]
        empty.wait(self.plan.stage(it), 1 - self.plan.parity(it), scope=scope)

    def producer_commit(self, it: Any, *, tx_bytes: Any = None, part: int = 0) -> None:
        """Arrive on the stage's full barrier (of part ``part``); with ``tx_bytes``, also
        expect that many bytes of asynchronous copies issued for this stage (part), a
        multiple of 16: the copies complete on ``fulls[part]``."""
        full = self.fulls[self._part(part, "producer_commit")]
        self._armed.add(part)
        if tx_bytes is None:
            full.arrive(self.plan.stage(it))
            return
        if type(tx_bytes) is int and tx_bytes % 16:
            raise PipelineError(f"producer_commit: tx_bytes {tx_bytes} is not a multiple of 16")
        full.arrive_expect_tx(self.plan.stage(it), tx_bytes)

    def consumer_wait(self, it: Any, *, part: int = 0) -> None:
        """Wait until the stage of iteration ``it`` is full. Waits must follow the ring's
        order, at most one pass ahead of the producer: a parity wait cannot tell phase n
        from phase n + 2, so a consumer that skips to an iteration a whole ring pass ahead
        (two consumers taking turns, say) sees an old phase complete and reads a stage
        before it is filled; order such consumers with barriers of their own (see
        the Hopper GEMM's ping-pong consumers in ``tylo/ops/gemm``). With parts, wait for part
        ``part``
        alone (same parity: each part's barrier completes once per use of the stage)."""
        self._part(part, "consumer_wait")
        if part not in self._armed:
            raise PipelineError(
                f"consumer_wait: no producer_commit was traced for part {part} of this "
                "pipeline before the first wait, so no phase of its full barriers can "
                "complete (trace the producer's branch first, as it runs first)"
            )
        self.fulls[part].wait(self.plan.stage(it), self.plan.parity(it))

    def consumer_release(self, it: Any, *, cta: Any = None, part: int | None = None) -> None:
        """Arrive on the stage's empty barrier (each of the plan's consumers once). With
        ``cta=rank`` (a cluster kernel whose producer multicasts into this CTA), arrive on
        the empty barrier of the CTA of cluster rank ``rank`` instead (a remote arrive): a
        stage written by multicast is free when the consumers of every receiving CTA
        released it, so the producer's plan counts all of them. The arrive releases at CTA
        scope (no fence): it only says the consumer's reads of the stage are complete (a
        wgmma's, once ``wait_group`` returned), and completed reads need no ordering against
        the producer's later writes; so ``producer_acquire`` needs no cluster-scope acquire
        either (CUTLASS's TMA pipelines do the same). With ``empty_parts > 1``: release part
        ``part`` alone (required), once the consumer's reads of that part are complete;
        each consumer must release every part once per iteration."""
        empty = self.empties[self._empty_part(part, "consumer_release")]
        empty.arrive(self.plan.stage(it), cta=cta, scope="cta")
