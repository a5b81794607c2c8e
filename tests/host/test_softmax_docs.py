"""docs/softmax.md: its examples run (doctest, no GPU) and the kernel code it shows is
included from tylo/ops/softmax/kernel.py (every marked section exists and is used), never
copied."""

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
PAGE = ROOT / "docs" / "softmax.md"
INCLUDE = re.compile(r'^--8<-- "([^":]+):([\w-]+)"$', re.MULTILINE)
KERNEL = "tylo/ops/softmax/kernel.py"
SECTIONS = {
    "load",
    "normalize",
    "across_warps",
    "online_update",
    "row_kernel",
    "prefetch_kernel",
    "online_kernel",
    "mma_kernel",
}
MODULES = ["tylo.ops.softmax.plan", "tylo.ops.softmax.kernel", "tylo.ops.softmax.host"]


def _section(path: str, name: str) -> list[str]:
    source = (ROOT / path).read_text()
    start = source.find(f"# --8<-- [start:{name}]")
    end = source.find(f"# --8<-- [end:{name}]")
    assert 0 <= start < end, f"{path} has no section {name!r}"
    return source[start:end].splitlines()[1:]


def test_page_examples_run():
    check_page(PAGE, FLAGS)


def test_every_kernel_section_is_included():
    includes = INCLUDE.findall(PAGE.read_text())
    assert {s for p, s in includes if p == KERNEL} == SECTIONS
    for path, name in includes:
        body = _section(path, name)
        assert any(line.strip() for line in body), f"{path}:{name} is empty"


def test_kernel_code_is_not_copied():
    text = PAGE.read_text()
    for name in SECTIONS:
        for line in _section(KERNEL, name):
            if line.strip().startswith(("def ", "@tylo.kernel")) or "tylo.exp2(" in line:
                assert line.strip() not in text, f"docs/softmax.md copies {line.strip()!r}"


def test_fragments_page_has_the_softmax_section():
    text = (ROOT / "docs" / "fragments.md").read_text()
    assert "## Softmax: the three kinds of reduction" in text
    assert f'--8<-- "{KERNEL}:normalize"' in text


@pytest.mark.parametrize("name", MODULES)
def test_all_is_sorted_and_resolves(name):
    mod = importlib.import_module(name)
    names = list(mod.__all__)

    def kind(n: str) -> int:
        return 0 if n.isupper() else 1 if n[:1].isupper() else 2

    assert names == sorted(names, key=lambda n: (kind(n), n))
    assert all(hasattr(mod, n) for n in names)
