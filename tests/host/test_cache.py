"""The disk cache on its own: keys, atomic entries, corruption, the off switch.

Compiles through the cache (hits across processes, recompiles after corruption) are in
tests/nvvm/test_toolchain_cache.py; these tests need no CUDA library.
"""

from __future__ import annotations

import os
import threading

import pytest

from tylo.backend import cache as C

TOOLS = {"nvvm": "nvvm (2, 0) /x/libnvvm.so 1:2", "linker": "nvjitlink (13, 5)", "cb": "13.5.0"}
IR = "define void @k() { ret void }"


def key(ir: str = IR, target: str = "sm_90a", options: str = "opt=3", tools=None) -> str:
    return C.cache_key(ir, target, options, TOOLS if tools is None else tools)


def test_key_is_stable_and_hex() -> None:
    assert key() == key()
    assert len(key()) == 64 and int(key(), 16) >= 0
    assert key(tools=dict(reversed(list(TOOLS.items())))) == key()  # order of the mapping


@pytest.mark.parametrize(
    "change",
    [
        {"ir": IR + " "},
        {"target": "sm_80"},
        {"options": "opt=0"},
        {"tools": {**TOOLS, "nvvm": "nvvm (2, 0) /y/libnvvm.so 1:3"}},
        {"tools": {**TOOLS, "linker": "nvjitlink (13, 0)"}},
        {"tools": {**TOOLS, "cb": "13.3.1"}},
    ],
)
def test_key_changes_with_each_input(change) -> None:
    assert key(**change) != key()


def test_key_fields_do_not_run_together() -> None:
    # moving text between fields must not collide (fields are length-prefixed)
    assert C.cache_key("ab", "c", "", TOOLS) != C.cache_key("a", "bc", "", TOOLS)


def test_key_includes_tylo_source(monkeypatch) -> None:
    before = key()
    monkeypatch.setattr(C, "source_hash", lambda: "0" * 64)
    assert key() != before


def test_source_hash_is_memoized_and_covers_the_package() -> None:
    assert C.source_hash() == C.source_hash()
    assert len(C.source_hash()) == 64


def entry(n: int = 0) -> C.CacheEntry:
    return C.CacheEntry(f".version 9.0 // {n}", bytes(range(256)) * 3, "ptxas info    : x")


def test_roundtrip(tmp_path) -> None:
    cache = C.DiskCache(tmp_path)
    k = key()
    assert cache.lookup(k) == (None, "miss")
    assert cache.put(k, entry())
    got, status = cache.lookup(k)
    assert status == "hit" and got == entry()
    assert cache.path(k).is_file() and cache.path(k).parent.parent.name == f"v{C.FORMAT_VERSION}"
    assert not [p for p in cache.path(k).parent.iterdir() if p.name.startswith(".tmp-")]


@pytest.mark.parametrize(
    "damage",
    [
        lambda b: b[: len(b) // 2],  # truncated
        lambda b: b[:-1] + bytes([b[-1] ^ 1]),  # one bit of the payload flipped
        lambda b: b"garbage",
        lambda b: b"",
        lambda b: b.replace(b'"sizes"', b'"sizez"'),  # header damaged
    ],
)
def test_corrupt_entry_is_removed_and_missed(tmp_path, damage) -> None:
    cache = C.DiskCache(tmp_path)
    k = key()
    cache.put(k, entry())
    path = cache.path(k)
    path.write_bytes(damage(path.read_bytes()))
    assert cache.lookup(k) == (None, "corrupt")
    assert not path.exists()
    assert cache.lookup(k) == (None, "miss")


def test_entry_under_wrong_key_is_rejected(tmp_path) -> None:
    cache = C.DiskCache(tmp_path)
    a, b = key(), key(target="sm_80")
    cache.put(a, entry())
    cache.path(b).parent.mkdir(parents=True, exist_ok=True)
    cache.path(b).write_bytes(cache.path(a).read_bytes())
    assert cache.lookup(b)[1] == "corrupt"


def test_env_switches(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TYLO_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.delenv("TYLO_CACHE", raising=False)
    assert C.cache_enabled()
    assert C.cache_dir() == tmp_path / "c"
    assert C.default_cache().directory == tmp_path / "c"
    for off in ("0", "false", "OFF", "no"):
        monkeypatch.setenv("TYLO_CACHE", off)
        assert not C.cache_enabled()
        assert C.default_cache() is None
    monkeypatch.setenv("TYLO_CACHE", "1")
    assert C.cache_enabled()


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write to read-only directories")
def test_unwritable_directory_warns_once_and_continues(tmp_path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    cache = C.DiskCache(ro)
    with pytest.warns(C.CompileWarning, match="cannot write"):
        assert cache.put(key(), entry()) is False
    assert cache.put(key(target="sm_80"), entry()) is False  # no second warning needed


def test_unwritable_directory_as_file(tmp_path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    cache = C.DiskCache(blocker)
    with pytest.warns(C.CompileWarning, match="cannot write"):
        assert cache.put(key(), entry()) is False
    assert cache.lookup(key()) == (None, "miss")


def test_concurrent_writers_leave_one_intact_entry(tmp_path) -> None:
    cache = C.DiskCache(tmp_path)
    k = key()
    threads = [threading.Thread(target=cache.put, args=(k, entry(i))) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got, status = cache.lookup(k)
    assert status == "hit" and got in [entry(i) for i in range(8)]
    assert not [p for p in cache.path(k).parent.iterdir() if p.name.startswith(".tmp-")]


def test_clear(tmp_path) -> None:
    cache = C.DiskCache(tmp_path)
    cache.put(key(), entry())
    cache.put(key(target="sm_80"), entry())
    assert cache.clear() == 2
    assert cache.lookup(key()) == (None, "miss")
