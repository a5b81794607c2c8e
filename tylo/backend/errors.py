"""Typed errors of the compile toolchain and the CUDA driver layer.

Every class derives from :class:`tylo.errors.TyloError`. Each message says which stage
failed and carries what a user needs to act: the compiler log, the missing package to
install, or the driver call with its CUDA error name and code.
"""

from __future__ import annotations

from tylo.errors import TyloError

__all__ = [
    "CompileError",
    "CompileWarning",
    "CudaError",
    "LaunchError",
    "LinkError",
    "NoDeviceError",
    "ToolchainError",
]


class CompileError(TyloError):
    """libNVVM rejected a module, or its PTX is unusable.

    ``log`` holds the compiler's program log (may be empty); ``ir`` the NVVM IR text that
    was compiled, when the caller had it. ``str(err)`` includes the log.
    """

    def __init__(self, message: str, *, log: str = "", ir: str | None = None) -> None:
        self.log = log
        self.ir = ir
        text = message if not log else f"{message}\n--- libNVVM log ---\n{log.rstrip()}"
        super().__init__(text)


class LinkError(TyloError):
    """nvJitLink (or the ptxas fallback) failed to turn PTX into a cubin.

    ``log`` holds the linker's error log; ``ptx`` the PTX text, when available.
    """

    def __init__(self, message: str, *, log: str = "", ptx: str | None = None) -> None:
        self.log = log
        self.ptx = ptx
        text = message if not log else f"{message}\n--- linker log ---\n{log.rstrip()}"
        super().__init__(text)


class ToolchainError(TyloError):
    """A library or tool tylo needs was not found; the message names what to install."""


class CudaError(TyloError):
    """A CUDA driver call failed.

    ``call`` is the driver function's name, ``code`` the ``CUresult`` value, ``name`` its
    enum name and ``description`` the driver's sentence for it (when it could be read).

    >>> str(CudaError("cuModuleLoadData", 200, "CUDA_ERROR_INVALID_IMAGE"))
    'cuModuleLoadData failed: CUDA_ERROR_INVALID_IMAGE (200)'
    """

    def __init__(self, call: str, code: int, name: str, description: str = "") -> None:
        self.call = call
        self.code = int(code)
        self.name = name
        self.description = description
        super().__init__(f"{call} failed: {name} ({self.code})")


class NoDeviceError(TyloError):
    """No usable CUDA device (no driver, no GPU, or the ordinal does not exist)."""


class LaunchError(TyloError):
    """A kernel launch was configured wrongly (grid, block, arguments, shared memory)."""


class CompileWarning(TyloError, Warning):
    """libNVVM or the linker succeeded but wrote a non-empty log (shown as a warning)."""
