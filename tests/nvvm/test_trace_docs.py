"""docs/kernels.md: its doctests run (they compile, without a GPU) and every code include
points at a marked region of an example, so the manual never keeps a second copy."""

from __future__ import annotations

import doctest
import re
import sys
from pathlib import Path

from doc_examples import check_page

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "kernels.md"
INCLUDE = re.compile(r'^--8<-- "([^":]+):([\w-]+)"$', re.MULTILINE)


def test_doctests_pass():
    check_page(DOC, doctest.ELLIPSIS)


def test_includes_point_at_marked_example_regions():
    text = DOC.read_text()
    includes = INCLUDE.findall(text)
    assert ("examples/vector_add/kernel.py", "kernel") in includes
    assert ("examples/row_reduce/kernel.py", "kernel") in includes
    for path, name in includes:
        source = (ROOT / path).read_text()
        start, end = f"# --8<-- [start:{name}]", f"# --8<-- [end:{name}]"
        assert start in source and end in source, (path, name)
        assert source.index(start) < source.index(end)


def test_example_modules_import_from_the_repository_root():
    sys.path.insert(0, str(ROOT))
    try:
        import examples.row_reduce.kernel as rr
        import examples.vector_add.kernel as va
    finally:
        sys.path.remove(str(ROOT))
    for module in (rr, va):
        assert callable(module.reference) and callable(module.verify)
