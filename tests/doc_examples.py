"""The one harness that runs a manual page's ``>>>`` examples (tylo issue 36, item 3).

Every page test calls :func:`check_page`, which passes only when **every** ``>>>`` example
on the page ran and none failed. There is no minimum count to meet: an example may go unrun
only with a reason stated on the page, and only for one reason, that it needs a GPU. The
page says so with a marker comment on the line before the fenced block::

    <!-- doctest: needs-gpu: launches the kernel and reads the result back -->
    ```python
    >>> ...
    ```

On a machine without a usable GPU those examples are skipped, the reason is reported (a
:class:`DocExampleSkipped` warning, shown in pytest's warnings summary), and under
``TYLO_REQUIRE_GPU_RUNTIME=1`` the page test fails instead. Where a GPU is present they run.

Refused, each with the page and line named:

* an example skipped any other way (``# doctest: +SKIP``, or ``SKIP`` in the option flags);
* a marker without a reason, with another reason than ``needs-gpu``, or not directly above
  a fenced block that holds examples;
* a ``>>>`` line that doctest would not run (after a no-break space or a quote marker);
* a page with no examples at all (a page test that runs nothing).
"""

from __future__ import annotations

import doctest
import re
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARKER = re.compile(r"^\s*<!--\s*doctest:(?P<body>.*?)-->\s*$")
GPU_MARKER = re.compile(r"^\s*needs-gpu\s*:\s*(?P<reason>.*?)\s*$")
PROMPT = re.compile(r"^(?:\s|>\s)*>>>")
FENCE = re.compile(r"^\s*(```|~~~)")

__all__ = [
    "DocExampleError",
    "DocExampleSkipped",
    "PageRun",
    "Skip",
    "check_page",
    "gpu_present",
    "run_page",
]


class DocExampleError(AssertionError):
    """A page whose examples did not all run and pass, naming the page, line and fix."""


class DocExampleSkipped(UserWarning):
    """A page's example skipped for the reason the page states (it needs a GPU)."""


@dataclass(frozen=True)
class Skip:
    """One skipped example: the page, its line (1-based) and the page's stated reason."""

    page: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: skipped: needs a GPU: {self.reason}"


@dataclass(frozen=True)
class PageRun:
    """What running a page gave: its examples, how many ran, failed, and the skips."""

    page: str
    examples: int
    attempted: int
    failed: int
    skips: tuple[Skip, ...]
    report: str


def gpu_present() -> bool:
    """True when device 0 is usable (the test tiers' own probe, once per process)."""
    from tylo.testing import runtime_target

    return runtime_target()[0] is not None


def _fenced_blocks(lines: list[str]) -> list[tuple[int, int]]:
    """(first, last) 0-based line numbers of each fenced block's body."""
    blocks, start = [], None
    for i, line in enumerate(lines):
        if FENCE.match(line):
            if start is None:
                start = i + 1
            else:
                blocks.append((start, i - 1))
                start = None
    return blocks


def _gpu_blocks(page: str, lines: list[str]) -> list[tuple[int, int, str]]:
    """(first, last, reason) of each block marked ``needs-gpu``; a bad marker is refused."""
    blocks = {first - 1: (first, last) for first, last in _fenced_blocks(lines)}
    marked = []
    for i, line in enumerate(lines):
        m = MARKER.match(line)
        if not m:
            continue
        where = f"{page}:{i + 1}"
        g = GPU_MARKER.match(m.group("body"))
        if g is None:
            raise DocExampleError(
                f"{where}: unknown doctest marker {line.strip()!r}; the only one is "
                "'<!-- doctest: needs-gpu: <why it needs a GPU> -->' (examples run otherwise)"
            )
        if not g.group("reason"):
            raise DocExampleError(
                f"{where}: the needs-gpu marker states no reason; write "
                "'<!-- doctest: needs-gpu: <why it needs a GPU> -->'"
            )
        if i + 1 not in blocks:
            raise DocExampleError(
                f"{where}: the needs-gpu marker is not on the line directly above a fenced "
                "block; move it there or remove it"
            )
        first, last = blocks[i + 1]
        if not any(PROMPT.match(x) for x in lines[first : last + 1]):
            raise DocExampleError(
                f"{where}: the needs-gpu marker is above a block with no >>> examples; remove it"
            )
        marked.append((first, last, g.group("reason")))
    return marked


@contextmanager
def _repository_on_path() -> Iterator[None]:
    """The checkout's root importable (pages marked *checkout* import ``examples``)."""
    added = str(ROOT) not in sys.path
    if added:
        sys.path.insert(0, str(ROOT))
    try:
        yield
    finally:
        if added and str(ROOT) in sys.path:
            sys.path.remove(str(ROOT))


def run_page(path: str | Path, optionflags: int, *, gpu: bool | None = None) -> PageRun:
    """Run every ``>>>`` example of the page at ``path`` with doctest's ``optionflags``.

    Examples in a block marked ``needs-gpu`` are skipped when ``gpu`` (default: a GPU is
    present) is false; every other example runs. Refuses (:class:`DocExampleError`) a page
    where an example would be skipped or left unrun without a stated reason.
    """
    path = Path(path)
    page = path.name
    if optionflags & doctest.SKIP:
        raise DocExampleError(f"{page}: SKIP in the option flags would skip every example")
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    marked = _gpu_blocks(page, lines)
    if gpu is None:
        gpu = gpu_present() if marked else True
    globs = {"__name__": "__main__"}
    test = doctest.DocTestParser().get_doctest(text, globs, page, str(path), 0)
    prompts = [i for i, line in enumerate(lines) if PROMPT.match(line)]
    parsed = {ex.lineno for ex in test.examples}
    unrun = [i + 1 for i in prompts if i not in parsed]
    if unrun:
        raise DocExampleError(
            f"{page}: the >>> lines at {unrun} are not examples doctest runs (doctest reads a "
            "prompt only after plain spaces); indent them with spaces like the others"
        )
    if not test.examples:
        raise DocExampleError(f"{page}: no >>> examples, so its page test would run nothing")
    skips = []
    for ex in test.examples:
        line = ex.lineno + 1
        if ex.options.get(doctest.SKIP):
            raise DocExampleError(
                f"{page}:{line}: the example is skipped ('# doctest: +SKIP') without a "
                "stated reason; make it run, or, if it needs a GPU, remove the directive and "
                "put '<!-- doctest: needs-gpu: <why> -->' above its block"
            )
        reason = next((r for a, b, r in marked if a <= ex.lineno <= b), None)
        if reason is not None and not gpu:
            ex.options[doctest.SKIP] = True
            skips.append(Skip(page, line, reason))
    out: list[str] = []
    runner = doctest.DocTestRunner(optionflags=optionflags, verbose=False)
    try:
        with _repository_on_path():
            runner.run(test, out=out.append)
    finally:
        globs.clear()
    return PageRun(
        page, len(test.examples), runner.tries, runner.failures, tuple(skips), "".join(out)
    )


def check_page(path: str | Path, optionflags: int) -> PageRun:
    """Run the page (:func:`run_page`) and fail unless every example ran and passed, save
    those that need a GPU where none is present (each reported as a warning, or a failure
    under ``TYLO_REQUIRE_GPU_RUNTIME=1``)."""
    from tylo.testing import gpu_runtime_required

    run = run_page(path, optionflags)
    if run.failed:
        raise DocExampleError(f"{run.page}: {run.failed} example(s) failed:\n{run.report}")
    if run.attempted != run.examples - len(run.skips):
        raise DocExampleError(
            f"{run.page}: {run.attempted} of {run.examples} examples ran, "
            f"{len(run.skips)} skipped for a stated reason"
        )
    if run.skips and gpu_runtime_required():
        raise DocExampleError(
            "TYLO_REQUIRE_GPU_RUNTIME=1, and no GPU for: " + "; ".join(map(str, run.skips))
        )
    for skip in run.skips:
        warnings.warn(DocExampleSkipped(str(skip)), stacklevel=2)
    return run
