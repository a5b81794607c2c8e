"""``tylo layout`` and ``tylo prove`` on static layouts need no sympy (issue 35, item 4).

Each command runs as ``python -m tylo.cli`` in a process where importing sympy fails (a
meta-path finder refuses it): a static layout's answer must be printed in full and equal
to the answer of a normal process. A symbolic layout in the same blocked process fails,
so the block is real. ``tylo layout`` of a small static layout imports no numpy either.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

BLOCK = """
import sys
class _NoSympy:
    def find_spec(self, name, path=None, target=None):
        if name == "sympy" or name.startswith("sympy."):
            raise ImportError("sympy is blocked in this test")
        return None
sys.meta_path.insert(0, _NoSympy())
"""

RUN = """
import atexit, runpy, sys
atexit.register(lambda: print("numpy imported:", "numpy" in sys.modules, file=sys.stderr))
sys.argv = ["tylo", *sys.argv[1:]]
runpy.run_module("tylo.cli", run_name="__main__")
"""


def cli(*args: str, block: bool) -> subprocess.CompletedProcess:
    code = (BLOCK if block else "") + RUN
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        check=False,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        timeout=120,
    )


STATIC = [
    ("layout", "((2,4),8):((1,16),2)"),
    ("layout", "(8,8):(8,1)", "--limit", "0"),
    ("layout", "S<3,3,3> o (8,64):(64,1)", "--bank", "2"),
    ("layout", "((4,8),(2,2)):((32,1),(16,8))", "--tv", "16,8"),
    ("prove", "injective", "((2,4),8):((1,16),2)"),
    ("prove", "injective", "(4,4):(1,2)"),
    ("prove", "injective", "S<3,3,3> o (8,64):(64,1)"),
    ("prove", "contiguous", "(8,8):(1,8)", "--vector", "8"),
    ("prove", "aligned", "(8,8):(1,8)", "--vector", "8", "--elem-bytes", "2"),
    ("prove", "bounded", "(8,8):(1,8)", "--extent", "64"),
    ("prove", "equal", "(4,8):(8,1)", "(4,8):(8,1)"),
    ("prove", "equal", "(4,8):(8,1)", "(8,4):(1,8)"),
]


@pytest.mark.parametrize("args", STATIC, ids=lambda a: " ".join(a))
def test_static_commands_answer_without_sympy(args: tuple[str, ...]) -> None:
    blocked, normal = cli(*args, block=True), cli(*args, block=False)
    assert "blocked" not in blocked.stderr, blocked.stderr
    assert (blocked.returncode, blocked.stdout) == (normal.returncode, normal.stdout)
    assert blocked.returncode in (0, 1) and blocked.stdout.strip()


def test_a_small_static_table_imports_no_numpy() -> None:
    res = cli("layout", "((2,4),8):((1,16),2)", block=True)
    assert res.returncode == 0 and "numpy imported: False" in res.stderr


@pytest.mark.parametrize(
    "args",
    [("layout", "(M,K):(1,lda)", "--set", "M=8", "--set", "K=2", "--set", "lda=16"),
     ("prove", "injective", "(M,K):(1,lda)", "--assume", "lda >= M")],
)  # fmt: skip
def test_symbolic_commands_do_need_sympy(args: tuple[str, ...]) -> None:
    """The block is real: a symbolic layout cannot be read without sympy."""
    assert cli(*args, block=False).returncode == 0
    blocked = cli(*args, block=True)
    assert blocked.returncode != 0 and "sympy is blocked" in blocked.stderr
