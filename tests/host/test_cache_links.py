"""The disk cache never reaches outside its directory: a symbolic link at any level below
it (a ``v*/`` format directory, a shard, an entry) is never followed by ``tylo cache
clear``, eviction, lookups or writes; and a cache directory that another process deletes
over and over while compiles use it makes misses and warnings, never an exception."""

from __future__ import annotations

import multiprocessing as mp
import os
import shutil
import time
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tylo.backend import cache as C
from tylo.cli import EXIT_OK, main

pytestmark = pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symbolic links")


def entry(n: int = 0) -> C.CacheEntry:
    return C.CacheEntry(f".version 9.0 // {n}", bytes(range(n % 200)), "log", {})


def key(n: int) -> str:
    return f"{n:064x}"


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (not following links) and its bytes."""
    out = {}
    for d, _, files in os.walk(root):
        for f in files:
            p = Path(d) / f
            if not p.is_symlink():
                out[str(p.relative_to(root))] = p.read_bytes()
    return out


def test_clear_does_not_follow_a_linked_format_directory(tmp_path, monkeypatch, capsys):
    """The issue's example: ``v*/`` linked to a directory outside the cache, which holds a
    file where an entry would be; ``tylo cache clear`` must leave it."""
    cache_dir, outside = tmp_path / "cache", tmp_path / "outside"
    (outside / "ab").mkdir(parents=True)
    sentinel = outside / "ab" / ("f" * 64 + ".tylo")
    sentinel.write_bytes(b"precious")
    cache = C.DiskCache(cache_dir)
    assert cache.put(key(1), entry(1))
    os.symlink(outside, cache_dir / "v9", target_is_directory=True)
    monkeypatch.setenv("TYLO_CACHE_DIR", str(cache_dir))
    assert main(["cache", "info"]) == EXIT_OK
    assert "entries    1" in capsys.readouterr().out  # the link's file is not an entry
    assert main(["cache", "clear"]) == EXIT_OK
    assert capsys.readouterr().out.startswith("removed 1 entries")
    assert sentinel.read_bytes() == b"precious"
    assert (cache_dir / "v9").is_symlink()  # the link itself is left too
    assert cache.evict(0) == 0 and sentinel.exists()


def test_linked_shard_and_entry_are_neither_read_nor_written(tmp_path):
    cache_dir, outside = tmp_path / "cache", tmp_path / "outside"
    outside.mkdir()
    cache = C.DiskCache(cache_dir)
    k = key(7)
    shard = cache.path(k).parent
    shard.parent.mkdir(parents=True)
    os.symlink(outside, shard, target_is_directory=True)
    with pytest.warns(C.CompileWarning, match="not a directory inside the cache"):
        assert cache.put(k, entry(7)) is False
    assert list(outside.iterdir()) == []  # nothing written through the link
    # an intact entry placed outside, reached through the linked shard: a miss
    good = C.DiskCache(tmp_path / "other")
    good.put(k, entry(7))
    shutil.copy(good.path(k), outside / cache.path(k).name)
    assert cache.lookup(k) == (None, "miss")
    assert (outside / cache.path(k).name).exists()
    # an entry file that is itself a link to an intact entry: a miss, and never removed
    # through (clear and evict remove regular files only)
    os.unlink(shard)
    shard.mkdir()
    os.symlink(good.path(k), cache.path(k))
    assert cache.lookup(k) == (None, "miss")
    assert cache.clear() == 0 and cache.evict(0) == 0
    assert good.lookup(k)[1] == "hit"


NAMES = st.sampled_from(["v2", "v1", "v9", "ab", "cd", "x"])
# a random tree under the cache: entries (regular files), links to the outside directory or
# to a file in it, at the format level, the shard level or the entry level
NODES = st.lists(
    st.tuples(
        st.sampled_from(["entry", "link-dir", "link-file"]),
        st.sampled_from([0, 1, 2]),  # depth: 0 = v*/, 1 = shard, 2 = entry
        NAMES,
        NAMES,
        st.integers(0, 5),
    ),
    max_size=12,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(nodes=NODES)
def test_nothing_outside_is_ever_removed(tmp_path_factory, nodes):
    """Property over trees of entries and links: after info, clear and evict(0), every file
    outside the cache is unchanged, and exactly the regular entries inside it (found by
    an independent walk that does not follow links) were removed."""
    root = tmp_path_factory.mktemp("tree")
    cache_dir, outside = root / "cache", root / "outside"
    for sub in ("v2/ab", "v9/cd", "ab"):
        (outside / sub).mkdir(parents=True)
        for i in range(3):
            (outside / sub / (f"{i:064x}" + ".tylo")).write_bytes(b"keep %d" % i)
    cache_dir.mkdir()
    for kind, depth, a, b, i in nodes:
        parent = cache_dir / [Path(), Path(a), Path(a) / b][depth]
        name = [a, b, f"{i:064x}.tylo"][depth]
        try:
            parent.mkdir(parents=True, exist_ok=True)
            target = parent / name
            if kind == "entry":
                if depth == 2:
                    target.write_bytes(b"entry")
                else:
                    target.mkdir(exist_ok=True)
            elif kind == "link-dir":
                os.symlink(outside / ["v2", "v2/ab", "ab"][depth], target)
            else:
                os.symlink(outside / "ab" / f"{i % 3:064x}.tylo", target)
        except (FileExistsError, NotADirectoryError):
            continue  # the random tree already has something else there
    before = snapshot(outside)
    expected = 0
    for d, dirs, files in os.walk(cache_dir):  # followlinks=False: links are not entered
        rel = Path(d).relative_to(cache_dir)
        if len(rel.parts) == 2 and rel.parts[0].startswith("v"):
            expected += sum(f.endswith(".tylo") and not (Path(d) / f).is_symlink() for f in files)
    cache = C.DiskCache(cache_dir)
    assert len(cache.entries()) == expected
    assert cache.clear() == expected
    cache.evict(0)
    assert snapshot(outside) == before
    assert cache.entries() == []


# ------------------------------------------------------------- deleted while in use


def _deleter(directory: str, stop: mp.synchronize.Event) -> None:  # type: ignore[name-defined]
    while not stop.is_set():
        shutil.rmtree(directory, ignore_errors=True)
        time.sleep(0.005)


def _worker(i: int, directory: str, seconds: float, q: mp.Queue) -> None:  # type: ignore[type-arg]
    os.environ["TYLO_CACHE_DIR"] = directory
    os.environ.pop("TYLO_CACHE", None)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", C.CompileWarning)
            end = time.monotonic() + seconds
            n = 0
            while time.monotonic() < end:
                disk = C.default_cache()
                k = key(i * 100_000 + n)
                disk.lookup(k)
                disk.put(k, entry(n))
                disk.lookup(k)
                disk.entries()
                disk.evict(1 << 12)
                n += 1
        q.put((i, "ok", n))
    except BaseException as err:  # noqa: BLE001 - report anything, the test fails on it
        q.put((i, "failed", f"{type(err).__name__}: {err}"))


def test_a_cache_deleted_every_5ms_never_fails_its_users(tmp_path):
    """8 processes use the cache (lookups, writes, eviction, the configured-directory
    check) for about 2 s while another deletes the whole directory every 5 ms: none
    raises (a compile on top of it is then a miss or an unstored result, never a failure;
    the real compiles are tests/nvvm/test_toolchain_cache.py)."""
    directory = str(tmp_path / "cache")
    ctx = mp.get_context("spawn")
    stop, q = ctx.Event(), ctx.Queue()
    deleter = ctx.Process(target=_deleter, args=(directory, stop))
    deleter.start()
    workers = [ctx.Process(target=_worker, args=(i, directory, 2.0, q)) for i in range(8)]
    try:
        for w in workers:
            w.start()
        results = [q.get(timeout=600) for _ in workers]  # spawned imports on a loaded machine
    finally:
        stop.set()
        for p in [*workers, deleter]:
            p.join(timeout=30)
    failed = [r for r in results if r[1] != "ok"]
    assert not failed, failed
    assert all(r[2] > 0 for r in results)
