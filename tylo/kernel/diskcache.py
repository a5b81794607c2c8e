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
  (ints, floats, strings, tuples, DTypes, enums, frozen dataclasses field by field,
  functions by qualified name, objects with ``__tylo_cache_key__``); a static value or a
  closure variable without a stable text disables this cache for that specialization
  (tracing then goes through the IR-keyed cache as before);
- the closure variables of the kernel function, the same way.

The entry records what the trace depended on, and a lookup re-checks it: the sha256 of
every user source file whose code ran during the trace (the kernel's file, helpers'
files) and of files of user modules the traced code referenced, plus the values of
simple globals (numbers, strings, tuples, DTypes) the traced code read. Any difference is
a miss, so an edited kernel, helper or module constant is never served a stale cubin.
What a trace reads from elsewhere (environment variables, data files) is not seen: such
inputs belong in static arguments, or set ``TYLO_CACHE=0``.

Entries are stored by the toolchain's :class:`~tylo.backend.cache.DiskCache` (atomic
writes, checksums; a corrupt entry is a miss) under ``$TYLO_CACHE_DIR``.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import os
import sys
import types
from collections.abc import Sequence
from typing import Any

from tylo.dtypes import DType

__all__ = ["Dependencies", "lookup", "specialization_key", "stable_text", "store"]

FORMAT = "tylo-kernel-l1-v1"
_SIMPLE = (int, float, str, bytes, bool, type(None))


class _Unstable(Exception):
    """A value has no stable text (internal)."""


def stable_text(value: Any) -> str:
    """A text of ``value`` that is the same in every process, or raise ``_Unstable``."""
    if isinstance(value, _SIMPLE):
        return repr(value)
    if isinstance(value, DType):
        return f"tylo.{value.name}"
    if isinstance(value, enum.Enum):
        return f"{type(value).__module__}.{type(value).__qualname__}.{value.name}"
    if isinstance(value, (tuple, list, frozenset)):
        items = (
            sorted(stable_text(v) for v in value)
            if isinstance(value, frozenset)
            else [stable_text(v) for v in value]
        )
        return f"{type(value).__name__}({','.join(items)})"
    hook = getattr(value, "__tylo_cache_key__", None)
    if hook is not None:
        return f"{type(value).__module__}.{type(value).__qualname__}:{stable_text(hook())}"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = ",".join(
            f"{f.name}={stable_text(getattr(value, f.name))}" for f in dataclasses.fields(value)
        )
        return f"{type(value).__module__}.{type(value).__qualname__}({fields})"
    if isinstance(value, (types.FunctionType, type)):
        return f"{value.__module__}.{value.__qualname__}"
    module = type(value).__module__
    if module.startswith("tylo.") and type(value).__repr__ is not object.__repr__:
        return f"{module}.{type(value).__qualname__}:{value!r}"  # tylo's own value types
    raise _Unstable(type(value).__name__)


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
    kernel: Any, bindings: Sequence[Any], block: tuple[int, int, int], target: Any
) -> str | None:
    """The first-level key of one specialization, or None when some static value or
    closure variable has no stable text."""
    fn = kernel.fn
    try:
        closure = [stable_text(c.cell_contents) for c in fn.__closure__ or ()]
        parts = {
            "format": FORMAT,
            "kernel": f"{fn.__module__}.{fn.__qualname__}",
            "file": fn.__code__.co_filename,
            "index_bits": str(kernel.index_bits),
            "options": kernel.options.canonical() if kernel.options is not None else "default",
            "block": repr(block),
            "target": str(target),
            "bindings": ";".join(_binding_text(b) for b in bindings),
            "closure": ";".join(closure),
            "tylo": tylo_identity(),
            "toolchain": toolchain_identity(),
            "python": sys.version.split()[0],
        }
    except (_Unstable, ValueError):
        return None
    digest = hashlib.sha256()
    for name, text in parts.items():
        digest.update(f"{name}={len(text)}:{text}".encode())
    return digest.hexdigest()


# ---------------------------------------------------------------------------- dependencies


def _file_hash(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


class Dependencies:
    """What a trace read: user files (with hashes) and simple global values."""

    def __init__(self) -> None:
        self.files: dict[str, str | None] = {}
        self.values: dict[tuple[str, str], str] = {}

    def add_code(self, code: types.CodeType, f_globals: dict[str, Any] | None) -> None:
        """Record that ``code`` (a user function) ran with ``f_globals``."""
        from tylo.kernel.errors import is_user_file

        if code.co_filename not in self.files:
            self.files[code.co_filename] = _file_hash(code.co_filename)
        if f_globals is None:
            return
        module = f_globals.get("__name__", "?")
        for name in code.co_names:
            if name not in f_globals:
                continue
            value = f_globals[name]
            if isinstance(value, types.ModuleType):
                path = getattr(value, "__file__", None)
                if path and is_user_file(path) and path not in self.files:
                    self.files[path] = _file_hash(path)
                continue
            try:
                if isinstance(value, (*_SIMPLE, tuple, DType)):
                    self.values[(module, name)] = stable_text(value)
            except _Unstable:
                pass

    def to_json(self) -> dict[str, Any]:
        return {"files": self.files, "values": [[m, n, v] for (m, n), v in self.values.items()]}

    @staticmethod
    def still_valid(record: dict[str, Any]) -> bool:
        """Whether the recorded files and values are unchanged in this process."""
        for path, digest in record.get("files", {}).items():
            if digest is None or _file_hash(path) != digest:
                return False
        for module, name, text in record.get("values", []):
            mod = sys.modules.get(module)
            if mod is None or name not in vars(mod):
                return False
            try:
                if stable_text(vars(mod)[name]) != text:
                    return False
            except _Unstable:
                return False
        return True


# ---------------------------------------------------------------------------- store / load


def lookup(key: str) -> tuple[Any, dict[str, Any]] | None:
    """``(CacheEntry, meta)`` for ``key`` when present and its dependencies are unchanged."""
    from tylo.backend.cache import default_cache

    disk = default_cache()
    if disk is None:
        return None
    entry = disk.get(key)
    if entry is None:
        return None
    meta = entry.meta
    if meta.get("format") != FORMAT or not Dependencies.still_valid(meta.get("deps", {})):
        return None
    return entry, meta


def store(key: str, module: Any, meta: dict[str, Any]) -> None:
    """Record ``module`` (a CompiledModule) and the specialization's ``meta`` under ``key``."""
    from tylo.backend.cache import CacheEntry, default_cache

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
