"""Cluster launch configuration on the host: the cluster shape's validation, the grid
divisibility and target checks, and the CUlaunchAttribute bytes the fast paths point at.
Every refusal's claim is checked against a brute-force statement of the rule."""

from __future__ import annotations

import ctypes
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tylo
from tylo.backend import launchex
from tylo.backend.argpack import I32, PTR
from tylo.kernel import clusters
from tylo.kernel.clusters import ClusterError, check_grid, check_target, cluster_dims
from tylo.testing import require_c_launch

SETTINGS = settings(max_examples=150, deadline=None)

hostile = st.one_of(
    st.integers(-(2**64), 2**64),
    st.booleans(),
    st.floats(allow_nan=True),
    st.none(),
    st.text(max_size=2),
    st.lists(st.integers(-3, 20), max_size=4),
    st.lists(st.integers(-3, 20), max_size=4).map(tuple),
    st.tuples(st.integers(1, 4), st.booleans()),
    st.tuples(st.integers(1, 4), st.floats(1, 2)),
    st.tuples(st.integers(2**62, 2**64), st.just(1)),
)


def _rule(value):
    """The accepted shapes, stated directly: an int or a tuple/list of 1-3 items, each a
    plain positive int, product <= 16."""
    items = [value] if type(value) is int else value
    if not isinstance(items, (tuple, list)) or not 1 <= len(items) <= 3:
        return None
    if any(type(v) is not int or v < 1 for v in items):
        return None
    x, y, z = (*items, 1, 1)[:3]
    return (x, y, z) if x * y * z <= 16 else None


@SETTINGS
@given(hostile)
def test_cluster_dims_accepts_exactly_the_rule(value):
    want = _rule(value)
    if want is None:
        with pytest.raises(ClusterError) as err:
            cluster_dims(value, "k")
        assert "k[grid, block, cluster]" in str(err.value)
        assert isinstance(err.value, tylo.KernelArgumentError)
    else:
        assert cluster_dims(value, "k") == want


def test_cluster_size_limits_name_both_sizes():
    assert cluster_dims((16,)) == (16, 1, 1) and cluster_dims((2, 2, 4)) == (2, 2, 4)
    with pytest.raises(ClusterError, match="17 CTAs.*at most 8 .*or 16"):
        cluster_dims(17)
    with pytest.raises(ClusterError, match="18 CTAs"):
        cluster_dims((3, 3, 2))


@SETTINGS
@given(
    st.lists(st.integers(1, 2**31 - 1), min_size=1, max_size=3),
    st.tuples(st.integers(1, 16), st.integers(1, 4), st.integers(1, 2)),
)
def test_check_grid_refuses_exactly_the_partial_clusters(grid, cluster):
    dims = (*grid, 1, 1)[:3]
    whole = all(g % c == 0 for g, c in zip(dims, cluster))
    if whole:
        check_grid(tuple(grid), cluster, "k")
        return
    with pytest.raises(ClusterError) as err:
        check_grid(tuple(grid), cluster, "k")
    for axis, g, c in zip("xyz", dims, cluster):
        assert (f"{axis}: {g} is not a multiple of {c}" in str(err.value)) == bool(g % c)


@pytest.mark.parametrize("target", ["sm_80", "sm_86", "sm_89"])
def test_clusters_need_sm90(target):
    with pytest.raises(ClusterError, match="need sm_90"):
        check_target((2, 1, 1), tylo.Target.parse(target), "k")
    check_target(None, tylo.Target.parse(target), "k")  # no cluster: nothing to check
    check_target((2, 1, 1), tylo.Target.parse("sm_90"), "k")
    check_target((2, 1, 1), tylo.Target.parse("sm_90a"), "k")


@tylo.kernel
def writes(out):
    out[tylo.thread_idx.x] = 1.0


def test_launch_configuration_errors_are_typed_and_early():
    with pytest.raises(ClusterError, match="positive int"):
        writes[4, 32, 0]
    with pytest.raises(ClusterError, match="positive int"):
        writes[4, 32, (2, -1)]
    with pytest.raises(ClusterError, match="x: 3 is not a multiple of 2"):
        writes[3, 32, 2]
    with pytest.raises(ClusterError, match="y: 5 is not a multiple of 2"):
        writes[(4, 5), 32, (1, 2)]
    with pytest.raises(tylo.KernelArgumentError, match="optionally a cluster"):
        writes[4, 32, 2, 1]
    with pytest.raises(ClusterError, match="need sm_90"):
        writes.compile(tylo.f32, block=32, cluster=(2, 1, 1), target="sm_80")
    with pytest.raises(ClusterError, match="need sm_90"):
        writes.trace(tylo.f32, block=32, cluster=2, target="sm_80")
    launcher = writes[(4, 2), 32, (2, 2)]  # valid: nothing launched yet
    assert launcher.cluster == (2, 2, 1) and launcher.shape == ((32, 1, 1), (2, 2, 1))
    assert repr(launcher) == "writes[(4, 2), (32, 1, 1), (2, 2, 1)]"


@SETTINGS
@given(st.tuples(st.integers(1, 16), st.integers(1, 16), st.integers(1, 16)))
def test_cluster_attribute_is_the_driver_struct(cluster):
    """The bytes are a CUlaunchAttribute: id 4 (CLUSTER_DIMENSION) at 0, clusterDim x/y/z
    as u32 at 8, 12, 16, zeros elsewhere (72 bytes); one immortal buffer per shape."""
    address, n = launchex.cluster_attribute(cluster)
    raw = ctypes.string_at(address, launchex.ATTRIBUTE_BYTES)
    assert n == 1 and len(raw) == 72
    assert struct.unpack_from("<I", raw, 0) == (4,)
    assert struct.unpack_from("<3I", raw, 8) == cluster
    assert raw[4:8] == bytes(4) and raw[20:] == bytes(52)
    assert launchex.cluster_attribute(cluster) == (address, 1)


def test_cluster_attribute_matches_cuda_bindings():
    """Independently: cuda.bindings' own CUlaunchAttribute for the same shape has the same
    leading bytes (its id, padding and clusterDim)."""
    from cuda.bindings import driver as cu  # a dependency of tylo: never a skip

    a = cu.CUlaunchAttribute()
    a.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    a.value.clusterDim.x, a.value.clusterDim.y, a.value.clusterDim.z = 2, 3, 1
    theirs = ctypes.string_at(int(a.getPtr()), 20)
    ours = ctypes.string_at(launchex.cluster_attribute((2, 3, 1))[0], 20)
    assert theirs == ours
    assert int(cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) == (
        launchex.CLUSTER_DIMENSION
    )


def test_launch_record_writes_attrs_and_count():
    r = launchex.LaunchRecord([PTR, I32])
    address, n = launchex.cluster_attribute((2, 1, 1))
    r.pack(4, 1, 1, 128, 1, 1, 0, 7, address, n, 0x1000, 5)
    raw = ctypes.string_at(r.config, launchex.CONFIG_BYTES)
    assert struct.unpack_from("<7I4xQQI", raw) == (4, 1, 1, 128, 1, 1, 0, 7, address, 1)
    assert r.values() == (0x1000, 5)
    r.pack(4, 1, 1, 128, 1, 1, 0, 7, *launchex.NO_ATTRIBUTES, 0x1000, 5)
    assert struct.unpack_from("<QI", ctypes.string_at(r.config + 40, 12)) == (0, 0)


def test_portable_size_constant():
    assert clusters.PORTABLE_CLUSTER_SIZE == 8 and clusters.MAX_CLUSTER_SIZE == 16
    assert clusters.cluster_size((2, 2, 4)) == 16


@pytest.mark.parametrize(
    "attrs,n,ok", [(0, 0, True), (None, 1, True), (0, 1, False), (None, 0, False)]
)
def test_the_c_inline_launch_takes_attrs_and_count_together(attrs, n, ok):
    """The C InlineLaunch's optional (attrs, num_attrs) must both be set or both be zero."""
    from tylo.arrays import DeviceArray
    from tylo.backend import driver

    accel = require_c_launch()
    noop = ctypes.cast(ctypes.pythonapi.PyGILState_Check, ctypes.c_void_p).value
    address = launchex.cluster_attribute((2, 1, 1))[0] if attrs is None else attrs
    args = (
        noop, 1, 0, 0, driver._tls, lambda err: None, None, {}, 0, 49152,
        ((0, DeviceArray, tylo.f32, 0, None),), ((0, "Q", 56),), (), (), 64, address, n,
    )  # fmt: skip
    if ok:
        accel.InlineLaunch(*args)
    else:
        with pytest.raises(ValueError, match="attrs"):
            accel.InlineLaunch(*args)
