"""Which names a block of kernel source binds (for loop-carried and merged names).

:func:`assigned_names` is what :mod:`tylo.kernel.ast_rewrite` carries through a ``for``
or merges after an ``if``: names bound by assignments, loop targets, ``with ... as``,
walrus, imports, definitions and ``match`` captures, not looking inside nested scopes,
and tylo's own ``__tylo`` names excluded.
"""

from __future__ import annotations

import ast

__all__ = ["assigned_names"]

_PREFIX = "__tylo"


class _Names(ast.NodeVisitor):
    """Names bound by statements, not looking inside nested scopes."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def _target(self, node: ast.AST) -> None:
        if isinstance(node, ast.Name):
            self.names.add(node.id)
        elif isinstance(node, (ast.Tuple, ast.List)):
            for e in node.elts:
                self._target(e)
        elif isinstance(node, ast.Starred):
            self._target(node.value)
        elif isinstance(node, (ast.Subscript, ast.Attribute)):
            # `accs[u] = v` / `obj.field = v` mutate the container bound to a name: carry
            # that name (its leaves) through loops and branches like a rebinding
            base = node.value
            while isinstance(base, (ast.Subscript, ast.Attribute)):
                base = base.value
            if isinstance(base, ast.Name):
                self.names.add(base.id)

    def visit_Assign(self, node: ast.Assign) -> None:
        for t in node.targets:
            self._target(t)
        self.visit(node.value)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._target(node.target)
        self.visit(node.value)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self._target(node.target)
            self.visit(node.value)

    def visit_For(self, node: ast.For) -> None:
        self._target(node.target)
        self.generic_visit(node)

    def visit_With(self, node: ast.With) -> None:
        for item in node.items:
            if item.optional_vars is not None:
                self._target(item.optional_vars)
        self.generic_visit(node)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self._target(node.target)
        self.visit(node.value)

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self.names.add((a.asname or a.name).split(".")[0])

    visit_ImportFrom = visit_Import  # type: ignore[assignment]

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self.names.add(node.name)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.names.add(node.name)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        return

    def visit_MatchAs(self, node: ast.MatchAs) -> None:
        if node.name:
            self.names.add(node.name)
        self.generic_visit(node)

    def visit_MatchStar(self, node: ast.MatchStar) -> None:
        if node.name:
            self.names.add(node.name)

    def visit_MatchMapping(self, node: ast.MatchMapping) -> None:
        if node.rest:
            self.names.add(node.rest)
        self.generic_visit(node)

    def _comprehension(self, node: ast.AST) -> None:
        for n in ast.walk(node):  # only walrus targets leak out of comprehensions
            if isinstance(n, ast.NamedExpr):
                self._target(n.target)

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comprehension  # type: ignore[assignment]


def assigned_names(stmts: list[ast.stmt]) -> list[str]:
    """Sorted names bound by ``stmts`` (tylo's own ``__tylo`` names excluded)."""
    v = _Names()
    for s in stmts:
        v.visit(s)
    return sorted(n for n in v.names if not n.startswith(_PREFIX))
