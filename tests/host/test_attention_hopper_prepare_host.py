"""The Hopper attention's remembered launch preparation (``hopper_host._PREPARED``), on the
host: the kernels and the tensor maps' driver encoding are replaced by recorders, so what
each launch would receive is checked without a GPU. The defining property: whatever the
sequence of calls, every launch gets tensor maps of *this* call's q, k, v and out (address,
shape, strides), the configuration this call asks for, and this call's strides."""

from __future__ import annotations

import gc
import math
import weakref

import pytest
from call_sequences import one_change_sequences  # tests/host/call_sequences.py
from hypothesis import given, settings
from hypothesis import strategies as st

import tylo
from tylo.arrays import DeviceArray
from tylo.ops.args import OpArgumentError
from tylo.ops.attention import hopper_host
from tylo.ops.attention.hopper_kernel import HopperAttentionConfig
from tylo.ops.attention.reference import AttentionInputError
from tylo.remembered import Remembered


class _Map:
    def __init__(self, plan, array):
        self.plan, self.array = plan, array


class _Kernel:
    """A launch recorder in place of a kernel; compiling goes to the kernel it replaces
    (``choose_config`` links a kernel to see whether a tile fits)."""

    def __init__(self, log, name, kernel):
        self.log, self.name, self.compile = log, name, kernel.compile

    def __getitem__(self, launch):
        return lambda *args, **kw: self.log.append((self.name, launch, args, kw))


def _record(mp) -> list:
    """Replace the kernels, the maps' encoding and the SM count by recorders; an empty
    remembered-preparation table. Returns the launch log."""
    log = []
    mp.setattr(hopper_host, "TensorMap", _Map)
    for attr, name in (("hopper_attention_kernel", "one"),
                       ("hopper_attention_persistent_kernel", "pers")):  # fmt: skip
        mp.setattr(hopper_host, attr, _Kernel(log, name, getattr(hopper_host, attr)))
    mp.setattr(hopper_host, "_sm_count", lambda device: 132)
    mp.setattr(hopper_host, "_PREPARED", Remembered(64))
    # the schedule table's copy to the device: what it was made from, in its place
    mp.setattr(
        hopper_host,
        "_device_table",
        lambda cfg, lq, lk, heads, grid, device: (
            "table",
            cfg.bm,
            cfg.bn,
            cfg.causal,
            lq,
            lk,
            heads,
            grid,
        ),
    )
    return log


@pytest.fixture
def rec(monkeypatch):
    return _record(monkeypatch)


class _Owner:
    """A stand-in for the tensor that owns an array's memory (weak-referenceable)."""


def _arr(shape, ptr, *, dtype=tylo.bf16, strides=None, owner=None):
    if strides is None:
        strides = tuple(math.prod(shape[i + 1 :]) for i in range(len(shape)))
    return DeviceArray(ptr, tuple(shape), tuple(strides), dtype, 0, owner=owner)


def _lens(b, ptr=1 << 40):
    return DeviceArray(ptr, (b,), (1,), tylo.i32, 0)


def _tma_view(a):
    """(ptr, (L, H, B, D) shape) as the maps must see ``a`` (B, H, L, D)."""
    b, h, length, d = a.shape
    return a.ptr, (length, h, b, d)


def _check_launch(entry, q, k, v, out, lse, cfg):
    name, _, args, kw = entry
    run = args[-1]
    assert name == ("pers" if cfg.persistent else "one")
    assert args[0] is out and args[1] is lse
    tq, tk, tv, tmo = args[2:6]
    for m, a in ((tq, q), (tk, k), (tv, v)):
        assert (m.array.ptr, m.array.shape) == _tma_view(a)
        assert m.array.owner is None  # a remembered map keeps no tensor alive
    if hopper_host.takes_tma_store(out) and cfg.tma_store:
        assert run.tma_store and (tmo.array.ptr, tmo.array.shape) == _tma_view(out)
    else:
        assert tmo is None and not run.tma_store
    assert (run.d, run.causal, run.persistent) == (cfg.d, cfg.causal, cfg.persistent)
    assert kw["shared"] == run.shared_bytes()
    if cfg.persistent:  # the table of the launch's own shape and grid, and its heads
        b, h, lq, _ = q.shape
        grid = min(-(-lq // run.bm) * h * b, 132)
        assert args[7] == ("table", run.bm, run.bn, run.causal, lq, k.shape[2], h * b, grid)
        assert (args[8], args[9], args[10]) == (lq, k.shape[2], h)
        assert entry[1][0] == (grid,)
    ostr = args[11:14] if cfg.persistent else args[9:12]
    # a stepped mode's stride as given (positive: others are refused); a mode of one
    # element is never stepped and goes as 1
    assert tuple(ostr) == tuple(s if n > 1 else 1 for n, s in zip(out.shape[:3], out.strides[:3]))


_POOL = 6


_FIELDS = (
    st.integers(0, _POOL - 1),  # q, k, v addresses
    st.integers(0, _POOL - 1),  # out: address and kind
    st.integers(0, 2),  # kv_lens address
    st.booleans(),  # causal
    st.booleans(),  # persistent
    st.sampled_from([1, 17, 300]),  # L
    st.integers(0, 2),  # lse address
    st.sampled_from([None, 0.5, 0.125]),  # scale
)


@settings(max_examples=40, deadline=None)
@given(calls=one_change_sequences(_FIELDS, max_steps=12))
def test_every_launch_gets_this_calls_arrays(calls):
    """Random call sequences over a pool of arrays (same and different addresses, lengths,
    strides, out arrays TMA can and cannot write, causal, persistent): each launch's maps,
    strides and configuration are the call's own, and each distinct call is prepared once.
    Each call changes one argument of the one before (so a key that misses an argument is
    found out)."""
    with pytest.MonkeyPatch.context() as mp:
        log = _record(mp)
        made = []
        real = hopper_host._prepare_inputs
        mp.setattr(hopper_host, "_prepare_inputs", lambda *a: made.append(a) or real(*a))
        seen = set()
        for qi, oi, lens_kind, causal, persistent, length, li, scale in calls:
            q = _arr((2, 3, length, 64), (1 << 30) + qi * (1 << 24))
            k = _arr((2, 3, length, 64), (1 << 31) + qi * (1 << 24))
            v = _arr((2, 3, length, 64), (3 << 30) + qi * (1 << 24))
            # out: contiguous, or L-strided by 72 elements (TMA can), or 8 bytes off (cannot)
            base = (1 << 33) + oi * (1 << 24)
            if oi % 3 == 0:
                out = _arr((2, 3, length, 64), base)
            elif oi % 3 == 1:
                out = _arr((2, 3, length, 64), base, strides=(3 * length * 72, length * 72, 72, 1))
            else:
                out = _arr((2, 3, length, 64), base + 8)
            lse = _arr((2, 3, length), (1 << 34) + li * (1 << 20), dtype=tylo.f32)
            cfg = hopper_host.choose_config(64, tylo.bf16, causal, persistent=persistent,
                                            tma_store=True)  # fmt: skip
            lens = _lens(2, (1 << 40) + lens_kind * 256)
            hopper_host.hopper_attention(q, k, v, causal=causal, kv_lens=lens, out=out,
                                         lse=lse, cfg=cfg, scale=scale)  # fmt: skip
            _check_launch(log[-1], q, k, v, out, lse, cfg)
            assert log[-1][2][-2] == (0.125 if scale is None else scale) * hopper_host.LOG2E
            assert log[-1][2][6] is lens
            seen.add((qi, causal, persistent, length, scale))
        assert len(made) == len(seen)  # one preparation per distinct input combination
        assert len(hopper_host._PREPARED) <= hopper_host._PREPARED.limit


def test_refusals_are_not_remembered(rec):
    q = _arr((2, 1, 8, 64), 1 << 30)
    for _ in range(2):
        with pytest.raises(AttentionInputError, match="finite positive"):
            hopper_host.hopper_attention(q, q, q, scale=-0.5, kv_lens=_lens(2))
        with pytest.raises(OpArgumentError, match="scale = nan does not fit in f32"):
            hopper_host.hopper_attention(q, q, q, scale=float("nan"), kv_lens=_lens(2))
        with pytest.raises(OpArgumentError, match="scale = 1e\\+39 does not fit in f32"):
            hopper_host.hopper_attention(q, q, q, scale=1e39, kv_lens=_lens(2))
        with pytest.raises(AttentionInputError, match="does not match"):
            hopper_host.hopper_attention(q, q, q, cfg=HopperAttentionConfig(d=128),
                                         kv_lens=_lens(2))  # fmt: skip
        with pytest.raises(OpArgumentError, match="scale must be a real number"):
            hopper_host.hopper_attention(q, q, q, scale=[1.0], kv_lens=_lens(2))
        with pytest.raises(AttentionInputError, match="q: "):
            hopper_host.hopper_attention(object(), q, q, kv_lens=_lens(2))
    assert len(hopper_host._PREPARED) == 0 and rec == []
    # a bad out after a good call: refused, and the good inputs' entry is kept
    good = _arr((2, 1, 8, 64), 1 << 32)
    lse = _arr((2, 1, 8), 1 << 34, dtype=tylo.f32)
    with pytest.raises(AttentionInputError, match="out must be"):
        hopper_host.hopper_attention(q, q, q, out=_arr((2, 1, 9, 64), 1 << 32), lse=lse,
                                     kv_lens=_lens(2))  # fmt: skip
    assert rec == []
    hopper_host.hopper_attention(q, q, q, out=good, lse=lse, kv_lens=_lens(2))
    assert len(rec) == 1 and len(hopper_host._PREPARED) == 2


def test_remembered_preparations_are_bounded_and_keep_no_array_alive(rec):
    owner = _Owner()
    alive = weakref.ref(owner)
    q = _arr((1, 1, 8, 64), 1 << 30, owner=owner)
    lse = _arr((1, 1, 8), 1 << 34, dtype=tylo.f32)
    for i in range(hopper_host._PREPARED.limit + 5):
        out = _arr((1, 1, 8, 64), (1 << 32) + 256 * i, owner=owner)
        hopper_host.hopper_attention(q, q, q, out=out, lse=lse, kv_lens=_lens(1))
        _check_launch(rec[-1], q, q, q, out, lse, hopper_host.choose_config(64, tylo.bf16, False))
    assert len(hopper_host._PREPARED) == hopper_host._PREPARED.limit
    del q, out, owner
    rec.clear()
    gc.collect()
    assert alive() is None


def test_arrays_on_different_devices_are_refused(rec):
    """The tensor maps' arrays are not pointer arguments, so the launcher cannot compare
    their devices with out's: the host does, for q, k, v, out and lse."""
    lse = _arr((1, 1, 8), 1 << 34, dtype=tylo.f32)
    q = _arr((1, 1, 8, 64), 1 << 30)
    on1 = DeviceArray(1 << 31, (1, 1, 8, 64), (512, 512, 64, 1), tylo.bf16, 1)
    out = _arr((1, 1, 8, 64), 1 << 32)
    for args, kw, names in [
        ((q, on1, q), dict(out=out, lse=lse), "q, v on device 0; k on device 1"),
        ((on1, on1, on1), dict(out=out, lse=lse), "out, lse on device 0; q on device 1"),
        ((q, q, q), dict(out=on1, lse=lse), "q, lse on device 0; out on device 1"),
    ]:
        with pytest.raises(AttentionInputError, match="different devices") as err:
            hopper_host.hopper_attention(*args, kv_lens=_lens(1), **kw)
        assert names in str(err.value)
    assert rec == []


def test_outputs_sharing_memory_are_refused(rec):
    """An out or lse that certainly shares memory with q, k, v, each other, itself, or the
    given key lengths (checked on every call: they are no part of the remembered key)."""
    q = _arr((2, 1, 8, 64), 1 << 30)
    lse = _arr((2, 1, 8), 1 << 34, dtype=tylo.f32)
    out = _arr((2, 1, 8, 64), 1 << 32)
    for kw, says in [
        (dict(out=_arr((2, 1, 8, 64), (1 << 30) + 512)), "out and q share memory"),
        (dict(lse=_arr((2, 1, 8), (1 << 32) + 64, dtype=tylo.f32)), "out and lse share"),
        (dict(kv_lens=_arr((2,), (1 << 32) + 8, dtype=tylo.i32)), "out and kv_lens share"),
        (dict(kv_lens=_arr((2,), (1 << 34) + 8, dtype=tylo.i32)), "lse and kv_lens share"),
    ]:
        args = {"out": out, "lse": lse, "kv_lens": _lens(2), **kw}
        with pytest.raises(AttentionInputError, match=says):
            hopper_host.hopper_attention(q, q, q, **args)
    assert rec == []
    hopper_host.hopper_attention(q, q, q, out=out, lse=lse, kv_lens=_lens(2))
    assert len(rec) == 1


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d", [64, 128])
def test_the_default_kernel_follows_the_key_length(d, causal):
    """Without ``cfg`` a call runs ``choose_config``'s measured choice for its key length
    (``SCHEDULES``, short up to ``long_keys(d, causal)`` keys; ``THREE_CONSUMER_SCHEDULES``
    where three consumers fit the link), and the other kernel where the chosen
    one cannot take the shape: more than 65535 heads take the persistent kernel, and a
    persistent grid whose u32 ring count could wrap takes the one-item kernel."""
    short = hopper_host.long_keys(d, causal)
    long = short + 1
    for lk in (short, long, 2**31 - 1):  # the tiles chosen (compiled at d = 128) before
        for persistent in (None, False, True):  # the recorders replace the kernels
            hopper_host.choose_config(d, tylo.bf16, causal, lk=lk, persistent=persistent)
    with pytest.MonkeyPatch.context() as mp:
        rec = _record(mp)
        for lk in (short, long):
            q = _arr((1, 2, 8, d), 1 << 30)
            k = _arr((1, 2, lk, d), 1 << 31)
            out, lse = _arr((1, 2, 8, d), 1 << 33), _arr((1, 2, 8), 1 << 34, dtype=tylo.f32)
            hopper_host.hopper_attention(q, k, k, causal=causal, kv_lens=_lens(1), out=out,
                                         lse=lse)  # fmt: skip
            run = rec[-1][2][-1]
            table = hopper_host.SCHEDULES  # three consumers where the link fits them
            if run.consumers == 3:
                table = hopper_host.THREE_CONSUMER_SCHEDULES
            want = table[(d, causal, lk > short)]
            got = hopper_host.Schedule(
                pingpong=run.pingpong,
                overlap=run.overlap,
                tma_store=run.tma_store,
                persistent=run.persistent,
                split_release=run.split_release,
            )
            assert got == want
            assert rec[-1][0] == ("pers" if want.persistent else "one")
        many = _arr((1, 70000, 8, d), 1 << 30)  # the one-item grid: at most 65535 heads
        out = _arr((1, 70000, 8, d), 1 << 42)
        lse = _arr((1, 70000, 8), 1 << 43, dtype=tylo.f32)
        hopper_host.hopper_attention(many, many, many, causal=causal, kv_lens=_lens(1),
                                     out=out, lse=lse)  # fmt: skip
        assert rec[-1][0] == "pers" and rec[-1][2][-1].persistent
        # one CTA (sm count 1) walking 256 items of 2**31 - 1 keys wraps the u32 ring count
        mp.setattr(hopper_host, "_sm_count", lambda device: 1)
        cfg = hopper_host.choose_config(d, tylo.bf16, causal, lk=2**31 - 1, persistent=True)
        rows = 256 * cfg.bm  # 256 items: 2**8 * 2**24 key tiles of 128
        q = _arr((1, 1, rows, d), 1 << 30)
        k = _arr((1, 1, 2**31 - 1, d), 1 << 44)
        out = _arr((1, 1, rows, d), 1 << 45)
        lse = _arr((1, 1, rows), 1 << 46, dtype=tylo.f32)
        with pytest.raises(AttentionInputError, match="u32 ring count"):
            hopper_host.hopper_attention(q, k, k, causal=causal, kv_lens=_lens(1), cfg=cfg,
                                         out=out, lse=lse)  # fmt: skip
        hopper_host.hopper_attention(q, k, k, causal=causal, kv_lens=_lens(1), out=out,
                                     lse=lse)  # fmt: skip
        assert rec[-1][0] == "one" and not rec[-1][2][-1].persistent
