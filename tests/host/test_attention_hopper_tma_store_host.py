"""The TMA-store epilogue of the Hopper attention forward (``HopperAttentionConfig(
tma_store=True)``, tylo/ops/attention/hopper_epilogue.py) on the host: the staging layout is
exactly the consumer's rows of the Q buffer as TMA loaded them, the O plan's boxes read
exactly the staged blocks (brute force over every element), which ``out`` arrays TMA can
write (brute force over strides and addresses against the rule), and the typed refusals."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tylo
from tylo.arrays import DeviceArray
from tylo.nvgpu.errors import PlanError
from tylo.ops.attention.hopper_epilogue import check_o_map, staging_layout, staging_offset
from tylo.ops.attention.hopper_host import (
    choose_config,
    compile_hopper_attention,
    o_plan,
    plans,
    takes_tma_store,
)
from tylo.ops.attention.hopper_kernel import (
    BLOCK,
    THREADS,
    HopperAttentionConfig,
    block_layout,
    box_layout,
    hopper_attention_kernel,
)
from tylo.ops.attention.hopper_persistent import hopper_attention_persistent_kernel

CONFIGS = [
    HopperAttentionConfig(d=d, dtype=dtype, persistent=p, tma_store=True, bn=64, stages=2)
    for d in (64, 128) for dtype in (tylo.bf16, tylo.f16) for p in (False, True)
]  # fmt: skip


# the element offsets are the same for bf16 and f16 (both 2 bytes): each d and schedule once,
# the dtypes alternating
@pytest.mark.parametrize(
    "cfg", [CONFIGS[i] for i in (0, 3, 5, 6)], ids=lambda c: f"d{c.d}-{c.dtype}-p{c.persistent}"
)
def test_staging_is_the_consumers_rows_of_the_q_buffer(cfg):
    """Every element (row r, column x) a consumer stages lands where Q's TMA box put the
    consumer's row ``64 c + r``, column ``x``: in the buffer's block ``x // 64``, whose
    layout is the (bm, 64) swizzled block; and the two consumers' staging never overlaps."""
    stage = staging_layout(cfg)
    q_block = block_layout(cfg.bm, cfg.dtype)
    for qbase in (0, cfg.q_elements()):  # the persistent kernel's second buffer too
        seen = set()
        for c in (0, 1):
            at = staging_offset(qbase, c)
            for r in range(64):
                for x in range(cfg.d):
                    j, xx = divmod(x, BLOCK)
                    want = qbase + j * cfg.bm * BLOCK + q_block((64 * c + r, xx))
                    got = at + stage((r, x))
                    assert got == want, (c, r, x)
                    seen.add(got)
        assert len(seen) == 2 * 64 * cfg.d  # a bijection onto the buffer's elements
        assert seen == set(range(qbase, qbase + cfg.q_elements()))
        # and the wgmma's view of the consumer's rows (key_loop's qs[j]) is the same bytes
        for c in (0, 1):
            for j in range(cfg.blocks):
                qs = block_layout(64, cfg.dtype)
                for r in range(0, 64, 7):
                    for xx in range(BLOCK):
                        assert staging_offset(qbase, c) + stage(
                            (r, BLOCK * j + xx)
                        ) == qbase + j * cfg.bm * BLOCK + 64 * BLOCK * c + qs((r, xx))


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: f"d{c.d}-{c.dtype}-p{c.persistent}")
def test_o_plan_boxes_read_exactly_the_staged_blocks(cfg):
    """The TMA store of block j (from ``staging_offset + j * bm * 64``, in the plan's box
    layout, coordinates (r, 0, 0, x)) reads the element the consumer staged at (r, 64 j + x):
    brute force over every element."""
    p = o_plan(cfg)
    assert p.box == (64, 1, 1, BLOCK) and p.smem_layout == box_layout(64, cfg.dtype)
    assert p.dtype is cfg.dtype and p.swizzle == "128B"
    assert p.global_layout.shape[3] == cfg.d  # modes L, H, B, D as Q's
    assert [str(s) for s in p.global_layout.stride] == [
        str(s) for s in plans(cfg)[0].global_layout.stride
    ]
    stage = staging_layout(cfg)
    for j in range(cfg.blocks):
        for r in range(64):
            for x in range(BLOCK):
                assert j * cfg.bm * BLOCK + p.smem_layout((r, 0, 0, x)) == stage((r, BLOCK * j + x))


def test_no_o_plan_without_tma_store():
    assert o_plan(HopperAttentionConfig(d=64, stages=2)) is None


@pytest.mark.parametrize("bad", [1, 0, "yes", None, 1.0])
def test_tma_store_must_be_a_bool(bad):
    with pytest.raises(PlanError, match="tma_store must be a bool"):
        HopperAttentionConfig(d=64, stages=2, tma_store=bad)


def test_choose_config_takes_the_measured_epilogue_by_default():
    from tylo.ops.attention.hopper_host import (
        SCHEDULES,
        THREE_CONSUMER_SCHEDULES,
        Schedule,
        long_keys,
    )

    for d in (64, 128):
        for causal in (False, True):
            edge = long_keys(d, causal)
            for lk, long in ((None, False), (0, False), (edge, False), (edge + 1, True)):
                cfg = choose_config(d, tylo.bf16, causal, lk=lk)
                got = Schedule(pingpong=cfg.pingpong, overlap=cfg.overlap,
                               tma_store=cfg.tma_store, persistent=cfg.persistent,
                               split_release=cfg.split_release)  # fmt: skip
                # three consumers where the link fits them (the H200's ptxas), else two
                table = THREE_CONSUMER_SCHEDULES if cfg.consumers == 3 else SCHEDULES
                assert got == table[(d, causal, long)]
                assert cfg.split_kv == cfg.split_release  # split_release needs its barriers
            assert choose_config(d, tylo.bf16, causal, tma_store=False).tma_store is False
    assert choose_config(128, tylo.bf16, False).tma_store  # measured faster: on
    assert choose_config(64, tylo.bf16, False).tma_store  # with the persistent kernel: on
    assert not choose_config(64, tylo.bf16, True, lk=16384).persistent  # measured slower
    cfg = choose_config(64, tylo.bf16, False, tma_store=True, persistent=True)
    assert cfg.tma_store and cfg.persistent and "TMA-store" in cfg.describe()
    assert "TMA-store" not in choose_config(64, tylo.bf16, False, tma_store=False).describe()


@pytest.mark.parametrize("bad", [-1, 1.0, True, "4096", 2**64 * 1.0])
def test_choose_config_refuses_a_bad_key_length(bad):
    with pytest.raises(PlanError, match="lk must be an int >= 0"):
        choose_config(64, tylo.bf16, False, lk=bad)


def test_kernels_refuse_a_missing_or_unexpected_o_map():
    """Each kernel takes an O tensor map exactly with tma_store (typed, says which)."""
    common = (tylo.i32, int, int, int, int, int, int, int, float)
    for persistent, kern in (
        (False, hopper_attention_kernel),
        (True, hopper_attention_persistent_kernel),
    ):
        extra = (int, int) if persistent else ()
        on = HopperAttentionConfig(d=64, stages=2, persistent=persistent, tma_store=True)
        off = HopperAttentionConfig(d=64, stages=2, persistent=persistent)
        with pytest.raises(tylo.TyloError, match="tma_store=True takes the O tensor map"):
            kern.compile(
                on.dtype,
                tylo.f32,
                *plans(on),
                None,
                *common,
                *extra,
                on,
                block=THREADS,
                target="sm_90a",
            )
        with pytest.raises(tylo.TyloError, match="tma_store=False takes to=None"):
            kern.compile(
                off.dtype,
                tylo.f32,
                *plans(off),
                o_plan(on),
                *common,
                *extra,
                off,
                block=THREADS,
                target="sm_90a",
            )


def test_check_o_map_refuses_another_box():
    cfg = HopperAttentionConfig(d=64, stages=2, tma_store=True)

    class _Map:  # a map whose plan is Q's (128-row boxes), not O's
        plan = plans(cfg)[0]

    with pytest.raises(PlanError, match=r"box is \(128, 1, 1, 64\)"):
        check_o_map(cfg, _Map(), "k")
    check_o_map(cfg, type("M", (), {"plan": o_plan(cfg)})(), "k")  # O's own: taken


def _out(shape, strides, ptr, dtype=tylo.bf16):
    return DeviceArray(ptr, tuple(shape), tuple(strides), dtype, 0)


@settings(max_examples=150, deadline=None)
@given(
    shape=st.tuples(
        st.integers(1, 4), st.integers(1, 4), st.integers(1, 300), st.sampled_from([64, 128])
    ),
    steps=st.tuples(st.integers(-3, 40000), st.integers(-3, 40000), st.integers(-3, 300)),
    ptr=st.integers(0, 2**40).map(lambda p: p * 2),
    inner=st.sampled_from([1, 1, 1, 2]),
)
def test_takes_tma_store_is_the_tma_rule(shape, steps, ptr, inner):
    """``takes_tma_store`` agrees with the rule checked element by element: the last
    dimension contiguous, each stride of a mode of extent > 1 a positive multiple of 16
    bytes, a 16-byte aligned base."""
    out = _out(shape, (*steps, inner), ptr)
    want = (
        inner == 1
        and ptr % 16 == 0
        and all(ext == 1 or (s > 0 and s * 2 % 16 == 0) for ext, s in zip(shape[:3], steps))
    )
    assert takes_tma_store(out) is want


def test_compiles_without_a_gpu():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nvJitLink may drop setmaxnreg here (it warns)
        k = compile_hopper_attention(CONFIGS[0])
    assert "cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group" in k.ptx
    assert "stmatrix" in k.ptx
