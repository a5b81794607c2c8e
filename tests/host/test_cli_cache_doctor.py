"""``tylo cache info|clear`` against a cache filled through tylo.backend.cache itself, and
``tylo doctor`` on this machine (whatever it has: every line agrees with an independent
probe) and with parts hidden or a GPU faked, so every branch prints what it promises."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tylo.backend.cache import CacheEntry, DiskCache
from tylo.cli import EXIT_OK, EXIT_UNAVAILABLE, EXIT_USAGE, main

ROOT = Path(__file__).resolve().parents[2]


def cli(
    *args: str, env: dict[str, str] | None = None, pre: str = ""
) -> subprocess.CompletedProcess:
    code = (
        f"{pre}\nimport sys, runpy\nsys.argv = ['tylo', *sys.argv[1:]]\n"
        "runpy.run_module('tylo.cli', run_name='__main__')"
    )
    cmd = [sys.executable, "-c", code, *args] if pre else [sys.executable, "-m", "tylo.cli", *args]
    full = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run(cmd, capture_output=True, text=True, env=full, timeout=120, check=False)


def fill(directory: Path, n: int) -> int:
    """Put ``n`` entries of different sizes; returns their total bytes on disk."""
    cache = DiskCache(directory)
    for i in range(n):
        assert cache.put(f"{i:064x}", CacheEntry("ptx" * (i + 1), bytes(10 * i), "log"))
    return sum(p.stat().st_size for p in directory.rglob("*.tylo"))


def info(out: str) -> dict[str, str]:
    return {k: v.strip() for k, _, v in (ln.partition(" ") for ln in out.splitlines()) if k}


def test_cache_info_and_clear_subprocess(tmp_path: Path) -> None:
    d = tmp_path / "c"
    env = {"TYLO_CACHE_DIR": str(d)}
    r = cli("cache", "info", env=env)
    assert r.returncode == EXIT_OK and info(r.stdout)["directory"] == f"{d} (not created yet)"
    total = fill(d, 5)
    r = cli("cache", "info", env=env)
    got = info(r.stdout)
    assert r.returncode == EXIT_OK and got["directory"] == str(d) and got["entries"] == "5"
    assert got["enabled"] == "yes"
    assert got["size"] == (f"{total} B" if total < 1024 else f"{total / 1024:.1f} KiB")
    r = cli("cache", "clear", env=env)
    assert r.returncode == EXIT_OK and r.stdout.strip() == f"removed 5 entries from {d}"
    assert not list(d.rglob("*.tylo"))
    r = cli("cache", "info", env={**env, "TYLO_CACHE": "0"})
    assert info(r.stdout)["entries"] == "0" and info(r.stdout)["enabled"] == "no (TYLO_CACHE=0)"


def test_cache_summary_counts_per_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tylo.cli.cache_cmd import cache_location, cache_summary

    monkeypatch.setenv("TYLO_CACHE_DIR", str(tmp_path))
    assert cache_location() == tmp_path
    total = fill(tmp_path, 3)
    other = tmp_path / "v0" / "ab" / ("ab" * 32 + ".tylo")
    other.parent.mkdir(parents=True)
    other.write_bytes(b"x" * 1000)
    from tylo.backend.cache import FORMAT_VERSION

    current = f"v{FORMAT_VERSION}"  # where fill() put its entries
    (tmp_path / current / "junk.txt").write_text("not an entry")
    s = cache_summary(tmp_path)
    assert s["entries"] == 4 and s["bytes"] == total + 1000
    assert s["versions"]["v0"] == {"entries": 1, "bytes": 1000}
    assert main(["cache", "info"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "v0: 1 entries, 1000 B" in out and f"{current}: 3 entries" in out
    with pytest.raises(SystemExit) as exc:  # argparse's usage errors exit, with 64
        main(["cache", "frobnicate"])
    assert exc.value.code == EXIT_USAGE


def doctor_lines(out: str) -> dict[str, list[str]]:
    """component -> [status, text...] for each check line (and its follow-up lines)."""
    found: dict[str, list[str]] = {}
    last = None
    for line in out.splitlines()[1:]:
        if line.startswith(("compiling:", "launching:")):
            break
        if line.startswith(" "):
            found[last].append(line.strip())
        else:
            last = line[:10].strip()
            found[last] = [line[11:].strip()]
    return found


def test_doctor_here_agrees_with_independent_probes() -> None:
    from tylo.backend.driver import driver_version
    from tylo.backend.link import find_ptxas
    from tylo.backend.sass import find_nvdisasm

    r = cli("doctor")
    lines = doctor_lines(r.stdout)
    assert {"driver", "libNVVM", "nvJitLink", "ptxas", "nvdisasm"} <= set(lines)
    if driver_version() is None:
        assert lines["driver"][0].startswith("missing  no driver/GPU")
        assert any("driver that supports CUDA 13" in x for x in lines["driver"][1:])
        assert "launching: not possible here (no driver/GPU)" in r.stdout
    else:
        assert lines["driver"][0].startswith("ok       CUDA ")
    for name, path in (("ptxas", find_ptxas()), ("nvdisasm", find_nvdisasm())):
        if path:
            assert lines[name][1] == f"at       {path}"
        else:
            assert lines[name][1].startswith("install  pip install")
    ok = lines["libNVVM"][0].startswith("ok") and (
        lines["nvJitLink"][0].startswith("ok") or lines["ptxas"][0].startswith("ok")
    )
    assert r.returncode == (EXIT_OK if ok else EXIT_UNAVAILABLE), r.stdout
    r = cli("doctor", "--json")
    data = json.loads(r.stdout)
    assert data["can_compile"] == ok and {c["name"] for c in data["checks"]} >= set(lines) - {"gpu"}


def test_doctor_names_the_install_command_for_what_is_hidden() -> None:
    hide = (
        "import sys\nsys.modules['cuda.bindings.nvvm'] = None\n"
        "sys.modules['cuda.bindings.nvjitlink'] = None"
    )
    r = cli("doctor", pre=hide + "\nimport tylo.backend.link as l\nl.find_ptxas = lambda: None")
    lines = doctor_lines(r.stdout)
    assert r.returncode == EXIT_UNAVAILABLE, r.stdout + r.stderr
    assert (
        lines["libNVVM"][0].startswith("MISSING")
        and "install  pip install nvidia-nvvm" in lines["libNVVM"]
    )
    assert lines["nvJitLink"][0].startswith("MISSING")
    assert "install  pip install nvidia-nvjitlink" in lines["nvJitLink"]
    assert "compiling: NOT possible" in r.stdout


def test_doctor_with_a_faked_gpu(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tylo.backend import device, driver

    monkeypatch.setattr(driver, "driver_version", lambda: 13010)
    monkeypatch.setattr(driver, "device_count", lambda: 2)
    fake = {0: SimpleNamespace(name="NVIDIA H200", compute_capability=(9, 0))}

    def props(i: int) -> SimpleNamespace:
        if i not in fake:
            raise driver.CudaError("cuDeviceGet", 101, "CUDA_ERROR_INVALID_DEVICE", "bad")
        return fake[i]

    monkeypatch.setattr(device, "device_properties", props)
    status = main(["doctor"])
    out = capsys.readouterr().out
    lines = doctor_lines(out)
    assert lines["driver"][0] == "ok       CUDA 13.1"
    assert lines["gpu 0"][0] == "ok       NVIDIA H200, sm_90"
    assert lines["gpu 1"][0].startswith("missing  CudaError")
    assert "launching: possible" in out and status in (EXIT_OK, EXIT_UNAVAILABLE)
