"""attention(path="warp") remembers plan_attention's answer per argument combination
(``host._PLANS``): on the host, with launch replaced by a recorder, every launch gets exactly
what a fresh plan_attention of the call's own arguments gives, over call sequences where each
call changes one argument of the one before, and refusals stay refusals."""

from __future__ import annotations

import math

import pytest
from call_sequences import one_change_sequences  # tests/host/call_sequences.py
from hypothesis import given, settings
from hypothesis import strategies as st

import tylo
from tylo.arrays import DeviceArray
from tylo.nvgpu.errors import PlanError
from tylo.ops.args import OpArgumentError
from tylo.ops.attention import host
from tylo.remembered import Remembered


def _arr(shape, ptr, *, dtype=tylo.bf16, strides=None):
    if strides is None:
        strides = tuple(math.prod(shape[i + 1 :]) for i in range(len(shape)))
    return DeviceArray(ptr, tuple(shape), tuple(strides), dtype, 0)


_FIELDS = (
    st.integers(0, 3),  # q, k, v addresses
    st.sampled_from([17, 300]),  # L
    st.sampled_from([64, 128]),  # D
    st.integers(0, 2),  # out: contiguous, strided, misaligned by 2 bytes
    st.sampled_from([None, 0, 1]),  # kv_lens: none, or one of two arrays
    st.sampled_from([False, True]),  # causal
    st.sampled_from([None, 0.5, 0.125]),  # scale
    st.sampled_from([None, (64, 64)]),  # block_m, block_n
    st.sampled_from([None, (16, True), (32, False)]),  # sub_n, lazy_rescale
)


def _call(fields):
    qi, length, d, oi, li, causal, scale, blocks, steps = fields
    q, k, v = (_arr((2, 3, length, d), (i << 30) + qi * (1 << 24)) for i in (1, 2, 3))
    base = (1 << 33) + oi * (1 << 24)
    out = [
        _arr((2, 3, length, d), base),
        _arr((2, 3, length, d), base, strides=(3 * length * (d + 8), length * (d + 8), d + 8, 1)),
        _arr((2, 3, length, d), base + 2),
    ][oi]
    lse = _arr((2, 3, length), 1 << 34, dtype=tylo.f32)
    lens = None if li is None else _arr((2,), (1 << 40) + 256 * li, dtype=tylo.i32)
    bm, bn = blocks or (None, None)
    args = (q, k, v)
    kw = dict(causal=causal, kv_lens=lens, scale=scale, out=out, lse=lse, block_m=bm, block_n=bn)
    if steps is not None:
        kw["sub_n"], kw["lazy_rescale"] = steps
    return args, kw


@settings(max_examples=40, deadline=None)
@given(calls=one_change_sequences(_FIELDS, max_steps=10))
def test_every_launch_gets_the_calls_own_plan(calls):
    with pytest.MonkeyPatch.context() as mp:
        log = []
        mp.setattr(host, "launch", lambda cfg, val, *a: log.append((cfg, val)))
        mp.setattr(host, "_PLANS", Remembered(64))
        planned = []
        real = host.plan_attention
        mp.setattr(host, "plan_attention", lambda *a, **kw: planned.append(1) or real(*a, **kw))
        for fields in calls:
            args, kw = _call(fields)
            host.attention(*args, path="warp", **kw)
            want = real(*args, **{f: x for f, x in kw.items()})
            assert log[-1] == want
        assert len(planned) == len({c for c in calls})


def test_refusals_are_refused_every_time(monkeypatch):
    monkeypatch.setattr(host, "launch", lambda *a: pytest.fail("launched"))
    monkeypatch.setattr(host, "_PLANS", Remembered(64))
    (q, k, v), kw = _call((0, 17, 64, 0, None, False, None, None, None))
    for _ in range(2):
        # a scale that is not a real number: the argument error of every op (check_scale)
        with pytest.raises(OpArgumentError, match="scale"):
            host.attention(q, k, v, path="warp", **{**kw, "scale": True})  # a bool, not 1.0
        with pytest.raises(OpArgumentError, match="scale"):
            host.attention(q, k, v, path="warp", **{**kw, "scale": [0.5]})  # unhashable
        with pytest.raises(PlanError, match="head dim"):
            bad = _arr((2, 3, 17, 96), 1 << 30)
            host.attention(bad, bad, bad, path="warp", **{**kw, "out": bad})
        with pytest.raises(PlanError, match="lazy_rescale must be a bool"):
            host.attention(q, k, v, path="warp", **{**kw, "lazy_rescale": 1})
        with pytest.raises(PlanError, match="sub_n"):
            host.attention(q, k, v, path="warp", **{**kw, "sub_n": "16"})
        with pytest.raises(PlanError, match="sub_n"):  # 48 keys do not divide the block
            host.attention(q, k, v, path="warp", **{**kw, "sub_n": 48})
    assert len(host._PLANS) == 0
    monkeypatch.setattr(host, "launch", lambda *a: None)
    host.attention(q, k, v, path="warp", **{**kw, "scale": 1})
    assert len(host._PLANS) == 1
    with pytest.raises(OpArgumentError, match="scale"):  # True is not 1 here
        host.attention(q, k, v, path="warp", **{**kw, "scale": True})
