"""tools/gpu_tier.py: runs every shard as its own pytest process and merges the summaries.

Run here on a small suite written for the test (passes, a failure, a skip, a setup error),
whose conftest is the repository's own (the ``--shard`` option), so the counts to expect
are known from the suite's text, not from the driver."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("_gpu_tier", ROOT / "tools" / "gpu_tier.py")
tier = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tier)

SUITE = """
import pytest

@pytest.mark.parametrize("k", range(7))
def test_passes(k):
    assert k >= 0

def test_fails():
    assert 1 == 2

def test_skips():
    pytest.skip("needs a thing (found: none)")

@pytest.fixture
def broken():
    raise RuntimeError("setup broke")

def test_errors(broken):
    pass
"""
_TESTS = str(ROOT / "tests")
_CONFTEST = str(ROOT / "tests" / "conftest.py")
CONFTEST = f"""
import importlib.util, sys
sys.path.insert(0, {_TESTS!r})
_spec = importlib.util.spec_from_file_location("_tylo_conftest", {_CONFTEST!r})
_m = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_m)
pytest_addoption, pytest_configure = _m.pytest_addoption, _m.pytest_configure
pytest_unconfigure = _m.pytest_unconfigure
"""


@pytest.fixture(scope="module")
def suite(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("suite")
    (d / "conftest.py").write_text(CONFTEST)
    (d / "test_suite.py").write_text(SUITE)
    return d


def driver(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    env = {**os.environ, "TYLO_REQUIRE_GPU_RUNTIME": "1"}
    return subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gpu_tier.py"), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=env,
    )


def test_every_shard_runs_and_the_merge_adds_up(suite, tmp_path) -> None:
    a, b, m = tmp_path / "a", tmp_path / "b", tmp_path / "m"
    ra = driver("--of", "2", "--shards", "1", "--workers", "0", "--out", str(a), str(suite))
    rb = driver(
        "--of",
        "2",
        "--shards",
        "2",
        "--workers",
        "0",
        "--out",
        str(b),
        str(suite),
        "--commit",
        "ignored-where-git-answers",
    )
    assert ra.returncode in (0, 1) and rb.returncode in (0, 1), ra.stderr + rb.stderr
    names = sorted(p.name for p in a.iterdir())
    assert names == ["shard-1-of-2.log", "shard-1-of-2.xml", "summary.json"]
    part = json.loads((a / "summary.json").read_text())
    assert part["missing"] == [2] and part["complete"] is False
    assert "INCOMPLETE" in ra.stdout and "shards not run: 2 of 2" in ra.stdout
    assert part["env"]["TYLO_REQUIRE_GPU_RUNTIME"] == "1" and part["of"] == 2
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    assert part["commit"] == (head or None) and part["commit_source"] == ("git" if head else None)
    assert isinstance(part["dirty"], bool) or not head

    r = driver("--merge", str(a), str(b), "--out", str(m))
    assert r.returncode == 1, r.stdout + r.stderr  # the suite has a failure and an error
    assert r.stdout.splitlines()[-1] == "7 passed, 2 failed, 1 skipped"
    merged = json.loads((m / "summary.json").read_text())
    assert merged["complete"] is True and merged["missing"] == []
    t = merged["totals"]
    assert (t["passed"], t["failed"], t["errors"], t["skipped"], t["tests"]) == (7, 1, 1, 1, 10)
    assert t["skip_reasons"] == {"needs a thing (found: none)": 1}
    listed = [f for s in merged["shards"] for f in s["failures"]]
    # the module part of a JUnit name is dotted from pytest's rootdir, which depends on
    # where the checkout and the temporary suite sit: compare its last component
    names = [f.split(": ")[0] for f in listed]
    assert sorted(
        n.split("::")[0].rsplit(".", 1)[-1] + "::" + n.split("::", 1)[1] for n in names
    ) == [
        "test_suite::test_errors",
        "test_suite::test_fails",
    ]
    assert [s["shard"] for s in merged["shards"]] == ["1/2", "2/2"]
    assert sum(s["tests"] for s in merged["shards"]) == 10  # no test twice, none lost


def test_one_run_of_all_shards_is_complete(suite, tmp_path) -> None:
    r = driver(
        "--of", "1", "--workers", "0", "--out", str(tmp_path), str(suite), "--", "-k", "passes"
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines()[-1] == "7 passed, 0 failed, 0 skipped"
    assert "; complete" in r.stdout


@pytest.mark.parametrize(
    "body, extra",
    [
        ("def test_stops():\n    raise KeyboardInterrupt\n\ndef test_after():\n    pass\n", []),
        ("def test_a():\n    assert 0\n\ndef test_b():\n    pass\n", ["--", "-x"]),
    ],
)
def test_a_shard_that_stops_early_is_unfinished(tmp_path, body, extra) -> None:
    """Interrupted (exit 2, the JUnit file written) or stopped by -x (exit 1, one of two
    tests run): the shard did not run every test it holds."""
    d = tmp_path / "s"
    d.mkdir()
    (d / "conftest.py").write_text(CONFTEST)
    (d / "test_stop.py").write_text(body)
    r = driver("--of", "1", "--workers", "0", "--out", str(tmp_path / "o"), str(d), *extra)
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert (tmp_path / "o" / "shard-1-of-1.xml").exists()
    assert summary["unfinished"] == ["1/1"] and r.returncode == 1, r.stdout
    assert summary["shards"][0]["collected"] == 2


def test_a_shard_killed_at_its_timeout_is_unfinished(tmp_path) -> None:
    d = tmp_path / "slow"
    d.mkdir()
    (d / "conftest.py").write_text(CONFTEST)
    (d / "test_slow.py").write_text("import time\n\ndef test_sleeps():\n    time.sleep(60)\n")
    r = driver(
        "--of", "1", "--workers", "0", "--timeout", "4", "--out", str(tmp_path / "o"), str(d)
    )
    assert r.returncode == 1 and "(timed out after 0 results" in r.stdout, r.stdout + r.stderr
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["unfinished"] == ["1/1"] and summary["complete"] is False
    assert summary["shards"][0]["timed_out"] is True
    # the stop dumps each thread's traceback into the log: where the shard hung
    log = (tmp_path / "o" / "shard-1-of-1.log").read_text()
    assert "in test_sleeps" in log.split("Fatal Python error: Aborted")[-1]


def test_a_shard_that_hangs_after_its_tests_says_how_many_results_it_printed(tmp_path) -> None:
    """The H100 run's shard 2 printed a result for each test, then its pytest never
    exited: the summary keeps the count the progress lines show."""
    d = tmp_path / "hang"
    d.mkdir()
    hang = (  # after the tests (not in the driver's collection run)
        "\n\ndef pytest_unconfigure(config):\n    import time\n"
        "    if not config.option.collectonly:\n        time.sleep(60)\n"
    )
    (d / "conftest.py").write_text(CONFTEST + hang)
    (d / "test_quick.py").write_text("def test_a():\n    pass\n\ndef test_b():\n    pass\n")
    r = driver(
        "--of", "1", "--workers", "0", "--timeout", "8", "--out", str(tmp_path / "o"), str(d)
    )
    assert "timed out after 2 results were printed" in r.stdout, r.stdout + r.stderr
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["shards"][0]["results_printed"] == 2 and summary["complete"] is False
    assert "pytest_unconfigure" in (tmp_path / "o" / "shard-1-of-1.log").read_text()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--of", "3", "--shards", "0..2"], "need 1 <= I <= J <= 3"),
        (["--of", "3", "--shards", "2..1"], "need 1 <= I <= J <= 3"),
        (["--of", "3", "--shards", "4"], "need 1 <= I <= J <= 3"),
        (["--of", "3", "--shards", "1-2"], "expected I..J or I"),
        (["--of", "0"], "at least 1"),
        (["--workers", "-1"], "must be 0 or more"),
        ([], "--out DIR is required"),
    ],
)
def test_bad_arguments_are_refused(tmp_path, args, message) -> None:
    out = [] if args == [] else ["--out", str(tmp_path)]
    assert tier.main([*args, *out]) == 2


def test_bad_arguments_name_the_fix(capsys) -> None:
    assert tier.main(["--of", "3", "--shards", "2..1", "--out", "x"]) == 2
    assert (
        capsys.readouterr().err == "gpu_tier.py: --shards '2..1': need 1 <= I <= J <= 3 (--of 3)\n"
    )


def _summary(d: Path, commit: str, of: int, shards: list[int]) -> Path:
    d.mkdir()
    records = [
        {
            "shard": f"{i}/{of}",
            "index": i,
            "of": of,
            "complete": True,
            "passed": i,
            "failed": 0,
            "errors": 0,
            "skipped": 0,
            "tests": i,
            "skip_reasons": {},
            "failures": [],
        }
        for i in shards
    ]
    meta = {"schema": 1, "commit": commit, "dirty": False, "of": of, "tests": ["tests/gpu"]}
    (d / "summary.json").write_text(json.dumps(tier.summarize(meta, records)))
    return d


def test_merging_refuses_mixed_runs(tmp_path) -> None:
    a = _summary(tmp_path / "a", "c1", 3, [1])
    with pytest.raises(tier.TierError, match="differ in 'commit'"):
        tier.merge([a, _summary(tmp_path / "b", "c2", 3, [2, 3])])
    with pytest.raises(tier.TierError, match="differ in 'of'"):
        tier.merge([a, _summary(tmp_path / "c", "c1", 4, [2, 3])])
    with pytest.raises(tier.TierError, match=r"shard\(s\) \[1\] of 3 appear twice"):
        tier.merge([a, _summary(tmp_path / "d", "c1", 3, [1, 2])])
    with pytest.raises(tier.TierError, match="does not exist"):
        tier.merge([a, tmp_path / "nowhere"])
    whole = tier.merge([a, _summary(tmp_path / "e", "c1", 3, [2, 3])])
    assert whole["complete"] and whole["line"] == "6 passed, 0 failed, 0 skipped"


JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="2" failures="2" skipped="2" tests="8">
<testcase classname="t.m" name="ok1"/>
<testcase classname="t.m" name="ok2"><system-out>x</system-out></testcase>
<testcase classname="t.m" name="bad"><failure message="assert 1 == 2&#10;more">tb</failure>
</testcase>
<testcase classname="t.m" name="bad_and_teardown"><failure message="f">tb</failure>
<error message="teardown">tb</error></testcase>
<testcase classname="t.m" name="setup"><error message="failed on setup">tb</error></testcase>
<testcase classname="" name="tests.gpu.test_x"><error message="collection failure">tb</error>
</testcase>
<testcase classname="t.m" name="skip"><skipped type="pytest.skip" message="needs a GPU"/>
</testcase>
<testcase classname="t.m" name="xfail"><skipped type="pytest.xfail" message="known"/>
</testcase>
</testsuite></testsuites>
"""


def test_junit_verdicts_one_per_test_case(tmp_path) -> None:
    path = tmp_path / "j.xml"
    path.write_text(JUNIT)
    got = tier.read_junit(path)
    want = {"passed": 2, "failed": 2, "errors": 2, "skipped": 2, "tests": 8}
    assert {k: got[k] for k in want} == want
    assert got["skip_reasons"] == {"needs a GPU": 1, "known": 1}
    assert got["failures"] == [
        "t.m::bad: assert 1 == 2",
        "t.m::bad_and_teardown: f",
        "t.m::setup: failed on setup",
        "tests.gpu.test_x: collection failure",
    ]
    assert tier.summary_line(got) == "2 passed, 4 failed, 2 skipped"


@pytest.mark.parametrize(
    "numbers, text",
    [
        ([], ""),
        ([4], "4"),
        ([3, 1, 2], "1..3"),
        ([1, 2, 3, 5, 7, 8], "1..3, 5, 7..8"),
        ([2, 4, 6], "2, 4, 6"),
    ],
)
def test_missing_shards_print_as_ranges(numbers, text) -> None:
    assert tier.ranges(numbers) == text
