"""examples/ holds short walkthroughs: every file stays under about 300 lines, and the
walkthrough of tylo.ops plans (and proves) each op on a machine without a GPU or torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NO_TORCH = (
    "import runpy, sys; sys.modules['torch'] = None; "
    "runpy.run_path(sys.argv[1], run_name='__main__')"
)


def test_walkthrough_files_are_short():
    long = {
        str(p.relative_to(ROOT)): n
        for p in (ROOT / "examples").rglob("*.py")
        if (n := len(p.read_text().splitlines())) > 300
    }
    assert not long, f"examples are walkthroughs of at most ~300 lines: {long}"


def test_ops_walkthrough_plans_without_torch():
    script = str(ROOT / "examples" / "ops_from_torch.py")
    r = subprocess.run(
        [sys.executable, "-c", NO_TORCH, script],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("gemm 4096^3: ") and any(
        line.startswith("attention D=128: ") for line in lines
    )
    proved = [line for line in lines if line.endswith(": proved")]
    assert len(proved) >= 10 and not any(line.endswith(": disproved") for line in lines)
    assert lines[-1] == "torch is not installed: planned, not run (pip install 'tylo[torch]')"
