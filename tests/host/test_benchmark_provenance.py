"""``benchmarks/provenance.py`` without a GPU (issue 36, item 5): the metadata every benchmark
JSON carries is complete whatever is missing (no GPU, no driver, no git, no torch), every
benchmark writes its JSON through it, and the staleness rule the status page applies
(:func:`table_verdict`, :func:`suite_verdict`) is checked against a real git history.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks import provenance as prov
from tylo.errors import TyloError

ROOT = Path(__file__).resolve().parents[2]
WRITERS = ("gemm", "hopper_gemm", "attention", "softmax", "gemm_sweep", "launch")


# ---------------------------------------------------------------------------- a git repo


def git(repo: Path, *args: str, date: str | None = None) -> str:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    if date is not None:
        env["GIT_COMMITTER_DATE"] = env["GIT_AUTHOR_DATE"] = f"{date}T12:00:00+0000"
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    ).stdout.strip()


def commit(repo: Path, paths: list[str], date: str = "2026-12-05") -> str:
    """Append a line to each of ``paths`` and commit them; the new commit's SHA."""
    for rel in paths:
        f = repo / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        with open(f, "a") as fh:
            fh.write("x\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", f"touch {paths}", date=date)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    git(tmp_path, "init", "-q")
    return tmp_path


def meta_at(sha: str, script: str = "benchmarks/gemm.py", **over: object) -> dict:
    m = {f: "x" for f in prov.REQUIRED}
    m.update(provenance=1, script=script, commit=sha, commit_from="git", dirty=False)
    m.update(over)
    return m


# ---------------------------------------------------------------------------- metadata


def test_metadata_on_this_machine_is_complete_and_json() -> None:
    m = prov.run_metadata(("torch", "triton", "cudnn"), script="benchmarks/x.py", argv=["-a b"])
    assert set(prov.REQUIRED) <= set(m) and {"torch", "cudnn", "triton"} <= set(m)
    assert m["command"] == "python benchmarks/x.py '-a b'"
    assert m["python"].count(".") == 2 and m["tylo"] == __import__("tylo").__version__
    for key in ("gpu", "driver", "cuda", "libnvvm", "torch", "triton", "cudnn"):
        assert isinstance(m[key], str) and m[key], key
    from tylo.backend import driver

    if driver.device_count() == 0:  # the CPU tier: say so, never invent
        assert m["gpu"] == "none" and m["cuda"] == "none" and m["compute_capability"] == "none"
    json.dumps(m)


def test_uses_records_only_what_is_named_and_refuses_the_unknown() -> None:
    m = prov.run_metadata((), script="s")
    assert not {"torch", "torch_cuda", "cudnn", "triton"} & set(m)
    assert "torch" in prov.run_metadata(("torch",), script="s")
    with pytest.raises(TyloError, match=r"uses=\['cublas'\] are not among"):
        prov.run_metadata(("torch", "cublas"), script="s")


@pytest.mark.parametrize("err", [RuntimeError("no"), OSError("gone"), ImportError("x"), KeyError()])
def test_a_probe_that_breaks_is_recorded_not_raised(monkeypatch, err) -> None:
    def boom(*a: object) -> None:
        raise err

    for probe in ("_gpu", "driver_release", "_cuda", "_libnvvm", "_torch", "_cudnn", "_triton"):
        monkeypatch.setattr(prov, probe, boom)
    monkeypatch.setattr(prov, "git_commit", lambda root: None)
    monkeypatch.delenv("TYLO_COMMIT", raising=False)
    m = prov.run_metadata(script="s")
    for key in ("gpu", "driver", "cuda", "libnvvm", "torch", "cudnn", "triton"):
        assert m[key].startswith(f"unknown ({type(err).__name__}"), (key, m[key])
    assert (m["commit"], m["commit_from"], m["dirty"]) == ("unknown", "none", "unknown")


def test_driver_release_reads_proc_then_says_none(tmp_path, monkeypatch) -> None:
    proc = tmp_path / "version"
    proc.write_text(
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  "
        "(dvs-builder@U16-I3-B03-4-3)  Thu Jan 1 00:00:00 UTC 2026\nGCC version:  gcc 12\n"
    )
    assert prov.driver_release(proc) == "580.159.04"
    proc.write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.14  Thu Feb 22\n")
    assert prov.driver_release(proc) == "550.54.14"
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi either
    assert prov.driver_release(tmp_path / "absent") == "none"


@pytest.mark.parametrize(
    "number, text",  # CUDNN_VERSION in cudnn_version.h: 9.x major*10000, 8.x major*1000
    [(91002, "9.10.2"), (90100, "9.1.0"), (8907, "8.9.7"), (8600, "8.6.0"), (None, "none")],
)
def test_cudnn_version_numbers(number, text) -> None:
    assert prov.cudnn_text(number) == text


@given(st.integers(9, 30), st.integers(0, 99), st.integers(0, 99))
def test_cudnn_9_numbers_read_back(major, minor, patch) -> None:
    assert prov.cudnn_text(major * 10000 + minor * 100 + patch) == f"{major}.{minor}.{patch}"


# ---------------------------------------------------------------------------- the commit


def test_commit_from_git_with_the_dirty_flag(repo: Path) -> None:
    sha = commit(repo, ["tylo/a.py"])
    assert prov.commit_state(root=repo, environ={}) == {
        "commit": sha,
        "commit_from": "git",
        "dirty": False,
    }
    (repo / "new.py").write_text("untracked\n")
    assert prov.commit_state(root=repo, environ={})["dirty"] is True
    (repo / "new.py").unlink()
    (repo / "tylo" / "a.py").write_text("changed\n")
    state = prov.commit_state("abc1234", root=repo, environ={"TYLO_COMMIT": "abc1234"})
    # git answers; a given commit it contradicts is kept beside, not recorded as the commit
    assert state == {"commit": sha, "commit_from": "git", "dirty": True, "commit_given": "abc1234"}


def test_commit_without_git_comes_from_the_flag_or_the_environment(tmp_path: Path) -> None:
    sha = "a" * 40
    assert prov.commit_state(root=tmp_path, environ={}) == {
        "commit": "unknown",
        "commit_from": "none",
        "dirty": "unknown",
    }
    assert prov.commit_state(sha, "no", root=tmp_path, environ={}) == {
        "commit": sha,
        "commit_from": "--commit",
        "dirty": False,
    }
    env = {"TYLO_COMMIT": " ABC1234 ", "TYLO_DIRTY": "1"}
    assert prov.commit_state(root=tmp_path, environ=env) == {
        "commit": "abc1234",
        "commit_from": "TYLO_COMMIT",
        "dirty": True,
    }
    state = prov.commit_state("HEAD~1", root=tmp_path, environ={})
    assert state["commit"] == "unknown" and state["commit_given"] == "HEAD~1"


@settings(max_examples=60, deadline=None)
@given(
    st.one_of(st.none(), st.text(max_size=70), st.text("0123456789abcdefABCDEF", max_size=70)),
    st.one_of(st.none(), st.sampled_from(["0", "1", "yes", "no", "maybe", ""]), st.text()),
)
def test_any_given_commit_is_recorded_only_when_it_is_a_sha(given_sha, dirty) -> None:
    root = Path("/nonexistent-tylo-tree")
    state = prov.commit_state(given_sha, dirty, root=root, environ={})
    sha = (given_sha or "").strip().lower()
    is_sha = 7 <= len(sha) <= 64 and all(c in "0123456789abcdef" for c in sha)
    if not given_sha:
        assert state["commit_from"] == "none" and state["commit"] == "unknown"
    elif is_sha:
        assert state["commit"] == sha and state["commit_from"] == "--commit"
        want = {"1": True, "yes": True, "0": False, "no": False}.get((dirty or "").strip().lower())
        assert state["dirty"] == (want if want is not None else "unknown")
    else:
        assert state["commit"] == "unknown" and state["commit_given"] == given_sha


def test_write_json_is_metadata_and_rows(tmp_path: Path) -> None:
    out = tmp_path / "b.json"
    prov.write_json(out, [{"a": 1, "p": Path("x")}], {"commit": "c"}, best="v")
    assert json.loads(out.read_text()) == {
        "metadata": {"commit": "c"},
        "rows": [{"a": 1, "p": "x"}],
        "best": "v",
    }


# ---------------------------------------------------------------------------- the writers


def _calls(tree: ast.AST, name: str) -> list[ast.Call]:
    return [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == name
    ]


def test_every_benchmark_json_goes_through_provenance() -> None:
    """No benchmark writes JSON itself; the six that write it call write_json with
    run_metadata of their own script, and take --commit / --dirty."""
    for path in sorted((ROOT / "benchmarks").glob("*.py")):
        if path.name == "provenance.py":
            continue
        tree = ast.parse(path.read_text())
        assert not _calls(tree, "dump"), f"{path.name} writes JSON itself: use write_json"
        writes = _calls(tree, "write_json")
        assert bool(writes) == (path.stem in WRITERS), path.name
    for stem in WRITERS:
        tree = ast.parse((ROOT / "benchmarks" / f"{stem}.py").read_text())
        [meta] = _calls(tree, "run_metadata")
        script = {k.arg: k.value for k in meta.keywords}["script"]
        assert ast.literal_eval(script) == f"benchmarks/{stem}.py"
        assert _calls(tree, "add_arguments"), stem
        writes = _calls(tree, "write_json")
        assert all(isinstance(w.func.value, ast.Name) for w in writes)
        assert {w.func.value.id for w in writes} == {"provenance"}


# ---------------------------------------------------------------------------- staleness


def test_planted_a_table_older_than_a_tylo_change_is_stale(repo: Path) -> None:
    c1 = commit(repo, ["tylo/a.py", "benchmarks/gemm.py", "benchmarks/softmax.py"])
    c2 = commit(repo, ["tylo/a.py"])
    g = prov.Git.at(repo)
    state, why, judged = prov.table_verdict(meta_at(c1), g)
    assert (state, judged) == ("stale", True) and f"latest: `{c2[:10]}`" in why
    assert prov.table_verdict(meta_at(c2), g)[0] == "current"
    c3 = commit(repo, ["docs/x.md"])  # not what the benchmark measures
    assert prov.table_verdict(meta_at(c2), g)[0] == "current"
    commit(repo, ["benchmarks/gemm.py"])  # its own script
    assert prov.table_verdict(meta_at(c3), g)[0] == "stale"
    assert prov.table_verdict(meta_at(c3, "benchmarks/softmax.py"), g)[0] == "current"
    (repo / "tylo" / "a.py").write_text("uncommitted\n")
    state, why, _ = prov.table_verdict(meta_at(c3, "benchmarks/softmax.py"), g)
    assert state == "stale" and "uncommitted" in why
    (repo / "tylo" / "new.py").write_text("untracked\n")
    git(repo, "checkout", "-q", "tylo/a.py")
    assert prov.table_verdict(meta_at(c3, "benchmarks/softmax.py"), g)[0] == "stale"


@pytest.mark.parametrize(
    "meta, fragment",
    [
        (None, "no metadata"),
        ({"commit": "a" * 40}, "its metadata lacks"),
        (meta_at("a" * 40, dirty=True), "modified work tree"),
        (meta_at("a" * 40, dirty="unknown"), "unknown state"),
        (meta_at("unknown"), "its commit is 'unknown'"),
    ],
)
def test_what_the_data_alone_makes_stale(meta, fragment) -> None:
    """Stale without reading any history (judged False), with git or without."""
    for g in (None, prov.Git.at(ROOT)):
        state, why, judged = prov.table_verdict(meta, g)
        assert (state, judged) == ("stale", False) and fragment in why


def test_without_history_staleness_is_unknown(repo: Path, tmp_path_factory) -> None:
    sha = commit(repo, ["tylo/a.py"])
    assert prov.Git.at(tmp_path_factory.mktemp("no_git")) is None
    assert prov.table_verdict(meta_at(sha), None)[:2] == (
        "unknown",
        "git cannot read this tree's history",
    )
    state, why, _ = prov.table_verdict(meta_at("b" * 40), prov.Git.at(repo))
    assert state == "stale" and "not in this repository's history" in why


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> tuple[Path, list[tuple[str, list[str]]]]:
    """One repository of 14 commits, each touching a fixed, varied set of paths."""
    repo = tmp_path_factory.mktemp("history")
    git(repo, "init", "-q")
    pool = ["tylo/a.py", "tylo/ops/b.py", "docs/c.md", "benchmarks/gemm.py",
            "benchmarks/softmax.py", "tests/gpu/t.py", "tests/host/h.py"]  # fmt: skip
    touched = [[pool[(i * 3 + j) % 7] for j in range(i % 3 + 1)] for i in range(14)]
    touched[5] = touched[9] = ["docs/c.md"]
    return repo, [(commit(repo, paths), paths) for paths in touched]


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 13), st.sampled_from(["benchmarks/gemm.py", "benchmarks/softmax.py"]))
def test_verdict_is_current_exactly_when_no_later_commit_touches_what_it_measures(
    history, at, script
) -> None:
    """Brute force over the recorded history: current iff no commit after ``at`` touched
    ``tylo/`` or the script (the oracle reads the list of touched paths, not git)."""
    repo, commits = history
    later = [p for _, paths in commits[at + 1 :] for p in paths]
    want = not any(p.startswith("tylo/") or p == script for p in later)
    state, _, _ = prov.table_verdict(meta_at(commits[at][0], script), prov.Git.at(repo))
    assert state == ("current" if want else "stale")


def test_suite_runs_are_judged_against_their_suite(repo: Path) -> None:
    c1 = commit(repo, ["tests/gpu/t.py", "tylo/a.py"], date="2026-12-01")
    c2 = commit(repo, ["tests/host/h.py"], date="2026-12-03")
    g = prov.Git.at(repo)
    run = {"date": "2026-12-01", "suite": "tests/gpu", "complete": True}
    assert prov.suite_verdict({**run, "commit": c1}, g)[0] == "current"
    assert prov.suite_verdict({**run, "suite": "tests", "commit": c1}, g)[0] == "older"
    commit(repo, ["tylo/a.py"], date="2026-12-04")
    state, why = prov.suite_verdict({**run, "commit": c2}, g)
    assert state == "current" and "older code" in why
    c4 = commit(repo, ["tests/gpu/t.py"], date="2026-12-05")
    assert prov.suite_verdict({**run, "commit": c2}, g)[0] == "older"
    assert prov.suite_verdict({**run, "commit": c4}, g)[0] == "current"
    # without a commit: older when the suite changed on a later day than the run
    assert prov.suite_verdict({**run, "date": "2026-12-04"}, g)[0] == "older"
    assert prov.suite_verdict({**run, "date": "2026-12-05"}, g)[0] == "unknown"
    assert prov.suite_verdict({**run, "date": "Dec 1"}, g)[0] == "unknown"
    assert prov.suite_verdict({**run, "commit": "c" * 40}, g)[0] == "unknown"
    assert prov.suite_verdict({**run, "commit": c4}, None)[0] == "unknown"
