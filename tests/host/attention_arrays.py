"""Device arrays that are only descriptions (no memory behind them), for planning attention
on the host (imported by ``test_attention_*_host.py``; not a test module itself)."""

from __future__ import annotations

import math

import tylo
from tylo.arrays import DeviceArray


def device_array(shape, ptr, dtype=tylo.bf16):
    """A C-contiguous ``shape`` array of ``dtype`` at address ``ptr`` on device 0."""
    strides = tuple(math.prod(shape[i + 1 :]) for i in range(len(shape)))
    return DeviceArray(ptr, tuple(shape), strides, dtype, 0)


def attention_args(d=64, lq=300, lk=333):
    """``(q, k, v, out, lse)`` for ``plan_attention``: B = 2, H = 3, bf16, 16-byte aligned."""
    q = device_array((2, 3, lq, d), 1 << 30)
    k, v = device_array((2, 3, lk, d), 2 << 30), device_array((2, 3, lk, d), 3 << 30)
    out = device_array((2, 3, lq, d), 4 << 30)
    return q, k, v, out, device_array((2, 3, lq), 5 << 30, tylo.f32)
