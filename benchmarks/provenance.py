"""Provenance of a benchmark run: what was measured, with what, where and when.

Every benchmark that writes JSON writes it through :func:`write_json`, as::

    {"metadata": {...}, "rows": [...]}

where ``metadata`` is :func:`run_metadata`'s dictionary: the commit and whether the work tree
differed from it (``dirty``), the tylo version, the GPU, the driver, the CUDA driver API and
libNVVM versions, the versions of torch, Triton and cuDNN where the benchmark uses them, the
date, Python, and the command line. ``tools/status_page.py`` shows it beside each table and
marks a table stale from it.

Nothing here fails a benchmark: a probe that cannot answer records ``"unknown"`` (it could
not be read) or ``"none"`` (there is none: no GPU, no driver), with the reason where there
is one.

The commit comes from git when the tree is a git checkout. A tree copied without ``.git``
(the GPU machine may get one) takes it from ``--commit SHA`` (:func:`add_arguments`) or the
environment variable ``TYLO_COMMIT``, and whether that tree was modified from
``--dirty yes|no`` or ``TYLO_DIRTY`` (``1``/``0``); without them both read ``"unknown"``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = 1
USES = ("torch", "triton", "cudnn")
UNKNOWN = "unknown"
NONE = "none"
#: the keys every metadata dictionary has (``tools/status_page.py`` checks them)
REQUIRED = (
    "provenance",
    "script",
    "command",
    "date",
    "commit",
    "commit_from",
    "dirty",
    "tylo",
    "python",
    "gpu",
    "driver",
    "cuda",
    "libnvvm",
)
_SHA = re.compile(r"[0-9a-f]{7,64}")
_TRUE = ("1", "yes", "true", "on")
_FALSE = ("0", "no", "false", "off")
_ENV_KEPT = ("CUDA_VISIBLE_DEVICES", "PYTHONPATH")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--commit SHA`` and ``--dirty yes|no`` to a benchmark's command line: what the
    metadata records when the tree has no git (ignored where git answers)."""
    parser.add_argument(
        "--commit",
        default=None,
        metavar="SHA",
        help="the commit this tree is, recorded when it has no .git (default: $TYLO_COMMIT)",
    )
    parser.add_argument(
        "--dirty",
        choices=("yes", "no"),
        default=None,
        help="with --commit: whether the tree differs from it (default: $TYLO_DIRTY)",
    )


def _run_git(*args: str, root: Path) -> str | None:
    try:
        proc = subprocess.run(
            ["git", "-C", str(root), *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 else None


def git_commit(root: Path = ROOT) -> tuple[str, bool] | None:
    """(HEAD's commit, whether tracked files differ or untracked unignored files exist) of the
    checkout at ``root``, or None where git or the checkout's ``.git`` is absent."""
    if not (root / ".git").exists():
        return None
    head = _run_git("rev-parse", "HEAD", root=root)
    status = _run_git("status", "--porcelain", root=root)
    if head is None or status is None or not _SHA.fullmatch(head.strip()):
        return None
    return head.strip(), bool(status.strip())


def _flag(value: str | None) -> bool | str:
    text = (value or "").strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    return UNKNOWN


def commit_state(
    commit: str | None = None,
    dirty: str | None = None,
    *,
    root: Path = ROOT,
    environ: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """``commit``, ``commit_from`` (``git``, ``--commit``, ``TYLO_COMMIT`` or ``none``) and
    ``dirty`` (True, False or ``"unknown"``).

    Git answers when ``root`` is a checkout; otherwise ``commit`` (from ``--commit``) or
    ``$TYLO_COMMIT``, with ``dirty`` (``--dirty``) or ``$TYLO_DIRTY``. A given commit that is
    not 7 to 64 hex digits is recorded as ``"unknown"`` with what was given.
    """
    env = os.environ if environ is None else environ
    from_git = git_commit(root)
    if from_git is not None:
        state: dict[str, Any] = {"commit": from_git[0], "commit_from": "git", "dirty": from_git[1]}
        given = commit or env.get("TYLO_COMMIT")
        if given and not from_git[0].startswith(given.strip().lower()):
            state["commit_given"] = given  # the tree's git disagrees: git is recorded
        return state
    for source, value, flag in (
        ("--commit", commit, dirty),
        ("TYLO_COMMIT", env.get("TYLO_COMMIT"), env.get("TYLO_DIRTY")),
    ):
        if value:
            sha = value.strip().lower()
            if not _SHA.fullmatch(sha):
                return {
                    "commit": UNKNOWN,
                    "commit_from": source,
                    "commit_given": value,
                    "dirty": UNKNOWN,
                }
            flag = flag if flag is not None else env.get("TYLO_DIRTY")
            return {"commit": sha, "commit_from": source, "dirty": _flag(flag)}
    return {"commit": UNKNOWN, "commit_from": NONE, "dirty": UNKNOWN}


def _probe(fn: Callable[[], Any]) -> Any:
    """``fn()``, or ``"unknown (Error: message)"`` when it raises: a probe never fails a run."""
    try:
        return fn()
    except Exception as err:  # noqa: BLE001 - whatever breaks is recorded, not raised
        return f"{UNKNOWN} ({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''})"


def _gpu() -> dict[str, Any]:
    from tylo.backend import driver
    from tylo.backend.device import device_properties

    if driver.device_count() == 0:
        return {"gpu": NONE, "compute_capability": NONE}
    props = device_properties(0)
    major, minor = props.compute_capability
    return {"gpu": props.name, "compute_capability": f"{major}.{minor}"}


def _cuda() -> str:
    from tylo.backend import driver

    version = driver.driver_version()
    if version is None:
        return NONE
    return f"{version // 1000}.{version % 1000 // 10}"


def driver_release(proc_file: Path = Path("/proc/driver/nvidia/version")) -> str:
    """The NVIDIA kernel driver's version (``580.159.04``): from ``/proc/driver/nvidia``,
    else ``nvidia-smi``; ``"none"`` when neither is there."""
    try:
        text = proc_file.read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    m = re.search(r"Kernel Module(?: for \S+)?\s+([0-9][0-9.]+)", text)
    if m:
        return m.group(1)
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader", "-i", "0"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return NONE
    return out.splitlines()[0].strip() if out else NONE


def _libnvvm() -> str:
    from tylo.backend.nvvm import nvvm_version

    v = nvvm_version()
    return f"{v.release} (PTX ISA {v.ptx_isa})"


def _package(name: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def _torch() -> dict[str, Any]:
    try:
        import torch
    except ImportError:
        return {"torch": "not installed"}
    return {"torch": str(torch.__version__), "torch_cuda": str(torch.version.cuda or NONE)}


def cudnn_text(version: int | None) -> str:
    """cuDNN's version number as text: ``91002`` -> ``9.10.2`` (cuDNN 9 counts
    major * 10000 + minor * 100 + patch), ``8907`` -> ``8.9.7`` (cuDNN 8: major * 1000)."""
    if version is None:
        return NONE
    if version >= 90000:
        return f"{version // 10000}.{version // 100 % 100}.{version % 100}"
    return f"{version // 1000}.{version // 100 % 10}.{version % 100}"


def _cudnn() -> str:
    try:
        import torch
    except ImportError:
        return "not installed (needs torch)"
    return cudnn_text(torch.backends.cudnn.version())


def _triton() -> str:
    try:
        import triton
    except ImportError:
        return "not installed"
    return str(triton.__version__)


def run_metadata(
    uses: Iterable[str] = USES,
    *,
    script: str | None = None,
    argv: list[str] | None = None,
    commit: str | None = None,
    dirty: str | None = None,
    root: Path = ROOT,
) -> dict[str, Any]:
    """The metadata of a benchmark run (module docstring), for ``{"metadata", "rows"}``.

    ``uses`` names the libraries the benchmark measures against, out of ``torch``,
    ``triton`` and ``cudnn``; only those are recorded. ``script`` is the benchmark's path
    from the repository root and ``argv`` its arguments (default: ``sys.argv``).
    ``commit`` and ``dirty`` are ``--commit`` and ``--dirty`` (:func:`commit_state`).
    Never raises for a missing GPU, driver, git or library: the field says so.
    """
    uses = tuple(uses)
    unknown = [u for u in uses if u not in USES]
    if unknown:
        from tylo.errors import TyloError

        raise TyloError(f"run_metadata: uses={unknown!r} are not among {USES}; name only those")
    if script is None:
        script = sys.argv[0] if sys.argv and sys.argv[0] else UNKNOWN
        try:
            script = Path(script).resolve().relative_to(root).as_posix()
        except ValueError:
            pass
    args = list(sys.argv[1:] if argv is None else argv)
    meta: dict[str, Any] = {
        "provenance": SCHEMA,
        "script": script,
        "command": shlex.join(["python", script, *args]),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        **commit_state(commit, dirty, root=root),
        "tylo": _probe(lambda: __import__("tylo").__version__),
        "python": platform.python_version(),
        "gpu": UNKNOWN,
        "compute_capability": UNKNOWN,
    }
    gpu = _probe(_gpu)
    if isinstance(gpu, dict):
        meta.update(gpu)
    else:
        meta["gpu"] = gpu
    meta["driver"] = _probe(driver_release)
    meta["cuda"] = _probe(_cuda)
    meta["libnvvm"] = _probe(_libnvvm)
    meta["cuda_bindings"] = _probe(lambda: _package("cuda-bindings"))
    if "torch" in uses:
        found = _probe(_torch)
        meta.update(found if isinstance(found, dict) else {"torch": found})
    if "cudnn" in uses:
        meta["cudnn"] = _probe(_cudnn)
    if "triton" in uses:
        meta["triton"] = _probe(_triton)
    meta["env"] = {
        k: v
        for k, v in sorted(os.environ.items())
        if (k.startswith("TYLO_") and k not in ("TYLO_COMMIT", "TYLO_DIRTY")) or k in _ENV_KEPT
    }
    return meta


def write_json(
    path: str | os.PathLike[str],
    rows: list[Any],
    metadata: dict[str, Any],
    **extra: Any,
) -> None:
    """Write ``{"metadata": metadata, "rows": rows, **extra}`` to ``path`` (indented JSON;
    values JSON cannot hold are written as text)."""
    doc = {"metadata": metadata, "rows": rows, **extra}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, default=str)
        f.write("\n")


# ---------------------------------------------------------------- is a record current?


class HistoryError(Exception):
    """A git command that should have answered did not (the verdict becomes unknown)."""


class Git:
    """The history of the checkout at ``root``, through the ``git`` command. :meth:`at`
    returns None where git or the checkout is absent: then nothing is judged."""

    def __init__(self, root: Path, head: str) -> None:
        self.root = root
        self.head = head

    def _run(self, *args: str) -> str | None:
        out = _run_git(*args, root=self.root)
        return None if out is None else out.strip()

    def _answer(self, *args: str) -> str:
        out = self._run(*args)
        if out is None:
            raise HistoryError(f"`git {' '.join(args)}` failed in {self.root}")
        return out

    @classmethod
    def at(cls, root: Path = ROOT) -> Git | None:
        """The checkout at ``root``, or None when git cannot read it."""
        head = cls(root, "")._run("rev-parse", "--verify", "-q", "HEAD^{commit}")
        return cls(root, head) if head and _SHA.fullmatch(head) else None

    def has(self, commit: str) -> bool:
        """Whether ``commit`` names a commit of this repository."""
        return self._run("cat-file", "-e", f"{commit}^{{commit}}") is not None

    def shallow(self) -> bool:
        """Whether this is a shallow clone (older commits may be missing)."""
        return self._run("rev-parse", "--is-shallow-repository") == "true"

    def changed_since(self, commit: str, paths: list[str]) -> str | None:
        """The newest commit of HEAD's history that ``commit``'s lacks and that changes one
        of ``paths``, or None when there is none."""
        return self._answer("rev-list", "-1", f"{commit}..HEAD", "--", *paths) or None

    def uncommitted(self, paths: list[str]) -> bool:
        """Whether the work tree differs from HEAD under ``paths`` (untracked files that
        git does not ignore included)."""
        return bool(self._answer("status", "--porcelain", "--", *paths))

    def last_change(self, paths: list[str]) -> tuple[str, str] | None:
        """(commit, committer date ``YYYY-MM-DD``) of the newest change to ``paths``."""
        out = self._answer("log", "-1", "--format=%H %cs", "--", *paths)
        if not out:
            return None
        sha, date = out.split()
        return sha, date


def short(sha: str) -> str:
    """A commit's first 10 hex digits, as the status page shows it."""
    return sha[:10]


def _history_verdict(git: Git, commit: str, paths: list[str]) -> tuple[str, str]:
    """("current" | "stale" | "unknown", why) of ``commit`` against HEAD for ``paths``."""
    where = " or ".join(f"`{p}`" for p in paths)
    if not git.has(commit):
        if git.shallow():
            return "unknown", f"commit `{short(commit)}` is not in this shallow clone"
        return "stale", f"commit `{short(commit)}` is not in this repository's history"
    later = git.changed_since(commit, paths)
    if later is not None:
        return "stale", f"{where} changed after `{short(commit)}` (latest: `{short(later)}`)"
    if git.uncommitted(paths):
        return "stale", f"{where} has uncommitted changes"
    return "current", f"no change to {where} since `{short(commit)}`"


def table_verdict(meta: dict[str, Any] | None, git: Git | None) -> tuple[str, str, bool]:
    """(``current`` | ``stale`` | ``unknown``, why, whether the answer read the history).

    The rule: a table is **current** when its file has metadata with every field of
    :data:`REQUIRED`, ``dirty`` is false (not true, not unknown), its ``commit`` is a
    commit of this repository, and no commit after it in HEAD's history, nor an uncommitted
    change in the work tree, touches ``tylo/`` or the benchmark's ``script``. Otherwise it
    is **stale**; **unknown** when only the history could tell and git is unavailable (or
    a shallow clone lacks the commit).
    """
    if meta is None:
        return "stale", "no metadata: an old-format file (a bare list of rows)", False
    missing = [f for f in REQUIRED if f not in meta]
    if missing:
        return "stale", f"its metadata lacks {missing}", False
    if meta["dirty"] is not False:
        if meta["dirty"] is True:
            return "stale", "measured on a modified work tree (dirty), not on its commit", False
        return "stale", f"measured on a work tree of unknown state (dirty: {meta['dirty']})", False
    commit = meta["commit"]
    if not isinstance(commit, str) or not _SHA.fullmatch(commit):
        return "stale", f"its commit is {commit!r}, not a commit", False
    if git is None:
        return "unknown", "git cannot read this tree's history", True
    script = meta["script"] if isinstance(meta["script"], str) else ""
    paths = ["tylo/"] + ([script] if script.startswith("benchmarks/") else [])
    try:
        return (*_history_verdict(git, commit, paths), True)
    except HistoryError as err:
        return "unknown", str(err), True


def suite_verdict(run: dict[str, Any], git: Git | None) -> tuple[str, str]:
    """(``current`` | ``older`` | ``unknown``, why): whether a whole-suite run's tests are
    today's. With a ``commit``: current when no later commit (nor an uncommitted change)
    touches the ``suite`` folder. Without one: older when the folder's latest change was
    committed on a later day than the run's ``date``; else unknown."""
    suite = run["suite"]
    if git is None:
        return "unknown", "git cannot read this tree's history"
    try:
        return _suite_verdict(run, suite + "/", git)
    except HistoryError as err:
        return "unknown", str(err)


def _suite_verdict(run: dict[str, Any], folder: str, git: Git) -> tuple[str, str]:
    if "commit" in run:
        commit = run["commit"]
        if not git.has(commit):
            return "unknown", f"commit `{short(commit)}` is not in this repository's history"
        later = git.changed_since(commit, [folder])
        if later is not None:
            return "older", f"`{folder}` changed after `{short(commit)}` (latest: `{short(later)}`)"
        if git.uncommitted([folder]):
            return "older", f"`{folder}` has uncommitted changes"
        code = git.changed_since(commit, ["tylo/"])
        on = (
            "the current code" if code is None else f"older code (`tylo/` changed: `{short(code)}`)"
        )
        return "current", f"no change to `{folder}` since `{short(commit)}`; ran on {on}"
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", run["date"]):
        return "unknown", f"no commit recorded, and the date {run['date']!r} is not YYYY-MM-DD"
    last = git.last_change([folder])
    if last is None:
        return "unknown", f"`{folder}` has no history here"
    if last[1] > run["date"]:
        return "older", (
            f"no commit recorded; `{folder}` changed on {last[1]} (`{short(last[0])}`), "
            "after the run's date"
        )
    return "unknown", f"no commit recorded; `{folder}` last changed on {last[1]}"
