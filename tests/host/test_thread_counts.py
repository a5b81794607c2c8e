"""A plan that spans T threads (an ownership, an MMA plan's fragments, a copy plan) cannot
run in a block of fewer threads: part of its tile would never be loaded, computed or
stored. Tracing such a kernel (a compile, or the trace of a launch's specialization) is
refused naming the plan; a block of T threads or more traces (warp-specialized kernels
give each role's plan a part of the block). No GPU needed: the check is at trace time."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tylo
from tylo.cli import EXIT_FAILED, main
from tylo.kernel.errors import TraceError
from tylo.layouts import Layout
from tylo.tile.access import GlobalTile
from tylo.tile.fragment_io import load_fragment, store_fragment
from tylo.tile.ownership import Ownership


@tylo.kernel
def copy_tile(out, x, own: tylo.Static):
    tid = tylo.linear_thread_idx()
    tile = Layout(own.shape, (own.shape[1], 1))
    f = load_fragment(tylo.view(x, tile), own, tid)
    store_fragment(tylo.view(out, tile), f, tid)


@tylo.kernel
def gemm_tile(out, plan: tylo.Static):
    from tylo.nvgpu.warp.mma import zero_accumulator
    from tylo.tile.access import store

    bm, bn, _ = plan.size
    acc = zero_accumulator(plan)
    store(plan, GlobalTile(out, Layout((bm, bn), (1, bm))), acc, tylo.thread_idx.x)


def ownership(threads: int) -> Ownership:
    """``threads`` threads, 4 values each, over a (threads, 4) row-per-thread tile."""
    return Ownership.from_modes((threads, 4), [(threads, 0, 1)], [(4, 1, 1)], f"rows x{threads}")


def test_the_warp_gemm_example() -> None:
    """The issue's example: a 2x4-warp MMA plan (256 threads) traced with a 64-thread
    block was compiled without a word; it is refused naming the plan and 256."""
    from tylo.nvgpu.warp.mma import MMAAtom, TiledMMA

    plan = TiledMMA(MMAAtom((16, 8, 16), tylo.bf16), warps=(2, 4), repeat=(1, 1), k=16)
    assert plan.threads == 256
    with pytest.raises(TraceError, match=r"spans 256 threads, but the block 64x1x1 has 64"):
        gemm_tile.trace(tylo.f32, plan, block=64)
    assert "define" in gemm_tile.trace(tylo.f32, plan, block=256).llvm


BLOCK = st.lists(st.sampled_from([1, 2, 4, 8, 16, 32, 64, 128, 256]), min_size=1, max_size=3)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(threads=st.sampled_from([1, 32, 64, 96, 128, 256, 512]), block=BLOCK)
def test_a_block_with_fewer_threads_than_the_plan_is_refused(threads, block) -> None:
    n = math.prod(block)
    if n > 1024:
        return  # not a block
    own = ownership(threads)
    if n < threads:
        with pytest.raises(TraceError) as info:
            copy_tile.trace(tylo.f32, tylo.f32, own, block=tuple(block))
        msg = str(info.value)
        assert f"rows x{threads} spans {threads} threads" in msg and f"has {n}:" in msg
    else:
        assert "define" in copy_tile.trace(tylo.f32, tylo.f32, own, block=tuple(block)).llvm


def test_host_side_uses_of_a_plan_are_not_traces() -> None:
    """Outside a trace the ownership answers for any thread, symbolic or not."""
    import sympy

    own = ownership(256)
    assert own.coords(255) == [(255, 0), (255, 1), (255, 2), (255, 3)]
    t = sympy.Symbol("t", integer=True, nonnegative=True)
    assert own.thread_coord(t)[0] is not None


KERNEL = """\
import tylo
from tylo.layouts import Layout
from tylo.tile.fragment_io import load_fragment, store_fragment
from tylo.tile.ownership import Ownership

OWN = Ownership.from_modes((256, 4), [(256, 0, 1)], [(4, 1, 1)], "rows x256")


@tylo.kernel
def copy_tile(out, x):
    tile = Layout((256, 4), (4, 1))
    f = load_fragment(tylo.view(x, tile), OWN, tylo.thread_idx.x)
    store_fragment(tylo.view(out, tile), f, tylo.thread_idx.x)
"""


def test_tylo_compile_refuses_the_block_naming_the_plan(capsys, tmp_path: Path) -> None:
    path = tmp_path / "tile.py"
    path.write_text(KERNEL)
    args = ["compile", f"{path}:copy_tile", "--arg", "out=ptr:f32", "--arg", "x=ptr:f32"]
    status = main([*args, "--block", "64", "--emit", "llvm"])
    _, err = capsys.readouterr()
    assert status == EXIT_FAILED and err.count("\n") <= 3
    assert "rows x256 spans 256 threads, but the block 64x1x1 has 64" in err
