"""No silent loss of coverage (tylo issue 36, item 7).

* ``TYLO_REQUIRE_C_LAUNCH=1`` turns the "C extension not built" skips into failures, and
  every such test asks :func:`tylo.testing.require_c_launch` (none checks on its own).
* The test extra's packages, and tylo's own dependencies, are never a skip reason: no test
  skips on them (read from every test file, against the installed distributions' own
  record of which modules they provide), and tests/extras.py fails where one is missing.
"""

from __future__ import annotations

import importlib.metadata
import re
import sys
from pathlib import Path

import extras
import pytest

from tylo.kernel import fastpath
from tylo.testing import c_launch_required, require_c_launch

ROOT = Path(__file__).resolve().parents[2]
TESTS = sorted(p for p in (ROOT / "tests").rglob("*.py") if p.name != Path(__file__).name)


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_names(block: str) -> set[str]:
    return {
        _normalize(re.split(r"[\[<>=!~; ]", r, maxsplit=1)[0])
        for r in re.findall(r'"([^"]+)"', block)
    }


def never_skipped() -> dict[str, set[str]]:
    """Distribution -> the top-level modules it provides, for tylo's dependencies and the
    test extra, as pyproject.toml lists them and the installed metadata maps them."""
    text = (ROOT / "pyproject.toml").read_text()
    deps = re.search(r"^dependencies = \[(.*?)^\]", text, re.MULTILINE | re.DOTALL)
    test = re.search(r"^test = \[(.*?)^\]", text, re.MULTILINE | re.DOTALL)
    assert deps and test, "pyproject.toml: no dependencies or test extra list"
    dists = _requirement_names(deps.group(1)) | _requirement_names(test.group(1))
    assert {"pytest", "hypothesis", "mkdocs", "playwright", "nvidia-cuda-nvdisasm"} <= dists
    provided: dict[str, set[str]] = {d: set() for d in dists}
    for module, owners in importlib.metadata.packages_distributions().items():
        for owner in owners:
            if _normalize(owner) in provided:
                provided[_normalize(owner)].add(module)
    return provided


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name


def _statements(text: str, pattern: str) -> list[tuple[int, str]]:
    """(line, the call's text up to its closing parenthesis) for each match of pattern."""
    found = []
    for m in re.finditer(pattern, text):
        depth, start = 0, m.start() + m.group(0).index("(")
        for end in range(start, len(text)):  # noqa: B007 - end is read after the loop
            depth += {"(": 1, ")": -1}.get(text[end], 0)
            if depth == 0:
                break
        found.append((text.count("\n", 0, m.start()) + 1, text[m.start() : end + 1]))
    return found


def test_no_test_skips_on_a_package_of_the_test_extra_or_a_dependency() -> None:
    provided = never_skipped()
    modules = {m for ms in provided.values() for m in ms} - {"pytest", "_pytest"}
    words = modules | {"nvdisasm"} | {d for d in provided if d != "pytest"}
    offenders = []
    for path in TESTS:
        text = path.read_text()
        for line, call in _statements(text, r"importorskip\(\s*"):
            name = re.match(r"importorskip\(\s*[\"']([\w.]+)", call)
            if name and name.group(1).split(".")[0] in modules:
                offenders.append(f"{_rel(path)}:{line}: {call}")
        for line, call in _statements(text, r"\b(skip|skipif)\(\s*"):
            hit = sorted(w for w in words if re.search(rf"(?<![\w.-]){re.escape(w)}\b", call))
            if hit:
                offenders.append(f"{_rel(path)}:{line}: {hit}: {call[:120]}")
    assert not offenders, "skips on the test extra or a dependency:\n" + "\n".join(offenders)


def test_the_scan_finds_what_it_looks_for(tmp_path, monkeypatch) -> None:
    """The scan above, on planted files: each old form of skip is found."""
    planted = [
        'cu = pytest.importorskip("cuda.bindings.driver")',
        "mark = pytest.mark.skipif(\n    find_nvdisasm() is None,\n    reason='needs nvdisasm')",
        'pytest.skip("needs mkdocs (pip install -e .[docs])")',
        'h = pytest.importorskip("hypothesis")',
    ]
    for k, body in enumerate(planted):
        (tmp_path / f"t{k}.py").write_text(f"import pytest\n\n{body}\n")
    monkeypatch.setattr(sys.modules[__name__], "TESTS", sorted(tmp_path.glob("*.py")))
    with pytest.raises(AssertionError) as err:
        test_no_test_skips_on_a_package_of_the_test_extra_or_a_dependency()
    assert all(f"t{k}.py:3" in str(err.value) for k in range(len(planted))), str(err.value)
    (tmp_path / "t0.py").write_text('pytest.importorskip("torch", reason="needs torch")\n')
    for k in range(1, len(planted)):
        (tmp_path / f"t{k}.py").write_text('pytest.skip("needs Debian\'s chromium")\n')
    test_no_test_skips_on_a_package_of_the_test_extra_or_a_dependency()


def test_c_launch_skips_go_through_require_c_launch() -> None:
    users = []
    for path in TESTS:
        text = path.read_text()
        assert "_accel is None" not in text, f"{path}: use tylo.testing.require_c_launch()"
        assert "is not built here" not in text, f"{path}: use tylo.testing.require_c_launch()"
        users += [path.name] * text.count("require_c_launch()")
    assert len(users) >= 8, users  # the eight tests of issue 36, item 7


def test_require_c_launch_skips_or_fails_as_asked(monkeypatch) -> None:
    monkeypatch.setattr(fastpath, "_accel", None)
    for value in ("", "0", "no", "false"):
        monkeypatch.setenv("TYLO_REQUIRE_C_LAUNCH", value)
        assert not c_launch_required()
        with pytest.raises(pytest.skip.Exception, match=r"^needs the C inline launch path"):
            require_c_launch()
    for value in ("1", "true", " YES ", "on"):
        monkeypatch.setenv("TYLO_REQUIRE_C_LAUNCH", value)
        assert c_launch_required()
        with pytest.raises(pytest.fail.Exception, match=r"^TYLO_REQUIRE_C_LAUNCH=1: needs the C"):
            require_c_launch()
    sentinel = object()
    monkeypatch.setattr(fastpath, "_accel", sentinel)
    assert require_c_launch() is sentinel


def test_a_missing_package_of_the_extra_fails_naming_it(monkeypatch) -> None:
    with pytest.raises(pytest.fail.Exception, match=r"^some-dist is in the test extra.*\[test\]"):
        extras.require_module("tylo_no_such_module_here", "some-dist")
    assert extras.require_module("hypothesis", "hypothesis").__name__ == "hypothesis"
    from tylo.backend import sass

    monkeypatch.setattr(sass, "find_nvdisasm", lambda: None)
    with pytest.raises(pytest.fail.Exception, match=r"^nvidia-cuda-nvdisasm is in the test"):
        extras.require_nvdisasm()
    monkeypatch.setattr(sass, "find_nvdisasm", lambda: "/opt/nvdisasm")
    assert extras.require_nvdisasm() == "/opt/nvdisasm"
