"""TMA tensor-map planning (tylo.nvgpu.tma): dimension order, stride conditions, box limits,
and the proof that the box's shared layout is the kernel's. Each refusal is checked against
its claim (the layouts really differ somewhere; the stride really is not 16-byte divisible)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tylo import dtypes as dt
from tylo.layouts import ComposedLayout, Layout, Swizzle, composition, dim
from tylo.nvgpu.tma import TensorMapPlan, TMAError

SW = {"none": 0, "32B": 1, "64B": 2, "128B": 3}


def expected_box_offset(plan, coord):
    """Row-major in TMA order, then the byte swizzle S<b,4,3> applied to byte offsets."""
    off, acc = 0, 1
    for i in plan.order:
        off += coord[i] * acc
        acc *= plan.box[i]
    b = off * plan.dtype.nbytes
    bits = SW[plan.swizzle]
    b ^= ((b >> 7) & ((1 << bits) - 1)) << 4
    return b // plan.dtype.nbytes


@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from([dt.bf16, dt.f16, dt.f32, dt.u8]),
    st.sampled_from(list(SW)),
    st.integers(1, 16),
    st.booleans(),
)
def test_box_layout_is_the_hardware_arrangement(dtype, swizzle, rows, inner_last):
    width = {"none": 32, "32B": 32, "64B": 64, "128B": 128}[swizzle] // dtype.nbytes
    M, K = dim("M"), dim("K")
    if inner_last:
        glob, box = Layout((M, K), (dim("ld", multiple_of=16), 1)), (rows, width)
    else:
        glob, box = Layout((K, M), (1, dim("ld", multiple_of=16))), (width, rows)
    probe = TensorMapPlan.__new__(TensorMapPlan)
    object.__setattr__(probe, "dtype", dtype)
    object.__setattr__(probe, "box", box)
    object.__setattr__(probe, "swizzle", swizzle)
    object.__setattr__(probe, "order", (1, 0) if inner_last else (0, 1))
    smem = probe.box_layout()
    plan = TensorMapPlan(dtype, glob, box, swizzle, smem)  # proves smem == the box layout
    for c in itertools.product(*(range(b) for b in box)):
        assert smem(*c) == expected_box_offset(plan, c)
    assert plan.box_bytes == rows * width * dtype.nbytes


def test_mismatched_shared_layouts_are_refused_with_a_true_counterexample():
    M, K = dim("M"), dim("K")
    glob = Layout((M, K), (dim("ld", multiple_of=8), 1))
    wrong = Layout((64, 64), (64, 1))  # the unswizzled arrangement
    with pytest.raises(TMAError, match="counterexample") as err:
        TensorMapPlan(dt.bf16, glob, (64, 64), "128B", wrong)
    right = composition(Swizzle(3, 3, 3), wrong)
    assert any(right(r, c) != wrong(r, c) for r in range(64) for c in range(64))
    assert "S<3,3,3>" in str(err.value)


def test_symbolic_strides_become_conditions_and_static_ones_are_checked():
    M, K, lda = dim("M"), dim("K"), dim("lda")
    smem = Layout((8, 8), (8, 1))
    p = TensorMapPlan(dt.bf16, Layout((M, K), (lda, 1)), (8, 8), "none", smem)
    assert p.conditions == (2 * lda,)
    p = TensorMapPlan(dt.bf16, Layout((M, K), (dim("l8", multiple_of=8), 1)), (8, 8), "none", smem)
    assert p.conditions == ()
    with pytest.raises(TMAError, match="multiple of 16 bytes"):
        TensorMapPlan(dt.bf16, Layout((M, K), (12, 1)), (8, 8), "none", smem)
    assert (12 * 2) % 16 != 0


@pytest.mark.parametrize(
    "args,match",
    [
        ((Layout((64, 64), (64, 2)), (8, 8), "none"), "exactly one contiguous"),
        ((Layout((64, 64), (1, 1)), (8, 8), "none"), "exactly one contiguous"),
        ((Layout((64, 64), (64, 1)), (8, 300), "none"), r"\[1, 256\]"),
        ((Layout((64, 64), (64, 1)), (8, 0), "none"), r"\[1, 256\]"),
        ((Layout((64, 64), (64, 1)), (8,), "none"), "per dimension"),
        ((Layout((64, 64), (64, 1)), (8, 4), "none"), "16-byte"),
        ((Layout((64, 64), (64, 1)), (8, 8), "16B"), "swizzle must be"),
        ((Layout(((8, 8), 64), ((64, 512), 1)), (8, 8), "none"), "nested"),
        ((Layout((2,) * 6, (1, 2, 4, 8, 16, 32)), (1,) * 6, "none"), "1 to 5"),
    ],
)
def test_hardware_limits_are_typed_refusals(args, match):
    glob, box, swizzle = args
    with pytest.raises(TMAError, match=match):
        TensorMapPlan(dt.bf16, glob, box, swizzle, Layout((8, 8), (8, 1)))


def test_element_types_tma_lacks_are_refused():
    with pytest.raises(TMAError, match="no bool"):
        TensorMapPlan(
            dt.bool_, Layout((64, 64), (64, 1)), (16, 16), "none", Layout((16, 16), (16, 1))
        )


def test_encode_checks_concrete_values_before_the_driver():
    p = TensorMapPlan(dt.bf16, Layout((64, 64), (64, 1)), (8, 8), "none", Layout((8, 8), (8, 1)))
    for bad in [
        dict(address=8, extents=(64, 64), strides=(64, 1)),
        dict(address=0, extents=(64, 64), strides=(64, 1)),
        dict(address=256, extents=(0, 64), strides=(64, 1)),
        dict(address=256, extents=(64, 64), strides=(12, 1)),
        dict(address=256, extents=(64, 64), strides=(64, 2)),
        dict(address=256, extents=(64,), strides=(1,)),
        dict(address=256, extents=(64, 60), strides=(64, 1)),  # 120-byte rows
    ]:
        with pytest.raises(TMAError):
            p.encode(**bad)


def test_composed_plans_are_hashable_and_frozen():
    p = TensorMapPlan(dt.bf16, Layout((64, 64), (64, 1)), (8, 8), "none", Layout((8, 8), (8, 1)))
    assert hash(p) == hash(p)
    with pytest.raises(AttributeError):
        p.box = (1, 1)
    assert isinstance(
        TensorMapPlan(
            dt.bf16,
            Layout((64, 64), (64, 1)),
            (8, 64),
            "128B",
            ComposedLayout(Swizzle(3, 3, 3), 0, Layout((8, 64), (64, 1))),
        ).box_layout(),
        ComposedLayout,
    )
