"""Ahead-of-time export (issue 35, item 5): ``tylo compile --export DIR`` writes a
specialization that another process launches from with no tracing, no libNVVM and no sympy.

The exporting process compiles (libNVVM, no GPU). The deploying process imports the
kernel from another path under another module name, with a private, empty local cache,
another toolchain stamp (a different ``CUDA_HOME``), and with ``cuda.pathfinder`` (which
loads libNVVM and nvJitLink) and sympy blocked from importing: it must find the kernel
(``kernel-hit``, no trace) through ``tylo.kernel.export.load(DIR)`` or
``TYLO_CACHE_DIR=DIR``. An edit to the kernel's
module is a miss, never the exported cubin. The GPU launch of an exported kernel is the
same launch path as any disk-cache hit (tests/gpu/test_cache_process.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tylo.kernel import export as X
from tylo.kernel import exportdirs as D

ROOT = Path(__file__).resolve().parents[2]

KERNEL = """
import tylo

SCALE = {scale}


@tylo.kernel
def scaled(c, a, n):
    tylo.assume(tylo.divisible(n, 4))
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    if i < n:
        c[i] = a[i] * SCALE
"""

DEPLOY = """
import json, sys
mode, where, export_dir = sys.argv[1], sys.argv[2], sys.argv[3]
if mode != "free":
    class _Block:
        def find_spec(self, name, path=None, target=None):
            if name in ("sympy", "cuda.pathfinder") or name.startswith("sympy."):
                raise ImportError(f"{name} is blocked in this deployment")
            return None
    sys.meta_path.insert(0, _Block())
sys.path.insert(0, where)
import tylo
if mode in ("load", "free"):
    from tylo.kernel.export import load
    load(export_dir)
import userk
k = userk.scaled.compile(tylo.pointer(tylo.f32), tylo.pointer(tylo.f32), tylo.Int(),
                         block=128, target="sm_90a")
from tylo.kernel.guards import compile_guards
ok = compile_guards(k.guards)
nvvm = sys.modules.get("tylo.backend.nvvm")
print(json.dumps({
    "cache": k.timings["cache"], "traces": userk.scaled.stats.traces,
    "sympy": "sympy" in sys.modules, "nvvm": nvvm is not None and nvvm._loaded is not None,
    "guard": [ok((None, None, n)) for n in range(9)], "ptx": k.ptx,
}))
"""


def _env(cache: Path) -> dict[str, str]:
    env = {**os.environ, "TYLO_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    for name in ("TYLO_CACHE", "TYLO_DEBUG_BOUNDS"):
        env.pop(name, None)
    return env


def export_cli(
    tmp: Path, *extra: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    args = [
        sys.executable, "-m", "tylo.cli", "compile", str(tmp / "src" / "userk.py") + ":scaled",
        "--arg", "c=ptr:f32", "--arg", "a=ptr:f32", "--arg", "n=int", "--block", "128",
        "--target", "sm_90a", "--emit", "resources", "--export", str(tmp / "exported"), *extra,
    ]  # fmt: skip
    return subprocess.run(
        args, capture_output=True, text=True, env=env or _env(tmp / "c1"), cwd=ROOT, timeout=600
    )


def deploy(tmp: Path, mode: str, cache: Path) -> dict:
    # another machine's toolchain: a libNVVM of another size changes the local keys' stamp
    fake = tmp / "other-cuda" / "nvvm" / "lib64"
    fake.mkdir(parents=True, exist_ok=True)
    (fake / "libnvvm.so").write_bytes(b"not a library")
    proc = subprocess.run(
        [sys.executable, "-c", DEPLOY, mode, str(tmp / "deploy"), str(tmp / "exported")],
        capture_output=True,
        text=True,
        env={**_env(cache), "CUDA_HOME": str(tmp / "other-cuda")},
        cwd=tmp,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture
def exported(tmp_path: Path) -> Path:
    for d in ("src", "deploy"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "userk.py").write_text(KERNEL.format(scale="3.0"))
    res = export_cli(tmp_path)
    assert res.returncode == 0, res.stderr
    assert "exported scaled to" in res.stderr
    return tmp_path


@pytest.mark.parametrize("mode", ["load", "env"])
def test_a_deployment_launches_exported_kernels_without_compiler_or_sympy(
    exported: Path, mode: str
) -> None:
    cache = exported / "c2" if mode == "load" else exported / "exported"
    out = deploy(exported, mode, cache)
    assert (out["cache"], out["traces"]) == ("kernel-hit", 0)
    assert out["sympy"] is False and out["nvvm"] is False
    assert out["guard"] == [n % 4 == 0 for n in range(9)]  # the guard, read back as data
    assert "mul.f32" in out["ptx"] or "mul.rn.f32" in out["ptx"]


def test_an_edited_kernel_is_not_served_the_exported_cubin(exported: Path) -> None:
    (exported / "deploy" / "userk.py").write_text(KERNEL.format(scale="5.0"))
    out = deploy(exported, "free", exported / "c3")  # compiler allowed: it must trace
    assert (out["cache"], out["traces"]) == ("miss", 1)
    assert "0f40A00000" in out["ptx"]  # 5.0, not the exported 3.0


def test_the_manifest_lists_what_was_exported(exported: Path) -> None:
    kernels = X.load(exported / "exported")
    assert [(k["kernel"], k["target"], k["block"]) for k in kernels] == [
        ("scaled", "sm_90a", [128, 1, 1])
    ]
    assert len(list((exported / "exported").rglob("*.tylo"))) == 1
    res = export_cli(exported)  # exporting again replaces the record, never duplicates it
    assert res.returncode == 0, res.stderr
    assert len(X.load(exported / "exported")) == 1


def test_refusals(tmp_path: Path) -> None:
    with pytest.raises(X.ExportError, match="no valid tylo-export.json"):
        X.load(tmp_path)
    for bad in ("", 7, True, None, b"bytes"):
        with pytest.raises(X.ExportError, match="expected a directory path"):
            X.load(bad)  # type: ignore[arg-type]
    (tmp_path / X.MANIFEST).write_text('{"format": "tylo-export-v1"}')  # no kernel list
    with pytest.raises(X.ExportError, match="no valid tylo-export.json"):
        X.load(tmp_path)
    (tmp_path / X.MANIFEST).unlink()
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "userk.py").write_text(KERNEL.format(scale="3.0"))
    off = export_cli(tmp_path, env={**_env(tmp_path / "c1"), "TYLO_CACHE": "0"})
    assert off.returncode == 1 and "not in the disk cache" in off.stderr
    assert not (tmp_path / "exported" / X.MANIFEST).exists()


NAMES = st.text(st.characters(codec="utf-8", exclude_characters="<>"), min_size=1, max_size=12)


@given(
    NAMES,
    NAMES,
    NAMES,
    st.dictionaries(NAMES, st.text(max_size=8), max_size=3),
    st.lists(st.tuples(st.lists(NAMES, min_size=1, max_size=3), st.booleans()), max_size=4),
)
@settings(max_examples=80, deadline=None)
def test_dependency_records_round_trip(module, file, other, files, values) -> None:  # type: ignore[no-untyped-def]
    """Renaming the kernel's module and file for export, then back, is the identity, and
    no other module or file is touched."""
    deps = {
        "files": {**files, file: "h"},
        "values": [[[module, "x"], False, "d"], *([list(n), b, "e"] for n, b in values)],
    }
    portable = D.portable_deps(deps, module, file)
    assert X.KERNEL_FILE in portable["files"] and file not in portable["files"]
    assert all(v[0][0] != module for v in portable["values"])
    assert D.local_deps(portable, module, file) == deps
    renamed = D.local_deps(portable, other, other + ".py")
    assert renamed["values"][0][0] == [other, "x"]
