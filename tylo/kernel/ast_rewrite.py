"""Rewrite a kernel's Python source so that ``for``, ``if`` and boolean logic can be traced.

The function's source is parsed (``inspect.getsource``, dedented; line numbers kept, so
tracebacks and :class:`~tylo.kernel.errors.TraceError` point at the user's file), rewritten
once, compiled, and rebuilt as a function over the original globals and closure cells.
At trace time each rewritten construct asks the runtime (:mod:`tylo.kernel.control`)
whether it is *static* (plain Python behaviour) or *dynamic* (traced into IR control flow):

``for T in ITER: BODY`` becomes::

    L = rt.loop_begin(ITER, line, ("a", "b"), "T")   # names the body assigns
    for T in L.iterate(locals()):
        if L.dynamic: (a, b) = L.carried()          # phi values
        BODY
        L.next_(locals())                            # the latch: end-of-body values
    if L.dynamic: (a, b, T) = L.finish()             # exit values

``if TEST: BODY else: ORELSE`` becomes::

    C = rt.if_begin(TEST, line, ("a", "b"))
    if C.then_(locals()): BODY
    if C.else_(locals()):
        if C.dynamic: (a, b) = C.restore()           # the values before the if
        ORELSE
    if C.dynamic: (a, b) = C.finish(locals())        # phi-merged values

With a static iterable or test the wrapper calls are cheap no-ops and Python runs as
written (so ``if relu:`` with a static ``relu`` costs nothing in the kernel, and a Python
``for`` over ``range`` unrolls). ``a and b`` / ``a or b`` become ``rt.and_(a, lambda: b)``
(short-circuit control flow when ``a`` is dynamic), ``not a`` becomes ``rt.not_(a)``,
``x if c else y`` becomes ``rt.ifexp(c, lambda: x, lambda: y, line)`` and a chained
comparison ``a < b < c`` becomes ``rt.compare_chain(...)``.

Constructs whose Python outcome would be decided at trace time from a runtime value's
structure, hash or identity go to :mod:`tylo.kernel.pyops`, which lowers them or raises:
``a == b`` / ``!=`` (``rt.eq``: sympy's ``==`` is structural and would answer ``False``
for ``lane == 0``), ``x in c`` / ``not in``, ``a is b`` / ``is not``, ``d[k]`` loads,
``d.get(k, v)``, ``any(...)`` / ``all(...)`` / ``bool(x)``, and ``//``, ``%``, ``/``
(a static zero divisor). ``match`` becomes a chain of ``if``s over each case's
condition (:mod:`tylo.kernel.patterns`), so a runtime subject gives real branches.
``break``, ``continue`` and ``return`` are preceded by a check that they do not leave a
dynamic loop or branch, and ``return value`` is refused in the kernel itself. The tests of
``while``, ``assert`` and comprehension filters must be static. Nested function
definitions are left as written (a lambda's body, an expression, is rewritten); helpers
called from a kernel can opt in with ``@tylo.inline``. An ``async def`` is refused at
its line; a ``yield`` line is recorded on the rewritten function, so a generator kernel is
refused before it runs.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import textwrap
import types
from collections.abc import Callable
from typing import Any

from tylo.kernel.ast_names import assigned_names
from tylo.kernel.errors import TraceError
from tylo.kernel.patterns import captured_names, pattern_spec

__all__ = ["assigned_names", "rewrite_function", "rewrite_source"]

RT = "__tylo_rt__"
LOCALS = "__tylo_locals__"
DEPTH = "__tylo_depth__"
_PREFIX = "__tylo"


def _name(id_: str, ctx: ast.expr_context | None = None) -> ast.Name:
    return ast.Name(id=id_, ctx=ctx or ast.Load())


def _attr(obj: str, attr: str) -> ast.Attribute:
    return ast.Attribute(value=_name(obj), attr=attr, ctx=ast.Load())


def _call(func: ast.expr, *args: ast.expr) -> ast.Call:
    return ast.Call(func=func, args=list(args), keywords=[])


def _const(value: Any) -> ast.Constant:
    return ast.Constant(value=value)


def _locals() -> ast.Call:
    return _call(_name(LOCALS))


def _tuple_store(names: list[str]) -> ast.Tuple:
    return ast.Tuple(elts=[_name(n, ast.Store()) for n in names], ctx=ast.Store())


def _assign(names: list[str], value: ast.expr) -> ast.Assign:
    return ast.Assign(targets=[_tuple_store(names)], value=value)


def _at(new: ast.AST, node: ast.AST) -> ast.AST:
    """Locate generated code on the first line of ``node`` (the header of an ``if`` or a
    ``for``), so tracebacks point at that line and not at the end of its body."""
    for n in ast.walk(new):
        if "lineno" in n._attributes and getattr(n, "lineno", None) is None:
            n.lineno = n.end_lineno = node.lineno
            n.col_offset = node.col_offset
            n.end_col_offset = node.col_offset
    return new


def _lambda(body: ast.expr) -> ast.Lambda:
    args = ast.arguments(
        posonlyargs=[],
        args=[],
        vararg=None,
        kwonlyargs=[],
        kw_defaults=[],
        kwarg=None,
        defaults=[],
    )
    lam = ast.Lambda(args=args, body=body)
    lam._tylo_generated = True  # type: ignore[attr-defined]  # its body is rewritten already
    return lam


_COMPARE_FN: dict[type, str] = {
    ast.Eq: "eq",
    ast.NotEq: "ne",
    ast.In: "contains",
    ast.NotIn: "not_contains",
    ast.Is: "is_",
    ast.IsNot: "is_not",
}
_DIVIDE_OPS: dict[type, str] = {ast.FloorDiv: "//", ast.Mod: "%", ast.Div: "/"}
_BUILTINS = ("any", "all", "bool")
_EXTREMA = ("min", "max")


def _plain_args(node: ast.Call) -> bool:
    return not node.keywords and not any(isinstance(a, ast.Starred) for a in node.args)


class _Rewriter(ast.NodeTransformer):
    def __init__(self) -> None:
        self.counter = 0
        self.loops: list[ast.expr] = []  # depth expression of each enclosing loop

    def _fresh(self, kind: str) -> str:
        self.counter += 1
        return f"{_PREFIX}_{kind}{self.counter}"

    # -------------------------------------------------------------- scopes

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
        return node  # nested functions keep their Python semantics

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.ClassDef:
        return node

    def visit_Lambda(self, node: ast.Lambda) -> ast.Lambda:
        # a lambda's body is one expression: `==`, `in`, `and`... in it are rewritten like
        # the kernel's own (statements, which need the enclosing frame, are not)
        if not getattr(node, "_tylo_generated", False):
            node.body = self.visit(node.body)
        return node

    def _comprehension(self, node: ast.AST) -> ast.AST:
        # the element and conditions are expressions like any other; a filter decides the
        # list's length, so it must be static
        for gen in node.generators:  # type: ignore[attr-defined]
            gen.iter = self.visit(gen.iter)
            gen.ifs = [
                _at(
                    _call(
                        _attr(RT, "static_test"),
                        self.visit(c),
                        _const(c.lineno),
                        _const("comprehension filter"),
                    ),
                    c,
                )
                for c in gen.ifs
            ]
        for field in ("elt", "key", "value"):
            if hasattr(node, field):
                setattr(node, field, self.visit(getattr(node, field)))
        return node

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comprehension  # type: ignore[assignment]

    def rewrite_top(self, fn: ast.FunctionDef) -> ast.FunctionDef:
        body = self._block(fn.body)
        head = ast.Assign(targets=[_name(DEPTH, ast.Store())], value=_call(_attr(RT, "depth")))
        ast.copy_location(head, fn.body[0])
        # keep a docstring first
        if (
            fn.body
            and isinstance(fn.body[0], ast.Expr)
            and isinstance(fn.body[0].value, ast.Constant)
            and isinstance(fn.body[0].value.value, str)
        ):
            fn.body = [body[0], head, *body[1:]]
        else:
            fn.body = [head, *body]
        fn.decorator_list = []
        return fn

    def _block(self, stmts: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for s in stmts:
            r = self.visit(s)
            if r is None:
                continue
            out.extend(r if isinstance(r, list) else [r])
        return out or [ast.Pass()]

    # -------------------------------------------------------------- jumps

    def _check(self, depth: ast.expr, kind: str, node: ast.stmt) -> ast.stmt:
        check = ast.Expr(_call(_attr(RT, "check_exit"), depth, _const(kind), _const(node.lineno)))
        return ast.copy_location(check, node)

    def visit_Return(self, node: ast.Return) -> list[ast.stmt]:
        self.generic_visit(node)
        if node.value is not None:
            node.value = _at(
                _call(_attr(RT, "check_return"), node.value, _const(node.lineno)), node
            )
        return [self._check(_name(DEPTH), "return", node), node]

    def visit_Assert(self, node: ast.Assert) -> ast.stmt:
        self.generic_visit(node)
        node.test = _at(
            _call(_attr(RT, "static_test"), node.test, _const(node.lineno), _const("assert")),
            node,
        )
        return node

    def visit_Break(self, node: ast.Break) -> list[ast.stmt]:
        if not self.loops:
            return [node]
        return [self._check(self.loops[-1], "break", node), node]

    def visit_Continue(self, node: ast.Continue) -> list[ast.stmt]:
        if not self.loops:
            return [node]
        return [self._check(self.loops[-1], "continue", node), node]

    # -------------------------------------------------------------- loops

    def visit_For(self, node: ast.For) -> list[ast.stmt]:
        var = self._fresh("loop")
        names = assigned_names(node.body)
        target = node.target.id if isinstance(node.target, ast.Name) else None
        names = [n for n in names if n != target]
        iter_ = self.visit(node.iter)
        begin = ast.Assign(
            targets=[_name(var, ast.Store())],
            value=_call(
                _attr(RT, "loop_begin"),
                iter_,
                _const(node.lineno),
                ast.Tuple(elts=[_const(n) for n in names], ctx=ast.Load()),
                _const(target),
            ),
        )
        self.loops.append(_attr(var, "depth"))
        body = self._block(node.body)
        self.loops.pop()
        orelse = self._block(node.orelse) if node.orelse else []
        dynamic = _attr(var, "dynamic")
        head: list[ast.stmt] = []
        if names:
            head.append(
                ast.If(test=dynamic, body=[_assign(names, _call(_attr(var, "carried")))], orelse=[])
            )
        latch = ast.Expr(_call(_attr(var, "next_"), _locals()))
        loop = ast.For(
            target=node.target,
            iter=_call(_attr(var, "iterate"), _locals()),
            body=[*head, *body, latch],
            orelse=orelse,
            type_comment=None,
        )
        exit_names = names + ([target] if target else [])
        finish = _call(_attr(var, "finish"))
        tail = ast.If(
            test=dynamic,
            body=[_assign(exit_names, finish) if exit_names else ast.Expr(finish)],
            orelse=[],
        )
        for s in (begin, tail, *head):
            _at(s, node)
        _at(latch, node)
        loop.lineno, loop.col_offset = node.lineno, node.col_offset
        loop.end_lineno, loop.end_col_offset = node.end_lineno, node.end_col_offset
        _at(loop.iter, node)
        return [begin, loop, tail]

    def visit_While(self, node: ast.While) -> list[ast.stmt]:
        var = self._fresh("while")
        depth = ast.Assign(targets=[_name(var, ast.Store())], value=_call(_attr(RT, "depth")))
        test = _call(
            _attr(RT, "static_test"), self.visit(node.test), _const(node.lineno), _const("while")
        )
        self.loops.append(_name(var))
        body = self._block(node.body)
        self.loops.pop()
        orelse = self._block(node.orelse) if node.orelse else []
        loop = ast.While(test=test, body=body, orelse=orelse)
        _at(depth, node)
        _at(test, node)
        ast.copy_location(loop, node)
        return [depth, loop]

    # -------------------------------------------------------------- branches

    def visit_If(self, node: ast.If) -> list[ast.stmt]:
        var = self._fresh("if")
        names = assigned_names(node.body + node.orelse)
        test = self.visit(node.test)
        begin = ast.Assign(
            targets=[_name(var, ast.Store())],
            value=_call(
                _attr(RT, "if_begin"),
                test,
                _const(node.lineno),
                ast.Tuple(elts=[_const(n) for n in names], ctx=ast.Load()),
            ),
        )
        dynamic = _attr(var, "dynamic")
        then = ast.If(
            test=_call(_attr(var, "then_"), _locals()), body=self._block(node.body), orelse=[]
        )
        else_body: list[ast.stmt] = []
        if names:
            else_body.append(
                ast.If(test=dynamic, body=[_assign(names, _call(_attr(var, "restore")))], orelse=[])
            )
        else_body.extend(self._block(node.orelse) if node.orelse else [ast.Pass()])
        other = ast.If(test=_call(_attr(var, "else_"), _locals()), body=else_body, orelse=[])
        finish = _call(_attr(var, "finish"), _locals())
        tail = ast.If(
            test=dynamic, body=[_assign(names, finish) if names else ast.Expr(finish)], orelse=[]
        )
        out = [begin, then, other, tail]
        for s in out:
            _at(s, node)
        return out

    # -------------------------------------------------------------- expressions

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.expr:
        values = [self.visit(v) for v in node.values]
        fn = "and_" if isinstance(node.op, ast.And) else "or_"
        call = _call(_attr(RT, fn), values[0], *(_lambda(v) for v in values[1:]))
        return ast.copy_location(call, node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.expr:
        self.generic_visit(node)
        if isinstance(node.op, ast.Not):
            return ast.copy_location(_call(_attr(RT, "not_"), node.operand), node)
        return node

    def visit_IfExp(self, node: ast.IfExp) -> ast.expr:
        test = self.visit(node.test)
        call = _call(
            _attr(RT, "ifexp"),
            test,
            _lambda(self.visit(node.body)),
            _lambda(self.visit(node.orelse)),
            _const(node.lineno),
        )
        return ast.copy_location(call, node)

    def visit_Compare(self, node: ast.Compare) -> ast.expr:
        self.generic_visit(node)
        if len(node.ops) == 1:
            op = node.ops[0]
            fn = _COMPARE_FN.get(type(op))
            if fn is not None:
                # sympy's == is structural (a bool), `in` and `is` go through == and
                # identity: route them to the runtime, which builds relations
                call = _call(_attr(RT, fn), node.left, node.comparators[0])
                return ast.copy_location(call, node)
            return node
        pairs = [
            ast.Tuple(elts=[_const(type(op).__name__), _lambda(c)], ctx=ast.Load())
            for op, c in zip(node.ops, node.comparators)
        ]
        call = _call(_attr(RT, "compare_chain"), node.left, *pairs)
        return ast.copy_location(call, node)

    def visit_BinOp(self, node: ast.BinOp) -> ast.expr:
        self.generic_visit(node)
        op = _DIVIDE_OPS.get(type(node.op))
        if op is None:
            return node
        call = _call(_attr(RT, "divide"), node.left, node.right, _const(op))
        return ast.copy_location(call, node)

    def visit_Assign(self, node: ast.Assign) -> ast.stmt | list[ast.stmt]:
        self.generic_visit(node)
        (target,) = node.targets if len(node.targets) == 1 else (None,)
        if not isinstance(target, ast.Subscript) or isinstance(target.slice, ast.Slice):
            return node
        # `d[k] = v`: a dict stored under a runtime key would hash the expression; Python's
        # order is kept (the value first, then the container and the key)
        value = self._fresh("value")
        first = ast.Assign(targets=[_name(value, ast.Store())], value=node.value)
        store = ast.Expr(_call(_attr(RT, "setitem"), target.value, target.slice, _name(value)))
        return [_at(first, node), _at(store, node)]  # type: ignore[list-item]

    def visit_Subscript(self, node: ast.Subscript) -> ast.expr:
        self.generic_visit(node)
        key = node.slice
        parts = key.elts if isinstance(key, ast.Tuple) else [key]
        if not isinstance(node.ctx, ast.Load) or any(
            isinstance(p, (ast.Slice, ast.Starred)) for p in parts
        ):
            return node
        # a dict or tuple indexed by a runtime key: the runtime selects or refuses
        return ast.copy_location(_call(_attr(RT, "getitem"), node.value, key), node)

    def visit_Call(self, node: ast.Call) -> ast.expr:
        self.generic_visit(node)
        func = node.func
        generated = isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
        if not _plain_args(node) or (generated and func.value.id == RT):  # type: ignore[union-attr]
            return node
        if isinstance(func, ast.Attribute) and func.attr == "get" and 1 <= len(node.args) <= 2:
            call = _call(_attr(RT, "get"), func.value, *node.args)
            return ast.copy_location(call, node)
        if isinstance(func, ast.Name) and (
            (func.id in _BUILTINS and len(node.args) == 1)
            or (func.id in _EXTREMA and len(node.args) >= 1)
        ):
            call = _call(_attr(RT, "builtin"), func, _const(func.id), *node.args)
            return ast.copy_location(call, node)
        return node

    # -------------------------------------------------------------- match

    def visit_Match(self, node: ast.Match) -> list[ast.stmt]:
        """``match`` as a chain of ifs over each case's condition (see
        :mod:`tylo.kernel.patterns`): a runtime subject becomes real branches."""
        subject = self._fresh("subject")
        head = ast.Assign(targets=[_name(subject, ast.Store())], value=self.visit(node.subject))
        _at(head, node)
        chain: list[ast.stmt] = []
        for case in reversed(node.cases):
            var = self._fresh("case")
            line = case.pattern.lineno
            begin = ast.Assign(
                targets=[_name(var, ast.Store())],
                value=_call(
                    _attr(RT, "match_case"),
                    _name(subject),
                    pattern_spec(case.pattern),
                    _const(line),
                ),
            )
            stmts: list[ast.stmt] = [begin]
            captured = sorted(captured_names(case.pattern))
            if captured:
                names = ast.Tuple(elts=[_const(n) for n in captured], ctx=ast.Load())
                stmts.append(_assign(captured, _call(_attr(var, "bind"), names, _locals())))
            test: ast.expr = _attr(var, "cond")
            if case.guard is not None:
                test = _call(_attr(RT, "and_"), test, _lambda(self.visit(case.guard)))
            branch = ast.If(test=test, body=case.body, orelse=chain)
            for st in (*stmts, branch):
                _at(st, case.pattern)
            branch.lineno = line
            chain = stmts + [branch]
        out = [head]
        for st in chain:
            r = self.visit(st)
            out.extend(r if isinstance(r, list) else [r])
        return out


def _parse_function(fn: Callable[..., Any]) -> tuple[ast.FunctionDef, str]:
    try:
        lines, first = inspect.getsourcelines(fn)
        filename = inspect.getsourcefile(fn) or inspect.getfile(fn)
    except (OSError, TypeError) as err:
        raise TraceError(
            f"cannot read the source of {getattr(fn, '__qualname__', fn)!r} ({err}); kernels "
            "must be defined in a file (not typed at an interactive prompt or built by exec)"
        ) from None
    source = "".join(lines)
    offset = first - 1
    try:
        tree = ast.parse(textwrap.dedent(source))
    except SyntaxError:
        # a docstring or string literal less indented than the code defeats dedent
        tree = ast.parse("if 1:\n" + source)
        offset -= 1
    ast.increment_lineno(tree, offset)
    stack: list[ast.AST] = [tree]
    while stack:
        n = stack.pop(0)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == fn.__name__:
            if isinstance(n, ast.AsyncFunctionDef):
                raise TraceError(
                    f"{fn.__qualname__} is an `async def`: a kernel or inline helper is a "
                    "plain function (remove `async`)",
                    filename=filename,
                    lineno=n.lineno,
                )
            return n, filename
        stack.extend(ast.iter_child_nodes(n))
    raise TraceError(f"cannot find the definition of {fn.__qualname__} in {filename}")


def rewrite_source(fn: Callable[..., Any]) -> ast.Module:
    """The rewritten function wrapped in a factory ``__tylo_factory__`` (for tests and
    debugging: ``ast.unparse(rewrite_source(f))``)."""
    return _rewrite_source(fn)[0]


def _rewrite_source(fn: Callable[..., Any]) -> tuple[ast.Module, str]:
    fdef, filename = _parse_function(fn)
    fdef = _Rewriter().rewrite_top(fdef)
    params = [RT, LOCALS, *fn.__code__.co_freevars]
    factory = ast.FunctionDef(
        name="__tylo_factory__",
        args=ast.arguments(
            posonlyargs=[],
            args=[ast.arg(arg=p) for p in params],
            vararg=None,
            kwonlyargs=[],
            kw_defaults=[],
            kwarg=None,
            defaults=[],
        ),
        body=[fdef, ast.Return(value=_name(fdef.name))],
        decorator_list=[],
        returns=None,
        type_comment=None,
        type_params=[],
    )
    ast.copy_location(factory, fdef)
    module = ast.Module(body=[factory], type_ignores=[])
    return ast.fix_missing_locations(module), filename


def rewrite_function(fn: Callable[..., Any], runtime: Any) -> types.FunctionType:
    """``fn`` rewritten for tracing, calling ``runtime`` (the control module); it shares
    ``fn``'s globals and closure cells, so later changes to either are seen."""
    module, filename = _rewrite_source(fn)
    code = compile(module, filename, "exec")
    namespace: dict[str, Any] = {}
    exec(code, fn.__globals__, namespace)  # noqa: S102 - the user's own code, rewritten
    inner = namespace["__tylo_factory__"](
        runtime, builtins.locals, *([None] * len(fn.__code__.co_freevars))
    )
    original = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
    extra = {RT: types.CellType(runtime), LOCALS: types.CellType(builtins.locals)}
    closure = tuple(original[n] if n in original else extra[n] for n in inner.__code__.co_freevars)
    out = types.FunctionType(
        inner.__code__, fn.__globals__, fn.__name__, fn.__defaults__, closure or None
    )
    out.__kwdefaults__ = fn.__kwdefaults__
    out.__qualname__ = fn.__qualname__
    out.__module__ = fn.__module__
    out.__doc__ = fn.__doc__
    out.__tylo_generator_line__ = _yield_line(module)  # type: ignore[attr-defined]
    return out


def _yield_line(module: ast.Module) -> int | None:
    """The line of the first ``yield`` of the rewritten function (not of nested scopes),
    or None: a generator kernel would return a generator without running its body."""
    factory = module.body[0]
    fdef = factory.body[0]  # type: ignore[attr-defined]
    stack: list[ast.AST] = list(fdef.body)
    lines = []
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.Yield, ast.YieldFrom)):
            lines.append(n.lineno)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        stack.extend(ast.iter_child_nodes(n))
    return min(lines) if lines else None
