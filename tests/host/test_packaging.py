"""Packaging: the LICENSE is the Apache-2.0 text the metadata declares, ``py.typed`` ships,
the ``tylo`` console script resolves to the command, the hypothesis strategies need nothing
but hypothesis and tylo.layouts, and ``from tylo import *`` leaves Python's builtins alone."""

from __future__ import annotations

import builtins
import hashlib
import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest

import tylo

ROOT = Path(__file__).resolve().parents[2]
tomllib = pytest.importorskip("tomllib", reason="needs Python >= 3.11 for tomllib (found older)")
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_license_file_is_the_declared_apache_2() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert PROJECT["project"]["license"] == {"text": "Apache-2.0"}
    assert text.split()[:4] == ["Apache", "License", "Version", "2.0,"]
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
    assert "END OF TERMS AND CONDITIONS" in text
    # the unmodified text published by the ASF (www.apache.org/licenses/LICENSE-2.0.txt)
    assert hashlib.md5(text.encode()).hexdigest() == "3b83ef96387f14655fc854ddc3c6bd57"
    assert "LICENSE" in PROJECT["tool"]["setuptools"]["license-files"]
    classifiers = PROJECT["project"]["classifiers"]
    assert "License :: OSI Approved :: Apache Software License" in classifiers
    assert all(" :: " in c and c == c.strip() for c in classifiers)
    assert len(set(classifiers)) == len(classifiers)
    assert "Typing :: Typed" in classifiers


def test_py_typed_ships() -> None:
    assert (ROOT / "tylo" / "py.typed").is_file()
    assert "py.typed" in PROJECT["tool"]["setuptools"]["package-data"]["tylo"]


def test_console_script_is_the_command() -> None:
    entry = PROJECT["project"]["scripts"]["tylo"]
    module, _, name = entry.partition(":")
    import importlib

    main = getattr(importlib.import_module(module), name)
    sig = inspect.signature(main)
    assert list(sig.parameters) == ["argv"] and sig.parameters["argv"].default is None
    assert (ROOT / "tylo" / "cli" / "__main__.py").is_file()


def test_no_unverified_urls() -> None:
    # no project URL is declared until its host is known (the project name identifies it)
    assert "urls" not in PROJECT["project"] or all(
        u.startswith("https://") for u in PROJECT["project"]["urls"].values()
    )


def test_strategies_and_pictures_need_no_cuda() -> None:
    code = """
import sys
for blocked in ("llvmlite", "cuda", "tylo.backend", "tylo.kernel", "tylo.cli", "tylo.pictures"):
    sys.modules[blocked] = None  # importing any of them now fails
import hypothesis, hypothesis.strategies, tylo.layouts
import sympy  # the symbolic strategies need it (tylo.layouts imports it on first use)
before = set(sys.modules)
import tylo.layouts.strategies as S
new = sorted(m for m in set(sys.modules) - before
             if not m.startswith(("tylo.layouts", "hypothesis", "_hypothesis"))
             and m.split(".")[0] not in sys.stdlib_module_names)
assert not new, new
from hypothesis import Phase, given, settings
from tylo.layouts import size
@settings(max_examples=3, database=None, phases=[Phase.generate], deadline=None)
@given(S.layouts(), S.swizzled_layouts(), S.symbolic_layouts())
def draw(a, b, c):
    assert size(a) >= 1 and size(b) >= 1 and c
draw()
del sys.modules["tylo.pictures"]
import tylo.pictures  # pictures need no CUDA library either (llvmlite and cuda stay blocked)
print("ok")
"""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_star_import_does_not_shadow_builtins() -> None:
    ns: dict[str, object] = {}
    exec("from tylo import *", ns)  # noqa: S102 - the star import is what is tested
    shadowed = [n for n in vars(builtins) if n in ns and ns[n] is not getattr(builtins, n)]
    assert shadowed == []
    assert not set(tylo.__all__) & set(vars(builtins))
    # the kernel-side versions stay reachable as attributes
    assert tylo.abs is tylo.kernel.abs and tylo.range is tylo.kernel.range
    assert {"abs", "range"} <= set(dir(tylo)) and {"abs", "range"} == tylo._SHADOWS_BUILTINS
    # everything else of the lazy table is still exported
    assert set(tylo.__all__) == ({"__version__"} | set(tylo._LAZY)) - tylo._SHADOWS_BUILTINS
    assert tylo.__all__ == sorted(tylo.__all__)
