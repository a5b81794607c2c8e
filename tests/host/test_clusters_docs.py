"""docs/clusters.md: its examples run (doctest, no GPU)."""

from __future__ import annotations

import doctest
from pathlib import Path

from doc_examples import check_page

DOC = Path(__file__).resolve().parents[2] / "docs" / "clusters.md"


def test_clusters_page_doctests() -> None:
    check_page(DOC, doctest.ELLIPSIS)
