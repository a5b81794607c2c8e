"""``tylo.range(..., unroll=)``: the loop metadata in the traced IR and the errors (trace only,
no libNVVM). The PTX it gives is checked in tests/nvvm/test_loop_unroll.py, the results on a
GPU in tests/gpu/test_loop_unroll_gpu.py."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tylo
from tylo.backend.ir import IRError, NVVMModule
from tylo.kernel.spec import ParamKind
from tylo.kernel.trace import Binding

F32 = tylo.f32
HERE = __file__


@tylo.kernel
def strided_sum(out, x, n, unroll: tylo.Static):
    t = tylo.thread_idx.x
    acc = tylo.value(0.0)
    for i in tylo.range(t, n, tylo.block_dim.x, unroll=unroll):
        acc = acc + x[i]
    out[t] = acc


@tylo.kernel
def nested(out, x, n, m):
    t = tylo.thread_idx.x
    acc = tylo.value(0.0)
    for i in tylo.range(n, unroll=2):
        for j in tylo.range(m, unroll=4):
            acc = acc + x[t + 32 * (i * m + j)]
    out[t] = acc


def loop_metadata(llvm: str) -> list[str]:
    """The hints of every `!llvm.loop` in ``llvm``, in the order the back edges appear."""
    nodes = dict(re.findall(r"^(!\d+) = (.*)$", llvm, re.MULTILINE))
    hints = []
    for ref in re.findall(r"br label %\"[\w.]+\", !llvm.loop (!\d+)", llvm):
        ident = nodes[ref]
        assert ident.startswith(f"distinct !{{ {ref}, "), ident  # self-referential, distinct
        (prop,) = re.findall(r"!\d+", ident)[1:]
        hints.append(nodes[prop])
    return hints


@pytest.mark.parametrize(
    ("unroll", "hint"),
    [
        (None, None),
        (1, '!{ !"llvm.loop.unroll.disable" }'),
        (4, '!{ !"llvm.loop.unroll.count", i32 4 }'),
        (np.int64(3), '!{ !"llvm.loop.unroll.count", i32 3 }'),
    ],
)
def test_metadata_on_the_back_edge(unroll, hint) -> None:
    llvm = strided_sum.trace(F32, F32, int, unroll, block=128).llvm
    assert loop_metadata(llvm) == ([] if hint is None else [hint])


def test_full_unroll_of_a_static_trip_count() -> None:
    @tylo.kernel
    def fixed(out, x):
        t = tylo.thread_idx.x
        acc = tylo.value(0.0)
        for i in tylo.range(3, 40, 3, unroll=True):
            acc = acc + x[t + 32 * i]
        out[t] = acc

    assert loop_metadata(fixed.trace(F32, F32, block=32).llvm) == ['!{ !"llvm.loop.unroll.full" }']


def test_nested_loops_have_their_own_identifiers() -> None:
    llvm = nested.trace(F32, F32, int, int, block=32).llvm
    assert loop_metadata(llvm) == [  # the inner back edge is emitted first
        '!{ !"llvm.loop.unroll.count", i32 4 }',
        '!{ !"llvm.loop.unroll.count", i32 2 }',
    ]


def test_repr_and_loop_id_checks() -> None:
    assert repr(tylo.range(4, unroll=2)) == "tylo.range(0, 4, 1, unroll=2)"
    assert repr(tylo.range(4)) == "tylo.range(0, 4, 1)"
    with pytest.raises(IRError, match="unknown loop hint"):
        NVVMModule().loop_id(("llvm.loop.vectorize.width", 4))


def test_static_true_and_one_are_different_specializations() -> None:
    # True == 1 in Python; a kernel may branch on the type, so they must not share a cubin
    one = Binding("u", ParamKind.STATIC, static=1)
    assert one != Binding("u", ParamKind.STATIC, static=True)
    assert one != Binding("u", ParamKind.STATIC, static=1.0)
    assert Binding("u", ParamKind.STATIC, static=(1, 2)) != Binding(
        "u", ParamKind.STATIC, static=(True, 2)
    )
    assert one == Binding("u", ParamKind.STATIC, static=1) and hash(one) == hash(
        Binding("u", ParamKind.STATIC, static=1)
    )


# ---------------------------------------------------------------------------- errors


def line_of(fn, text: str) -> int:
    import inspect

    lines, first = inspect.getsourcelines(fn)
    for k, line in enumerate(lines):
        if text in line and not line.lstrip().startswith("def "):
            return first + k
    raise AssertionError(f"{text!r} not in {fn.__name__}")


@pytest.mark.parametrize(
    ("unroll", "match"),
    [
        (0, "unroll=0 is not an unroll request.*unroll=1 disables unrolling"),
        (False, "unroll=False is not an unroll request.*unroll=1 disables unrolling"),
        (-2, "unroll=-2 is not an unroll request"),
        (2.0, "unroll=2.0 is not an unroll request"),
        ("4", "unroll='4' is not an unroll request"),
        (2**31, "unroll=2147483648 is not an unroll request"),
    ],
)
def test_bad_unroll_values_name_the_line(unroll, match) -> None:
    with pytest.raises(tylo.TraceError, match=match) as info:
        strided_sum.trace(F32, F32, int, unroll, block=128)
    err = info.value
    assert err.filename == HERE
    assert err.lineno == line_of(strided_sum.fn, "for i in tylo.range(")
    assert "tylo.range(t, n, tylo.block_dim.x, unroll=unroll)" in err.source_line


def test_a_runtime_unroll_count_is_an_error() -> None:
    @tylo.kernel
    def runtime_count(out, n):
        for i in tylo.range(8, unroll=n):
            out[i] = 1.0

    with pytest.raises(tylo.TraceError, match="must be a Python int known at trace time") as info:
        runtime_count.trace(F32, int, block=32)
    assert info.value.lineno == line_of(runtime_count.fn, "unroll=n")


def test_full_unroll_needs_a_static_trip_count() -> None:
    @tylo.kernel
    def dynamic_full(out, x, n):
        t = tylo.thread_idx.x
        acc = tylo.value(0.0)
        for i in tylo.range(t, n, 32, unroll=True):
            acc = acc + x[i]
        out[t] = acc

    with pytest.raises(tylo.TraceError, match=r"unroll=True.*not known at trace time") as info:
        dynamic_full.trace(F32, F32, int, block=32)
    assert info.value.lineno == line_of(dynamic_full.fn, "unroll=True")
    assert "unroll=4" in info.value.message
