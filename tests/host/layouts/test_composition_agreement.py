"""Static and symbolic composition agree: ``substitute(composition(A_sym, B), v)`` is the
same function, over the same modes, as ``composition(substitute(A_sym, v), B)`` (both
extend A past its size along its last mode, CuTe's convention), including the degenerate
values (an extent of 1, where the static path used to coalesce A first)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tylo.layouts import (
    Layout,
    LayoutError,
    UndecidableError,
    composition,
    dim,
    size,
    substitute,
)
from tylo.layouts.strategies import layouts

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
N = dim("N")


def _values(x: Layout, n: int) -> list:
    return [x(i) for i in range(n)]


def test_extent_one_extends_along_the_last_mode():
    assert composition(Layout(1, 1), Layout(4, 1)) == Layout(4, 1)
    sym = composition(Layout(N, 1), Layout(4, 1))
    for v in (1, 2, 3, 4, 9):
        got = substitute(sym, {"N": v})
        want = composition(Layout(v, 1), Layout(4, 1))
        assert _values(got, 4) == _values(want, 4) == [0, 1, 2, 3]


@st.composite
def symbolic_left(draw):
    """A layout with ``N`` as one extent (last mode included), the others static."""
    k = draw(st.integers(1, 3))
    shape = [draw(st.integers(1, 4)) for _ in range(k)]
    stride = [draw(st.integers(0, 9)) for _ in range(k)]
    at = draw(st.integers(0, k - 1))
    shape[at] = N
    return Layout(tuple(shape), tuple(stride)) if k > 1 else Layout(N, stride[0])


@SETTINGS
@given(symbolic_left(), layouts(24), st.lists(st.integers(1, 6), min_size=2, max_size=2))
def test_static_and_symbolic_compositions_agree(a, b, values):
    try:
        sym = composition(a, b)
    except (UndecidableError, LayoutError):
        return  # a refusal is judged by the other composition tests
    for v in values:
        env = {"N": v}
        static_a = substitute(a, env)
        got = substitute(sym, env)
        try:
            want = composition(static_a, b)
        except LayoutError as err:
            raise AssertionError(
                f"composition({a}, {b}) = {sym} but at N={v} the static one refuses: {err}"
            ) from None
        n = size(b)
        assert size(got) == size(want) == n, (str(a), str(b), str(sym), v)
        assert _values(got, n) == _values(want, n) == [static_a(b(i)) for i in range(n)], (
            str(a),
            str(b),
            str(sym),
            v,
            str(want),
        )
