"""The resource report's register split of warp-specialized kernels (``setmaxnreg``):
parsed from PTX exactly, and printed by the examples' ``--compile-only``."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from tylo.backend.resources import register_split

ROOT = Path(__file__).resolve().parents[2]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["inc", "dec"]), st.integers(24, 256).map(lambda n: n // 8 * 8)),
        max_size=6,
    )
)
def test_split_counts_every_request(requests):
    ptx = "".join(
        f"  setmaxnreg.{op}.sync.aligned.u32 {n};\n mov.u32 %r1, 0;\n" for op, n in requests
    )
    line = register_split(ptx)
    if not requests:
        assert line is None
        return
    found = re.findall(r"(inc|dec) to (\d+) \((\d+) place", line)
    got = {(op, int(n)): int(c) for op, n, c in found}
    want: dict = {}
    for r in requests:
        want[r] = want.get(r, 0) + 1
    assert got == want
    ops = [op for op, _, _ in re.findall(r"(inc|dec) to (\d+) \((\d+) place", line)]
    assert ops == sorted(ops, key=lambda op: op != "dec")  # the givers first
    assert ("give registers" in line) == ({op for op, _ in requests} == {"dec", "inc"})


def test_kept_or_dropped_follows_the_sass():
    ptx = "setmaxnreg.dec.sync.aligned.u32 40;"
    assert register_split(ptx, sass="USETMAXREG.DEALLOC.CTAPOOL 0x28").endswith("kept in SASS")
    assert "dropped by the linker" in register_split(ptx, sass="HGMMA.64x128x16.F32.BF16")
    assert register_split("setmaxnreg_like.inc 40") is None


def test_hopper_gemm_compile_only_reports_the_split():
    out = subprocess.run(
        [sys.executable, "-m", "tylo.ops.gemm.hopper_cli", "64", "128", "64", "--compile-only"],
        check=False, cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "setmaxnreg: dec to 40 (1 place), inc to 232 (2 places)" in out.stdout
