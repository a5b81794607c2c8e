"""The built manual in a real browser (tylo issue 15, item 3): Playwright drives Debian's
``chromium`` (``executable_path``; Playwright's own browser download is never used), over a
localhost ``http.server``. On the GEMM page it finds the kernel's source, rendered as
highlighted code from ``tylo/ops/gemm/kernel.py``; on the pictures page, the layout picture
as an ``<svg>`` whose cells carry the layout's offsets; and on every page it opens, no
console error, page error or failed request.

Skips with its reason where Debian's chromium is missing (``.ci/run`` installs it); fails
where playwright or the manual's packages are missing, since the test extra installs them.
``TYLO_CHROMIUM=PATH`` names another
chromium binary (default ``/usr/bin/chromium``).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from extras import require_module

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("TYLO_CHROMIUM", "/usr/bin/chromium")
PAGES = ("", "status/", "api/tylo/")  # gemm/ and pictures/ are checked by their own tests


EXTRA = {  # module: its package in the test extra
    "playwright": "playwright",
    "mkdocs": "mkdocs",
    "material": "mkdocs-material",
    "mkdocstrings_handlers": "mkdocstrings-python",
    "pymdownx": "pymdown-extensions",
}


def _missing_chromium() -> str | None:
    """The skip reason where Debian's chromium (not a Python package) is absent."""
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        found = shutil.which("chromium") or "none"
        return f"needs Debian's chromium at {CHROMIUM} (apt-get install chromium; found: {found})"
    return None


@pytest.fixture(scope="module", autouse=True)
def _needs() -> None:
    """The test extra's packages fail the tests where missing; chromium skips them."""
    for mod, package in EXTRA.items():
        if importlib.util.find_spec(mod) is None:
            require_module(mod, package)
    reason = _missing_chromium()
    if reason is not None:
        pytest.skip(reason)


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def base_url(tmp_path_factory) -> Iterator[str]:
    site = tmp_path_factory.mktemp("site")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout}\n{proc.stderr}"
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def browser(base_url) -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        # --no-sandbox: CI and these machines run as root, where Chromium's sandbox refuses
        b = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield b
        finally:
            b.close()


def _open(browser, url: str):
    """A page at ``url`` and the list its console errors, page errors and failed loads
    are appended to."""
    page = browser.new_page()
    problems: list[str] = []
    page.on(
        "console",
        lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None,
    )
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url}"))
    page.on(
        "response",
        lambda r: problems.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None,
    )
    page.goto(url, wait_until="load")
    page.wait_for_load_state("networkidle")
    return page, problems


def _section(path: str, name: str) -> list[str]:
    source = (ROOT / path).read_text()
    body = source.split(f"[start:{name}]", 1)[1].split(f"[end:{name}]", 1)[0]
    return [ln.strip() for ln in body.splitlines()[1:-1] if ln.strip() and "--8<--" not in ln]


def test_gemm_page_shows_the_kernel_source(browser, base_url) -> None:
    page, problems = _open(browser, base_url + "gemm/")
    try:
        blocks = page.locator(".highlight pre code")
        texts = blocks.all_inner_texts()
        assert not any("--8<--" in t for t in texts), "a snippet marker rendered as text"
        for section in ("config", "setup", "pipeline", "epilogue"):
            lines = _section("tylo/ops/gemm/kernel.py", section)
            shown = [t for t in texts if all(ln in t for ln in lines)]
            assert shown, f"the GEMM kernel's {section!r} section is not shown on the page"
        kernel = blocks.filter(has_text=_section("tylo/ops/gemm/kernel.py", "pipeline")[0])
        assert kernel.first.is_visible()
        # highlighted by Pygments: keywords are spans with a class, not plain text
        assert kernel.first.locator("span.k, span.kn").count() > 0
        assert problems == []
    finally:
        page.close()


def test_pictures_page_shows_a_layout_picture(browser, base_url) -> None:
    sys.path.insert(0, str(ROOT))
    from tylo.layouts import parse

    layout = parse("((2,4),8):((1,16),2)")
    page, problems = _open(browser, base_url + "pictures/")
    try:
        svg = page.locator('[data-picture="layout"] svg')
        assert svg.count() == 1
        box = svg.bounding_box()
        assert box is not None and box["width"] > 100 and box["height"] > 100
        cells = svg.locator("g.cell")
        assert cells.count() == 64
        got = cells.evaluate_all(
            "gs => gs.map(g => [g.dataset.index, g.dataset.offset, g.textContent.trim()])"
        )
        for index, offset, label in got:
            assert int(offset) == layout(int(index)) and label == offset
        assert page.locator("svg g.cell").count() > 64  # the bank and MMA pictures too
        assert problems == []
    finally:
        page.close()


@pytest.mark.parametrize("path", PAGES)
def test_pages_load_without_console_errors(browser, base_url, path) -> None:
    page, problems = _open(browser, base_url + path)
    try:
        assert page.locator("h1").count() >= 1
        assert re.search(r"tylo", page.title())
        assert problems == [], problems
    finally:
        page.close()
