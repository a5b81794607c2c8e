"""The GEMM's assembly, compiled for sm_80 and sm_90a without a GPU: tensor-core MMAs fed
by ldmatrix and cp.async, no local memory, registers within the hardware limit, and a lean
main loop (per K-tile: the plan's MMAs and ldmatrix loads, one barrier)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

import tylo

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tylo.nvgpu.warp.mma import MMAAtom, TiledMMA
from tylo.ops.gemm.host import compile_gemm
from tylo.ops.gemm.kernel import DEFAULT_PLAN, gemm_config, sass_summary

SEED = TiledMMA(MMAAtom((16, 8, 16), tylo.bf16), warps=(2, 2), repeat=(2, 4), k=32)
# ptxas 13.x adds the L2 128-byte qualifier (LTC128B) on its own to cp.async.cg
LDGSTS = re.compile(r"LDGSTS\.E\.BYPASS(\.LTC128B)?\.128\b")


def _check_common(k, summary):
    sass = k.module.sass_for(k.entry)
    assert "HMMA.16816.F32.BF16" in sass
    assert "LDSM.16.M88.4" in sass
    assert summary["total"]["LDL"] == 0 and summary["total"]["STL"] == 0
    assert summary["spills"] == (0, 0) and summary["stack"] == 0
    assert summary["registers"] <= 255
    return sass


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
def test_default_plan_full_tiles(target):
    cfg = gemm_config(DEFAULT_PLAN, stages=4, bounded=False)
    k = compile_gemm(cfg, target)
    s = sass_summary(k)
    sass = _check_common(k, s)
    assert LDGSTS.search(sass)
    loop = s["loop"]
    # one K-tile per iteration: 8 warps' 64x64 tiles are 4x8 atoms, 4 k-steps
    assert loop["HMMA"] == 128 and loop["LDSM"] == 32 and loop["LDGSTS"] == 12
    assert loop["BAR"] == 1
    assert loop["instructions"] <= 250  # index math stays out of the loop


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
def test_default_plan_edge_form_is_spill_free(target):
    """The bounded form runs the full tile's loop: rows clamped (no predicate), only the
    source size of the copies zero-fills past K; the edge tiles' stores are guarded."""
    cfg = gemm_config(DEFAULT_PLAN, stages=4, bounded=True, epilogue="staged")
    k = compile_gemm(cfg, target)
    s = sass_summary(k)
    sass = _check_common(k, s)
    loop = s["loop"]
    assert loop["HMMA"] == 128 and loop["LDSM"] == 32 and loop["LDGSTS"] == 12
    assert loop["BAR"] == 1 and loop["instructions"] <= 280
    assert re.search(r"LDGSTS\.E\.BYPASS(\.LTC128B)?\.128\.ZFILL", sass)
    assert "STG.E.128" in sass and "LDS.128" in sass  # the staged epilogue (full tiles)


def test_staged_epilogue_stores_16_bytes():
    cfg = gemm_config(DEFAULT_PLAN, stages=4, bounded=False, epilogue="staged")
    k = compile_gemm(cfg, "sm_90a")
    s = sass_summary(k)
    _check_common(k, s)
    ops = " ".join(s["opcodes"])
    bm, bn, _ = cfg.tile
    # 128 accumulators per thread into shared memory, 32 vectors of 4 back out
    assert s["total"]["STS"] == bm * bn // cfg.plan.threads
    assert s["total"]["STG"] == bm * bn // cfg.plan.threads // 4 and "STG.E.128" in ops
    assert "LDS.128" in ops and s["total"]["BAR"] >= 3


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
def test_seed_plan_bounded(target):
    cfg = gemm_config(SEED, stages=2)
    k = compile_gemm(cfg, target)
    s = sass_summary(k)
    sass = _check_common(k, s)
    assert re.search(r"LDGSTS\.E\.BYPASS(\.LTC128B)?\.128\.ZFILL", sass)  # edge zero-fill
    assert s["loop"]["HMMA"] % 16 == 0  # 2x4 atoms x 2 k-steps per K-tile (maybe unrolled)


def test_unaligned_leading_dimensions_never_use_vectors():
    cfg = gemm_config(SEED, stages=2, vector=False)
    k = compile_gemm(cfg, "sm_90a")
    s = sass_summary(k)
    _check_common(k, s)
    assert s["total"]["LDGSTS"] == 0
    assert "LDG.E.U16.CONSTANT" in s["opcodes"] or "LDG.E.U16" in " ".join(s["opcodes"])


def test_f16_single_stage_and_relu():
    plan = TiledMMA(MMAAtom((16, 8, 16), tylo.f16), warps=(2, 2), repeat=(2, 4), k=32)
    k = compile_gemm(gemm_config(plan, stages=1), "sm_90a", relu=True)
    sass = k.module.sass_for(k.entry)
    assert "HMMA.16816.F32 " in sass and "BF16" not in sass
    assert "FMNMX" in sass  # the ReLU


def test_pack_kernel_writes_16_bytes():
    from tylo.ops.gemm.pack import BLOCK, pack_rows_kernel

    k = pack_rows_kernel.compile(
        tylo.pointer(tylo.bf16, align=16), tylo.bf16, int, int, int, block=BLOCK, target="sm_90a"
    )
    sass = k.module.sass_for(k.entry)
    assert "STG.E.128" in sass and "LDG.E.U16.CONSTANT" in sass
    assert "LDL" not in sass and "STL" not in sass


def test_compile_is_fast_from_the_disk_cache():
    cfg = gemm_config(SEED, stages=2)
    compile_gemm(cfg, "sm_90a")
    from tylo.ops.gemm.kernel import tiled_gemm_kernel

    tiled_gemm_kernel._built.clear()
    k = compile_gemm(cfg, "sm_90a")
    assert k.timings["cache"] == "kernel-hit"  # the first-level entry: not even a trace
