"""Defining properties of every operation, checked over whole domains of random static
layouts (hypothesis strategies from tylo.layouts.strategies)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tylo.layouts import (
    CompositionError,
    Layout,
    Swizzle,
    blocked_product,
    coalesce,
    complement,
    composition,
    cosize,
    crd2idx,
    filter_,
    flat_divide,
    flatten,
    idx2crd,
    left_inverse,
    logical_divide,
    logical_product,
    make_layout,
    parse,
    raked_product,
    rank,
    right_inverse,
    size,
    tiled_divide,
    zipped_divide,
)
from tylo.layouts.inttuple import fmt
from tylo.layouts.strategies import (
    composable_pairs,
    divisible_pairs,
    injective_layouts,
    int_tuples,
    layouts,
    shapes,
    strided_layouts,
    swizzled_layouts,
)

FAST = settings(
    max_examples=int(__import__("os").environ.get("TYLO_HYP_EXAMPLES", 80)),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def offsets(x) -> list:
    return [x(i) for i in range(size(x))]


def same_function(a, b) -> bool:
    return size(a) == size(b) and offsets(a) == offsets(b)


@FAST
@given(layouts())
def test_coalesce_keeps_the_function(x):
    c = coalesce(x)
    assert same_function(c, x)
    fs, fd = c.flat()
    assert all(s != 1 for s in fs) or c == Layout(1, 0)
    assert all(fd[i + 1] != fs[i] * fd[i] for i in range(len(fs) - 1))
    by_mode = coalesce(x, (1,) * rank(x))
    assert rank(by_mode) == rank(x) and same_function(by_mode, x)


@FAST
@given(strided_layouts())
def test_filter_drops_zero_and_unit_modes(x):
    fs, fd = x.flat()
    reduced = Layout(tuple(1 if d == 0 else s for s, d in zip(fs, fd)), fd)
    f = filter_(x)
    assert same_function(f, reduced)
    ffs, ffd = f.flat()
    assert f == Layout(1, 0) or all(d != 0 and s != 1 for s, d in zip(ffs, ffd))


@FAST
@given(composable_pairs())
def test_composition_is_functional_composition(pair):
    a, b = pair
    r = composition(a, b)
    assert r.shape == b.shape or size(r) == size(b)
    for i in range(size(b)):
        assert r(i) == a(b(i)), (str(a), str(b), str(r), i)


@FAST
@given(composable_pairs(), st.data())
def test_composition_by_mode(pair, data):
    a = pair[0]
    if type(a.shape) is not tuple:
        return
    tiler = tuple(size(a[i]) for i in range(len(a.shape)))
    tiler = tiler[: data.draw(st.integers(1, len(tiler)))]
    r = composition(a, tiler)
    for i, t in enumerate(tiler):
        assert same_function(r[i], composition(a[i], Layout(t)))


@FAST
@given(injective_layouts(), st.integers(1, 3))
def test_complement_is_disjoint_and_covers(x, k):
    n = cosize(x) * k
    c = complement(x, n)
    both = Layout((x.shape, c.shape), (x.stride, c.stride))
    image = offsets(both)
    assert len(set(image)) == len(image)  # injective together
    assert set(range(n)) <= set(image)  # covers the cotarget
    assert set(offsets(x)) & set(offsets(c)) == {0}
    fd = c.flat()[1]
    assert list(fd) == sorted(fd)  # ordered by increasing stride


@FAST
@given(layouts())
def test_right_inverse_law(x):
    r = right_inverse(x)
    for i in range(size(r)):
        assert x(r(i)) == i


@FAST
@given(injective_layouts())
def test_left_inverse_law(x):
    li = left_inverse(x)
    for i in range(size(x)):
        assert li(x(i)) == i


@FAST
@given(divisible_pairs())
def test_logical_divide_definition(pair):
    a, tiler = pair
    d = logical_divide(a, tiler)
    assert sorted(offsets(d)) == sorted(offsets(a))
    if isinstance(tiler, Layout) or type(tiler) is int:
        t = tiler if isinstance(tiler, Layout) else Layout(tiler)
        assert same_function(d[0], composition(a, t))
        both = make_layout(t, complement(t, size(a)))
        assert all(d(i) == a(both(i)) for i in range(size(d)))
    else:
        for i, t in enumerate(tiler):
            assert same_function(d[i][0], composition(a[i], t))
    z = zipped_divide(a, tiler)
    assert sorted(offsets(z)) == sorted(offsets(a))
    assert flatten(tiled_divide(a, tiler)) == flatten(z) == flatten(flat_divide(a, tiler))


@FAST
@given(injective_layouts(max_size=32), st.one_of(injective_layouts(max_size=16), st.integers(1, 6)))
def test_logical_product_definition(a, b):
    bl = b if isinstance(b, Layout) else Layout(b)
    comp = complement(a, size(a) * cosize(bl))
    try:
        p = logical_product(a, b)
    except CompositionError:
        # defined exactly when the complement composes with b
        with pytest.raises(CompositionError):
            composition(comp, bl)
        assume(False)
    assert p[0] == a
    assert same_function(p[1], composition(comp, bl))
    image = offsets(p)
    assert len(set(image)) == len(image)  # an injective block repeated injectively
    for prod_fn in (blocked_product, raked_product):
        q = prod_fn(a, bl)
        assert sorted(offsets(q)) == sorted(image)


@FAST
@given(shapes(), st.data())
def test_idx2crd_crd2idx_round_trip(shape, data):
    n = size(Layout(shape))
    i = data.draw(st.integers(0, n - 1))
    assert crd2idx(idx2crd(i, shape), shape) == i


@FAST
@given(st.one_of(layouts(), swizzled_layouts()))
def test_str_parse_and_repr_round_trip(x):
    from tylo.layouts import ComposedLayout  # noqa: F401  (repr names it)

    assert parse(str(x)) == x
    assert eval(repr(x)) == x


@FAST
@given(int_tuples())
def test_int_tuple_notation_round_trip(t):
    x = Layout(t)
    assert Layout.parse(fmt(t)) == x
    assert Layout.parse(str(x)) == x


@FAST
@given(swizzled_layouts())
def test_swizzle_is_a_bijection(c):
    image = offsets(c)
    assert len(set(image)) == len(image)
    sw = c.outer
    block = sw.size()
    assert sorted(sw(i) for i in range(block)) == list(range(block))
    assert all(sw(sw(i)) == i for i in range(block))


def test_swizzle_on_symbolic_offsets():
    from tylo.layouts import index_symbol, substitute

    tid = index_symbol("tid", upper=64)
    sw = Swizzle(3, 3, 3)
    e = sw(64 * tid)
    assert [substitute(e, {tid: r}) for r in range(4)] == [0, 72, 144, 216]
