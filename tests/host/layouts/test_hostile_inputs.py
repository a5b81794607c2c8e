"""Hostile inputs end quickly in a typed error (a LayoutError naming the operation), never
a hang, a huge allocation, a RecursionError, a ZeroDivisionError or a silently wrong value.
"""

from __future__ import annotations

import doctest
import time

import numpy as np
import pytest
import sympy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tylo.layouts import (
    Layout,
    LayoutError,
    NotationError,
    ShapeError,
    Swizzle,
    SwizzleError,
    _budget,
    composition,
    cosize,
    dim,
    logical_divide,
    size,
    substitute,
    zipped_divide,
)
from tylo.layouts.errors import AssumptionError, SizeBudgetError
from tylo.layouts.inttuple import (
    congruent,
    crd2idx,
    depth_of,
    flatten_tuple,
    idx2crd,
    prefix_product,
    product,
)
from tylo.layouts.parse import MAX_NESTING, parse
from tylo.layouts.swizzle import ComposedLayout

N = dim("N")


def fast(fn, *args, limit: float = 1.0):
    """Run ``fn`` and fail when it takes longer than ``limit`` seconds (CPU time)."""
    t0 = time.process_time()
    try:
        return fn(*args)
    finally:
        assert time.process_time() - t0 < limit, f"{fn} took too long"


def deep(depth: int, leaf=1):
    t = leaf
    for _ in range(depth):
        t = (t,)
    return t


# -- parse ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, words",
    [
        ("3**20000000", "2**1024"),
        ("N**100000", "MAX_SYMBOLIC_EXPONENT"),
        ("9" * 5000, "2**1024"),
        ("Mod(4,0)", "modulus zero"),
        ("4/0", "division by zero"),
        ("(8,N/(N-N)):(1,1)", "division by zero"),
        ("0**-1", "division by zero"),
        ("floor(1,2)", "1 argument"),
        ("Mod(4)", "2 arguments"),
        ("(" * 5000 + "1" + ")" * 5000, "MAX_NESTING"),
        ("-" * 5000 + "1", "MAX_NESTING"),
        ("floor(" * 200 + "1" + ")" * 200, "MAX_NESTING"),
        ("S<3,3," + "9" * 6000 + "> o 8:1", "20 digits"),
    ],
)
def test_parse_refuses_quickly(text, words):
    with pytest.raises(NotationError, match=words.replace("*", r"\*").replace("(", r"\(")):
        fast(parse, text)


def test_parse_nesting_limit_is_exact():
    assert parse("(" * MAX_NESTING + "4" + ")" * MAX_NESTING).shape == deep(MAX_NESTING, 4)
    with pytest.raises(NotationError, match="MAX_NESTING"):
        parse("(" * (MAX_NESTING + 1) + "4" + ")" * (MAX_NESTING + 1))


def test_parse_is_linear_in_the_text():
    text = "(" + ",".join(["1"] * 20000) + ")" + " " * 200000
    assert size(fast(parse, text, limit=5.0)) == 1


def test_parse_swizzle_out_of_range():
    with pytest.raises(SwizzleError, match="64"):
        parse("S<3,3,99999999999> o 8:1")


ALPHABET = st.sampled_from(list("()0123456789,:+-*/ NMS<>o") + ["**", "Mod(", "floor(", "x"])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ALPHABET, max_size=30).map("".join))
def test_parse_fuzz_gives_a_value_or_a_layout_error(text):
    try:
        fast(parse, text)
    except LayoutError:
        pass


# -- int tuples -------------------------------------------------------------------------------


def test_deep_nesting_is_iterative_or_a_shape_error():
    t = deep(5000)
    assert flatten_tuple(t) == (1,) and product(t) == 1 and depth_of(t) == 5000
    for fn, args in [
        (prefix_product, (t,)),
        (congruent, (t, t)),
        (idx2crd, (0, t)),
        (crd2idx, (0, t)),
    ]:
        with pytest.raises(ShapeError, match="deeper than"):
            fn(*args)


@settings(max_examples=100, deadline=None)
@given(st.recursive(st.integers(1, 5), lambda c: st.lists(c, min_size=0, max_size=3).map(tuple)))
def test_flatten_and_depth_match_the_recursive_definitions(t):
    def flat(x):
        return (x,) if type(x) is not tuple else sum((flat(e) for e in x), ())

    def dep(x):
        return 0 if type(x) is not tuple else 1 + max((dep(e) for e in x), default=0)

    assert flatten_tuple(t) == flat(t) and depth_of(t) == dep(t)


def test_crd2idx_never_drops_a_coordinate_or_mode():
    with pytest.raises(ShapeError, match="not congruent"):
        crd2idx((1, 2), (4, 4), (1,))
    with pytest.raises(ShapeError, match="not congruent"):
        crd2idx((1, 2), (4, 4), 1)
    with pytest.raises(ShapeError, match="not congruent"):
        crd2idx(5, (4, 4), (1, 4, 16))
    with pytest.raises(ShapeError, match="single extent"):
        crd2idx(3, 4, (1, 4))
    with pytest.raises(ShapeError, match="does not match"):
        crd2idx((1, 2, 3), (4, 4), (1, 4))
    with pytest.raises(ShapeError, match="size 0"):
        crd2idx(5, (0, 3), (1, 1))


def test_idx2crd_refuses_zero_and_incongruent():
    with pytest.raises(ShapeError, match="positive"):
        idx2crd(5, (0, 3))
    with pytest.raises(ShapeError, match="positive"):
        idx2crd(5, (2, 3), (0, 2))
    with pytest.raises(ShapeError, match="not congruent"):
        idx2crd((1, 2, 3), (4, 4))
    with pytest.raises(ShapeError, match="not congruent"):
        idx2crd((1,), (4, 4))


@settings(max_examples=100, deadline=None)
@given(
    st.recursive(
        st.integers(1, 4), lambda c: st.lists(c, min_size=1, max_size=3).map(tuple), max_leaves=5
    )
)
def test_idx2crd_crd2idx_round_trip(shape):
    n = product(shape)
    for i in range(min(n, 200)):
        assert crd2idx(idx2crd(i, shape), shape) == i


# -- divides, substitute, swizzles, cosize --------------------------------------------------


@pytest.mark.parametrize("tiler", [0, -1, (0, 2), (2, -4)])
def test_divide_by_a_non_positive_tile(tiler):
    with pytest.raises(ShapeError, match="positive"):
        logical_divide(Layout((8, 4), (1, 8)), tiler)
    with pytest.raises(ShapeError, match="positive"):
        zipped_divide(Layout((8, 4), (1, 8)), tiler)


@pytest.mark.parametrize(
    "values, words",
    [
        (None, "mapping"),
        ([("N", 3)], "mapping"),
        ({"N": 2.5}, "2.5"),
        ({"N": 2.0}, "2.0"),
        ({"N": True}, "bool"),
        ({"N": "3"}, "str"),
        ({"N": sympy.Rational(5, 2)}, "5/2"),
        ({3: 4}, "not a symbol"),
    ],
)
def test_substitute_refuses_non_integers(values, words):
    with pytest.raises(AssumptionError, match=words):
        substitute(Layout(N, 1), values)


def test_substitute_takes_exact_integers():
    for v in (3, np.int64(3), sympy.Integer(3)):
        assert substitute(Layout(N, 1), {"N": v}) == Layout(3, 1)
        assert substitute(Layout(N, 1), {N: v}) == Layout(3, 1)


@pytest.mark.parametrize("args", [(3, 3, 2**40), (2**40, 0, 2**40), (1, 62, 2), (3, 3, -60)])
def test_swizzle_parameters_past_64_bits(args):
    with pytest.raises(SwizzleError, match="exceeds 64"):
        fast(Swizzle, *args)


def test_swizzle_at_the_limit():
    sw = Swizzle(1, 62, 1)  # bits + base + |shift| == 64
    x = 1 << 63
    assert sw(sw(x)) == x and sw(x) == x | (1 << 62)


def test_cosize_of_a_huge_swizzled_layout_refuses_with_the_budget():
    with pytest.raises(SizeBudgetError, match="ENUMERATION_LIMIT") as info:
        fast(cosize, composition(Swizzle(3, 3, 3), Layout(2**40, 1)))
    assert info.value.limit == _budget.ENUMERATION_LIMIT and info.value.count == 2**40


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 3),
    st.integers(0, 4),
    st.integers(0, 5),
    st.booleans(),
    st.lists(st.integers(1, 5), min_size=1, max_size=3),
    st.lists(
        st.one_of(st.integers(-40, 40), st.sampled_from([2**62, -(2**63), 2**64 + 3])),
        min_size=3,
        max_size=3,
    ),
    st.integers(-50, 2**63),
)
def test_cosize_of_composed_layouts_is_exact(bits, base, shift, neg, shape, strides, offset):
    shift = max(shift, bits) * (-1 if neg else 1)
    inner = Layout(tuple(shape), tuple(strides[: len(shape)]))
    c = ComposedLayout(Swizzle(bits, base, shift), offset, inner)
    assert c.cosize() == max(c(i) for i in range(size(inner))) + 1
    outer = Layout((3, 4), (strides[0] % 7, 5))
    c = ComposedLayout(outer, offset % 100, inner)
    assert c.cosize() == max(c(i) for i in range(size(inner))) + 1


def test_budget_module_doctests():
    assert doctest.testmod(_budget, optionflags=doctest.ELLIPSIS).failed == 0
