"""libNVVM: NVVM IR text to PTX, through ``cuda.bindings.nvvm``.

The library is located once, lazily, with ``cuda.pathfinder.load_nvidia_dynamic_lib``
(the ``nvidia-nvvm`` wheel, else ``CUDA_HOME``/``CUDA_PATH``). Each compile is one libNVVM
program: create, add the module, verify and compile with the same options, read the PTX;
on failure the program log becomes a :class:`~tylo.backend.errors.CompileError`, on success
a non-empty log becomes a :class:`~tylo.backend.errors.CompileWarning`; the program is
always destroyed.
"""

from __future__ import annotations

import functools
import os
import re
import threading
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tylo.backend.errors import CompileError, CompileWarning, ToolchainError
from tylo.target import Target

__all__ = ["NvvmVersion", "compile_nvvm", "nvvm_fingerprint", "nvvm_version"]

_INSTALL_HINT = (
    "libNVVM was not found; install it with `pip install nvidia-nvvm` "
    "(or point CUDA_HOME at a CUDA 13 toolkit)"
)
_lock = threading.Lock()
_loaded: Any = None


def _nvvm() -> Any:
    """``cuda.bindings.nvvm`` with libNVVM loaded (once per process)."""
    global _loaded
    if _loaded is not None:
        return _loaded
    with _lock:
        if _loaded is None:
            try:
                from cuda import pathfinder

                library = pathfinder.load_nvidia_dynamic_lib("nvvm")
                from cuda.bindings import nvvm
            except ImportError as err:
                raise ToolchainError(
                    f"{_INSTALL_HINT}; cuda-bindings/cuda-pathfinder are not importable: {err}"
                ) from err
            except (OSError, RuntimeError) as err:  # pathfinder's errors are RuntimeErrors
                raise ToolchainError(f"{_INSTALL_HINT} ({type(err).__name__}: {err})") from err
            _loaded = (nvvm, library)
    return _loaded


def _library_path() -> str:
    return str(getattr(_nvvm()[1], "abs_path", "") or "")


def _log(nvvm: Any, prog: int) -> str:
    try:
        size = nvvm.get_program_log_size(prog)
        if size <= 1:
            return ""
        buf = bytearray(size)
        nvvm.get_program_log(prog, buf)
        return bytes(buf).rstrip(b"\0").decode(errors="replace").strip()
    except nvvm.nvvmError:  # the log is best effort; the primary error is reported anyway
        return ""


def compile_nvvm(
    llvm_ir: str,
    target: Target | str,
    *,
    opt_level: int = 3,
    options: Sequence[str] = (),
    name: str = "tylo_module",
) -> str:
    """Compile NVVM IR text to PTX text for ``target`` (``-arch=compute_XY[a]``).

    ``options`` are extra libNVVM flags (``-ftz=1``, ``-prec-div=0``, ``-g``, ...). Raises
    :class:`CompileError` carrying libNVVM's log and the IR.
    """
    target = Target.parse(target)
    if opt_level not in (0, 3):
        raise CompileError(
            f"compile_nvvm: opt_level must be 0 or 3 (libNVVM -opt), got {opt_level}"
        )
    nvvm, _ = _nvvm()
    opts = [f"-arch={target.compute}", f"-opt={opt_level}", *options]
    data = llvm_ir.encode()
    prog = nvvm.create_program()
    try:
        stage = "adding the module"
        try:
            nvvm.add_module_to_program(prog, data, len(data), name)
            stage = "verifying"
            nvvm.verify_program(prog, len(opts), opts)
            stage = "compiling"
            nvvm.compile_program(prog, len(opts), opts)
            size = nvvm.get_compiled_result_size(prog)
            buf = bytearray(size)
            nvvm.get_compiled_result(prog, buf)
        except nvvm.nvvmError as err:
            raise CompileError(
                f"libNVVM failed {stage} {name!r} for {target.compute} "
                f"(options {' '.join(opts)}): {err}",
                log=_log(nvvm, prog),
                ir=llvm_ir,
            ) from None
        log = _log(nvvm, prog)
    finally:
        nvvm.destroy_program(prog)
    if log:
        warnings.warn(CompileWarning(f"libNVVM log for {name!r}:\n{log}"), stacklevel=2)
    return bytes(buf).rstrip(b"\0").decode()


@dataclass(frozen=True)
class NvvmVersion:
    """What libNVVM is in use.

    ``version`` and ``ir_version`` come from libNVVM itself but are equal across CUDA 13.x
    releases; ``release`` (``'13.0.88'``) and ``ptx_isa`` (``'9.0'``) are read from the PTX
    of a tiny compile and do tell 13.0 from 13.5.
    """

    version: tuple[int, ...]
    ir_version: tuple[int, ...]
    release: str
    ptx_isa: str
    library: str

    def __str__(self) -> str:
        return f"libNVVM {self.release} (PTX ISA {self.ptx_isa}) from {self.library}"


_PROBE_IR = """\
target triple = "nvptx64-nvidia-cuda"
target datalayout = "e-p:64:64:64-i1:8:8-i8:8:8-i16:16:16-i32:32:32-i64:64:64-i128:128:128-\
f32:32:32-f64:64:64-v16:16:16-v32:32:32-v64:64:64-v128:128:128-n16:32:64"
define void @tylo_probe() {
  ret void
}
!nvvm.annotations = !{!0}
!nvvmir.version = !{!1}
!0 = !{void ()* @tylo_probe, !"kernel", i32 1}
!1 = !{i32 2, i32 0}
"""
_RELEASE_RE = re.compile(r"release\s+([\d.]+),\s*V([\d.]+)")
_ISA_RE = re.compile(r"^\s*\.version\s+(\d+\.\d+)", re.MULTILINE)


@functools.lru_cache(maxsize=1)
def nvvm_version() -> NvvmVersion:
    """The libNVVM in use (one tiny compile, once per process)."""
    nvvm, _ = _nvvm()
    ptx = compile_nvvm(_PROBE_IR, Target(8, 0), name="tylo_probe")
    release = _RELEASE_RE.search(ptx)
    isa = _ISA_RE.search(ptx)
    return NvvmVersion(
        version=tuple(nvvm.version()),
        ir_version=tuple(nvvm.ir_version()),
        release=release.group(2) if release else "unknown",
        ptx_isa=isa.group(1) if isa else "unknown",
        library=_library_path(),
    )


@functools.lru_cache(maxsize=1)
def nvvm_fingerprint() -> str:
    """A cheap identity of the libNVVM in use, for cache keys (no compile): its version
    numbers plus the library file's path, size and modification time."""
    nvvm, _ = _nvvm()
    path = _library_path()
    try:
        st = os.stat(path)
        stamp = f"{st.st_size}:{st.st_mtime_ns}"
    except OSError:
        stamp = "?"
    return f"nvvm {tuple(nvvm.version())} ir {tuple(nvvm.ir_version())} {path} {stamp}"
