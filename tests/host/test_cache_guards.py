"""Launch guards as data: validated trees, closures that compute what the tree says, and
no way for guard data (say, read from a tampered cache) to run code.

Properties (hypothesis over random trees and launch values, 64-bit extremes included):
the compiled closure, the reference interpreter and the rendered Python source agree;
trees round-trip through JSON; anything outside the grammar is refused with a typed
error; guards made by ``tylo.assume`` hold exactly on the values that satisfy the fact.
"""

from __future__ import annotations

import json

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

import tylo
from tylo.kernel import guardexpr as G
from tylo.kernel.guards import Guard, GuardDataError, compile_guards

NPARAMS = 4
EDGE = [0, 1, -1, 2, 3, 4, 7, 16, 2**31 - 1, -(2**31), 2**63 - 1, -(2**63), 2**64]
ints = st.one_of(st.sampled_from(EDGE), st.integers(-(2**64), 2**64))
consts = st.one_of(ints, st.booleans())
leaves = st.one_of(consts, st.builds(lambda i: ("v", i), st.integers(0, NPARAMS - 1)))


def _nodes(children: st.SearchStrategy) -> st.SearchStrategy:
    nary = st.tuples(
        st.sampled_from(["+", "*", "min", "max", "and", "or"]),
        st.lists(children, min_size=1, max_size=3),
    )
    binary = st.tuples(
        st.sampled_from(["-", "//", "%", "==", "!=", "<", "<=", ">", ">="]),
        st.lists(children, min_size=2, max_size=2),
    )
    unary = st.tuples(st.just("not"), st.lists(children, min_size=1, max_size=1))
    return st.one_of(nary, binary, unary).map(lambda t: (t[0], *t[1]))


def _powers(tree: st.SearchStrategy) -> st.SearchStrategy:
    base = st.one_of(
        ints.filter(lambda x: abs(x) < 2**64), st.builds(lambda i: ("v", i), st.integers(0, 3))
    )
    return st.tuples(st.just("**"), base, st.integers(0, G.MAX_POWER))


trees = st.recursive(leaves, lambda c: st.one_of(_nodes(c), _powers(c)), max_leaves=12)
values = st.lists(ints, min_size=NPARAMS, max_size=NPARAMS).map(tuple)


def reference(tree, v) -> bool:
    """The guard's verdict by the interpreter; a division by zero is a violation."""
    try:
        return bool(G.evaluate(tree, v))
    except ZeroDivisionError:
        return False


def by_python(tree, v) -> bool:
    """The verdict of the rendered source, evaluated here (the test's own eval: the
    library never evaluates guard text)."""
    try:
        scope = {"__builtins__": {"min": min, "max": max}}  # what launch code gives it
        return bool(eval(f"lambda v: {G.render(tree)}", scope)(v))  # noqa: S307
    except ZeroDivisionError:
        return False


@settings(max_examples=200, deadline=None)
@given(trees, values)
def test_closure_interpreter_and_source_agree(tree, v):
    tree = G.validate(tree)
    want = reference(tree, v)
    assert G.compile_expr(tree)(v) is want  # a bool, as the launch paths expect
    assert by_python(tree, v) == want


@settings(max_examples=100, deadline=None)
@given(trees)
def test_trees_round_trip_through_json(tree):
    tree = G.validate(tree)
    data = json.loads(json.dumps(G.to_data(tree)))
    assert G.validate(data) == tree
    g = Guard("fact", tree)
    assert Guard.from_data(json.loads(json.dumps(g.to_data()))) == g


def test_common_guards_are_one_closure_with_python_semantics():
    aligned = Guard("a is aligned", ("==", ("%", ("v", 0), 16), 0)).compile()
    assert aligned((64,)) and not aligned((8,)) and aligned((0,)) and aligned((-32,))
    # no nested Python call: the closure computes v[0] % 16 == 0 itself
    assert set(aligned.__code__.co_freevars) == {"d", "x"}
    floor = G.compile_expr(("==", ("//", ("v", 0), ("v", 1)), -1))
    assert floor((-1, 2)) and not floor((1, 2))  # floor division, as Python's //
    assert G.compile_expr(("==", ("%", ("v", 0), 3), 2))((-1,))  # -1 % 3 == 2


@pytest.mark.parametrize("divisor", [("v", 1), 0])
def test_division_by_zero_is_a_violation_not_an_error(divisor):
    for op in ("%", "//"):
        f = G.compile_expr(("==", (op, ("v", 0), divisor), 0))
        assert f((4, 0)) is False
    assert G.compile_expr(("==", ("%", ("v", 0), ("v", 1)), 0))((4, 2)) is True


divisibility = st.builds(
    lambda i, d: ("==", ("%", ("v", i), d), 0),
    st.integers(0, NPARAMS - 1),
    st.one_of(st.sampled_from([1, 2, 4, 16, -8]), ints.filter(lambda x: x != 0)),
)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(divisibility, trees), max_size=5), values)
def test_compile_all_is_the_conjunction(ts, v):
    ts = [G.validate(t) for t in ts]
    assert G.compile_all(ts)(v) is all(reference(t, v) for t in ts)


def test_compile_guards_is_the_conjunction():
    gs = [
        Guard("n % 4 == 0", ("==", ("%", ("v", 0), 4), 0)),
        Guard("n < 100", ("<", ("v", 0), 100)),
    ]
    both = compile_guards(gs)
    for n in range(-20, 120):
        assert both((n,)) == (n % 4 == 0 and n < 100)
    assert compile_guards(gs[:1])((8,)) is True


DEEP = ("v", 0)
for _ in range(G.MAX_DEPTH):
    DEEP = ("not", DEEP)


@pytest.mark.parametrize(
    "tree, why",
    [
        ("v[0] % 4 == 0", "is not a node"),
        (1.5, "is not a node"),
        (None, "is not a node"),
        ({"op": "+"}, "is not a node"),
        ((), "is not a node"),
        ((1, 2), "is not a node"),
        (("v", "0"), "parameter index"),
        (("v", True), "parameter index"),
        (("v", -1), "parameter index"),
        (("v", G.MAX_PARAM), "parameter index"),
        (("v", 0, 1), "parameter index"),
        (("__import__", "os"), "unknown operator"),
        (("call", ("v", 0)), "unknown operator"),
        (("-", 1), "with 1 operands"),
        (("+",), "with 0 operands"),
        (("not", 1, 2), "with 2 operands"),
        (("==", 1, 2, 3), "with 3 operands"),
        (("**", ("v", 0), 9), "constant exponent"),
        (("**", ("v", 0), -1), "constant exponent"),
        (("**", ("v", 0), ("v", 1)), "constant exponent"),
        (("**", ("**", ("v", 0), 2), 2), "power of a power"),
        (2**128, "bits"),
        (-(2**128), "bits"),
        (("not", DEEP), "deeper"),
        (("+", *[1] * G.MAX_NODES), "nodes"),
        (("+", ("v", 0), "__import__('os').system('true')"), "is not a node"),
    ],
)
def test_refusals_are_typed_and_say_why(tree, why):
    with pytest.raises(GuardDataError, match=why):
        G.validate(tree)
    with pytest.raises(GuardDataError):
        Guard.from_data(["fact", tree])


def test_the_bounds_are_exact():
    assert G.validate(DEEP) == DEEP  # depth 64 is fine, 65 is not (above)
    assert G.validate(("+", *[1] * (G.MAX_NODES - 1)))  # 4096 nodes with the root
    assert G.validate(2**128 - 1) == 2**128 - 1 and G.validate(-(2**128) + 1)
    assert G.validate(("**", ("v", 0), G.MAX_POWER))
    assert G.validate(("v", G.MAX_PARAM - 1))


@pytest.mark.parametrize(
    "data",
    [
        "junk",
        ["only text"],
        ["t", ("v", 0), "extra"],
        [3, ("v", 0)],
        ["t" * 5000, ("v", 0)],
        {"text": "t", "expr": ("v", 0)},
    ],
)
def test_from_data_refuses_other_shapes(data):
    with pytest.raises(GuardDataError):
        Guard.from_data(data)


@settings(max_examples=100, deadline=None)
@given(trees, st.data())
def test_a_string_anywhere_in_a_tree_is_refused(tree, data):
    """Guard data is never code: putting Python source at any position of a valid tree
    (as a node or an operand) makes the whole tree invalid."""
    tree = G.validate(tree)
    payload = "__import__('os').system('touch /tmp/pwned')"
    positions = list(_positions(tree))
    path = data.draw(st.sampled_from(positions))
    with pytest.raises(GuardDataError):
        G.validate(_replace(tree, path, payload))


def _positions(tree, path=()):
    yield path
    if isinstance(tree, tuple) and tree[0] != "v":
        for i in range(1, len(tree)):
            yield from _positions(tree[i], (*path, i))


def _replace(tree, path, new):
    if not path:
        return new
    i = path[0]
    return (*tree[:i], _replace(tree[i], path[1:], new), *tree[i + 1 :])


# ---------------------------------------------------------------------------- from assume


@tylo.kernel
def assuming(out, n, m):
    tylo.assume(tylo.divisible(n, 4), n < 3 * m + 7, sympy.Max(n, m) < 30)
    tylo.assume(tylo.divisible(n + m, m))
    out = tylo.assume_aligned(out, 16)
    i = tylo.thread_idx.x
    if i < n:
        out[i] = 1.0


def test_assume_guards_hold_exactly_on_the_facts():
    result = assuming.trace(tylo.f32, int, int, block=32)
    guards = result.guards
    assert len(guards) == 5, guards
    check = compile_guards(guards)
    for n in range(-12, 40, 3):
        for m in range(-6, 12):
            for ptr in (0, 8, 16, 48):
                want = (
                    n % 4 == 0
                    and n < 3 * m + 7
                    and max(n, m) < 30
                    and (m != 0 and (n + m) % m == 0)
                    and ptr % 16 == 0
                )
                assert check((ptr, n, m)) == want, (ptr, n, m)
    # what the tree says is data, and the text a user reads names the fact
    assert all(isinstance(g.expr, (tuple, bool, int)) for g in guards)
    assert any("aligned to 16" in g.text for g in guards)
