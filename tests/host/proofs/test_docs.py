"""The doctests of every proofs module and of docs/proofs.md run as tests."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest
from doc_examples import check_page

ROOT = Path(__file__).resolve().parents[3]
MODULES = [
    "tylo.layouts.proofs",
    "tylo.layouts.proofs.aligned",
    "tylo.layouts.proofs.bounded",
    "tylo.layouts.proofs.contiguous",
    "tylo.layouts.proofs.engine",
    "tylo.layouts.proofs.equal",
    "tylo.layouts.proofs.errors",
    "tylo.layouts.proofs.guards",
    "tylo.layouts.proofs.injective",
    "tylo.layouts.proofs.normalize",
    "tylo.layouts.proofs.obligation",
    "tylo.layouts.proofs.require",
    "tylo.layouts.proofs.search",
    "tylo.layouts.proofs.static",
    "tylo.layouts.proofs.verdict",
]
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
NO_EXAMPLES = {"tylo.layouts.proofs.errors"}


@pytest.mark.parametrize("name", MODULES)
def test_module_doctests(name: str) -> None:
    mod = importlib.import_module(name)
    result = doctest.testmod(mod, optionflags=FLAGS, verbose=False)
    assert result.failed == 0
    assert result.attempted > 0 or name in NO_EXAMPLES


def test_every_module_is_listed() -> None:
    pkg = ROOT / "tylo" / "layouts" / "proofs"
    found = {f"tylo.layouts.proofs.{p.stem}" for p in pkg.glob("*.py") if p.stem != "__init__"}
    assert found | {"tylo.layouts.proofs"} == set(MODULES)


def test_manual_doctests() -> None:
    check_page(ROOT / "docs" / "proofs.md", FLAGS)


@pytest.mark.parametrize("name", MODULES)
def test_all_is_sorted_and_resolves(name: str) -> None:
    mod = importlib.import_module(name)
    assert list(mod.__all__) == sorted(mod.__all__)
    assert all(hasattr(mod, n) for n in mod.__all__)


def test_no_hypothesis_or_backend_import() -> None:
    import subprocess
    import sys

    code = (
        "import sys, tylo.layouts.proofs\n"
        "bad = [m for m in sys.modules if m.startswith(('hypothesis', 'tylo.backend'))]\n"
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
