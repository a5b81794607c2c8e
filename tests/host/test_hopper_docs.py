"""docs/hopper.md: its examples run (doctest, no GPU)."""

from __future__ import annotations

import doctest
from pathlib import Path

from doc_examples import check_page

DOC = Path(__file__).resolve().parents[2] / "docs" / "hopper.md"


def test_hopper_page_doctests() -> None:
    check_page(DOC, doctest.ELLIPSIS)
