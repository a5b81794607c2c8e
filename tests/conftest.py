"""Test tiers for the whole suite (docs/backend.md and docs/index.md).

* ``gpu_runtime`` fixture: the runtime half of a ``tests/gpu`` file. It reads the file's
  ``# TEST_TARGET: cc>=...`` banner and returns the device's :class:`tylo.target.Target`
  when the device satisfies it; otherwise the test is skipped with a reason naming the
  need and what was found, or failed under ``TYLO_REQUIRE_GPU_RUNTIME=1``.
* The C inline launch path's tests call ``tylo.testing.require_c_launch``: skipped where
  ``tylo._launch`` is not built, failed instead under ``TYLO_REQUIRE_C_LAUNCH=1`` (CI).
  The test extra's packages are never a skip reason (``tests/extras.py``).
* Tests that use ``gpu_runtime`` get the ``gpu`` marker (``-m "not gpu"`` leaves them out).
* The interpreter tier (``tests/interp_tier.py``): where no GPU satisfies the banner, a
  runtime test marked ``interpret`` runs in the CPU interpreter instead of skipping; the
  others skip saying why they cannot. The session ends with the line ``runtime tests
  executed: N (...)``, written to ``$TYLO_RUNTIME_COUNT_FILE`` too (``.ci/run`` prints it).
* ``TYLO_EVIDENCE=<dir>`` is honoured by :func:`tylo.backend.pipeline.compile_ir` itself.
* ``--shard I/N`` keeps shard I of N of the collected tests (``tests/sharding.py``): the N
  shards partition the collection; ``tools/gpu_tier.py`` runs every shard of ``tests/gpu``.
* Tests never touch the user's disk cache: at session start ``TYLO_CACHE_DIR`` points at a
  fresh temporary directory (removed at the end); subprocesses inherit it.

Every xdist worker reads the device once (``tylo.testing.runtime_target`` is memoized).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tylo.target import Target

_SESSION_CACHE: list[str] = []


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--shard",
        default=None,
        metavar="I/N",
        help="run only shard I of N (1 <= I <= N): the tests at positions I-1, I-1+N, ... "
        "of the collection sorted by node id; the N shards partition the tests",
    )


def pytest_configure(config: pytest.Config) -> None:
    from sharding import parse_shard

    if config.getoption("shard") is not None:
        try:
            i, n = parse_shard(config.getoption("shard"))
        except ValueError as err:
            raise pytest.UsageError(str(err)) from None
        config.pluginmanager.register(_Shard(i, n), "tylo-shard")
    # before any test or collection compiles: the user's real cache stays untouched
    _SESSION_CACHE.append(tempfile.mkdtemp(prefix="tylo-test-cache-"))
    os.environ["TYLO_CACHE_DIR"] = _SESSION_CACHE[-1]


def pytest_unconfigure(config: pytest.Config) -> None:
    while _SESSION_CACHE:
        shutil.rmtree(_SESSION_CACHE.pop(), ignore_errors=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "gpu_runtime" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.gpu)


class _Shard:
    """Keeps shard I of N; runs after every other collection hook (``-k``, ``-m``)."""

    def __init__(self, i: int, n: int) -> None:
        self.i, self.n = i, n

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]):
        from sharding import shard_members

        keep = shard_members([item.nodeid for item in items], self.i, self.n)
        dropped = [item for item, k in zip(items, keep) if not k]
        items[:] = [item for item, k in zip(items, keep) if k]
        if dropped:
            config.hook.pytest_deselected(items=dropped)

    def pytest_report_header(self, config: pytest.Config) -> str:
        return f"tylo: shard {self.i}/{self.n} of the collected tests"


def pytest_report_header(config: pytest.Config) -> list[str]:
    from tylo.kernel import fastpath
    from tylo.testing import c_launch_required, gpu_runtime_required, runtime_target

    _, found = runtime_target()
    require = "1" if gpu_runtime_required() else "0"
    built = "built" if fastpath._accel is not None else "not built"
    lines = [
        f"tylo: runtime device: {found}; TYLO_REQUIRE_GPU_RUNTIME={require}",
        f"tylo: C inline launch (tylo._launch): {built}; "
        f"TYLO_REQUIRE_C_LAUNCH={'1' if c_launch_required() else '0'}",
    ]
    if os.environ.get("TYLO_EVIDENCE"):
        lines.append(f"tylo: saving evidence to {os.environ['TYLO_EVIDENCE']}")
    return lines


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    from interp_tier import count_runtime

    count_runtime(report)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if hasattr(terminalreporter.config, "workerinput"):
        return  # an xdist worker: the controller counts
    from interp_tier import summary

    terminalreporter.write_line(f"tylo: {summary()}")


@pytest.fixture
def gpu_runtime(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Target:
    """The runtime device's target, if it satisfies this file's ``TEST_TARGET`` banner;
    otherwise the interpreter's, for a test of the interpreter tier (``tests/interp_tier.py``),
    or a skip."""
    from interp_tier import interpret_or_skip

    from tylo.testing import gpu_runtime_required, read_banner, require_gpu_runtime, runtime_target

    path = Path(str(request.node.path))
    spec = read_banner(path)
    if spec is None:
        pytest.fail(
            f"{path.name} uses the gpu_runtime fixture but has no banner; add a line such as "
            "'# TEST_TARGET: cc>=8.0' near the top",
            pytrace=False,
        )
    target, found = runtime_target()
    if (target is not None and target.satisfies(spec)) or gpu_runtime_required():
        found_target = require_gpu_runtime(spec)
        request.node.user_properties.append(("tylo_runtime", "gpu"))
        return found_target
    return interpret_or_skip(request, spec, found, monkeypatch)
