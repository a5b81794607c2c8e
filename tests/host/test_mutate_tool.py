"""tools/mutate.py, the mutation runner, on a toy module (the real run is slow and is not part
of the suite; docs/proofs.md gives its command).

The toy has one function and a test that checks it on both sides of its branch but not at
the boundary: the runner must make exactly the mutants its operators promise, leave messages
and docstrings alone, kill the three mutants the test can see and report the one it cannot
(``x > hi`` -> ``x >= hi``, which is equivalent here: at ``x == hi`` both return ``hi``).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load():
    spec = importlib.util.spec_from_file_location("tylo_mutate_tool", ROOT / "tools/mutate.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


mutate = _load()

TOY = '''"""A toy module. Its doctest: clamp(3, 2) is 2.

>>> clamp(3, 2)
2
"""


def clamp(x, hi):
    if x > hi:
        return hi
    return x


def refuse(n):
    if n < 0:
        raise ValueError(f"n must be at least {0}, got {n - 1 + 1}")
    return n and True
'''

TOY_TEST = """from tylo.toy import clamp


def test_clamp():
    assert clamp(5, 10) == 5
    assert clamp(12, 10) == 10
"""


def test_mutants_are_the_operators_promised():
    ms = mutate.mutants_of(TOY, "tylo/toy.py")
    got = sorted((m.line, m.kind, m.text) for m in ms)
    assert got == sorted(
        [
            (9, "not", "negate `x > hi`"),
            (9, "cmp", "#0 > -> >="),
            (10, "return", "return `hi` -> return None"),
            (11, "return", "return `x` -> return None"),
            (15, "not", "negate `n < 0`"),
            (15, "cmp", "#0 < -> <="),
            (15, "int", "0 -> 1"),
            (15, "int", "0 -> -1"),
            (16, "raise", "drop the raise"),
            (17, "return", "return `n and True` -> return None"),
            (17, "boolop", "and -> or"),
        ]
    )  # the f-string's constants, the docstring and the doctest are never mutated
    assert [m.number for m in ms] == list(range(len(ms)))


def test_every_mutant_applies_and_changes_the_code():
    import ast

    base = ast.dump(ast.parse(TOY))
    for m in mutate.mutants_of(TOY, "tylo/toy.py"):
        out = mutate.apply(TOY, m)
        compile(out, "toy", "exec")
        assert ast.dump(ast.parse(out)) != base, m


def test_samples_are_seeded_and_ids_select(tmp_path):
    (tmp_path / "tylo").mkdir()
    (tmp_path / "tylo/toy.py").write_text(TOY)
    mutate.TESTS["tylo/toy.py"] = []
    try:
        a = mutate.select(tmp_path, ["tylo/toy.py"], 4, 7, [])
        assert a == mutate.select(tmp_path, ["tylo/toy.py"], 4, 7, []) and len(a) == 4
        assert [m.number for m in a] == sorted(m.number for m in a)
        picked = mutate.select(tmp_path, ["tylo/toy.py"], None, 0, ["tylo/toy.py#2"])
        assert [m.ident for m in picked] == ["tylo/toy.py#2"]
    finally:
        del mutate.TESTS["tylo/toy.py"]


@pytest.fixture
def toy_root(tmp_path, monkeypatch):
    (tmp_path / "tylo").mkdir()
    (tmp_path / "tylo/__init__.py").write_text("")
    (tmp_path / "tylo/toy.py").write_text(TOY)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests/test_toy.py").write_text(TOY_TEST)
    monkeypatch.setattr(mutate, "TESTS", {"tylo/toy.py": ["tests/test_toy*.py"]})
    return tmp_path


def test_the_run_kills_what_the_test_sees_and_reports_the_rest(toy_root):
    ms = [m for m in mutate.mutants_of(TOY, "tylo/toy.py") if m.line <= 11]
    results, broken = mutate.run(toy_root, ms, jobs=1, timeout=60, log=lambda *a: None)
    assert broken == {}
    status = {(r.kind, r.text): r.status for r in results}
    assert status == {
        ("not", "negate `x > hi`"): "killed",
        ("cmp", "#0 > -> >="): "survived",  # equivalent: clamp(hi, hi) == hi either way
        ("return", "return `hi` -> return None"): "killed",
        ("return", "return `x` -> return None"): "killed",
    }
    text = mutate.table(results)
    assert "| tylo/toy.py |         4 |         3 |         1 |         0 |     75.0% |" in text
    assert "tylo/toy.py:9  [tylo/toy.py#4] cmp: #0 > -> >=" in text
    assert (toy_root / "tylo/toy.py").read_text() == TOY  # the tree itself is never touched


def test_a_module_whose_own_tests_fail_is_reported_not_run(toy_root):
    (toy_root / "tests/test_toy.py").write_text(TOY_TEST + "\n\ndef test_broken():\n    1 / 0\n")
    ms = mutate.mutants_of(TOY, "tylo/toy.py")[:1]
    results, broken = mutate.run(toy_root, ms, jobs=1, timeout=60, log=lambda *a: None)
    assert results == [] and list(broken) == ["tylo/toy.py"]
