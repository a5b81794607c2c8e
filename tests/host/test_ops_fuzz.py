"""Random argument types for every public host function of tylo.ops (issue 34, items 5 and
6): each family's array-level op, its host/hopper_host entry points, its planners and its
configuration dataclasses, called with valid described arrays (no memory behind them) and
one argument replaced by a hostile value (None, a string, a float, NaN, inf, a bool, a list,
an int past 2**63, a negative or zero one). Whatever happens, only a
:class:`tylo.errors.TyloError` may escape: never a TypeError, AttributeError,
ZeroDivisionError, OverflowError or KeyError from tylo's own frames.

Nothing launches: the kernels, tensor maps and SM counts are replaced by stand-ins that
raise :class:`~tylo.backend.errors.NoDeviceError` (a TyloError) or answer as an H200
would, so every call stops at its checks or at the launch."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tylo
from tylo.arrays import DeviceArray
from tylo.backend.errors import NoDeviceError
from tylo.errors import TyloError

HOSTILE = [None, "abc", "False", "", 1.5, math.nan, math.inf, -math.inf, True, False, [1],
           (2,), 2**64 + 1, -(2**63) - 1, 2**31, -1, 0, 1e39, object(), np.float64(2.5),
           np.int64(-3)]  # fmt: skip


def arr(shape, dtype=tylo.bf16, ptr=1 << 30, strides=None):
    if strides is None:
        strides = tuple(math.prod(shape[i + 1 :]) for i in range(len(shape)))
    return DeviceArray(ptr, tuple(shape), tuple(strides), dtype, 0)


class _NoLaunch:
    """A kernel whose launch raises NoDeviceError (a TyloError): the checks before it run."""

    def __getitem__(self, launch):
        def run(*args, **kwargs):
            raise NoDeviceError("fuzz: no launch")

        return run


class _Map:
    def __init__(self, plan, array):
        self.plan, self.array = plan, array


@pytest.fixture(autouse=True)
def no_gpu(monkeypatch):
    from tylo.ops.attention import hopper_host, kernel
    from tylo.ops.gemm import hopper_host as ghh
    from tylo.ops.gemm import host as gh
    from tylo.ops.softmax import host as sh

    def no_device(*a, **k):
        raise NoDeviceError("fuzz: no device")

    monkeypatch.setattr(kernel, "attention_kernel", _NoLaunch())
    monkeypatch.setattr(hopper_host, "hopper_attention_kernel", _NoLaunch())
    monkeypatch.setattr(hopper_host, "hopper_attention_persistent_kernel", _NoLaunch())
    monkeypatch.setattr(hopper_host, "TensorMap", _Map)
    monkeypatch.setattr(hopper_host, "_sm_count", lambda device: 132)
    monkeypatch.setattr(hopper_host, "_device_table", no_device)
    monkeypatch.setattr(hopper_host, "_one_item_spills", lambda cfg, target: False)
    monkeypatch.setattr(gh, "tiled_gemm_kernel", _NoLaunch())
    monkeypatch.setattr(gh, "pack_rows", no_device)
    monkeypatch.setattr(gh, "_scratch", no_device)
    monkeypatch.setattr(ghh, "hopper_gemm_kernel", _NoLaunch())
    monkeypatch.setattr(ghh, "TensorMap", _Map)
    monkeypatch.setattr(ghh, "_resident_clusters", lambda cfg, device: 132)
    monkeypatch.setattr(sh, "kernel_for", lambda cfg: _NoLaunch())
    monkeypatch.setattr("tylo.ops.gemm.route.takes_hopper", lambda device: True)


def _gemm_cases():
    from tylo.ops.gemm import api, hopper_host, host, kernel

    a, b = arr((64, 64), ptr=1 << 30), arr((64, 64), ptr=1 << 31)
    d = arr((64, 64), tylo.f32, ptr=1 << 32)
    sizes = dict(m=64, n=64, k=64, lda=64, ldb=64, ldd=64)
    return [
        (
            "ops.gemm",
            tylo.ops.gemm,
            dict(
                a=a,
                b=arr((64, 64), strides=(1, 64), ptr=1 << 31),
                out=None,
                alpha=1.0,
                relu=False,
                out_dtype=None,
            ),
        ),
        (
            "gemm_operands",
            api.gemm_operands,
            dict(a=a, b=arr((64, 64), strides=(1, 64)), out=d, out_dtype=None),
        ),
        (
            "host.gemm",
            host.gemm,
            dict(d=d, a=a, b=b, **sizes, alpha=1.0, relu=False, cfg=None, pack=True),
        ),
        ("host.choose_config", host.choose_config, dict(m=64, n=64, k=64, lda=64, ldb=64)),
        (
            "hopper_host.gemm",
            hopper_host.gemm,
            dict(d=d, a=a, b=b, **sizes, alpha=1.0, relu=False, cfg=None),
        ),
        ("check_extents", hopper_host.check_extents, dict(d=d, a=a, b=b, **sizes)),
        (
            "chosen_config",
            hopper_host.chosen_config,
            dict(d=d, a=a, b=b, **sizes, relu=False, cfg=None),
        ),
        ("default_config", hopper_host.default_config, dict(dtype=tylo.bf16, tma_store=True, k=64)),
        (
            "takes_tma_path",
            hopper_host.takes_tma_path,
            dict(m=64, n=64, k=64, lda=64, ldb=64, a=a, b=b),
        ),
        ("takes_tma_store", hopper_host.takes_tma_store, dict(d=d, m=64, ldd=64)),
        ("gemm_config", kernel.gemm_config, dict(plan=kernel.DEFAULT_PLAN, stages=2)),
        ("HopperGemmConfig", hopper_host.HopperGemmConfig, dict(bn=128, m_atoms=2, stages=3)),
    ]


def _attention_cases():
    from tylo.ops.attention import config, hopper_args, hopper_host, host, reference

    q = arr((2, 3, 16, 64), ptr=1 << 30)
    k, v = arr((2, 3, 16, 64), ptr=1 << 31), arr((2, 3, 16, 64), ptr=1 << 32)
    out, lse = arr((2, 3, 16, 64), ptr=1 << 33), arr((2, 3, 16), tylo.f32, ptr=1 << 34)
    lens = arr((2,), tylo.i32, ptr=1 << 35)
    hcfg = hopper_host.HopperAttentionConfig(d=64)
    return [
        (
            "ops.attention",
            tylo.ops.attention,
            dict(q=q, k=k, v=v, causal=False, kv_lens=None, scale=None, out=out, return_lse=False),
        ),
        (
            "host.attention",
            host.attention,
            dict(
                q=q, k=k, v=v, causal=False, kv_lens=lens, scale=None, out=out, lse=lse, path="warp"
            ),
        ),
        (
            "plan_attention",
            host.plan_attention,
            dict(q=q, k=k, v=v, out=out, lse=lse, causal=False, kv_lens=lens, scale=0.5),
        ),
        ("auto_path", host.auto_path, dict(q=q, k=k, v=v, scale=None)),
        (
            "launch_options",
            host.launch_options,
            dict(d=64, causal=False, padding=False, aligned=True, capability=(9, 0)),
        ),
        (
            "launch_config",
            host.launch_config,
            dict(
                d=64, dtype=tylo.bf16, causal=False, padding=False, aligned=True, capability=(9, 0)
            ),
        ),
        ("attention_config", config.attention_config, dict(d=64, dtype="bf16", causal=False)),
        (
            "hopper_attention",
            hopper_host.hopper_attention,
            dict(q=q, k=k, v=v, causal=False, kv_lens=lens, scale=None, out=out, lse=lse, cfg=hcfg),
        ),
        (
            "hopper choose_config",
            hopper_host.choose_config,
            dict(d=64, dtype=tylo.bf16, causal=False, lk=100, consumers=2),
        ),
        (
            "persistent_grid",
            hopper_host.persistent_grid,
            dict(
                cfg=hopper_host.HopperAttentionConfig(d=64, persistent=True),
                lq=100,
                lk=100,
                h=3,
                b=2,
                sms=132,
            ),
        ),
        ("long_keys", hopper_host.long_keys, dict(d=64, causal=False)),
        ("check_inputs", hopper_args.check_inputs, dict(q=q, k=k, v=v)),
        ("takes_tma_store", hopper_args.takes_tma_store, dict(out=out)),
        (
            "HopperAttentionConfig",
            hopper_host.HopperAttentionConfig,
            dict(d=64, bn=128, stages=2, causal=False),
        ),
        ("visible", reference.visible, dict(lq=4, lk=5, causal=True, kv_len=3)),
    ]


def _softmax_cases():
    from tylo.ops.softmax import host, plan

    x, o = arr((8, 16), tylo.f32, ptr=1 << 30), arr((8, 16), tylo.f32, ptr=1 << 31)
    return [
        ("ops.softmax", tylo.ops.softmax, dict(x=x, dim=-1, mask=None, out=o)),
        (
            "host.softmax",
            host.softmax,
            dict(out=o, x=x, mask=None, lengths=None, style=None, cfg=None),
        ),
        ("plan_launch", host.plan_launch, dict(out=o, x=x, mask=None, lengths=None, style=None)),
        ("make_config", plan.make_config, dict(style="warp", cols=16, vec=4, mask="none")),
        (
            "choose_config",
            plan.choose_config,
            dict(rows=8, cols=16, vec=4, itemsize=4, mask="none", style=None, cc=(9, 0)),
        ),
        (
            "launch_shape",
            host.launch_shape,
            dict(cfg=plan.choose_config(8, 16, vec=4), rows=8, itemsize=4),
        ),
    ]


CASES = _gemm_cases() + _attention_cases() + _softmax_cases()


def _call(fn, kw):
    try:
        fn(**kw)
    except TyloError:
        pass


@pytest.mark.parametrize(("label", "fn", "base"), CASES, ids=[c[0] for c in CASES])
def test_valid_arguments_reach_the_launch_or_return(label, fn, base):
    _call(fn, base)  # the base case itself raises nothing but TyloError


@pytest.mark.parametrize(("label", "fn", "base"), CASES, ids=[c[0] for c in CASES])
@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_hostile_arguments_raise_only_tylo_errors(label, fn, base, data):
    name = data.draw(st.sampled_from(sorted(base)), label="argument")
    value = data.draw(st.sampled_from(HOSTILE), label="value")
    _call(fn, {**base, name: value})


# ------------------------------------------------------------------ the examples


def _gemm_args():
    a, b = arr((64, 64), ptr=1 << 30), arr((64, 64), ptr=1 << 31)
    return arr((64, 64), tylo.f32, ptr=1 << 32), a, b


def test_check_extents_refuses_what_is_not_an_int():
    from tylo.ops.args import OpArgumentError
    from tylo.ops.gemm.hopper_host import check_extents

    d, a, b = _gemm_args()
    with pytest.raises(OpArgumentError, match="m must be an integer, got True"):
        check_extents(d, a, b, True, 64, 64.0, math.nan, 64, 64)
    with pytest.raises(OpArgumentError, match="k must be an integer, got 64.0"):
        check_extents(d, a, b, 64, 64, 64.0, 64, 64, 64)
    with pytest.raises(OpArgumentError, match="lda must be an integer, got nan"):
        check_extents(d, a, b, 64, 64, 64, math.nan, 64, 64)
    check_extents(d, a, b, np.int64(64), 64, np.int32(64), 64, 64, 64)  # numpy ints: fine


@pytest.mark.parametrize("path", ["host", "hopper_host"])
@pytest.mark.parametrize(
    ("kw", "says"),
    [
        (dict(relu="no"), "relu must be True or False"),
        (dict(alpha=None), "alpha must be a real number"),
        (dict(alpha=1e39), "alpha = 1e\\+39 does not fit in f32"),
        (dict(cfg="abc"), "cfg must be a"),
        (dict(m=True), "m must be an integer"),
        (dict(ldd=0), "ldd must be >= 1"),
    ],
)
def test_the_kernel_level_gemms_check_their_arguments(path, kw, says):
    import importlib

    from tylo.ops.args import OpArgumentError

    fn = importlib.import_module(f"tylo.ops.gemm.{path}").gemm
    d, a, b = _gemm_args()
    args = dict(d=d, a=a, b=b, m=64, n=64, k=64, lda=64, ldb=64, ldd=64)
    args.update(kw)
    with pytest.raises(OpArgumentError, match=says):
        fn(**args)


@pytest.mark.parametrize(
    ("kw", "says"),
    [
        (dict(causal="False"), "causal must be True or False"),
        (dict(scale="abc"), "scale must be a real number"),
        (dict(scale=1e39), "scale = 1e\\+39 does not fit in f32"),
        (dict(path=["warp"]), "path must be one of"),
    ],
)
def test_the_warp_attention_checks_its_arguments(kw, says):
    from tylo.ops.attention.host import attention

    q = arr((2, 3, 16, 64))
    with pytest.raises(TyloError, match=says):
        attention(q, q, q, **{"path": "warp", **kw})


@pytest.mark.parametrize(
    ("kw", "says"),
    [
        (dict(causal="False"), "causal must be a bool"),
        (dict(scale="abc"), "scale must be a real number"),
        (dict(scale=1e39), "scale = 1e\\+39 does not fit in f32"),
        (dict(cfg="abc"), "cfg must be a HopperAttentionConfig"),
    ],
)
def test_the_hopper_attention_checks_its_arguments(kw, says):
    from tylo.ops.attention.hopper_host import hopper_attention

    q = arr((2, 3, 16, 64))
    with pytest.raises(TyloError, match=says):
        hopper_attention(q, q, q, **kw)


def test_a_zero_sm_count_is_refused():
    from tylo.ops.args import OpArgumentError
    from tylo.ops.attention.hopper_host import HopperAttentionConfig, persistent_grid

    cfg = HopperAttentionConfig(d=64, persistent=True)
    with pytest.raises(OpArgumentError, match="SM count"):
        persistent_grid(cfg, 100, 100, 3, 2, sms=0)
    assert persistent_grid(cfg, 100, 100, 3, 2, sms=4) == 4


def test_softmax_cfg_must_be_a_config():
    from tylo.ops.softmax.host import softmax
    from tylo.ops.softmax.plan import SoftmaxError

    x, o = arr((8, 16), tylo.f32, ptr=1 << 30), arr((8, 16), tylo.f32, ptr=1 << 31)
    with pytest.raises(SoftmaxError, match="cfg must be a SoftmaxConfig"):
        softmax(o, x, cfg="abc")
