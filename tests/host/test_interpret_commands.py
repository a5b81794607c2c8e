"""With ``TYLO_INTERPRET=1`` the command lines of ``tylo.ops`` and of ``examples/`` run at the
shape given on a machine without a GPU and without torch, verify against their float64
references (fresh random data, outputs poisoned) and print the OK line a GPU run prints; the
Hopper paths refuse with the typed error naming the instruction.

Each command runs in a subprocess with no GPU visible (``CUDA_VISIBLE_DEVICES=""``) and
torch made unimportable (``sys.modules['torch'] = None``), whatever this machine has."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_NO_TORCH = (
    "import runpy, sys; sys.modules['torch'] = None; sys.argv = sys.argv[1:]; "
    "target = sys.argv[0]; "
    "runpy.run_module(target, run_name='__main__', alter_sys=True) if not target.endswith('.py') "
    "else runpy.run_path(target, run_name='__main__')"
)


def _run(args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    full = {
        **os.environ,
        "TYLO_INTERPRET": "1",
        "CUDA_VISIBLE_DEVICES": "",
        "PYTHONPATH": str(ROOT),
        **env,
    }
    full.pop("TYLO_INTERPRET_TARGET", None)
    full.update(env)
    return subprocess.run(
        [sys.executable, "-c", _NO_TORCH, *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        env=full,
        timeout=300,
    )


COMMANDS = {
    "gemm": (["tylo.ops.gemm", "65", "97", "73"], "gemm: OK: 65x97x73 bf16"),
    "softmax-mma-length": (
        ["tylo.ops.softmax", "33", "70", "--style", "mma", "--mask", "length"],
        "softmax: OK: 33x70 f32, mask length: mma",
    ),
    "softmax-warp-bool-bf16": (
        ["tylo.ops.softmax", "40", "300", "--mask", "bool", "--dtype", "bf16"],
        "softmax: OK: 40x300 bf16, mask bool",
    ),
    "softmax-lane": (
        ["tylo.ops.softmax", "9", "24", "--style", "lane"],
        "softmax: OK: 9x24 f32, mask none: lane",
    ),
    "attention-causal-kv-lens": (
        ["tylo.ops.attention", "2", "2", "17", "64", "--causal", "--kv-lens", "17,5"],
        "attention: OK: attention B=2 H=2 Lq=17 Lk=17 D=64 bf16 causal=True",
    ),
    "vector_add": (["examples/vector_add/run.py", "1000"], "vector_add: OK: n=1000"),
    "row_reduce": (["examples/row_reduce/run.py", "37", "300"], "row_reduce: OK"),
}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_command_runs_and_verifies_without_gpu_or_torch(name: str) -> None:
    args, ok = COMMANDS[name]
    r = _run(args)
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-2000:])
    line = next((x for x in r.stdout.splitlines() if ": OK: " in x), "")
    assert line.startswith(ok), r.stdout[-2000:]
    assert "no GPU found" not in r.stdout


def test_a_wrong_answer_fails_the_command(tmp_path: Path) -> None:
    """The verification is live: with the kernel's addition planted as a subtraction (in a
    copy of the example), the command exits 1 with FAILED, not OK."""
    pkg = tmp_path / "examples" / "vector_add"
    pkg.mkdir(parents=True)
    (tmp_path / "examples" / "__init__.py").write_text("")
    for f in ("__init__.py", "kernel.py", "run.py"):
        text = (ROOT / "examples" / "vector_add" / f).read_text()
        if f == "kernel.py":
            assert "a[i] + b[i]" in text
            text = text.replace("a[i] + b[i]", "a[i] - b[i]")
        (pkg / f).write_text(text)
    r = _run([str(pkg / "run.py"), "1000"], PYTHONPATH=f"{tmp_path}{os.pathsep}{ROOT}")
    assert r.returncode == 1 and "FAILED" in r.stderr and ": OK" not in r.stdout, r.stderr


def test_hopper_path_refuses_naming_the_instruction() -> None:
    r = _run(
        ["tylo.ops.attention", "1", "2", "130", "64", "--path", "hopper"],
        TYLO_INTERPRET_TARGET="sm_90a",
    )
    assert r.returncode == 1, r.stderr
    assert "UnsupportedOperation" in r.stderr and "cp.async.bulk.tensor" in r.stderr
