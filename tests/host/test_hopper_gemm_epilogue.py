"""The Hopper GEMM's TMA-store epilogue, host side (no GPU): which configurations exist and
what shared memory they take (every configuration enumerated), the C tensor map's box
against an independent model of what TMA reads with the 128-byte swizzle (every element of
every tile), the refusals of buffers whose boxes are not TMA's, and when D can be written
by TMA."""

from __future__ import annotations

import argparse
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tylo
from tylo.arrays import DeviceArray
from tylo.kernel.errors import TraceError
from tylo.layouts import ComposedLayout, Layout, Swizzle
from tylo.nvgpu.errors import PlanError
from tylo.nvgpu.tma import TMAError
from tylo.ops.gemm import hopper_host as host
from tylo.ops.gemm.hopper_kernel import HopperGemmConfig, hopper_gemm_kernel

LIMIT = 227 * 1024
DTYPES = {"f32": tylo.f32, "bf16": tylo.bf16, "f16": tylo.f16}


def _expected_bytes(bn, m_atoms, stages, pingpong, out, tma_store, nbytes_in=2):
    """Shared bytes from the kernel's description: per stage an X tile of bm x 64 and a Y
    tile of bn x 64 (bm = 64 m_atoms rows per consumer, both consumers unless ping-pong),
    then, with the TMA store, one 64 m_atoms x bn output tile per consumer (2 of them)."""
    bm = 64 * m_atoms * (1 if pingpong else 2)
    ring = stages * (bm + bn) * 64 * nbytes_in
    return ring + (2 * 64 * m_atoms * bn * DTYPES[out].nbytes if tma_store else 0)


def test_every_configuration_is_accounted_and_refused_exactly_when_it_does_not_fit():
    built = refused = 0
    for bn, m_atoms, stages, pingpong, out, tma_store, dtype, cluster in itertools.product(
        (64, 128, 256), (1, 2), range(2, 9), (False, True), DTYPES, (False, True),
        (tylo.bf16, tylo.f16), (1, 2),
    ):  # fmt: skip
        want = _expected_bytes(bn, m_atoms, stages, pingpong, out, tma_store)
        kw = dict(bn=bn, m_atoms=m_atoms, stages=stages, pingpong=pingpong, out=DTYPES[out],
                  tma_store=tma_store, dtype=dtype, cluster=cluster)  # fmt: skip
        if m_atoms * bn > 256:
            with pytest.raises(PlanError, match="registers per thread"):
                HopperGemmConfig(**kw)
        elif tma_store and out == "f32":
            with pytest.raises(PlanError, match="stmatrix, which stores 16-bit elements"):
                HopperGemmConfig(**kw)
        elif want > LIMIT:
            with pytest.raises(PlanError, match=f"{want} B of shared memory"):
                HopperGemmConfig(**kw)
            refused += 1
        else:
            cfg = HopperGemmConfig(**kw)
            assert cfg.shared_bytes() == want
            assert cfg.epilogue_bytes() == (want - cfg.ring_bytes())
            assert cfg.ring_bytes() % 1024 == 0  # the epilogue buffers start 1024-aligned
            assert ("TMA-store epilogue" in cfg.describe()) == tma_store
            built += 1
    assert built > 300 and refused > 50  # both sides of the limit are reached


def test_default_config_with_the_tma_store_fits_five_stages():
    cfg = HopperGemmConfig(bn=128, m_atoms=2, pingpong=True, stages=5, group=16, out=tylo.bf16,
                           tma_store=True)  # fmt: skip
    # 5 stages x 32 KiB + 2 consumers x 128x128 bf16: 224 KiB of the 227 (the 96 B of
    # barriers are static shared memory; tests/gpu/test_hopper_gemm.py checks the sum)
    assert cfg.shared_bytes() == 224 * 1024


@pytest.mark.parametrize("out", [tylo.f32, "bf16", None, 1])
def test_tma_store_needs_a_16_bit_output(out):
    with pytest.raises(PlanError):
        HopperGemmConfig(tma_store=True, out=out)


@pytest.mark.parametrize("flag", [1, "yes", None, 0.0])
def test_tma_store_must_be_a_bool(flag):
    with pytest.raises(PlanError, match="tma_store must be a bool"):
        HopperGemmConfig(tma_store=flag, out=tylo.bf16)


def _tma_box_byte(r, c, nbytes):
    """Where TMA reads element (r, c) of a box of 128-byte rows with the 128-byte swizzle
    (CUDA programming guide, "TMA swizzle"): the 16-byte chunk index inside the row is
    XORed with the row index modulo 8."""
    byte = c * nbytes
    return r * 128 + ((byte // 16) ^ (r % 8)) * 16 + byte % 16


TMA_CONFIGS = [
    dict(bn=bn, m_atoms=m, pingpong=p, stages=2, out=o, tma_store=True)
    for bn, m, p, o in itertools.product(
        (64, 128, 256), (1, 2), (False, True), (tylo.bf16, tylo.f16)
    )
    if m * bn <= 256
]  # fmt: skip


@pytest.mark.parametrize(
    "kw", TMA_CONFIGS, ids=lambda kw: f"{kw['bn']}-{kw['m_atoms']}-{kw['out']}"
)
def test_every_element_of_the_buffer_is_where_its_tma_box_reads_it(kw):
    cfg = HopperGemmConfig(**kw)
    plan = host.c_plan(cfg)
    rows = 64 * cfg.m_atoms
    assert plan.box == (rows, 64) and plan.swizzle == "128B" and plan.dtype is cfg.out
    lay, box = cfg.epilogue_layout(), plan.smem_layout
    nb = cfg.out.nbytes
    seen = set()
    for r, c in itertools.product(range(rows), range(cfg.bn)):
        b, cc = divmod(c, 64)
        want = b * rows * 64 * nb + _tma_box_byte(r, cc, nb)
        assert lay(r, c) * nb == want, (r, c)
        assert box(r, cc) * nb == want - b * cfg.box_elements * nb, (r, cc)
        seen.add(want)
    assert seen == set(range(0, rows * cfg.bn * nb, nb))  # the buffer, each element once


def test_no_c_plan_without_the_tma_store():
    assert host.c_plan(HopperGemmConfig()) is None


def _wrong_buffer(monkeypatch, layout_of):
    monkeypatch.setattr(HopperGemmConfig, "epilogue_layout", layout_of)
    cfg = HopperGemmConfig(bn=128, m_atoms=2, pingpong=True, out=tylo.bf16, tma_store=True)
    return host.c_plan.__wrapped__(cfg)  # not the cached plan of an equal config


def test_boxes_off_the_swizzle_period_are_refused(monkeypatch):
    # the second box 8 elements further on: the swizzle would act on it as on no TMA box
    lay = ComposedLayout(Swizzle(3, 3, 3), 0, Layout((128, (64, 2)), (64, (1, 128 * 64 + 8))))
    with pytest.raises(PlanError, match=r"puts its 64-column boxes at \[0, 8200\]"):
        _wrong_buffer(monkeypatch, lambda self: lay)
    got = {lay(r, 64 + c) - 128 * 64 for r in range(128) for c in range(64)}
    box = {lay(r, c) for r in range(128) for c in range(64)}
    assert got != box  # the refusal's claim: box 1 is not box 0 moved by its start


@pytest.mark.parametrize(
    "lay",
    [ComposedLayout(Swizzle(2, 3, 3), 0, Layout((128, (64, 2)), (64, (1, 8192)))),
     Layout((128, (64, 2)), (64, (1, 8192))),
     ComposedLayout(Swizzle(3, 3, 3), 0, Layout((128, (64, 2)), (1, (128, 8192))))],
    ids=["32B-swizzle", "unswizzled", "column-major"],
)  # fmt: skip
def test_boxes_tma_does_not_read_are_refused(monkeypatch, lay):
    with pytest.raises(TMAError, match="the box is written as"):
        _wrong_buffer(monkeypatch, lambda self: lay)
    box0 = [(lay(r, c), _tma_box_byte(r, c, 2) // 2) for r in range(128) for c in range(64)]
    assert any(a != b for a, b in box0)  # the refusal's claim, element by element


@settings(max_examples=200, deadline=None)
@given(
    out=st.sampled_from(sorted(DTYPES)), m=st.integers(1, 80), pad=st.integers(0, 20),
    ptr=st.integers(1, 128).map(lambda x: 2 * x),
)  # fmt: skip
def test_tma_store_is_taken_exactly_where_tma_can_write_d(out, m, pad, ptr):
    d = DeviceArray(ptr, (m + pad,), (1,), DTYPES[out], 0)
    nb = DTYPES[out].nbytes
    ldd = m + pad
    # two rows of C = D as (N, M) row-major: each starts 16-byte aligned and holds whole
    # 16-byte units (TMA moves those along the contiguous dimension)
    starts = [ptr + i * ldd * nb for i in range(2)]
    want = out != "f32" and all(s % 16 == 0 for s in starts) and (m * nb) % 16 == 0
    assert host.takes_tma_store(d, m, ldd) is want


def test_kernel_refuses_a_tensor_map_that_does_not_match_the_config():
    cfg = HopperGemmConfig(out=tylo.bf16, tma_store=True)
    px, py = host.plans(cfg)
    with pytest.raises(TraceError, match="tma_store=True takes a C tensor map") as err:
        hopper_gemm_kernel.compile(cfg.out, px, py, None, int, int, int, int, float, cfg,
                                   block=384, target="sm_90a")  # fmt: skip
    assert isinstance(err.value.original, PlanError)
    plain = HopperGemmConfig(out=tylo.bf16)
    with pytest.raises(TraceError, match="tma_store=False takes tc=None") as err:
        hopper_gemm_kernel.compile(cfg.out, px, py, host.c_plan(cfg), int, int, int, int, float,
                                   plain, block=384, target="sm_90a")  # fmt: skip
    assert isinstance(err.value.original, PlanError)


def test_run_flag_sets_the_config():
    from tylo.ops.gemm import hopper_cli as run

    p = argparse.ArgumentParser()
    run.add_arguments(p)
    cfg = run._config(p.parse_args(["64", "64", "64", "--tma-store", "--out-dtype", "f16"]))
    assert cfg.tma_store and cfg.out is tylo.f16
    # gemm()'s default: the TMA store (cooperative 128x256) for 16-bit D, ping-pong for f32
    c16 = run._config(p.parse_args(["64", "64", "1000", "--out-dtype", "f16"]))
    assert c16.tma_store and (c16.bm, c16.bn, c16.pingpong) == (128, 256, False)
    short = run._config(p.parse_args(["64", "64", "512", "--out-dtype", "f16"]))  # K <= SMALL_K
    assert short.tma_store and (short.bm, short.bn, short.pingpong) == (128, 128, True)
    c32 = run._config(p.parse_args(["64", "64", "64"]))
    assert not c32.tma_store and c32.pingpong and c32.m_atoms == 2
    pp = run._config(p.parse_args(["64", "64", "64", "--pingpong", "--out-dtype", "bf16"]))
    assert pp.pingpong and pp.tma_store and (pp.bm, pp.bn, pp.stages) == (128, 128, 5)
    with pytest.raises(SystemExit):  # one schedule or the other
        p.parse_args(["64", "64", "64", "--pingpong", "--cooperative"])
    with pytest.raises(PlanError, match="16-bit"):
        run._config(p.parse_args(["64", "64", "64", "--tma-store"]))  # D f32
