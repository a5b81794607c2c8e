"""Copy plans on the host: the thread-value layout (16-byte vectors along K, coalesced),
exact coverage, the destination proofs (unique, contiguous, aligned) for plain and swizzled
shared layouts, source proofs over symbolic leading dimensions, and typed rejections."""

from __future__ import annotations

import pytest

from tylo import dtypes as dt
from tylo.layouts import Layout, Swizzle, composition, dim, make_tv_layout
from tylo.nvgpu.cpasync import CopyPlan
from tylo.nvgpu.warp.mma import PlanError


def _swizzled(rows: int, cols: int) -> object:
    return composition(Swizzle(2, 3, 3), Layout((rows, cols), (cols, 1)))


def test_layout_examples_copy_tv():
    # a documented CuTe case: threads (16,8):(8,1), values (1,8), tile (16,64):
    # ((8,16),8):((128,1),16)
    p = CopyPlan((16, 64), dt.bf16, 128, Layout((16, 64), (64, 1)))
    tile, tv = make_tv_layout(Layout((16, 8), (8, 1)), Layout((1, 8)))
    assert tile == (16, 64)
    for t in range(128):
        for v in range(8):
            assert p.ownership.tv(t, v) == tv(t, v)
    assert p.vector == 8 and p.vectors_per_thread == 1


@pytest.mark.parametrize(
    ("shape", "threads"),
    [
        ((128, 32), 256),
        ((256, 32), 256),
        ((64, 32), 128),
        ((128, 64), 128),
        ((16, 128), 64),
        ((8, 8), 1),
    ],
)
@pytest.mark.parametrize("swizzle", [False, True])
def test_coverage_and_proofs(shape, threads, swizzle):
    rows, cols = shape
    smem = _swizzled(rows, cols) if swizzle and cols >= 32 else Layout(shape, (cols, 1))
    p = CopyPlan(shape, dt.bf16, threads, smem)
    seen = {}
    for t in range(threads):
        for j in range(p.vectors_per_thread):
            r, c = p.vector_coord(t, j)
            for e in range(p.vector):
                assert (r, c + e) not in seen
                seen[(r, c + e)] = (t, j)
                # the vector's elements are consecutive slots of the ownership
                assert p.ownership.coord(t, p.vector * j + e) == (r, c + e)
    assert len(seen) == rows * cols
    # coalescing: consecutive threads take consecutive vectors of a row
    if cols // p.vector > 1 and threads > 1:
        assert p.vector_coord(1, 0) == (0, p.vector)
    assert {k: bool(v) for k, v in p.proofs.items()} == {
        "destinations unique": True,
        "destination vectors contiguous": True,
        "destination vectors aligned": True,
    }


def test_source_proofs_need_aligned_leading_dimension():
    p = CopyPlan((128, 32), dt.bf16, 256, _swizzled(128, 32))
    lda8 = dim("lda", multiple_of=8)
    assert all(bool(v) for v in p.prove_source(Layout((128, 32), (lda8, 1))).values())
    lda = dim("lda")
    v = p.prove_source(Layout((128, 32), (lda, 1)))
    assert bool(v["source vectors contiguous"])
    aligned = v["source vectors aligned"]
    assert not aligned and aligned.status == "disproved"
    assert aligned.counterexample["lda"] % 8 != 0
    # a tile origin that is not a multiple of the vector breaks alignment too
    k0 = dim("k0")
    assert not p.prove_source(Layout((128, 32), (lda8, 1)), base=k0)["source vectors aligned"]


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (((16, 60), dt.bf16, 64, Layout((16, 60), (60, 1))), "multiple of the 8-element"),
        (((16, 64), dt.bf16, 48, Layout((16, 64), (64, 1))), "split evenly"),
        (((16, 64), dt.bf16, 128, Layout((16, 64), (0, 1))), "destinations unique"),
        (((16, 64), dt.bf16, 128, Layout((16, 64), (68, 1))), "aligned"),
        (((16, 64), dt.bf16, 128, Layout((16, 64), (1, 16))), "contiguous"),
        (((16, 64), dt.bf16, 128, Layout((dim("m"), 64), (64, 1))), "static"),
        (((16, 64), dt.bf16, 128, Layout((16, 64), (64, 1)), 12), "vector_bytes"),
    ],
)
def test_invalid_copy_plans(args, match):
    with pytest.raises(PlanError, match=match):
        CopyPlan(*args)


def test_plan_is_hashable_and_frozen():
    a = CopyPlan((64, 32), dt.bf16, 128, _swizzled(64, 32))
    b = CopyPlan((64, 32), dt.bf16, 128, _swizzled(64, 32))
    assert a == b and hash(a) == hash(b)
    with pytest.raises(AttributeError):
        a.threads = 64  # type: ignore[misc]


def test_write_bank_conflicts():
    assert CopyPlan((128, 32), dt.bf16, 256, _swizzled(128, 32)).bank_conflicts() == 0
    assert CopyPlan((128, 32), dt.bf16, 256, Layout((128, 32), (32, 1))).bank_conflicts() == 0
    # one 16-byte vector per 256-byte row: 8 threads of a wavefront hit one bank group
    strided = CopyPlan((64, 8), dt.bf16, 64, Layout((64, 8), (128, 1)))
    assert strided.bank_conflicts() == 7
