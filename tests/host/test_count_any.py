"""tools/count_any.py: the count of ``Any`` annotations in public signatures (issue 34, item
11), on a small package whose answer is counted by hand, and on tylo itself."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("_count_any", ROOT / "tools" / "count_any.py")
assert _spec is not None and _spec.loader is not None
count_any = importlib.util.module_from_spec(_spec)
sys.modules["_count_any"] = count_any  # dataclasses look their module up
_spec.loader.exec_module(count_any)

PACKAGE = {
    "__init__.py": """
from pkg.a import C, f
__all__ = ["C", "f", "g"]
def g(x: int) -> int: ...
""",
    # f: x, args, kwargs and the return (4); C: __init__'s v and m's return (2); h, _p and
    # __repr__ are not public; q: quoted annotations (2)
    "a.py": """
import typing
from typing import Any
__all__ = ["C", "f", "q"]
def f(x: Any, y: int, *args: Any, z: int = 0, **kwargs: list[Any]) -> Any: ...
def h(x: Any) -> Any: ...
def q(x: "Any") -> "dict[str, Any]": ...
class C:
    def __init__(self, v: Any, w: int) -> None: ...
    def m(self) -> typing.Any: ...
    def _p(self, z: Any) -> None: ...
    def __repr__(self) -> Any: ...
""",
    # a private module: counted only where a public module re-exports it (b.py, relatively)
    "_private.py": """
from typing import Any
__all__ = ["p", "unexported"]
def p(x: Any) -> None: ...
def unexported(x: Any) -> None: ...
""",
    "b.py": """
from ._private import p
__all__ = ["p"]
""",
    # a computed __all__ over a lazy-import table: f again, counted once
    "lazy.py": """
_LAZY = {"f": "pkg.a", "p": "pkg.b"}
__all__ = sorted(_LAZY)
""",
    # an alias of Any: counted only with aliases=True (and by name, in every module)
    "alias.py": """
from typing import Any
Value = Any
NotAny = int
__all__ = ["v"]
def v(x: Value, y: NotAny, z: "tuple[Value, ...]") -> int: ...
""",
}


def test_the_count_of_a_package_counted_by_hand(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    for name, text in PACKAGE.items():
        (pkg / name).write_text(text.lstrip())
    total, findings = count_any.count_any(pkg)
    got = {(f.module, f.qualname): f.annotations for f in findings}
    assert got == {
        ("pkg._private", "p"): ("x",),
        ("pkg.a", "C.__init__"): ("v",),
        ("pkg.a", "C.m"): ("return",),
        ("pkg.a", "f"): ("x", "args", "kwargs", "return"),
        ("pkg.a", "q"): ("x", "return"),
    }
    assert total == 9
    total, findings = count_any.count_any(pkg, aliases=True)
    got = {(f.module, f.qualname): f.annotations for f in findings}
    assert got[("pkg.alias", "v")] == ("x", "z") and total == 11


def test_tylo_counts_and_the_layouts_keep_their_cut(capsys: pytest.CaptureFixture[str]) -> None:
    """The script runs on tylo and prints one line per signature, then the total; the
    algebra's public signatures keep at most the Any annotations left after issue 34's cut."""
    total, findings = count_any.count_any(ROOT / "tylo")
    assert total == sum(len(f.annotations) for f in findings) > 0
    assert count_any.main([str(ROOT / "tylo")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(findings) + 1
    assert lines[-1] == f"{total} Any annotations in {len(findings)} public signatures"
    _, findings = count_any.count_any(ROOT / "tylo", aliases=True)
    layouts = sum(len(f.annotations) for f in findings if f.module.startswith("tylo.layouts"))
    assert layouts <= LAYOUTS_LIMIT, f"tylo.layouts: {layouts} Any annotations (with aliases)"


# the Any annotations, aliases of Any (IntTuple, Value, Fact) included, left in tylo.layouts'
# public signatures: 229 before issue 34's cut
LAYOUTS_LIMIT = 204
