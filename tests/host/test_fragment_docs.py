"""The manual pages on fragments and on the GEMM: their examples run (doctest), and every
code section they include from the sources exists."""

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
PAGES = ["fragments.md", "gemm.md", "hopper.md"]
INCLUDE = re.compile(r'^--8<-- "([^":]+):([\w-]+)"$', re.MULTILINE)
MODULES = [
    "tylo.tile.ownership",
    "tylo.tile.fragment",
    "tylo.tile.reduce",
    "tylo.tile.fragment_io",
    "tylo.nvgpu.warp.mma",
    "tylo.nvgpu.warp.ldmatrix",
    "tylo.nvgpu.cpasync",
    "tylo.tile.access",
    "tylo.nvgpu.instructions",
    "tylo.ops.gemm.kernel",
    "tylo.ops.gemm.sass",
]


@pytest.mark.parametrize("page", PAGES)
def test_page_examples_run(page):
    check_page(ROOT / "docs" / page, FLAGS)


@pytest.mark.parametrize("page", PAGES)
def test_included_sections_exist(page):
    text = (ROOT / "docs" / page).read_text()
    includes = INCLUDE.findall(text)
    assert includes, f"{page} includes no code"
    for path, section in includes:
        source = (ROOT / path).read_text()
        start = source.find(f"# --8<-- [start:{section}]")
        end = source.find(f"# --8<-- [end:{section}]")
        assert 0 <= start < end, f"{page}: {path} has no section {section!r}"
        body = source[start:end].splitlines()[1:]
        assert any(line.strip() for line in body), f"{path}:{section} is empty"


def test_gemm_page_includes_the_whole_walkthrough():
    text = (ROOT / "docs" / "gemm.md").read_text()
    got = {s for p, s in INCLUDE.findall(text) if p == "tylo/ops/gemm/kernel.py"}
    assert got == {"config", "setup", "prefetch", "pipeline", "epilogue"}


@pytest.mark.parametrize("name", MODULES)
def test_module_doctests(name):
    mod = importlib.import_module(name)
    result = doctest.testmod(mod, optionflags=FLAGS)
    assert result.failed == 0


@pytest.mark.parametrize("name", MODULES)
def test_all_is_sorted_and_resolves(name):
    mod = importlib.import_module(name)
    names = list(mod.__all__)
    # isort style, as ruff's RUF022: CONSTANTS, then Classes, then functions

    def kind(n: str) -> int:
        return 0 if n.isupper() else 1 if n[:1].isupper() else 2

    assert names == sorted(names, key=lambda n: (kind(n), n))
    for n in names:
        assert hasattr(mod, n), f"{name}.{n}"
