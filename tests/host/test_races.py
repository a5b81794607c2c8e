"""Shared-memory races between barriers (tylo.kernel.races), a first step: pairs of shared
accesses of one allocation between two block barriers, decided by enumerating the block's
threads when the offsets depend on the thread index alone.

The oracle for the racy kernels is the CPU interpreter (tylo.interpret), which runs every
thread and reports a shared-memory race with both threads: each racy kernel is a race
there, and its fix runs clean. The threads and byte a reported race names are checked by
plain arithmetic."""

from __future__ import annotations

import numpy as np
import pytest

import tylo
from tylo.interpret import SharedRace

f32 = tylo.f32
St = tylo.Static


@tylo.kernel
def missing_barrier(out, bug: St):
    s = tylo.shared(f32, 64)
    t = tylo.thread_idx.x
    s[t] = 1.0
    if not bug:
        tylo.sync_threads()
    out[t] = s[(t + 1) % 64]


@tylo.kernel
def overlapping_reduction(out, bug: St):
    s = tylo.shared(f32, 128)
    t = tylo.thread_idx.x
    s[t] = 1.0
    tylo.sync_threads()
    if bug:
        s[t] = s[t] + s[(t + 64) % 128]  # threads 64..127 overwrite what 0..63 read
    elif t < 64:
        s[t] = s[t] + s[t + 64]
    tylo.sync_threads()
    if t == 0:
        out[0] = s[0]


@tylo.kernel
def double_buffer_reused(out, bug: St):
    s = tylo.shared(f32, 64)
    t = tylo.thread_idx.x
    s[t] = 1.0
    tylo.sync_threads()
    v = s[63 - t]
    if not bug:
        tylo.sync_threads()  # everyone has read the stage before it is refilled
    s[t] = v + 1.0
    tylo.sync_threads()
    out[t] = s[t]


@tylo.kernel
def one_slot(out, bug: St):
    s = tylo.shared(f32, 64)
    t = tylo.thread_idx.x
    if bug:
        s[0] = tylo.value(t, f32)  # every thread writes slot 0
    else:
        s[t] = tylo.value(t, f32)
    tylo.sync_threads()
    out[t] = s[t if not bug else 0]


RACY = [missing_barrier, overlapping_reduction, double_buffer_reused, one_slot]
BLOCK = {missing_barrier: 64, overlapping_reduction: 128, double_buffer_reused: 64, one_slot: 64}


@pytest.mark.parametrize("kern", RACY, ids=lambda k: k.name)
def test_a_racy_kernel_is_reported_and_its_fix_is_race_free(kern):
    block = BLOCK[kern]
    bad = kern.accesses(f32, True, block=block)
    races = [r for r in bad.races if r.state == "race"]
    assert races, str(bad)
    good = kern.accesses(f32, False, block=block)
    assert good.races and all(r.state == "race-free" for r in good.races), str(good)
    assert "races: " in str(good) and " 0 races," in good.race_summary()


@pytest.mark.parametrize("kern", RACY, ids=lambda k: k.name)
def test_the_interpreter_agrees(kern):
    block = BLOCK[kern]
    out = np.zeros(block, np.float32)
    kern.interpret[1, block](out, False)
    with pytest.raises(SharedRace):
        kern.interpret[1, block](np.zeros(block, np.float32), True)


def test_the_reported_threads_touch_the_reported_byte():
    (race, *_) = [
        r for r in missing_barrier.accesses(f32, True, block=64).races if r.state == "race"
    ]
    (t1, _, _), (t2, _, _) = race.threads
    # the store s[t] and the load s[(t + 1) % 64] of 4-byte elements: both cover the byte
    writes = {4 * t1 + k for k in range(4)} | {4 * t2 + k for k in range(4)}
    reads = {4 * ((t1 + 1) % 64) + k for k in range(4)} | {
        4 * ((t2 + 1) % 64) + k for k in range(4)
    }
    assert t1 != t2 and race.address in writes and race.address in reads


def test_accesses_in_a_dynamic_loop_are_not_proved():
    @tylo.kernel
    def looped(out, n: tylo.Int):
        s = tylo.shared(f32, 64)
        t = tylo.thread_idx.x
        for _ in tylo.range(n):
            s[t] = 1.0
            tylo.sync_threads()
            out[t] = s[63 - t]

    report = looped.accesses(f32, int, block=64)
    assert report.races and all(r.state == "not proved" for r in report.races)
    assert "dynamic loop" in report.races[0].reason


def test_no_race_is_claimed_when_the_kernel_synchronizes_otherwise():
    @tylo.kernel
    def named_barrier(out):
        s = tylo.shared(f32, 64)
        t = tylo.thread_idx.x
        s[t] = 1.0
        tylo.ptx("bar.sync 1, 64;")
        out[t] = s[(t + 1) % 64]

    report = named_barrier.accesses(f32, block=64)
    assert not [r for r in report.races if r.state == "race"]
    assert any(r.state == "not proved" for r in report.races)


def test_a_runtime_offset_is_not_proved():
    @tylo.kernel
    def shifted(out, k: tylo.Int):
        s = tylo.shared(f32, 128)
        t = tylo.thread_idx.x
        if t + k < 128:
            s[t + k] = 1.0
        out[t] = s[t]

    report = shifted.accesses(f32, int, block=64)
    assert report.races and all(r.state == "not proved" for r in report.races)
    assert "depends on k" in report.races[0].reason


@tylo.kernel
def swizzled_tile(out: tylo.Ptr(align=16), bug: St):
    from tylo.layouts import Layout, Swizzle, composition
    from tylo.tile.views import SharedTile

    tid = tylo.thread_idx.x
    t = SharedTile(
        tylo.shared(out.dtype, 512), composition(Swizzle(3, 3, 3), Layout((8, 64), (64, 1)))
    )
    t.storage[t.offset((tid // 64, tid % 64))] = out[tid]
    if not bug:
        tylo.sync_threads()
    out[tid] = t.storage[t.offset((tid % 8, tid // 8))]


def test_offsets_through_a_swizzle_are_enumerated():
    """The swizzle's xor is evaluated for each thread (tylo's own function, not Python's
    math): the swizzled layout is a bijection, so the writes are race-free; without the
    barrier, the transposed read meets another thread's write."""
    good = swizzled_tile.accesses(tylo.bf16, False, block=512)
    assert good.races and all(r.state == "race-free" for r in good.races), str(good)
    bad = swizzled_tile.accesses(tylo.bf16, True, block=512)
    assert any(r.state == "race" for r in bad.races), str(bad)
