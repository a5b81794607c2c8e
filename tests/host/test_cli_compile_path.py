"""``tylo compile`` run in-process leaves the standard library first on ``sys.path``: the
kernel file's directory goes after everything else, so a file there named like a standard
module (random.py) never shadows it for the rest of the process (a spawned child inherits
the path and once imported such a file in place of the standard module)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

KERNEL = textwrap.dedent(
    """
    import tylo

    @tylo.kernel
    def copy(out, a, n):
        i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
        if i < n:
            out[i] = a[i]
    """
)


def test_a_kernel_directory_never_shadows_the_standard_library(tmp_path):
    (tmp_path / "kern.py").write_text(KERNEL)
    (tmp_path / "random.py").write_text("raise RuntimeError('the user file shadowed random')\n")
    probe = textwrap.dedent(
        f"""
        import sys
        from tylo.cli import main
        rc = main(["compile", {str(tmp_path / "kern.py")!r} + ":copy", "--arg", "out=ptr:f32",
                   "--arg", "a=ptr:f32", "--arg", "n=int", "--block", "128",
                   "--target", "sm_80", "--emit", "ptx", "-o", {str(tmp_path / "k.ptx")!r}])
        sys.modules.pop("random", None)
        import random  # the standard module, not the kernel directory's random.py
        assert sys.path[-1] == {str(tmp_path)!r}, sys.path[-3:]
        print(rc, random.__file__)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
        check=False,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    rc, where = r.stdout.split()
    assert rc == "0" and not where.startswith(str(tmp_path))
