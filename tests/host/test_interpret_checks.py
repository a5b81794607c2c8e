"""The interpreter's checks: planted out-of-bounds accesses, shared-memory races,
divergent barriers and uninitialized reads are each reported with the right error (and
the same kernels, fixed, run clean)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tylo
from tylo.interpret import (
    BarrierDivergence,
    OutOfBounds,
    SharedRace,
    UninitializedRead,
    WarpDivergence,
)
from tylo.interpret.globalrace import GlobalRace


@tylo.kernel
def copy(out, x, n, extra: tylo.Static):
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    if i < n + extra:  # extra > 0: the planted bug
        out[i] = x[i]


def test_out_of_bounds_global_read_names_block_thread_offset() -> None:
    x = np.arange(100, dtype=np.float32)
    out = np.zeros(100, np.float32)
    copy.interpret[1, 128](out, x, 100, 0)  # fixed: clean
    assert np.array_equal(out, x)
    with pytest.raises(OutOfBounds) as info:
        copy.interpret[1, 128](out, x, 100, 1)
    msg = str(info.value)
    assert "array 'x'" in msg and "byte offset 400" in msg and "element 100" in msg
    assert "block (0, 0, 0) thread (100, 0, 0)" in msg and "load" in msg


def test_out_of_bounds_before_the_array() -> None:
    @tylo.kernel(bounds="off")  # the tracer would refuse it (OutOfBoundsError): run it anyway
    def back(out, x):
        t = tylo.thread_idx.x
        out[t] = x[t - 1]

    with pytest.raises(OutOfBounds) as info:
        back.interpret[1, 32](np.zeros(32, np.float32), np.zeros(32, np.float32))
    assert "byte offset -4" in str(info.value) and "thread (0, 0, 0)" in str(info.value)


@tylo.kernel
def rotate(out, x, sync: tylo.Static, off: tylo.Static):
    t = tylo.thread_idx.x
    s = tylo.shared(tylo.f32, 64)
    s[t] = x[t]
    if sync:
        tylo.sync_threads()
    out[t] = s[(t + off) % 64]


def test_shared_race_reported_with_both_threads() -> None:
    x = np.arange(64, dtype=np.float32)
    out = np.zeros(64, np.float32)
    rotate.interpret[1, 64](out, x, True, 1)  # fixed: clean
    assert np.array_equal(out, np.roll(x, -1))
    with pytest.raises(SharedRace) as info:
        rotate.interpret[1, 64](out, x, False, 1)
    msg = str(info.value)
    assert "byte offset 4" in msg and "thread (0, 0, 0)" in msg and "thread (1, 0, 0)" in msg


def test_reading_ones_own_write_is_no_race() -> None:
    x = np.arange(64, dtype=np.float32)
    out = np.zeros(64, np.float32)
    rotate.interpret[1, 64](out, x, False, 0)
    assert np.array_equal(out, x)


def test_shared_out_of_bounds() -> None:
    @tylo.kernel(bounds="off")  # the tracer would refuse it (OutOfBoundsError): run it anyway
    def over(out, x):
        t = tylo.thread_idx.x
        s = tylo.shared(tylo.f32, 32)
        s[t] = x[t]
        out[t] = 0.0

    with pytest.raises(OutOfBounds) as info:
        over.interpret[1, 64](np.zeros(64, np.float32), np.zeros(64, np.float32))
    assert "shared" in str(info.value) and "thread (32, 0, 0)" in str(info.value)


def test_divergent_barrier() -> None:
    @tylo.kernel
    def half(out, bad: tylo.Static):
        t = tylo.thread_idx.x
        if t < 32 or not bad:
            tylo.sync_threads()
        out[t] = 1

    out = np.zeros(64, np.int32)
    half.interpret[1, 64](out, False)
    assert out.tolist() == [1] * 64
    with pytest.raises(BarrierDivergence) as info:
        half.interpret[1, 64](out, True)
    assert "thread (32, 0, 0)" in str(info.value)


def test_shuffle_from_a_diverged_warp() -> None:
    @tylo.kernel
    def part(out, x):
        t = tylo.thread_idx.x
        if t < 16:
            out[t] = tylo.shfl_xor(x[t], 1)

    with pytest.raises(WarpDivergence):
        part.interpret[1, 32](np.zeros(32, np.float32), np.zeros(32, np.float32))


def test_strict_uninitialized_shared_read(monkeypatch: pytest.MonkeyPatch) -> None:
    @tylo.kernel
    def gap(out, x, fill: tylo.Static):
        t = tylo.thread_idx.x
        s = tylo.shared(tylo.f32, 64)
        if t < 32 or fill:
            s[t] = x[t]
        tylo.sync_threads()
        out[t] = s[t]

    x = np.arange(64, dtype=np.float32)
    out = np.zeros(64, np.float32)
    gap.interpret[1, 64](out, x, False)  # not strict: NaN poison comes through
    assert np.isnan(out[32:]).all() and np.array_equal(out[:32], x[:32])
    monkeypatch.setenv("TYLO_INTERPRET_STRICT", "1")
    gap.interpret[1, 64](out, x, True)
    with pytest.raises(UninitializedRead) as info:
        gap.interpret[1, 64](out, x, False)
    assert "thread (32, 0, 0)" in str(info.value)


@pytest.mark.parametrize("n", [1, 31, 33, 1000])
def test_every_planted_overrun_is_caught(n: int) -> None:
    x = np.zeros(n, np.float32)
    out = np.zeros(n, np.float32)
    grid = (n + 1 + 63) // 64
    with pytest.raises(OutOfBounds):
        copy.interpret[grid, 64](out, x, n, 1)


@tylo.kernel
def shifted(out, x, n, fwd: tylo.Int(min=0), back: tylo.Int(min=0)):
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    if i < n:
        out[i] = x[i + fwd - back]


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 300), off=st.integers(-40, 40), block=st.sampled_from([32, 64, 96]))
def test_out_of_bounds_exactly_when_an_index_leaves_the_array(n: int, off: int, block: int) -> None:
    """Every thread i < n reads x[i + off]: reported iff some i + off is outside [0, n)."""
    x = np.arange(n, dtype=np.float32)
    out = np.zeros(n, np.float32)
    bad = off < 0 or n - 1 + off >= n
    if bad:
        with pytest.raises(OutOfBounds) as info:
            shifted.interpret[(n + block - 1) // block, block](out, x, n, max(off, 0), max(-off, 0))
        first = 0 if off < 0 else max(0, n - off)  # the first lane out of bounds
        assert f"element {first + off}" in str(info.value)
    else:
        shifted.interpret[(n + block - 1) // block, block](out, x, n, max(off, 0), max(-off, 0))
        assert np.array_equal(out, x)


def test_barrier_inside_a_divergent_loop() -> None:
    @tylo.kernel
    def loop(out, trips):
        t = tylo.thread_idx.x
        s = tylo.shared(tylo.i32, 64)
        acc = tylo.value(0, tylo.i32)
        for k in tylo.range(trips[t]):
            s[t] = k
            tylo.sync_threads()
            acc = acc + s[(t + 1) % 64]
            tylo.sync_threads()
        out[t] = acc

    out = np.zeros(64, np.int32)
    loop.interpret[1, 64](out, np.full(64, 3, np.int64))
    assert out.tolist() == [3] * 64
    trips = np.full(64, 3, np.int64)
    trips[5] = 4  # one thread loops once more: its barrier is reached by nobody else
    with pytest.raises(BarrierDivergence) as info:
        loop.interpret[1, 64](out, trips)
    assert "thread (5, 0, 0)" in str(info.value)


def test_strict_uninitialized_local_read(monkeypatch: pytest.MonkeyPatch) -> None:
    @tylo.kernel
    def part(out, k):
        t = tylo.thread_idx.x
        a = tylo.local(tylo.f32, 4)
        for j in range(3):
            a[j] = 1.0
        out[t] = a[k]

    out = np.zeros(32, np.float32)
    monkeypatch.setenv("TYLO_INTERPRET_STRICT", "1")
    part.interpret[1, 32](out, 2)
    assert (out == 1.0).all()
    with pytest.raises(UninitializedRead) as info:
        part.interpret[1, 32](out, 3)
    assert "local" in str(info.value)


@tylo.kernel
def scatter(out, x, n, stride: tylo.Static):
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    if i < n:
        out[i // stride] = x[i]  # stride > 1: several threads write one element


def test_global_write_write_race_between_blocks() -> None:
    x = np.arange(128, dtype=np.float32)
    out = np.zeros(128, np.float32)
    scatter.interpret[2, 64](out, x, 128, 1)  # fixed: one writer per element
    assert np.array_equal(out, x)
    with pytest.raises(GlobalRace) as info:
        scatter.interpret[2, 64](out, x, 128, 2)
    msg = str(info.value)
    assert "array 'out'" in msg and "thread (0, 0, 0)" in msg and "thread (1, 0, 0)" in msg


@tylo.kernel
def neighbours(out, x, sync: tylo.Static):
    t = tylo.thread_idx.x
    out[t] = x[t] * 2.0
    if sync:
        tylo.sync_threads()
    x[t] = out[(t + 1) % 64]  # reads a neighbour's output, then overwrites the input


def test_global_read_after_write_needs_a_barrier() -> None:
    x = np.arange(64, dtype=np.float32)
    neighbours.interpret[1, 64](np.zeros(64, np.float32), x.copy(), True)  # clean
    with pytest.raises(GlobalRace) as info:
        neighbours.interpret[1, 64](np.zeros(64, np.float32), x.copy(), False)
    assert "array 'out'" in str(info.value)


def test_many_readers_then_a_writer_after_a_barrier_is_no_race() -> None:
    @tylo.kernel
    def bcast(out, x):
        t = tylo.thread_idx.x
        v = x[0]  # every thread reads element 0
        tylo.sync_threads()
        if t == 0:
            x[0] = v + 1.0
        out[t] = v

    x = np.array([5.0], np.float32)
    out = np.zeros(64, np.float32)
    bcast.interpret[1, 64](out, x)
    assert x[0] == 6.0 and (out == 5.0).all()


def test_readers_in_another_block_race_with_a_writer() -> None:
    @tylo.kernel
    def cross(out, x):
        t = tylo.thread_idx.x
        if tylo.block_idx.x == 0:
            out[t] = x[0]
        else:
            tylo.sync_threads()
            x[0] = 1.0
        if tylo.block_idx.x == 0:
            tylo.sync_threads()

    with pytest.raises(GlobalRace):
        cross.interpret[2, 32](np.zeros(32, np.float32), np.zeros(1, np.float32))


@pytest.mark.parametrize(
    "config",
    [(0, 32), (1, 0), (-1, 32), (1, 1025), (1, (32, 32, 2)), (1.5, 32), ("1", 32), (1, True),
     (2**40, 32)],
)  # fmt: skip
def test_bad_launch_shapes_are_refused(config: tuple) -> None:
    from tylo.interpret import InterpretError

    x = np.zeros(4, np.float32)
    with pytest.raises(InterpretError):
        copy.interpret[config](x, x, 4, 0)


def test_hostile_arguments_are_refused() -> None:
    from tylo.interpret import HostArray, InterpretError
    from tylo.kernel.errors import KernelArgumentError

    x = np.zeros(8, np.float32)
    with pytest.raises(InterpretError):
        copy.interpret[1, 32](x[::-1], x, 4, 0)  # negative strides
    with pytest.raises(KernelArgumentError):
        copy.interpret[1, 32](x, x, 0, 0)  # n must be >= 1 (the kernel's Int facts)
    with pytest.raises(KernelArgumentError):
        copy.interpret[1, 32](x, x, 2**63, 0)
    with pytest.raises(InterpretError):
        HostArray(np.zeros(4, np.float32), tylo.bf16)  # 4-byte elements for a 2-byte dtype


def test_bounds_debug_mode_traps_with_its_message(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """TYLO_DEBUG_BOUNDS=1 traces a check before the access (vprintf, then trap): the
    interpreter runs it as traced, so the view's bound (32, inside the 33-element array)
    is what fails, not the array's end."""
    from tylo.interpret import Trap
    from tylo.layouts import Layout

    @tylo.kernel
    def viewed(out, x):
        t = tylo.thread_idx.x
        v = tylo.view(x, Layout((32,), (1,)))
        out[t] = v[t + 1]

    out, x = np.zeros(32, np.float32), np.zeros(33, np.float32)
    viewed.interpret[1, 32](out, x)  # without the mode: in the array, no report
    monkeypatch.setenv("TYLO_DEBUG_BOUNDS", "1")
    with pytest.raises(Trap) as info:
        viewed.interpret[1, 32](out, x)
    assert "thread (31, 0, 0)" in str(info.value)
    assert "index 32, bound 32" in capsys.readouterr().out
