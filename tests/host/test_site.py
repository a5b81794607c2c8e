"""The manual builds with ``mkdocs build --strict`` (tylo issue 15, item 3), and what the
site claims is what its sources say: the rendered code includes are the examples' code, the
status page is the one ``docs/data/runs.json`` and the code generate, and the index's table
of doctest pages matches the pages and the tests that run them.

The build takes about 4 s of CPU; it runs once per session (a module fixture).
"""

from __future__ import annotations

import copy
import html
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def _load_tool(name: str):
    spec = importlib.util.spec_from_file_location(f"_site_{name}", ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


status_page = _load_tool("status_page")


def mkdocs_command() -> list[str] | None:
    """``python -m mkdocs`` of this interpreter when mkdocs and the site's plugins import."""
    for mod in ("mkdocs", "material", "mkdocstrings_handlers.python", "pymdownx.snippets"):
        if importlib.util.find_spec(mod.split(".")[0]) is None:
            return None
    return [sys.executable, "-m", "mkdocs"]


def build_site(dest: Path) -> subprocess.CompletedProcess:
    cmd = mkdocs_command()
    if cmd is None:  # they are in the test extra: never a skip (issue 36, item 7)
        pytest.fail(
            "needs mkdocs, mkdocs-material, mkdocstrings[python] and pymdown-extensions, "
            "which the test extra installs (pip install -e '.[test]'; found: not all)",
            pytrace=False,
        )
    return subprocess.run(
        [*cmd, "build", "--strict", "--site-dir", str(dest)],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("site")
    proc = build_site(dest)
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout}\n{proc.stderr}"
    return dest


def page_text(site: Path, page: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", (site / page / "index.html").read_text()))


INCLUDE = re.compile(r'^--8<-- "([^":]+):([\w-]+)"$', re.MULTILINE)


def test_every_code_include_renders_the_section_it_names(site: Path) -> None:
    """No ``--8<--`` marker is left, and each included section's code lines are on the page."""
    pages = [p for p in sorted(DOCS.glob("*.md")) if INCLUDE.search(p.read_text())]
    assert {"gemm.md", "kernels.md", "softmax.md", "fragments.md"} <= {p.name for p in pages}
    for md in pages:
        built = page_text(site, md.stem)
        assert "--8<--" not in built, f"{md.name}: a snippet marker was not replaced"
        for path, section in INCLUDE.findall(md.read_text()):
            source = (ROOT / path).read_text()
            body = source.split(f"[start:{section}]", 1)[1].split(f"[end:{section}]", 1)[0]
            lines = [
                ln.strip() for ln in body.splitlines()[1:-1] if ln.strip() and "--8<--" not in ln
            ]
            assert lines, f"{path}:{section} is empty"
            missing = [ln for ln in lines if ln not in built]
            assert not missing, f"{md.name}: {path}:{section} lines missing: {missing[:3]}"


def test_status_page_is_what_the_data_says(site: Path) -> None:
    """The committed page, and the built one, equal the page rendered from the data."""
    data = status_page.load()
    text = status_page.render(data)
    committed = (DOCS / "status.md").read_text()
    assert status_page.same_page(committed, text), "run `python tools/status_page.py`"
    # apart from the lines judged against the git history, equal line for line
    assert status_page.comparable(committed) == status_page.comparable(text)
    built = page_text(site, "status")
    assert "Judged against" in built and "Staleness: stale:" in built
    for run in data["runs"]:
        for field in status_page.RUN_FIELDS:
            assert run[field] in built, (field, run[field])
    for combo in status_page.supported_combinations():
        assert combo["instruction"] in built


def test_supported_combinations_are_what_the_atoms_accept() -> None:
    """Brute force: each (atom, dtype) is listed exactly when the constructor accepts it."""
    from tylo import dtypes as dt
    from tylo.nvgpu.errors import PlanError
    from tylo.nvgpu.warp.mma import MMAAtom
    from tylo.nvgpu.warpgroup.mma import WarpgroupMMAAtom

    listed = {
        (c["atom"].split()[0], c["dtype"], "registers" in c["atom"])
        for c in status_page.supported_combinations()
    }
    makers = {
        ("mma.sync", False): lambda d: MMAAtom((16, 8, 16), d),
        ("wgmma", False): lambda d: WarpgroupMMAAtom((64, 64, 16), d, a="shared"),
        ("wgmma", True): lambda d: WarpgroupMMAAtom((64, 64, 16), d, a="registers"),
    }
    every = [getattr(dt, n) for n in dt.__all__ if isinstance(getattr(dt, n), dt.DType)]
    assert len(every) >= 10
    for (atom, regs), make in makers.items():
        for d in every:
            try:
                make(d)
                accepted = True
            except PlanError:
                accepted = False
            assert ((atom, str(d), regs) in listed) == accepted, (atom, d, regs)


def _write(tmp: Path, data: object, bench: dict[str, object] | None = None) -> Path:
    path = tmp / "runs.json"
    path.write_text(json.dumps(data))
    for name, rows in (bench or {}).items():
        (tmp / name).write_text(json.dumps(rows))
    return path


GOOD = {
    "schema": 1,
    "runs": [{"date": "2026-12-01", "gpu": "G", "driver": "1", "what": "w", "result": "r | s"}],
    "benchmarks": [],
}


def test_benchmark_rows_become_tables(tmp_path: Path) -> None:
    rows = [
        {
            "shape": "64x64x64",
            "impl": "tylo",
            "ms": 0.012345678,
            "tflops": 123.456,
            "nested": {"skip": 1},
        },
        {"shape": "8192x8192x8192", "impl": "cuBLAS", "ms": 1.5, "tflops": 784.0, "error": None},
    ]
    data = {
        **copy.deepcopy(GOOD),
        "benchmarks": [
            {"name": "gemm", "file": "gemm.json", "date": "d", "gpu": "H200", "command": "c"}
        ],
    }
    text = status_page.render(status_page.load(_write(tmp_path, data, {"gemm.json": rows})))
    assert "| shape | impl | ms | tflops | error |" in text
    assert "| 64x64x64 | tylo | 0.01235 | 123.5 |  |" in text
    assert "| 8192x8192x8192 | cuBLAS | 1.5 | 784 |  |" in text
    assert "r \\| s" in text  # a "|" in a value does not split the cell
    assert "nested" not in text
    assert "Staleness: **stale**: no metadata: an old-format file" in text
    assert "Metadata: none" in text
    # the new format: the same table, with its metadata beside it
    meta = {
        "provenance": 1,
        "script": "benchmarks/gemm.py",
        "command": "python benchmarks/gemm.py --reps 3",
        "date": "2026-12-08T00:00:00Z",
        "commit": "f" * 40,
        "commit_from": "--commit",
        "dirty": True,
        "tylo": "0.1.0",
        "python": "3.11.7",
        "gpu": "NVIDIA H200",
        "driver": "580.159.04",
        "cuda": "13.0",
        "libnvvm": "13.0.88 (PTX ISA 9.0)",
        "torch": "2.9.1",
        "cudnn": "9.10.2",
        "triton": "3.5.1",
    }
    path = _write(tmp_path, data, {"gemm.json": {"metadata": meta, "rows": rows, "best": "x"}})
    new = status_page.render(status_page.load(path), git=None)
    assert "| 64x64x64 | tylo | 0.01235 | 123.5 |  |" in new
    assert "| commit | tylo | GPU | driver | CUDA (driver API) | libNVVM | torch | cuDNN |" in new
    assert "| ffffffffff (dirty; from --commit) | 0.1.0 | NVIDIA H200 | 580.159.04 | 13.0 |" in new
    assert "Metadata command line: `python benchmarks/gemm.py --reps 3`" in new
    assert "Staleness: **stale**: measured on a modified work tree (dirty), not on its" in new
    # hostile metadata values render (and are stale); they never crash the page
    for dirty, commit in (([1], {"a": 1}), (None, 7), ("yes", "f" * 40)):
        bad = {**meta, "dirty": dirty, "commit": commit, "script": None, "gpu": ["x|y"]}
        path = _write(tmp_path, data, {"gemm.json": {"metadata": bad, "rows": rows}})
        assert "Staleness: **stale**" in status_page.render(status_page.load(path), git=None)


@pytest.mark.parametrize(
    "data, files, fragment",
    [
        ([], {}, "is not schema 1"),
        ({"schema": 2, "runs": [], "benchmarks": []}, {}, "is not schema 1"),
        ({"schema": 1, "runs": {}, "benchmarks": []}, {}, "'runs' must be a list"),
        ({"schema": 1, "runs": [{"date": "d"}], "benchmarks": []}, {}, "runs[0] lacks"),
        ({"schema": 1, "runs": [7], "benchmarks": []}, {}, "runs[0] lacks"),
        (
            {
                "schema": 1,
                "runs": [],
                "benchmarks": [
                    {
                        "name": "g",
                        "file": "absent.json",
                        "date": "d",
                        "gpu": "g",
                        "command": "benchmarks/gemm.py --json x",
                    }
                ],
            },
            {},
            "write it with `benchmarks/gemm.py --json x`",
        ),
        (
            {
                "schema": 1,
                "runs": [],
                "benchmarks": [
                    {"name": "g", "file": "g.json", "date": "d", "gpu": "g", "command": "c"}
                ],
            },
            {"g.json": {"rows": 5}},
            "is neither a list of rows nor",
        ),
        (
            {
                "schema": 1,
                "runs": [],
                "benchmarks": [
                    {"name": "g", "file": "g.json", "date": "d", "gpu": "g", "command": "c"}
                ],
            },
            {"g.json": {"metadata": [1], "rows": []}},
            "metadata is a list",
        ),
        (
            {"schema": 1, "runs": [{**GOOD["runs"][0], "commit": "xyz"}], "benchmarks": []},
            {},
            "runs[0].commit 'xyz' is not 7 to 64 lowercase hex digits",
        ),
        (
            {"schema": 1, "runs": [{**GOOD["runs"][0], "commit": 7}], "benchmarks": []},
            {},
            "runs[0].commit is 7, not a str",
        ),
        (
            {
                "schema": 1,
                "runs": [{**GOOD["runs"][0], "suite": "tests/host", "complete": True}],
                "benchmarks": [],
            },
            {},
            "runs[0].suite 'tests/host' is not one of",
        ),
        (
            {
                "schema": 1,
                "runs": [{**GOOD["runs"][0], "suite": "tests", "complete": "yes"}],
                "benchmarks": [],
            },
            {},
            "runs[0].complete is 'yes', not a bool",
        ),
        (
            {"schema": 1, "runs": [{**GOOD["runs"][0], "suite": "tests"}], "benchmarks": []},
            {},
            "has only one of suite and complete",
        ),
    ],
)
def test_malformed_run_data_is_refused_with_the_fix(tmp_path, data, files, fragment) -> None:
    with pytest.raises(status_page.StatusDataError) as err:
        status_page.load(_write(tmp_path, data, files))
    assert fragment in str(err.value) and "status page:" in str(err.value)


def test_stale_status_page_is_a_build_warning(tmp_path, monkeypatch, caplog) -> None:
    """A hand-edited docs/status.md makes the hook warn on an ``mkdocs.*`` logger, which
    ``--strict`` turns into a failed build; the page as generated does not."""
    page = tmp_path / "status.md"
    monkeypatch.setattr(status_page, "PAGE", page)
    page.write_text(status_page.render(status_page.load()))
    with caplog.at_level("WARNING", logger="mkdocs"):
        status_page.on_config({})
    assert caplog.records == []
    # a verdict judged against another commit's history is not a difference
    text = page.read_text()
    judged = [ln for ln in text.splitlines() if ln.lstrip().startswith("Judged against ")]
    assert judged
    page.write_text(text.replace(judged[0], judged[0].split(":", 1)[0] + ": anything else."))
    with caplog.at_level("WARNING", logger="mkdocs"):
        status_page.on_config({})
    assert caplog.records == []
    page.write_text(page.read_text().replace("0 errors", "no errors"))
    with caplog.at_level("WARNING", logger="mkdocs"):
        status_page.on_config({})
    [record] = caplog.records
    assert record.name.startswith("mkdocs.") and record.levelname == "WARNING"
    assert "docs/status.md differs from docs/data/runs.json" in record.getMessage()


def test_api_reference_covers_every_module_tylo_exports_from() -> None:
    import tylo

    documented = "".join((DOCS / "api" / p).read_text() for p in ("tylo.md", "tile.md", "nvgpu.md"))
    pages = set(re.findall(r"^::: ([\w.]+)", documented, re.MULTILINE))
    for module in sorted(set(tylo._LAZY.values())):
        covered = module in pages or any(
            module.startswith(p + ".") and p in ("tylo.tile", "tylo.nvgpu") for p in pages
        )
        assert covered, f"{module} (names of tylo) is on no docs/api page"


DOCTEST_ROW = re.compile(
    r"^\| \[(\w+\.md)\]\(\1\) \| `([^`]+)` \| ([^|]+) \| ([^|]+) \|$", re.MULTILINE
)
FLAG_NAMES = ("ELLIPSIS", "NORMALIZE_WHITESPACE", "IGNORE_EXCEPTION_DETAIL", "SKIP")


def test_index_states_each_doctest_pages_flags_and_needs() -> None:
    """Every page with ``>>>`` examples is in the index's table, with the test that runs it,
    the flags that test passes, and 'checkout' exactly when it imports ``examples``."""
    rows = {m[0]: m[1:] for m in DOCTEST_ROW.findall((DOCS / "index.md").read_text())}
    pages = {p.name for p in DOCS.glob("*.md") if re.search(r"^>>> ", p.read_text(), re.MULTILINE)}
    assert set(rows) == pages
    for page, (test, flags, needs) in rows.items():
        test_text = (ROOT / test).read_text()
        assert page in test_text or Path(page).stem in test_text, (page, test)
        stated = set(re.findall(r"`(\w+)`", flags))
        used = {f for f in FLAG_NAMES if f"doctest.{f}" in test_text}
        assert stated == used, (page, stated, used)
        imports_examples = bool(
            re.search(
                r"^(>>>|\.\.\.) .*\b(from|import) examples\b",
                (DOCS / page).read_text(),
                re.MULTILINE,
            )
        )
        assert (needs.strip() == "checkout") == imports_examples, (page, needs)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.lists(
            st.one_of(st.text(), st.floats(allow_nan=False), st.integers(), st.none()),
            min_size=3,
            max_size=3,
        ),
        max_size=4,
    )
)
def test_table_cells_never_split_or_wrap(rows: list[list[object]]) -> None:
    """Whatever a value holds (``|``, newlines, huge floats), each row is one line of exactly
    three cells: every unescaped ``|`` is a cell border."""
    lines = status_page.table(["a", "b", "c"], rows)
    assert len(lines) == 2 + len(rows)
    for line in lines[2:]:
        borders = re.findall(r"(?<!\\)\|", line)
        assert len(borders) == 4 and line.splitlines() == [line], line


def test_each_doctest_page_states_its_flags_on_the_built_page(site: Path) -> None:
    """The index's row for a page is repeated under that page's title; no other page has it."""
    rows = {m[0]: m[1:] for m in DOCTEST_ROW.findall((DOCS / "index.md").read_text())}
    assert rows
    for md in sorted(DOCS.glob("*.md")):
        if md.name == "index.md":
            continue
        built = " ".join(page_text(site, md.stem).split())
        if md.name not in rows:
            assert "Running the examples on this page" not in built, md.name
            continue
        test, flags, needs = rows[md.name]
        expected = f"Running the examples on this page {test} runs them with the doctest flags "
        assert expected + flags.replace("`", "").strip() + "; they" in built, md.name
        assert ("examples.*" in built.split(expected, 1)[1][:200]) is (needs.strip() == "checkout")


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    ).stdout.strip()


def _touch(repo: Path, rel: str) -> str:
    (repo / rel).parent.mkdir(parents=True, exist_ok=True)
    with open(repo / rel, "a") as f:
        f.write("x\n")
    _git(repo, "add", rel)
    _git(repo, "commit", "-q", "-m", rel)
    return _git(repo, "rev-parse", "HEAD")


def test_planted_table_older_than_a_tylo_change_renders_stale(tmp_path: Path) -> None:
    """A table measured at a commit before a change to ``tylo/`` is marked stale on the
    page; the same table at the newest commit is current; the whole-suite section names the
    latest complete GPU-tier run and says whether it is of the current suite."""
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    before = _touch(repo, "tylo/a.py")
    suite_at = _touch(repo, "tests/gpu/t.py")
    after = _touch(repo, "tylo/a.py")
    git = status_page.Git.at(repo)
    meta = {f: "v" for f in ("tylo", "python", "gpu", "driver", "cuda", "libnvvm")}
    meta.update(provenance=1, script="benchmarks/gemm.py", command="c", date="d")
    meta.update(commit_from="git", dirty=False)
    run = {**GOOD["runs"][0], "suite": "tests/gpu", "complete": True, "commit": suite_at}
    data = {
        "schema": 1,
        "runs": [run],
        "benchmarks": [
            {"name": n, "file": f"{n}.json", "date": "d", "gpu": "g", "command": "c"}
            for n in ("old", "new")
        ],
    }
    files = {
        "old.json": {"metadata": {**meta, "commit": before}, "rows": [{"a": 1}]},
        "new.json": {"metadata": {**meta, "commit": after}, "rows": [{"a": 2}]},
    }
    text = status_page.render(status_page.load(_write(tmp_path, data, files)), git=git)
    old = text.split("### old", 1)[1].split("###", 1)[0]
    new = text.split("### new", 1)[1]
    head = f"Judged against `{after[:10]}` (HEAD where this page was rendered): "
    assert f"{head}**stale**: `tylo/` or `benchmarks/gemm.py` changed after `{before[:10]}`" in old
    assert f"{head}current: no change to" in new
    assert (
        "the latest complete GPU-tier run of the current suite is the one of 2026-12-01 at "
        f"`{suite_at[:10]}`" in text
    )
    assert "ran on older code (`tylo/` changed" in text
    # the suite changes: no complete run of the current suite is left
    _touch(repo, "tests/gpu/t.py")
    text = status_page.render(status_page.load(tmp_path / "runs.json"), git=git)
    assert "no complete run of the current GPU tier is recorded yet." in text
    assert "**an older suite**" in text
    # without git: no verdict that needs history
    text = status_page.render(status_page.load(tmp_path / "runs.json"), git=None)
    assert "Judged against no history (git unavailable): staleness unknown" in text
    assert "**stale**" not in text.split("## Performance", 1)[1]


def test_the_old_whole_suite_row_is_shown_as_an_older_suite() -> None:
    """The 2936-test run of the whole suite predates the current suite (issue 36): with this
    checkout's history the page says so, and never that it is a run of the current suite."""
    data = status_page.load()
    [first] = [r for r in data["runs"] if r["result"].startswith("2936 passed")]
    assert first["suite"] == "tests" and "commit" not in first
    git = status_page.Git.at(status_page.ROOT)
    if git is None:
        pytest.fail("this test reads the checkout's git history; run it in a git checkout")
    text = status_page.render(data, git=git)
    line = text.split("`tests` (complete), commit not recorded: 2936 passed", 1)[1]
    assert line.splitlines()[1].strip().startswith("Judged against ")
    assert "**an older suite**" in line.splitlines()[1]


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_only_judged_lines_may_differ(data) -> None:
    """The freshness check ignores exactly the lines that start ``Judged against``: any other
    line of the page changed is a difference, any judged line changed is not."""
    text = (DOCS / "status.md").read_text()
    lines = text.splitlines()
    judged = [i for i, ln in enumerate(lines) if ln.lstrip().startswith("Judged against ")]
    other = [i for i, ln in enumerate(lines) if i not in judged]
    assert judged and other
    i = data.draw(st.sampled_from(other))
    edit = data.draw(st.text(st.characters(blacklist_characters="\n"), min_size=1, max_size=5))
    changed = lines.copy()
    changed[i] = lines[i] + edit
    assert not status_page.same_page(text, "\n".join(changed) + "\n")
    j = data.draw(st.sampled_from(judged))
    changed = lines.copy()
    changed[j] = lines[j].split(":", 1)[0] + ": " + edit
    assert status_page.same_page(text, "\n".join(changed) + "\n")
