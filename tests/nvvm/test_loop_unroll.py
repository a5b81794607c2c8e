"""``tylo.range(..., unroll=)`` compiled without a GPU for sm_80 and sm_90a: libNVVM honours
the hints, and the PTX shows it (loads per loop body, ``.pragma "nounroll"`` after unrolling,
no loop at all after a full unroll)."""

from __future__ import annotations

import re

import pytest

import tylo

TARGETS = ("sm_80", "sm_90a")
F32 = tylo.f32


@tylo.kernel
def strided_sum(out, x, n, unroll: tylo.Static):
    t = tylo.thread_idx.x
    acc = tylo.value(0.0)
    for i in tylo.range(t, n, tylo.block_dim.x, unroll=unroll):
        acc = acc + x[i]
    out[t] = acc


@tylo.kernel
def fixed_sum(out, x, trips: tylo.Static, unroll: tylo.Static):
    t = tylo.thread_idx.x
    acc = tylo.value(0.0)
    for i in tylo.range(trips, unroll=unroll):
        acc = acc + x[t + tylo.block_dim.x * i]
    out[t] = acc


def loops(ptx: str) -> list[int]:
    """The number of ``ld.global`` in each loop of ``ptx`` (from a label to the last branch
    back to it), in the order the loops start."""
    lines = ptx.splitlines()
    labels = {m.group(1): k for k, line in enumerate(lines) if (m := re.match(r"(\$\w+):", line))}
    ends: dict[str, int] = {}
    for k, line in enumerate(lines):
        m = re.search(r"\bbra(?:\.uni)?\s+(\$\w+);", line)
        if m and labels.get(m.group(1), k) < k:
            ends[m.group(1)] = k
    return [
        sum("ld.global" in line for line in lines[labels[label] : end])
        for label, end in sorted(ends.items(), key=lambda item: labels[item[0]])
    ]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("count", [2, 3, 4, 8])
def test_unroll_by_a_count(target, count) -> None:
    ptx = strided_sum.compile(F32, F32, int, count, block=128, target=target).ptx
    body = loops(ptx)
    # the unrolled loop holds `count` loads; the remainder (fewer than `count` iterations)
    # is a loop of one load, or straight-line code when it is a single iteration
    assert max(body) == count, body
    assert 1 <= ptx.count("ld.global") - count <= count - 1
    assert '.pragma "nounroll"' in ptx


@pytest.mark.parametrize("target", TARGETS)
def test_unroll_1_disables_unrolling(target) -> None:
    default = strided_sum.compile(F32, F32, int, None, block=128, target=target).ptx
    assert max(loops(default)) > 1  # libNVVM unrolls this loop by itself
    ptx = strided_sum.compile(F32, F32, int, 1, block=128, target=target).ptx
    assert loops(ptx) == [1] and ptx.count("ld.global") == 1
    assert '.pragma "nounroll"' in ptx


@pytest.mark.parametrize("target", TARGETS)
def test_full_unroll(target) -> None:
    # 200 iterations: more than libNVVM unrolls completely by itself
    default = fixed_sum.compile(F32, F32, 200, None, block=64, target=target).ptx
    assert loops(default) and default.count("ld.global") < 200
    ptx = fixed_sum.compile(F32, F32, 200, True, block=64, target=target).ptx
    assert loops(ptx) == [] and ptx.count("ld.global") == 200


@pytest.mark.parametrize("target", TARGETS)
def test_count_with_a_static_trip_count(target) -> None:
    # 37 = 4 * 9 + 1: the unrolled loop runs 9 times, then one iteration is left
    ptx = fixed_sum.compile(F32, F32, 37, 4, block=64, target=target).ptx
    assert max(loops(ptx)) == 4 and ptx.count("ld.global") <= 8


def test_true_and_1_are_different_specializations() -> None:
    full = fixed_sum.compile(F32, F32, 40, True, block=64, target="sm_90a")
    off = fixed_sum.compile(F32, F32, 40, 1, block=64, target="sm_90a")
    assert full is not off
    assert loops(full.ptx) == [] and loops(off.ptx) == [1]
