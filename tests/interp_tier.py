"""The interpreter tier: the runtime halves of ``tests/gpu`` run in the CPU interpreter
(``tylo.interpret``, ``TYLO_INTERPRET=1``) where no GPU satisfies the file's banner.

A runtime test opts in with the ``interpret`` marker (on the test, a ``pytest.param`` or
the module's ``pytestmark``); ``interpret(when=f)`` runs only the parameter sets for which
``f(**params)`` is true (small sizes), and says for the others that they are too large for
the tier (or ``why=``); ``interpret(target="sm_90a")`` interprets for that target (where
the banner allows it). On a machine without the GPU it needs, its ``gpu_runtime``
fixture then sets ``TYLO_INTERPRET=1`` (and ``TYLO_INTERPRET_TARGET``: ``sm_80`` where
the banner allows it, else ``sm_90a``) for the test's duration instead of skipping, so its
launches, DeviceBuffers and subprocesses run in the interpreter. ``interpret(skip="why")``
(or a module-level ``INTERPRET_SKIP = "why"``) keeps a test out and says why in its skip
reason. On a machine with the GPU the fixture runs the test there, as before.

:func:`count_runtime` keeps the count of runtime tests that ran (on a GPU or in the
interpreter) for the summary line ``.ci/run`` prints.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tylo.target import Target

__all__ = ["COUNT_ENV", "count_runtime", "forget_device_state", "interpret_or_skip", "summary"]

COUNT_ENV = "TYLO_RUNTIME_COUNT_FILE"  # where the session writes its count (.ci/run reads it)
_NOT_PORTED = "not ported to the interpreter tier yet (tests/interp_tier.py)"
_TOO_LARGE = "too large for the interpreter tier's time budget (its smaller parameters run there)"
_counts = {"gpu": 0, "interpreted": 0}


# what the ops memoize about the device (or allocate on it): forgotten around each
# interpreted test, so that neither the interpreter's device nor its host-memory buffers leak
# into the tests after it in the same process (nor theirs into it)
_MEMOIZED = (
    ("tylo.ops.softmax.host", "device_cc"),
    ("tylo.ops.softmax.host", "multiprocessors"),
    ("tylo.ops.gemm.hopper_host", "_sm_count"),
    ("tylo.ops.gemm.hopper_host", "_resident_clusters"),
)
_SCRATCH = (("tylo.ops.gemm.host", "_SCRATCH"),)


def forget_device_state() -> None:
    """Clear the ops' memos of device facts and their cached scratch buffers."""
    for module, name in _MEMOIZED:
        fn = getattr(sys.modules.get(module), name, None)
        if fn is not None and hasattr(fn, "cache_clear"):
            fn.cache_clear()
    for module, name in _SCRATCH:
        held = getattr(sys.modules.get(module), name, None)
        if isinstance(held, dict):
            held.clear()


def _tier_target(spec: str) -> Target:
    """The interpreter's target for a banner: sm_80 where it satisfies it, else sm_90a."""
    for sm in ("sm_80", "sm_90a"):
        t = Target.parse(sm)
        if t.satisfies(spec):
            return t
    return Target.parse("sm_90a")


def interpret_or_skip(
    request: pytest.FixtureRequest, spec: str, found: str, monkeypatch: pytest.MonkeyPatch
) -> Target:
    """Without the GPU a runtime test needs: run it in the interpreter when it opts in (the
    ``interpret`` marker), or skip it with the reason it cannot run there."""
    marker = request.node.get_closest_marker("interpret")
    reason = f"needs a GPU with {spec} (found: {found})"
    if marker is None or "skip" in marker.kwargs:
        why = (
            marker.kwargs["skip"]
            if marker is not None
            else getattr(request.module, "INTERPRET_SKIP", _NOT_PORTED)
        )
        pytest.skip(f"{reason}; not run in the interpreter: {why}")
    when = marker.kwargs.get("when")
    callspec = getattr(request.node, "callspec", None)
    if when is not None and not when(**(callspec.params if callspec else {})):
        why = marker.kwargs.get("why", _TOO_LARGE)
        pytest.skip(f"{reason}; not run in the interpreter: {why}")
    target = Target.parse(marker.kwargs["target"]) if "target" in marker.kwargs else None
    if target is None or not target.satisfies(spec):
        target = _tier_target(spec)
    forget_device_state()
    request.addfinalizer(forget_device_state)  # and again when the test ends
    monkeypatch.setenv("TYLO_INTERPRET", "1")
    monkeypatch.setenv("TYLO_INTERPRET_TARGET", target.sm)
    request.node.user_properties.append(("tylo_runtime", "interpreted"))
    return target


def count_runtime(report: pytest.TestReport) -> None:
    """Count a passed call of a runtime test (one whose ``gpu_runtime`` fixture gave it a
    device, noted in its ``user_properties``): in the interpreter or on a GPU."""
    if report.when != "call" or not report.passed:
        return
    where = dict(tuple(p) for p in report.user_properties).get("tylo_runtime")
    if where in _counts:
        _counts[where] += 1


def summary() -> str:
    """The one line of the count; also written to ``$TYLO_RUNTIME_COUNT_FILE`` when set."""
    total = _counts["gpu"] + _counts["interpreted"]
    line = (
        f"runtime tests executed: {total} ({_counts['interpreted']} in the CPU interpreter, "
        f"{_counts['gpu']} on a GPU)"
    )
    path = os.environ.get(COUNT_ENV)
    if path:
        Path(path).write_text(line + "\n", encoding="utf-8")
    return line
