"""Ahead-of-time export: compiled specializations in a directory that another machine
launches from, with no tracing, no libNVVM and no sympy.

:func:`export` copies a specialization's first-level cache entry (cubin, PTX, launch
metadata, guards as data, and the record of what its trace read) into ``directory`` under
its *portable* key (:func:`tylo.kernel.diskcache.portable_key`): the specialization key
without what ties it to this machine (the module the kernel was imported as, its file's
path, the stamps of tylo's sources and of the compiler libraries), with tylo's version and
Python's minor version instead. ``tylo compile --export DIR`` calls it.

A process finds them when :func:`load` names the directory, or when ``TYLO_CACHE_DIR``
points at it: a lookup that misses the local cache tries the portable key there
(:mod:`tylo.kernel.exportdirs`). What the trace read is still checked (the user source
files that ran, by content; the globals it named), so an edited kernel is never served
the exported cubin. A specialization not exported misses and is traced and compiled as
usual.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from tylo.kernel.exportdirs import (
    FORMAT,
    KERNEL_FILE,
    KERNEL_MODULE,
    MANIFEST,
    ExportError,
    load,
    loaded,
    manifest,
    portable_deps,
)

__all__ = ["KERNEL_FILE", "KERNEL_MODULE", "MANIFEST", "ExportError", "export", "load", "loaded"]


def export(kernel: Any, compiled: Any, directory: str | os.PathLike[str]) -> str:
    """Copy ``compiled`` (a specialization of ``kernel`` that this process compiled or
    found in the disk cache) into the export directory ``directory``, created if needed;
    returns its portable key. Raises :class:`ExportError` when the specialization is not
    in the local disk cache (``TYLO_CACHE=0``, or a trace that read a value with no
    stable text: ``TYLO_CACHE_EXPLAIN=1`` names it)."""
    from tylo.backend.cache import CacheEntry, DiskCache, default_cache
    from tylo.kernel import diskcache

    key = diskcache.specialization_key(
        kernel, compiled.bindings, compiled.block, compiled.target, compiled.cluster
    )
    local = default_cache()
    entry = None if key is None or local is None else local.get(key)
    portable = None if key is None else diskcache.portable_key(key)
    if entry is None or portable is None:
        why = diskcache.not_stored().get(kernel.name, "the disk cache is off (TYLO_CACHE=0)")
        raise ExportError(f"export {kernel.name}: it is not in the disk cache: {why}")
    path = Path(directory).absolute()
    if path.exists() and not path.is_dir():
        raise ExportError(f"export {kernel.name}: {str(path)!r} is not a directory")
    data = manifest(path) if (path / MANIFEST).exists() else {"format": FORMAT, "kernels": []}
    if data is None:
        raise ExportError(f"export {kernel.name}: {str(path / MANIFEST)!r} is damaged")
    path.mkdir(parents=True, exist_ok=True)
    pkey, module, file = portable
    meta = {**entry.meta, "deps": portable_deps(entry.meta["deps"], module, file)}
    out = DiskCache(path, limit=1 << 62)  # an export is never evicted
    if not out.put(pkey, CacheEntry(entry.ptx, entry.cubin, entry.info_log, meta)):
        raise ExportError(f"export {kernel.name}: cannot write {str(path)!r}")
    record = {
        "kernel": kernel.name,
        "entry": compiled.entry,
        "target": str(compiled.target),
        "block": list(compiled.block),
        "key": pkey,
    }
    data["kernels"] = [k for k in data["kernels"] if k.get("key") != pkey] + [record]
    tmp = path / f".{MANIFEST}.tmp"
    tmp.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path / MANIFEST)
    return pkey
