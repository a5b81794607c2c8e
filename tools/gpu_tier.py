"""Run the GPU tier (``tests/gpu``) whole, as shards, and merge what the shards say.

The tier is more than one 10-minute call of the device machine, so it runs as N shards
(``pytest --shard I/N``, tests/conftest.py), each a pytest process of its own, one after
another. Every shard writes its log and its JUnit XML into the output folder, and the
folder's ``summary.json`` is rewritten after each shard, so a run cut short keeps what
finished. Shards run in different calls are merged afterwards::

    TYLO_REQUIRE_GPU_RUNTIME=1 python tools/gpu_tier.py --of 4 --shards 1..2 --out $OUT/a
    TYLO_REQUIRE_GPU_RUNTIME=1 python tools/gpu_tier.py --of 4 --shards 3..4 --out $OUT/b
    python tools/gpu_tier.py --merge a b --out merged

A shard past its ``--timeout`` is stopped with SIGABRT first: each of its Python processes
(the xdist workers too) writes every thread's traceback into the shard's log
(``PYTHONFAULTHANDLER``), which shows where it hung; then SIGKILL. Its record keeps how
many results its progress lines had printed (``results_printed``): a shard whose pytest
hangs after its last test (the H100 run of 2026-12-08) says so.

Both modes print one line ``N passed, N failed, N skipped`` (failed counts errors too) and
write ``summary.json``: the commit and whether the work tree was dirty, Python, the GPU,
the settings, each shard's counts, skip reasons and failures, and whether every shard of
the N ran every test it collected (``complete``). Exit status: 0 when complete with nothing failed,
1 otherwise, 2 for a usage error or summaries that do not merge.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import re
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.provenance import git_commit  # the one reader of the commit and dirty flag

SUMMARY = "summary.json"
ENV_KEYS = ("TYLO_REQUIRE_GPU_RUNTIME", "TYLO_REQUIRE_C_LAUNCH")
DEFAULT_WORKERS = 16  # the device machine's cores; the tier's history ran with -n 16
TRUE = ("1", "true", "yes", "on")  # as tylo.testing.gpu_runtime_required reads it
MAX_LISTED = 50  # failures listed per shard in the summary


class TierError(Exception):
    """A bad argument or summaries that cannot be merged; the message names the fix."""


def parse_shards(text: str, n: int) -> list[int]:
    """``"2..3"`` -> ``[2, 3]``, ``"4"`` -> ``[4]``: shards of ``n``, 1 <= I <= J <= n."""
    m = re.fullmatch(r"\s*([0-9]+)\s*(?:\.\.\s*([0-9]+)\s*)?", text)
    if m is None:
        raise TierError(f"--shards {text!r}: expected I..J or I, such as 1..2")
    i = int(m.group(1))
    j = int(m.group(2)) if m.group(2) is not None else i
    if not 1 <= i <= j <= n:
        raise TierError(f"--shards {text!r}: need 1 <= I <= J <= {n} (--of {n})")
    return list(range(i, j + 1))


def git_state(root: Path = ROOT) -> tuple[str | None, bool | None]:
    """(HEAD's commit, whether tracked or untracked-unignored files differ), or Nones where
    git or the checkout's ``.git`` is absent (:func:`benchmarks.provenance.git_commit`)."""
    found = git_commit(root)
    return (None, None) if found is None else found


def gpu_name() -> str | None:
    """``nvidia-smi``'s name and driver of GPU 0, or None where it is absent."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader", "-i", "0"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return out or None


def read_junit(path: Path) -> dict[str, Any]:
    """Counts of a pytest JUnit XML file, one verdict per test case: ``failed`` (a
    ``failure`` element), ``errors`` (an ``error`` element and no failure: setup, teardown
    or collection), ``skipped`` (``skipped``, xfail included), ``passed`` (none of them);
    with the skip reasons counted and the failed and erroring tests named."""
    counts = Counter({"passed": 0, "failed": 0, "errors": 0, "skipped": 0})
    reasons: Counter[str] = Counter()
    failures: list[str] = []
    for case in ET.parse(path).getroot().iter("testcase"):
        name = "::".join(x for x in (case.get("classname", ""), case.get("name", "")) if x)
        tags = {child.tag: child for child in case}
        if "failure" in tags or "error" in tags:
            kind = "failed" if "failure" in tags else "errors"
            message = (tags.get("failure", tags.get("error")).get("message") or "").strip()
            failures.append(f"{name}: {message.splitlines()[0] if message else kind}"[:300])
        elif "skipped" in tags:
            kind = "skipped"
            reasons[(tags["skipped"].get("message") or "").strip()] += 1
        else:
            kind = "passed"
        counts[kind] += 1
    return {
        **counts,
        "tests": sum(counts.values()),
        "skip_reasons": dict(reasons),
        "failures": failures[:MAX_LISTED],
        "failures_listed": min(len(failures), MAX_LISTED),
    }


def summary_line(counts: dict[str, int]) -> str:
    """``"N passed, N failed, N skipped"``; errors count as failed."""
    failed = counts["failed"] + counts["errors"]
    return f"{counts['passed']} passed, {failed} failed, {counts['skipped']} skipped"


def collected(i: int, n: int, args: argparse.Namespace) -> int | None:
    """How many tests shard ``i`` of ``n`` holds (``pytest --collect-only``), or None when
    the collection fails (it is then in the shard's log as an error)."""
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "--collect-only",
        "-q",
        f"--shard={i}/{n}",
        *args.tests,
        *args.pytest_args,
    ]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    if proc.returncode not in (0, 5):
        return None
    return sum(1 for line in proc.stdout.splitlines() if "::" in line)


def stop_group(proc: subprocess.Popen[Any], grace: float = 5.0) -> None:
    """End a shard at its timeout: SIGABRT to its process group first (each Python process
    dumps its threads' tracebacks, :mod:`faulthandler`), then SIGKILL after ``grace``
    seconds to whatever is left."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGABRT)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


_PROGRESS = re.compile(r"^([.sFExX]+)\s*(\[\s*\d+%\])?\s*$")


def results_printed(log: Path) -> int:
    """How many test results pytest's ``-q`` progress lines in ``log`` show (``.``, ``s``,
    ``F``, ``E``, ``x``, ``X``): what a shard stopped at its timeout had finished."""
    count = 0
    for line in log.read_text(errors="replace").splitlines():
        m = _PROGRESS.match(line)
        if m is not None:
            count += len(m.group(1))
    return count


def run_shard(i: int, n: int, out: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Run shard ``i`` of ``n`` as its own pytest process; its record for the summary."""
    stem = f"shard-{i}-of-{n}"
    log, junit = out / f"{stem}.log", out / f"{stem}.xml"
    junit.unlink(missing_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-q",
        "-n",
        str(args.workers),
        f"--shard={i}/{n}",
        f"--junitxml={junit}",
        *args.tests,
        *args.pytest_args,
    ]
    expected = collected(i, n, args)
    start = time.monotonic()
    timed_out = False
    with log.open("w") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        f.flush()
        # PYTHONFAULTHANDLER: on SIGABRT at the timeout every Python process of the shard
        # (xdist workers too) writes each thread's traceback into the log: where it hung
        env = {**os.environ, "PYTHONFAULTHANDLER": "1"}
        proc = subprocess.Popen(
            cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT, start_new_session=True, env=env
        )
        try:
            rc: int | None = proc.wait(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            stop_group(proc)
            rc = None
    record: dict[str, Any] = {
        "shard": f"{i}/{n}",
        "index": i,
        "of": n,
        "exit_status": rc,
        "timed_out": timed_out,
        "seconds": round(time.monotonic() - start, 1),
        "log": log.name,
        "junit": junit.name,
        "results_printed": results_printed(log),
    }
    if junit.exists():
        record.update(read_junit(junit))
    else:
        record.update(
            passed=0,
            failed=0,
            errors=0,
            skipped=0,
            tests=0,
            skip_reasons={},
            failures=[],
            failures_listed=0,
        )
    # pytest ran every test it collected when it exits 0 (all passed), 1 (some failed) or
    # 5 (its shard was empty) and the JUnit file holds each collected test (-x or --maxfail
    # stop early with 1); 2 (interrupted), 3 (internal error), 4 (usage) or a kill: not
    record["collected"] = expected
    record["complete"] = (
        rc in (0, 1, 5) and junit.exists() and expected is not None and record["tests"] >= expected
    )
    return record


def totals(shards: list[dict[str, Any]]) -> dict[str, Any]:
    """Summed counts and skip reasons of the shards."""
    out = {k: sum(s[k] for s in shards) for k in ("passed", "failed", "errors", "skipped")}
    reasons: Counter[str] = Counter()
    for s in shards:
        reasons.update(s["skip_reasons"])
    return {**out, "tests": sum(out.values()), "skip_reasons": dict(reasons)}


def summarize(meta: dict[str, Any], shards: list[dict[str, Any]]) -> dict[str, Any]:
    """The summary of ``shards`` (all of one ``--of N``): totals, line, what is missing."""
    n = meta["of"]
    ran = sorted(s["index"] for s in shards)
    if len(set(ran)) != len(ran):
        dup = sorted(k for k, c in Counter(ran).items() if c > 1)
        raise TierError(f"shard(s) {dup} of {n} appear twice; merge each shard once")
    missing = [k for k in range(1, n + 1) if k not in ran]
    unfinished = [s["shard"] for s in shards if not s["complete"]]
    total = totals(shards)
    return {
        **meta,
        "shards": sorted(shards, key=lambda s: s["index"]),
        "totals": total,
        "line": summary_line(total),
        "missing": missing,
        "unfinished": unfinished,
        "complete": not missing and not unfinished,
    }


def write_summary(out: Path, summary: dict[str, Any]) -> Path:
    path = out / SUMMARY
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)
    return path


def ranges(numbers: list[int]) -> str:
    """``[1, 2, 3, 5, 7, 8]`` -> ``"1..3, 5, 7..8"``."""
    runs: list[list[int]] = []
    for k in sorted(numbers):
        if runs and k == runs[-1][1] + 1:
            runs[-1][1] = k
        else:
            runs.append([k, k])
    return ", ".join(str(a) if a == b else f"{a}..{b}" for a, b in runs)


def report(summary: dict[str, Any]) -> int:
    """Print the summary's head and its line; the exit status it calls for."""
    dirty = {True: "dirty", False: "clean", None: "unknown state"}[summary["dirty"]]
    state = "complete" if summary["complete"] else "INCOMPLETE"
    print(
        f"gpu_tier: commit {summary['commit'] or 'unknown'} ({dirty}); "
        f"{len(summary['shards'])} of {summary['of']} shards; {state}"
    )
    if summary["missing"]:
        print(f"gpu_tier: shards not run: {ranges(summary['missing'])} of {summary['of']}")
    if summary["unfinished"]:
        print(f"gpu_tier: shards that did not run to their end: {summary['unfinished']}")
    print(summary["line"])
    failed = summary["totals"]["failed"] + summary["totals"]["errors"]
    return 0 if summary["complete"] and failed == 0 else 1


def run_mode(args: argparse.Namespace) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    commit, dirty = git_state()
    source = "git"
    if commit is None:
        commit, dirty, source = args.commit, args.dirty, "--commit" if args.commit else None
    meta = {
        "schema": 1,
        "commit": commit,
        "dirty": dirty,
        "commit_source": source,
        "of": args.of,
        "tests": args.tests,
        "pytest_args": args.pytest_args,
        "workers": args.workers,
        "python": platform.python_version(),
        "gpu": gpu_name(),
        "env": {k: os.environ.get(k) for k in ENV_KEYS},
        "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    if os.environ.get("TYLO_REQUIRE_GPU_RUNTIME", "").strip().lower() not in TRUE:
        print("gpu_tier: TYLO_REQUIRE_GPU_RUNTIME is not 1: runtime halves may skip")
    shards: list[dict[str, Any]] = []
    for i in args.shards:
        record = run_shard(i, args.of, out, args)
        shards.append(record)
        write_summary(out, summarize(meta, shards))
        end = (
            f"timed out after {record['results_printed']} results were printed"
            if record["timed_out"]
            else f"exit {record['exit_status']}"
        )
        print(
            f"shard {record['shard']}: {summary_line(record)} in {record['seconds']} s ({end})",
            flush=True,
        )
        for failure in record["failures"]:
            print(f"  FAILED {failure}")
    summary = summarize(meta, shards)
    write_summary(out, summary)
    return report(summary)


def merge(dirs: list[Path]) -> dict[str, Any]:
    """One summary of the ``summary.json`` files in ``dirs`` (shards of one N and commit)."""
    parts = []
    for d in dirs:
        path = d / SUMMARY
        if not path.is_file():
            raise TierError(f"--merge: {path} does not exist (run gpu_tier.py --out {d})")
        parts.append(json.loads(path.read_text()))
    for key in ("of", "commit", "dirty", "tests"):
        values = {json.dumps(p.get(key)) for p in parts}
        if len(values) > 1:
            raise TierError(f"--merge: the summaries differ in {key!r}: {sorted(values)}")
    meta = {
        k: v
        for k, v in parts[0].items()
        if k not in ("shards", "totals", "line", "missing", "unfinished", "complete")
    }
    meta["merged_from"] = [str(d) for d in dirs]
    return summarize(meta, [s for p in parts for s in p["shards"]])


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tools/gpu_tier.py",
        description="Run tests/gpu as shards, one pytest process each, and merge them.",
        epilog="Arguments after -- go to every shard's pytest.",
    )
    p.add_argument("--out", help="folder for the logs, JUnit files and summary.json")
    p.add_argument("--of", type=int, default=4, metavar="N", help="number of shards (4)")
    p.add_argument(
        "--shards",
        default=None,
        metavar="I..J",
        help="which shards to run (default 1..N); I alone runs one",
    )
    p.add_argument(
        "--workers",
        "-n",
        type=int,
        default=DEFAULT_WORKERS,
        metavar="W",
        help=f"pytest-xdist workers per shard ({DEFAULT_WORKERS}; 0: none)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="S",
        help="kill a shard after S seconds (it is then marked unfinished)",
    )
    p.add_argument(
        "--commit", default=None, help="the commit to record where git cannot tell (no .git here)"
    )
    p.add_argument(
        "--dirty",
        type=int,
        choices=(0, 1),
        default=None,
        help="with --commit: whether the tree differed from it",
    )
    p.add_argument(
        "--merge",
        nargs="+",
        metavar="DIR",
        default=None,
        help="merge the summary.json of these folders instead of running",
    )
    p.add_argument("tests", nargs="*", default=["tests/gpu"], help="test paths (tests/gpu)")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        k = argv.index("--")
        argv, extra = argv[:k], argv[k + 1 :]
    args = parser().parse_args(argv)
    args.pytest_args = extra
    try:
        if args.merge:
            summary = merge([Path(d) for d in args.merge])
            if args.out:
                Path(args.out).mkdir(parents=True, exist_ok=True)
                write_summary(Path(args.out), summary)
            return report(summary)
        if not args.out:
            raise TierError("--out DIR is required to run shards")
        if args.of < 1:
            raise TierError(f"--of {args.of}: the number of shards must be at least 1")
        if args.workers < 0:
            raise TierError(f"--workers {args.workers}: must be 0 or more")
        args.shards = parse_shards(args.shards or f"1..{args.of}", args.of)
        return run_mode(args)
    except TierError as err:
        print(f"gpu_tier.py: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
