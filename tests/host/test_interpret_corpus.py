"""A corpus of faulty kernels (issue 32, 'Must show'): each has a planted bug behind a
static flag and is caught with the right report, naming what the report must name; the same
kernel with the flag off runs clean and gives the answer numpy gives (outputs poisoned
first). With ``tests/host/test_interpret_checks.py`` and ``test_interpret_warp.py`` this
makes more than 20 faulty kernels; :data:`CORPUS` holds this file's."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

import tylo
from tylo.interpret import (
    AsyncMisuse,
    BarrierDivergence,
    OutOfBounds,
    SharedRace,
    WarpDivergence,
)
from tylo.interpret.globalrace import GlobalRace

N = 64  # threads of every launch here (two warps)


@tylo.kernel
def off_by_one(out, x, n, bad: tylo.Static):
    i = tylo.thread_idx.x
    if i < n + (1 if bad else 0):  # `<=`: one element past the end
        out[i] = x[i] * 2.0


@tylo.kernel
def wrong_leading_dim(out, x, rows, cols: tylo.Static, bad: tylo.Static):
    t = tylo.value(tylo.thread_idx.x)
    r = t // cols
    c = t % cols
    if r < rows:
        ld = cols + 1 if bad else cols  # the row stride of another layout
        out[r * cols + c] = x[r * ld + c]


@tylo.kernel(bounds="off")  # the tracer refuses the bad one (OutOfBoundsError): run it anyway
def halo_without_room(out, x, bad: tylo.Static):
    t = tylo.thread_idx.x
    s = tylo.shared(tylo.f32, 64 if bad else 65)  # the halo element needs one more slot
    s[t + 1] = x[t]
    if t == 0:
        s[0] = 0.0
    tylo.sync_threads()
    out[t] = s[t] + s[t + 1]


@tylo.kernel
def local_overrun(out, x, bad: tylo.Static):
    t = tylo.thread_idx.x
    a = tylo.local(tylo.f32, 4)
    for k in tylo.range(5 if bad else 4):
        a[k] = x[t] + k
    out[t] = a[0] + a[3]


@tylo.kernel
def tree_sum_missing_barrier(out, x, bad: tylo.Static):
    t = tylo.thread_idx.x
    s = tylo.shared(tylo.f32, 64)
    s[t] = x[t]
    tylo.sync_threads()
    for step in (32, 16, 8, 4, 2, 1):
        if t < step:
            s[t] = s[t] + s[t + step]
        if not bad:
            tylo.sync_threads()
    if t == 0:
        out[0] = s[0]


@tylo.kernel
def one_slot_many_values(out, x, bad: tylo.Static):
    t = tylo.thread_idx.x
    s = tylo.shared(tylo.f32, 2)
    w = t // 32
    # every lane of a warp writes its warp's slot: the same value (fine), or its own (a race)
    s[w] = x[t] if bad else x[w * 32]
    tylo.sync_threads()
    out[t] = s[w]


@tylo.kernel
def two_warps_one_slot(out, x, bad: tylo.Static):
    t = tylo.thread_idx.x
    s = tylo.shared(tylo.f32, 2)
    if t % 32 == 0:
        s[0 if bad else t // 32] = x[0]  # the same value, but from two warps unordered
    tylo.sync_threads()
    out[t] = s[0]


@tylo.kernel
def shift_in_place(out, x, bad: tylo.Static):
    t = tylo.thread_idx.x
    s = tylo.shared(tylo.f32, 64)
    s[t] = x[t]
    tylo.sync_threads()
    v = s[(t + 63) % 64]
    if not bad:
        tylo.sync_threads()  # every read done before any write
    s[t] = v
    tylo.sync_threads()
    out[t] = s[t]


@tylo.kernel
def everyone_writes_out0(out, x, bad: tylo.Static):
    t = tylo.thread_idx.x
    if bad or t == 0:
        out[0] = x[t] if bad else x[0]


@tylo.kernel
def barrier_in_odd_lanes(out, x, bad: tylo.Static):
    t = tylo.thread_idx.x
    s = tylo.shared(tylo.f32, 64)
    s[t] = x[t]
    if t % 2 == 0 or not bad:
        tylo.sync_threads()
    out[t] = s[63 - t]


@tylo.kernel
def barrier_after_early_exit(out, x, n, bad: tylo.Static):
    t = tylo.thread_idx.x
    s = tylo.shared(tylo.f32, 64)
    s[t] = x[t] if t < n else 0.0
    if t < n or not bad:  # the guard wraps the barrier: threads past n never reach it
        tylo.sync_threads()
        if t < n:
            out[t] = s[(t + 1) % n]


@tylo.kernel
def cp_async_wrong_group(out, x, bad: tylo.Static):
    t = tylo.thread_idx.x
    s = tylo.shared(tylo.f32, 128)
    tylo.ptx("cp.async.ca.shared.global [$0], [$1], 4;", s.address(t), x.address(t), out=None)
    tylo.ptx("cp.async.commit_group;", out=None)
    tylo.ptx("cp.async.ca.shared.global [$0], [$1], 4;", s.address(t + 64), x.address(t + 64),
             out=None)  # fmt: skip
    tylo.ptx("cp.async.commit_group;", out=None)
    if bad:
        tylo.ptx("cp.async.wait_group 1;", out=None)  # the newest group may still fly
    else:
        tylo.ptx("cp.async.wait_group 0;", out=None)
    out[t] = s[t] + s[t + 64]


@tylo.kernel
def cp_async_neighbour_without_barrier(out, x, bad: tylo.Static):
    t = tylo.thread_idx.x
    s = tylo.shared(tylo.f32, 64)
    tylo.ptx("cp.async.ca.shared.global [$0], [$1], 4;", s.address(t), x.address(t), out=None)
    tylo.ptx("cp.async.commit_group;", out=None)
    tylo.ptx("cp.async.wait_group 0;", out=None)
    if not bad:
        tylo.sync_threads()  # the wait covers this thread's copies only
    out[t] = s[(t + 1) % 64]


@tylo.kernel
def shuffle_in_half_warp(out, x, bad: tylo.Static):
    t = tylo.thread_idx.x
    v = x[t]
    if t % 32 < 16 or not bad:
        v = tylo.shfl_xor(v, 1)
    out[t] = v


def _ref_off_by_one(x: np.ndarray) -> np.ndarray:
    return x * 2.0


def _ref_rows(x: np.ndarray) -> np.ndarray:
    return x.copy()


def _ref_halo(x: np.ndarray) -> np.ndarray:
    left = np.concatenate([[0.0], x[:-1]])
    return left + x


def _ref_local(x: np.ndarray) -> np.ndarray:
    return 2 * x + 3.0


def _ref_sum(x: np.ndarray) -> np.ndarray:
    out = np.full_like(x, np.nan)
    out[0] = x.sum()
    return out


def _ref_slots(x: np.ndarray) -> np.ndarray:
    return np.repeat(x[[0, 32]], 32)


def _ref_first(x: np.ndarray) -> np.ndarray:
    return np.full_like(x, x[0])


def _ref_roll(x: np.ndarray) -> np.ndarray:
    return np.roll(x, 1)


def _ref_out0(x: np.ndarray) -> np.ndarray:
    out = np.full_like(x, np.nan)
    out[0] = x[0]
    return out


def _ref_reverse(x: np.ndarray) -> np.ndarray:
    return x[::-1].copy()


def _ref_next(x: np.ndarray) -> np.ndarray:
    return np.roll(x, -1)


def _ref_pairs(x: np.ndarray) -> np.ndarray:
    return x.reshape(-1, 2)[:, ::-1].reshape(-1)


@dataclass(frozen=True)
class Case:
    """A faulty kernel: how to call it, the report its planted bug gives, what the report
    must say, and the float64 reference of the fixed kernel over ``x`` (``n`` inputs)."""

    kernel: Any
    extra: tuple
    error: type
    says: tuple[str, ...]
    reference: Callable[[np.ndarray], np.ndarray]
    n: int = N
    grid: int = 1


CORPUS = {
    "off_by_one": Case(off_by_one, (60,), OutOfBounds,
                       ("array 'x'", "element 60", "thread (60, 0, 0)"), _ref_off_by_one,
                       n=60),
    "wrong_leading_dim": Case(wrong_leading_dim, (8, 8), OutOfBounds,
                              ("array 'x'", "load", "element 64"), _ref_rows),
    "halo_without_room": Case(halo_without_room, (), OutOfBounds,
                              ("shared", "thread (63, 0, 0)"), _ref_halo),
    "local_overrun": Case(local_overrun, (), OutOfBounds, ("local",), _ref_local),
    "tree_sum_missing_barrier": Case(tree_sum_missing_barrier, (), SharedRace,
                                     ("shared-memory race", "thread"), _ref_sum),
    "one_slot_many_values": Case(one_slot_many_values, (), SharedRace,
                                 ("byte offset 0", "thread (0, 0, 0)", "thread (1, 0, 0)"),
                                 _ref_slots),
    "two_warps_one_slot": Case(two_warps_one_slot, (), SharedRace,
                               ("byte offset 0", "thread (0, 0, 0)", "thread (32, 0, 0)"),
                               _ref_first),
    "shift_in_place": Case(shift_in_place, (), SharedRace, ("write", "read"), _ref_roll),
    "everyone_writes_out0": Case(everyone_writes_out0, (), GlobalRace, ("'out'",), _ref_out0),
    "barrier_in_odd_lanes": Case(barrier_in_odd_lanes, (), BarrierDivergence,
                                 ("thread (1, 0, 0)",), _ref_reverse),
    "barrier_after_early_exit": Case(barrier_after_early_exit, (40,), BarrierDivergence,
                                     ("thread (40, 0, 0)",), _ref_next, n=40),
    "cp_async_wrong_group": Case(cp_async_wrong_group, (), AsyncMisuse,
                                 ("cp.async", "byte offset 256"), lambda x: x[:64] + x[64:],
                                 n=128),
    "cp_async_neighbour_without_barrier": Case(
        cp_async_neighbour_without_barrier, (), SharedRace,
        ("cp.async", "thread (1, 0, 0)", "reads"), _ref_next),
    "shuffle_in_half_warp": Case(shuffle_in_half_warp, (), WarpDivergence, (), _ref_pairs),
}  # fmt: skip


def _run(case: Case, bad: bool, seed: int) -> tuple[np.ndarray, np.ndarray]:
    x = np.random.default_rng(seed).standard_normal(case.n).astype(np.float32)
    out = np.full(N, np.nan, np.float32)  # poisoned: an unwritten element stays NaN
    case.kernel.interpret[case.grid, N](out, x, *case.extra, bad)
    return x, out


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_planted_bug_is_reported(name: str) -> None:
    case = CORPUS[name]
    with pytest.raises(case.error) as info:
        _run(case, True, seed=1)
    for text in case.says:
        assert text in str(info.value), (name, str(info.value))


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_fixed_kernel_runs_clean_and_right(name: str) -> None:
    case = CORPUS[name]
    x, out = _run(case, False, seed=2)
    want = case.reference(x.astype(np.float64))
    got = out[: len(want)].astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, equal_nan=True)


def test_the_corpus_has_twenty_kernels() -> None:
    """This file's kernels plus the faulty kernels of the other interpreter tests (each
    raises one of the reports in a ``pytest.raises``): at least 20, as issue 32 asks."""
    import re
    from pathlib import Path

    here = Path(__file__).parent
    others = sum(
        len(re.findall(r"pytest\.raises\((OutOfBounds|SharedRace|GlobalRace|BarrierDivergence|"
                       r"WarpDivergence|AsyncMisuse|UninitializedRead)", p.read_text()))
        for p in here.glob("test_interpret_*.py") if p.name != Path(__file__).name
    )  # fmt: skip
    assert len(CORPUS) >= 14 and len(CORPUS) + others >= 20
