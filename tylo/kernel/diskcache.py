"""The first-level disk cache: find a specialization's cubin without tracing.

The toolchain's cache (:mod:`tylo.backend.cache`) is keyed on the IR, so using it needs a
trace. To make a cache hit in a fresh process cheap (no AST rewrite, no sympy, no IR),
this module keys a specialization on what determines its IR:

- the kernel's identity (module and qualified name) and options (``index_bits``, the
  compile options), the block shape, the target, a stamp of the compiler libraries
  (:func:`toolchain_identity`, read without loading them) and of tylo's own sources
  (:func:`tylo_identity`: paths, sizes and modification times; a miss here only means a
  trace, after which the toolchain's cache checks tylo's sources by content);
- each parameter's binding: kinds, dtypes, checks, and static values in a *stable* text
  (:func:`~tylo.kernel.reads.stable_text`: numbers, strings, containers, DTypes, enums,
  dataclasses field by field, functions by name with their closures and defaults,
  objects with ``__tylo_cache_key__``); a static value or a closure variable without a
  stable text disables this cache for that specialization (tracing then goes through the
  IR-keyed cache as before);
- the closure variables of the kernel function, the same way.

A specialization this cache cannot hold says why (:func:`not_stored`, the ``tylo.cache``
debug log, and a :class:`NotStoredWarning` under ``TYLO_CACHE_EXPLAIN=1``).

The entry records what the trace read (:class:`~tylo.kernel.reads.Dependencies`: the
sha256 of every user source file whose code ran, and a digest of every global, module
attribute and class attribute that code names), and a lookup re-checks it: any
difference is a miss, so an edited kernel or helper, a changed ``CONST['a']`` or
``othermodule.ATTR`` is never served a stale cubin. A trace that read a value without a
stable text is not stored. The entry's metadata is covered by the toolchain cache's
checksum and validated on load (:func:`valid_meta`); its guards are data
(:mod:`tylo.kernel.guardexpr`), never evaluated.

Entries are stored by the toolchain's :class:`~tylo.backend.cache.DiskCache` (atomic
writes, checksums, a bounded size; a corrupt entry is a miss) in its directory.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import re
import sys
import warnings
from collections.abc import Sequence
from typing import Any, NamedTuple

import tylo
from tylo.errors import TyloError
from tylo.kernel import debug
from tylo.kernel.reads import Dependencies, _Unstable, code_digest, stable_text

__all__ = [
    "Dependencies",
    "NotStoredWarning",
    "lookup",
    "not_stored",
    "portable_key",
    "specialization_key",
    "stable_text",
    "store",
    "valid_meta",
]

FORMAT = "tylo-kernel-l1-v2"
_ENTRY_NAME = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]{0,255}")
_MAX_PARAMS = 1 << 16
_MAX_DYNAMIC_SHARED = 1 << 32


def _binding_text(b: Any) -> str:
    return "|".join(
        [b.name, b.kind.value, stable_text(b.dtype), stable_text(b.check), stable_text(b.static)]
    )


@functools.lru_cache(maxsize=1)
def tylo_identity() -> str:
    """A stamp of tylo's own sources: path, size and modification time of every
    ``tylo/**/*.py`` (once per process, well under a millisecond; hashing their contents,
    as the IR-keyed cache does, costs several). An edit changes the stamp, so the lookup
    misses and the trace goes through the content-hashed IR cache."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    digest = hashlib.sha256()
    for directory, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(directory, name)
                st = os.stat(path)
                rel = os.path.relpath(path, root)
                digest.update(f"{rel}:{st.st_size}:{st.st_mtime_ns};".encode())
    return digest.hexdigest()


@functools.lru_cache(maxsize=1)
def toolchain_identity() -> str:
    """A stamp of the compiler libraries, without loading them: cuda-bindings' version and
    the size and modification time of every libNVVM / nvJitLink library in the NVIDIA
    wheels and under ``CUDA_HOME``/``CUDA_PATH`` (the places the toolchain loads from)."""
    import importlib.util

    from cuda.bindings import __version__ as bindings_version

    dirs: list[str] = []
    spec = importlib.util.find_spec("nvidia")
    for base in (spec.submodule_search_locations or []) if spec is not None else []:
        for sub in sorted(os.listdir(base)) if os.path.isdir(base) else []:
            dirs.append(os.path.join(base, sub, "lib"))
    for var in ("CUDA_HOME", "CUDA_PATH"):
        home = os.environ.get(var)
        if home:
            dirs += [os.path.join(home, "nvvm", "lib64"), os.path.join(home, "lib64")]
    stamps = [f"cuda-bindings {bindings_version}"]
    for d in dirs:
        try:
            names = sorted(os.listdir(d))
        except OSError:
            continue
        for name in names:
            if name.startswith(("libnvvm.so", "libnvJitLink.so")):
                st = os.stat(os.path.join(d, name))
                stamps.append(f"{d}/{name}:{st.st_size}:{st.st_mtime_ns}")
    return ";".join(stamps)


def specialization_key(
    kernel: Any,
    bindings: Sequence[Any],
    block: tuple[int, int, int],
    target: Any,
    cluster: tuple[int, int, int] | None = None,
) -> str | None:
    """The first-level key of one specialization, or None when some static value or
    closure variable has no stable text, or the kernel's code is not in a source file
    (``exec``, ``python -c``: the lookup could not check what that code reads)."""
    fn = kernel.fn
    if not os.path.isfile(fn.__code__.co_filename):
        _not_stored(
            kernel.name,
            f"its code has no source file ({fn.__code__.co_filename}): what it reads could "
            "not be checked in another process",
        )
        return None
    what = ""
    try:
        closure = []
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
            what = f"closure variable {name!r}"
            closure.append(stable_text(cell.cell_contents))
        what = "the static arguments"
        bindings_text = []
        for b in bindings:
            what = f"argument {b.name!r}"
            bindings_text.append(_binding_text(b))
        what = "the compile options"
        parts = {
            "format": FORMAT,
            "kernel": f"{fn.__module__}.{fn.__qualname__}",
            "file": fn.__code__.co_filename,
            "code": code_digest(fn.__code__),
            "index_bits": str(kernel.index_bits),
            "debug": debug.key_text(),  # TYLO_DEBUG_BOUNDS changes the traced code
            "options": kernel.options.canonical() if kernel.options is not None else "default",
            "bounds": getattr(kernel, "bounds", "guard"),  # the access policy's guards
            "block": repr(block),
            "target": str(target),
            "bindings": ";".join(bindings_text),
            "closure": ";".join(closure),
            "tylo": tylo_identity(),
            "toolchain": toolchain_identity(),
            "python": sys.version.split()[0],
        }
        if cluster is not None:  # absent otherwise: keys of cluster-less kernels unchanged
            from tylo.kernel.clusters import SHAPE_IN_PTX

            parts["cluster"] = repr(cluster) + (" in ptx" if SHAPE_IN_PTX else "")
    except (_Unstable, ValueError) as err:
        line = fn.__code__.co_firstlineno
        _not_stored(
            kernel.name,
            f"{what} ({err}) has no stable text; read by {fn.__qualname__} "
            f"({fn.__code__.co_filename}:{line})",
        )
        return None
    key = _digest(parts)
    _PORTABLE[key] = _Portable(
        _digest(
            {
                **{k: v for k, v in parts.items() if k not in _LOCAL_PARTS},
                "kernel": fn.__qualname__,
                "tylo": tylo.__version__,
                "python": ".".join(sys.version.split(".")[:2]),
            }
        ),
        fn.__module__,
        fn.__code__.co_filename,
    )
    return key


def _digest(parts: dict[str, str]) -> str:
    digest = hashlib.sha256()
    for name, text in parts.items():
        digest.update(f"{name}={len(text)}:{text}".encode())
    return digest.hexdigest()


# What ties a key to this machine: the module the kernel was imported as, its file's path,
# the stamps of tylo's sources (paths and mtimes) and of the toolchain, Python's patch level.
# The portable key of an exported specialization (tylo.kernel.export) leaves them out.
_LOCAL_PARTS = frozenset({"kernel", "file", "tylo", "toolchain", "python"})


class _Portable(NamedTuple):
    key: str  # the portable key
    module: str  # what the kernel's module and file are called in this process
    file: str


_PORTABLE: dict[str, _Portable] = {}  # specialization key -> its portable key (this process)


def portable_key(key: str) -> tuple[str, str, str] | None:
    """``(portable key, kernel module, kernel file)`` of the specialization whose key
    :func:`specialization_key` returned in this process (None for another key): the key's
    parts without what is local to this machine (module name, file path, source and
    toolchain stamps), and the names an exported dependency record uses for the kernel's
    own module and file (:func:`tylo.kernel.export.portable_deps`)."""
    return _PORTABLE.get(key)


# ---------------------------------------------------------------------------- explain


class NotStoredWarning(TyloError, Warning):
    """A specialization was not stored at the first cache level (``TYLO_CACHE_EXPLAIN=1``):
    each process traces it again; the message says which value prevents it, and where."""


_NOT_STORED: dict[str, str] = {}


def not_stored() -> dict[str, str]:
    """``kernel name -> reason`` for each kernel whose last specialization this process
    could not store at the first level (no key, or a trace that read a value without a
    stable text); ``tylo.kernel.diskcache.not_stored()`` after a compile explains a miss."""
    return dict(_NOT_STORED)


def _explain_on() -> bool:
    return os.environ.get("TYLO_CACHE_EXPLAIN", "").strip().lower() not in ("", "0", "false", "no")


def _not_stored(kernel: str, reason: str) -> None:
    """Record (and log; with ``TYLO_CACHE_EXPLAIN=1`` also warn) why ``kernel`` is not
    stored at the first level."""
    message = f"{kernel}: not stored in the first-level cache (traced in every process): {reason}"
    _NOT_STORED[kernel] = reason
    logging.getLogger("tylo.cache").debug("%s", message)
    if _explain_on():
        warnings.warn(NotStoredWarning(message), stacklevel=3)


# ---------------------------------------------------------------------------- store / load


def valid_meta(meta: Any) -> bool:
    """Whether ``meta`` (read from an entry) is what :func:`store` writes: this format,
    an entry name, distinct ascending runtime parameter indexes, a dynamic shared size
    in ``0..2**32``, guards that validate as data (:meth:`Guard.from_data
    <tylo.kernel.guards.Guard.from_data>`: never evaluated) and a dependency record."""
    from tylo.kernel.guards import Guard, GuardDataError

    if type(meta) is not dict or meta.get("format") != FORMAT:
        return False
    entry, runtime = meta.get("entry"), meta.get("runtime")
    dyn, guards = meta.get("dynamic_shared_bytes"), meta.get("guards", [])
    if type(entry) is not str or not _ENTRY_NAME.fullmatch(entry):
        return False
    if type(runtime) is not list or not all(type(i) is int for i in runtime):
        return False
    if any(not 0 <= i < _MAX_PARAMS for i in runtime) or runtime != sorted(set(runtime)):
        return False
    if type(dyn) is not int or not 0 <= dyn <= _MAX_DYNAMIC_SHARED:
        return False
    if type(meta.get("llvm", "")) is not str or type(guards) is not list:
        return False
    try:
        for g in guards:
            Guard.from_data(g)
    except GuardDataError:
        return False
    return type(meta.get("deps")) is dict


def lookup(key: str) -> tuple[Any, dict[str, Any]] | None:
    """``(CacheEntry, meta)`` for ``key`` when present, intact (the toolchain cache's
    checksum covers the metadata), well formed (:func:`valid_meta`; else the entry is
    dropped) and its recorded dependencies are unchanged in this process."""
    from tylo.backend.cache import default_cache

    disk = default_cache()
    if disk is None:
        return None
    found = _lookup_in(disk, key)
    if found is None and key in _PORTABLE:  # an exported directory (tylo.kernel.export)
        from tylo.kernel.exportdirs import export_caches, local_deps

        p = _PORTABLE[key]
        for exported in export_caches(disk):
            found = _lookup_in(exported, p.key, lambda d: local_deps(d, p.module, p.file))
            if found is not None:
                break
    return found


def _lookup_in(disk: Any, key: str, localize: Any = None) -> tuple[Any, dict[str, Any]] | None:
    entry = disk.get(key)
    if entry is None:
        return None
    meta = entry.meta
    if not valid_meta(meta):
        disk.discard(key)
        return None
    deps = meta["deps"] if localize is None else localize(meta["deps"])
    if not Dependencies.still_valid(deps):
        return None
    return entry, meta


def store(key: str, module: Any, meta: dict[str, Any]) -> None:
    """Record ``module`` (a CompiledModule) and the specialization's ``meta`` under
    ``key``, unless the trace was unverifiable (it read a value without a stable text):
    such a specialization is traced in every process, and its cubin comes from the
    IR-keyed cache."""
    from tylo.backend.cache import CacheEntry, default_cache

    deps = meta.get("deps")
    if type(deps) is not dict or "unverifiable" in deps:
        why = deps.get("unverifiable") if type(deps) is dict else "no dependency record"
        _not_stored(str(meta.get("entry")), f"what its trace read cannot be checked: {why}")
        return
    disk = default_cache()
    if disk is None:
        return
    disk.put(
        key,
        CacheEntry(
            module.ptx,
            module.cubin,
            module.info_log,
            {**meta, "format": FORMAT, "llvm": module.llvm},
        ),
    )
