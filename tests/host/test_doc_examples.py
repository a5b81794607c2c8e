"""The doc-example harness (tests/doc_examples.py): every ``>>>`` example of a page runs, or
is skipped for the one reason a page may state (it needs a GPU), and the harness refuses
every other way an example could go unrun. Each refusal is tried on a small page written
here; the real pages are each run by their own test, and checked below to use the harness."""

from __future__ import annotations

import doctest
import re
from pathlib import Path

import doc_examples
import pytest
from doc_examples import DocExampleError, DocExampleSkipped, check_page, run_page
from hypothesis import given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
FLAGS = doctest.ELLIPSIS


def page(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "page.md"
    path.write_text(text)
    return path


GOOD = """# A page

```python
>>> x = 2
>>> x + 1
3

```

Text.

```python
>>> print("a   b")
a   b

```
"""

GPU_BLOCK = """<!-- doctest: needs-gpu: launches a kernel -->
```python
>>> x * 10
20
>>> 1 / 0

```
"""


def test_a_good_page_runs_every_example(tmp_path) -> None:
    run = check_page(page(tmp_path, GOOD), FLAGS)
    assert (run.examples, run.attempted, run.failed, run.skips) == (3, 3, 0, ())


def test_a_failing_example_fails_the_page(tmp_path) -> None:
    with pytest.raises(DocExampleError, match=r"page.md: 1 example\(s\) failed"):
        check_page(page(tmp_path, GOOD.replace("3\n", "4\n")), FLAGS)


def test_an_unexplained_skip_directive_is_refused(tmp_path) -> None:
    text = GOOD.replace(">>> x + 1", ">>> x + 1  # doctest: +SKIP")
    with pytest.raises(DocExampleError, match=r"page.md:5: the example is skipped .*needs-gpu"):
        check_page(page(tmp_path, text), FLAGS)


def test_skip_in_the_flags_is_refused(tmp_path) -> None:
    with pytest.raises(DocExampleError, match="SKIP in the option flags"):
        check_page(page(tmp_path, GOOD), FLAGS | doctest.SKIP)


@pytest.mark.parametrize("indent", ["\u00a0", "> ", " > ", "\u2003\u2003"])
def test_a_prompt_doctest_would_not_run_is_refused(tmp_path, indent) -> None:
    # doctest reads a prompt only after plain spaces (tabs it expands): a no-break space or a
    # quote marker before it hides the line from doctest, which would count it as output
    text = GOOD.replace("3\n\n```", f"3\n\n{indent}>>> x - 1\n1\n\n```")
    with pytest.raises(DocExampleError, match=r"lines at \[8\] are not examples doctest runs"):
        check_page(page(tmp_path, text), FLAGS)


def test_a_page_without_examples_is_refused(tmp_path) -> None:
    with pytest.raises(DocExampleError, match="no >>> examples"):
        check_page(page(tmp_path, "# Nothing\n\n```python\nx = 1\n```\n"), FLAGS)


def test_gpu_examples_are_skipped_with_the_pages_reason(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("TYLO_REQUIRE_GPU_RUNTIME", raising=False)
    monkeypatch.setattr(doc_examples, "gpu_present", lambda: False)
    path = page(tmp_path, GOOD + "\n" + GPU_BLOCK)
    with pytest.warns(DocExampleSkipped) as caught:
        run = check_page(path, FLAGS)
    assert (run.examples, run.attempted, run.failed) == (5, 3, 0)
    assert [str(s) for s in run.skips] == [
        "page.md:20: skipped: needs a GPU: launches a kernel",
        "page.md:22: skipped: needs a GPU: launches a kernel",
    ]
    assert [str(w.message) for w in caught] == [str(s) for s in run.skips]


def test_gpu_examples_run_where_a_gpu_is_present(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(doc_examples, "gpu_present", lambda: True)
    with pytest.raises(DocExampleError, match="ZeroDivisionError"):
        check_page(page(tmp_path, GOOD + "\n" + GPU_BLOCK), FLAGS)
    run = run_page(page(tmp_path, GOOD + "\n" + GPU_BLOCK.replace(">>> 1 / 0\n", "")), FLAGS)
    assert (run.examples, run.attempted, run.failed, run.skips) == (4, 4, 0, ())


def test_gpu_skips_fail_when_the_gpu_tier_is_required(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TYLO_REQUIRE_GPU_RUNTIME", "1")
    monkeypatch.setattr(doc_examples, "gpu_present", lambda: False)
    with pytest.raises(DocExampleError, match="TYLO_REQUIRE_GPU_RUNTIME=1, and no GPU for"):
        check_page(page(tmp_path, GOOD + "\n" + GPU_BLOCK), FLAGS)


@pytest.mark.parametrize(
    "marker, message",
    [
        ("<!-- doctest: needs-gpu: -->", r"page.md:12: the needs-gpu marker states no reason"),
        ("<!-- doctest: needs-gpu:    -->", "states no reason"),
        ("<!-- doctest: slow: takes a minute -->", r"page.md:12: unknown doctest marker"),
        ("<!-- doctest: skip -->", "unknown doctest marker"),
        ("<!-- doctest: needs-gpu: a reason -->\n", "not on the line directly above"),
    ],
)
def test_a_bad_marker_is_refused(tmp_path, monkeypatch, marker, message) -> None:
    monkeypatch.setattr(doc_examples, "gpu_present", lambda: False)
    text = GOOD.replace("Text.\n\n", "Text.\n\n" + marker + "\n")
    with pytest.raises(DocExampleError, match=message):
        check_page(page(tmp_path, text), FLAGS)


def test_a_marker_above_a_block_without_examples_is_refused(tmp_path) -> None:
    text = GOOD + "\n<!-- doctest: needs-gpu: why -->\n```python\nx = 1\n```\n"
    with pytest.raises(DocExampleError, match="above a block with no >>> examples"):
        check_page(page(tmp_path, text), FLAGS)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.booleans(), st.booleans()), min_size=1, max_size=5))
def test_every_example_is_counted_ran_or_skipped_with_a_reason(blocks) -> None:
    """Pages of random blocks (some marked needs-gpu, some holding a skip directive): the
    page passes exactly when no directive is there, and then every example either ran or
    is one of the marked block's, reported at its own line."""
    lines, expected_skips, directive = ["# Page", ""], [], False
    for k, (count, marked, skip) in enumerate(blocks):
        if marked:
            lines.append(f"<!-- doctest: needs-gpu: block {k} -->")
        lines.append("```python")
        lines.append(">>> 0")
        lines.append("0")
        if marked:
            expected_skips.append(len(lines) - 1)
        for j in range(count):
            flag = "  # doctest: +SKIP" if skip and j == 0 else ""
            directive |= bool(flag)
            lines.append(f">>> {j} + 1{flag}")
            lines.append(str(j + 1))
            if marked:
                expected_skips.append(len(lines) - 1)
        lines.extend(["", "```", ""])
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "page.md"
        path.write_text("\n".join(lines))
        if directive:
            with pytest.raises(DocExampleError, match="skipped .*without a stated reason"):
                run_page(path, FLAGS, gpu=False)
            return
        run = run_page(path, FLAGS, gpu=False)
    n = sum(1 + c for c, _, _ in blocks)
    assert run.examples == n and run.failed == 0
    assert [s.line for s in run.skips] == expected_skips
    assert run.attempted == n - len(expected_skips)


def test_every_page_with_examples_is_run_by_the_harness() -> None:
    """Each docs page (and README.md) with ``>>>`` lines is named by a test file that calls
    check_page; no test runs a page with doctest.testfile any more (no minimum counts)."""
    tests = {p: p.read_text() for p in (ROOT / "tests").rglob("test_*.py")}
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    with_examples = [p for p in pages if re.search(r"^\s*>>>", p.read_text(), re.MULTILINE)]
    assert len(with_examples) >= 10
    for md in with_examples:
        users = [t for t, text in tests.items() if md.name in text and "check_page(" in text]
        assert users, f"{md.name} has >>> examples but no test runs it with check_page"
    for t, text in tests.items():
        if t.name != "test_doc_examples.py":
            assert "doctest.testfile(" not in text, f"{t} runs a page without the harness"
