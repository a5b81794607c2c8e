"""``tylo compile`` refuses what it cannot compile before it imports the kernel file: a
missing ``--block``, a block over CUDA's limits, a target no GPU has (``sm_99``), an empty
``-o``; it imports the file under a private module name (a ``json.py`` does not hide
``json``); a file that exits at import is an error, not an empty success; the resource
report shows the dynamic shared memory the kernel declares.

The parse-time refusals are tested with a kernel file that raises at import: a refused
option exits 2 (usage) without importing it; an accepted one gets as far as the import
and exits 1."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tylo.cli import EXIT_FAILED, EXIT_OK, EXIT_USAGE, main
from tylo.cli.compile_cmd import _load

SETTINGS = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
# CUDA's block limits (CUDA C++ Programming Guide, "Compute Capabilities": x, y <= 1024,
# z <= 64, at most 1024 threads)
LIMITS, THREADS = (1024, 1024, 64), 1024
# the compute capabilities CUDA 13's libNVVM compiles for, as probed by
# tests/nvvm/test_targets_known.py against libNVVM itself
KNOWN = {(7, 5), (8, 0), (8, 6), (8, 7), (8, 8), (8, 9), (9, 0), (10, 0), (10, 3), (10, 7)}
KNOWN |= {(11, 0), (12, 0), (12, 1)}

KERNEL = """\
import tylo


@tylo.kernel
def scale(out, x, n: tylo.Int()):
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    if i < n:
        out[i] = x[i] * 2.0
"""
ARGS = ["--arg", "out=ptr:f32", "--arg", "x=ptr:f32", "--arg", "n=int"]


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        status = main(list(args))
    except SystemExit as exit_:  # argparse's own usage errors
        status = int(exit_.code or 0)
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture
def booby_trap(tmp_path: Path) -> str:
    """A kernel file whose import fails: reaching it exits 1."""
    path = tmp_path / "trap.py"
    path.write_text("raise RuntimeError('imported')\n")
    return str(path)


# ---------------------------------------------------------------------- parse-time checks


def test_the_block_and_target_examples(capsys, booby_trap) -> None:
    status, out, err = run(capsys, "compile", f"{booby_trap}:k", "--block", "2048")
    assert status == EXIT_USAGE and out == "" and "must be <= 1024" in err
    status, _, err = run(capsys, "compile", f"{booby_trap}:k", "--block", "1", "--target", "sm_99")
    assert status == EXIT_USAGE and "sm_99 is not a GPU CUDA 13 compiles for" in err
    status, _, err = run(capsys, "compile", f"{booby_trap}:k")
    assert status == EXIT_USAGE and "--block" in err  # no default block
    status, _, err = run(capsys, "compile", f"{booby_trap}:k", "--block", "1", "-o", "")
    assert status == EXIT_USAGE and "give a file name" in err
    status, _, err = run(capsys, "compile", f"{booby_trap}:k", "--block", "1")
    assert status == EXIT_FAILED and "RuntimeError: imported" in err  # the trap works


@SETTINGS
@given(
    dims=st.lists(
        st.one_of(st.integers(-2, 70), st.integers(1000, 1100), st.integers(2**31 - 1, 2**64)),
        min_size=1,
        max_size=4,
    )
)
def test_blocks_are_checked_against_cudas_limits(capsys, booby_trap, dims) -> None:
    ok = (
        len(dims) <= 3
        and all(1 <= d <= lim for d, lim in zip(dims, LIMITS))
        and math.prod(dims) <= THREADS
    )
    text = ",".join(map(str, dims))
    status, _, err = run(capsys, "compile", f"{booby_trap}:k", f"--block={text}")
    assert status == (EXIT_FAILED if ok else EXIT_USAGE), (dims, err)
    assert err.count("\n") == 1 and "Traceback" not in err


@SETTINGS
@given(
    major=st.integers(0, 15),
    minor=st.integers(0, 9),
    suffix=st.sampled_from(["", "a"]),
    form=st.sampled_from(["sm_{}{}{}", "compute_{}{}{}", "{}.{}{}"]),
)
def test_only_known_targets_reach_the_import(capsys, booby_trap, major, minor, suffix, form):
    target = form.format(major, minor, suffix)
    ok = (major, minor) in KNOWN and (suffix == "" or major >= 9)
    status, _, err = run(capsys, "compile", f"{booby_trap}:k", "--block", "32", "--target", target)
    assert status == (EXIT_FAILED if ok else EXIT_USAGE), (target, err)
    assert err.count("\n") == 1 and "Traceback" not in err


# ------------------------------------------------------------------------ importing


@pytest.mark.parametrize(
    "code", ["raise SystemExit(0)", "raise SystemExit", "import sys; sys.exit()", "exit(3)"]
)
def test_a_file_that_exits_at_import_is_an_error(capsys, tmp_path, code) -> None:
    """The issue's example (SystemExit(0)) and the other ways to exit: exit 1, one line,
    nothing on stdout, never the success of compiling nothing."""
    path = tmp_path / "exits.py"
    path.write_text(f"import tylo\n{code}\n")
    status, out, err = run(capsys, "compile", f"{path}:k", "--block", "1")
    assert status == EXIT_FAILED and out == "" and err.count("\n") == 1
    assert "SystemExit" in err and "at import" in err


@SETTINGS
@given(stem=st.sampled_from(["json", "os", "re", "sys", "typing", "tylo", "random", "math"]))
def test_a_kernel_file_named_like_a_module_does_not_replace_it(tmp_path_factory, stem) -> None:
    """The issue's example is json.py: the file is imported under a private name, the same
    for the same path (the kernel cache keys on it) and different for another path."""
    before = sys.modules.get(stem)
    d1, d2 = tmp_path_factory.mktemp("a"), tmp_path_factory.mktemp("b")
    for d in (d1, d2):
        (d / f"{stem}.py").write_text(KERNEL)
    module, kernel = _load(f"{d1 / stem}.py:scale")
    assert sys.modules.get(stem) is before
    assert module.__name__ == kernel.fn.__module__ and sys.modules[module.__name__] is module
    assert module.__name__.startswith(f"_tylo_cli_{stem}_") and module.__name__ != stem
    again, _ = _load(f"{d1 / '..' / d1.name / stem}.py:scale")
    other, _ = _load(f"{d2 / stem}.py:scale")
    assert again.__name__ == module.__name__ != other.__name__
    assert sys.modules.get(stem) is before


def test_json_py_compiles_and_json_still_works(capsys, tmp_path, monkeypatch) -> None:
    from tests.host.test_cli_compile import toolchain_status

    monkeypatch.setenv("TYLO_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "json.py").write_text(KERNEL)
    status, _, err = run(
        capsys,
        "compile",
        f"{tmp_path / 'json.py'}:scale",
        *ARGS,
        "--block",
        "64",
        "--emit",
        "llvm",
    )
    assert status == toolchain_status(), err
    assert sys.modules["json"] is json and json.loads("[1]") == [1]


# ------------------------------------------------------------------- resource report

DYNAMIC = """\
import tylo


@tylo.kernel
def staged(out, n: tylo.Int(), words: tylo.Static, offset: tylo.Static):
    s = tylo.dynamic_shared(tylo.f32, words, offset_bytes=offset)
    i = tylo.thread_idx.x
    if i < words:
        s[i] = 1.0
    tylo.sync_threads()
    if i < n and i < words:
        out[i] = s[words - 1 - i]
"""


@pytest.mark.parametrize(
    ("words", "offset"), [(49152, 0), (1024, 4096), (1, 0)], ids=["192KiB", "offset", "4B"]
)
def test_the_resource_report_shows_dynamic_shared_memory(
    capsys, tmp_path, monkeypatch, words, offset
):
    """A kernel that views 192 KiB of dynamic shared memory printed shared_bytes 0 and
    nothing else; the report now has dynamic_shared_bytes, offset + 4 * words."""
    from tests.host.test_cli_compile import toolchain_status

    if toolchain_status() != EXIT_OK:
        pytest.skip("needs libNVVM and a linker")
    monkeypatch.setenv("TYLO_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "dyn.py").write_text(DYNAMIC)
    status, out, err = run(
        capsys,
        "compile",
        f"{tmp_path / 'dyn.py'}:staged",
        "--arg",
        "out=ptr:f32",
        "--arg",
        "n=int",
        "--arg",
        f"words=py:{words}",
        "--arg",
        f"offset=py:{offset}",
        "--block",
        "256",
        "--target",
        "sm_90a",
        "--emit",
        "resources",
    )
    assert status == EXIT_OK, err
    fields = dict(line.split(None, 1) for line in out.splitlines())
    assert int(fields["dynamic_shared_bytes"]) == offset + 4 * words
    assert int(fields["shared_bytes"]) == 0  # static shared memory: none
