"""tylo/ops/softmax on the host: configurations for the issue's shapes, typed errors before
launch, each style's ownership and the reductions derived from it (simulated on the host
against numpy), and the float64 reference's masking rules."""

from __future__ import annotations

import math
import operator
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import tylo
from tylo.arrays import DeviceArray
from tylo.ops.softmax.host import plan_launch, reference
from tylo.ops.softmax.plan import (
    SoftmaxConfig,
    SoftmaxError,
    choose_config,
    make_config,
    vector_width,
)
from tylo.tile.ownership import broadcast_map
from tylo.tile.reduce import reduction_plan

BASE = 0x7F0000000000  # a fake, 16-byte aligned device address (nothing is launched)


def arr(shape, dtype=tylo.f32, strides=None, offset=0):
    strides = strides or ((shape[1], 1) if len(shape) == 2 else (1,))
    return DeviceArray(BASE + offset, tuple(shape), tuple(strides), dtype, 0)


# ---------------------------------------------------------------------------- configurations


@pytest.mark.parametrize(
    "cols,itemsize,threads,vec,chunks",
    [
        (1024, 4, 32, 4, 8),  # a warp per row, 32 f32 each, read once
        (1024, 2, 32, 8, 4),
        (8192, 4, 256, 4, 8),  # 8 warps per row
        (8192, 2, 256, 8, 4),
        (32768, 4, 1024, 4, 8),  # 32 warps: the whole row in registers
        (32768, 2, 1024, 8, 4),
    ],
)
def test_issue_shapes_are_one_pass_full_rows(cols, itemsize, threads, vec, chunks):
    cfg = choose_config(4096, cols, vec=vector_width(itemsize, cols, True), itemsize=itemsize)
    assert (cfg.style, cfg.passes, cfg.full) == ("warp", 1, True)
    # a 1024-thread row of 16-bit elements streams the next row into shared memory
    assert cfg.prefetch == (threads == 1024 and itemsize == 2)
    assert (cfg.threads_per_row, cfg.vec, cfg.chunks) == (threads, vec, chunks)
    assert cfg.vec * itemsize == 16  # 16-byte vectors
    assert cfg.vec * cfg.chunks <= 32  # at most 32 values of the row per thread
    assert cfg.threads == max(threads, 256)


def test_style_by_row_length():
    assert choose_config(10, 16, vec=4).style == "lane"
    assert choose_config(10, 17, vec=1).style == "warp"
    long = choose_config(10, 70000, vec=4)
    assert (long.style, long.passes, long.threads_per_row) == ("warp", 2, 1024)
    short = choose_config(10, 64, vec=8)  # 8 lanes of a warp share a row: 32 rows per block
    assert (short.threads_per_row, short.rows_per_block, short.chunks) == (8, 32, 1)
    assert choose_config(10, 100, vec=4, style="mma").passes == 2


def test_vector_width():
    assert vector_width(4, 1024, True) == 4
    assert vector_width(2, 1024, True) == 8
    assert vector_width(4, 1022, True) == 2
    assert vector_width(4, 1023, True) == 1
    assert vector_width(2, 1024, False) == 1


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"style": "diagonal"}, "style must be one of"),
        ({"style": "warp", "mask": "float"}, "mask must be one of"),
        ({"style": "warp", "vec": 3}, "vec must be 1, 2, 4 or 8"),
        ({"style": "warp", "threads_per_row": 48}, "power of two"),
        ({"style": "warp", "threads_per_row": 512, "rows_per_block": 4}, "at most 1024"),
        ({"style": "warp", "passes": 3}, "passes must be 1 or 2"),
        ({"style": "mma", "vec": 4}, "element pairs"),
        ({"style": "lane", "chunks": 0}, "positive int"),
    ],
)
def test_config_errors(kwargs, match):
    with pytest.raises(SoftmaxError, match=match):
        SoftmaxConfig(**kwargs)


def test_make_config_errors():
    with pytest.raises(SoftmaxError, match="at least one element"):
        make_config("warp", 0, vec=1)
    with pytest.raises(SoftmaxError, match="too many"):
        make_config("lane", 1000, vec=4)
    with pytest.raises(SoftmaxError, match="element pairs"):
        make_config("mma", 63, vec=1)


def test_configs_are_hashable_static_arguments():
    a = make_config("warp", 1024, vec=4)
    assert a == make_config("warp", 1024, vec=4) and hash(a) == hash(
        make_config("warp", 1024, vec=4)
    )
    assert a != make_config("warp", 1024, vec=4, mask="bool")


# ---------------------------------------------------------------------------- ownership


def test_lane_rows_reduce_in_the_thread():
    cfg = make_config("lane", 12, vec=4)
    p = reduction_plan(cfg.ownership, 1)
    assert p.lane_masks == () and p.warps == 1 and p.groups == (tuple(range(12)),)
    assert cfg.ownership.coords(5)[:2] == [(5, 0), (5, 1)]


@pytest.mark.parametrize(
    "cols,vec,masks,warps",
    [(1024, 4, (1, 2, 4, 8, 16), 1), (8192, 4, (1, 2, 4, 8, 16), 8), (64, 8, (1, 2, 4), 1)],
)
def test_warp_rows_shuffle_then_share(cols, vec, masks, warps):
    cfg = make_config("warp", cols, vec=vec)
    p = reduction_plan(cfg.ownership, 1)
    assert p.lane_masks == masks and p.warps == warps
    assert cfg.row_warps == warps
    if warps > 1:  # the two-level step between warps: one partial per lane, then shuffles
        assert p.exchange_masks == tuple(1 << b for b in range(warps.bit_length() - 1))
        assert p.partials_per_lane == 1 and p.scratch_elements == cfg.rows_per_block * warps
    own = cfg.ownership
    # a thread's slots: vec consecutive elements, then the next chunk t * vec further on
    t = cfg.threads_per_row
    want = [(0, vec + j) for j in range(vec)] + [(0, t * vec + vec)] * (cfg.chunks > 1)
    assert own.coords(1)[: vec + 1] == want


def test_mma_rows_are_quads():
    cfg = make_config("mma", 64, vec=2)
    assert cfg.ownership == cfg.mma_plan.acc_ownership
    p = reduction_plan(cfg.ownership, 1)
    assert p.lane_masks == (1, 2) and p.warps == 1  # two shuffles: the 4 lanes of a quad
    assert cfg.ownership.coords(5)[:2] == [(1, 2), (1, 3)]


def test_online_thread_ownership_combines_the_threads_of_a_row():
    cfg = make_config("warp", 70000, vec=4)
    p = reduction_plan(cfg.thread_ownership, 1)
    assert p.lane_masks == (1, 2, 4, 8, 16) and p.warps == 32
    local = reduction_plan(cfg.local_ownership, 1)
    assert local.lane_masks == () and local.warps == 1


def _simulate_softmax(cfg, x):
    """normalize() of tylo/ops/softmax/kernel.py, run on the host with the reduction
    recipes derived from cfg's ownership (in-thread folds, butterflies, scratch)."""
    own = cfg.ownership
    table = own.table()
    data = [[x[tuple(table[t, v])] for v in range(own.values)] for t in range(own.threads)]
    plan = reduction_plan(own, 1)
    bmap = broadcast_map(own, plan.result)
    m = plan.simulate(max, data)
    m2 = [[0.0 if v == -math.inf else v for v in row] for row in m]
    e = [
        [math.exp(data[t][v] - m2[t][bmap[v]]) for v in range(own.values)]
        for t in range(own.threads)
    ]
    s = plan.simulate(operator.add, e)
    out = np.full(x.shape, np.nan)
    for t in range(own.threads):
        for v in range(own.values):
            st = s[t][bmap[v]]
            out[tuple(table[t, v])] = e[t][v] / st if st > 0 else 0.0
    return out


@pytest.mark.parametrize(
    "style,cols,vec,extra",
    [
        ("lane", 8, 4, {"rows_per_block": 32}),
        ("warp", 64, 8, {}),
        ("warp", 256, 4, {"threads_per_row": 64, "rows_per_block": 2}),
        ("mma", 64, 2, {"warps": 2}),
    ],
)
def test_reductions_derived_from_ownership_give_softmax(style, cols, vec, extra):
    cfg = make_config(style, cols, vec=vec, **extra)
    rng = np.random.default_rng(7)
    x = 3 * rng.standard_normal((cfg.block_rows, cfg.tile_cols))
    x[rng.random(x.shape) < 0.05] = -np.inf
    x[1] = -np.inf
    got = _simulate_softmax(cfg, x)
    np.testing.assert_allclose(got, reference(x), rtol=1e-12, atol=1e-300)
    assert (got[1] == 0).all()


# ---------------------------------------------------------------------------- arguments


def test_plan_launch_checks_and_chooses():
    x, out = arr((4096, 1024)), arr((4096, 1024), offset=1 << 30)
    cfg, v = plan_launch(out, x)
    assert cfg.style == "warp" and cfg.vec == 4 and v["ldx"] == 1024
    # a row stride that breaks 16-byte alignment: narrower vectors
    cfg, _ = plan_launch(arr((8, 1022), strides=(1023, 1)), arr((8, 1022)))
    assert cfg.vec == 1
    cfg, v = plan_launch(out, x, lengths=arr((4096,), tylo.i32))
    assert cfg.mask == "length" and v["aux"] is not None
    cfg, _ = plan_launch(out, x, mask=arr((4096, 1024), tylo.bool_))
    assert cfg.mask == "bool"
    cfg, _ = plan_launch(out, x, style="mma")
    assert cfg.style == "mma" and cfg.passes == 2


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda x, o: plan_launch(o, x, mask=arr((8, 17), tylo.bool_)), "mask has shape"),
        (lambda x, o: plan_launch(o, x, mask=arr((8, 16), tylo.f32)), "mask must be bool"),
        (lambda x, o: plan_launch(o, x, lengths=arr((7,), tylo.i32)), "one entry per row"),
        (lambda x, o: plan_launch(o, x, lengths=arr((8,), tylo.i64)), "int32"),
        (
            lambda x, o: plan_launch(
                o, x, mask=arr((8, 16), tylo.bool_), lengths=arr((8,), tylo.i32)
            ),
            "not both",
        ),
        (lambda x, o: plan_launch(o, arr((8, 16), tylo.f16)), "dtype f16"),
        (lambda x, o: plan_launch(arr((8, 16), tylo.f64), x), "out has dtype f64"),
        (lambda x, o: plan_launch(arr((8, 15)), x), "out has shape"),
        (lambda x, o: plan_launch(o, arr((2, 8, 16))), "must be 2-D"),
        (lambda x, o: plan_launch(o, arr((8, 16), strides=(1, 8))), "column stride 1"),
        (lambda x, o: plan_launch(o, np.ones((8, 16), np.float32)), "host memory"),
        (
            lambda x, o: plan_launch(arr((8, 15), offset=4096), arr((8, 15)), style="mma"),
            "even row length",
        ),
        (lambda x, o: plan_launch(x, x), "out and x share memory"),
        (lambda x, o: plan_launch(arr((8, 16), offset=64), x), "out and x share memory"),
        (
            lambda x, o: plan_launch(o, x, lengths=arr((8,), tylo.i32, offset=4096 + 32)),
            "out and lengths share memory",
        ),
        (
            lambda x, o: plan_launch(arr((8, 16), strides=(8, 1), offset=4096), x),
            "out .* has elements at one address",
        ),
        (lambda x, o: plan_launch(o, x, style="row"), "style must be one of"),
    ],
)
def test_plan_launch_typed_errors(call, match):
    with pytest.raises(SoftmaxError, match=match):
        call(arr((8, 16)), arr((8, 16), offset=4096))


@pytest.mark.parametrize(
    "call,match",
    [
        (
            lambda x, o: plan_launch(arr((8, 16), strides=(0, 1), offset=4096), x),
            "out has stride 0 on dimension 0",
        ),
        (
            lambda x, o: plan_launch(o, arr((8, 16), strides=(-16, 1), offset=1 << 20)),
            "x has stride -16 on dimension 0",
        ),
        (
            lambda x, o: plan_launch(o, x, mask=arr((8, 16), tylo.bool_, strides=(-16, 1))),
            "mask has stride -16 on dimension 0",
        ),
    ],
)
def test_plan_launch_refuses_zero_and_negative_strides(call, match):
    """The same refusal as every path of tylo.ops (tylo.ops.arrays.refuse_bad_strides):
    the row stride was once rewritten to 1 (max(stride, 1)), a wrong answer given silently."""
    from tylo.ops.args import OpArgumentError

    with pytest.raises(OpArgumentError, match=match):
        call(arr((8, 16)), arr((8, 16), offset=4096))


# ---------------------------------------------------------------------------- reference


def test_reference_rules():
    x = np.array([[1.0, 2.0, 3.0], [-np.inf, -np.inf, -np.inf], [0.0, -np.inf, 0.0]])
    r = reference(x)
    np.testing.assert_allclose(r[0], np.exp([1, 2, 3]) / np.exp([1, 2, 3]).sum())
    assert (r[1] == 0).all() and list(r[2]) == [0.5, 0.0, 0.5]
    mask = np.array([[True, False, True], [True, True, True], [False, False, False]])
    r = reference(x, mask=mask)
    assert r[0, 1] == 0 and (r[2] == 0).all()
    r = reference(x, lengths=np.array([1, 3, -1]))
    assert list(r[0]) == [1.0, 0.0, 0.0] and (r[2] == 0).all()
    assert not np.isnan(reference(np.full((2, 5), -np.inf))).any()


@pytest.mark.parametrize("cols,threads,rows", [(256, 64, 2), (8192, 256, 1), (1024, 1024, 1)])
def test_two_level_exchange_reduces_rows(cols, threads, rows):
    """The row reductions of the softmax kernels when warps share a row, as tylo's recipe
    runs them (ReductionPlan.simulate): shuffles within each warp, one partial per warp,
    one partial read per lane, log2(warps) shuffles over the partials; for the row
    fragment and for the online kernel's per-thread (maximum, sum) pairs."""
    cfg = make_config("warp", cols, vec=1, threads_per_row=threads, rows_per_block=rows)
    rng = np.random.default_rng(3)
    for own in (cfg.ownership, cfg.thread_ownership):
        x = rng.standard_normal(own.shape)
        table = own.table()
        data = [[x[tuple(table[t, v])] for v in range(own.values)] for t in range(own.threads)]
        plan = reduction_plan(own, 1)
        assert plan.warps == threads // 32 and plan.partials_per_lane == 1
        got_max = plan.simulate(max, data)
        got_sum = plan.simulate(operator.add, data)
        for t in range(own.threads):
            r = t // threads
            assert got_max[t][0] == x[r].max()
            assert got_sum[t][0] == pytest.approx(x[r].sum(), rel=1e-12, abs=1e-12)
