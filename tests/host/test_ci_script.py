""".ci/run runs the README's two commands, exactly as written, each in a fresh environment.

The real commands install packages (minutes); here ``.ci/run`` runs in a scratch git
checkout whose README holds stand-in commands that record where they ran and what they
saw, so the test checks the extraction and the "fresh" claims in about a second.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / ".ci" / "run"


def _block(readme: str, marker: str) -> list[str]:
    """The lines of the fenced block after ``<!-- marker -->`` (read independently of the
    script's awk, to check it)."""
    m = re.search(rf"<!-- {marker} -->\s*\n```[^\n]*\n(.*?)\n```", readme, re.DOTALL)
    assert m, f"README.md has no fenced block after <!-- {marker} -->"
    return m.group(1).splitlines()


def test_print_extracts_both_readme_commands() -> None:
    readme = (ROOT / "README.md").read_text()
    main, tests = _block(readme, "main-command"), _block(readme, "test-command")
    assert len(main) == 1 and len(tests) == 1
    r = subprocess.run(
        [str(SCRIPT), "--print"], capture_output=True, text=True, timeout=60, check=False
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"main-command: {main[0]}\ntest-command: {tests[0]}\n"
    # the main command needs only the base install; the tests need the test extra
    assert "pip install -q -e . " in main[0] and "-m tylo.ops.gemm 65 97 73" in main[0]
    assert "'.[test]'" in tests[0] and "pytest" in tests[0]
    for cmd in (main[0], tests[0]):
        assert cmd.startswith("python3 -m venv .venv && ")


def _scratch(tmp_path: Path, readme: str) -> Path:
    repo = tmp_path / "checkout"
    (repo / ".ci").mkdir(parents=True)
    shutil.copy(SCRIPT, repo / ".ci" / "run")
    (repo / "README.md").write_text(readme)
    (repo / ".gitignore").write_text(".venv/\n*.so\n")
    (repo / "tracked.txt").write_text("tracked\n")
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True, env=env)
    subprocess.run([*git, "add", "-A"], check=True, env=env)
    subprocess.run([*git, "commit", "-qm", "scratch"], check=True, env=env)
    (repo / "untracked.txt").write_text("new work\n")  # not committed, not ignored
    (repo / "tracked.txt").unlink()  # deleted, not committed
    (repo / ".venv").mkdir()  # a stale environment from an earlier run
    (repo / ".venv" / "stale").write_text("old\n")
    (repo / "built.so").write_text("ignored build output\n")
    return repo


def _readme(main: str, tests: str) -> str:
    return (
        "# x\n\n<!-- main-command -->\n```\n" + main + "\n```\n\ntext\n\n"
        "<!-- test-command -->\n```\n" + tests + "\n```\n\n```\nnot a command\n```\n"
    )


def test_each_command_runs_in_a_fresh_environment(tmp_path: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("needs git (found: none)")
    log = tmp_path / "log"
    probe = (
        "{ pwd; ls -A | sort | tr '\\n' ' '; echo; } >> " + str(log) + " && mkdir .venv && "
        "touch .venv/made-by-WHO"
    )
    repo = _scratch(tmp_path, _readme(probe.replace("WHO", "main"), probe.replace("WHO", "tests")))
    r = subprocess.run(
        [str(repo / ".ci" / "run")], capture_output=True, text=True, timeout=60, check=False
    )
    assert r.returncode == 0, r.stdout + r.stderr
    main_dir, main_ls, test_dir, test_ls = log.read_text().splitlines()
    # main: a copy holding what a fresh clone of this work tree holds, and no .venv
    assert Path(main_dir).resolve() != repo.resolve() and not Path(main_dir).exists()
    assert main_ls.split() == sorted([".ci", ".gitignore", "README.md", "untracked.txt"])
    # tests: the checkout itself, its stale .venv removed first
    assert Path(test_dir).resolve() == repo.resolve() and ".venv" not in test_ls.split()
    assert sorted(os.listdir(repo / ".venv")) == ["made-by-tests"]
    assert "main command passed" in r.stdout and "test command passed" in r.stdout


@pytest.mark.parametrize("failing", ["main", "tests"])
def test_a_failing_command_fails_the_run(tmp_path: Path, failing: str) -> None:
    if shutil.which("git") is None:
        pytest.skip("needs git (found: none)")
    main, tests = ("exit 3", "true") if failing == "main" else ("true", "exit 4")
    repo = _scratch(tmp_path, _readme(main, tests))
    r = subprocess.run(
        [str(repo / ".ci" / "run")], capture_output=True, text=True, timeout=60, check=False
    )
    assert r.returncode == (3 if failing == "main" else 4)
    assert ("test command passed" in r.stdout) is False
    assert (".venv" in os.listdir(repo)) is (failing == "main")  # tests never started


@pytest.mark.parametrize(
    "readme",
    [
        "# no markers at all\n",
        _readme("true", "true").replace("<!-- main-command -->", "<!-- main -->"),
        _readme("true\ntrue", "true"),  # two lines: not one command
        _readme("true", ""),  # an empty block
    ],
)
def test_a_missing_or_ambiguous_command_is_refused(tmp_path: Path, readme: str) -> None:
    if shutil.which("git") is None:
        pytest.skip("needs git (found: none)")
    repo = _scratch(tmp_path, readme)
    r = subprocess.run(
        [str(repo / ".ci" / "run"), "--print"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert r.returncode == 2 and r.stdout == ""
    assert re.fullmatch(
        r"\.ci/run: expected one command line after <!-- (main|test)-command --> in "
        r"README\.md\n",
        r.stderr,
    ), r.stderr


def test_the_test_command_runs_with_the_c_launch_required(tmp_path: Path) -> None:
    """CI sets TYLO_REQUIRE_C_LAUNCH=1 for the test command (a C launch extension that
    failed to build fails its tests), and not for the main command."""
    if shutil.which("git") is None:
        pytest.skip("needs git (found: none)")
    log = tmp_path / "log"
    probe = 'echo "WHO=${TYLO_REQUIRE_C_LAUNCH:-unset}" >> ' + str(log)
    repo = _scratch(tmp_path, _readme(probe.replace("WHO", "main"), probe.replace("WHO", "tests")))
    env = {k: v for k, v in os.environ.items() if k != "TYLO_REQUIRE_C_LAUNCH"}
    r = subprocess.run(
        [str(repo / ".ci" / "run")], capture_output=True, text=True, timeout=60, check=False,
        env=env,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert log.read_text().splitlines() == ["main=unset", "tests=1"]
