"""``benchmarks/compile.py``, checked without timing anything real: its commands exist,
its arguments are refused with a reason, and :func:`measure` runs cold runs on an emptied
cache, then warm runs on the cache they filled, and reports medians."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from benchmarks import compile as bench

ROOT = Path(__file__).resolve().parents[2]


def test_every_command_names_a_module_or_file_that_exists():
    for name, cmd in bench.COMMANDS.items():
        assert cmd[0] == "-m", name
        assert importlib.util.find_spec(cmd[1]) is not None, name
        files = [a.split(":")[0] for a in cmd if a.endswith(".py") or ".py:" in a]
        assert all((ROOT / f).is_file() for f in files), name
        assert "--target" in cmd and "sm_90a" in cmd, name


def test_list_prints_the_commands(capsys):
    assert bench.main(["--list", "--only", "GEMM"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in out] == [n for n in bench.COMMANDS if "GEMM" in n]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--runs", "0"], "--runs: at least 1"),
        (["--runs", "-3"], "--runs: at least 1"),
        (["--only", "("], "--only: not a regular expression"),
        (["--only", "nothing-matches-this"], "matches none"),
    ],
)
def test_bad_arguments_are_refused(argv, message, capsys):
    with pytest.raises(SystemExit) as err:
        bench.main(argv)
    assert err.value.code == 2
    assert message in capsys.readouterr().err


def test_measure_runs_cold_then_warm_and_takes_medians(tmp_path):
    calls: list[tuple[bool, bool]] = []
    times = iter([(5.0, 4.0), (1.0, 9.0), (3.0, 2.0), (0.5, 0.25), (0.7, 0.1), (0.6, 0.3)])

    def runner(python, args, cache, cold):
        filled = cache.exists()
        if cold:
            filled = False  # run_once empties it first
        cache.mkdir(parents=True, exist_ok=True)
        calls.append((cold, filled))
        return next(times)

    out = bench.measure("python", ["-c", "pass"], 3, runner)
    assert calls == [(True, False)] * 3 + [(False, True)] * 3
    assert out == {
        "cold": {"wall_s": 3.0, "cpu_s": 4.0},
        "warm": {"wall_s": 0.6, "cpu_s": 0.25},
    }


def test_run_once_empties_the_cache_for_a_cold_run(tmp_path):
    cache = tmp_path / "cache"
    (cache / "old").mkdir(parents=True)
    script = "import os, sys; sys.exit(os.path.exists(os.environ['TYLO_CACHE_DIR']))"
    wall, cpu = bench.run_once(__import__("sys").executable, ["-c", script], cache, True)
    assert wall > 0 and cpu >= 0 and not cache.exists()
    with pytest.raises(RuntimeError, match="exited 3"):
        bench.run_once(__import__("sys").executable, ["-c", "raise SystemExit(3)"], cache, False)
