"""The GEMM configurations that ``benchmarks/gemm_sweep.py`` times and ``benchmarks/gemm.py
--variant NAME`` runs: one table, below both scripts, so neither imports the other."""

from __future__ import annotations

from typing import Any

__all__ = ["variants"]


def variants() -> dict[str, Any]:
    """name -> GemmConfig (full tiles, 16-byte copies: the square benchmark shapes)."""
    import tylo
    from tylo.nvgpu.warp.mma import MMAAtom, TiledMMA
    from tylo.ops.gemm.kernel import gemm_config

    atom = MMAAtom((16, 8, 16), tylo.bf16)
    out = {}

    def add(name: str, warps: tuple, repeat: tuple, k: int, stages: int, **kw: Any) -> None:
        plan = TiledMMA(atom, warps, repeat, k)
        out[name] = gemm_config(plan, stages=stages, bounded=False, **kw)

    # the default plan, both epilogues; depth; the transposed tile; rasterization
    add("128x256x64 s4", (2, 4), (4, 8), 64, 4)
    add("128x256x64 s4 staged", (2, 4), (4, 8), 64, 4, epilogue="staged")
    add("128x256x64 s3 staged", (2, 4), (4, 8), 64, 3, epilogue="staged")
    add("256x128x64 s3 staged", (4, 2), (4, 8), 64, 3, epilogue="staged")
    add("256x128x64 s4 staged", (4, 2), (4, 8), 64, 4, epilogue="staged")
    add("128x256x64 s4 staged group 4", (2, 4), (4, 8), 64, 4, epilogue="staged", group_m=4)
    add("128x256x64 s4 staged group 16", (2, 4), (4, 8), 64, 4, epilogue="staged", group_m=16)
    # two blocks per SM overlap one block's epilogue with the other's main loop
    add("128x128x64 s3 (4 warps) staged", (2, 2), (4, 8), 64, 3, epilogue="staged")
    add("128x128x64 s3 (4 warps)", (2, 2), (4, 8), 64, 3)
    # the previous default, for the record; and one variant twice: the noise of the run
    add("128x256x32 s4 staged", (2, 4), (4, 8), 32, 4, epilogue="staged")
    add("128x256x64 s4 staged (again)", (2, 4), (4, 8), 64, 4, epilogue="staged")
    return out
