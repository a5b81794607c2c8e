"""The GEMM's host planning (tylo/ops/gemm): configurations, proofs, typed rejections, and
the grouped rasterization visiting every tile exactly once."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import tylo
from tylo.nvgpu.warp.mma import MMAAtom, PlanError, TiledMMA
from tylo.ops.gemm.host import choose_config
from tylo.ops.gemm.kernel import DEFAULT_PLAN, SMALL_PLAN, gemm_config


def test_seed_config_proofs():
    cfg = gemm_config(SMALL_PLAN, stages=2)
    assert cfg.tile == (64, 64, 32) and cfg.shared_bytes == 16384
    statuses = {k: getattr(v, "status", v) for k, v in cfg.proofs.items()}
    assert statuses["A ldmatrix bank conflicts"] == 0
    assert statuses["B ldmatrix bank conflicts"] == 0
    assert all(s in ("proved", 0) for s in statuses.values()), statuses
    assert any("source vectors aligned" in k for k in statuses)
    plain = gemm_config(SMALL_PLAN, stages=2, swizzle=False)
    assert plain.proofs["A ldmatrix bank conflicts"] == 3


def test_configs_are_static_arguments():
    a = gemm_config(DEFAULT_PLAN, stages=4)
    b = gemm_config(DEFAULT_PLAN, stages=4)
    assert a == b and hash(a) == hash(b)
    assert gemm_config(DEFAULT_PLAN, stages=3) != a


def test_config_errors():
    with pytest.raises(PlanError, match="stages"):
        gemm_config(DEFAULT_PLAN, stages=0)
    with pytest.raises(PlanError, match="227 KiB"):
        gemm_config(DEFAULT_PLAN, stages=10)


def test_choose_config():
    full = choose_config(4096, 4096, 4096, 4096, 4096)
    assert not full.bounded and full.plan == DEFAULT_PLAN and full.epilogue == "staged"
    assert choose_config(4096, 4096, 4096, 4096, 4096, ldd=4098).epilogue == "direct"
    assert choose_config(4096, 4096, 4096, 4096, 4096, d_aligned=False).epilogue == "direct"
    c = choose_config(4099, 4103, 4097, 4104, 4104)
    assert c.bounded and c.vector and c.plan == DEFAULT_PLAN
    u = choose_config(65, 97, 73, 73, 73)
    assert u.bounded and not u.vector and u.plan == SMALL_PLAN
    f16 = TiledMMA(MMAAtom((16, 8, 16), tylo.f16), (2, 2), (2, 4), 32)
    assert choose_config(64, 64, 64, 64, 64, plan=f16).dtype is tylo.f16


@pytest.mark.parametrize("group_m", [1, 3, 8])
@pytest.mark.parametrize(
    ("m", "n"), [(128, 256), (1000, 1), (4099, 4103), (8192, 8192), (3 * 128, 7 * 256)]
)
def test_rasterization_is_a_bijection(group_m, m, n):
    cfg = gemm_config(DEFAULT_PLAN, stages=3, group_m=group_m)
    grid = cfg.grid(m, n)
    bm, bn, _ = cfg.tile
    seen = set()
    for pid in range(grid):
        tm, tn = (int(x) for x in cfg.tile_coords(pid, m, n))
        assert 0 <= tm * bm < m and 0 <= tn * bn < n
        seen.add((tm, tn))
    assert len(seen) == grid


def test_staged_store_plan():
    from tylo.ops.gemm.epilogue import StagedStore

    st = StagedStore(DEFAULT_PLAN)
    statuses = {k: getattr(v, "status", v) for k, v in st.proofs.items()}
    assert all(x in ("proved", 0) for x in statuses.values()), statuses
    assert st.shared_bytes == (128 + 4) * 256 * 4
    assert StagedStore(DEFAULT_PLAN, pad=0).write_conflicts() == 3  # 4 columns, one bank set
    with pytest.raises(PlanError, match="multiples of 4"):
        StagedStore(DEFAULT_PLAN, pad=2)
    cfg = gemm_config(DEFAULT_PLAN, stages=2, epilogue="staged")
    assert cfg.shared_bytes == st.shared_bytes > cfg.pipeline_bytes  # the larger of the two
    assert any(k.startswith("epilogue global stores") for k in cfg.proofs)
    with pytest.raises(PlanError, match="epilogue"):
        gemm_config(DEFAULT_PLAN, epilogue="fast")


@pytest.mark.parametrize(
    "name", ["tylo.ops.gemm.epilogue", "tylo.ops.gemm.host", "tylo.ops.gemm.pack"]
)
def test_module_doctests_and_all(name):
    import doctest
    import importlib

    mod = importlib.import_module(name)
    assert doctest.testmod(mod, optionflags=doctest.ELLIPSIS).failed == 0
    assert list(mod.__all__) == sorted(mod.__all__, key=lambda n: (not n.isupper(), n))
    assert all(hasattr(mod, n) for n in mod.__all__)


def test_packed_leading_dimension():
    from tylo.ops.gemm.pack import packed_ld

    assert [packed_ld(k) for k in (1, 8, 9, 4097)] == [8, 8, 16, 4104]


def test_choose_config_plans_each_configuration_once():
    # gemm() calls choose_config on every launch: planning (which proves the layouts)
    # must not run again for a configuration already planned.
    from tylo.ops.gemm.host import choose_config

    first = choose_config(4099, 4103, 4097, 4104, 4104, ldd=4099)
    assert choose_config(4099, 4103, 4097, 4104, 4104, ldd=4099) is first
