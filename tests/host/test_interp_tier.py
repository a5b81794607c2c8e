"""The interpreter tier (tests/interp_tier.py): where no GPU satisfies a runtime test's
banner, a test marked ``interpret`` runs in the CPU interpreter, the others skip saying why
they cannot, and the session counts the runtime tests it ran."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

import interp_tier  # noqa: E402


def _request(marker: Any = None, params: dict | None = None, module: Any = None) -> Any:
    node = SimpleNamespace(
        get_closest_marker=lambda name: marker if name == "interpret" else None,
        finalizers=[],
        callspec=None if params is None else SimpleNamespace(params=params),
        user_properties=[],
    )
    return SimpleNamespace(
        node=node, module=module or SimpleNamespace(), addfinalizer=node.finalizers.append
    )


def _skip_reason(request: Any, spec: str = "cc>=8.0") -> str:
    with pytest.MonkeyPatch.context() as mp, pytest.raises(pytest.skip.Exception) as info:
        interp_tier.interpret_or_skip(request, spec, "none", mp)
    return str(info.value)


def test_unmarked_tests_skip_with_the_modules_reason_or_a_default() -> None:
    reason = _skip_reason(_request(module=SimpleNamespace(INTERPRET_SKIP="uses wgmma")))
    assert (
        reason == "needs a GPU with cc>=8.0 (found: none); not run in the interpreter: uses wgmma"
    )
    assert "not ported to the interpreter tier" in _skip_reason(_request())


def test_marked_skip_and_when_give_their_reasons() -> None:
    skip = pytest.mark.interpret(skip="counts compiles").mark
    assert _skip_reason(_request(skip)).endswith("not run in the interpreter: counts compiles")
    small = pytest.mark.interpret(when=lambda n: n < 10).mark
    assert "too large for the interpreter tier" in _skip_reason(_request(small, {"n": 99}))
    why = pytest.mark.interpret(when=lambda n: n < 10, why="n too big").mark
    assert _skip_reason(_request(why, {"n": 99})).endswith("n too big")


@pytest.mark.parametrize(("spec", "sm"), [("cc>=8.0", "sm_80"), ("cc>=9.0a", "sm_90a")])
def test_marked_tests_run_in_the_interpreter_for_the_banner(spec: str, sm: str) -> None:
    small = pytest.mark.interpret(when=lambda n: n < 10).mark
    request = _request(small, {"n": 3})
    before = {k: os.environ.get(k) for k in ("TYLO_INTERPRET", "TYLO_INTERPRET_TARGET")}
    with pytest.MonkeyPatch.context() as mp:
        target = interp_tier.interpret_or_skip(request, spec, "none", mp)
        assert target.sm == sm and target.satisfies(spec)
        assert os.environ["TYLO_INTERPRET"] == "1" and os.environ["TYLO_INTERPRET_TARGET"] == sm
    assert ("tylo_runtime", "interpreted") in request.node.user_properties
    assert before == {k: os.environ.get(k) for k in before}  # for the test's duration only


def test_the_session_counts_what_ran(tmp_path: Path) -> None:
    """A real session over tests/gpu/test_vector_add.py: without a GPU its 5 marked runtime
    tests run in the interpreter and the count file says so; each other runtime test skips
    saying why the interpreter cannot run it."""
    from tylo.testing import runtime_target

    if runtime_target()[0] is not None:
        pytest.skip("a GPU is present: the runtime tests run there, not in the interpreter")
    count = tmp_path / "count"
    env = {**os.environ, interp_tier.COUNT_ENV: str(count), "PYTHONPATH": str(ROOT)}
    env.pop("TYLO_INTERPRET", None)
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0", "-rs",
         "tests/gpu/test_vector_add.py"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout[-3000:]
    line = "runtime tests executed: 5 (5 in the CPU interpreter, 0 on a GPU)"
    assert count.read_text().strip() == line and f"tylo: {line}" in r.stdout
    skipped = [x for x in r.stdout.splitlines() if x.startswith("SKIPPED")]
    assert skipped and all("not run in the interpreter: " in x for x in skipped)


@pytest.mark.parametrize(("spec", "sm"), [("cc>=8.0", "sm_90a"), ("cc<9.0", "sm_80")])
def test_a_marked_target_is_taken_where_the_banner_allows_it(spec: str, sm: str) -> None:
    marker = pytest.mark.interpret(target="sm_90a").mark
    with pytest.MonkeyPatch.context() as mp:
        assert interp_tier.interpret_or_skip(_request(marker), spec, "none", mp).sm == sm


def test_device_memos_do_not_leak_across_the_tier() -> None:
    """softmax's device_cc, memoized under the interpreter (sm_80), is forgotten when the
    interpreted test ends: the next caller without a GPU sees the no-GPU answer again."""
    from tylo.ops.softmax import host
    from tylo.testing import runtime_target

    if runtime_target()[0] is not None:
        pytest.skip("a GPU is present: device_cc reads it")
    request = _request(pytest.mark.interpret.mark)
    with pytest.MonkeyPatch.context() as mp:
        interp_tier.interpret_or_skip(request, "cc>=8.0", "none", mp)
        assert host.device_cc() == (8, 0)  # the interpreter's device
    for fin in request.node.finalizers:
        fin()
    assert host.device_cc() == (9, 0)  # no GPU: plan for the H200, as before
