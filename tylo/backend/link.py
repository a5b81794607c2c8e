"""PTX to cubin: nvJitLink (``cuda.bindings.nvjitlink``), with ptxas as the fallback.

tylo always links PTX to a cubin for the exact target and loads the cubin, never PTX:
the driver's JIT refuses PTX newer than itself, while it loads cubins from newer linkers
(docs/toolchain.md). Links run with ``-verbose`` so the info log carries ptxas' resource report
(registers, shared memory, stack, spills), which :mod:`tylo.backend.resources` parses.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile
import threading
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tylo.backend.errors import CompileWarning, LinkError, ToolchainError
from tylo.target import Target

__all__ = ["LinkResult", "find_ptxas", "link_cubin", "linker_fingerprint", "register_cap_problem"]

_INSTALL_HINT = (
    "nvJitLink was not found; install it with `pip install nvidia-nvjitlink` "
    "(or put ptxas from `pip install nvidia-cuda-nvcc` or a CUDA toolkit on PATH)"
)
_lock = threading.Lock()
_nvjitlink: Any = None
_nvjitlink_error: str | None = None


@dataclass(frozen=True)
class LinkResult:
    """A linked cubin and the linker's info log (ptxas resource lines included)."""

    cubin: bytes
    info_log: str
    linker: str


def _load_nvjitlink() -> Any:
    """``cuda.bindings.nvjitlink`` with the library loaded, or None (reason memoized)."""
    global _nvjitlink, _nvjitlink_error
    if _nvjitlink is not None or _nvjitlink_error is not None:
        return _nvjitlink
    with _lock:
        if _nvjitlink is None and _nvjitlink_error is None:
            try:
                from cuda import pathfinder

                library = pathfinder.load_nvidia_dynamic_lib("nvJitLink")
                from cuda.bindings import nvjitlink

                nvjitlink.version()  # resolves the symbols now rather than mid-link
                _nvjitlink = (nvjitlink, library)
            except (ImportError, OSError, RuntimeError) as err:  # pathfinder: RuntimeError
                _nvjitlink_error = f"{type(err).__name__}: {err}"
    return _nvjitlink


@functools.lru_cache(maxsize=1)
def find_ptxas() -> str | None:
    """Path of a ptxas executable (nvidia-cuda-nvcc wheel, PATH, CUDA_HOME), or None."""
    try:
        from cuda import pathfinder

        found = getattr(pathfinder, "find_nvidia_binary_utility", None)
        path = found("ptxas") if found is not None else None
        if path:
            return str(path)
    except (ImportError, OSError, RuntimeError):
        pass  # an older cuda-pathfinder, or it failed: the plain search below still runs
    path = shutil.which("ptxas")
    if path:
        return path
    for var in ("CUDA_HOME", "CUDA_PATH"):
        root = os.environ.get(var)
        if root and os.access(Path(root, "bin", "ptxas"), os.X_OK):
            return str(Path(root, "bin", "ptxas"))
    return None


_ENTRY_HEAD_RE = re.compile(r"\.entry\s+([A-Za-z_$][\w$]*)\s*\((.*?)\)(.*?)\{", re.DOTALL)


def register_cap_problem(ptx: str, cap: int | None) -> str | None:
    """Why the register cap ``cap`` would not hold for ``ptx``, or None when it holds (or
    there is none). ptxas (13.0, and nvJitLink, which runs it) silently ignores
    ``-maxrregcount`` for an entry with ``.maxntid`` or ``.reqntid``, so such an entry must
    carry ``.maxnreg`` of at most ``cap``. ``@tylo.kernel`` kernels get it from their
    options; hand-written IR needs the ``maxnreg`` annotation
    (``NVVMModule.add_kernel(maxnreg=...)``)."""
    if cap is None:
        return None
    for name, _params, directives in _ENTRY_HEAD_RE.findall(ptx):
        if not re.search(r"\.(?:maxntid|reqntid)\b", directives):
            continue  # the linker's -maxrregcount applies
        found = re.search(r"\.maxnreg\s+(\d+)", directives)
        if found is None or int(found.group(1)) > cap:
            have = "no .maxnreg" if found is None else f".maxnreg {found.group(1)}"
            return (
                f"max_registers {cap} would not hold for entry {name!r}: it has .maxntid "
                f"(or .reqntid) and {have}, and ptxas ignores -maxrregcount for such an "
                f"entry; annotate the kernel with maxnreg <= {cap} "
                "(NVVMModule.add_kernel(maxnreg=...); @tylo.kernel does it from its options)"
            )
    return None


def link_cubin(
    ptx: str,
    target: Target | str,
    *,
    options: Sequence[str] = (),
    max_registers: int | None = None,
    linker: str = "auto",
    name: str = "tylo_module",
) -> LinkResult:
    """Assemble and link ``ptx`` into a cubin for ``target`` (``-arch=sm_XY[a]``).

    ``options`` are extra nvJitLink flags (``-lineinfo``, ``-Xptxas=...``); for ptxas they
    are translated (``-Xptxas=X`` becomes ``X``). ``max_registers`` caps registers per
    thread (refused for an entry with ``.maxntid`` and no ``.maxnreg`` within it, where
    ptxas ignores the cap: :func:`register_cap_problem`; a raw ``-maxrregcount`` in
    ``options`` is refused for the same reason). ``linker`` is ``'auto'`` (nvJitLink, else
    ptxas), ``'nvjitlink'`` or ``'ptxas'``. Raises :class:`LinkError` with the linker's
    error log.
    """
    target = Target.parse(target)
    if linker not in ("auto", "nvjitlink", "ptxas"):
        raise LinkError(
            f"link_cubin: linker must be 'auto', 'nvjitlink' or 'ptxas', not {linker!r}"
        )
    if max_registers is not None and not 24 <= max_registers <= 255:
        raise LinkError(
            f"link_cubin: max_registers {max_registers} is outside 24..255 (ptxas raises a "
            "smaller count to 24)"
        )
    raw_cap = [o for o in options if "maxrregcount" in o]
    if raw_cap:
        raise LinkError(
            f"link_cubin: {raw_cap[0]!r} in options: ptxas ignores -maxrregcount for an entry "
            "with .maxntid (every @tylo.kernel entry), so the cap would not hold; pass "
            "max_registers= (CompileOptions.max_registers), which is checked against the "
            "entries' .maxnreg"
        )
    problem = register_cap_problem(ptx, max_registers)
    if problem is not None:
        raise LinkError(f"link_cubin: {problem}")
    if linker == "auto" and "setmaxnreg" in ptx and find_ptxas() is not None:
        # nvJitLink assembles as a relocatable unit, where ptxas drops setmaxnreg (C7504);
        # whole-program ptxas keeps it. A ptxas too old for this PTX falls through to
        # nvJitLink, whose log line then becomes a CompileWarning.
        try:
            return _link_ptxas(find_ptxas(), ptx, target, options, max_registers, name)
        except LinkError as err:
            if "Unsupported .version" not in str(err):
                raise
    if linker != "ptxas":
        loaded = _load_nvjitlink()
        if loaded is not None:
            return _link_nvjitlink(loaded[0], ptx, target, options, max_registers, name)
        if linker == "nvjitlink":
            raise ToolchainError(f"{_INSTALL_HINT} ({_nvjitlink_error})")
    ptxas = find_ptxas()
    if ptxas is None:
        if linker == "ptxas":
            raise ToolchainError(
                "ptxas was not found; install it with `pip install nvidia-cuda-nvcc` "
                "or put a CUDA toolkit's bin directory on PATH"
            )
        raise ToolchainError(f"{_INSTALL_HINT} ({_nvjitlink_error}); no ptxas either")
    return _link_ptxas(ptxas, ptx, target, options, max_registers, name)


def _read(get_size: Any, get: Any, handle: int) -> bytes:
    size = get_size(handle)
    buf = bytearray(size)
    if size:
        get(handle, buf)
    return bytes(buf)


def _text(data: bytes) -> str:
    return data.rstrip(b"\0").decode(errors="replace").strip()


def _link_nvjitlink(
    nvjitlink: Any,
    ptx: str,
    target: Target,
    options: Sequence[str],
    max_registers: int | None,
    name: str,
) -> LinkResult:
    opts = [f"-arch={target.sm}", "-verbose", *options]
    if max_registers is not None:
        opts.append(f"-maxrregcount={max_registers}")
    data = ptx.encode()
    try:
        handle = nvjitlink.create(len(opts), opts)
    except nvjitlink.nvJitLinkError as err:
        raise LinkError(f"nvJitLink rejected the options {' '.join(opts)}: {err}") from None
    try:
        try:
            nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), name)
            nvjitlink.complete(handle)
        except nvjitlink.nvJitLinkError as err:
            log = _text(_read(nvjitlink.get_error_log_size, nvjitlink.get_error_log, handle))
            raise LinkError(
                f"nvJitLink failed to link {name!r} for {target.sm} "
                f"(options {' '.join(opts)}): {err}",
                log=log,
                ptx=ptx,
            ) from None
        cubin = _read(nvjitlink.get_linked_cubin_size, nvjitlink.get_linked_cubin, handle)
        info = _text(_read(nvjitlink.get_info_log_size, nvjitlink.get_info_log, handle))
    finally:
        nvjitlink.destroy(handle)
    _warn_unusual(info, name)
    return LinkResult(cubin, info, "nvjitlink")


def _ptxas_flags(options: Sequence[str]) -> list[str]:
    flags = []
    for opt in options:
        if opt.startswith("-Xptxas="):
            flags.extend(o for o in opt.removeprefix("-Xptxas=").split(",") if o)
        elif opt.startswith("-maxrregcount="):
            flags.append("--maxrregcount=" + opt.split("=", 1)[1])
        else:
            flags.append(opt)
    return flags


def _link_ptxas(
    ptxas: str,
    ptx: str,
    target: Target,
    options: Sequence[str],
    max_registers: int | None,
    name: str,
) -> LinkResult:
    flags = [f"-arch={target.sm}", "-v", *_ptxas_flags(options)]
    if max_registers is not None:
        flags.append(f"--maxrregcount={max_registers}")
    with tempfile.TemporaryDirectory(prefix="tylo-ptxas-") as tmp:
        src, out = Path(tmp, f"{name}.ptx"), Path(tmp, f"{name}.cubin")
        src.write_text(ptx)
        proc = subprocess.run(
            [ptxas, *flags, "-o", str(out), str(src)],
            capture_output=True,
            text=True,
            check=False,
        )
        log = (proc.stdout + proc.stderr).strip()
        if proc.returncode != 0 or not out.exists():
            raise LinkError(
                f"ptxas ({ptxas}) failed to assemble {name!r} for {target.sm} "
                f"(exit {proc.returncode}, flags {' '.join(flags)})",
                log=log,
                ptx=ptx,
            )
        cubin = out.read_bytes()
    _warn_unusual(log, name)
    return LinkResult(cubin, log, "ptxas")


def _warn_unusual(log: str, name: str) -> None:
    """Warn about log lines that are not the requested resource report."""
    unusual = [
        line
        for line in log.splitlines()
        if line.strip()
        and (
            not line.lstrip().startswith(("ptxas info", "ptxas         .", "info"))
            or "Potential Performance Loss" in line  # e.g. C7504/C7508: setmaxnreg dropped
        )
        and "bytes stack frame" not in line
    ]
    if unusual:
        warnings.warn(
            CompileWarning(f"linker log for {name!r}:\n" + "\n".join(unusual)), stacklevel=3
        )


def _file_stamp(path: str) -> str:
    try:
        st = os.stat(path)
    except OSError:
        return f"{path} ?"
    return f"{path} {st.st_size}:{st.st_mtime_ns}"


@functools.lru_cache(maxsize=4)
def linker_fingerprint(linker: str = "auto") -> str:
    """A cheap identity of the linker :func:`link_cubin` would use, for cache keys."""
    loaded = _load_nvjitlink() if linker != "ptxas" else None
    if loaded is not None:
        nvjitlink, library = loaded
        path = str(getattr(library, "abs_path", "") or "")
        return f"nvjitlink {tuple(nvjitlink.version())} {_file_stamp(path)}"
    ptxas = find_ptxas()
    return "no linker" if ptxas is None else f"ptxas {_file_stamp(ptxas)}"
