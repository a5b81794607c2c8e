"""path="auto" routing (tylo.ops.attention.host.auto_path) without a GPU: fake device arrays
(__cuda_array_interface__) and a faked device; the thresholds are HOPPER_FROM's."""

from __future__ import annotations

import pytest

from tylo.ops.attention import host
from tylo.remembered import Remembered

PTR = 0x7F00_0000_0000


class FakeCAI:
    def __init__(self, shape) -> None:
        self.__cuda_array_interface__ = {
            "shape": shape, "typestr": "<f2", "data": (PTR, False), "version": 3,
            "strides": None,
        }  # fmt: skip


class Props:
    def __init__(self, cc):
        self.compute_capability = cc


@pytest.fixture
def hopper(monkeypatch):
    """A device of compute capability 9.0 whose Hopper kernel takes every input."""
    from tylo.backend import device
    from tylo.ops.attention import hopper_host

    monkeypatch.setattr(device, "device_properties", lambda dev: Props((9, 0)))
    monkeypatch.setattr(hopper_host, "check_inputs", lambda q, k, v: (q, k, v))


def _qkv(lq, lk, d):
    return FakeCAI((1, 2, lq, d)), FakeCAI((1, 2, lk, d)), FakeCAI((1, 2, lk, d))


@pytest.mark.parametrize("d", sorted(host.HOPPER_FROM))
def test_threshold_is_exact(hopper, d):
    """Hopper exactly from Lq * Lk = HOPPER_FROM[d], with Lq and Lk either way round."""
    edge = host.HOPPER_FROM[d]
    side = int(edge**0.5)
    assert side * side == edge
    assert host.auto_path(*_qkv(side, side, d)) == "hopper"
    assert host.auto_path(*_qkv(side, side - 1, d)) == "warp"
    assert host.auto_path(*_qkv(side * 2, side // 2, d)) == "hopper"
    assert host.auto_path(*_qkv(side // 2 - 1, side * 2, d)) == "warp"


def test_measured_choices(hopper):
    assert host.auto_path(*_qkv(1024, 1024, 128)) == "hopper"
    assert host.auto_path(*_qkv(1024, 1024, 64)) == "hopper"
    assert host.auto_path(*_qkv(1000, 1000, 64)) == "warp"  # shorter: not measured
    assert host.auto_path(*_qkv(4096, 4096, 64)) == "hopper"
    assert host.auto_path(*_qkv(4096, 4096, 96)) == "warp"  # no Hopper kernel for D = 96


def test_other_devices_scales_and_refusals_take_the_warp_path(monkeypatch, hopper):
    from tylo.backend import device
    from tylo.errors import TyloError
    from tylo.ops.attention import hopper_host

    assert host.auto_path(*_qkv(4096, 4096, 128), scale=-1.0) == "warp"
    assert host.auto_path(*_qkv(4096, 4096, 128), scale=0.5) == "hopper"
    monkeypatch.setattr(device, "device_properties", lambda dev: Props((8, 0)))
    assert host.auto_path(*_qkv(4096, 4096, 128)) == "warp"
    monkeypatch.setattr(device, "device_properties", lambda dev: Props((9, 0)))

    def refuse(q, k, v):
        raise TyloError("strides")

    monkeypatch.setattr(hopper_host, "check_inputs", refuse)
    assert host.auto_path(*_qkv(4096, 4096, 128)) == "warp"


def test_attention_remembers_the_auto_path(monkeypatch):
    """attention(path="auto") asks auto_path once per arrays and scale (the last 64), again
    for other arrays or another scale; arguments without a key are asked every time."""
    asked = []
    monkeypatch.setattr(host, "auto_path", lambda q, k, v, scale=None: asked.append(1) or "warp")
    monkeypatch.setattr(host, "_AUTO_PATHS", Remembered(64))
    q, k, v = _qkv(64, 64, 64)
    for _ in range(3):
        assert host._auto_path_of(q, k, v, None) == "warp"
    assert len(asked) == 1
    host._auto_path_of(q, k, v, 0.5)
    other = FakeCAI((1, 2, 65, 64))
    host._auto_path_of(other, k, v, None)
    assert len(asked) == 3
    host._auto_path_of(object(), k, v, None)
    host._auto_path_of(object(), k, v, None)
    host._auto_path_of(q, k, v, [0.5])  # an unhashable scale
    assert len(asked) == 6
    for i in range(host._AUTO_PATHS.limit + 3):
        host._auto_path_of(q, k, v, float(i + 1))
    assert len(host._AUTO_PATHS) == host._AUTO_PATHS.limit
