"""The status page, ``docs/status.md``, generated from run data so that it cannot drift.

Sources:

- **supported combinations**: computed from the code, by constructing every MMA atom with
  every dtype of :mod:`tylo.dtypes` (what the constructor refuses is not listed) and reading
  each instruction's oldest target from :data:`tylo.nvgpu.instructions.MIN_ARCH`;
- **hardware coverage**: ``docs/data/runs.json`` (``runs``: what ran, on which GPU and
  driver, when, the result, and optionally the ``commit`` it ran and, for a run of a whole
  suite, ``suite`` (``tests`` or ``tests/gpu``) and ``complete``), filled from GPU runs;
- **performance**: the JSON files the benchmarks write (``benchmarks/gemm.py --json FILE``
  and the others: ``{"metadata": {...}, "rows": [...]}``, the metadata from
  ``benchmarks/provenance.py``; a bare list of rows is the older format, without metadata),
  stored under ``docs/data/`` and listed in ``runs.json`` (``benchmarks``).

Each table is shown with its metadata and a verdict (:func:`table_verdict`): **stale** when
the metadata is missing, incomplete, from a modified tree, or its commit is older than the
latest change to the code the benchmark measures (``tylo/`` and the benchmark's script).
Each whole-suite run is judged the same way against its suite (:func:`suite_verdict`).

The verdicts that depend on the repository's history are on lines of their own starting
``Judged against``: the built site judges against the commit it is built from, and the
committed page against the commit it was generated at. Those lines are the only ones the
freshness check (:func:`same_page`) does not compare, so a commit elsewhere does not make
the committed page differ from its data; everything else must match.

As an mkdocs hook (``mkdocs.yml``: ``hooks``) it renders the page at build time; a committed
``docs/status.md`` that differs from the data is a build warning (an error under
``--strict``). ``python tools/status_page.py`` rewrites ``docs/status.md``; ``--check``
exits 1 when it is stale.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "docs" / "data" / "runs.json"
PAGE = ROOT / "docs" / "status.md"
SCHEMA = 1

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.provenance import Git, short, suite_verdict, table_verdict
from tylo.errors import TyloError

log = logging.getLogger("mkdocs.hooks.status_page")

RUN_FIELDS = ("date", "gpu", "driver", "what", "result")
BENCH_FIELDS = ("name", "file", "date", "gpu", "command")
#: optional fields of a run: (name, type, what it must be)
RUN_OPTIONAL = (
    ("commit", str, "the commit's hex SHA"),
    ("suite", str, "'tests' or 'tests/gpu', for a run of a whole suite"),
    ("complete", bool, "true when every test of the suite ran"),
)
SUITES = ("tests", "tests/gpu")
JUDGED = "Judged against "  # the prefix of every line that depends on the git history
_HEX = re.compile(r"[0-9a-f]{7,64}")


class StatusDataError(TyloError):
    """``docs/data/runs.json`` or a benchmark file it names is malformed."""


def _fail(what: str, fix: str) -> StatusDataError:
    return StatusDataError(f"status page: {what}; {fix}")


def _check_run(path: Path, i: int, run: dict[str, Any]) -> None:
    for name, kind, what in RUN_OPTIONAL:
        if name in run and not isinstance(run[name], kind):
            raise _fail(
                f"{path}: runs[{i}].{name} is {run[name]!r}, not a {kind.__name__}",
                f"give {name} as {what}, or leave it out",
            )
    if "commit" in run and not _HEX.fullmatch(run["commit"]):
        raise _fail(
            f"{path}: runs[{i}].commit {run['commit']!r} is not 7 to 64 lowercase hex digits",
            "record `git rev-parse HEAD` of the tree that ran",
        )
    if "suite" in run and run["suite"] not in SUITES:
        raise _fail(
            f"{path}: runs[{i}].suite {run['suite']!r} is not one of {list(SUITES)}",
            "name the whole suite the run covered, or leave suite out",
        )
    if ("suite" in run) != ("complete" in run):
        raise _fail(
            f"{path}: runs[{i}] has only one of suite and complete",
            "give a whole-suite run both (complete: whether every test ran), another neither",
        )


def _read_bench(path: Path, entry: dict[str, Any]) -> None:
    """Fill ``entry['rows']`` and ``entry['metadata']`` (None for the old, bare-list format)."""
    file = Path(path).parent / entry["file"]
    try:
        doc = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise _fail(
            f"benchmark {entry['name']!r}: cannot read {file}: {err}",
            f"write it with `{entry['command']}`",
        ) from None
    meta = None
    if isinstance(doc, dict):
        meta, rows = doc.get("metadata"), doc.get("rows")
    else:
        rows = doc
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise _fail(
            f"benchmark {entry['name']!r}: {file} is neither a list of rows nor "
            '{"metadata": {...}, "rows": [...]} with rows a list of objects',
            "store the benchmark's --json output unchanged",
        )
    if meta is not None and not isinstance(meta, dict):
        raise _fail(
            f"benchmark {entry['name']!r}: {file}'s metadata is a {type(meta).__name__}",
            "store the benchmark's --json output unchanged",
        )
    entry["rows"], entry["metadata"] = rows, meta


def load(path: Path = DATA) -> dict[str, Any]:
    """Read and check the run data: ``{"schema": 1, "runs": [...], "benchmarks": [...]}``.

    Every run has the string fields ``date``, ``gpu``, ``driver``, ``what``, ``result``
    (``command`` optional), and optionally ``commit`` (hex), ``suite`` (``tests`` or
    ``tests/gpu``) with ``complete`` (bool); every benchmark entry ``name``, ``file``
    (relative to the data file's folder), ``date``, ``gpu``, ``command``, and its file holds
    ``{"metadata": {...}, "rows": [...]}`` or, the older format, a bare list of rows.
    Each entry gains ``rows`` and ``metadata`` (None when the file has none).
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise _fail(f"cannot read {path}: {err}", "restore it from git") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise _fail(f"{path} is not schema {SCHEMA}", f'start it with {{"schema": {SCHEMA}}}')
    for key, fields in (("runs", RUN_FIELDS), ("benchmarks", BENCH_FIELDS)):
        entries = data.get(key)
        if not isinstance(entries, list):
            raise _fail(
                f"{path}: '{key}' must be a list, got {type(entries).__name__}",
                f'write "{key}": []',
            )
        for i, entry in enumerate(entries):
            missing = [
                f
                for f in fields
                if not isinstance(entry.get(f) if isinstance(entry, dict) else None, str)
            ]
            if missing:
                raise _fail(
                    f"{path}: {key}[{i}] lacks the string fields {missing}",
                    f"give every {key} entry {list(fields)}",
                )
    for i, run in enumerate(data["runs"]):
        _check_run(Path(path), i, run)
    for entry in data["benchmarks"]:
        _read_bench(Path(path), entry)
    return data


def supported_combinations() -> list[dict[str, str]]:
    """One row per (atom, input dtype) the atom's constructor accepts, with its targets.

    Defining property: a (atom, dtype) pair is listed exactly when constructing that atom
    with that dtype raises no :class:`~tylo.nvgpu.errors.PlanError`.
    """
    from tylo import dtypes as dt
    from tylo.nvgpu.errors import PlanError
    from tylo.nvgpu.instructions import ARCH_SPECIFIC, MIN_ARCH
    from tylo.nvgpu.warp.mma import MMAAtom
    from tylo.nvgpu.warpgroup.mma import WarpgroupMMAAtom

    atoms = (
        ("mma.sync m16n8k16 (warp)", "mma.m16n8k16", lambda d: MMAAtom((16, 8, 16), d)),
        (
            "wgmma m64nNk16, A in shared memory (warpgroup)",
            "wgmma",
            lambda d: WarpgroupMMAAtom((64, 64, 16), d, a="shared"),
        ),
        (
            "wgmma m64nNk16, A in registers (warpgroup)",
            "wgmma",
            lambda d: WarpgroupMMAAtom((64, 64, 16), d, a="registers"),
        ),
    )
    every_dtype = [v for n in dt.__all__ if isinstance(v := getattr(dt, n), dt.DType)]
    rows = []
    for name, instruction, make in atoms:
        (major, minor), _section = MIN_ARCH[instruction]
        if instruction in ARCH_SPECIFIC:
            targets = f"sm_{major}{minor}a only (arch-specific)"
        else:
            targets = f"sm_{major}{minor} and newer"
        for d in every_dtype:
            try:
                atom = make(d)
            except PlanError:
                continue
            rows.append(
                {
                    "atom": name,
                    "dtype": f"{atom.dtype}",
                    "acc": f"{atom.acc}",
                    "targets": targets,
                    # wgmma's N is any multiple of 8 in [8, 256]: show the template
                    "instruction": atom.instruction.replace(
                        f"m64n{getattr(atom, 'n', '')}k", "m64nNk"
                    ),
                }
            )
    return rows


def _cell(v: Any) -> str:
    if isinstance(v, float):
        text = f"{v:.4g}" if abs(v) < 1e5 else f"{v:.3e}"
    elif v is None:
        text = ""
    else:
        text = str(v)
    # one line, and "|" escaped; a backslash becomes an entity so that it cannot escape a border
    return " ".join(text.splitlines()).replace("\\", "&#92;").replace("|", "\\|")


def table(header: list[str], rows: list[list[Any]]) -> list[str]:
    """A Markdown table: the header, the rule, one line per row."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return lines


def _columns(rows: list[dict[str, Any]]) -> list[str]:
    cols: list[str] = []
    for r in rows:
        cols += [k for k, v in r.items() if k not in cols and not isinstance(v, (dict, list))]
    return cols


_META_SHOWN = (
    ("commit", "commit"),
    ("tylo", "tylo"),
    ("gpu", "GPU"),
    ("compute_capability", "CC"),
    ("driver", "driver"),
    ("cuda", "CUDA (driver API)"),
    ("libnvvm", "libNVVM"),
    ("cuda_bindings", "cuda-bindings"),
    ("torch", "torch"),
    ("torch_cuda", "torch's CUDA"),
    ("cudnn", "cuDNN"),
    ("triton", "Triton"),
    ("python", "Python"),
    ("date", "date"),
)


def _commit_cell(meta: dict[str, Any]) -> str:
    commit, dirty = meta.get("commit"), meta.get("dirty")
    state = "dirty" if dirty is True else "clean" if dirty is False else f"dirty: {dirty}"
    text = f"{short(commit)}" if isinstance(commit, str) and _HEX.fullmatch(commit) else commit
    return f"{text} ({state}; from {meta.get('commit_from', '?')})"


def metadata_lines(meta: dict[str, Any] | None) -> list[str]:
    """The metadata of one benchmark file as a one-row table and its command line."""
    if meta is None:
        return ["Metadata: none (the file predates recorded provenance)."]
    shown = [(key, label) for key, label in _META_SHOWN if key in meta]
    cells = [_commit_cell(meta) if key == "commit" else meta[key] for key, _ in shown]
    out = table([label for _, label in shown], [cells])
    command = meta.get("command")
    if isinstance(command, str):
        out += ["", f"Metadata command line: `{_cell(command).replace('`', chr(39))}`"]
    return out


def _verdict_line(state: str, why: str, judged: bool, git: Git | None) -> str:
    word = {"current": "current", "stale": "**stale**"}.get(state, "staleness unknown")
    text = f"{word}: {why}."
    if judged and git is not None:
        return f"{JUDGED}`{short(git.head)}` (HEAD where this page was rendered): {text}"
    if judged:
        return f"{JUDGED}no history (git unavailable): {text}"
    return f"Staleness: {text}"


_SUITE_WORDS = {
    "current": "the current suite",
    "older": "**an older suite**",
    "unknown": "suite version unknown",
}


def suite_lines(runs: list[dict[str, Any]], git: Git | None) -> list[str]:
    """The whole-suite section: the latest complete GPU-tier run, whether a complete run of
    the current suite is recorded (or the plain statement that none is), then every run of
    a whole suite (``suite`` set), each judged by :func:`suite_verdict`."""
    suite_runs = [r for r in runs if "suite" in r]
    if not suite_runs:
        return ["No run of a whole suite is recorded (`runs` entries with `suite`)."]
    verdicts = [(r, *suite_verdict(r, git)) for r in suite_runs]
    tier = [(r, s, w) for r, s, w in verdicts if r["suite"] == "tests/gpu" and r["complete"]]
    if not tier:
        out = ["No complete run of the whole GPU tier (`tests/gpu`) is recorded."]
    else:
        r = tier[-1][0]
        commit = f"commit `{short(r['commit'])}`" if "commit" in r else "no commit recorded"
        out = [
            (
                f"Latest complete run of the whole GPU tier (`tests/gpu`): {r['date']}, "
                f"{r['gpu']}, {commit}: {_cell(r['result'])}"
            )
        ]
    current = [(r, w) for r, s, w in tier if s == "current"]
    head = _judged_head(git)
    if current:
        r, why = current[-1]
        out += [
            "",
            (
                f"{JUDGED}{head}: the latest complete GPU-tier run of the current suite is the one "
                f"of {r['date']} at `{short(r['commit'])}` ({why})."
            ),
        ]
    else:
        out += ["", f"{JUDGED}{head}: no complete run of the current GPU tier is recorded yet."]
    out += [
        "",
        (
            "Every run of a whole suite. A run's count is of the suite as it was then: a run "
            "with a commit is of the current suite when no later commit (nor an uncommitted "
            "change) touches its suite's folder; a run without one is of an older suite when "
            "that folder's latest change was committed on a later day than the run."
        ),
        "",
    ]
    for run, state, why in verdicts:
        commit = f"commit `{short(run['commit'])}`" if "commit" in run else "commit not recorded"
        whole = "complete" if run["complete"] else "not complete"
        out += [
            (
                f"- {run['date']}, {run['gpu']}, `{run['suite']}` ({whole}), {commit}: "
                f"{_cell(run['result'])}"
            ),
            f"  {JUDGED}{head}: {_SUITE_WORDS[state]} ({why}).",
        ]
    return out


def _judged_head(git: Git | None) -> str:
    return "no history (git unavailable)" if git is None else f"`{short(git.head)}`"


RULES = (
    "Each performance table shows the metadata its benchmark recorded with `--json` "
    "(`benchmarks/provenance.py`: commit and whether the work tree was modified, tylo, GPU, "
    "driver, CUDA driver API, libNVVM, and torch, cuDNN and Triton where the benchmark uses "
    "them). A table is **stale** when its file has no metadata or lacks a field of it, when "
    "it was measured on a modified work tree (or one whose state is unknown), or when its "
    "commit is older than the latest change to what it measures: a commit after it in "
    "HEAD's history, or an uncommitted change, touches `tylo/` or the benchmark's script "
    "(`git rev-list -1 COMMIT..HEAD -- tylo/ SCRIPT`). Where git cannot read the history "
    "the page says so (staleness unknown). A tree copied without `.git` records its commit "
    "from `--commit SHA --dirty no` (or `TYLO_COMMIT`, `TYLO_DIRTY`). Lines starting "
    f"\u201c{JUDGED.strip()}\u201d depend on the history: the built site judges against the "
    "commit it is built from."
)


_AUTO = object()


def render(data: dict[str, Any], git: Any = _AUTO) -> str:
    """The Markdown of the status page for ``data`` (as :func:`load` returns it), judged
    against ``git`` (a :class:`Git`, or None for no history; default: :meth:`Git.at` of
    the repository)."""
    history: Git | None = Git.at(ROOT) if git is _AUTO else git
    out = [
        "# Status",
        "",
        (
            "<!-- generated by tools/status_page.py from docs/data/runs.json and the benchmark "
            "files it names; do not edit by hand -->"
        ),
        "",
        (
            "What tylo supports, what has run on which GPU, and what it measured. This page is "
            "generated when the site is built (`tools/status_page.py`): the supported "
            "combinations from the code itself, the rest from `docs/data/runs.json` and the JSON "
            "the benchmarks write."
        ),
        "",
        RULES,
        "",
        "## Supported combinations",
        "",
        (
            "Matrix-multiply atoms by input dtype (accumulator f32) and target; any other dtype is "
            "refused by the atom's constructor. Kernels compile for any target from sm_75 "
            "(`tylo.target`); an instruction older targets lack is refused when the kernel is "
            "traced."
        ),
        "",
    ]
    combos = supported_combinations()
    out += table(
        ["atom", "dtype", "accumulator", "targets", "PTX instruction"],
        [[c["atom"], c["dtype"], c["acc"], c["targets"], f"`{c['instruction']}`"] for c in combos],
    )
    out += ["", "## Whole test suite", ""]
    out += suite_lines(data["runs"], history)
    out += ["", "## Hardware coverage", ""]
    if data["runs"]:
        out += table(
            ["date", "GPU", "driver", "commit", "what ran", "result"],
            [
                [r["date"], r["gpu"], r["driver"], short(r.get("commit", ""))]
                + [r["what"], r["result"]]
                for r in data["runs"]
            ],
        )
    else:
        out += ["No GPU run is recorded yet (`docs/data/runs.json`, `runs`)."]
    out += ["", "## Performance", ""]
    if not data["benchmarks"]:
        out += [
            (
                "No benchmark output is recorded yet. On a GPU, `benchmarks/gemm.py --json "
                "docs/data/gemm.json` and `benchmarks/softmax.py --json docs/data/softmax.json` "
                "write it; list each file under `benchmarks` in `docs/data/runs.json`."
            ),
        ]
    for b in data["benchmarks"]:
        out += [f"### {b['name']}", "", f"{b['gpu']}, {b['date']}: `{b['command']}`", ""]
        out += [_verdict_line(*table_verdict(b["metadata"], history), history), ""]
        out += [*metadata_lines(b["metadata"]), ""]
        rows = b["rows"]
        cols = _columns(rows)
        out += table(cols, [[r.get(c) for c in cols] for r in rows]) if rows else ["(no rows)"]
        out += [""]
    return "\n".join(out).rstrip("\n") + "\n"


_JUDGED_LINE = re.compile(rf"^([ \t]*){re.escape(JUDGED)}.*$", re.MULTILINE)


def comparable(text: str) -> str:
    """``text`` with every line that starts ``Judged against`` (the verdicts that depend on
    the git history) cut to that prefix: what the freshness check compares."""
    return _JUDGED_LINE.sub(lambda m: m.group(1) + JUDGED.strip(), text)


def same_page(committed: str, rendered: str) -> bool:
    """Whether a committed page says what the data renders to, apart from the verdicts that
    depend on the git history (:func:`comparable`)."""
    return comparable(committed) == comparable(rendered)


def on_config(config: Any) -> Any:
    """mkdocs event: warn (an error under ``--strict``) when ``docs/status.md`` is stale."""
    if not same_page(PAGE.read_text(encoding="utf-8"), render(load())):
        log.warning(
            "docs/status.md differs from docs/data/runs.json: run "
            "`python tools/status_page.py` and commit the page"
        )
    return config


def on_page_read_source(page: Any, config: Any) -> str | None:
    """mkdocs event: the status page's source is rendered from the data, not read."""
    if page.file.src_uri == "status.md":
        return render(load())
    return None


def on_serve(server: Any, config: Any, builder: Any) -> Any:
    """mkdocs event: rebuild when the run data changes under ``mkdocs serve``."""
    server.watch(str(DATA.parent))
    return server


def main(argv: list[str] | None = None) -> int:
    """Write ``docs/status.md`` from the data; ``--check``: exit 1 when it is stale (apart
    from the lines judged against the git history: :func:`same_page`)."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    text = render(load())
    if args.check:
        stale = not same_page(PAGE.read_text(encoding="utf-8"), text)
        print("docs/status.md is stale" if stale else "docs/status.md is up to date")
        return 1 if stale else 0
    PAGE.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
