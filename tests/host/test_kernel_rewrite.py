"""AST rewriting of kernels: what is rewritten, what is left alone, line numbers kept."""

from __future__ import annotations

import ast
import textwrap

import pytest

import tylo
from tylo.kernel import control
from tylo.kernel.ast_rewrite import assigned_names, rewrite_function, rewrite_source


def _names(src: str) -> list[str]:
    return assigned_names(ast.parse(textwrap.dedent(src)).body)


def test_assigned_names_cover_every_binding_form_but_not_nested_scopes():
    src = """
    a = 1
    b, (c, d) = 2, (3, 4)
    e += 1
    f: int = 3
    g: int
    for h in range(3):
        i = h
    with open("x") as j:
        pass
    if (k := 5):
        import os.path
        from sys import path as p
    def inner():
        hidden = 1
    lam = lambda: (unseen := 1)
    comp = [w for w in range(3) if (leak := w)]
    __tylo_if1 = 0
    """
    assert _names(src) == sorted(
        [
            "a",
            "b",
            "c",
            "d",
            "e",
            "f",
            "h",
            "i",
            "j",
            "k",
            "os",
            "p",
            "inner",
            "lam",
            "comp",
            "leak",
        ]
    )


def sample(x, n):
    total = 0
    for k in tylo.range(n):
        if k < 3 and x:
            total = total + k
        else:
            total = total - 1
    y = 1 if x else 2
    return total + y


def test_rewrite_turns_control_flow_into_runtime_calls():
    text = ast.unparse(rewrite_source(sample))
    line = sample.__code__.co_firstlineno  # the `def` line; the lines below are relative
    assert f"__tylo_rt__.loop_begin(tylo.range(n), {line + 2}, ('total',), 'k')" in text
    assert (
        f"__tylo_rt__.if_begin(__tylo_rt__.and_(k < 3, lambda: x), {line + 3}, ('total',))" in text
    )
    assert f"__tylo_rt__.ifexp(x, lambda: 1, lambda: 2, {line + 7})" in text
    assert f"__tylo_rt__.check_exit(__tylo_depth__, 'return', {line + 8})" in text
    assert "total, k = __tylo_loop1.finish()" in text  # exit values, index unbound


def test_rewritten_function_keeps_line_numbers_and_file():
    fn = rewrite_function(sample, control)
    assert fn.__code__.co_filename == sample.__code__.co_filename
    assert fn.__code__.co_firstlineno == sample.__code__.co_firstlineno
    assert fn.__name__ == "sample" and fn.__module__ == sample.__module__


def python_semantics(xs, flag):
    out = []
    for v in xs:
        if v % 2 == 0 and flag:
            continue
        if v > 7:
            break
        out.append(v if v > 2 else -v)
    else:
        out.append("done")
    n = 0
    while n < 3:
        n += 1
    ok = not flag or (1 < n <= 3)
    return out, n, ok


@pytest.mark.parametrize("flag", [True, False])
@pytest.mark.parametrize("xs", [[1, 2, 3, 4], [1, 9, 2], []])
def test_static_code_runs_exactly_like_python(xs, flag):
    fn = rewrite_function(python_semantics, control)
    assert fn(xs, flag) == python_semantics(xs, flag)


def make_closure(scale):
    bias = [10]

    def inner(v):
        if v > 0:
            return v * scale + bias[0]
        return -v

    return inner, bias


def test_closures_are_shared_live():
    inner, bias = make_closure(3)
    fn = rewrite_function(inner, control)
    assert fn(2) == 16 and fn(-4) == 4
    bias[0] = 20  # the rewritten function sees the same cell contents
    assert fn(2) == 26


def test_nested_functions_are_left_alone_and_comprehension_filters_must_be_static():
    def outer(xs):
        def helper(v):
            if v:
                return 1
            return 0

        return [helper(v) for v in xs if v or not v]  # noqa: SIM221 - a BoolOp, rewritten

    text = ast.unparse(rewrite_source(outer))
    assert "def helper(v):\n            if v:" in text
    # a comprehension's filter decides the list's length: it must be known at trace time
    assert "if __tylo_rt__.static_test(__tylo_rt__.or_(v, lambda: __tylo_rt__.not_(v))" in text
    assert rewrite_function(outer, control)([0, 1, 2]) == [0, 1, 1]


def test_equality_becomes_a_relation_for_index_expressions():
    import sympy

    lane = sympy.Symbol("lane", integer=True)
    assert control.eq(lane, 0) == sympy.Eq(lane, 0)
    assert control.ne(lane + 1, lane) is sympy.true
    assert control.eq(3, 3) is True and control.eq("a", "b") is False


def test_tylo_range_outside_a_rewritten_for_is_an_error():
    with pytest.raises(tylo.TraceError, match="only be the iterable of a `for`"):
        list(tylo.range(4))
