"""A kernel that only views a swizzled shared tile (tylo.tile.views, no loads or stores from
tylo.tile.access) lowers the swizzle: its lowering is registered with the views."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CODE = """
import sys
import tylo
from tylo.layouts import Layout, Swizzle, composition
from tylo.tile.views import SharedTile

@tylo.kernel
def write_swizzled(a: tylo.Ptr(align=16)):
    tid = tylo.thread_idx.x
    swizzled = composition(Swizzle(3, 3, 3), Layout((8, 64), (64, 1)))
    t = SharedTile(tylo.shared(a.dtype, 512), swizzled)
    t.storage[t.offset((tid // 64, tid % 64))] = a[tid]
    a[tid] = t.storage[t.offset((tid % 8, tid // 8))]

k = write_swizzled.compile(tylo.pointer(tylo.bf16, align=16), block=512, target="sm_90a")
assert "xor.b32" in k.ptx, k.ptx
assert "tylo.tile.access" not in sys.modules
print("ok")
"""


def test_views_alone_lower_the_swizzle(tmp_path: Path) -> None:
    script = tmp_path / "views_only.py"  # kernels need a source file
    script.write_text(CODE)
    out = subprocess.run(
        [sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-2000:]
