"""docs/attention.md: its examples run (doctest, no GPU), the code it shows is included from
tylo/ops/attention (every marked section exists and is used), and the example modules'
docstring examples run and their ``__all__`` resolve."""

from __future__ import annotations

import doctest
import importlib
import re
import sys
from pathlib import Path

import pytest
from doc_examples import check_page

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
PAGE = ROOT / "docs" / "attention.md"
INCLUDE = re.compile(r'^--8<-- "([^":]+):([\w-]+)"$', re.MULTILINE)
SECTIONS = {
    "tylo/ops/attention/config.py": {"config"},
    "tylo/ops/attention/kernel.py": {"kernel", "blocks", "iteration", "lazy", "online", "partials"},
}
MODULES = [
    "tylo.ops.attention.reference",
    "tylo.ops.attention.config",
    "tylo.ops.attention.kernel",
    "tylo.ops.attention.host",
]


def _section(path: str, name: str) -> list[str]:
    source = (ROOT / path).read_text()
    start = source.find(f"# --8<-- [start:{name}]")
    end = source.find(f"# --8<-- [end:{name}]")
    assert 0 <= start < end, f"{path} has no section {name!r}"
    return source[start:end].splitlines()[1:]


def test_page_examples_run():
    check_page(PAGE, FLAGS)


def test_every_marked_section_is_included():
    includes = INCLUDE.findall(PAGE.read_text())
    for path, names in SECTIONS.items():
        assert {s for p, s in includes if p == path} == names
        marked = set(re.findall(r"# --8<-- \[start:([\w-]+)\]", (ROOT / path).read_text()))
        assert marked - {"epilogue"} == names  # the epilogue is shown inside the kernel
    for path, name in includes:
        assert any(line.strip() for line in _section(path, name)), f"{path}:{name} is empty"


@pytest.mark.parametrize("name", MODULES)
def test_module_doctests_and_all(name):
    mod = importlib.import_module(name)
    assert doctest.testmod(mod, optionflags=FLAGS).failed == 0
    names = list(mod.__all__)
    kind = lambda n: 0 if n.isupper() else 1 if n[:1].isupper() else 2  # noqa: E731
    assert names == sorted(names, key=lambda n: (kind(n), n))
    for n in names:
        assert hasattr(mod, n), f"{name}.{n}"
