""".ci/run runs the README's two commands, exactly as written, each in a fresh environment,
then ruff's lint, ruff's format check and mypy from the test command's environment.

The real commands install packages (minutes); here ``.ci/run`` runs in a scratch git
checkout whose README holds stand-in commands that record where they ran and what they
saw, and whose stand-in test command puts stand-in ruff and mypy (which record their
arguments) in ``.venv/bin``, so the test checks the extraction, the "fresh" claims and the
order and failure of every step in about a second.
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


TOOLS = ("ruff", "mypy")


def _tools(tmp_path: Path, fail: str | None = None) -> str:
    """Stand-in ruff and mypy, each recording ``<tool> <args>`` in ``tmp_path/tools.log``
    (the one named by ``fail`` after the argument ``fail`` also exits 5); returns a shell
    snippet for the stand-in test command that installs them into ``.venv/bin``."""
    src = tmp_path / "tools"
    src.mkdir(exist_ok=True)
    log = tmp_path / "tools.log"
    for tool in TOOLS:
        script = src / tool
        body = f'echo "{tool} $*" >> {log}\n'
        if fail is not None:
            words = fail.split()
            if words[0] == tool:
                cond = " ".join(words[1:])
                body += f'case "$*" in "{cond}"*) exit 5;; esac\n'
        script.write_text("#!/bin/sh\n" + body)
        script.chmod(0o755)
    return f" && mkdir -p .venv/bin && cp {src}/* .venv/bin/"


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
    tests = probe.replace("WHO", "tests") + _tools(tmp_path)
    repo = _scratch(tmp_path, _readme(probe.replace("WHO", "main"), tests))
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
    assert sorted(os.listdir(repo / ".venv")) == ["bin", "made-by-tests"]
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
    tests = probe.replace("WHO", "tests") + _tools(tmp_path)
    repo = _scratch(tmp_path, _readme(probe.replace("WHO", "main"), tests))
    env = {k: v for k, v in os.environ.items() if k != "TYLO_REQUIRE_C_LAUNCH"}
    r = subprocess.run(
        [str(repo / ".ci" / "run")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert log.read_text().splitlines() == ["main=unset", "tests=1"]


STEPS = ["ruff check .", "ruff format --check .", "mypy"]


def test_lint_format_and_types_run_after_the_tests(tmp_path: Path) -> None:
    """After the test command: ``ruff check .``, ``ruff format --check .`` and ``mypy`` (its
    files from pyproject.toml), in that order, from the test command's ``.venv``, each with
    its command line and a verdict in the output."""
    if shutil.which("git") is None:
        pytest.skip("needs git (found: none)")
    log = tmp_path / "order"
    tests = f"echo tests >> {log}" + _tools(tmp_path)
    repo = _scratch(tmp_path, _readme("true", tests))
    r = subprocess.run(
        [str(repo / ".ci" / "run")], capture_output=True, text=True, timeout=60, check=False
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert [x.rstrip() for x in (tmp_path / "tools.log").read_text().splitlines()] == STEPS
    out = r.stdout.splitlines()
    at = [out.index(f"+ .venv/bin/{step}") for step in STEPS]
    tests_passed = next(i for i, x in enumerate(out) if "test command passed" in x)
    assert tests_passed < at[0] and at == sorted(at)
    for name in ["ruff check", "ruff format --check", "mypy"]:
        verdict = rf"\.ci/run: {re.escape(name)} passed in \d+ s"
        assert any(re.fullmatch(verdict, x) for x in out), (name, r.stdout)


@pytest.mark.parametrize("failing", STEPS)
def test_a_failing_check_fails_the_run(tmp_path: Path, failing: str) -> None:
    """A failing lint, format check or type check fails the run with its exit status, says
    which, and runs none of the later steps."""
    if shutil.which("git") is None:
        pytest.skip("needs git (found: none)")
    repo = _scratch(tmp_path, _readme("true", "true" + _tools(tmp_path, fail=failing)))
    r = subprocess.run(
        [str(repo / ".ci" / "run")], capture_output=True, text=True, timeout=60, check=False
    )
    assert r.returncode == 5, r.stdout + r.stderr
    ran = [x.rstrip() for x in (tmp_path / "tools.log").read_text().splitlines()]
    assert ran == STEPS[: STEPS.index(failing) + 1]
    name = {"ruff check .": "ruff check", "ruff format --check .": "ruff format --check"}.get(
        failing, "mypy"
    )
    assert f".ci/run: {name} failed (exit status 5)" in r.stderr
    assert f"{name} passed" not in r.stdout


def test_the_test_extra_pins_the_checkers_and_pyproject_configures_them() -> None:
    """The test extra installs exact ruff and mypy versions (a new release's rules never
    break CI unasked), and pyproject.toml holds their configuration: ruff's line length and
    rule set, mypy strict on tylo/layouts and tylo/nvgpu."""
    tomllib = pytest.importorskip("tomllib", reason="needs tomllib (Python >= 3.11)")
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())
    extra = conf["project"]["optional-dependencies"]["test"]
    for tool in TOOLS:
        pins = [d for d in extra if re.fullmatch(rf"{tool}==\d+(\.\d+)+", d)]
        assert len(pins) == 1, (tool, extra)
    ruff = conf["tool"]["ruff"]
    assert ruff["line-length"] == 100
    assert {"E", "F", "W", "I"} <= set(ruff["lint"]["select"])
    mypy = conf["tool"]["mypy"]
    assert mypy["strict"] is True
    assert {"tylo/layouts", "tylo/nvgpu"} <= set(mypy["files"])


def test_the_runtime_test_count_is_printed(tmp_path: Path) -> None:
    """The test session writes its count of runtime tests to ``$TYLO_RUNTIME_COUNT_FILE``
    (tests/interp_tier.py); ``.ci/run`` prints it as one line, and removes the file."""
    if shutil.which("git") is None:
        pytest.skip("needs git (found: none)")
    seen = tmp_path / "seen"
    write = (
        'echo "$TYLO_RUNTIME_COUNT_FILE" > ' + str(seen) + ' && echo "runtime tests executed: '
        '7 (5 in the CPU interpreter, 2 on a GPU)" > "$TYLO_RUNTIME_COUNT_FILE"'
    )
    repo = _scratch(tmp_path, _readme("true", write + _tools(tmp_path)))
    r = subprocess.run(
        [str(repo / ".ci" / "run")], capture_output=True, text=True, timeout=60, check=False
    )
    assert r.returncode == 0, r.stdout + r.stderr
    lines = [x for x in r.stdout.splitlines() if x.startswith(".ci/run: runtime tests")]
    assert lines == [".ci/run: runtime tests executed: 7 (5 in the CPU interpreter, 2 on a GPU)"]
    assert not Path(seen.read_text().strip()).exists()
