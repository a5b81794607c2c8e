"""docs/ops.md: every ``>>>`` example runs (doctest, no GPU), and the page names every
public function of ``tylo.ops`` with its keyword arguments as they are."""

from __future__ import annotations

import doctest
import inspect
from pathlib import Path

from doc_examples import check_page

import tylo.ops

PAGE = Path(__file__).resolve().parents[2] / "docs" / "ops.md"


def test_page_examples_run():
    check_page(PAGE, doctest.ELLIPSIS)


def test_page_shows_each_ops_signature():
    text = PAGE.read_text()
    for name in tylo.ops.__all__:
        fn = getattr(getattr(tylo.ops, name), name)
        params = ", ".join(
            p.name if p.default is inspect.Parameter.empty else f"{p.name}={p.default!r}"
            for p in inspect.signature(fn).parameters.values()
        )
        shown = params.replace("k, v, causal", "k, v, *, causal")
        shown = shown.replace("b, out=", "b, *, out=").replace("x, dim=", "x, *, dim=")
        assert f"tylo.ops.{name}({shown})" in text, (name, shown)
