"""examples/layout_tour.py runs and its results check out by brute force."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_layout_tour(capsys):
    spec = importlib.util.spec_from_file_location(
        "layout_tour", ROOT / "examples" / "layout_tour.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--verify"]) == 0
    out = capsys.readouterr().out
    assert "verify: ok" in out and "S<3,3,3>" in out and "needs a fact" in out
