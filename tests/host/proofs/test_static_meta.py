"""On random static layouts every verdict equals brute force (all five properties)."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.host.proofs.helpers import check_verdict_static
from tylo.layouts import ComposedLayout, Layout, Swizzle, coalesce, flatten, size
from tylo.layouts.proofs import (
    prove_aligned,
    prove_bounded,
    prove_contiguous,
    prove_equal,
    prove_injective,
)
from tylo.layouts.strategies import layouts, strided_layouts, swizzled_layouts

EXAMPLES = int(os.environ.get("TYLO_PROOF_EXAMPLES", "150"))
SETTINGS = settings(
    max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@st.composite
def signed_layouts(draw: st.DrawFn) -> Layout:
    """Strided layouts with some strides negated (the provers accept negative strides)."""
    lay = draw(strided_layouts(max_size=64, max_stride=12))
    fs, fd = lay.flat()
    signs = draw(st.lists(st.sampled_from([1, -1]), min_size=len(fd), max_size=len(fd)))
    return Layout(fs, tuple(d * s for d, s in zip(fd, signs)))


@st.composite
def offset_swizzled(draw: st.DrawFn) -> ComposedLayout:
    """Swizzled layouts over arbitrary (possibly non-injective) layouts, with an offset."""
    b = draw(st.integers(1, 3))
    m = draw(st.integers(0, 3))
    s = draw(st.integers(b, b + 2)) * draw(st.sampled_from([1, -1]))
    inner = draw(
        st.one_of(layouts(max_size=64), swizzled_layouts(max_size=64).map(lambda c: c.inner))
    )
    return ComposedLayout(Swizzle(b, m, s), draw(st.integers(0, 40)), inner)


ANY = st.one_of(
    layouts(max_size=64),
    swizzled_layouts(max_size=128),
    signed_layouts(),
    offset_swizzled(),
)


def _rank(lay: object) -> int:
    shape = lay.shape
    return len(shape) if type(shape) is tuple else 1


@SETTINGS
@given(ANY)
def test_injective_matches_brute_force(lay: object) -> None:
    check_verdict_static("injective", (lay,), {}, prove_injective(lay))


@SETTINGS
@given(ANY, st.sampled_from([1, 2, 4, 8]), st.data())
def test_contiguous_matches_brute_force(lay: object, vector: int, data: st.DataObject) -> None:
    mode = data.draw(st.integers(0, _rank(lay) - 1))
    kw = {"vector": vector, "mode": mode}
    check_verdict_static("contiguous", (lay,), kw, prove_contiguous(lay, **kw))


@SETTINGS
@given(
    ANY,
    st.sampled_from([1, 2, 4, 8]),
    st.sampled_from([1, 2, 4, 8]),
    st.sampled_from([4, 8, 16]),
    st.integers(-8, 8),
    st.data(),
)
def test_aligned_matches_brute_force(
    lay: object, vector: int, elem_bytes: int, align: int, base: int, data: st.DataObject
) -> None:
    mode = data.draw(st.integers(0, _rank(lay) - 1))
    kw = {"vector": vector, "elem_bytes": elem_bytes, "mode": mode, "base": base, "align": align}
    check_verdict_static("aligned", (lay,), kw, prove_aligned(lay, **kw))


@SETTINGS
@given(ANY, st.integers(-4, 4), st.integers(-4, 4))
def test_bounded_matches_brute_force(lay: object, slack: int, base: int) -> None:
    offs = [lay(i) for i in range(size(lay))]
    extent = max(1, max(offs) + 1 + slack)
    kw = {"extent": extent, "base": base}
    check_verdict_static("bounded", (lay,), kw, prove_bounded(lay, **kw))


@SETTINGS
@given(ANY, ANY)
def test_equal_matches_brute_force(a: object, b: object) -> None:
    check_verdict_static("equal", (a, b), {}, prove_equal(a, b))


@SETTINGS
@given(layouts(max_size=64))
def test_equal_to_own_normal_forms(a: Layout) -> None:
    for b in (coalesce(a), flatten(a), a):
        v = prove_equal(a, b)
        assert v.status == "proved", (a, b, v)
