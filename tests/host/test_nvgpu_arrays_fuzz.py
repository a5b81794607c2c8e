"""Hostile arguments to every public host function and constructor of ``tylo.nvgpu`` (its
subpackages' ``__all__``) and ``tylo.arrays`` end in a ``TyloError`` subclass, never in an
untyped exception from tylo's own frames (issue #34, item 6).

Two generators: every argument hostile at once, drawn at random (what a first check sees),
and, for the functions with a known valid call, each argument of the valid call replaced by
each hostile value in turn (what the later checks see). Functions that need a kernel being
traced refuse outside one with
a TraceError, after their argument checks; a few are also traced with hostile arguments, where
the tracer's TraceError must wrap a TyloError (its ``original``), not a TypeError.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tylo
import tylo.nvgpu
from tylo import dtypes as dt
from tylo.errors import TyloError
from tylo.layouts import Layout, Swizzle, composition, dim
from tylo.layouts.tv import wgmma_m64_c_tv

HOSTILE = [
    None,
    "abc",
    "",
    "128B ",
    1.5,
    float("nan"),
    float("inf"),
    -0.0,
    True,
    False,
    [],
    [1, 2],
    [[1, 2], [3]],
    (),
    ("a", "b"),
    (1.5, 2),
    (True, 8),
    {"a": 1},
    {1, 2},
    2**64,
    2**63,
    2**31,
    -(2**63),
    -1,
    0,
    np.int64(-1),
    np.float64(3.0),
    np.bool_(True),
    b"x",
    object(),
    Layout((4, 4), (4, 1)),
    dt.f64,
]
hostile = st.sampled_from(HOSTILE)


def _modules() -> list:
    names = [m.name for m in pkgutil.walk_packages(tylo.nvgpu.__path__, "tylo.nvgpu.")]
    return [importlib.import_module(n) for n in [*names, "tylo.arrays"]]


def _public() -> dict:
    out = {}
    for mod in _modules():
        for name in getattr(mod, "__all__", None) or []:
            obj = getattr(mod, name)
            if isinstance(obj, type) and issubclass(obj, BaseException) or not callable(obj):
                continue
            out[f"{mod.__name__}.{name}"] = obj
    return out


PUBLIC = _public()


def _params(fn):
    sig = inspect.signature(fn)
    return [
        p
        for p in sig.parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]


def _call(fn, args, kwargs):
    """Call; only a TyloError may escape (a DeviceBuffer's allocation on a GPU is freed)."""
    try:
        out = fn(*args, **kwargs)
    except TyloError:
        return
    except Exception as err:
        raise AssertionError(
            f"{fn.__qualname__}(*{args!r}, **{kwargs!r}) raised {type(err).__name__}: {err}"
        ) from err
    if type(out).__name__ == "DeviceBuffer":
        out.close()


def test_the_surface_is_enumerated():
    """The fuzz covers the functions the issue names."""
    for name in (
        "tylo.nvgpu.tma.TensorMapPlan",
        "tylo.nvgpu.warpgroup.descriptor.canonical_layout",
        "tylo.nvgpu.cpasync.CopyPlan",
        "tylo.arrays.DeviceArray",
        "tylo.arrays.DeviceBuffer",
        "tylo.nvgpu.instructions.ldmatrix",
    ):
        assert name in PUBLIC
    assert len(PUBLIC) > 60


@pytest.mark.parametrize("name", sorted(PUBLIC))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_all_hostile_arguments(name, data):
    fn = PUBLIC[name]
    args, kwargs = [], {}
    for p in _params(fn):
        if p.default is not p.empty and data.draw(st.booleans(), label=f"omit {p.name}"):
            continue
        v = data.draw(hostile, label=p.name)
        if p.kind == p.KEYWORD_ONLY:
            kwargs[p.name] = v
        else:
            args.append(v)
    _call(fn, args, kwargs)


# ------------------------------------------------------- valid calls, one argument hostile


def _valid_calls() -> dict:
    from tylo.arrays import DeviceArray
    from tylo.nvgpu.warp.mma import MMAAtom, TiledMMA
    from tylo.nvgpu.warpgroup.mma import WarpgroupMMAAtom
    from tylo.target import Target
    from tylo.tile.ownership import Ownership

    m, k, ld = dim("M"), dim("K"), dim("ld", multiple_of=8)
    sw = composition(Swizzle(3, 3, 3), Layout((64, 64), (64, 1)))
    plan = TiledMMA(MMAAtom((16, 8, 16), dt.bf16), warps=(2, 2), repeat=(2, 4), k=32)
    chain_first = TiledMMA(MMAAtom((16, 8, 16), dt.bf16), warps=(1, 1), repeat=(1, 2), k=16)
    chain_second = TiledMMA(MMAAtom((16, 8, 16), dt.bf16), warps=(1, 1), repeat=(1, 1), k=16)
    own = Ownership(wgmma_m64_c_tv(16), (64, 16))
    arr = DeviceArray(1 << 20, (4, 8), (8, 1), dt.f32, 0)
    p = "tylo.nvgpu."
    return {
        p + "cpasync.CopyPlan": ((16, 64), dt.bf16, 128, Layout((16, 64), (64, 1))),
        p + "warp.mma.MMAAtom": ((16, 8, 16), dt.bf16),
        p + "warp.mma.TiledMMA": (MMAAtom((16, 8, 16), dt.bf16), (2, 2), (2, 4), 32),
        p + "warp.mma.size": (plan,),
        p + "warp.mma.threads": (plan,),
        p + "warp.ldmatrix.operand_loads": (plan, "a", 1),
        p + "warp.chain.prove_chain": (chain_first.acc_ownership, chain_second),
        p + "warp.stmatrix.StmatrixPlan": (own, 1),
        p + "warp.stmatrix.stmatrix_plan": (own, 1),
        p + "warp.stmatrix.matrix_rows": (own, 0, 0, 1, False),
        p + "warpgroup.mma.WarpgroupMMAAtom": ((64, 64, 16), dt.bf16, dt.f32, "shared"),
        p + "warpgroup.chain.prove_register_a": (
            WarpgroupMMAAtom((64, 64, 16), dt.bf16).c,
            WarpgroupMMAAtom((64, 64, 16), dt.bf16, a="registers"),
        ),
        p + "warpgroup.descriptor.derive_descriptor": (sw, dt.bf16, 64),
        p + "warpgroup.descriptor.canonical_layout": ("K", "128B", dt.bf16, 64, 0, 512),
        p + "warpgroup.descriptor.swizzle_period_bytes": ("128B",),
        p + "warpgroup.descriptor.MatrixDescriptor": ("K", "128B", 16, 1024, 0, 1024),
        p + "tma.TensorMapPlan": (dt.bf16, Layout((m, k), (ld, 1)), (64, 64), "128B", sw),
        p + "mbarrier.PipelinePlan": (2, 1, 1, 1, 1),
        p + "bounds.region_text": (((0, 64), (0, 16)),),
        p + "bounds.layout_extents": (sw,),
        p + "errors.mma_dtypes": ("op", dt.bf16, dt.f32),
        p + "instructions.check_arch": ("wgmma", Target.parse("sm_90a")),
        "tylo.arrays.DeviceArray": (1 << 20, (4, 8), (8, 1), dt.f32, 0, False, None),
        "tylo.arrays.as_device_array": (arr,),
        "tylo.arrays.array_key": (arr,),
        "tylo.arrays.overlap": (arr, arr),
        "tylo.arrays.internal_overlap": (arr,),
        "tylo.arrays.overlapping_pair": ({"out": arr}, {"x": arr}),
        "tylo.arrays.device_clash": ([("a", 0), ("b", 1)],),
    }


VALID = _valid_calls()


def test_the_valid_calls_are_valid():
    for name, args in VALID.items():
        PUBLIC[name](*args)


@pytest.mark.parametrize("name", sorted(VALID))
def test_one_hostile_argument(name):
    """Every argument of the valid call, replaced by every hostile value in turn."""
    for i in range(len(VALID[name])):
        for value in HOSTILE:
            args = list(VALID[name])
            args[i] = value
            _call(PUBLIC[name], args, {})


def test_the_issue_examples():
    """With no driver a tensor map's encode raises NoDeviceError (a TyloError), not the
    loader's DynamicLibNotFoundError; a string extent, a list swizzle and an unknown
    canonical swizzle are refused by name."""
    from tylo.arrays import ArrayError, DeviceArray
    from tylo.backend import driver
    from tylo.nvgpu.errors import PlanError
    from tylo.nvgpu.tma import TensorMapPlan, TMAError
    from tylo.nvgpu.warpgroup.descriptor import canonical_layout

    sw = composition(Swizzle(3, 3, 3), Layout((64, 64), (64, 1)))
    gl = Layout((dim("M"), dim("K")), (dim("ld", multiple_of=8), 1))
    plan = TensorMapPlan(dt.bf16, gl, (64, 64), "128B", sw)
    if driver.device_count() == 0:
        with pytest.raises(tylo.NoDeviceError):
            plan.encode(1 << 20, (128, 128), (128, 1))
    with pytest.raises(ArrayError, match="shape"):
        DeviceArray(1 << 20, ("4", 8), (8, 1), dt.f32, 0)
    with pytest.raises(ArrayError, match="shape"):
        DeviceArray(1 << 20, (True, 8), (8, 1), dt.f32, 0)
    assert DeviceArray(1 << 20, (np.int64(4), 8), (8, np.int32(1)), dt.f32, 0).shape == (4, 8)
    with pytest.raises(TMAError, match="swizzle"):
        TensorMapPlan(dt.bf16, gl, (64, 64), ["128B"], sw)
    with pytest.raises(PlanError, match="swizzle"):
        canonical_layout("K", "256B", dt.bf16, 64, 0, 512)


# ------------------------------------------------------- traced, hostile static arguments


@tylo.kernel
def _traced(out, which: tylo.Static, value: tylo.Static):
    from tylo.nvgpu import tma
    from tylo.nvgpu.cpasync import wait_copies
    from tylo.nvgpu.warpgroup.mma import (
        WarpgroupMMAAtom,
        commit_group,
        fence,
        mma_async,
        wait_group,
    )
    from tylo.tile.fragment import zeros
    from tylo.tile.views import SharedTile

    if which == "wait_copies":
        wait_copies(value)
    elif which == "wait_stores":
        tma.wait_stores(value)
    elif which == "wait_group":
        wait_group(value)
    else:
        atom = WarpgroupMMAAtom((64, 64, 16), tylo.bf16)
        sw = composition(Swizzle(3, 3, 3), Layout((64, 64), (64, 1)))
        st_ = SharedTile(tylo.shared(tylo.bf16, 4096, align=1024), sw)
        fence()
        kw = {which: value}
        acc = mma_async(atom, st_, st_, zeros(atom.c), **kw)
        commit_group()
        out[tylo.thread_idx.x] = wait_group(0, acc)[0]


@pytest.mark.parametrize(
    "which", ["wait_copies", "wait_stores", "wait_group", "k_offset", "accumulate"]
)
@pytest.mark.parametrize(
    "value", [None, "0", 1.0, float("nan"), True, -1, 2**64, [0], np.int64(2**40)], ids=repr
)
def test_traced_hostile_static_arguments(which, value):
    try:
        _traced.trace(tylo.f32, which, value, block=128, target="sm_90a")
    except tylo.TyloError as err:
        original = getattr(err, "original", None)
        assert original is None or isinstance(original, TyloError), repr(original)


@pytest.mark.parametrize("which", ["wait_copies", "wait_stores", "wait_group"])
def test_numpy_integer_counts_are_ints(which):
    """np.int64(0) is accepted where 0 is (True is not: a bool is never a count)."""
    _traced.trace(tylo.f32, which, np.int64(0), block=128, target="sm_90a")
    with pytest.raises(tylo.TyloError, match="must be a static int"):
        _traced.trace(tylo.f32, which, True, block=128, target="sm_90a")


def _methods():
    out = {}
    for name, args in VALID.items():
        obj = PUBLIC[name](*args)
        mod = type(obj).__module__
        if not (mod.startswith("tylo.nvgpu") or mod == "tylo.arrays"):
            continue  # a Layout, an int: not this surface
        for mname, m in inspect.getmembers(obj):
            if mname.startswith("_") or not callable(m) or isinstance(m, type):
                continue
            params = [
                p
                for p in inspect.signature(m).parameters.values()
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
            ]
            if params:
                out[f"{type(obj).__name__}.{mname}"] = (m, len(params))
    return out


METHODS = _methods()


@pytest.mark.parametrize("name", sorted(METHODS))
def test_methods_of_valid_plans(name):
    """Each positional argument of each public method of the valid plans (the others 0),
    replaced by every hostile value in turn."""
    method, n = METHODS[name]
    for i in range(n):
        for value in HOSTILE:
            args = [0] * n
            args[i] = value
            _call(method, args, {})
