"""The disk cache's store: every byte of an entry (header, metadata, payload) is covered
by its checksum; the location follows the platform; ``TYLO_CACHE_DIR`` and
``TYLO_CACHE_MAX_BYTES`` that cannot be used are typed errors; the size stays bounded,
evicting least recently used entries first; tests never write to the user's cache.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import types
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tylo.backend import cache as C

TOOLS = {"nvvm": "nvvm (2, 0)", "linker": "nvjitlink (13, 5)", "cb": "13.5.0"}


def key(n: int = 0) -> str:
    return C.cache_key(f"define void @k{n}() {{ ret void }}", "sm_90a", "opt=3", TOOLS)


def entry(size: int = 16, meta: dict | None = None) -> C.CacheEntry:
    return C.CacheEntry(".version 9.0", bytes(range(256))[:size], "log", meta or {})


# ---------------------------------------------------------------------------- integrity


def test_every_changed_byte_is_refused(tmp_path):
    """Brute force: flipping any one bit of any byte (magic, checksum, header length,
    key, sizes, metadata, PTX, cubin, log) makes the entry corrupt, and removes it."""
    cache = C.DiskCache(tmp_path)
    k = key()
    meta = {"dynamic_shared_bytes": 0, "guards": [["n % 4", ["==", ["%", ["v", 1], 4], 0]]]}
    cache.put(k, entry(meta=meta))
    path = cache.path(k)
    good = path.read_bytes()
    assert cache.lookup(k)[1] == "hit"
    for pos in range(len(good)):
        for bit in (0, 7):
            bad = bytearray(good)
            bad[pos] ^= 1 << bit
            path.write_bytes(bytes(bad))
            assert cache.lookup(k) == (None, "corrupt"), (pos, bit)
            assert not path.exists()
    path.write_bytes(good)
    assert cache.lookup(k)[0] == entry(meta=meta)  # the check is not refusing everything


def test_metadata_round_trips_and_is_checked(tmp_path):
    cache = C.DiskCache(tmp_path)
    meta = {"runtime": [0, 2], "deps": {"files": {"/x.py": "ab"}}, "format": "f"}
    cache.put(key(), entry(meta=meta))
    assert cache.get(key()).meta == meta
    path = cache.path(key())
    edited = path.read_bytes().replace(b'"runtime": [0, 2]', b'"runtime": [0, 3]')
    assert edited != path.read_bytes()
    path.write_bytes(edited)
    assert cache.lookup(key()) == (None, "corrupt")


# ---------------------------------------------------------------------------- location


@pytest.mark.parametrize(
    "platform, environ, want",
    [
        ("linux", {}, "/home/u/.cache/tylo"),
        ("linux", {"XDG_CACHE_HOME": "/xdg"}, "/xdg/tylo"),
        ("linux", {"XDG_CACHE_HOME": "relative/x"}, "/home/u/.cache/tylo"),  # spec: ignored
        ("linux", {"XDG_CACHE_HOME": ""}, "/home/u/.cache/tylo"),
        ("freebsd13", {"XDG_CACHE_HOME": "/xdg"}, "/xdg/tylo"),
        ("darwin", {"XDG_CACHE_HOME": "/xdg"}, "/home/u/Library/Caches/tylo"),
        ("win32", {"LOCALAPPDATA": "/appdata/local"}, "/appdata/local/tylo/Cache"),
        ("win32", {}, "/home/u/AppData/Local/tylo/Cache"),
        ("win32", {"LOCALAPPDATA": "rel"}, "/home/u/AppData/Local/tylo/Cache"),
    ],
)
def test_platform_conventions(platform, environ, want):
    assert C.platform_cache_dir(platform, environ, Path("/home/u")) == Path(want)


def test_cache_dir_prefers_the_setting_then_platformdirs(tmp_path, monkeypatch):
    monkeypatch.setenv("TYLO_CACHE_DIR", str(tmp_path / "set"))
    assert C.cache_dir() == tmp_path / "set"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TYLO_CACHE_DIR", "rel")
    assert C.cache_dir() == tmp_path / "rel"  # made absolute: a later chdir changes nothing
    monkeypatch.setenv("TYLO_CACHE_DIR", "")
    fake = types.ModuleType("platformdirs")
    fake.user_cache_dir = lambda app, appauthor=None: f"/pd/{app}/{appauthor}"
    monkeypatch.setitem(sys.modules, "platformdirs", fake)
    assert C.cache_dir() == Path("/pd/tylo/False")
    monkeypatch.setitem(sys.modules, "platformdirs", None)  # not installed
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    want = C.platform_cache_dir(sys.platform, os.environ, Path.home())
    assert C.cache_dir() == want


def test_tests_never_use_the_users_cache():
    """tests/conftest.py points TYLO_CACHE_DIR at a fresh temporary directory."""
    configured = Path(os.environ["TYLO_CACHE_DIR"])
    assert configured.is_relative_to(Path(tempfile.gettempdir()))
    assert configured.name.startswith("tylo-test-cache-")
    assert C.cache_dir() == configured


def test_unusable_cache_dir_is_a_typed_error(tmp_path, monkeypatch):
    monkeypatch.delenv("TYLO_CACHE", raising=False)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    for bad, why in ((blocker, "is not a directory"), (blocker / "sub", "cannot create")):
        monkeypatch.setenv("TYLO_CACHE_DIR", str(bad))
        with pytest.raises(C.CacheError, match=why) as err:
            C.default_cache()
        assert str(bad) in str(err.value) and "TYLO_CACHE=0" in str(err.value)
    monkeypatch.setenv("TYLO_CACHE", "0")  # off: nothing to check
    assert C.default_cache() is None
    monkeypatch.setenv("TYLO_CACHE", "1")
    monkeypatch.setenv("TYLO_CACHE_DIR", str(tmp_path / "new" / "dir"))
    cache = C.default_cache()
    assert cache.directory.is_dir() and (cache.directory.stat().st_mode & 0o777) == 0o700


@pytest.mark.skipif(os.geteuid() == 0, reason="needs a non-root user (root writes anywhere)")
def test_unwritable_cache_dir_is_a_typed_error(tmp_path, monkeypatch):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    monkeypatch.setenv("TYLO_CACHE_DIR", str(ro))
    with pytest.raises(C.CacheError, match="not writable"):
        C.default_cache()


@pytest.mark.parametrize("text", ["0", "-5", "1.5", "1GB", "lots", " 0x10 "])
def test_bad_max_bytes_is_a_typed_error(text, monkeypatch):
    monkeypatch.setenv("TYLO_CACHE_MAX_BYTES", text)
    with pytest.raises(C.CacheError, match="TYLO_CACHE_MAX_BYTES"):
        C.max_bytes()


@pytest.mark.parametrize(
    "text, want",
    [("", C.DEFAULT_MAX_BYTES), ("1", 1), ("1_000", 1000), (" 4096 ", 4096), (str(2**70), 2**70)],
)
def test_max_bytes(text, want, monkeypatch):
    monkeypatch.setenv("TYLO_CACHE_MAX_BYTES", text)
    assert C.max_bytes() == want
    assert C.DiskCache("/nonexistent").limit == want


# ---------------------------------------------------------------------------- eviction


class Clock:
    """A strictly increasing stand-in for time.time_ns (file times then order uses)."""

    def __init__(self) -> None:
        self.now = 1_700_000_000 * 10**9

    def __call__(self) -> int:
        self.now += 1_000_000
        return self.now


ops = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.integers(0, 7), st.integers(0, 200)),
        st.tuples(st.just("get"), st.integers(0, 7), st.just(0)),
    ),
    max_size=25,
)


@settings(max_examples=60, deadline=None)
@given(ops, st.integers(300, 1500))
def test_eviction_keeps_the_most_recently_used_within_the_bound(ops, limit):
    """After each put the total is within the bound, and what remains is exactly the
    longest suffix of the use order (most recent first) that fits."""
    with tempfile.TemporaryDirectory() as d, pytest.MonkeyPatch.context() as mp:
        mp.setattr(C.time, "time_ns", Clock())
        cache = C.DiskCache(d, limit=limit)
        order: list[int] = []  # entry numbers, least recently used first
        sizes: dict[int, int] = {}
        for op, n, size in ops:
            if op == "put":
                cache.put(key(n), entry(size))
                sizes[n] = len(C._encode(key(n), entry(size)))
            elif cache.get(key(n)) is None:
                assert n not in order
                continue
            if n in order:
                order.remove(n)
            order.append(n)
            if op == "put":  # the model evicts as the cache does
                total = sum(sizes[i] for i in order)
                while order and total > limit:
                    total -= sizes[order.pop(0)]
            present = [i for i in range(8) if cache.path(key(i)).exists()]
            assert sorted(present) == sorted(order)
            assert cache.size() == sum(sizes[i] for i in order) <= limit


def test_a_hit_marks_the_entry_used(tmp_path, monkeypatch):
    monkeypatch.setattr(C.time, "time_ns", Clock())
    one = len(C._encode(key(0), entry(100)))
    cache = C.DiskCache(tmp_path, limit=2 * one)
    cache.put(key(0), entry(100))
    cache.put(key(1), entry(100))
    assert cache.get(key(0)) is not None  # 0 is now the most recent
    cache.put(key(2), entry(100))
    assert cache.get(key(1)) is None and cache.get(key(0)) and cache.get(key(2))


def test_old_formats_and_stale_temporary_files_are_evicted(tmp_path):
    cache = C.DiskCache(tmp_path, limit=10**6)
    old = tmp_path / "v1" / "ab" / ("ab" * 32 + ".tylo")
    old.parent.mkdir(parents=True)
    old.write_bytes(b"x" * 100)
    os.utime(old, (1, 1))  # long unused
    stale = cache.path(key()).parent / ".tmp-crashed.tylo"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"partial")
    os.utime(stale, (1, 1))
    fresh = stale.with_name(".tmp-writing.tylo")
    fresh.write_bytes(b"partial")
    assert cache.evict(limit=0) == 1
    assert not old.exists() and not stale.exists() and fresh.exists()


def test_an_entry_larger_than_the_bound_is_not_kept(tmp_path):
    cache = C.DiskCache(tmp_path, limit=50)
    assert cache.put(key(), entry(200)) is False
    assert cache.size() == 0 and cache.lookup(key()) == (None, "miss")


def test_clear_counts_entries(tmp_path):
    cache = C.DiskCache(tmp_path)
    for i in range(3):
        cache.put(key(i), entry())
    assert cache.clear() == 3 and cache.size() == 0
    assert json.dumps(cache.entries()) == "[]"
