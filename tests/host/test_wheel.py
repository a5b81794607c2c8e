"""The wheel ships tylo.ops: ``pip wheel .`` holds ``tylo/ops/**``, and with only the wheel
installed (no checkout on the path, run from elsewhere) each op's command line plans and
compiles its kernels for sm_90a without a GPU.

This builds a real wheel (pip's isolated build: setuptools and wheel from the package index
the machine uses) and installs it with ``--target`` into a temporary directory that comes
first on ``sys.path``; the test checks that ``tylo`` is imported from there."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    r = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    (whl,) = out.glob("tylo-*.whl")
    names = zipfile.ZipFile(whl).namelist()
    for fam in ("gemm", "attention", "softmax"):
        assert f"tylo/ops/{fam}/api.py" in names and f"tylo/ops/{fam}/kernel.py" in names
    assert "tylo/ops/torch_library.py" in names and not any(
        n.startswith("examples/") for n in names
    )
    target = out / "site"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--target",
            str(target),
            str(whl),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    return target


@pytest.mark.parametrize(
    ("fam", "sizes"),
    [
        ("gemm", ["64", "64", "64"]),
        ("attention", ["1", "2", "100", "64"]),
        ("softmax", ["8", "64"]),
    ],
)
def test_each_op_compiles_from_the_wheel_alone(installed, tmp_path, fam, sizes):
    env = {**os.environ, "PYTHONPATH": str(installed)}
    probe = "import tylo, tylo.ops; print(tylo.__file__)"
    r = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
        check=False,
    )
    assert r.returncode == 0 and r.stdout.startswith(str(installed)), (r.stdout, r.stderr)
    r = subprocess.run(
        [sys.executable, "-m", f"tylo.ops.{fam}", *sizes, "--target", "sm_90a", "--compile-only"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=600,
        check=False,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert "registers" in r.stdout, r.stdout[-2000:]
