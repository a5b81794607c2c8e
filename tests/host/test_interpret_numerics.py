"""The interpreter's 16-bit float conversions against an independent bit-level reference
(exact rationals), and its integer semantics against Python integers."""

from __future__ import annotations

import math
import struct
from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import tylo
from tylo.interpret import ops
from tylo.interpret.numerics import bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16


def _f32(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def _bf16_value(h: int) -> Fraction:
    sign = -1 if h & 0x8000 else 1
    if h & 0x7FFF == 0x7F80:  # infinity continues the sequence as 2**128
        return sign * Fraction(2) ** 128
    return Fraction(_f32(h << 16))


def _reference_bf16(bits: int) -> int:
    """Round f32 ``bits`` to bf16 by comparing exact distances (ties to even)."""
    x = _f32(bits)
    if math.isnan(x):
        return 0x7FFF
    if x in (float("inf"), float("-inf")):
        return bits >> 16
    lo = bits >> 16  # toward zero
    hi = lo + 1  # away from zero (same sign)
    v = Fraction(x)
    dl, dh = abs(v - _bf16_value(lo)), abs(v - _bf16_value(hi))
    if dl != dh:
        return lo if dl < dh else hi
    return lo if lo % 2 == 0 else hi


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_f32_to_bf16_matches_exact_rounding(bits: int) -> None:
    x = np.array([bits], np.uint32).view(np.float32)
    got = int(f32_to_bf16(x).view(np.uint16)[0])
    assert got == _reference_bf16(bits)


def test_bf16_boundary_cases() -> None:
    cases = [0x3F808000, 0x3F818000, 0x3F807FFF, 0x7F7FFFFF, 0x00008000, 0x00018000, 0x80000001]
    for bits in cases:
        x = np.array([bits], np.uint32).view(np.float32)
        assert int(f32_to_bf16(x).view(np.uint16)[0]) == _reference_bf16(bits), hex(bits)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**16 - 1))
def test_16_bit_widening_is_exact(h: int) -> None:
    b = float(bf16_to_f32(np.array([h], np.uint16).view(np.int16))[0])
    want = _f32(h << 16)
    assert (math.isnan(b) and math.isnan(want)) or b == want
    f = float(f16_to_f32(np.array([h], np.uint16).view(np.int16))[0])
    want16 = float(np.array([h], np.uint16).view(np.float16)[0])
    assert (math.isnan(f) and math.isnan(want16)) or f == want16
    # a 16-bit value survives the round trip
    if not math.isnan(b):
        assert int(f32_to_bf16(np.float32(b)).view(np.uint16)) == h
    if not math.isnan(f):
        assert int(f32_to_f16(np.float32(f)).view(np.uint16)) == h


def _wrap(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >= 1 << (bits - 1) else v


@settings(max_examples=200, deadline=None)
@given(st.integers(-(2**31), 2**31 - 1), st.integers(-(2**31), 2**31 - 1))
def test_i32_arithmetic_wraps_like_the_hardware(a: int, b: int) -> None:
    x, y = np.array([a], np.int32), np.array([b], np.int32)
    with np.errstate(all="ignore"):
        assert int(ops.BINARY["add"](x, y)[0]) == _wrap(a + b, 32)
        assert int(ops.BINARY["mul"](x, y)[0]) == _wrap(a * b, 32)
        assert int(ops.BINARY["sub"](x, y)[0]) == _wrap(a - b, 32)
        if b != 0:
            q = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)  # toward zero
            assert int(ops.BINARY["sdiv"](x, y)[0]) == _wrap(q, 32)
            assert int(ops.BINARY["srem"](x, y)[0]) == _wrap(a - q * b, 32)
            ua, ub = a % 2**32, b % 2**32
            assert int(ops.BINARY["udiv"](x, y)[0]) == _wrap(ua // ub, 32)
        s = b % 40
        assert int(ops.BINARY["shl"](x, np.array([s], np.int32))[0]) == (
            _wrap(a << s, 32) if s < 32 else 0
        )
        assert int(ops.BINARY["lshr"](x, np.array([s], np.int32))[0]) == (
            _wrap((a % 2**32) >> s, 32) if s < 32 else 0
        )
        assert int(ops.BINARY["ashr"](x, np.array([s], np.int32))[0]) == a >> min(s, 31)


@settings(max_examples=100, deadline=None)
@given(st.floats(allow_nan=True, allow_infinity=True, width=32))
def test_float_to_int_saturates(x: float) -> None:
    got = int(ops.cast("fptosi", np.array([x], np.float32), np.float32, np.int32)[0])
    if math.isnan(x):
        assert got == 0
    else:
        assert got == max(
            -(2**31),
            min(
                2**31 - 1, int(x) if abs(x) != float("inf") else (2**31 - 1 if x > 0 else -(2**31))
            ),
        )


# ---------------------------------------------------------------------------- inline cvt


@tylo.kernel
def cvt(out, x, op: tylo.Static):
    t = tylo.thread_idx.x
    out[t] = tylo.ptx(op, x[t])


def _int_of_float(x: float, mode: str, lo: int, hi: int) -> int:
    """PTX ISA "cvt" float-to-integer by definition: NaN gives 0, the rounded value
    saturates to [lo, hi]."""
    if math.isnan(x):
        return 0
    if math.isinf(x):
        return hi if x > 0 else lo
    f = Fraction(x)
    r = {"rzi": math.trunc(f), "rmi": math.floor(f), "rpi": math.ceil(f), "rni": round(f)}[mode]
    return min(max(r, lo), hi)  # Python's round of a Fraction ties to even, as .rni does


@settings(max_examples=20, deadline=None)
@given(
    bits=st.lists(st.integers(0, 2**32 - 1), min_size=32, max_size=32),
    mode=st.sampled_from(["rzi", "rni", "rmi", "rpi"]),
    dst=st.sampled_from(["s32", "u32", "s64"]),
)
def test_cvt_float_to_int_matches_its_definition(bits: list[int], mode: str, dst: str) -> None:
    x = np.array(bits, np.uint32).view(np.float32)
    x[:8] = [np.nan, np.inf, -np.inf, 2.5, 2.7, -2.7, 3.5, -0.5]  # the edges, ties, fractions
    x[8:16] = np.random.default_rng(bits[0]).uniform(-1e3, 1e3, 8)  # fractional parts
    npd = {"s32": np.int32, "u32": np.uint32, "s64": np.int64}[dst]
    out = np.zeros(32, npd)
    cvt.interpret[1, 32](out, x, f"cvt.{mode}.{dst}.f32")
    info = np.iinfo(npd)
    want = [_int_of_float(float(v), mode, int(info.min), int(info.max)) for v in x]
    assert out.tolist() == want


def _odd(c: float) -> int:
    return int(np.array(c, np.float32).view(np.uint32)) & 1


@settings(max_examples=20, deadline=None)
@given(vals=st.lists(st.integers(-(2**31), 2**31 - 1), min_size=32, max_size=32))
def test_cvt_int_to_float_rounds_to_nearest_even(vals: list[int]) -> None:
    x = np.array(vals, np.int32)
    x[0], x[1] = 2**24 + 1, 2**25 + 3  # ties: 2**24 + 1 rounds down to even, 2**25 + 3 up
    out = np.zeros(32, np.float32)
    cvt.interpret[1, 32](out, x, "cvt.rn.f32.s32")
    for v, got in zip(x.tolist(), out.tolist()):  # the nearest f32, ties to even, by brute force
        lo = np.float32(v)
        cands = {float(lo), float(np.nextafter(lo, np.float32(-np.inf))),
                 float(np.nextafter(lo, np.float32(np.inf)))}  # fmt: skip
        best = min(cands, key=lambda c: (abs(Fraction(c) - v), _odd(c)))
        assert got == best, (v, got, best)


# ---------------------------------------------------------------------------- 16-bit atomics


@tylo.kernel
def pair_add(out, x, slots):
    t = tylo.thread_idx.x
    tylo.ptx("red.global.add.noftz.f16x2 [$0], $1;", out.address(t % slots), x[t], out=None)


@settings(max_examples=15, deadline=None)
@given(
    halves=st.lists(st.integers(0, 2**16 - 1), min_size=64, max_size=64),
    slots=st.sampled_from([1, 3, 32]),
)
def test_f16x2_atomic_add_is_each_halfs_rounded_sum_in_lane_order(halves: list[int],
                                                                  slots: int) -> None:  # fmt: skip
    """``red.add.noftz.f16x2``: each half adds with one rounding to f16 (numpy's float16
    addition, an independent implementation), lanes applied in order, NaN as the canonical
    0x7FFF, subnormals kept."""
    h = np.array(halves, np.uint16)
    h[(h & 0x7C00) == 0x7C00] &= 0x7BFF  # no inf or NaN inputs: sums of them are checked below
    x = h.view(np.uint32)  # lane t adds the pair (h[2t], h[2t + 1])
    out = np.zeros(slots, np.uint32)
    pair_add.interpret[1, 32](out, x, slots)
    want = np.zeros((slots, 2), np.float16)
    with np.errstate(over="ignore", invalid="ignore"):  # sums may overflow to inf, then NaN
        for t in range(32):
            want[t % slots] = want[t % slots] + h[2 * t : 2 * t + 2].view(np.float16)
    got = out.view(np.uint16).reshape(slots, 2)
    exp = want.view(np.uint16)
    nan = np.isnan(want)
    assert np.array_equal(got[~nan], exp[~nan]) and (got[nan] == 0x7FFF).all()
