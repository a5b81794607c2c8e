# TEST_TARGET: cc>=8.0
"""Float min/max, f16/bf16 pairs and the cluster scope of tylo.atomic_* on the GPU against
numpy (tylo issue 15): many threads hitting few addresses. f32/f64 max and min over hostile
data (negatives, -0.0 and +0.0, infinities, subnormals, NaNs of both signs) are bit-exact
in IEEE 754 totalOrder, and every returned old value is one of the participants; pair
adds are histograms whose exact results are representable, with the old values checked
as distinct prefix counts; f16/bf16 pair min/max (sm_90) against numpy.

Each kernel also traces and compiles without a GPU (tests/host/test_atomics_floats_pairs.py,
tests/nvvm/test_atomics_sass.py); these runtime halves use ``gpu_runtime``.
"""

from __future__ import annotations

import numpy as np
import pytest

import tylo
from tylo.arrays import DeviceBuffer
from tylo.layouts import Layout

UINT = {np.float32: np.uint32, np.float64: np.uint64, np.float16: np.uint16}


def dev(a: np.ndarray, dtype=None) -> DeviceBuffer:
    return DeviceBuffer.from_numpy(a, dtype=dtype)


def host(buf: DeviceBuffer) -> np.ndarray:
    from tylo.backend import driver

    driver.synchronize()
    return buf.to_numpy()


def order_keys(a: np.ndarray) -> np.ndarray:
    """IEEE 754 totalOrder as unsigned keys of the bit patterns: a sign-clear pattern gets
    the sign bit set, a sign-set one is complemented (the radix-sort key of floats)."""
    u = a.view(UINT[a.dtype.type])
    sign = u.dtype.type(1) << u.dtype.type(8 * u.itemsize - 1)
    return np.where(u & sign, ~u, u | sign)


# ---------------------------------------------------------------------------- f32 / f64


@tylo.kernel
def extreme(
    out, olds, x, bins, n, op: tylo.Static, space: tylo.Static, nb: tylo.Static, scope: tylo.Static
):
    t = tylo.thread_idx.x
    i = tylo.block_idx.x * tylo.block_dim.x + t
    if space == "shared":
        s = tylo.shared(out.dtype, nb)
        if t < nb:
            s[t] = out[t]  # any stage of the global value: max/min is idempotent
        tylo.sync_threads()
        if i < n:
            olds[i] = getattr(tylo, f"atomic_{op}")(s, bins[i], x[i], scope=scope)
        tylo.sync_threads()
        if t < nb:
            getattr(tylo, f"atomic_{op}")(out, t, s[t], result=False)
    elif i < n:
        olds[i] = getattr(tylo, f"atomic_{op}")(out, bins[i], x[i], scope=scope)


def hostile(n: int, nb: int, dtype: type, nans: bool, rng: np.random.Generator):
    """Values over many magnitudes and both signs, with zeros of both signs, infinities,
    subnormals and (optionally) NaNs of both signs; bin 0 has no positive value but both
    zeros (so max must pick +0.0 over -0.0), bin 1 only -0.0 and negatives."""
    info = np.finfo(dtype)
    x = (rng.standard_normal(n) * 10.0 ** rng.integers(-30, 30, n)).astype(dtype)
    specials = np.array(
        [
            0.0,
            -0.0,
            np.inf,
            -np.inf,
            info.smallest_subnormal,
            -info.smallest_subnormal,
            info.max,
            -info.max,
        ],
        dtype,
    )
    at = rng.choice(n, n // 16, replace=False)
    x[at] = rng.choice(specials, len(at))
    bins = rng.integers(0, nb, n).astype(np.uint32)
    x[bins == 0] = -np.abs(x[bins == 0])
    x[bins == 1] = -np.abs(x[bins == 1])
    zero0 = np.flatnonzero(bins == 0)[:4]
    x[zero0[:2]] = dtype(0.0)
    x[zero0[2:]] = dtype(-0.0)
    x[np.flatnonzero(bins == 1)[:2]] = dtype(-0.0)
    if nans:
        x[np.flatnonzero(bins == 2)[:3]] = np.copysign(np.array(np.nan, dtype), 1)
        x[np.flatnonzero(bins == 3)[:3]] = np.copysign(np.array(np.nan, dtype), -1)
    return x, bins


@pytest.mark.interpret(when=lambda space, dtype, **_: space == "shared" and dtype == np.float32)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("space", ["global", "shared"])
@pytest.mark.parametrize("nans", [False, True])
def test_float_extremes_are_exact_in_total_order(gpu_runtime, dtype, op, space, nans):
    """65 537 threads, 8 addresses: the final value is bit-equal to the totalOrder
    max/min of the start value and every value of that address (numpy), and each thread's
    old value is the start value or one of that address's values, never past the final.
    In shared memory on sm_90+ the block-local atomics use scope='cluster'."""
    n, nb = 65_537, 8
    rng = np.random.default_rng(n + 17 * nans + (op == "min"))
    x, bins = hostile(n, nb, dtype, nans, rng)
    if op == "min":  # negation reverses totalOrder exactly
        x = -x
    start = np.full(nb, -np.inf if op == "max" else np.inf, dtype)
    scope = "cluster" if space == "shared" and gpu_runtime.major >= 9 else "gpu"
    out, olds = dev(start), dev(np.zeros(n, dtype))
    extreme[(n + 255) // 256, 256](out, olds, dev(x), dev(bins), n, op, space, nb, scope)
    check_extremes(op, x, bins, start, host(out), host(olds))


def check_extremes(op: str, x, bins, start, got, old) -> None:
    """Per address k: ``got[k]`` is bit-equal to the totalOrder max/min of ``start[k]``
    and the values ``x`` sent to k; every old value is one of those, never past ``got[k]``."""
    pick = np.argmax if op == "max" else np.argmin
    u = UINT[x.dtype.type]
    for k in range(len(start)):
        members = np.concatenate([start[k : k + 1], x[bins == k]])
        want = members[pick(order_keys(members))]
        assert got[k : k + 1].view(u)[0] == want.view(u), (k, got[k], want)
        seen = old[bins == k]
        assert np.isin(seen.view(u), members.view(u)).all(), k
        keys, final = order_keys(seen), order_keys(got[k : k + 1])[0]
        assert (keys <= final).all() if op == "max" else (keys >= final).all(), k


# ---------------------------------------------------------------------------- pairs


def to_bits(a: np.ndarray, dtype) -> np.ndarray:
    """f32 values, exactly representable in ``dtype`` (f16 or bf16), as 16-bit patterns."""
    if dtype is tylo.f16:
        return a.astype(np.float16).view(np.uint16)
    bits = a.astype(np.float32).view(np.uint32)
    assert not (bits & 0xFFFF).any()  # exactly representable in bf16
    return (bits >> 16).astype(np.uint16)


def from_bits(u: np.ndarray, dtype) -> np.ndarray:
    """16-bit patterns of ``dtype`` as f32 values."""
    if dtype is tylo.f16:
        return u.view(np.float16).astype(np.float32)
    return (u.astype(np.uint32) << 16).view(np.float32)


def representable(a: np.ndarray, dtype) -> np.ndarray:
    """f32 values rounded (f16) or truncated (bf16) to values ``dtype`` holds exactly."""
    if dtype is tylo.f16:
        return a.astype(np.float16).astype(np.float32)
    return (a.astype(np.float32).view(np.uint32) & 0xFFFF0000).view(np.float32)


def need(gpu_runtime, dtype) -> None:
    if dtype is tylo.bf16 and gpu_runtime.major < 9:
        pytest.skip(f"bf16 pair atomics need sm_90 (found: {gpu_runtime})")


@tylo.kernel
def pair_counts(
    h: tylo.Ptr(align=4), olds, bins, n, keep: tylo.Static, space: tylo.Static, npairs: tylo.Static
):
    """Pair k of memory is elements 2k, 2k + 1: a (npairs, 2):(2, 1) view makes the offset
    of a data-dependent pair index provably even."""
    t = tylo.thread_idx.x
    i = tylo.block_idx.x * tylo.block_dim.x + t
    one, two = tylo.value(1.0, h.dtype), tylo.value(2.0, h.dtype)
    pairs = Layout((npairs, 2), (2, 1))
    mem = tylo.view(h, pairs)
    scope = "gpu"
    if space == "shared":
        mem = tylo.shared(h.dtype, pairs)
        scope = "cta"
        if t < npairs:
            mem[t, 0] = tylo.value(0.0, h.dtype)
            mem[t, 1] = tylo.value(0.0, h.dtype)
        tylo.sync_threads()
    if i < n:
        if keep:
            old = tylo.atomic_add(mem, (bins[i], 0), (one, two), scope=scope)
            olds[2 * i] = old[0]
            olds[2 * i + 1] = old[1]
        else:
            tylo.atomic_add(mem, (bins[i], 0), (one, two), result=False)
    if space == "shared":
        tylo.sync_threads()
        if t < npairs:
            tylo.atomic_add(h, 2 * t, (mem[t, 0], mem[t, 1]), result=False)


@pytest.mark.interpret(target="sm_90a")  # bf16 pairs need sm_90
@pytest.mark.parametrize("dtype", [tylo.f16, tylo.bf16])
@pytest.mark.parametrize("space", ["global", "shared"])
@pytest.mark.parametrize("keep", [True, False])
def test_pair_add_histogram(gpu_runtime, dtype, space, keep):
    """Each thread adds (1, 2) to a random pair of 16: the low halves count the threads,
    the high halves twice that, exactly (counts <= 256 keep every partial sum exact in
    bf16 and f16). With results, the old low halves of each pair (per block in shared
    memory) are exactly 0, 1, ..., count - 1, and the old high halves twice those."""
    need(gpu_runtime, dtype)
    npairs, block = 16, 256
    rng = np.random.default_rng(5 + keep)
    counts = rng.integers(0, 257, npairs)
    counts[3] = 256  # the largest count that stays exact in bf16
    bins = rng.permutation(np.repeat(np.arange(npairs), counts)).astype(np.uint32)
    n = len(bins)
    h = dev(np.zeros(2 * npairs, np.uint16), dtype)
    olds = dev(np.zeros(2 * n, np.uint16), dtype)
    pair_counts[(n + block - 1) // block, block](h, olds, dev(bins), n, keep, space, npairs)
    got = from_bits(host(h).view(np.uint16), dtype).reshape(npairs, 2)
    old = from_bits(host(olds).view(np.uint16), dtype).reshape(n, 2) if keep else None
    group = bins if space == "global" else bins + npairs * (np.arange(n) // block)
    check_pair_counts(counts, group, got, old)


def check_pair_counts(counts, group, got, old) -> None:
    """``got[k]`` is (counts[k], 2 counts[k]); with ``old``, the old values of each group
    (a pair, or a pair within one block) are the prefix counts 0..m-1 (and twice them)."""
    np.testing.assert_array_equal(got[:, 0], counts.astype(np.float32))
    np.testing.assert_array_equal(got[:, 1], 2 * counts.astype(np.float32))
    if old is None:
        return
    for g in np.unique(group):
        lo, hi = np.sort(old[group == g, 0]), np.sort(old[group == g, 1])
        np.testing.assert_array_equal(lo, np.arange(len(lo), dtype=np.float32))
        np.testing.assert_array_equal(hi, 2 * np.arange(len(hi), dtype=np.float32))


@tylo.kernel
def pair_extreme(
    h: tylo.Ptr(align=4), x: tylo.Ptr(align=4), bins, n, op: tylo.Static, npairs: tylo.Static
):
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    mem = tylo.view(h, Layout((npairs, 2), (2, 1)))
    if i < n:
        v = x.load(2 * i, vector=2)
        if op == "max":
            tylo.atomic_max(mem, (bins[i], 0), v, result=False)
        else:
            tylo.atomic_min(mem, (bins[i], 0), v, order="acq_rel")


@pytest.mark.interpret(
    skip="f16/bf16 min and max (sm_90 vector atomics, atom.min.noftz.v2) are not interpreted"
)
@pytest.mark.parametrize("dtype", [tylo.f16, tylo.bf16])
@pytest.mark.parametrize("op", ["max", "min"])
def test_pair_minmax(gpu_runtime, dtype, op):
    """atom.global.{min,max}.noftz.v2 (sm_90): 50 000 threads, 8 pairs, values of both
    signs over many magnitudes and infinities (no zeros or NaNs, whose treatment the ISA
    leaves to min/max.f16): each half is numpy's max/min of its values."""
    if gpu_runtime.major < 9:
        pytest.skip(f"f16/bf16 pair min/max need sm_90 (found: {gpu_runtime})")
    n, npairs = 50_000, 8
    rng = np.random.default_rng(11 + (op == "min"))
    mag = rng.uniform(1, 2, 2 * n) * 2.0 ** rng.integers(-10, 12, 2 * n)
    vals = (rng.choice([-1.0, 1.0], 2 * n) * mag).astype(np.float32)
    vals[rng.choice(2 * n, 50, replace=False)] = np.inf
    vals[rng.choice(2 * n, 50, replace=False)] = -np.inf
    vals = representable(vals, dtype)
    bins = rng.integers(0, npairs, n).astype(np.uint32)
    start = np.full(2 * npairs, -np.inf if op == "max" else np.inf, np.float32)
    h = dev(to_bits(start, dtype), dtype)
    x = dev(to_bits(vals, dtype), dtype)
    pair_extreme[(n + 255) // 256, 256](h, x, dev(bins), n, op, npairs)
    got = from_bits(host(h).view(np.uint16), dtype).reshape(npairs, 2)
    reduce = np.max if op == "max" else np.min
    pairs = vals.reshape(n, 2)
    for k in range(npairs):
        want = reduce(np.concatenate([start[2 * k : 2 * k + 2][None], pairs[bins == k]]), 0)
        np.testing.assert_array_equal(got[k], want)
