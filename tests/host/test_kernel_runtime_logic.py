"""Python constructs whose outcome depends on a runtime value lower to IR or refuse
(tylo issue 11, item 2): ``match``, ``in``, ``is``, ``== True``, ``dict.get``, ``tuple[i]``,
``any``/``all``/``bool``, ``assert`` and comprehension filters. The IR is inspected after
tracing (no libNVVM needed); the lowered conditions are checked against Python's own
answer by substituting every value of a window for the runtime symbol."""

from __future__ import annotations

import inspect
import re

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

import tylo
from tylo.kernel import control, pyops
from tylo.kernel.ast_rewrite import rewrite_function

F32, I32 = tylo.f32, tylo.i32
N = sympy.Symbol("n", integer=True)  # any integer: the window below reaches negatives
WINDOW = range(-14, 15)
HERE = __file__


def trace_error(kern, *specs, block=64) -> tylo.TraceError:
    with pytest.raises(tylo.TraceError) as info:
        kern.trace(*specs, block=block)
    return info.value


def assert_points_at(err: tylo.TraceError, kern, text: str) -> None:
    """The error names this file, the line of ``kern`` holding ``text``, and shows it."""
    lines, first = inspect.getsourcelines(kern.fn)
    want = [first + k for k, line in enumerate(lines) if line.strip() == text]
    assert err.filename == HERE and [err.lineno] == want, str(err)
    assert err.source_line == text and f"{HERE}:{err.lineno}" in str(err)


def ir(kern, *specs, block=64) -> str:
    text = kern.trace(*specs, block=block).llvm
    return text[text.index("{") : text.index("\n}")]


def stores(text: str) -> list[str]:
    """The float constants stored, in IR order."""
    return re.findall(r"store float (0x[0-9a-fA-F]+)", text)


def f32_hex(x: float) -> str:
    import struct

    return "0x" + struct.pack(">d", x).hex()


def truth(cond, v: int) -> bool:
    """``cond`` (a Python bool or a relation over N) at ``N = v``."""
    if isinstance(cond, bool):
        return cond
    return bool(cond.xreplace({N: sympy.Integer(v)}))


# ---------------------------------------------------------------------------- match


@tylo.kernel
def match_param(out, n):
    match n:
        case 1:
            out[0] = 1.0
        case 2 | 3:
            out[0] = 2.0
        case _:
            out[0] = 3.0


def test_match_on_a_runtime_integer_is_a_chain_of_branches():
    text = ir(match_param, F32, int)
    assert re.search(r"icmp eq i64 %\"n\", 1\b", text)
    assert re.search(r"icmp eq i64 %\"n\", 2\b", text)
    assert re.search(r"icmp eq i64 %\"n\", 3\b", text)
    assert text.count("br i1") == 2
    assert sorted(stores(text)) == sorted(f32_hex(v) for v in (1.0, 2.0, 3.0))


@tylo.kernel
def match_thread(out):
    t = tylo.thread_idx.x
    match t:
        case 0:
            out[t] = 10.0
        case 1:
            out[t] = 11.0
        case k if k < 8:
            out[t] = tylo.value(k).to(F32)


def test_match_on_the_thread_index_keeps_every_arm():
    text = ir(match_thread, F32)
    assert re.search(r"icmp eq i32 %\"tid_x\", 0\b", text)
    assert re.search(r"icmp eq i32 %\"tid_x\", 1\b", text)
    assert re.search(r"icmp (ult|slt) i32 %\"tid_x\", 8\b", text)  # the guard
    assert f32_hex(10.0) in text and f32_hex(11.0) in text and "itofp i64" in text


@tylo.kernel
def match_static(out, mode: tylo.Static):
    match mode:
        case "a":
            out[0] = 1.0
        case ("b", x):
            out[0] = float(x)
        case {"c": y}:
            out[0] = float(y)
        case _:
            out[0] = 4.0


@pytest.mark.parametrize(
    ("mode", "want"), [("a", 1.0), (("b", 7), 7.0), (("c", 5), 4.0), ("z", 4.0)]
)
def test_match_on_a_static_subject_runs_one_case(mode, want):
    text = ir(match_static, F32, mode)
    assert "br i1" not in text and stores(text) == [f32_hex(want)]


@tylo.kernel
def match_patterns(out, x, n: tylo.Int(min=0)):
    v = x[0]
    match (v, n):
        case (float(), 0):
            out[0] = 1.0
        case (w, m) if m > 5:
            out[0] = w
    match n < 4:
        case True:
            out[1] = 2.0
        case False:
            out[1] = 3.0
    match v:
        case int():
            out[2] = 9.0  # an f32 value is not an int: never traced
        case None:
            out[2] = 9.0
        case 0.5:
            out[2] = 5.0


def test_sequence_class_singleton_and_guard_patterns_lower():
    text = ir(match_patterns, F32, F32, int)
    assert f32_hex(9.0) not in text
    assert "fcmp oeq float" in text  # case 0.5
    assert re.search(r"icmp eq i64 %\"n\", 0\b", text)
    assert re.search(r"icmp sgt i64 %\"n\", 5\b", text)
    assert re.search(r"icmp slt i64 %\"n\", 4\b", text)
    # (v, n): two; n < 4: one (in its else branch the fact n >= 4 settles `case False`);
    # v: one (case 0.5)
    assert text.count("br i1") == 4


@tylo.kernel
def match_or_binds_differently(out, n: tylo.Int(min=0), m: tylo.Int(min=0)):
    match (n, m):
        case (0, k) | (k, 0):
            out[0] = tylo.value(k).to(F32)


def test_or_pattern_binding_different_runtime_values_is_refused():
    err = trace_error(match_or_binds_differently, F32, int, int)
    assert "or-pattern binds 'k'" in err.message
    assert_points_at(err, match_or_binds_differently, "case (0, k) | (k, 0):")


SUBJECTS = st.one_of(
    st.integers(-3, 3),
    st.tuples(st.integers(-2, 2), st.integers(-2, 2)),
    st.lists(st.integers(-2, 2), max_size=4),
    st.dictionaries(st.sampled_from("ab"), st.integers(-2, 2), max_size=2),
    st.none(),
    st.booleans(),
    st.sampled_from(["a", 1.5]),
)


def python_match(s):
    match s:
        case None:
            return "none"
        case True:
            return "true"
        case 0 | 1 if s is not False:
            return "small"
        case int(v) if v < 0:
            return f"negative {v}"
        case [a, b] if a == b:
            return f"pair {a}"
        case (a, *rest):
            return f"head {a} {len(rest)}"
        case {"a": x, **others}:
            return f"map {x} {sorted(others)}"
        case str() | float():
            return "other"
        case _:
            return "default"


REWRITTEN_MATCH = rewrite_function(python_match, control)


@given(SUBJECTS)
@settings(max_examples=150, deadline=None)
def test_rewritten_match_agrees_with_python_on_static_subjects(s):
    assert REWRITTEN_MATCH(s) == python_match(s)


# ---------------------------------------------------------------------------- in, ==, is


@tylo.kernel
def in_literals(out, n):
    t = tylo.thread_idx.x
    if n in (1, 2):
        out[0] = 1.0
    if t not in range(8, 64, 4):
        out[t] = 2.0


def test_in_over_literals_and_ranges_lowers():
    text = ir(in_literals, F32, int)
    assert re.search(r"icmp eq i64 %\"n\", 1\b", text)
    assert re.search(r"icmp eq i64 %\"n\", 2\b", text)
    assert re.search(r"or i1", text)
    assert text.count("br i1") == 2 and f32_hex(1.0) in text and f32_hex(2.0) in text


@given(
    st.one_of(
        st.lists(st.integers(-16, 16), max_size=6).map(tuple),
        st.frozensets(st.integers(-16, 16), max_size=6),
        st.builds(range, st.integers(-16, 16), st.integers(-16, 16), st.integers(1, 5)),
        st.builds(range, st.integers(-16, 16), st.integers(-16, 16), st.integers(-5, -1)),
    )
)
@settings(max_examples=60, deadline=None)
def test_in_of_a_runtime_integer_agrees_with_python_everywhere(container):
    cond = pyops.contains(N, container)
    neg = pyops.not_contains(N, container)
    for v in WINDOW:
        assert truth(cond, v) == (v in container), (container, v, cond)
        assert truth(neg, v) == (v not in container)


@tylo.kernel
def cond_equals(out, n):
    t = tylo.thread_idx.x
    if (t < n) == True:  # noqa: E712 - the construct under test
        out[t] = 1.0
    if (t < n) != True:  # noqa: E712
        out[t] = 2.0


def test_condition_compared_with_true_is_the_condition():
    text = ir(cond_equals, F32, int)
    assert text.count("br i1") == 2 and f32_hex(1.0) in text and f32_hex(2.0) in text


@given(st.sampled_from([True, False, 0, 1, 2, -1, 0.0, 1.0, "x", None]))
@settings(max_examples=30, deadline=None)
def test_equality_of_a_relation_with_a_constant_is_pythons(c):
    rel = N < 3
    eq, ne = pyops.eq(rel, c), pyops.ne(rel, c)
    for v in WINDOW:
        assert truth(eq, v) == ((v < 3) == c)
        assert truth(ne, v) == ((v < 3) != c)


@given(st.lists(st.integers(-3, 3), min_size=1, max_size=3))
@settings(max_examples=40, deadline=None)
def test_tuple_equality_is_elementwise(values):
    other = tuple(N + k for k in range(len(values)))
    cond = pyops.eq(other, tuple(values))
    for v in WINDOW:
        assert truth(cond, v) == (tuple(v + k for k in range(len(values))) == tuple(values))
    assert pyops.eq(other, tuple(values) + (0,)) is False


@tylo.kernel
def identity(out, x):
    v = x[0]
    if v is None:
        out[0] = 1.0
    if v is not None:
        out[1] = 2.0
    if (v > 0) is True:
        out[2] = 3.0


def test_is_none_is_static_and_is_true_is_refused():
    err = trace_error(identity, F32, F32)
    assert "identity at trace time is not its value" in err.message
    assert_points_at(err, identity, "if (v > 0) is True:")


# ---------------------------------------------------------------------------- lookups


@tylo.kernel
def table_get(out, x):
    i = tylo.thread_idx.x
    table = {0: 3, 1: 5}
    out[i] = x[table.get(i % 2, 7)]


def test_dict_get_with_a_runtime_key_selects():
    text = ir(table_get, F32, F32)
    assert "select" in text and "i64 3" in text and "i64 5" in text
    assert 'getelementptr inbounds float, float addrspace(1)* %"x", i64 7' not in text


@given(
    st.dictionaries(st.integers(-5, 5), st.integers(-100, 100), max_size=5),
    st.integers(-100, 100),
    st.integers(1, 7),
)
@settings(max_examples=60, deadline=None)
def test_dict_get_agrees_with_python_for_every_key(table, default, k):
    got = pyops.get(table, N % k - 2, default)
    for v in WINDOW:
        want = table.get(v % k - 2, default)
        value = got if isinstance(got, int) else got.subs(N, v)
        assert value == want, (table, k, v)


@tylo.kernel
def table_index(out, n):
    t = tylo.thread_idx.x
    table = {0: 1.0}
    out[t] = table[n]


@tylo.kernel
def tuple_index(out, n, k: tylo.Static):
    t = tylo.thread_idx.x
    consts = (1.5, 2.5, 3.5, 4.5)
    out[t] = consts[t % k]
    out[t + 64] = consts[n]


def test_subscripts_with_runtime_keys_select_or_refuse():
    err = trace_error(table_index, F32, int)
    assert "table.get(key, default)" in err.message
    assert_points_at(err, table_index, "out[t] = table[n]")
    err = trace_error(tuple_index, F32, int, 4)
    assert "is not within the 4 elements" in err.message
    assert_points_at(err, tuple_index, "out[t + 64] = consts[n]")
    err = trace_error(tuple_index, F32, int, 5)  # t % 5 reaches index 4
    assert_points_at(err, tuple_index, "out[t] = consts[t % k]")


SINK: list = []


@tylo.kernel
def probe(out, n, table: tylo.Static, k: tylo.Static):
    SINK.append(table[n % k])


@given(st.lists(st.integers(-50, 50), min_size=1, max_size=6), st.integers(1, 6))
@settings(max_examples=25, deadline=None)
def test_tuple_index_select_agrees_with_python(values, k):
    table = tuple(values)
    SINK.clear()
    if k > len(table):
        with pytest.raises(tylo.TraceError, match="is not within"):
            probe.trace(F32, int, table, k, block=32)
        return
    probe.trace(F32, int, table, k, block=32)
    (got,) = SINK
    got = sympy.sympify(got)
    (n,) = got.free_symbols or {None}
    for v in range(0, 60):
        value = got if n is None else got.xreplace({n: sympy.Integer(v)})
        assert value == table[v % k]


# ---------------------------------------------------------------------------- builtins


@tylo.kernel
def builtins_kernel(out, x, n):
    t = tylo.thread_idx.x
    vals = [x[t + k] for k in range(3)]
    if any(v > 0.0 for v in vals):
        out[t] = 1.0
    if all([t < n, n > 2, True]):
        out[t] = 2.0
    if bool(n - 4):
        out[t] = 3.0
    out[t + 64] = max(vals) + tylo.value(min(t, n, 40)).to(F32)


def test_any_all_bool_of_runtime_conditions_lower():
    text = ir(builtins_kernel, F32, F32, int)
    assert text.count("fcmp ogt float") == 3 and text.count("br i1") == 3
    assert text.count('call float @"llvm.maxnum.f32"') == 2  # max(vals)
    assert text.count("select") == 2  # min(t, n, 40): two selects of index values
    assert re.search(r"icmp ne i64 %\"n\", 4\b", text) or re.search(r"icmp ne i64 .*, 0\b", text)


def test_any_all_bool_static_semantics_are_pythons():
    assert pyops.builtin(any, "any", iter([0, 0, 3])) is True
    assert pyops.builtin(all, "all", []) is True and pyops.builtin(any, "any", []) is False
    assert pyops.builtin(any, "any", [N < 3, True]) is True  # a static True decides
    assert pyops.builtin(all, "all", [N < 3, False]) is False
    assert pyops.builtin(bool, "bool", N) == sympy.Ne(N, 0)
    assert pyops.builtin(len, "bool", [1, 2]) == 2  # a shadowed name is just called
    assert pyops.builtin(max, "max", 3, 9, 4) == 9 and pyops.builtin(min, "min", [3, 1]) == 1
    assert pyops.builtin(max, "max", N, 4, N + 1) == sympy.Max(N + 1, 4)
    assert pyops.builtin(min, "min", [N, 4]) == sympy.Min(N, 4)


@tylo.kernel
def runtime_assert(out, n):
    assert n > 3, "n too small"
    out[0] = 1.0


@tylo.kernel
def runtime_filter(out, x, n):
    vals = [x[k] for k in range(4) if k < n]
    out[0] = vals[0]


@tylo.kernel
def runtime_while(out, n):
    k = 0
    while k < n:
        k = k + 1
    out[0] = 1.0


@pytest.mark.parametrize(
    ("kern", "specs", "line", "text"),
    [
        (runtime_assert, (F32, int), 'assert n > 3, "n too small"', "tylo.assume"),
        (runtime_filter, (F32, F32, int), "vals = [x[k] for k in range(4) if k < n]", "length"),
        (runtime_while, (F32, int), "while k < n:", "tylo.range"),
    ],
)
def test_runtime_tests_that_must_be_static_are_refused_at_their_line(kern, specs, line, text):
    err = trace_error(kern, *specs)
    assert "must be known at trace time" in err.message and text in err.message
    assert_points_at(err, kern, line)


@tylo.kernel
def in_tensor(out, x):
    if 1.0 in x:
        out[0] = 1.0


def test_in_on_a_tensor_is_refused():
    err = trace_error(in_tensor, F32, F32)
    assert "`in` on the tensor x" in err.message
    assert_points_at(err, in_tensor, "if 1.0 in x:")


@tylo.kernel
def lambda_logic(out, n):
    t = tylo.thread_idx.x
    is_first = lambda k: k == 0  # noqa: E731 - the construct under test
    if is_first(t) or n in (2, 3):
        out[t] = 1.0


def test_lambda_bodies_are_rewritten():
    text = ir(lambda_logic, F32, int)
    assert re.search(r"icmp eq i32 %\"tid_x\", 0\b", text) and "br i1" in text
    assert re.search(r"icmp eq i64 %\"n\", 2\b", text)


def test_tensors_cannot_be_iterated_or_searched_by_python():
    from llvmlite import ir as llvm_ir

    from tylo.kernel.memory import Tensor

    base = llvm_ir.Constant(llvm_ir.FloatType().as_pointer(1), None)
    t = Tensor(F32, base, addrspace=1, align=4, name="x")
    for use in (lambda: list(t), lambda: 1.0 in t):
        with pytest.raises(tylo.TraceError, match="memory without a length"):
            use()


@tylo.kernel
def one_branch_name(out, n):
    if n > 3:
        y = 1
    if y == 1:
        out[0] = 1.0


@tylo.kernel
def one_branch_none(out, n):
    if n > 3:
        y = 1
    if y is None:
        out[0] = 1.0


@pytest.mark.parametrize(
    ("kern", "line"), [(one_branch_name, "if y == 1:"), (one_branch_none, "if y is None:")]
)
def test_comparing_a_name_without_a_value_says_why(kern, line):
    err = trace_error(kern, F32, int)
    assert "assigned in only one branch" in err.message
    assert_points_at(err, kern, line)


@tylo.kernel
def dict_store(out, n, m):
    seen = {}
    seen[n] = 1.0
    seen[m] = 2.0
    out[0] = seen.get(n, 0.0)


def test_dict_store_under_a_runtime_key_is_refused():
    err = trace_error(dict_store, F32, int, int)
    assert "keyed by the expression" in err.message
    assert_points_at(err, dict_store, "seen[n] = 1.0")
