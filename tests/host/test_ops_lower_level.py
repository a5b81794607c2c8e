"""The lower-level entry points of tylo.ops refuse what the array-level ops refuse, with the
same error (issue 34, items 2 and 3): a zero or negative stride of an output (and of the
softmax input) on a mode of more than one element is an
:class:`~tylo.ops.args.OpArgumentError` naming the argument, the dimension and the stride
on every path (warp and Hopper attention ``out``/``lse``, both GEMMs' D, the softmax), never
rewritten (the Hopper attention once launched ``max(stride, 1)``); and every float narrowed
to f32 (GEMM ``alpha``, attention ``scale``) is accepted exactly when its f32 rounding (and,
for ``scale``, that of ``scale * log2(e)``) is finite. Nothing launches: each refusal comes
before any driver call."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tylo
from tylo.arrays import DeviceArray
from tylo.constants import F32_MAX, LOG2E
from tylo.ops.args import OpArgumentError


@pytest.fixture(autouse=True)
def no_driver(monkeypatch):
    """Tensor maps are encoded by the driver: a stand-in that says there is no device (the
    calls that pass every check stop there)."""
    from tylo.backend.errors import NoDeviceError
    from tylo.ops.attention import hopper_host

    def no_map(*a, **k):
        raise NoDeviceError("no device: tensor maps are not encoded here")

    monkeypatch.setattr(hopper_host, "TensorMap", no_map)
    monkeypatch.setattr(hopper_host, "_sm_count", lambda device: 132)


def arr(shape, dtype=tylo.bf16, ptr=1 << 30, strides=None):
    if strides is None:
        strides = tuple(math.prod(shape[i + 1 :]) for i in range(len(shape)))
    return DeviceArray(ptr, tuple(shape), tuple(strides), dtype, 0)


def _bent(a, dim, stride):
    s = list(a.strides)
    s[dim] = stride
    return DeviceArray(a.ptr, a.shape, tuple(s), a.dtype, a.device)


def _warp_attention(out, lse):
    from tylo.ops.attention.host import plan_attention

    q = arr((2, 3, 16, 64), ptr=1 << 30)
    plan_attention(q, q, q, out, lse)


def _hopper_attention(out, lse):
    from tylo.ops.attention.hopper_host import HopperAttentionConfig, hopper_attention

    q = arr((2, 3, 16, 64), ptr=1 << 30)
    hopper_attention(q, q, q, out=out, lse=lse, kv_lens=LENS,
                     cfg=HopperAttentionConfig(d=64))  # fmt: skip


def _gemm(path, d):
    import importlib

    fn = importlib.import_module(f"tylo.ops.gemm.{path}").gemm
    a, b = arr((64, 64), ptr=1 << 30), arr((64, 64), ptr=1 << 31)
    fn(d, a, b, 64, 64, 64, 64, 64, 64)


def _softmax(out, x):
    from tylo.ops.softmax.host import plan_launch

    plan_launch(out, x)


OUT4 = arr((2, 3, 16, 64), ptr=1 << 33)
LSE = arr((2, 3, 16), tylo.f32, ptr=1 << 34)
D = arr((64, 64), tylo.f32, ptr=1 << 32)
X = arr((8, 16), tylo.f32, ptr=1 << 30)
SOFT_OUT = arr((8, 16), tylo.f32, ptr=1 << 31)
LENS = arr((2,), tylo.i32, ptr=1 << 35)

# (path, the array that gets the bad stride, its name, the call with it in place)
PATHS = [
    ("warp out", OUT4, "out", lambda a: _warp_attention(a, LSE)),
    ("warp lse", LSE, "lse", lambda a: _warp_attention(OUT4, a)),
    ("hopper out", OUT4, "out", lambda a: _hopper_attention(a, LSE)),
    ("hopper lse", LSE, "lse", lambda a: _hopper_attention(OUT4, a)),
    ("gemm D", D, "D", lambda a: _gemm("host", a)),
    ("hopper gemm D", D, "D", lambda a: _gemm("hopper_host", a)),
    ("softmax out", SOFT_OUT, "out", lambda a: _softmax(a, X)),
    ("softmax x", X, "x", lambda a: _softmax(SOFT_OUT, a)),
]


def test_the_issues_example_a_negative_batch_stride_of_out_on_the_hopper_path():
    """It was launched with batch stride 1 (``max(stride, 1)``)."""
    bad = _bent(OUT4, 0, -3 * 16 * 64)
    with pytest.raises(OpArgumentError, match="out has stride -3072 on dimension 0"):
        _hopper_attention(bad, LSE)


@pytest.mark.parametrize(("label", "good", "name", "call"), PATHS, ids=[p[0] for p in PATHS])
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_zero_and_negative_strides_are_refused_on_every_path(label, good, name, call, data):
    dim = data.draw(st.sampled_from([i for i, n in enumerate(good.shape) if n > 1]))
    stride = data.draw(st.sampled_from([0, -1, -(2**31), -(2**63)])
                       | st.integers(-(2**40), 0))  # fmt: skip
    with pytest.raises(OpArgumentError, match=f"{name} has stride {stride} on dimension {dim}"):
        call(_bent(good, dim, stride))


def _f32_finite(v: float) -> bool:
    with np.errstate(over="ignore"):
        return bool(np.isfinite(np.float32(v)))


boundary = (st.floats(min_value=F32_MAX * 0.999999, max_value=F32_MAX * 1.000001)
            | st.floats(min_value=F32_MAX / LOG2E * 0.999999, max_value=F32_MAX / LOG2E * 1.000001)
            | st.floats(allow_nan=True, allow_infinity=True))  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(boundary, st.booleans())
def test_gemm_alpha_at_the_f32_boundary(v, negative):
    """Both kernel-level GEMMs take ``alpha`` exactly when numpy's f32 of it is finite."""
    from tylo.ops.gemm.host import check_call

    v = -v if negative else v
    if _f32_finite(v):
        assert check_call("gemm", 1, 1, 1, 1, 1, 1, v, False)[1] == v
    else:
        for path in ("host", "hopper_host"):
            import importlib

            fn = importlib.import_module(f"tylo.ops.gemm.{path}").gemm
            with pytest.raises(OpArgumentError, match="alpha"):
                fn(D, D, D, 64, 64, 64, 64, 64, 64, alpha=v)


@settings(max_examples=150, deadline=None)
@given(boundary)
def test_attention_scale_at_the_f32_boundary(v):
    """The warp and Hopper paths take a positive ``scale`` exactly when it and ``scale *
    log2(e)`` are finite in f32 (the kernels multiply by the latter)."""
    from tylo.ops.attention.reference import AttentionInputError

    fits = _f32_finite(v) and _f32_finite(v * LOG2E) if math.isfinite(v) else False
    for call in (lambda: _warp_attention_scale(v), lambda: _hopper_attention_scale(v)):
        if fits and not v > 0:  # representable, but the kernels keep a scaled maximum
            with pytest.raises(AttentionInputError, match="positive"):
                call()
        elif fits:
            try:
                call()
            except (AttentionInputError, OpArgumentError) as err:  # only not for the scale
                assert "scale" not in str(err), err
            except tylo.TyloError:
                pass
        else:
            with pytest.raises(OpArgumentError, match="scale"):
                call()


def _warp_attention_scale(v):
    from tylo.ops.attention.host import plan_attention

    q = arr((2, 3, 16, 64), ptr=1 << 30)
    plan_attention(q, q, q, OUT4, LSE, scale=v)


def _hopper_attention_scale(v):
    from tylo.ops.attention.hopper_host import HopperAttentionConfig, hopper_attention

    q = arr((2, 3, 16, 64), ptr=1 << 30)
    hopper_attention(q, q, q, out=OUT4, lse=LSE, scale=v, kv_lens=LENS,
                     cfg=HopperAttentionConfig(d=64))  # fmt: skip
