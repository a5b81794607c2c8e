"""docs/cli.md: every ``console`` block is run; each ``$ tylo ...`` line is run in-process
with :func:`tylo.cli.main` and its output compared with the text that follows it (``...``
matches anything, as in doctest); a last line ``(exit status N)`` gives the exit status
(0 otherwise)."""

from __future__ import annotations

import contextlib
import doctest
import io
import re
import shlex
from pathlib import Path

import pytest

from tylo.cli import main

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "cli.md"


def examples() -> list[tuple[str, str, int]]:
    out = []
    for block in re.findall(r"```console\n(.*?)```", DOC.read_text(), re.DOTALL):
        for part in re.split(r"^\$ ", block, flags=re.MULTILINE)[1:]:
            command, _, expected = part.partition("\n")
            status = 0
            m = re.search(r"^\(exit status (\d+)\)\n\Z", expected, re.MULTILINE)
            if m:
                status = int(m.group(1))
                expected = expected[: m.start()]
            out.append((command, expected, status))
    return out


def test_the_manual_has_examples_of_every_subcommand() -> None:
    commands = [shlex.split(c)[1] for c, _, _ in examples()]
    assert {"layout", "prove", "compile"} <= set(commands) and len(commands) >= 9
    text = DOC.read_text()
    for sub in ("cache info", "cache clear", "doctor"):
        assert f"tylo {sub}" in text


@pytest.mark.parametrize(("command", "expected", "status"), examples())
def test_manual_example(command: str, expected: str, status: int, monkeypatch, tmp_path) -> None:
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("TYLO_CACHE_DIR", str(tmp_path))
    argv = shlex.split(command)
    assert argv[0] == "tylo"
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        got_status = main(argv[1:])
    got = buf.getvalue()
    checker = doctest.OutputChecker()
    assert checker.check_output(expected, got, doctest.ELLIPSIS), f"{command}\n{got}"
    assert got_status == status


def test_module_doctest_runs() -> None:
    import tylo.cli

    result = doctest.testmod(tylo.cli)
    assert result.attempted >= 1 and result.failed == 0, result
