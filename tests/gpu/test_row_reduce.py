# TEST_TARGET: cc>=8.0
"""examples/row_reduce: assembly (16-byte vector loads, warp shuffles; always), row sums and
maxima at awkward shapes through every path (vector, scalar, strided, block per row), from
tylo buffers and torch tensors, and the command line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import tylo

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from examples.row_reduce.kernel import (
    BLOCK,
    CACHE,
    UNROLL,
    WARPS_PER_ROW,
    compile_for,
    plan,
    row_reduce_kernel,
    verify,
)

RUN = [sys.executable, str(ROOT / "examples" / "row_reduce" / "run.py")]
SHAPES = [
    (1, 1),
    (3, 1),
    (1, 4097),
    (33, 4097),
    (257, 31),
    (1, 1_000_003),
    (4096, 33),
    (1000, 4096),
]
F32 = tylo.f32


pytestmark = pytest.mark.interpret  # the runtime tests here run in the interpreter tier too


def compiled(op, vec, warps_per_row, target):
    return compile_for(op, vec, warps_per_row, target)


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("op", ["sum", "max"])
def test_assembly(target, op):
    k = compiled(op, 4, 1, target)
    assert "ld.global.v4.f32" in k.ptx
    assert "shfl.sync.bfly.b32" in k.ptx
    assert ".extern .func llvm." not in k.ptx
    assert "LDG.E.128" in k.sass and "SHFL.BFLY" in k.sass and "STG.E" in k.sass
    assert not k.resources.spill_stores
    if op == "max":
        assert "max.f32" in k.ptx
    block = compiled(op, 4, BLOCK // 32, target)
    assert "bar.sync" in block.ptx and block.resources.shared_bytes == 4 * (BLOCK // 32)
    scalar = compiled(op, 1, 1, target)
    assert "ld.global.v4" not in scalar.ptx and "ld.global.f32" in scalar.ptx
    assert len(k.guards) == 2  # 16-byte aligned rows and a row stride multiple of 4


def test_plan_choices():
    assert plan(8192, 8192, 8192, 1, 0, 4)["vec"] == 4
    assert plan(8192, 8192, 8192, 1, 4, 4)["vec"] == 1  # misaligned base
    assert plan(10, 4097, 4097, 1, 0, 4)["vec"] == 1  # misaligned rows
    assert plan(10, 10, 1, 10, 0, 4)["vec"] == 1  # strided columns
    assert plan(1, 1_000_003, 1_000_003, 1, 0, 4)["warps_per_row"] == BLOCK // 32
    assert plan(8192, 8192, 8192, 1, 0, 4)["warps_per_row"] == WARPS_PER_ROW


@pytest.mark.parametrize("op", ["sum", "max"])
@pytest.mark.parametrize("rows,cols", SHAPES)
def test_device_buffers(gpu_runtime, rows, cols, op):
    verify(rows, cols, op, seed=rows * 7 + cols)


@pytest.mark.parametrize("op", ["sum", "max"])
@pytest.mark.parametrize("rows,cols", [(33, 4097), (1, 4097), (5, 1), (300, 515)])
def test_strided_and_misaligned(gpu_runtime, rows, cols, op):
    verify(rows, cols, op, seed=1, transpose=True)
    r = verify(rows, cols, op, seed=2, offset=1)
    assert r["vec"] == 1


@pytest.mark.interpret(skip="makes torch CUDA tensors; the interpreter takes CPU tensors")
@pytest.mark.parametrize("op", ["sum", "max"])
@pytest.mark.parametrize("rows,cols", [(1, 4097), (33, 4097), (64, 1024), (2, 1)])
def test_torch_tensors(gpu_runtime, rows, cols, op):
    pytest.importorskip("torch", reason="torch is not installed: the torch half needs it")
    r = verify(rows, cols, op, use_torch=True, seed=3)
    if cols % 4 == 0:
        assert r["vec"] == 4
    verify(rows, cols, op, use_torch=True, seed=4, transpose=True)


@pytest.mark.parametrize("op", ["sum", "max"])
@pytest.mark.parametrize(
    "warps_per_row,unroll,block", [(1, 2, 256), (2, 4, 256), (8, 4, 256), (4, 8, 128), (16, 2, 512)]
)
def test_work_splits(gpu_runtime, warps_per_row, unroll, block, op):
    for rows, cols in [(1, 4097), (3, 33), (257, 2048), (5, 1)]:
        r = verify(
            rows,
            cols,
            op,
            seed=rows + cols,
            warps_per_row=warps_per_row,
            unroll=unroll,
            block=block,
        )
        assert r["warps_per_row"] == min(warps_per_row, block // 32)


def test_vector_path_guards_are_checked(gpu_runtime):
    import numpy as np

    from tylo.arrays import DeviceArray, DeviceBuffer

    buf = DeviceBuffer.from_numpy(np.ones(4 * 64 + 1, np.float32))
    out = DeviceBuffer.empty(4, F32)
    x = DeviceArray(buf.ptr + 4, (4, 64), (64, 1), F32, buf.device, owner=buf)
    with pytest.raises(tylo.KernelArgumentError, match="aligned to 16 bytes"):
        row_reduce_kernel[1, BLOCK](out, x, 4, 64, 64, 1, "sum", 4, 1, UNROLL, CACHE)
    y = DeviceArray(buf.ptr, (4, 62), (62, 1), F32, buf.device, owner=buf)
    with pytest.raises(tylo.KernelArgumentError, match="4 | ld"):
        row_reduce_kernel[1, BLOCK](out, y, 4, 62, 62, 1, "sum", 4, 1, UNROLL, CACHE)


def test_cli_compile_only_and_emit():
    out = subprocess.run(
        [*RUN, "8192", "8192", "--target", "sm_90a", "--compile-only"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "row_reduce_kernel[sum, vec=4, warps_per_row=4] [sm_90a" in out
    sass = subprocess.run(
        [*RUN, "64", "4097", "--op", "max", "--emit", "sass"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "SHFL.BFLY" in sass


@pytest.mark.parametrize(
    "args", [["1", "4097"], ["4097", "1", "--op", "max"], ["33", "4097", "--transpose"]]
)
def test_cli_runs_and_verifies(gpu_runtime, args):
    r = subprocess.run([*RUN, *args], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    assert "row_reduce: OK" in r.stdout
