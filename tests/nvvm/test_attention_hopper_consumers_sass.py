"""Three consumer warpgroups (``HopperAttentionConfig(consumers=3)``: 512 threads, 192 query
rows) linked for sm_90a without a GPU.

- With this machine's linker (nvJitLink, which drops ``setmaxnreg``: every thread keeps the
  launch's 65536 / 512 = 128 registers): the 64-key tile at d = 64 fits there without
  spilling, its wgmma chains are issued back to back, and the 128-key tile, whose
  accumulators alone take 128 registers, spills there.
- With ptxas 13.0 (whole program, ``setmaxnreg`` kept: the consumers' 160 registers, as on
  the H200 machine), where ``/usr/local/cuda-13.0/bin/ptxas`` exists: the configurations
  docs/attention_hopper.md ("Three consumer warpgroups") lists as linking without spilling
  do so, with HGMMA and no wgmma serialization note.

``tests/gpu/test_attention_hopper_consumers.py`` runs the kernels."""

from __future__ import annotations

import re
import subprocess
from functools import cache
from pathlib import Path

import pytest
from attention_sass import SERIALIZATION_NOTES, assert_not_serialized, compile_quiet, live_lines

from tylo.backend.sass import disassemble
from tylo.ops.attention.hopper_kernel import HopperAttentionConfig

PTXAS = Path("/usr/local/cuda-13.0/bin/ptxas")
# the configurations compiled here, each once (both linkers' tests read the same PTX)
# (without the mask: with it the consumers' own key-tile bounds, own_tiles, take the
# registers of 12 bytes of spill at 128 per thread)
FITS_64 = dict(d=64, bn=64, stages=2, persistent=True, pingpong=True, overlap=True)
WIDE_64 = dict(d=64, bn=128, stages=4, causal=True, pingpong=True)
D128 = dict(d=128, bn=64, stages=3, overlap=True, persistent=True, split_kv=True,
            split_release=True)  # fmt: skip


@cache
def _kernel(kw: tuple) -> object:
    return compile_quiet(HopperAttentionConfig(consumers=3, **dict(kw)))


def _spill_free(sass: str) -> bool:
    live = live_lines(sass)
    return not re.search(r"\bLDL\b", live) and not re.search(r"\bSTL\b", live)


def test_the_64_key_tile_fits_the_launch_registers():
    cfg = HopperAttentionConfig(consumers=3, **FITS_64)
    k = _kernel(tuple(FITS_64.items()))
    assert k.resources.registers <= 65536 // cfg.threads == 128
    assert k.resources.spills is False, k.resources
    assert _spill_free(k.sass)
    hgmma = [line for line in live_lines(k.sass).splitlines() if "HGMMA" in line]
    assert hgmma and sum("gsb0" not in line for line in hgmma) >= len(hgmma) // 2
    assert_not_serialized(k)


def test_the_128_key_tile_needs_setmaxnreg():
    """Under nvJitLink, which says it drops ``setmaxnreg`` (C7504), the 128-key tile spills:
    its accumulators (S 64, O 32, P 32) take all 128 registers a thread has at launch."""
    k = _kernel(tuple(WIDE_64.items()))
    if "C7504" not in k.module.info_log:
        pytest.skip("the linker kept setmaxnreg (no C7504 in its log): the ptxas test covers it")
    assert k.resources.spills, k.resources


def _ptxas_sass(ptx: str, tmp: Path) -> tuple[str, str]:
    """Assemble ``ptx`` as the H200 machine does (ptxas 13.0, whole program); its PTX ISA is
    9.0, so the ``.version`` line says 9.0 (the kernels use nothing newer)."""
    src, out = tmp / "k.ptx", tmp / "k.cubin"
    src.write_text(re.sub(r"^\.version \d+\.\d+", ".version 9.0", ptx, flags=re.MULTILINE))
    proc = subprocess.run([str(PTXAS), "-arch=sm_90a", "-v", str(src), "-o", str(out)],
                          capture_output=True, text=True, check=False)  # fmt: skip
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log
    return disassemble(out.read_bytes()), log


# what ptxas 13.0 links without spilling at 32/160 registers (three of the docs' list): the
# persistent kernel on d = 64's 64-key tile, the one-item kernel on its 128-key tile (which
# nvJitLink spills), the persistent kernel on d = 128's 64-key tile
PTXAS_FITS = {"d64-bn64-persistent-pp-ov-causal": FITS_64, "d64-causal-pp": WIDE_64,
              "d128-persistent-ov-split-release": D128}  # fmt: skip


@pytest.mark.skipif(not PTXAS.exists(), reason=f"no {PTXAS} (the H200 machine's ptxas)")
@pytest.mark.parametrize("kw", list(PTXAS_FITS.values()), ids=list(PTXAS_FITS))
def test_ptxas_links_without_spilling(kw, tmp_path):
    cfg = HopperAttentionConfig(consumers=3, **kw)
    ptx = _kernel(tuple(kw.items())).ptx
    assert "setmaxnreg.inc.sync.aligned.u32 160;" in ptx
    sass, log = _ptxas_sass(ptx, tmp_path)
    assert "0 bytes spill stores, 0 bytes spill loads" in log, log
    assert _spill_free(sass)
    assert re.search(rf"HGMMA\.64x{cfg.bn}x16", sass) and re.search(rf"HGMMA\.64x{cfg.d}x16", sass)
    for note in SERIALIZATION_NOTES:
        assert note not in log, log
    assert "C7504" not in log  # setmaxnreg kept
