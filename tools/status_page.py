"""The status page, ``docs/status.md``, generated from run data so that it cannot drift.

Sources:

- **supported combinations**: computed from the code, by constructing every MMA atom with
  every dtype of :mod:`tylo.dtypes` (what the constructor refuses is not listed) and reading
  each instruction's oldest target from :data:`tylo.nvgpu.instructions.MIN_ARCH`;
- **hardware coverage**: ``docs/data/runs.json`` (``runs``: what ran, on which GPU and
  driver, when, and the result), filled from GPU runs;
- **performance**: the JSON files the benchmarks write (``benchmarks/gemm.py --json FILE``,
  ``benchmarks/softmax.py --json FILE``), stored under ``docs/data/`` and listed in
  ``runs.json`` (``benchmarks``).

As an mkdocs hook (``mkdocs.yml``: ``hooks``) it renders the page at build time; a committed
``docs/status.md`` that differs from the data is a build warning (an error under
``--strict``). ``python tools/status_page.py`` rewrites ``docs/status.md``; ``--check``
exits 1 when it is stale.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "docs" / "data" / "runs.json"
PAGE = ROOT / "docs" / "status.md"
SCHEMA = 1

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tylo.errors import TyloError

log = logging.getLogger("mkdocs.hooks.status_page")

RUN_FIELDS = ("date", "gpu", "driver", "what", "result")
BENCH_FIELDS = ("name", "file", "date", "gpu", "command")


class StatusDataError(TyloError):
    """``docs/data/runs.json`` or a benchmark file it names is malformed."""


def _fail(what: str, fix: str) -> StatusDataError:
    return StatusDataError(f"status page: {what}; {fix}")


def load(path: Path = DATA) -> dict[str, Any]:
    """Read and check the run data: ``{"schema": 1, "runs": [...], "benchmarks": [...]}``.

    Every run has the string fields ``date``, ``gpu``, ``driver``, ``what``, ``result``
    (``command`` optional); every benchmark entry ``name``, ``file`` (relative to the data
    file's folder), ``date``, ``gpu``, ``command``, and its file holds a JSON list of rows
    (objects), as the benchmarks write them.
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
    for entry in data["benchmarks"]:
        file = Path(path).parent / entry["file"]
        try:
            rows = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as err:
            raise _fail(
                f"benchmark {entry['name']!r}: cannot read {file}: {err}",
                f"write it with `{entry['command']}`",
            ) from None
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise _fail(
                f"benchmark {entry['name']!r}: {file} is not a list of rows",
                "store the benchmark's --json output unchanged",
            )
        entry["rows"] = rows
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


def render(data: dict[str, Any]) -> str:
    """The Markdown of the status page for ``data`` (as :func:`load` returns it)."""
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
    out += ["", "## Hardware coverage", ""]
    if data["runs"]:
        out += table(
            ["date", "GPU", "driver", "what ran", "result"],
            [[r[f] for f in RUN_FIELDS] for r in data["runs"]],
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
        rows = b["rows"]
        cols = _columns(rows)
        out += table(cols, [[r.get(c) for c in cols] for r in rows]) if rows else ["(no rows)"]
        out += [""]
    return "\n".join(out).rstrip("\n") + "\n"


def on_config(config: Any) -> Any:
    """mkdocs event: warn (an error under ``--strict``) when ``docs/status.md`` is stale."""
    if PAGE.read_text(encoding="utf-8") != render(load()):
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
    """Write ``docs/status.md`` from the data; ``--check``: exit 1 when it is stale."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    text = render(load())
    if args.check:
        stale = PAGE.read_text(encoding="utf-8") != text
        print("docs/status.md is stale" if stale else "docs/status.md is up to date")
        return 1 if stale else 0
    PAGE.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
