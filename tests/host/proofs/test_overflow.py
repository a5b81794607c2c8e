"""Static proofs are exact for offsets near and past 2**63 (no int64 wrap-around), and
refuse, with the size budget named, what they would have to enumerate past it."""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.host.proofs.helpers import check_verdict_static
from tylo.layouts import ComposedLayout, Layout, Swizzle
from tylo.layouts._budget import ENUMERATION_LIMIT
from tylo.layouts.errors import SizeBudgetError
from tylo.layouts.proofs import (
    prove_aligned,
    prove_bounded,
    prove_contiguous,
    prove_equal,
    prove_injective,
)

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
BIG = [2**61, 2**62, 2**62 + 1, 2**63 - 1, 2**63, 2**63 + 1, 2**64, 3 * 2**62, 2**70]
STRIDES = st.one_of(
    st.integers(-6, 6),
    st.sampled_from(BIG),
    st.sampled_from(BIG).map(lambda x: -x),
    st.sampled_from(BIG).flatmap(lambda x: st.integers(-3, 3).map(lambda k: x + k)),
)


@st.composite
def big_layouts(draw):
    """Static layouts whose offsets reach past 2**63 (and negative past -2**63);
    sometimes swizzled, sometimes with an offset near 2**63."""
    n = draw(st.integers(1, 3))
    shape = tuple(draw(st.integers(1, 4)) for _ in range(n))
    stride = tuple(draw(STRIDES) for _ in range(n))
    lay = Layout(shape, stride)
    kind = draw(st.integers(0, 3))
    if kind == 0:
        return ComposedLayout(Swizzle(2, 1, 3), draw(st.sampled_from([0, 2**63 - 5])), lay)
    if kind == 1:
        return ComposedLayout(Layout((2, 8), (2**62, 3)), draw(st.integers(0, 9)), lay)
    return lay


def test_the_issue_example():
    v = prove_equal(Layout(4, 2**62), Layout((2, 2), (2**62, -(2**63))))
    assert v.disproved
    check_verdict_static("equal", (Layout(4, 2**62), Layout((2, 2), (2**62, -(2**63)))), {}, v)


@SETTINGS
@given(big_layouts())
def test_injective_exact_past_int64(lay):
    check_verdict_static("injective", (lay,), {}, prove_injective(lay))


@SETTINGS
@given(big_layouts(), big_layouts())
def test_equal_exact_past_int64(a, b):
    check_verdict_static("equal", (a, b), {}, prove_equal(a, b))


@SETTINGS
@given(big_layouts(), st.sampled_from([1, 2, 4]), st.sampled_from([1, 2, 4]))
def test_aligned_exact_past_int64(lay, vector, elem_bytes):
    kw = {"vector": vector, "elem_bytes": elem_bytes, "base": 2**63 - 8}
    check_verdict_static("aligned", (lay,), kw, prove_aligned(lay, **kw))


@SETTINGS
@given(big_layouts(), st.sampled_from([1, 2, 4]))
def test_contiguous_exact_past_int64(lay, vector):
    kw = {"vector": vector}
    check_verdict_static("contiguous", (lay,), kw, prove_contiguous(lay, **kw))


@SETTINGS
@given(big_layouts(), st.sampled_from([2**63, 2**64, 2**65 + 7]), st.sampled_from([0, 2**63]))
def test_bounded_exact_past_int64(lay, extent, base):
    kw = {"extent": extent, "base": -base}
    check_verdict_static("bounded", (lay,), kw, prove_bounded(lay, **kw))


def test_static_enumeration_past_the_budget_is_refused_quickly():
    # no rule settles a swizzled layout whose first vector is not swizzle-aligned, so
    # contiguity would be enumerated: 2**24 elements is over the budget
    lay = ComposedLayout(Swizzle(3, 2, 3), 1, Layout((2**12, 2**12), (1, 2**12)))
    t0 = time.process_time()
    with pytest.raises(SizeBudgetError, match="ENUMERATION_LIMIT") as info:
        prove_contiguous(lay, vector=8)
    assert time.process_time() - t0 < 1.0
    assert str(info.value).startswith("prove_contiguous: ")
    assert info.value.limit == ENUMERATION_LIMIT and info.value.count == 2**24


def test_aligned_decides_a_huge_mode_without_enumerating():
    t0 = time.process_time()
    assert prove_aligned(Layout(2**31, 1), vector=8, elem_bytes=2).proved
    v = prove_aligned(Layout((2**31, 2), (1, 12)), vector=8, elem_bytes=2)
    assert v.disproved and v.witness["offsets"] == (12,)
    v = prove_aligned(Layout((2**31, 2), (3, 16)), vector=8, elem_bytes=1)  # a = 16
    assert v.disproved and v.witness["offsets"] == (24,)
    assert time.process_time() - t0 < 1.0
