"""Source lines in the interpreter (tylo/interpret/source.py): reports name the kernel's
line, the step trace of a watched thread prints the lines it runs, and
``TYLO_INTERPRET_BREAK`` stops that thread in pdb at a line with its values."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tylo
from tylo.interpret import InterpretError, OutOfBounds
from tylo.interpret import source as interp_source

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__)


def _line(text: str) -> int:
    """The line of this file that holds ``text`` (the kernels' lines, found, not counted)."""
    return next(k + 1 for k, t in enumerate(HERE.read_text().splitlines()) if t.strip() == text)


@tylo.kernel
def scale(out, x, n):
    i = tylo.thread_idx.x
    acc = tylo.value(0.0)
    for _ in tylo.range(3):
        acc = acc + x[i]
    out[i + n] = acc


def test_reports_name_the_kernels_source_line() -> None:
    x = np.arange(32, dtype=np.float32)
    with pytest.raises(OutOfBounds) as info:
        scale.interpret[1, 32](np.zeros(32, np.float32), x, 1)
    assert f"(test_interpret_source.py:{_line('out[i + n] = acc')})" in str(info.value)


def test_break_stops_the_watched_thread_with_its_values(monkeypatch: pytest.MonkeyPatch) -> None:
    stops: list[dict[str, Any]] = []
    monkeypatch.setattr(interp_source, "debugger", lambda frame: stops.append(dict(frame.f_locals)))
    line = _line("acc = acc + x[i]")
    monkeypatch.setenv("TYLO_INTERPRET_THREAD", "0/5")
    monkeypatch.setenv("TYLO_INTERPRET_BREAK", f"test_interpret_source.py:{line}")
    x = np.arange(32, dtype=np.float32)
    out = np.full(33, np.nan, np.float32)
    scale.interpret[1, 32](out, x, 1)
    assert out[1:].tolist() == (3.0 * x).tolist()  # the run goes on after each stop
    # four stops: the thread index, which the tracer reads where line 34 first uses it (into
    # the entry block), then once per trip through the loop
    assert len(stops) == 4
    for stop in stops:
        assert stop["thread"] == "block (0, 0, 0) thread (5, 0, 0)"
        assert stop["source"] == "acc = acc + x[i]"
        assert isinstance(stop["values"], dict) and len(stop["shared"]) >= 0
    assert stops[1]["values"]['%"tid_x"'] == 5  # this thread's values, not another's
    floats = [[v for v in stop["values"].values() if isinstance(v, float)] for stop in stops]
    assert 5.0 not in floats[1] and 5.0 in floats[2]  # x[5]: loaded on the first trip


def test_step_trace_prints_source_lines(monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    monkeypatch.setenv("TYLO_INTERPRET_THREAD", "0/2")
    scale.interpret[1, 32](np.zeros(40, np.float32), np.ones(32, np.float32), 1)
    err = capsys.readouterr().err
    assert f"# {HERE}:{_line('out[i + n] = acc')}" in err


@pytest.mark.parametrize("value", ["abc", "0", "kernel.py:", "-3", "x:y", "12:kernel.py"])
def test_bad_break_values_are_refused(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("TYLO_INTERPRET_THREAD", "0/0")
    monkeypatch.setenv("TYLO_INTERPRET_BREAK", value)
    with pytest.raises(InterpretError) as info:
        scale.interpret[1, 32](np.zeros(40, np.float32), np.ones(32, np.float32), 1)
    assert "TYLO_INTERPRET_BREAK" in str(info.value)


SCRIPT = """
import numpy as np
import tylo

@tylo.kernel
def twice(out, x):
    t = tylo.thread_idx.x
    y = x[t] * 2.0
    out[t] = y

twice.interpret[1, 32](np.zeros(32, np.float32), np.arange(32, dtype=np.float32))
print("done")
"""


def test_real_pdb_session(tmp_path: Path) -> None:
    script = tmp_path / "k.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TYLO_INTERPRET_THREAD": "0/7",
           "TYLO_INTERPRET_BREAK": "k.py:9"}  # fmt: skip
    r = subprocess.run(
        [sys.executable, str(script)], input="p source\np thread\nc\n", capture_output=True,
        text=True, timeout=120, env=env, check=False,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    assert "'out[t] = y'" in r.stdout and "'block (0, 0, 0) thread (7, 0, 0)'" in r.stdout
    assert r.stdout.rstrip().endswith("done")


def test_recording_can_be_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TYLO_INTERPRET_LINES", "0")

    @tylo.kernel
    def past(out, n):  # a fresh kernel: traced with the variable set
        out[tylo.thread_idx.x + n] = 1.0

    with pytest.raises(OutOfBounds) as info:
        past.interpret[1, 32](np.zeros(32, np.float32), 1)
    assert "test_interpret_source.py:" not in str(info.value)
