# TEST_TARGET: cc>=9.0a
"""Warp specialization primitives alone: ``elect.sync`` picks exactly one lane per warp,
``setmaxnreg`` moves registers between warpgroups (the kernel still computes the right
answer after the producer gave registers up and the consumers took them), and warpgroup
indices partition the block."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import tylo
from tylo.nvgpu.warpgroup.roles import elect_one, set_max_registers, warpgroup_idx

INTERPRET_SKIP = (  # the interpreter tier (tests/interp_tier.py)
    "sm_90a kernels (wgmma, TMA, mbarrier, setmaxnreg, clusters): the interpreter refuses "
    "these instructions by name (UnsupportedOperation; docs/interpret.md)"
)


@tylo.kernel
def roles(elected, group, out, x: tylo.Ptr(align=16)):
    tid = tylo.thread_idx.x
    group[tid] = tylo.value(warpgroup_idx(), tylo.i32)
    elected[tid] = tylo.where(elect_one(), 1, 0).to(tylo.i32)
    if warpgroup_idx() == 0:
        set_max_registers(40, increase=False)
    else:
        set_max_registers(232, increase=True)
        out[tid - 128] = x[tid - 128] * 2.0


def _compile(target="sm_90a"):
    return roles.compile(
        tylo.i32, tylo.i32, tylo.f32, tylo.pointer(tylo.f32, align=16), block=256, target=target
    )


def _compile_watching():
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        k = _compile()
    return k, any("setmaxnreg" in str(w.message) for w in seen)


def test_assembly():
    k, dropped = _compile_watching()
    assert "elect.sync" in k.ptx and "ELECT" in k.sass
    assert "setmaxnreg.dec.sync.aligned.u32 40;" in k.ptx
    assert "setmaxnreg.inc.sync.aligned.u32 232;" in k.ptx
    assert ".minnctapersm 1" in k.ptx  # the entry register count ptxas needs
    # never silent: the assembler keeps setmaxnreg, or the compile warned that it did not
    assert dropped or k.sass.count("USETMAXREG") == 2, k.module.info_log


def test_setmaxnreg_needs_sm90a():
    with pytest.raises(tylo.TyloError, match="sm_90a"):
        _compile(target="sm_90")


@pytest.mark.parametrize("count", [16, 260, 44, 40.0])
def test_register_counts_are_checked(count):
    @tylo.kernel
    def bad(out):
        set_max_registers(count, increase=True)
        out[0] = 1.0

    with pytest.raises(tylo.TyloError, match="multiple of 8"):
        bad.compile(tylo.f32, block=128, target="sm_90a")


def test_roles_on_the_gpu(gpu_runtime):
    import torch

    k, dropped = _compile_watching()
    assert not dropped and k.sass.count("USETMAXREG") == 2, k.module.info_log
    x = torch.randn(128, device="cuda")
    out = torch.full_like(x, float("nan"))
    elected = torch.full((256,), -1, dtype=torch.int32, device="cuda")
    group = torch.full((256,), -1, dtype=torch.int32, device="cuda")
    roles[1, 256](elected, group, out, x)
    torch.cuda.synchronize()
    e = elected.cpu().numpy().reshape(8, 32)
    assert (e.sum(axis=1) == 1).all() and set(np.unique(e)) == {0, 1}
    assert (group.cpu().numpy() == np.arange(256) // 128).all()
    np.testing.assert_array_equal(out.cpu().numpy(), (x * 2).cpu().numpy())
