"""The doctests of every layouts module and of docs/layouts.md run as tests."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest
from doc_examples import check_page

ROOT = Path(__file__).resolve().parents[3]
MODULES = [
    "tylo.layouts",
    "tylo.layouts._compose_eval",
    "tylo.layouts._sampling",
    "tylo.layouts._symbols",
    "tylo.layouts.algebra",
    "tylo.layouts.compose",
    "tylo.layouts.divide",
    "tylo.layouts.inttuple",
    "tylo.layouts.inverse",
    "tylo.layouts.layout",
    "tylo.layouts.parse",
    "tylo.layouts.product",
    "tylo.layouts.strategies",
    "tylo.layouts.swizzle",
    "tylo.layouts.symbolic",
    "tylo.layouts.tv",
]
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


@pytest.mark.parametrize("name", MODULES)
def test_module_doctests(name):
    mod = importlib.import_module(name)
    result = doctest.testmod(mod, optionflags=FLAGS, verbose=False)
    assert result.failed == 0
    assert result.attempted > 0 or name == "tylo.layouts.errors"


def test_manual_doctests():
    check_page(ROOT / "docs" / "layouts.md", FLAGS)
