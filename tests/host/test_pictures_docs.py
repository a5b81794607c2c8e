"""docs/pictures.md: every example runs (doctest) and its outputs are what tylo prints."""

from __future__ import annotations

import doctest
from pathlib import Path

from doc_examples import check_page

DOC = Path(__file__).resolve().parents[2] / "docs" / "pictures.md"


def test_pictures_manual_examples_run() -> None:
    check_page(DOC, doctest.ELLIPSIS)


def test_module_doctests_run() -> None:
    import tylo.pictures
    import tylo.pictures.layouts
    import tylo.pictures.ownership

    for module in (tylo.pictures, tylo.pictures.layouts, tylo.pictures.ownership):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert result.attempted >= 1 and result.failed == 0, (module.__name__, result)
