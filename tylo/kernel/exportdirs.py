"""Export directories, the read side of :mod:`tylo.kernel.export` (which writes them):
:func:`load` names a directory for this process; :func:`export_caches` lists the ones a
disk-cache lookup tries after missing the local cache (those named, and ``TYLO_CACHE_DIR``
when it is one); :func:`portable_deps` and :func:`local_deps` rename the kernel's own module
and file in an exported entry's dependency record, so a process that imports the kernel
under another name or from another path still checks what the trace read against its own
module and file. :mod:`tylo.kernel.diskcache` imports this module; ``export.py`` imports
both.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from tylo.errors import TyloError

__all__ = [
    "FORMAT",
    "KERNEL_FILE",
    "KERNEL_MODULE",
    "MANIFEST",
    "ExportError",
    "export_caches",
    "load",
    "loaded",
    "local_deps",
    "manifest",
    "portable_deps",
]

MANIFEST = "tylo-export.json"  # marks an export directory; lists what was exported
FORMAT = "tylo-export-v1"
_LOCK = threading.Lock()
_LOADED: list[Path] = []


class ExportError(TyloError):
    """An export directory that cannot be used, or a specialization that cannot be
    exported; the message names the directory or kernel and the fix."""


def manifest(directory: Path) -> dict[str, Any] | None:
    """The manifest of export directory ``directory``, or None when it has none (or a
    damaged one)."""
    try:
        data = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if type(data) is not dict or data.get("format") != FORMAT:
        return None
    if type(data.get("kernels")) is not list:
        return None
    return data


def load(directory: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Launch the specializations exported to ``directory`` from there (for the rest of
    this process); returns the manifest's list of exported kernels. Raises
    :class:`ExportError` when ``directory`` is not an export directory."""
    if not isinstance(directory, (str, os.PathLike)) or not str(directory):
        raise ExportError(f"tylo export load: expected a directory path, got {directory!r}")
    path = Path(directory).absolute()
    data = manifest(path)
    if data is None:
        raise ExportError(
            f"tylo export load: {str(path)!r} has no valid {MANIFEST}; give a directory "
            "written by `tylo compile --export DIR` (or tylo.kernel.export.export)"
        )
    with _LOCK:
        if path not in _LOADED:
            _LOADED.append(path)
    return list(data["kernels"])


def loaded() -> list[Path]:
    """The directories :func:`load` named in this process."""
    return list(_LOADED)


def export_caches(local: Any) -> list[Any]:
    """The export directories a lookup tries after missing ``local`` (a DiskCache): those
    :func:`load` named, and ``local`` itself when it is an export directory
    (``TYLO_CACHE_DIR`` pointing at one)."""
    from tylo.backend.cache import DiskCache

    out = [DiskCache(d) for d in _LOADED]
    if (Path(local.directory) / MANIFEST).is_file() and Path(local.directory) not in _LOADED:
        out.append(local)
    return out


# An exported dependency record names the kernel's own module and file by these, so that a
# process that imports the kernel under another name or from another path checks them
# against its own (the values the trace read from that module, the file's content).
KERNEL_MODULE = "<kernel module>"
KERNEL_FILE = "<kernel file>"


def _rename(deps: Any, module: tuple[str, str], file: tuple[str, str]) -> Any:
    if type(deps) is not dict:
        return deps
    out = dict(deps)
    files = deps.get("files")
    if type(files) is dict:
        out["files"] = {file[1] if k == file[0] else k: v for k, v in files.items()}
    values = deps.get("values")
    if type(values) is list:
        out["values"] = [
            [[module[1], *v[0][1:]], *v[1:]]
            if type(v) is list and v and type(v[0]) is list and v[0][:1] == [module[0]]
            else v
            for v in values
        ]
    return out


def portable_deps(deps: Any, module: str, file: str) -> Any:
    """``deps`` (a dependency record) with the kernel's module and file (as called in the
    exporting process) renamed to :data:`KERNEL_MODULE` and :data:`KERNEL_FILE`."""
    return _rename(deps, (module, KERNEL_MODULE), (file, KERNEL_FILE))


def local_deps(deps: Any, module: str, file: str) -> Any:
    """An exported dependency record with :data:`KERNEL_MODULE` and :data:`KERNEL_FILE`
    renamed to the kernel's module and file in this process (the inverse of
    :func:`portable_deps`)."""
    return _rename(deps, (KERNEL_MODULE, module), (KERNEL_FILE, file))
