"""``tylo compile FILE.py:KERNEL``: compile-only (no GPU) through libNVVM, argument specs
from the command line (``ptr:DTYPE[:ALIGN]``, ``int[:FACTS]``, ``float[:f64]``,
``py:EXPR``), each stage printed; usage errors exit 2, a kernel that does not trace exits
1, a missing compiler component exits 69 with the command that installs it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from extras import require_nvdisasm

from tylo.cli import EXIT_FAILED, EXIT_OK, EXIT_UNAVAILABLE, EXIT_USAGE, main

ROOT = Path(__file__).resolve().parents[2]
VECTOR_ADD = str(ROOT / "examples" / "vector_add" / "kernel.py")
KERNELS = """\
import tylo

SCALE = 2.0


@tylo.kernel
def scale(out, x, n: tylo.Int(multiple_of=4), relu: tylo.Static):
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    if i < n:
        v = x[i] * SCALE
        if relu:
            v = tylo.maximum(v, 0.0)
        out[i] = v


@tylo.kernel
def broken(out, n):
    out[0] = undefined_name


not_a_kernel = 3
"""


def toolchain_status() -> int:
    """What a compile should exit with here: 0 when libNVVM loads, else 69."""
    from tylo.cli.doctor_cmd import can_compile, check_nvjitlink, check_nvvm, check_tools

    return EXIT_OK if can_compile([check_nvvm(), check_nvjitlink(), *check_tools()]) else 69


@pytest.fixture
def kernels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("TYLO_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "my_kernels.py"
    path.write_text(KERNELS)
    return str(path)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


def test_compile_subprocess_emits_ptx(tmp_path: Path) -> None:
    args = ["--arg", "a=ptr:f32", "--arg", "b=ptr:f32", "--arg", "c=ptr:f32:16", "--arg", "n=int"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TYLO_CACHE_DIR": str(tmp_path)}
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "tylo.cli",
            "compile",
            f"{VECTOR_ADD}:vector_add",
            *args,
            "--block",
            "256",
            "--target",
            "sm_90a",
            "--emit",
            "ptx",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
        check=False,
    )
    want = toolchain_status()
    assert r.returncode == want, r.stderr
    if want == EXIT_OK:
        assert re.search(r"^\.visible \.entry vector_add\(", r.stdout, re.MULTILINE)
        assert re.search(r"^\.target sm_90a$", r.stdout, re.MULTILINE)
        assert r.stdout.count(".param .u64") == 4 and r.stderr == ""
    else:
        assert "pip install" in r.stderr


def test_every_stage_and_every_spec_kind(
    capsys: pytest.CaptureFixture[str], kernels: str, tmp_path: Path
) -> None:
    if toolchain_status() != EXIT_OK:
        status, _, err = run(
            capsys, "compile", f"{kernels}:scale", "--arg", "out=ptr:f32", "--block", "1"
        )
        assert status in (EXIT_UNAVAILABLE, EXIT_USAGE)
        return
    specs = [
        "--arg",
        "out=ptr:f32:16",
        "--arg",
        "x=ptr:f32",
        "--arg",
        "n=int:multiple_of=4,min=4",
        "--block",
        "128",
        "--target",
        "sm_80",
    ]
    status, relu, _ = run(
        capsys,
        "compile",
        f"{kernels}:scale",
        *specs,
        "--arg",
        "relu=py:SCALE > 1",
        "--emit",
        "llvm",
    )
    assert status == EXIT_OK and "llvm.maxnum.f32" in relu  # py: sees the module's globals
    status, plain, _ = run(
        capsys, "compile", f"{kernels}:scale", *specs, "--arg", "relu=py:False", "--emit", "llvm"
    )
    assert status == EXIT_OK and "maxnum" not in plain and 'shl i64 %".5", 7' in plain
    status, ptx, _ = run(capsys, "compile", f"{kernels}:scale", *specs, "--arg", "relu=py:True")
    assert status == EXIT_OK and ".target sm_80" in ptx and ".entry scale(" in ptx
    status, res, _ = run(
        capsys,
        "compile",
        f"{kernels}:scale",
        *specs,
        "--arg",
        "relu=py:True",
        "--emit",
        "resources",
    )
    fields = dict(line.split(None, 1) for line in res.splitlines())
    assert status == EXIT_OK and fields["kernel"] == "scale" and fields["target"] == "sm_80"
    assert int(fields["registers"]) > 0 and fields["shared_bytes"] == "0"
    from tylo.backend import sass as sass_module

    require_nvdisasm()  # in the test extra: the SASS is always checked
    status, sass, err = run(
        capsys, "compile", f"{kernels}:scale", *specs, "--arg", "relu=py:True", "--emit", "sass"
    )
    assert status == EXIT_OK and re.search(r"\bFMNMX|\bFMUL", sass), sass[:500]
    with pytest.MonkeyPatch.context() as mp:  # and where nvdisasm is absent, the exit says so
        mp.setattr(sass_module, "find_nvdisasm", lambda: None)
        status, sass, err = run(
            capsys,
            "compile",
            f"{kernels}:scale",
            *specs,
            "--arg",
            "relu=py:True",
            "--emit",
            "sass",
        )
    assert status == EXIT_UNAVAILABLE and "pip install" in err and sass == ""
    out = tmp_path / "scale.ptx"
    status, stdout, err = run(
        capsys, "compile", f"{kernels}:scale", *specs, "--arg", "relu=py:True", "-o", str(out)
    )
    assert status == EXIT_OK and stdout == "" and out.read_text() == ptx
    status, _, _ = run(
        capsys,
        "compile",
        f"{kernels}:scale",
        "--arg",
        "out=ptr:f64",
        "--arg",
        "x=ptr:f64",
        "--arg",
        "n=int",
        "--arg",
        "relu=py:0",
        "--block",
        "1",
    )
    assert status == EXIT_OK


def test_a_kernel_that_does_not_trace_exits_1(
    capsys: pytest.CaptureFixture[str], kernels: str
) -> None:
    status, out, err = run(
        capsys,
        "compile",
        f"{kernels}:broken",
        "--arg",
        "out=ptr:f32",
        "--arg",
        "n=int",
        "--block",
        "1",
    )
    assert status == EXIT_FAILED and out == ""
    assert "NameError" in err and "undefined_name" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["{k}"], "expected FILE.py:KERNEL"),
        (["{k}:1abc"], "expected FILE.py:KERNEL"),
        (["/no/such/file.py:k"], "no file /no/such/file.py"),
        (["{k}:missing"], "has no name 'missing'"),
        (["{k}:not_a_kernel"], "not a tylo kernel"),
        (["{k}:scale", "--arg", "out=ptr:f32"], "give --arg for x, n, relu"),
        (
            ["{k}:broken", "--arg", "out=ptr:f32", "--arg", "n=int", "--arg", "m=int"],
            "no parameter named m",
        ),
        (["{k}:broken", "--arg", "out=ptr", "--arg", "n=int"], "ptr needs an element type"),
        (["{k}:broken", "--arg", "out=ptr:f99", "--arg", "n=int"], "f99"),
        (["{k}:broken", "--arg", "out=ptr:f32:3", "--arg", "n=int"], "power of two"),
        (["{k}:broken", "--arg", "out=ptr:f32:x", "--arg", "n=int"], "alignment is bytes"),
        (["{k}:broken", "--arg", "out=ptr:f32", "--arg", "n=int:foo=1"], "int facts are"),
        (["{k}:broken", "--arg", "out=ptr:f32", "--arg", "n=int:multiple_of=0"], "multiple_of"),
        (["{k}:broken", "--arg", "out=ptr:f32", "--arg", "n=float:i32"], "f32 or f64"),
        (["{k}:broken", "--arg", "out=ptr:f32", "--arg", "n=py:(("], "SyntaxError"),
        (["{k}:broken", "--arg", "out=ptr:f32", "--arg", "n=py:"], "py needs an expression"),
        (["{k}:broken", "--arg", "out=tensor", "--arg", "n=int"], "the spec is ptr:DTYPE"),
        (["{k}:broken", "--arg", "=int"], "expected NAME=SPEC"),
        (["{k}:broken", "--target", "sm_99z"], "--target 'sm_99z'"),
        (["{k}:broken", "--block", "0"], "must be >= 1"),
        (["{k}:broken", "--block", "1,2,3,4"], "one to three"),
        (["{k}:broken", "--block", "a"], "expected one to three ints"),
    ],
)
def test_usage_errors(
    capsys: pytest.CaptureFixture[str], kernels: str, args: list[str], says: str
) -> None:
    args = args if "--block" in args else [*args, "--block", "1"]
    status, out, err = run(capsys, "compile", *(a.replace("{k}", kernels) for a in args))
    assert status == EXIT_USAGE, err
    assert says in err and out == "" and err.count("\n") == 1, err


def test_import_failure_exits_1(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("raise RuntimeError('boom at import')\n")
    status, _, err = run(capsys, "compile", f"{bad}:k", "--arg", "x=int", "--block", "1")
    assert status == EXIT_FAILED and "RuntimeError: boom at import" in err
