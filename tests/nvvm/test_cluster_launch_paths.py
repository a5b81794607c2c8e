"""Cluster launches without a GPU: the driver is replaced by recorders, and each launch path
(the checked one, the Python reader and inline paths, the C inline path) must hand the
driver the same configuration, with the cluster shape as a CU_LAUNCH_ATTRIBUTE_CLUSTER_
DIMENSION attribute; the cluster is part of the specialization and of the PTX."""

from __future__ import annotations

import ctypes
import struct
from types import SimpleNamespace

import pytest

import tylo
from tylo.arrays import DeviceArray
from tylo.backend import driver, launchex
from tylo.kernel import fastpath
from tylo.kernel import launch as launch_mod
from tylo.kernel.clusters import ClusterError
from tylo.testing import require_c_launch

HANDLE = 0x1000


def array(ptr=0x7F00_0000_0000, n=256):
    return DeviceArray(ptr, (n,), (1,), tylo.f32, 0)


@pytest.fixture(params=["python", "c"])
def recorder(monkeypatch, request):
    """Checked launches (plain and cluster) and direct cuLaunchKernelEx calls recorded as
    ``(path, grid, block, cluster or None, values)``."""
    if request.param == "c":
        require_c_launch()
    monkeypatch.setattr(fastpath, "ACCELERATED", request.param == "c")
    calls: list = []
    opted: list = []
    sizes: dict = {}

    class Record(launchex.LaunchRecord):
        __slots__ = ()

        def __init__(self, params):
            super().__init__(params)
            sizes[self.params] = tuple(p.size for p in params)

    last = [()]

    def checked(fn, grid, block, pack, *, shared_bytes=0, stream=None):
        driver._tls.ordinal = 0
        last[0] = pack.sizes
        calls.append(("checked", grid, block, None, pack.values()))

    def checked_cluster(fn, grid, block, pack, *, cluster, shared_bytes=0, stream=None):
        driver._tls.ordinal = 0
        last[0] = pack.sizes
        calls.append(("checked", grid, block, cluster, pack.values()))

    def direct(config, handle, params, extra):
        try:
            raw = ctypes.string_at(config, launchex.CONFIG_BYTES)
            gx, gy, gz, bx, by, bz, _, _, attrs, n = struct.unpack_from("<7I4xQQI", raw)
            cluster = None
            if n:
                assert n == 1
                ident, *dims = struct.unpack_from("<I4x3I", ctypes.string_at(attrs, 20))
                assert ident == launchex.CLUSTER_DIMENSION
                cluster = tuple(dims)
            else:
                assert attrs == 0
            k = sizes.get(params) or last[0]
            ptrs = (ctypes.c_void_p * len(k)).from_address(params)
            values = tuple(
                int.from_bytes(ctypes.string_at(ptrs[i], k[i]), "little", signed=True)
                for i in range(len(k))
            )
            calls.append(("direct", (gx, gy, gz), (bx, by, bz), cluster, values))
        except Exception as exc:  # noqa: BLE001 - a ctypes callback cannot raise: record it
            calls.append(("error", repr(exc)))
        return 0

    keep = launchex.LAUNCH_EX_TYPE(direct)
    monkeypatch.setattr(driver, "launch", checked)
    monkeypatch.setattr(launchex, "launch_cluster", checked_cluster)
    monkeypatch.setattr(launchex, "allow_non_portable_clusters", lambda fn: opted.append(fn))
    monkeypatch.setattr(launchex, "_launch_ex", keep)
    monkeypatch.setattr(launchex, "LaunchRecord", Record)
    monkeypatch.setattr(launch_mod, "_DRIVER", driver)
    monkeypatch.setitem(launch_mod._targets, 0, tylo.Target.parse("sm_90a"))
    monkeypatch.setattr(
        launch_mod.CompiledKernel,
        "function",
        lambda self, ordinal=0: SimpleNamespace(
            handle=HANDLE, set_max_dynamic_shared_memory=lambda n: None
        ),
    )
    calls_ns = SimpleNamespace(calls=calls, opted=opted, keep=keep)
    return calls_ns


def make_kernel():
    def ranks(out, n):
        i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
        if i < n:
            out[i] = 1.0

    return tylo.kernel(ranks)


def test_every_path_passes_the_cluster(recorder):
    k = make_kernel()
    launcher = k[(4, 2), 64, (2, 1, 1)]
    for n in range(10, 14):
        launcher(array(0x1000), n)
    k[(4, 2), 64, (2, 1, 1)](array(0x2000), 20)  # the reader path of a cached launcher
    calls = recorder.calls
    assert calls[0] == ("checked", (4, 2), (64, 1, 1), (2, 1, 1), (0x1000, 10))
    assert {c[0] for c in calls[1:]} == {"direct"}
    for c, n in zip(calls[1:], (11, 12, 13)):
        assert c == ("direct", (4, 2, 1), (64, 1, 1), (2, 1, 1), (0x1000, n))
    assert calls[-1][3:] == ((2, 1, 1), (0x2000, 20))
    assert launcher.inline is not None and k.stats.compiles == 1


def test_the_cluster_is_part_of_the_specialization(recorder):
    k = make_kernel()
    k[8, 64](array(), 5)
    k[8, 64](array(), 6)
    k[8, 64, 2](array(), 5)
    k[8, 64, 2](array(), 6)
    k[8, 64, 4](array(), 5)
    assert k.stats.compiles == 3
    assert [c[3] for c in recorder.calls] == [None, None, (2, 1, 1), (2, 1, 1), (4, 1, 1)]
    assert [c[0] for c in recorder.calls] == ["checked", "direct", "checked", "direct", "checked"]
    assert {c.entry.cluster for c in k.cache.values()} == {None, (2, 1, 1), (4, 1, 1)}


def test_non_portable_clusters_opt_in_once(recorder):
    k = make_kernel()
    k[16, 32, 16](array(), 5)
    k[16, 32, 16](array(), 6)
    k[16, 32, 8](array(), 5)
    assert len(recorder.opted) == 1  # only the 16-CTA specialization, and only once
    assert [c[3] for c in recorder.calls] == [(16, 1, 1)] * 2 + [(8, 1, 1)]


def test_grid_not_whole_clusters_launches_nothing(recorder):
    k = make_kernel()
    with pytest.raises(ClusterError, match="not a multiple"):
        k[6, 32, 4](array(), 5)
    assert recorder.calls == [] and k.stats.compiles == 0


def test_compile_only_cluster_kernel():
    k = make_kernel()
    c = k.compile(tylo.f32, int, block=128, cluster=(2, 2), target="sm_90a")
    assert c.cluster == (2, 2, 1) and "cluster=(2, 2, 1)" in repr(c)
    assert ".reqnctapercluster" not in c.ptx  # the shape travels as a launch attribute
    plain = k.compile(tylo.f32, int, block=128, target="sm_90a")
    assert plain.cluster is None and ".reqnctapercluster" not in plain.ptx


def test_the_shape_in_ptx_when_asked(monkeypatch):
    """With SHAPE_IN_PTX, libNVVM turns the cluster_dim annotations into .explicitcluster
    and .reqnctapercluster (and a plain kernel has neither)."""
    from tylo.kernel import clusters

    monkeypatch.setattr(clusters, "SHAPE_IN_PTX", True)
    k = make_kernel()
    c = k.trace(tylo.f32, int, block=128, cluster=(2, 2), target="sm_90a")
    assert '!"cluster_dim_x", i32 2' in c.llvm and '!"cluster_dim_y", i32 2' in c.llvm
    k = make_kernel()
    c = k.compile(tylo.f32, int, block=128, cluster=(4, 1, 2), target="sm_90a")
    assert ".reqnctapercluster 4, 1, 2" in c.ptx and ".explicitcluster" in c.ptx
    plain = k.compile(tylo.f32, int, block=128, target="sm_90a")
    assert ".reqnctapercluster" not in plain.ptx and ".explicitcluster" not in plain.ptx
