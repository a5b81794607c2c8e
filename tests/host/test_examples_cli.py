"""The examples' command lines: bad input is one clean line on stderr with a non-zero exit.

Each example's ``run.py`` runs in a subprocess exactly as a user runs it; a usage error
(a size below 1 in any mode, a negative seed, ``--torch`` without torch, an unknown target)
exits 2 with one line ``<prog>: error: ...`` (``python -m tylo.ops.gemm: error: ...``) and no
traceback, before any
compiling. The typed-error and SASS-optional paths of :mod:`tylo.ops.cli` and the GEMM
example are checked in-process with stand-ins (no compiler, no GPU).
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tylo.backend.errors import CompileError, NoDeviceError, ToolchainError
from tylo.ops import cli as _cli

SIZES = {  # valid positional sizes of each example
    "vector_add": ["1000"],
    "row_reduce": ["33", "65"],
    "softmax": ["8", "64"],
    "gemm": ["65", "97", "73"],
    "hopper_gemm": ["64", "128", "64"],
}
# run as if torch were not installed, whether or not it is: `import torch` fails
NO_TORCH = (
    "import runpy, sys; sys.modules['torch'] = None; sys.argv = sys.argv[1:]; "
    "runpy.run_module(sys.argv.pop(1), run_name='__main__', alter_sys=True) "
    "if sys.argv[0] == '-m' else runpy.run_path(sys.argv[0], run_name='__main__')"
)
# the ops' command lines are modules of the package (`python -m tylo.ops.gemm`); the
# examples' are scripts
MODULES = {
    "softmax": "tylo.ops.softmax",
    "gemm": "tylo.ops.gemm",
    "hopper_gemm": "tylo.ops.gemm.hopper_cli",
}


def prog(name: str) -> str:
    """What the command's errors start with."""
    return f"python -m {MODULES[name]}" if name in MODULES else f"examples/{name}/run.py"


def _bad_sizes(name: str) -> list[tuple[list[str], str]]:
    """Every positional size set to 0, -1 and a non-integer in turn, in every mode."""
    good = SIZES[name]
    cases = []
    modes = ([], ["--compile-only"], ["--emit", "ptx"], ["--target", "sm_80", "--compile-only"])
    for i in range(len(good)):
        for j, (bad, says) in enumerate(
            (("0", "0 is not a size"), ("-1", "-1 is not a size"), ("1.5", "'1.5' is not an int"))
        ):
            argv = list(good)
            argv[i] = bad
            cases.append(([*argv, *modes[(i + j) % len(modes)]], says))
    return cases


CASES = [
    (name, argv, says)
    for name in SIZES
    for argv, says in [
        *_bad_sizes(name),
        ([*SIZES[name], "--seed", "-1"], "argument --seed: -1 is negative"),
        ([*SIZES[name], "--seed", "-1", "--compile-only"], "argument --seed: -1 is negative"),
        ([*SIZES[name], "--target", "sm_12", "--compile-only"], "compute capability 1.2"),
        ([*SIZES[name], "--emit", "cubin"], "argument --emit: invalid choice"),
    ]
]


def _run(name: str, argv: list[str], *, no_torch: bool = False) -> subprocess.CompletedProcess:
    if name in MODULES:
        target = ["-m", MODULES[name]]
    else:
        target = [str(ROOT / "examples" / name / "run.py")]
    cmd = [sys.executable, "-c", NO_TORCH, *target] if no_torch else [sys.executable, *target]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
    }
    return subprocess.run(
        [*cmd, *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd="/",
        env=env,
    )


def _check_one_line(r: subprocess.CompletedProcess, name: str, says: str, status: int) -> None:
    lines = r.stderr.splitlines()
    assert r.returncode == status, (r.returncode, r.stdout, r.stderr)
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert lines[0].startswith(f"{prog(name)}: error: "), lines[0]
    assert says in lines[0], lines[0]
    assert r.stdout == ""  # refused before printing (or compiling) anything


@pytest.mark.parametrize(("name", "argv", "says"), CASES)
def test_usage_errors_are_one_line_with_status_2(name: str, argv: list[str], says: str) -> None:
    _check_one_line(_run(name, argv), name, says, 2)


@pytest.mark.parametrize("name", sorted(SIZES))
def test_torch_without_torch_says_how_to_install_it(name: str) -> None:
    for mode in ([], ["--compile-only"]):
        r = _run(name, [*SIZES[name], "--torch", *mode], no_torch=True)
        _check_one_line(r, name, "--torch needs PyTorch, which is not installed", 2)
        assert "pip install torch" in r.stderr


# ---------------------------------------------------------------- argument types


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=-(2**70), max_value=2**70))
def test_integer_types_accept_exactly_their_range(value: int) -> None:
    for parse, lowest in ((_cli.positive_int, 1), (_cli.non_negative_int, 0)):
        if value >= lowest:
            assert parse(str(value)) == value
        else:
            with pytest.raises(argparse.ArgumentTypeError, match=str(value)):
                parse(str(value))


@settings(max_examples=60, deadline=None)
@given(st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=6))
def test_finite_float_accepts_exactly_finite_numbers(value: float | str) -> None:
    text = repr(value) if isinstance(value, float) else value
    try:
        expected = float(text)
    except ValueError:
        expected = None
    if expected is not None and math.isfinite(expected):
        assert _cli.finite_float(text) == expected
    else:
        with pytest.raises(argparse.ArgumentTypeError, match="not a"):
            _cli.finite_float(text)


def test_integer_types_refuse_non_integers() -> None:
    for text in ("", "1.0", "1e3", "0x10", "ten", "--1"):
        for parse in (_cli.positive_int, _cli.non_negative_int):
            with pytest.raises(argparse.ArgumentTypeError, match="is not an integer"):
                parse(text)


# ---------------------------------------------------------------- typed errors at run time


class _Kernel:
    target = "sm_90a"
    block = (32, 1, 1)

    def __init__(self, error: Exception | None = None) -> None:
        self.error = error

    def stage(self, name: str) -> str:
        if self.error is not None:
            raise self.error
        return f"<{name}>"


def _example(run=None, kernels=None) -> _cli.Example:
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("n", type=_cli.positive_int)

    return _cli.Example(
        "fake",
        "a stand-in example",
        add_arguments,
        kernels or (lambda args, target: {"k": _Kernel()}),
        run or (lambda args: "fine"),
    )


def _raise(err: BaseException):
    def hook(*args):
        raise err

    return hook


def test_typed_run_errors_are_one_line(capsys, monkeypatch) -> None:
    monkeypatch.delenv(_cli.TRACEBACK_ENV, raising=False)
    err = CompileError("libNVVM rejected 'k'", log="line one\nline two")
    assert _cli.main(_example(run=_raise(err)), ["4"]) == _cli.EXIT_FAILED
    out = capsys.readouterr()
    assert out.out == "" and out.err.count("\n") == 1
    assert out.err.startswith("examples/fake/run.py: error: CompileError: libNVVM rejected 'k' ")
    assert f"(+3 more line(s); set {_cli.TRACEBACK_ENV}=1 to see them)" in out.err

    nodev = NoDeviceError("no usable CUDA driver")
    assert _cli.main(_example(run=_raise(nodev)), ["4"]) == _cli.EXIT_USAGE
    err_line = capsys.readouterr().err
    assert err_line.count("\n") == 1 and "NoDeviceError: no usable CUDA driver" in err_line
    assert "use --compile-only or --emit" in err_line

    monkeypatch.setenv(_cli.TRACEBACK_ENV, "1")
    with pytest.raises(CompileError):
        _cli.main(_example(run=_raise(err)), ["4"])


def test_running_out_of_host_memory_is_one_line(capsys, monkeypatch) -> None:
    monkeypatch.delenv(_cli.TRACEBACK_ENV, raising=False)
    assert _cli.main(_example(run=_raise(MemoryError())), ["4"]) == _cli.EXIT_FAILED
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "MemoryError" in err and "use smaller sizes" in err


def test_untyped_errors_are_bugs_and_keep_their_traceback(monkeypatch) -> None:
    monkeypatch.delenv(_cli.TRACEBACK_ENV, raising=False)
    with pytest.raises(ZeroDivisionError):
        _cli.main(_example(run=_raise(ZeroDivisionError("bug"))), ["4"])


def test_verification_failure_exits_1(capsys) -> None:
    failing = _raise(_cli.VerificationError("mismatch at (3, 4)"))
    assert _cli.main(_example(run=failing), ["4"]) == _cli.EXIT_FAILED
    assert capsys.readouterr().err == "fake: FAILED: mismatch at (3, 4)\n"


def test_emit_error_prints_no_partial_output(capsys, monkeypatch) -> None:
    monkeypatch.delenv(_cli.TRACEBACK_ENV, raising=False)
    missing = ToolchainError("nvdisasm was not found (SASS is optional); ...")

    def kernels(args, target):
        return {"first": _Kernel(), "second": _Kernel(missing)}

    argv = ["4", "--emit", "sass", "--target", "sm_90a"]
    assert _cli.main(_example(kernels=kernels), argv) == _cli.EXIT_FAILED
    out = capsys.readouterr()
    assert out.out == "" and out.err.count("\n") == 1 and "ToolchainError: nvdisasm" in out.err
    assert _cli.main(_example(), argv) == 0
    assert capsys.readouterr().out == "// ===== k (sass, sm_90a) =====\n<sass>\n"


# ---------------------------------------------------------------- SASS is optional


def test_gemm_sass_checks_print_or_say_how_to_enable(capsys, monkeypatch) -> None:
    import tylo.ops.gemm.kernel as gemm_kernel
    from tylo.backend import sass
    from tylo.ops.gemm import cli as gemm_run

    def no_disassembly(compiled):
        raise AssertionError("sass_summary called without nvdisasm")

    monkeypatch.setattr(sass, "find_nvdisasm", lambda: None)
    monkeypatch.setattr(gemm_kernel, "sass_summary", no_disassembly)
    assert gemm_run.print_sass_checks(object()) is False
    said = capsys.readouterr().out
    assert said == gemm_run.SASS_SKIPPED + "\n"
    assert "SASS checks skipped" in said and "pip install 'tylo[sass]'" in said

    loop = {"HMMA": 128, "LDL": 0, "STL": 0, "instructions": 257}
    summary = {"loop": loop, "total": {"LDL": 0, "STL": 0}}
    monkeypatch.setattr(sass, "find_nvdisasm", lambda: "/opt/nvdisasm")
    monkeypatch.setattr(gemm_kernel, "sass_summary", lambda compiled: summary)
    assert gemm_run.print_sass_checks(object()) is True
    printed = capsys.readouterr().out
    assert f"SASS main loop: {loop}" in printed and "0 LDL, 0 STL" in printed


def test_sass_is_an_extra_not_a_dependency() -> None:
    tomllib = pytest.importorskip("tomllib", reason="needs tomllib (Python >= 3.11)")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    nvdisasm = [d for d in project["dependencies"] if "nvdisasm" in d]
    assert nvdisasm == [], "nvdisasm is optional: it belongs in the sass extra"
    assert any("nvidia-cuda-nvdisasm" in d for d in project["optional-dependencies"]["sass"])
