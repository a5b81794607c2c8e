"""Count the ``Any`` annotations in tylo's public signatures (issue 34, item 11).

A public signature is one of a function, or a public method (no leading underscore, or
``__init__``/``__call__``) of a class, that a public module (no path component with a
leading underscore) lists in its ``__all__``. A name that a module's ``__all__`` re-exports
is followed through ``from ... import`` to the module that defines it, and every definition
is counted once, however many modules export it. Counted: each parameter annotation and
each return annotation that mentions ``Any`` (``Any`` or ``typing.Any``, at any depth: so
``list[Any]`` counts once). With ``aliases``, a module-level alias of ``Any`` anywhere in
the package (``IntTuple = Any``) counts as ``Any`` too, by name (so it may over-count a
same-named non-alias elsewhere). The source is read, never imported.

``python tools/count_any.py [--aliases] [ROOT]`` prints one line per signature
(``module.qualname: parameter names``, ``return`` for the return annotation), then the
total; ROOT is the package directory, ``tylo`` by default.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Finding", "count_any", "main"]

FunctionDef = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass(frozen=True)
class Finding:
    """One public signature with ``Any`` in it: where, and which annotations."""

    module: str
    qualname: str
    annotations: tuple[str, ...]  # parameter names, and "return"


def _mentions_any(node: ast.expr | None, names: frozenset[str] = frozenset({"Any"})) -> bool:
    if node is None:
        return False
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id in names:
            return True
        if isinstance(sub, ast.Attribute) and sub.attr == "Any":
            return True
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            try:  # a quoted annotation
                if _mentions_any(ast.parse(sub.value, mode="eval").body, names):
                    return True
            except SyntaxError:
                pass
    return False


def _any_annotations(fn: FunctionDef, anys: frozenset[str]) -> tuple[str, ...]:
    a = fn.args
    params = [*a.posonlyargs, *a.args, *a.kwonlyargs]
    params += [p for p in (a.vararg, a.kwarg) if p is not None]
    names = [p.arg for p in params if _mentions_any(p.annotation, anys)]
    if _mentions_any(fn.returns, anys):
        names.append("return")
    return tuple(names)


def _aliases_of_any(tree: ast.Module) -> set[str]:
    """The module-level names bound to exactly ``Any`` (``X = Any``, ``X: TypeAlias = Any``)."""
    out = set()
    for node in tree.body:
        if isinstance(node, ast.Assign):
            value, targets = node.value, node.targets
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            value, targets = node.value, [node.target]
        else:
            continue
        if isinstance(value, (ast.Name, ast.Attribute)) and _mentions_any(value):
            out |= {t.id for t in targets if isinstance(t, ast.Name)}
    return out


def _is_public(name: str) -> bool:
    return not name.startswith("_") or name in ("__init__", "__call__")


class _Package:
    """The modules of one package directory, parsed on demand."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.name = root.name
        self._trees: dict[str, ast.Module | None] = {}

    def path(self, module: str) -> Path | None:
        rel = module.split(".")[1:]
        base = self.root.joinpath(*rel)
        for p in (base.with_suffix(".py"), base / "__init__.py"):
            if p.is_file():
                return p
        return None

    def tree(self, module: str) -> ast.Module | None:
        if module not in self._trees:
            p = self.path(module)
            self._trees[module] = None if p is None else ast.parse(p.read_text(), str(p))
        return self._trees[module]

    def modules(self) -> list[str]:
        out = []
        for p in sorted(self.root.rglob("*.py")):
            parts = [self.name, *p.relative_to(self.root).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            out.append(".".join(parts))
        return out

    def absolute(self, module: str, node: ast.ImportFrom) -> str:
        if node.level == 0:
            return node.module or ""
        here = self.path(module)
        is_pkg = here is not None and here.name == "__init__.py"
        base = module.split(".")
        base = base if is_pkg else base[:-1]
        base = base[: len(base) - (node.level - 1)]
        return ".".join(base + ([node.module] if node.module else []))

    def resolve(self, module: str, name: str, depth: int = 0) -> tuple[str, ast.stmt] | None:
        """The module defining ``name`` as seen from ``module``, and its definition."""
        tree = self.tree(module)
        if tree is None or depth > 20:
            return None
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if node.name == name:
                    return module, node
            elif isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if (alias.asname or alias.name) == name:
                        src = self.absolute(module, node)
                        if src.split(".")[0] != self.name:
                            return None
                        if self.path(src) is None:  # a submodule, not a definition
                            return None
                        return self.resolve(src, alias.name, depth + 1)
        return None


def _literal(tree: ast.Module, name: str) -> object:
    """The value of the module-level ``name = <literal>`` in ``tree``, or None where there is
    none or it is not a literal."""
    for node in tree.body:
        value: ast.expr | None = None
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            value = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            value = node.value if node.target.id == name else None
        if value is not None:
            try:
                return ast.literal_eval(value)
            except ValueError:
                return None
    return None


def _exports(tree: ast.Module) -> dict[str, str | None]:
    """The names a module exports: its literal ``__all__`` (to resolve from the module
    itself: None), or, where ``__all__`` is computed, the keys of its lazy-import table
    ``_LAZY`` (name -> the module that defines it)."""
    names = _literal(tree, "__all__")
    if isinstance(names, (list, tuple)):
        return {str(n): None for n in names}
    lazy = _literal(tree, "_LAZY")
    if isinstance(lazy, dict):
        return {str(k): str(v) for k, v in lazy.items()}
    return {}


def count_any(root: Path, aliases: bool = False) -> tuple[int, list[Finding]]:
    """The number of ``Any`` annotations in the public signatures of the package at
    ``root``, and the signatures that hold them, sorted; with ``aliases``, names bound to
    ``Any`` at module level count as ``Any``."""
    pkg = _Package(root)
    anys = {"Any"}
    if aliases:
        for module in pkg.modules():
            tree = pkg.tree(module)
            anys |= _aliases_of_any(tree) if tree is not None else set()
    any_names = frozenset(anys)
    seen: set[tuple[str, str]] = set()
    findings: list[Finding] = []
    for module in pkg.modules():
        if any(part.startswith("_") for part in module.split(".")):
            continue
        tree = pkg.tree(module)
        if tree is None:
            continue
        for name, source in _exports(tree).items():
            hit = pkg.resolve(source or module, name)
            if hit is None:
                continue
            where, node = hit
            fns: list[tuple[str, FunctionDef]] = []
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                fns.append((node.name, node))
            elif isinstance(node, ast.ClassDef):
                fns += [
                    (f"{node.name}.{f.name}", f)
                    for f in node.body
                    if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and _is_public(f.name)
                ]
            for qualname, fn in fns:
                if (where, qualname) in seen:
                    continue
                seen.add((where, qualname))
                names = _any_annotations(fn, any_names)
                if names:
                    findings.append(Finding(where, qualname, names))
    findings.sort(key=lambda f: (f.module, f.qualname))
    return sum(len(f.annotations) for f in findings), findings


def main(argv: list[str] | None = None) -> int:
    """Print the count and the signatures; the exit status is 0."""
    args = list(sys.argv[1:] if argv is None else argv)
    aliases = "--aliases" in args
    args = [a for a in args if a != "--aliases"]
    root = Path(args[0]) if args else Path(__file__).resolve().parents[1] / "tylo"
    total, findings = count_any(root, aliases)
    for f in findings:
        print(f"{f.module}.{f.qualname}: {', '.join(f.annotations)}")
    what = "Any annotations (aliases of Any included)" if aliases else "Any annotations"
    print(f"{total} {what} in {len(findings)} public signatures")
    return 0


if __name__ == "__main__":
    sys.exit(main())
