"""The manual, the docstrings and the comments cite no file outside the repository: the
design notes beside a developer's checkout are not shipped, so what the code relies on from
them is in docs/ (toolchain.md, measuring.md, proofs.md), in the project's own words."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUTSIDE = re.compile(
    r"shared/design|\b(TOOLCHAIN|PERFORMANCE|PROOFS|ARCHITECTURE|STYLE|"
    r"LAYOUT_EXAMPLES)(\.md)?\b"
)


def test_nothing_cites_the_design_notes():
    found = []
    for top in ("tylo", "docs", "tests", "benchmarks", "tools", "examples"):
        for path in (ROOT / top).rglob("*"):
            if path.suffix in (".py", ".md", ".c", ".h", ".yml") and path.is_file():
                for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                    if OUTSIDE.search(line) and path.name != Path(__file__).name:
                        found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()[:80]}")
    for n, line in enumerate((ROOT / "README.md").read_text().splitlines(), 1):
        if OUTSIDE.search(line):
            found.append(f"README.md:{n}")
    assert not found, "citations of files outside the repository:\n" + "\n".join(found)
