# TEST_TARGET: cc>=9.0a
"""mbarriers, bulk copies and the pipeline, alone.

One producer thread streams ``chunks`` chunks of a global array through a ring of ``stages``
shared buffers with ``cp.async.bulk`` (completing on the full barriers' transaction counts);
a consumer warp waits on each stage, copies it out to global memory and releases it. With more
chunks than stages every barrier goes through several phases, so the output equals the input
only if the phase bookkeeping is right. The output is poisoned first.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import tylo
from tylo.nvgpu.mbarrier import (
    Pipeline,
    PipelineError,
    PipelinePlan,
    bulk_copy_to_shared,
)

CHUNK = 256  # f32 elements: 1 KB per stage


INTERPRET_SKIP = (  # the interpreter tier (tests/interp_tier.py)
    "sm_90a kernels (wgmma, TMA, mbarrier, setmaxnreg, clusters): the interpreter refuses "
    "these instructions by name (UnsupportedOperation; docs/interpret.md)"
)


@tylo.kernel
def stream(out, src: tylo.Ptr(align=16), chunks, stages: tylo.Static):
    pipe = Pipeline(PipelinePlan(stages=stages, consumers=32))
    buf = tylo.shared(src.dtype, stages * CHUNK, align=128)
    tid = tylo.thread_idx.x
    if tid == 0:
        pipe.init()
    tylo.sync_threads()
    if tid == 0:
        for it in tylo.range(chunks):
            pipe.producer_acquire(it)
            pipe.producer_commit(it, tx_bytes=CHUNK * 4)
            bulk_copy_to_shared(
                buf, pipe.stage(it) * CHUNK, src, it * CHUNK, CHUNK * 4, pipe.full, pipe.stage(it)
            )
    if tid >= 32:
        lane = tid - 32
        for it in tylo.range(chunks):
            pipe.consumer_wait(it)
            for j in range(CHUNK // 32):
                out[it * CHUNK + lane + 32 * j] = buf[pipe.stage(it) * CHUNK + lane + 32 * j]
            pipe.consumer_release(it)


def _compile(stages=3, target="sm_90a"):
    return stream.compile(
        tylo.f32, tylo.pointer(tylo.f32, align=16), int, stages, block=64, target=target
    )


def test_assembly():
    k = _compile()
    for text in (
        "mbarrier.init.shared::cta.b64",
        "mbarrier.arrive.expect_tx.shared::cta.b64",
        "mbarrier.try_wait.parity.shared::cta.b64",
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes",
    ):
        assert text in k.ptx, text
    assert "SYNCS" in k.sass
    assert "LDL" not in k.sass and "STL" not in k.sass


def test_needs_sm90():
    with pytest.raises(tylo.TyloError, match="sm_90"):
        _compile(target="sm_80")


@tylo.kernel
def wait_unarmed(out):
    pipe = Pipeline(PipelinePlan(stages=2, consumers=32))
    pipe.consumer_wait(0)
    out[0] = 1.0


@tylo.kernel
def too_many_consumers(out):
    Pipeline(PipelinePlan(stages=2, consumers=256))
    out[0] = 1.0


def test_misuse_is_a_trace_error():
    with pytest.raises(tylo.TyloError, match="no producer_commit"):
        wait_unarmed.compile(tylo.f32, block=32, target="sm_90a")
    with pytest.raises(tylo.TyloError, match="never complete"):
        too_many_consumers.compile(tylo.f32, block=64, target="sm_90a")


@pytest.mark.parametrize(
    "bad",
    [
        dict(stages=0, consumers=1),
        dict(stages=2, consumers=0),
        dict(stages=2, consumers=1, producers=2**20),
        dict(stages=1.5, consumers=1),
    ],
)
def test_plan_refuses_bad_counts(bad):
    with pytest.raises(PipelineError):
        PipelinePlan(**bad)


def test_plan_phases():
    plan = PipelinePlan(stages=3, consumers=1)
    assert [plan.stage(i) for i in range(7)] == [0, 1, 2, 0, 1, 2, 0]
    assert [plan.parity(i) for i in range(7)] == [0, 0, 0, 1, 1, 1, 0]


# -- a stage filled in parts (PipelinePlan(parts=2)): each half of a chunk on its own barrier --


@tylo.kernel
def stream_parts(out, src: tylo.Ptr(align=16), chunks, stages: tylo.Static,
                 by_part: tylo.Static):  # fmt: skip
    """Each chunk in two halves, each on its own full barrier; ``by_part``: each half also
    acquired and released on its own empty barrier (``empty_parts=2``), so the first half of
    a stage is refilled while the consumer still reads the second."""
    pipe = Pipeline(PipelinePlan(stages=stages, consumers=32, parts=2,
                                 empty_parts=2 if by_part else 1))  # fmt: skip
    buf = tylo.shared(src.dtype, stages * CHUNK, align=128)
    half = CHUNK // 2
    tid = tylo.thread_idx.x
    if tid == 0:
        pipe.init()
    tylo.sync_threads()
    if tid == 0:
        for it in tylo.range(chunks):
            if not by_part:
                pipe.producer_acquire(it)
            for part in (0, 1):
                if by_part:  # each half once its own empty barrier says it is free
                    pipe.producer_acquire(it, part=part)
                pipe.producer_commit(it, tx_bytes=half * 4, part=part)
                bulk_copy_to_shared(buf, pipe.stage(it) * CHUNK + part * half, src,
                                    it * CHUNK + part * half, half * 4, pipe.fulls[part],
                                    pipe.stage(it))  # fmt: skip
    if tid >= 32:
        lane = tid - 32
        for it in tylo.range(chunks):
            for part in (0, 1):  # each half as soon as it has landed
                pipe.consumer_wait(it, part=part)
                for j in range(half // 32):
                    e = part * half + lane + 32 * j
                    out[it * CHUNK + e] = buf[pipe.stage(it) * CHUNK + e]
                if by_part:  # released as soon as it is read
                    pipe.consumer_release(it, part=part)
            if not by_part:
                pipe.consumer_release(it)


def _compile_parts(stages=2, by_part=False):
    return stream_parts.compile(
        tylo.f32,
        tylo.pointer(tylo.f32, align=16),
        int,
        stages,
        by_part,
        block=64,
        target="sm_90a",
    )


def test_parts_have_their_own_full_barriers():
    """Two parts: ``stages`` full barriers per part (part 0's keep the name ``pipe_full``),
    one empty barrier per stage, and the consumer waits once per part."""
    for stages in (1, 3):
        ptx = _compile_parts(stages).ptx
        for name in ("pipe_full", "pipe_full1", "pipe_empty"):
            assert re.search(rf"\.shared \.align 8 \.b8 {name}\[{8 * stages}\];", ptx), name
        assert "pipe_full2" not in ptx
        assert ptx.count("mbarrier.arrive.expect_tx") >= 2
    one = _compile().ptx
    assert "pipe_full1" not in one  # one part: no second array


@tylo.kernel
def wait_unarmed_part(out):
    pipe = Pipeline(PipelinePlan(stages=2, consumers=32, parts=2))
    pipe.producer_commit(0, tx_bytes=16)  # part 0 only
    pipe.consumer_wait(0, part=1)
    out[0] = 1.0


@tylo.kernel
def part_misuse(out, plan: tylo.Static, op: tylo.Static, part: tylo.Static):
    """The pipeline's method ``op`` for iteration 0 and ``part`` (the misuse tests' kernel)."""
    getattr(Pipeline(plan), op)(0, part=part)
    out[0] = 1.0


def test_parts_misuse_is_a_trace_error():
    with pytest.raises(tylo.TyloError, match="PipelineError: consumer_wait: .* for part 1"):
        wait_unarmed_part.compile(tylo.f32, block=32, target="sm_90a")
    two = PipelinePlan(stages=2, consumers=32, parts=2)
    for op in ("producer_commit", "full_address"):
        for bad in (2, -1, True, 1.0, "1"):
            with pytest.raises(tylo.TyloError, match=rf"{op}: part must be an int in \[0, 2\)"):
                part_misuse.compile(tylo.f32, two, op, bad, block=32, target="sm_90a")
    for bad in (0, -1, 2**20, 1.5, True):
        with pytest.raises(PipelineError, match="parts"):
            PipelinePlan(stages=2, consumers=1, parts=bad)
    assert PipelinePlan(2, 1) == PipelinePlan(2, 1, 1, 1)  # one part: the plan as before


# -- parts released on their own (PipelinePlan(parts=2, empty_parts=2)): each half of a
# chunk acquired by the producer and released by the consumer alone, so the first half of a
# stage is refilled while the consumer still reads the second --


def test_release_parts_have_their_own_empty_barriers():
    """``empty_parts=2``: ``stages`` empty barriers per part (part 0's keep the name
    ``pipe_empty``), each initialized; without ``empty_parts`` no second array."""
    for stages in (1, 3):
        ptx = _compile_parts(stages, by_part=True).ptx
        for name in ("pipe_full", "pipe_full1", "pipe_empty", "pipe_empty1"):
            assert re.search(rf"\.shared \.align 8 \.b8 {name}\[{8 * stages}\];", ptx), name
        assert "pipe_empty2" not in ptx
        # four barrier arrays of `stages` each, every one initialized (a static loop)
        assert ptx.count("mbarrier.init.shared::cta.b64") == 4 * stages
        # part 1's empty barriers are addressed beyond their declaration (init, the
        # producer's wait, the consumer's arrive)
        assert len(re.findall(r"\bpipe_empty1\b", ptx)) >= 2
        assert re.search(r"mbarrier\.arrive\.shared::cta\.b64", ptx)
    assert "pipe_empty1" not in _compile_parts().ptx  # parts=2 alone: one empty per stage


def test_release_parts_misuse_is_a_trace_error():
    split = PipelinePlan(stages=2, consumers=32, parts=2, empty_parts=2)
    whole = PipelinePlan(stages=2, consumers=32, parts=2)
    for op in ("producer_acquire", "consumer_release"):
        with pytest.raises(tylo.TyloError, match=rf"PipelineError: {op}: .*2 empty barriers per "
                           rf"stage .*name the part"):  # fmt: skip
            part_misuse.compile(tylo.f32, split, op, None, block=32, target="sm_90a")
        for bad in (2, -1, True, 1.0, "1"):
            with pytest.raises(tylo.TyloError, match=rf"{op}: part must be an int in \[0, 2\)"):
                part_misuse.compile(tylo.f32, split, op, bad, block=32, target="sm_90a")
        # one empty barrier per stage: part 0 (or None) is it, part 1 does not exist
        with pytest.raises(tylo.TyloError, match=rf"{op}: part must be an int in \[0, 1\).*"
                           "empty_parts=n"):  # fmt: skip
            part_misuse.compile(tylo.f32, whole, op, 1, block=32, target="sm_90a")
        for ok in (0, None):
            assert "mbarrier" in part_misuse.compile(
                tylo.f32, whole, op, ok, block=32, target="sm_90a").ptx  # fmt: skip
        assert "mbarrier" in part_misuse.compile(
            tylo.f32, split, op, 1, block=32, target="sm_90a").ptx  # fmt: skip


@pytest.mark.parametrize(
    "bad",
    [
        dict(parts=1, empty_parts=2),  # more empty barriers than parts
        dict(parts=2, empty_parts=3),
        dict(parts=3, empty_parts=2),  # neither 1 nor parts
        dict(parts=2, empty_parts=0),
        dict(parts=2, empty_parts=True),
        dict(parts=2, empty_parts=2.0),
    ],
)
def test_plan_refuses_bad_empty_parts(bad):
    with pytest.raises(PipelineError, match="empty_parts"):
        PipelinePlan(stages=2, consumers=1, **bad)


def test_plan_with_empty_parts():
    assert PipelinePlan(2, 1, 1, 1) == PipelinePlan(2, 1, 1, 1, 1)  # the plan as before
    for parts in (1, 2, 5):
        for empty in (1, parts):
            plan = PipelinePlan(stages=3, consumers=4, parts=parts, empty_parts=empty)
            assert plan.empty_parts == empty
            assert [plan.parity(i) for i in range(7)] == [0, 0, 0, 1, 1, 1, 0]


@pytest.mark.parametrize(
    "kernel, flags",
    [(stream, ()), (stream_parts, (False,)), (stream_parts, (True,))],
    ids=["one", "parts", "release-parts"],
)
@pytest.mark.parametrize("stages,chunks", [(1, 5), (2, 2), (3, 17), (4, 64)])
def test_stream_through_the_ring(gpu_runtime, kernel, flags, stages, chunks):
    """Each ring above (one barrier per stage; full barriers per part; full and empty
    barriers per part) streams chunks through a few stages unchanged."""
    import torch

    src = torch.randn(chunks * CHUNK, device="cuda")
    out = torch.full_like(src, float("nan"))
    kernel[1, 64](out, src, chunks, stages, *flags)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(out.cpu().numpy(), src.cpu().numpy())
