"""mkdocs hook: each page with doctests states, under its title, the doctest option flags its
examples need and what they import, taken from the table in ``docs/index.md``.

The table is the single statement (``tests/host/test_site.py`` checks it against the pages
and the tests that run them); this hook repeats each row on its page, so that a reader of
any page sees what running its examples takes.
"""

from __future__ import annotations

import re
from typing import Any

ROW = re.compile(r"^\| \[(\w+\.md)\]\(\1\) \| `([^`]+)` \| ([^|]+) \| ([^|]+) \|$", re.MULTILINE)
MARKER = "<!-- doctest-pages:"

_rows: dict[str, tuple[str, str, str]] = {}


def rows_of(index_markdown: str) -> dict[str, tuple[str, str, str]]:
    """page -> (test, flags, needs) from the rows after the index's doctest-pages marker."""
    _, _, table = index_markdown.partition(MARKER)
    return {m[0]: (m[1], m[2].strip(), m[3].strip()) for m in ROW.findall(table)}


def note(page: str, test: str, flags: str, needs: str) -> str:
    """The admonition placed under ``page``'s title."""
    run = (
        "need only the installed package"
        if needs == "the package"
        else "import `examples.*`: run them from the root of a checkout"
    )
    return (
        f'!!! note "Running the examples on this page"\n'
        f"    `{test}` runs them with the doctest flags {flags}; they {run}.\n"
    )


def on_files(files: Any, config: Any) -> Any:
    """mkdocs event: read the table from ``index.md`` once per build."""
    _rows.clear()
    index = files.get_file_from_path("index.md")
    if index is not None:
        _rows.update(rows_of(index.content_string))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """mkdocs event: insert the note after the page's first heading."""
    row = _rows.get(page.file.src_uri)
    if row is None:
        return markdown
    head, sep, rest = markdown.partition("\n")
    if not head.startswith("# "):
        return note(page.file.src_uri, *row) + "\n" + markdown
    return head + sep + "\n" + note(page.file.src_uri, *row) + rest
