"""The Hopper GEMM's host checks that need no GPU: operand extents (TMA reads through a
tensor map, which knows nothing of an array's size, so a too-small operand must be refused
before any launch), checked against brute force."""

from __future__ import annotations

import doctest
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tylo
from tylo.arrays import DeviceArray
from tylo.nvgpu.errors import PlanError
from tylo.ops.gemm import hopper_host as host


def _brute_span(shape, strides):
    """1 + the largest element offset reachable through shape and strides (enumerated)."""
    if any(n == 0 for n in shape):
        return 0
    offsets = [sum(i * s for i, s in zip(idx, strides))
               for idx in itertools.product(*(range(n) for n in shape))]  # fmt: skip
    if min(offsets) < 0:
        return None
    return 1 + max(offsets)


dims = st.integers(1, 6)


@settings(max_examples=300, deadline=None)
@given(
    shape=st.tuples(dims, dims),
    strides=st.tuples(st.integers(-3, 12), st.integers(-2, 3)),
    m=dims,
    n=dims,
    k=dims,
    pad=st.tuples(*[st.integers(0, 4)] * 3),
)
def test_refused_exactly_when_an_operand_is_too_small(shape, strides, m, n, k, pad):
    arr = DeviceArray(1 << 20, shape, strides, tylo.bf16, 0)
    big = DeviceArray(1 << 20, (4096,), (1,), tylo.bf16, 0)
    out = DeviceArray(1 << 30, (4096,), (1,), tylo.bf16, 0)  # D: memory of its own
    lda, ldb, ldd = k + pad[0], k + pad[1], m + pad[2]
    span = _brute_span(shape, strides)
    need = (m - 1) * lda + k  # the array plays A; B and D are large enough
    if span is None or span < need:
        with pytest.raises(PlanError, match="hopper_gemm: A holds"):
            host.check_extents(out, arr, big, m, n, k, lda, ldb, ldd)
    else:
        host.check_extents(out, arr, big, m, n, k, lda, ldb, ldd)


@pytest.mark.parametrize(
    "args, match",
    [((5, 5, 5, 4, 5, 5), "leading dimension >= K"),
     ((5, 5, 5, 5, 5, 4), "leading dimension >= M"),
     ((0, 5, 5, 5, 5, 5), "sizes must be >= 1"),
     ((5, 5, 5, 5, 5, 2**40), "D holds")],
)  # fmt: skip
def test_bad_sizes_are_refused(args, match):
    big = DeviceArray(1 << 20, (4096,), (1,), tylo.bf16, 0)
    with pytest.raises(PlanError, match=match):
        host.check_extents(big, big, big, *args)


@pytest.mark.parametrize("where", [(0, 1, 0), (1, 0, 0), (0, 0, 1), (1, 1, 0), (None, 1, 0)])
def test_operands_on_different_devices_are_refused(where):
    """A and B reach the kernel as tensor maps, which the launcher's device check cannot
    see: the host compares every operand's device (None: one that names none)."""
    a, b, d = (DeviceArray(p, (4096,), (1,), tylo.bf16, dev)
               for p, dev in zip((1 << 20, 1 << 24, 1 << 28), where))  # fmt: skip
    named = {dev for dev in where if dev is not None}
    if len(named) > 1:
        with pytest.raises(PlanError, match="different devices"):
            host.check_extents(d, a, b, 8, 8, 8, 8, 8, 8)
    else:
        host.check_extents(d, a, b, 8, 8, 8, 8, 8, 8)


@pytest.mark.parametrize("d_at, shares", [(0, "A"), (8192 + 16, "B"), (1 << 28, None)])
def test_a_d_sharing_memory_with_a_or_b_is_refused(d_at, shares):
    """D written while other CTAs read A and B: refused where it certainly shares memory
    with either (the Hopper path and the warp-MMA GEMM's default path alike)."""
    from tylo.ops.gemm.host import refuse_shared_memory

    a = DeviceArray(1 << 20, (4096,), (1,), tylo.bf16, 0)
    b = DeviceArray((1 << 20) + 8192, (4096,), (1,), tylo.bf16, 0)
    d = DeviceArray((1 << 20) + d_at, (64, 64), (64, 1), tylo.bf16, 0)
    for check in (lambda: host.check_extents(d, a, b, 64, 64, 64, 64, 64, 64),
                  lambda: refuse_shared_memory("gemm", d, a, b)):  # fmt: skip
        if shares is None:
            check()
        else:
            with pytest.raises(PlanError, match=f"D and {shares} share memory"):
                check()


def test_module_doctests():
    assert doctest.testmod(host, optionflags=doctest.ELLIPSIS).failed == 0
