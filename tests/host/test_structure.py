"""The package's structure holds: no import cycles between modules (lazy imports included),
modules below 600 lines, and the moved module paths still work (with a DeprecationWarning).

``python3 tests/host/test_structure.py`` prints the import graph's cycles and module sizes.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("tylo", "benchmarks")
MAX_LINES = 600

# old path -> new module (docs/reading.md; kept for one release)
MOVED = {
    "tylo.ownership": "tylo.tile.ownership",
    "tylo.fragment": "tylo.tile.fragment",
    "tylo.tiles": "tylo.tile.access",
    "tylo.fragment_io": "tylo.tile.fragment_io",
    "tylo.mma": "tylo.nvgpu.warp.mma",
    "tylo.ldmatrix": "tylo.nvgpu.warp.ldmatrix",
    "tylo.copy": "tylo.nvgpu.cpasync",
    "tylo.ptx_ops": "tylo.nvgpu.instructions",
}


def _modules() -> dict[str, Path]:
    mods = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = path.relative_to(ROOT).with_suffix("")
            name = ".".join(rel.parts)
            mods[name.removesuffix(".__init__")] = path
    return mods


def _resolve(name: str, mods: dict[str, Path]) -> str | None:
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


def import_graph() -> dict[str, set[str]]:
    """module -> the modules of this tree it imports anywhere in its body (lazy imports
    count: a cycle through a function-level import is still a cycle in the design). A
    module importing its own package (to reach a sibling) is not an edge."""
    mods = _modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for m, path in mods.items():
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = m.split(".") if is_pkg else m.split(".")[:-1]
                    parts = parts[: len(parts) - (node.level - 1)]
                    mod = ".".join(parts + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                targets = [mod] + [f"{mod}.{a.name}" for a in node.names]
            else:
                continue
            for t in targets:
                r = _resolve(t, mods)
                if r is None or r == m or m.startswith(r + "."):
                    continue  # itself, or its own package
                if is_pkg and r.startswith(m + "."):
                    continue  # a package re-exporting its own modules
                graph[m].add(r)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (iterative Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def test_cycle_finder_finds_a_planted_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles() -> None:
    found = cycles(import_graph())
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_modules_stay_small() -> None:
    big = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*"):
            if path.suffix in (".py", ".c") and path.is_file():
                n = len(path.read_text(encoding="utf-8").splitlines())
                if n >= MAX_LINES:
                    big[str(path.relative_to(ROOT))] = n
    assert not big, f"modules of {MAX_LINES} lines or more (split them by concept): {big}"


def test_layouts_import_nothing_above() -> None:
    graph = import_graph()
    for m, deps in graph.items():
        if m.startswith("tylo.layouts"):
            above = {d for d in deps if not d.startswith("tylo.layouts")}
            assert above <= {"tylo.errors"}, f"{m} imports {sorted(above)}"


@pytest.mark.parametrize("old", sorted(MOVED))
def test_moved_paths_are_aliases_that_warn(old: str) -> None:
    code = (
        "import warnings, importlib, sys\n"
        "warnings.simplefilter('error', DeprecationWarning)\n"
        f"new = importlib.import_module({MOVED[old]!r})\n"
        "try:\n"
        f"    importlib.import_module({old!r})\n"
        "except DeprecationWarning as w:\n"
        "    print('warned:', w)\n"
        "warnings.simplefilter('ignore', DeprecationWarning)\n"
        f"old = importlib.import_module({old!r})\n"
        "print('same' if old is new else 'different')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert f"warned: tylo.{old.split('.', 1)[1]} moved to {MOVED[old]}" in out
    assert out.strip().endswith("same")


def test_old_reduce_path_keeps_every_name() -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        old = importlib.import_module("tylo.reduce")
    from tylo.tile import fragment, reduce

    assert old.reduce is fragment.reduce
    assert old.reduction_plan is reduce.reduction_plan
    assert old.ReductionPlan is reduce.ReductionPlan


if __name__ == "__main__":
    g = import_graph()
    for c in cycles(g):
        print("cycle:", " <-> ".join(c))
    print(f"import cycles: {len(cycles(g))} among {len(g)} modules")


def test_reading_page_names_every_module() -> None:
    """docs/reading.md gives every module a line: each module appears there in backticks,
    by its path below its package (``proofs/aligned.py``, ``warp/mma.py``, ``pyops.py``)."""
    text = (ROOT / "docs" / "reading.md").read_text(encoding="utf-8")
    missing = []
    for path in sorted((ROOT / "tylo").rglob("*.py")):
        if path.name == "__init__.py":
            continue
        rel = path.relative_to(ROOT / "tylo").parts
        name = (
            "/".join(rel[1:])
            if len(rel) > 1 and rel[0] not in ("cli", "pictures")
            else "/".join(rel)
        )
        if f"`{name}`" not in text:
            missing.append(str(path.relative_to(ROOT)))
    assert not missing, f"docs/reading.md does not name: {missing}"
