# TEST_TARGET: cc>=8.0
"""examples/vector_add: assembly (always), correctness at awkward sizes from tylo buffers and
torch tensors, and the command line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import tylo

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from examples.vector_add.kernel import BLOCK, vector_add, verify

SIZES = [1, 31, 33, 1_000_003]
TORCH_CUDA = "launches torch CUDA tensors (.cuda()); the interpreter takes CPU tensors"
RUN = [sys.executable, str(ROOT / "examples" / "vector_add" / "run.py")]


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
def test_assembly(target):
    f32 = tylo.f32
    k = vector_add.compile(f32, f32, f32, int, block=BLOCK, target=target)
    assert ".maxntid 256, 1, 1" in k.ptx
    assert k.ptx.count("ld.global.f32") == 2 and "st.global.f32" in k.ptx
    assert ".extern .func llvm." not in k.ptx
    assert "LDG.E" in k.sass and "STG.E" in k.sass
    assert k.resources.registers <= 32 and not k.resources.spill_stores


@pytest.mark.interpret
@pytest.mark.parametrize("n", SIZES)
def test_device_buffers(gpu_runtime, n):
    verify(n, seed=n)


@pytest.mark.interpret(skip=TORCH_CUDA)
@pytest.mark.parametrize("n", SIZES)
def test_torch_tensors(gpu_runtime, n):
    pytest.importorskip("torch", reason="torch is not installed: the torch half needs it")
    verify(n, use_torch=True, seed=n)


@pytest.mark.interpret(skip="counts the GPU compiles (stats.compiles); the interpreter traces")
def test_other_dtypes_specialize(gpu_runtime):
    import numpy as np

    before = vector_add.stats.compiles
    verify(1000, dtype=np.float64, seed=1)
    verify(1000, dtype=np.float16, seed=2)
    assert vector_add.stats.compiles >= before + 2


def test_cli_compile_only_and_emit():
    out = subprocess.run(
        [*RUN, "1000", "--target", "sm_90a", "--compile-only"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "vector_add [sm_90a" in out and "registers" in out
    ptx = subprocess.run(
        [*RUN, "1000", "--target", "sm_80", "--emit", "ptx"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert ".target sm_80" in ptx and "ld.global.f32" in ptx


@pytest.mark.interpret
def test_cli_runs_and_verifies(gpu_runtime):
    r = subprocess.run([*RUN, "1000003"], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    assert "vector_add: OK" in r.stdout
