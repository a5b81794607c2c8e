"""The CTAs of a launch in a pool of processes (``TYLO_INTERPRET_PROCESSES``,
tylo/interpret/pool.py): the same results as one process, races between the processes'
ranges reported, errors raised again with their type, and the launches that must not be
split (atomics, vprintf, one CTA) run in this process."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tylo
from tylo.interpret import InterpretError, OutOfBounds, UnsupportedOperation
from tylo.interpret import launch as interp_launch
from tylo.interpret.globalrace import GlobalRace


@tylo.kernel
def axpy(out, x, y, n):
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    if i < n:
        out[i] = 2.0 * x[i] + y[i]


@tylo.kernel
def cross(out, x, mode: tylo.Static):
    """Block 0's thread 0 writes out[0]; in the other blocks thread 0 writes it too
    ('write') or reads it ('read'); 'none' writes out[block] only."""
    b = tylo.block_idx.x
    if tylo.thread_idx.x == 0:
        if mode == "none":
            out[b] = x[b]
        elif mode == "write" or b == 0:
            out[0] = x[b]
        else:
            out[b] = out[0]


@tylo.kernel
def counted(total, x, n):
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    if i < n:
        tylo.atomic_add(total, 0, x[i])


@tylo.kernel
def overrun(out, n):
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    if i < n + 1:  # one past the end, in the last block
        out[i] = 1.0


@pytest.fixture
def split(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """TYLO_INTERPRET_PROCESSES=2, and the CTA counts of the launches that were split."""
    monkeypatch.setenv("TYLO_INTERPRET_PROCESSES", "2")
    calls: list[int] = []
    real = interp_launch.run_split

    def spy(run_range, ctas, n, allocs):  # type: ignore[no-untyped-def]
        calls.append(ctas)
        return real(run_range, ctas, n, allocs)

    monkeypatch.setattr(interp_launch, "run_split", spy)
    return calls


def test_split_launch_equals_numpy(split: list[int]) -> None:
    rng = np.random.default_rng(1)
    n = 1000
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    out = np.full(n, np.nan, np.float32)
    axpy.interpret[8, 128](out, x, y, n)
    assert split == [8]
    want = (2.0 * x.astype(np.float64) + y).astype(np.float32)
    np.testing.assert_array_equal(out, want)


@settings(max_examples=6, deadline=None)
@given(blocks=st.integers(2, 9), procs=st.integers(2, 5), n=st.integers(1, 9 * 64))
def test_any_split_equals_one_process(blocks: int, procs: int, n: int) -> None:
    rng = np.random.default_rng(n)
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    one, many = np.full(n, np.nan, np.float32), np.full(n, np.nan, np.float32)
    axpy.interpret[blocks, 64](one, x, y, n)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TYLO_INTERPRET_PROCESSES", str(procs))
        axpy.interpret[blocks, 64](many, x, y, n)
    np.testing.assert_array_equal(many, one)


@pytest.mark.parametrize("mode", ["write", "read"])
def test_a_race_between_two_processes_is_reported(split: list[int], mode: str) -> None:
    """Two blocks, two processes: each range holds one block, so only the check across
    the ranges can see the race."""
    x = np.arange(2, dtype=np.float32)
    out = np.zeros(2, np.float32)
    cross.interpret[2, 32](out, x, "none")  # fixed: each block its own element
    assert out.tolist() == x.tolist() and split == [2]
    with pytest.raises(GlobalRace) as info:
        cross.interpret[2, 32](out, x, mode)
    msg = str(info.value)
    assert "array 'out'" in msg and "byte offset 0" in msg and "thread (0, 0, 0)" in msg


def test_errors_come_back_with_their_type(split: list[int]) -> None:
    out = np.zeros(500, np.float32)
    with pytest.raises(OutOfBounds) as info:
        overrun.interpret[4, 128](out, 500)
    assert "block (3, 0, 0) thread (116, 0, 0)" in str(info.value)

    @tylo.kernel
    def refused(out):
        out[0] = tylo.ptx("bfind.u32", tylo.value(7, tylo.u32), out=tylo.u32)

    with pytest.raises(UnsupportedOperation) as info2:
        refused.interpret[2, 32](np.zeros(1, np.uint32))
    assert info2.value.operation == "bfind.u32"


def test_atomics_and_single_ctas_stay_in_this_process(split: list[int]) -> None:
    x = np.ones(1000, np.float32)
    total = np.zeros(1, np.float32)
    counted.interpret[8, 128](total, x, 1000)
    assert total[0] == 1000.0
    out = np.zeros(100, np.float32)
    axpy.interpret[1, 128](out, x[:100], x[:100], 100)
    assert split == [] and out.tolist() == [3.0] * 100


@pytest.mark.parametrize("value", ["0", "-1", "abc", "1e3", "257", "", "2.5"])
def test_bad_process_counts_are_refused(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("TYLO_INTERPRET_PROCESSES", value)
    with pytest.raises(InterpretError) as info:
        axpy.interpret[2, 32](np.zeros(4, np.float32), np.zeros(4, np.float32),
                              np.zeros(4, np.float32), 4)  # fmt: skip
    assert "TYLO_INTERPRET_PROCESSES" in str(info.value)


def test_ops_on_emulated_device_buffers_split(split: list[int],
                                              monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """tylo.ops.softmax on DeviceBuffers in emulated memory (TYLO_INTERPRET=1), its CTAs in
    two processes: verify() compares with the float64 reference (output poisoned first)."""
    from tylo.ops.softmax import host

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from interp_tier import forget_device_state

    monkeypatch.setenv("TYLO_INTERPRET", "1")
    forget_device_state()  # the ops' memos of the device: the interpreter's here, not after
    try:
        r = host.verify(64, 300, style="warp", mask="length", seed=3)
    finally:
        forget_device_state()
    assert split and r["rel_error"] < 1e-5
