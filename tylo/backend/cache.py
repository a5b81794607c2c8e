"""Disk cache of compiled modules (PTX, cubin, linker log), shared across processes.

Location: ``$TYLO_CACHE_DIR`` when set, else the platform's per-user cache directory
(:func:`cache_dir`: platformdirs when installed; otherwise ``$XDG_CACHE_HOME/tylo`` or
``~/.cache/tylo`` on Linux, ``~/Library/Caches/tylo`` on macOS,
``%LOCALAPPDATA%\\tylo\\Cache`` on Windows). ``TYLO_CACHE=0`` turns the cache off. A
``TYLO_CACHE_DIR`` that cannot be used (not a directory, cannot be created, not writable)
raises :class:`CacheError`; an unusable platform default only warns once and compiles
without the cache.

A key is a sha256 over everything that can change the output: tylo's own source (every
``tylo/**/*.py``, hashed once per process, so editing tylo invalidates old entries without
relying on modification times), the IR, the target, the options and the toolchain
versions. Entries are written atomically (a temporary file in the same directory, then
``os.replace``) and carry a sha256 of *everything* after it: the key, the sizes, the
metadata and the payload. A truncated, corrupt or edited entry is removed and reported as
a miss, never an error. (The checksum finds damage and edits that did not recompute it;
it is not a signature: the directory is created private to its user, and whoever can
write it controls what the GPU runs, as with any cache of machine code. Nothing read
from it is ever evaluated as Python.)

The cache is bounded: after each write, entries are evicted least recently used first
(a hit marks its entry used) until the total size is at most ``TYLO_CACHE_MAX_BYTES``
(default :data:`DEFAULT_MAX_BYTES`, 1 GiB).

An entry is only a regular file at ``<directory>/v<N>/<xx>/<key>.tylo`` whose two parent
directories are real directories inside the cache: a symbolic link anywhere below the
cache directory is never followed, read, written, touched or removed through, so
``tylo cache clear`` and eviction cannot delete anything outside the cache. The cache is
an optimization: a directory that vanishes or breaks while a compile uses it (another
process clearing it) makes that compile a miss, or an unstored result with one warning,
never a failed compile.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import stat
import struct
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tylo
from tylo.backend.errors import CompileWarning
from tylo.errors import TyloError

__all__ = [
    "CacheEntry",
    "CacheError",
    "DEFAULT_MAX_BYTES",
    "DiskCache",
    "cache_dir",
    "cache_enabled",
    "cache_key",
    "default_cache",
    "max_bytes",
    "platform_cache_dir",
    "source_hash",
]

FORMAT_VERSION = 2
#: The size bound when ``TYLO_CACHE_MAX_BYTES`` is not set (1 GiB: thousands of kernels).
DEFAULT_MAX_BYTES = 1 << 30
_MAGIC = b"TYLO-CACHE\x02\n"
_DIGEST = 32  # sha256 of everything after it
_HEADER = struct.Struct("<I")
_SUFFIX = ".tylo"
_OFF_VALUES = ("0", "false", "no", "off")
_STALE_TMP_S = 3600.0  # a writer's temporary file older than this was left by a crash


class CacheError(TyloError):
    """A cache setting cannot be used: ``TYLO_CACHE_DIR`` names something that is not a
    usable directory, or ``TYLO_CACHE_MAX_BYTES`` is not a positive integer. The message
    names the setting, its value, what is wrong and the fix."""


def cache_enabled() -> bool:
    """False when the environment sets ``TYLO_CACHE=0`` (or false/no/off)."""
    return os.environ.get("TYLO_CACHE", "1").strip().lower() not in _OFF_VALUES


def platform_cache_dir(platform: str, environ: Mapping[str, str], home: Path) -> Path:
    """The per-user cache directory for tylo by ``platform``'s convention (``sys.platform``
    values), without platformdirs: ``%LOCALAPPDATA%\\tylo\\Cache`` on Windows,
    ``~/Library/Caches/tylo`` on macOS, else ``$XDG_CACHE_HOME/tylo`` (an absolute
    ``XDG_CACHE_HOME`` only, as the XDG spec says) or ``~/.cache/tylo``."""
    if platform.startswith("win"):
        local = environ.get("LOCALAPPDATA", "")
        base = Path(local) if local and os.path.isabs(local) else home / "AppData" / "Local"
        return base / "tylo" / "Cache"
    if platform == "darwin":
        return home / "Library" / "Caches" / "tylo"
    xdg = environ.get("XDG_CACHE_HOME", "")
    return (Path(xdg) if xdg and os.path.isabs(xdg) else home / ".cache") / "tylo"


def cache_dir() -> Path:
    """``$TYLO_CACHE_DIR`` (made absolute) when set and non-empty; else platformdirs'
    ``user_cache_dir("tylo")`` when platformdirs is installed; else
    :func:`platform_cache_dir` for this platform."""
    configured = os.environ.get("TYLO_CACHE_DIR", "")
    if configured:
        return Path(os.path.abspath(os.path.expanduser(configured)))
    try:
        import platformdirs
    except ImportError:
        return platform_cache_dir(sys.platform, os.environ, Path.home())
    return Path(platformdirs.user_cache_dir("tylo", appauthor=False))


def max_bytes() -> int:
    """``TYLO_CACHE_MAX_BYTES`` (a positive integer of bytes; ``_`` separators allowed), or
    :data:`DEFAULT_MAX_BYTES`; anything else raises :class:`CacheError`."""
    text = os.environ.get("TYLO_CACHE_MAX_BYTES", "").strip()
    if not text:
        return DEFAULT_MAX_BYTES
    try:
        value = int(text, 10)
    except ValueError:
        value = 0
    if value < 1:
        raise CacheError(
            f"tylo cache: TYLO_CACHE_MAX_BYTES={text!r} is not a positive integer of bytes; "
            f"set it to e.g. {DEFAULT_MAX_BYTES} (the default), or TYLO_CACHE=0 to turn the "
            "cache off"
        )
    return value


@functools.lru_cache(maxsize=1)
def source_hash() -> str:
    """sha256 over the paths and contents of every ``tylo/**/*.py`` (once per process)."""
    root = Path(tylo.__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def cache_key(llvm_ir: str, target: str, options: str, toolchain: Mapping[str, str]) -> str:
    """The hex sha256 naming one compiled module.

    ``target`` is the target's name, ``options`` a canonical text of the compile options,
    ``toolchain`` the versions/identities of libNVVM, the linker and cuda-bindings.
    """
    digest = hashlib.sha256()
    parts = {
        "format": str(FORMAT_VERSION),
        "tylo": source_hash(),
        "target": target,
        "options": options,
        "toolchain": json.dumps(dict(toolchain), sort_keys=True),
    }
    for name, value in parts.items():
        digest.update(f"{name}={len(value)}:".encode() + value.encode())
    digest.update(f"ir={len(llvm_ir)}:".encode() + llvm_ir.encode())
    return digest.hexdigest()


@dataclass(frozen=True)
class CacheEntry:
    """What a cache entry stores: the stages that cost time to produce, and JSON
    metadata (covered by the entry's checksum like the rest)."""

    ptx: str
    cubin: bytes
    info_log: str
    meta: dict[str, Any] = field(default_factory=dict, compare=False)


class DiskCache:
    """A directory of compiled modules keyed by :func:`cache_key`, at most ``limit`` bytes
    in total after each :meth:`put` (default: :func:`max_bytes`)."""

    def __init__(
        self, directory: str | os.PathLike[str] | None = None, *, limit: int | None = None
    ) -> None:
        self.directory = Path(directory) if directory is not None else cache_dir()
        self.limit = max_bytes() if limit is None else limit
        self._warned = False

    def path(self, key: str) -> Path:
        """Where the entry for ``key`` lives."""
        return self.directory / f"v{FORMAT_VERSION}" / key[:2] / f"{key}{_SUFFIX}"

    def lookup(self, key: str) -> tuple[CacheEntry | None, str]:
        """(entry, status) with status ``'hit'``, ``'miss'`` or ``'corrupt'`` (the bad
        entry has been removed). A hit marks the entry used (for eviction). Anything but a
        regular file under real directories of the cache (a link, a directory that
        vanished) is a miss."""
        path = self.path(key)
        data = _read_entry(path)
        if data is None:
            return None, "miss"
        entry = _decode(data, key)
        if entry is None:
            self.discard(key)
            return None, "corrupt"
        _touch(path)
        return entry, "hit"

    def get(self, key: str) -> CacheEntry | None:
        """The entry for ``key``, or None (missing or corrupt)."""
        return self.lookup(key)[0]

    def discard(self, key: str) -> None:
        """Remove the entry for ``key`` if there is one (a reader that finds an intact
        entry unusable, e.g. one whose metadata does not validate, drops it)."""
        try:
            self.path(key).unlink()
        except OSError:
            pass

    def put(self, key: str, entry: CacheEntry) -> bool:
        """Store ``entry`` atomically, then evict least recently used entries until the
        cache holds at most ``limit`` bytes; returns whether the entry is stored. A
        directory that cannot be written gives one warning and False."""
        path = self.path(key)
        data = _encode(key, entry)
        tmp = None
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            if not _real_parents(path):
                raise OSError(f"{path.parent} is not a directory inside the cache (a link?)")
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=_SUFFIX, dir=path.parent)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
            _touch(path)
        except OSError as err:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
            if not self._warned:
                self._warned = True
                warnings.warn(
                    CompileWarning(f"tylo cache: cannot write {path} ({err}); continuing without"),
                    stacklevel=2,
                )
            return False
        self.evict()
        return path.exists()

    def entries(self) -> list[tuple[int, int, Path]]:
        """``(last_use_ns, size, path)`` of every entry (all format versions), oldest use
        first: regular files ``v*/*/*.tylo`` under real directories of the cache (links
        are never followed; a directory removed meanwhile is skipped)."""
        found = []
        for path in self._files():
            if path.name.startswith(".tmp-"):
                continue
            try:
                st = path.lstat()
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                found.append((max(st.st_atime_ns, st.st_mtime_ns), st.st_size, path))
        found.sort()
        return found

    def _files(self) -> Iterator[Path]:
        """Every regular file (by ``lstat``) ending in ``.tylo`` two real directories
        below a ``v*`` real directory of the cache; never follows a link, never raises."""
        for version in _subdirs(self.directory):
            if not version.name.startswith("v"):
                continue
            for shard in _subdirs(version):
                for item in _scan(shard):
                    try:
                        regular = item.is_file(follow_symlinks=False)
                    except OSError:
                        continue
                    if regular and item.name.endswith(_SUFFIX):
                        yield Path(item.path)

    def size(self) -> int:
        """Total bytes of the entries."""
        return sum(size for _, size, _ in self.entries())

    def evict(self, limit: int | None = None) -> int:
        """Remove entries, least recently used first, until the total is at most
        ``limit`` (default ``self.limit``) bytes; also removes temporary files that
        crashed writers left. Returns how many entries were removed."""
        limit = self.limit if limit is None else limit
        now = time.time()
        for tmp in self._files():
            if not tmp.name.startswith(".tmp-"):
                continue
            try:
                if now - tmp.lstat().st_mtime > _STALE_TMP_S:
                    tmp.unlink()
            except OSError:
                pass
        found = self.entries()
        total = sum(size for _, size, _ in found)
        removed = 0
        for _, size, path in found:
            if total <= limit:
                break
            try:
                path.unlink()
            except FileNotFoundError:
                pass  # another process evicted it
            except OSError:
                continue
            total -= size
            removed += 1
        return removed

    def clear(self) -> int:
        """Remove every entry (regular files inside the cache only: a link is neither
        followed nor removed); returns how many were removed."""
        removed = 0
        for _, _, path in self.entries():
            try:
                path.unlink()
                removed += 1
            except OSError:
                pass
        return removed


_checked: set[Path] = set()


def _usable_configured_dir(directory: Path) -> None:
    """Raise :class:`CacheError` unless ``directory`` (from ``TYLO_CACHE_DIR``) exists or
    can be created, and is a directory this process can write (checked once)."""
    if directory in _checked:
        return
    fix = "point TYLO_CACHE_DIR at a writable directory, or set TYLO_CACHE=0"
    if directory.exists() and not directory.is_dir():
        raise CacheError(f"tylo cache: TYLO_CACHE_DIR={str(directory)!r} is not a directory; {fix}")
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as err:
        raise CacheError(
            f"tylo cache: cannot create TYLO_CACHE_DIR={str(directory)!r} "
            f"({err.strerror or err}); {fix}"
        ) from None
    if not os.access(directory, os.W_OK | os.X_OK):
        if not os.path.isdir(directory):
            return  # removed meanwhile (another process cleared it): a miss, not an error
        raise CacheError(
            f"tylo cache: TYLO_CACHE_DIR={str(directory)!r} is not writable by this user; {fix}"
        )
    _checked.add(directory)


def default_cache() -> DiskCache | None:
    """The cache the environment asks for, or None when ``TYLO_CACHE=0``. Raises
    :class:`CacheError` for a ``TYLO_CACHE_DIR`` or ``TYLO_CACHE_MAX_BYTES`` that cannot
    be used."""
    if not cache_enabled():
        return None
    directory = cache_dir()
    if os.environ.get("TYLO_CACHE_DIR", ""):
        _usable_configured_dir(directory)
    return DiskCache(directory)


def _scan(directory: str | os.PathLike[str]) -> list[os.DirEntry[str]]:
    """The entries of ``directory``, or none when it cannot be read (removed meanwhile)."""
    try:
        with os.scandir(directory) as it:
            return list(it)
    except OSError:
        return []


def _subdirs(directory: str | os.PathLike[str]) -> list[os.DirEntry[str]]:
    """The real subdirectories of ``directory`` (a link to a directory is not one)."""
    out = []
    for item in _scan(directory):
        try:
            if item.is_dir(follow_symlinks=False):
                out.append(item)
        except OSError:
            continue
    return out


def _real_parents(path: Path) -> bool:
    """Whether the two directories above the entry ``path``
    (``v<N>`` and its shard) are real directories, not links (``lstat``)."""
    for parent in (path.parent.parent, path.parent):
        try:
            if not stat.S_ISDIR(os.lstat(parent).st_mode):
                return False
        except OSError:
            return False
    return True


def _read_entry(path: Path) -> bytes | None:
    """The bytes of the entry file ``path`` when it is a regular file (not a link) under
    real directories of the cache; None otherwise or when it cannot be read."""
    if not _real_parents(path):
        return None
    try:
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read()
    except OSError:
        return None
    finally:
        os.close(fd)


def _touch(path: Path) -> None:
    """Mark ``path`` used now (explicitly: mounts with ``noatime`` never update it); a
    link is not followed."""
    now = time.time_ns()
    follow = os.utime not in os.supports_follow_symlinks  # no lutimes: the file itself
    try:
        os.utime(path, ns=(now, now), follow_symlinks=follow)
    except OSError:
        pass


def _encode(key: str, entry: CacheEntry) -> bytes:
    parts = [entry.ptx.encode(), entry.cubin, entry.info_log.encode()]
    header = json.dumps(
        {"key": key, "sizes": [len(p) for p in parts], "meta": entry.meta},
        sort_keys=True,
        allow_nan=False,
    ).encode()
    body = _HEADER.pack(len(header)) + header + b"".join(parts)
    return _MAGIC + hashlib.sha256(body).digest() + body


def _decode(data: bytes, key: str) -> CacheEntry | None:
    """The entry in ``data``, or None if it is not a complete, intact entry for ``key``
    (any changed byte, header and metadata included, fails the checksum)."""
    try:
        if not data.startswith(_MAGIC) or len(data) < len(_MAGIC) + _DIGEST + _HEADER.size:
            return None
        body = memoryview(data)[len(_MAGIC) + _DIGEST :]
        if hashlib.sha256(body).digest() != data[len(_MAGIC) : len(_MAGIC) + _DIGEST]:
            return None
        (hlen,) = _HEADER.unpack_from(body, 0)
        header = json.loads(bytes(body[_HEADER.size : _HEADER.size + hlen]))
        payload = body[_HEADER.size + hlen :]
        sizes = header["sizes"]
        meta = header["meta"]
        if (
            header["key"] != key
            or not isinstance(meta, dict)
            or not isinstance(sizes, list)
            or len(sizes) != 3
            or not all(type(s) is int and s >= 0 for s in sizes)
            or sum(sizes) != len(payload)
        ):
            return None
        ptx, cubin = payload[: sizes[0]], payload[sizes[0] : sizes[0] + sizes[1]]
        log = payload[sizes[0] + sizes[1] :]
        return CacheEntry(bytes(ptx).decode(), bytes(cubin), bytes(log).decode(), meta)
    except (ValueError, KeyError, TypeError, struct.error, RecursionError):
        return None
