"""compile_ir through the disk cache, across processes, and TYLO_EVIDENCE; the kernel
cache refusing tampered entries (no GPU)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from extras import require_nvdisasm

import tylo
from tylo.backend import CompileOptions, compile_ir
from tylo.backend import cache as C
from tylo.backend import pipeline as P
from tylo.backend.cache import DiskCache
from tylo.backend.errors import CompileWarning
from tylo.kernel import diskcache
from tylo.testing import vector_add_ir

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def cache_dir(tmp_path, monkeypatch) -> Path:
    d = tmp_path / "cache"
    monkeypatch.setenv("TYLO_CACHE_DIR", str(d))
    monkeypatch.delenv("TYLO_CACHE", raising=False)
    monkeypatch.delenv("TYLO_EVIDENCE", raising=False)
    return d


def test_second_compile_hits(cache_dir) -> None:
    first = compile_ir(vector_add_ir(), "sm_90a")
    second = compile_ir(vector_add_ir(), "sm_90a")
    assert (first.timings["cache"], second.timings["cache"]) == ("miss", "hit")
    assert second.timings["nvvm_s"] == second.timings["link_s"] == 0.0
    assert (second.ptx, second.cubin, second.info_log) == (first.ptx, first.cubin, first.info_log)
    assert second.resources == first.resources and second.key == first.key
    assert DiskCache(cache_dir).path(first.key).is_file()


@pytest.mark.parametrize(
    "change",
    [
        {"target": "sm_80"},
        {"options": CompileOptions(ftz=True)},
        {"options": CompileOptions(max_registers=32)},
        {"ir": vector_add_ir("other")},
    ],
)
def test_what_changes_the_output_misses(cache_dir, change) -> None:
    compile_ir(vector_add_ir(), "sm_90a")
    ir = change.pop("ir", vector_add_ir())
    target = change.pop("target", "sm_90a")
    assert compile_ir(ir, target, **change).timings["cache"] == "miss"


def test_what_does_not_change_the_output_hits(cache_dir) -> None:
    compile_ir(vector_add_ir(), "sm_90a")
    again = compile_ir(vector_add_ir(), "sm_90a", entries=("vadd",), name="label")
    assert again.timings["cache"] == "hit" and again.name == "label"
    assert compile_ir(vector_add_ir(), "sm_90a", options=CompileOptions()).timings["cache"] == "hit"


def test_toolchain_version_change_misses(cache_dir, monkeypatch) -> None:
    compile_ir(vector_add_ir(), "sm_90a")
    real = P.toolchain_versions

    def newer(linker: str = "auto") -> dict[str, str]:
        return {**real(linker), "nvvm": real(linker)["nvvm"] + " (updated)"}

    monkeypatch.setattr(P, "toolchain_versions", newer)
    assert compile_ir(vector_add_ir(), "sm_90a").timings["cache"] == "miss"
    assert compile_ir(vector_add_ir(), "sm_90a").timings["cache"] == "hit"


def test_corrupt_entry_recompiles(cache_dir) -> None:
    good = compile_ir(vector_add_ir(), "sm_90a")
    path = DiskCache(cache_dir).path(good.key)
    path.write_bytes(path.read_bytes()[:-100])
    again = compile_ir(vector_add_ir(), "sm_90a")
    assert again.timings["cache"] == "corrupt" and again.timings["nvvm_s"] > 0
    assert again.cubin == good.cubin
    assert compile_ir(vector_add_ir(), "sm_90a").timings["cache"] == "hit"


def test_cache_off(cache_dir, monkeypatch) -> None:
    assert compile_ir(vector_add_ir(), "sm_90a", use_cache=False).timings["cache"] == "off"
    monkeypatch.setenv("TYLO_CACHE", "0")
    assert compile_ir(vector_add_ir(), "sm_90a").timings["cache"] == "off"
    assert not cache_dir.exists()


def test_another_process_hits(cache_dir) -> None:
    first = compile_ir(vector_add_ir(), "sm_90a")
    code = (
        "from tylo.backend import compile_ir; from tylo.testing import vector_add_ir; "
        "m = compile_ir(vector_add_ir(), 'sm_90a'); print(m.timings['cache'], m.key)"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert out.stdout.split() == ["hit", first.key]


def test_evidence(cache_dir, tmp_path, monkeypatch) -> None:
    evidence = tmp_path / "evidence"
    monkeypatch.setenv("TYLO_EVIDENCE", str(evidence))
    m = compile_ir(vector_add_ir(), "sm_80")
    stem = f"vadd-sm_80-{m.key[:12]}"
    names = {p.name for p in evidence.iterdir()}
    # nvdisasm is in the test extra: the SASS file is always expected
    require_nvdisasm()
    expected = {f"{stem}{s}" for s in (".ll", ".ptx", ".cubin", ".resources.txt", ".sass")}
    assert names == expected
    assert (evidence / f"{stem}.ll").read_text() == m.llvm
    assert (evidence / f"{stem}.ptx").read_text() == m.ptx
    assert (evidence / f"{stem}.cubin").read_bytes() == m.cubin
    assert "vadd: registers" in (evidence / f"{stem}.resources.txt").read_text()
    for p in evidence.iterdir():
        p.unlink()
    hit = compile_ir(vector_add_ir(), "sm_80")  # evidence is saved on cache hits too
    assert hit.timings["cache"] == "hit" and {p.name for p in evidence.iterdir()} == expected


def test_evidence_names_are_safe(cache_dir, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TYLO_EVIDENCE", str(tmp_path / "ev"))
    m = compile_ir(vector_add_ir(), "sm_90a", name="../gemm<bf16, 128x128>")
    files = list((tmp_path / "ev").iterdir())
    assert files and all(p.name.startswith("_gemm_bf16_128x128_-sm_90a-") for p in files)
    assert m.name == "../gemm<bf16, 128x128>"


def test_unwritable_evidence_warns(cache_dir, tmp_path, monkeypatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("TYLO_EVIDENCE", str(blocker / "sub"))
    with pytest.warns(CompileWarning, match="TYLO_EVIDENCE"):
        compile_ir(vector_add_ir(), "sm_90a")


# ------------------------------------------------- the first-level (kernel) cache, tampered


def _guarded_scale(out, x, n):
    tylo.assume(tylo.divisible(n, 4))
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    if i < n:
        out[i] = x[i] * 2.0


def _compile_fresh():
    """A new Kernel object for the same function: only the disk cache can know it."""
    k = tylo.kernel(_guarded_scale)
    return k, k.compile(tylo.f32, tylo.f32, int, block=128, target="sm_90a")


def _kernel_entry(cache_dir: Path) -> tuple[Path, C.CacheEntry]:
    found = []
    for path in cache_dir.rglob("*.tylo"):
        e = C._decode(path.read_bytes(), path.stem)
        if e is not None and e.meta.get("format") == diskcache.FORMAT:
            found.append((path, e))
    assert len(found) == 1, found
    return found[0]


def _forge(path: Path, e: C.CacheEntry, **meta) -> None:
    """Rewrite the entry with other metadata and a *correct* checksum (what someone who
    can write the cache directory can do)."""
    path.write_bytes(
        C._encode(path.stem, C.CacheEntry(e.ptx, e.cubin, e.info_log, {**e.meta, **meta}))
    )


def _flip_in_cubin(path: Path, e: C.CacheEntry) -> None:
    data = bytearray(path.read_bytes())
    at = bytes(data).index(e.cubin) + len(e.cubin) // 2
    data[at] ^= 0x40
    path.write_bytes(bytes(data))


def _edit(old: bytes, new: bytes):
    def edit(path: Path, e: C.CacheEntry) -> None:
        data = path.read_bytes()
        assert old in data
        path.write_bytes(data.replace(old, new))

    return edit


MARKER = Path(tempfile.gettempdir()) / f"tylo-pwned-{os.getpid()}"
PAYLOAD = f"__import__('pathlib').Path({str(MARKER)!r}).touch() or True"

TAMPER = {
    "header byte": _edit(b'"dynamic_shared_bytes": 0', b'"dynamic_shared_bytes": 8'),
    "guard": _edit(b'["v", 2], 4]', b'["v", 2], 1]'),
    "cubin": _flip_in_cubin,
    "forged runtime": lambda p, e: _forge(p, e, runtime=[0, 1, 1]),
    "forged shared size": lambda p, e: _forge(p, e, dynamic_shared_bytes=-1),
    "forged entry name": lambda p, e: _forge(p, e, entry="k; rm -rf"),
    "forged guard as code": lambda p, e: _forge(p, e, guards=[["pwned", PAYLOAD]]),
    "forged guard tree": lambda p, e: _forge(p, e, guards=[["pwned", [PAYLOAD, ["v", 2]]]]),
    "forged deps": lambda p, e: _forge(p, e, deps=PAYLOAD),
}


@pytest.mark.parametrize("how", list(TAMPER))
def test_a_tampered_kernel_entry_is_refused_and_recompiled(cache_dir, how) -> None:
    MARKER.unlink(missing_ok=True)
    _, good = _compile_fresh()
    path, e = _kernel_entry(cache_dir)
    TAMPER[how](path, e)
    k, again = _compile_fresh()
    assert (k.stats.traces, k.stats.disk_hits) == (1, 0)  # refused: traced again
    assert again.guards == good.guards and again.runtime == good.runtime
    assert again.dynamic_shared_bytes == good.dynamic_shared_bytes and again.cubin == good.cubin
    assert not MARKER.exists()  # the payload never ran
    k, hit = _compile_fresh()  # the recompile stored a good entry again
    assert (k.stats.traces, k.stats.disk_hits) == (0, 1) and hit.guards == good.guards


def test_the_payload_is_live_code() -> None:
    """The forged guard would run if it were evaluated, as guard text was before: the
    test above would see the marker."""
    MARKER.unlink(missing_ok=True)
    eval(f"lambda v: {PAYLOAD}", {"__builtins__": __builtins__})((0, 0, 4))  # noqa: S307
    assert MARKER.exists()
    MARKER.unlink()


_RACE_KERNEL = """\
import tylo


@tylo.kernel
def scale(out, x, n: tylo.Int(), s: tylo.Static):
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    if i < n:
        out[i] = x[i] * s
"""


def _race_deleter(directory: str, stop) -> None:
    import shutil
    import time

    while not stop.is_set():
        shutil.rmtree(directory, ignore_errors=True)
        time.sleep(0.005)


def _race_compile(i: int, directory: str, kernel_dir: str, q) -> None:
    import warnings

    os.environ["TYLO_CACHE_DIR"] = directory
    os.environ.pop("TYLO_CACHE", None)
    sys.path.insert(0, kernel_dir)
    try:
        import race_kernel

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CompileWarning)
            k = race_kernel.scale.compile(
                tylo.f32, tylo.f32, int, float(i), block=128, target="sm_80"
            )
        q.put((i, "ok" if ".entry" in k.ptx and k.cubin else "no code"))
    except BaseException as err:  # noqa: BLE001 - any failure is the test's finding
        q.put((i, f"{type(err).__name__}: {err}"))


def test_compiles_survive_the_cache_being_deleted_every_5ms(tmp_path) -> None:
    """The issue's example: 8 concurrent compiles (each a miss: a new static value) while
    another process deletes the cache directory every 5 ms. Every compile succeeds (the
    cache breaking mid-compile is a miss or a warning, never a failure)."""
    import multiprocessing as mp

    (tmp_path / "race_kernel.py").write_text(_RACE_KERNEL)
    directory = str(tmp_path / "cache")
    ctx = mp.get_context("spawn")
    stop, q = ctx.Event(), ctx.Queue()
    deleter = ctx.Process(target=_race_deleter, args=(directory, stop))
    deleter.start()
    procs = [
        ctx.Process(target=_race_compile, args=(i, directory, str(tmp_path), q)) for i in range(8)
    ]
    try:
        for p in procs:
            p.start()
        results = sorted(q.get(timeout=300) for _ in procs)
    finally:
        stop.set()
        for p in [*procs, deleter]:
            p.join(timeout=60)
    assert results == [(i, "ok") for i in range(8)]
