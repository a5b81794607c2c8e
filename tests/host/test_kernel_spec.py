"""Kernel parameters and specialization keys (no libNVVM, no GPU): static versus runtime
kinds, launch checks, stable texts of static values, the first-level cache key, the
flatten protocol."""

from __future__ import annotations

import dataclasses
import enum

import numpy as np
import pytest

import tylo
from tylo.kernel import diskcache
from tylo.kernel.spec import Int, ParamKind, Ptr, classify
from tylo.kernel.tree import flatten, unflatten


class Mode(enum.Enum):
    FAST = 1


@dataclasses.dataclass(frozen=True)
class Plan:
    tile: int
    mode: Mode


class FakeTensor:
    __module__ = "torch.fake"

    def data_ptr(self) -> int:
        return 0


@pytest.mark.parametrize(
    "annotation,value,kind",
    [
        (None, 3, ParamKind.INT),
        (None, np.int64(3), ParamKind.INT),
        (None, 2.5, ParamKind.FLOAT),
        (None, True, ParamKind.STATIC),
        (None, tylo.f16, ParamKind.STATIC),
        (tylo.Static, "sum", ParamKind.STATIC),  # unannotated: refused (test_launch_args)
        (None, (1, 2), ParamKind.STATIC),
        (None, Plan(4, Mode.FAST), ParamKind.STATIC),
        (None, None, ParamKind.STATIC),
        (None, FakeTensor(), ParamKind.POINTER),
        (None, tylo.pointer(tylo.f32), ParamKind.POINTER),
        (tylo.Static, 3, ParamKind.STATIC),
        (tylo.Int(min=0), 3, ParamKind.INT),
        (tylo.Float(tylo.f64), 1, ParamKind.FLOAT),
        (tylo.Ptr(align=16), FakeTensor(), ParamKind.POINTER),
    ],
)
def test_parameter_kinds(annotation, value, kind):
    assert classify(annotation, value, "p") is kind


def test_host_arrays_and_unhashable_values_are_refused():
    with pytest.raises(tylo.KernelArgumentError, match="host memory"):
        classify(None, np.zeros(3), "x")
    with pytest.raises(tylo.KernelArgumentError, match="cannot pass a dict"):
        classify(None, {"a": 1}, "cfg")


def test_int_facts_are_checked_with_clear_messages():
    Int().check("n", 5, 64)
    with pytest.raises(tylo.KernelArgumentError, match=r"'n' = 0: must be positive.*min=0"):
        Int().check("n", 0, 64)
    with pytest.raises(tylo.KernelArgumentError, match="must be a multiple of 8"):
        Int(multiple_of=8).check("ld", 12, 64)
    with pytest.raises(tylo.KernelArgumentError, match="must be <= 10"):
        Int(max=10).check("k", 11, 64)
    with pytest.raises(tylo.KernelArgumentError, match="32-bit index arithmetic"):
        Int().check("n", 2**31, 32)
    with pytest.raises(tylo.KernelArgumentError, match="not aligned to 16 bytes"):
        Ptr(align=16).check("x", 0x1004)
    with pytest.raises(tylo.TraceError, match="power of two"):
        Ptr(align=12)
    with pytest.raises(tylo.TraceError, match="min must be"):
        Int(min=-1)


@tylo.kernel
def sample(out, x, n, alpha, mode: tylo.Static, block_rows: tylo.Static = 4):
    i = tylo.thread_idx.x
    if i < n:
        out[i] = x[i] * alpha


def test_binding_keywords_defaults_and_errors():
    assert sample.bind((1, 2, 3, 4.0, "a"), {}) == (1, 2, 3, 4.0, "a", 4)
    assert sample.bind((1, 2), {"n": 3, "alpha": 1.0, "mode": "b", "block_rows": 8})[-1] == 8
    with pytest.raises(tylo.KernelArgumentError, match="missing a required argument"):
        sample.bind((1, 2), {})
    with pytest.raises(tylo.KernelArgumentError, match="at most 1024"):
        sample[1, (32, 64)]
    with pytest.raises(tylo.KernelArgumentError, match="positive int"):
        sample[1, 0]
    with pytest.raises(tylo.KernelArgumentError, match="grid and a block"):
        sample[1]


def test_stable_texts():
    st = diskcache.stable_text
    assert st(Plan(4, Mode.FAST)) == st(Plan(4, Mode.FAST))
    assert st(Plan(4, Mode.FAST)) != st(Plan(8, Mode.FAST))
    assert st((1, "a", tylo.bf16, None, 2.5)) == "tuple(1,'a',tylo.bf16,None,2.5)"
    assert st(frozenset({3, 1})) == st(frozenset({1, 3}))
    with pytest.raises(diskcache._Unstable):
        st(object())


def _key(kern, *specs, block=32, target="sm_90a"):
    from tylo.target import Target

    bindings = kern._spec_bindings(specs, {})
    return diskcache.specialization_key(kern, bindings, (block, 1, 1), Target.parse(target))


def test_first_level_key_changes_exactly_when_it_must():
    base = _key(sample, tylo.f32, tylo.f32, int, float, "a")
    assert base == _key(sample, tylo.f32, tylo.f32, int, float, "a")
    assert base != _key(sample, tylo.f32, tylo.f32, int, float, "b")  # static value
    assert base != _key(sample, tylo.f16, tylo.f32, int, float, "a")  # dtype
    assert base != _key(sample, tylo.f32, tylo.f32, int, float, "a", block=64)
    assert base != _key(sample, tylo.f32, tylo.f32, int, float, "a", target="sm_80")
    assert base != _key(sample, tylo.pointer(tylo.f32, align=16), tylo.f32, int, float, "a")
    assert base != _key(tylo.kernel(sample.fn, index_bits=32), tylo.f32, tylo.f32, int, float, "a")
    # a static value without a stable text disables the first-level cache for it
    assert _key(sample, tylo.f32, tylo.f32, int, float, object()) is None


def make_closure_kernel(scale):
    @tylo.kernel
    def scaled(out):
        out[0] = tylo.value(scale)

    return scaled


def test_closure_values_are_part_of_the_key():
    a, b = make_closure_kernel(2.0), make_closure_kernel(3.0)
    assert _key(a, tylo.f32) != _key(b, tylo.f32)
    assert _key(a, tylo.f32) == _key(make_closure_kernel(2.0), tylo.f32)


def test_flatten_protocol_round_trips():
    from collections import namedtuple

    Pair = namedtuple("Pair", "a b")
    obj = (1, [2.0, Pair(3, 4)], {"k": (5,)})
    leaves, tree = flatten(obj)
    assert leaves == [1, 2.0, 3, 4, 5]
    assert unflatten(tree, leaves) == obj
    assert flatten((1, 2))[1] != flatten([1, 2])[1]  # container types are structure
