# TEST_TARGET: cc>=9.0a
"""The warp-specialized Hopper GEMM (tylo/ops/gemm, the Hopper path): its SASS has wgmma, TMA loads
and
mbarrier operations and no local memory; on an H200 it matches float64 (poisoned output,
fresh random data) at every edge combination, with operands TMA cannot read routed to the
warp-MMA GEMM. The TMA-store epilogue likewise (stmatrix and TMA stores in the SASS; edges
clipped by TMA; D that TMA cannot write falls back to the register epilogue)."""

from __future__ import annotations

import warnings

import pytest

import tylo
from tylo.ops.gemm.hopper_host import SMALL_K, compile_hopper_gemm, default_config, verify
from tylo.ops.gemm.hopper_kernel import HopperGemmConfig

INTERPRET_SKIP = (  # the interpreter tier (tests/interp_tier.py)
    "sm_90a kernels (wgmma, TMA, mbarrier, setmaxnreg, clusters): the interpreter refuses "
    "these instructions by name (UnsupportedOperation; docs/interpret.md)"
)


@pytest.mark.parametrize("bn,m_atoms,out", [(128, 1, "f32"), (256, 1, "bf16"), (128, 2, "f16")])
def test_assembly(bn, m_atoms, out):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # nvJitLink may drop setmaxnreg here (it warns)
        k = compile_hopper_gemm(HopperGemmConfig(bn=bn, m_atoms=m_atoms, out=getattr(tylo, out)))
    # ptxas serializes every wgmma of a function it cannot pipeline (a subroutine call such
    # as a 64-bit division, a register conflict) and says so in the log: never here
    logs = " ".join(str(w.message) for w in caught)
    assert "C7509" not in logs and "serialized" not in logs, logs
    assert f"HGMMA.64x{bn}x16.F32.BF16" in k.sass
    assert "UTMALDG.2D" in k.sass and "SYNCS" in k.sass
    assert "LDL" not in k.sass and "STL" not in k.sass
    assert k.ptx.count("setmaxnreg") == 3  # the producer gives registers, both consumers take
    # one wgmma group stays in flight across k-tiles: the wait leaves one group pending
    assert "WARPGROUP.DEPBAR.LE gsb0, 0x1" in k.sass


@pytest.mark.parametrize(
    "shape",
    [
        (1, 1, 1),
        (65, 97, 73),
        (64, 128, 8),
        (129, 257, 64),
        (200, 300, 136),
        (1000, 1000, 1000),
        (130, 70, 4104),
    ],
    ids=str,
)
def test_matches_float64(gpu_runtime, shape):
    m, n, k = shape
    res = verify(m, n, k, alpha=0.5)
    assert res["path"] == ("hopper" if k % 8 == 0 else "hopper-packed")


def test_large_square_and_f16_and_wide_tiles(gpu_runtime):
    assert verify(4096, 4096, 4096)["path"] == "hopper"
    assert verify(333, 517, 264, dtype="f16")["path"] == "hopper"
    assert verify(300, 600, 256, cfg=HopperGemmConfig(bn=256))["path"] == "hopper"
    assert verify(513, 300, 192, cfg=HopperGemmConfig(m_atoms=2))["path"] == "hopper"


@pytest.mark.parametrize("out", ["f32", "bf16", "f16"])
@pytest.mark.parametrize(
    "shape", [(1, 1, 8), (200, 300, 136), (1000, 777, 520), (2048, 4096, 512)], ids=str
)
def test_outputs_relu_and_alpha(gpu_runtime, out, shape):
    m, n, k = shape
    res = verify(m, n, k, out=out, alpha=-0.75, relu=True)
    assert res["path"] == "hopper"


def test_more_tiles_than_sms_persistent(gpu_runtime):
    # 40 x 20 tiles of 128x256 over 132 CTAs: every CTA walks several tiles of the ring
    assert verify(5120, 5120, 320, out="bf16")["path"] == "hopper"
    # a raster band narrower than cfg.group at the bottom edge
    assert verify(1000, 3000, 64, cfg=HopperGemmConfig(group=3))["path"] == "hopper"


@pytest.mark.parametrize(
    "cfg",
    [{"bn": 128, "m_atoms": 2, "stages": 6}, {"bn": 256, "stages": 5}, {"bn": 128, "stages": 3}],
    ids=str,
)
@pytest.mark.parametrize("shape", [(1, 1, 8), (333, 1000, 136), (3000, 5000, 512)], ids=str)
def test_pingpong(gpu_runtime, cfg, shape):
    # each consumer takes every other tile; odd and even tile counts per CTA, edges
    res = verify(*shape, out="bf16", alpha=1.5, cfg=HopperGemmConfig(pingpong=True, **cfg))
    assert res["path"] == "hopper"


@pytest.mark.parametrize(
    "cfg",
    [
        {"bn": 128, "m_atoms": 2, "stages": 5, "pingpong": True},
        {"bn": 256, "stages": 4},
        {"bn": 128, "stages": 3, "pingpong": True},
    ],
    ids=str,
)
@pytest.mark.parametrize(
    "shape", [(1, 1, 8), (129, 1000, 136), (3000, 5000, 512), (1000, 700, 64)], ids=str
)
def test_two_cta_clusters_with_multicast(gpu_runtime, cfg, shape):
    # CTA pairs share the Y tile, each loading half of it for both; an odd number of tile
    # rows leaves the second CTA of the last pair wholly outside the matrix
    res = verify(*shape, out="bf16", alpha=0.5, cfg=HopperGemmConfig(cluster=2, **cfg))
    assert res["path"] == "hopper"


def test_cluster_assembly():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k = compile_hopper_gemm(HopperGemmConfig(bn=128, m_atoms=2, pingpong=True, cluster=2))
    assert "UTMALDG.2D.MULTICAST" in k.sass and "UCGABAR_ARV" in k.sass
    assert "WARPGROUP.DEPBAR.LE gsb0, 0x1" in k.sass
    # where setmaxnreg takes effect (whole-program ptxas) the producer has 56 registers
    assert "LDL" not in k.sass and "STL" not in k.sass
    assert "setmaxnreg.dec.sync.aligned.u32 56" in k.ptx


def test_unaligned_operands_are_packed(gpu_runtime):
    assert verify(4099, 4103, 4097, out="bf16")["path"] == "hopper-packed"
    assert verify(77, 5, 3, relu=True, alpha=2.0)["path"] == "hopper-packed"


def test_odd_leading_dimension_stores_elements(gpu_runtime):
    # M odd: D's leading dimension is odd, so no pair store is aligned; element stores run
    assert verify(333, 256, 64, out="bf16")["path"] == "hopper"


@pytest.mark.parametrize(
    "bad",
    [
        {"m_atoms": 2, "bn": 256},
        {"m_atoms": 3},
        {"bn": 96},
        {"out": tylo.i32},
        {"relu": 1},
        {"group": 0},
        {"stages": 1},
        {"dtype": tylo.f32},
        {"loads": None},
        {"cluster": 4},
        {"cluster": True},
        {"pingpong": "yes"},
    ],
)
def test_configs_that_do_not_fit_are_refused(bad):
    from tylo.nvgpu.errors import PlanError

    with pytest.raises(PlanError):
        HopperGemmConfig(**bad)


def test_cluster_grid_is_what_fits(gpu_runtime):
    # a persistent cluster grid never exceeds the clusters the device runs at once
    from tylo.ops.gemm.hopper_host import _resident_clusters, _sm_count

    cfg = HopperGemmConfig(bn=128, m_atoms=2, pingpong=True, stages=5, cluster=2)
    n = _resident_clusters(cfg, 0)
    assert 1 <= n <= _sm_count(0) // 2
    print(f"resident 2-CTA clusters: {n} of {_sm_count(0)} SMs")


# ---------------------------------------------------------------------------- TMA-store epilogue

# gemm()'s default for a 16-bit D: cooperative 128x256 tiles, 3 stages, the TMA store
TMA_STORE = {"bn": 256, "m_atoms": 1, "pingpong": False, "stages": 3, "group": 16}
PINGPONG = {"bn": 128, "m_atoms": 2, "pingpong": True, "stages": 5}  # the default for f32 D


def test_default_config_follows_d_and_k():
    coop = HopperGemmConfig(**TMA_STORE, out=tylo.bf16, tma_store=True)
    assert default_config(tma_store=True) == coop
    assert default_config(tma_store=True, k=SMALL_K + 1) == coop
    # short tiles: ping-pong, whose epilogue overlaps the other consumer's MMAs
    assert default_config(tma_store=True, k=SMALL_K) == HopperGemmConfig(
        **PINGPONG, group=16, out=tylo.bf16, tma_store=True)  # fmt: skip
    assert default_config(tma_store=False) == HopperGemmConfig(**PINGPONG, group=16)
    assert default_config(tma_store=False, k=10**6) == HopperGemmConfig(**PINGPONG, group=16)
    with pytest.raises(tylo.TyloError, match="tma_store must be a bool"):
        default_config(tma_store=1)
    for bad in (0, -1, 1.5, "512", True):
        with pytest.raises(tylo.TyloError, match="k must be a positive int"):
            default_config(k=bad)


@pytest.mark.parametrize(
    "shape, out",
    [((4096, 4096, 4096), "bf16"), ((1000, 777, 520), "f16"), ((136, 1000, 200), "bf16"),
     ((4096, 4096, 512), "f32"), ((2048, 3000, 512), "bf16")],
    ids=str,
)  # fmt: skip
def test_default_takes_the_tma_store_for_16_bit_d(gpu_runtime, shape, out):
    res = verify(*shape, out=out, alpha=0.5)
    want = default_config(tma_store=out != "f32", k=shape[2])
    assert res["path"] == "hopper"
    assert (res["cfg"].bn, res["cfg"].pingpong, res["cfg"].tma_store) == (
        want.bn, want.pingpong, want.tma_store)  # fmt: skip


def _tma_cfg(out="bf16", **kw):
    return HopperGemmConfig(**{**TMA_STORE, "out": getattr(tylo, out), "tma_store": True, **kw})


@pytest.mark.parametrize(
    "cfg", [{}, {**PINGPONG, "cluster": 2}], ids=["default", "pingpong-cluster2"]
)
def test_tma_store_assembly(cfg):
    c = _tma_cfg(**cfg)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # nvJitLink may drop setmaxnreg here (it warns)
        k = compile_hopper_gemm(c)
        plain = compile_hopper_gemm(HopperGemmConfig(**TMA_STORE, out=tylo.bf16))
    logs = " ".join(str(w.message) for w in caught)
    assert "C7509" not in logs and "C7519" not in logs and "serialized" not in logs, logs
    # stmatrix into the buffers, one TMA store per 64-column box, and the MMAs still keep
    # one wgmma group in flight
    assert "STSM.16.M88.4" in k.sass and "UTMASTG.2D" in k.sass
    assert "WARPGROUP.DEPBAR.LE gsb0, 0x1" in k.sass
    # the default's m64n256 wgmma (ping-pong: m64n128), fed by TMA through mbarriers
    assert f"HGMMA.64x{c.bn}x16.F32.BF16" in k.sass
    assert "UTMALDG.2D" in k.sass and "SYNCS" in k.sass
    assert "LDL" not in k.sass and "STL" not in k.sass
    # each consumer meets its 128 threads on a named barrier of its own
    assert "bar.sync 1, 128;" in k.ptx and "bar.sync 2, 128;" in k.ptx
    assert k.ptx.count("cp.async.bulk.wait_group.read 0;") == 2  # before reusing the buffer
    assert k.ptx.count("cp.async.bulk.wait_group 0;") == 2  # before the consumer leaves
    # the ring, both epilogue buffers and the barriers fit the 227 KiB of a block
    assert c.shared_bytes() + k.resources.shared_bytes <= 227 * 1024
    # the register epilogue has neither
    assert "UTMASTG" not in plain.sass and "STSM" not in plain.sass


@pytest.mark.parametrize("out", ["bf16", "f16"])
@pytest.mark.parametrize(
    "shape",
    [
        (1, 1, 1),
        (65, 97, 73),
        (300, 200, 136),
        (128, 128, 64),
        (200, 128, 64),
        (128, 300, 64),
        (200, 300, 136),
        (8, 1, 100),
        (1000, 777, 520),
        (4096, 4096, 512),
    ],
    ids=str,
)
def test_tma_store_matches_float64(gpu_runtime, out, shape):
    # edges in M (C's columns), in N (C's rows), K not a multiple of 64 (or of 8: packed);
    # many tiles per consumer (the buffer reused after its previous store read it)
    m, n, k = shape
    res = verify(m, n, k, out=out, alpha=-0.75, relu=True, cfg=_tma_cfg(out))
    assert res["path"] == ("hopper" if k % 8 == 0 else "hopper-packed")
    # D's rows (ldd = M) must be whole 16-byte units for TMA: else the register epilogue
    assert res["cfg"].tma_store == (m % 8 == 0)


@pytest.mark.parametrize(
    "cfg",
    [{"cluster": 2}, PINGPONG, {**PINGPONG, "cluster": 2}, {"bn": 128, "m_atoms": 2},
     {"bn": 128, "m_atoms": 1, "stages": 4}, {"bn": 256, "pingpong": True, "stages": 4}],
    ids=str,
)  # fmt: skip
@pytest.mark.parametrize("shape", [(8, 1, 8), (136, 1000, 136), (3000, 5000, 512)], ids=str)
def test_tma_store_clusters_and_tiles(gpu_runtime, cfg, shape):
    res = verify(*shape, out="bf16", alpha=0.5, cfg=_tma_cfg(**cfg))
    assert res["path"] == "hopper" and res["cfg"].tma_store


def _run_in(storage_cols, offset, m, n, k, out="bf16"):
    """D = A @ B into columns of a NaN-filled (N, storage_cols) buffer from element
    ``offset`` (ldd = storage_cols); returns (D as (M, N), the buffer, the config that ran)."""
    import numpy as np
    import torch

    from tylo.ops.gemm.hopper_host import _prepared, gemm

    odt = {"bf16": torch.bfloat16, "f16": torch.float16}[out]
    g = torch.Generator(device="cuda")
    g.manual_seed(m * 7 + n)
    a = torch.randn(m, k, device="cuda", generator=g).to(torch.bfloat16)
    b = torch.randn(n, k, device="cuda", generator=g).to(torch.bfloat16)
    buf = torch.full((n * storage_cols + offset,), float("nan"), device="cuda", dtype=odt)
    d = buf[offset:].view(n, storage_cols)
    cfg = _tma_cfg(out)
    gemm(d, a, b, m, n, k, k, k, storage_cols, cfg=cfg)
    torch.cuda.synchronize()
    want = a.double().cpu().numpy() @ b.double().cpu().numpy().T
    got = d[:, :m].double().cpu().numpy().T
    err = np.abs(got - want).max() / np.abs(want).max()
    assert err <= 1e-2, err
    ran = _prepared(d, a, b, m, n, k, k, k, storage_cols, False, cfg)[1][1]
    return buf.double().cpu().numpy(), ran


@pytest.mark.parametrize(
    "ldd_pad, offset, tma",
    [(8, 0, True), (1, 0, False), (8, 1, False), (0, 8, True)],
    ids=["padded", "odd-ldd", "misaligned-base", "aligned-offset"],
)
def test_tma_store_falls_back_where_tma_cannot_write_d(gpu_runtime, ldd_pad, offset, tma):
    import numpy as np

    m, n, k = 200, 300, 136
    ldd = m + ldd_pad
    flat, ran = _run_in(ldd, offset, m, n, k)
    assert ran.tma_store is tma
    # nothing but D is written: the padding of each row and the element before D stay NaN
    rows = flat[offset:].reshape(n, ldd)
    assert np.isnan(rows[:, m:]).all() and np.isnan(flat[:offset]).all()
    assert np.isfinite(rows[:, :m]).all()
