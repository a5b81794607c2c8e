"""Disk cache of compiled modules (PTX, cubin, linker log), shared across processes.

Location ``$TYLO_CACHE_DIR`` (default ``~/.cache/tylo``); ``TYLO_CACHE=0`` turns it off.
A key is a sha256 over everything that can change the output: tylo's own source (every
``tylo/**/*.py``, hashed once per process, so editing tylo invalidates old entries without
relying on modification times), the IR, the target, the options and the toolchain
versions. Entries are written atomically (a temporary file in the same directory, then
``os.replace``) and carry a sha256 of their payload: a truncated or corrupt entry is
removed and reported as a miss, never an error.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import struct
import tempfile
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tylo
from tylo.backend.errors import CompileWarning

__all__ = [
    "CacheEntry",
    "DiskCache",
    "cache_dir",
    "cache_enabled",
    "cache_key",
    "default_cache",
    "source_hash",
]

FORMAT_VERSION = 1
_MAGIC = b"TYLO-CACHE\x01\n"
_HEADER = struct.Struct("<I")
_SUFFIX = ".tylo"
_OFF_VALUES = ("0", "false", "no", "off")


def cache_enabled() -> bool:
    """False when the environment sets ``TYLO_CACHE=0`` (or false/no/off)."""
    return os.environ.get("TYLO_CACHE", "1").strip().lower() not in _OFF_VALUES


def cache_dir() -> Path:
    """``$TYLO_CACHE_DIR``, else ``~/.cache/tylo``."""
    configured = os.environ.get("TYLO_CACHE_DIR")
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "tylo"


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
    """What a cache entry stores: the stages that cost time to produce."""

    ptx: str
    cubin: bytes
    info_log: str
    meta: dict[str, Any] = field(default_factory=dict, compare=False)


class DiskCache:
    """A directory of compiled modules keyed by :func:`cache_key`."""

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        self.directory = Path(directory) if directory is not None else cache_dir()
        self._warned = False

    def path(self, key: str) -> Path:
        """Where the entry for ``key`` lives."""
        return self.directory / f"v{FORMAT_VERSION}" / key[:2] / f"{key}{_SUFFIX}"

    def lookup(self, key: str) -> tuple[CacheEntry | None, str]:
        """(entry, status) with status ``'hit'``, ``'miss'`` or ``'corrupt'`` (the bad
        entry has been removed)."""
        path = self.path(key)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None, "miss"
        except OSError:
            return None, "miss"
        entry = _decode(data, key)
        if entry is None:
            try:
                path.unlink()
            except OSError:
                pass
            return None, "corrupt"
        return entry, "hit"

    def get(self, key: str) -> CacheEntry | None:
        """The entry for ``key``, or None (missing or corrupt)."""
        return self.lookup(key)[0]

    def put(self, key: str, entry: CacheEntry) -> bool:
        """Store ``entry`` atomically; returns False (with one warning) if the directory is
        not writable."""
        path = self.path(key)
        data = _encode(key, entry)
        tmp = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=_SUFFIX, dir=path.parent)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
            return True
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

    def clear(self) -> int:
        """Remove every entry; returns how many were removed."""
        removed = 0
        for path in self.directory.glob(f"v*/*/*{_SUFFIX}"):
            try:
                path.unlink()
                removed += 1
            except OSError:
                pass
        return removed


def default_cache() -> DiskCache | None:
    """The cache the environment asks for, or None when ``TYLO_CACHE=0``."""
    return DiskCache(cache_dir()) if cache_enabled() else None


def _encode(key: str, entry: CacheEntry) -> bytes:
    parts = [entry.ptx.encode(), entry.cubin, entry.info_log.encode()]
    payload = b"".join(parts)
    header = json.dumps(
        {
            "key": key,
            "sizes": [len(p) for p in parts],
            "sha256": hashlib.sha256(payload).hexdigest(),
            "meta": entry.meta,
        },
        sort_keys=True,
    ).encode()
    return _MAGIC + _HEADER.pack(len(header)) + header + payload


def _decode(data: bytes, key: str) -> CacheEntry | None:
    """The entry in ``data``, or None if it is not a complete, intact entry for ``key``."""
    try:
        if not data.startswith(_MAGIC):
            return None
        pos = len(_MAGIC)
        (hlen,) = _HEADER.unpack_from(data, pos)
        pos += _HEADER.size
        header = json.loads(data[pos : pos + hlen])
        payload = data[pos + hlen :]
        sizes = header["sizes"]
        if (
            header["key"] != key
            or len(sizes) != 3
            or sum(sizes) != len(payload)
            or hashlib.sha256(payload).hexdigest() != header["sha256"]
        ):
            return None
        ptx, cubin = payload[: sizes[0]], payload[sizes[0] : sizes[0] + sizes[1]]
        log = payload[sizes[0] + sizes[1] :]
        return CacheEntry(ptx.decode(), bytes(cubin), log.decode(), dict(header.get("meta", {})))
    except (ValueError, KeyError, TypeError, struct.error, UnicodeDecodeError):
        return None
