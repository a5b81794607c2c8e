"""tylo's backend: everything that touches llvmlite, libNVVM, nvJitLink and the driver.

Importing this package loads no CUDA library; the names below resolve lazily. The
toolchain half: :func:`compile_ir` (IR -> PTX -> cubin, cached, no GPU needed),
:func:`compile_nvvm`, :func:`link_cubin`, :func:`disassemble`, :class:`Resources`; the
driver half lives in :mod:`tylo.backend.driver`, and :func:`device_properties` says what a
device is (SM count, shared memory, L2, ...).
"""

from __future__ import annotations

import importlib
from typing import Any

# public name -> module that defines it (resolved lazily by __getattr__)
_LAZY: dict[str, str] = {
    "CompileError": "tylo.backend.errors",
    "CompileOptions": "tylo.backend.pipeline",
    "CompileWarning": "tylo.backend.errors",
    "CompiledModule": "tylo.backend.pipeline",
    "CudaError": "tylo.backend.errors",
    "DeviceProperties": "tylo.backend.device",
    "LaunchError": "tylo.backend.errors",
    "LinkError": "tylo.backend.errors",
    "LinkResult": "tylo.backend.link",
    "NoDeviceError": "tylo.backend.errors",
    "Resources": "tylo.backend.resources",
    "ToolchainError": "tylo.backend.errors",
    "compile_ir": "tylo.backend.pipeline",
    "compile_nvvm": "tylo.backend.nvvm",
    "device_properties": "tylo.backend.device",
    "disassemble": "tylo.backend.sass",
    "link_cubin": "tylo.backend.link",
    "nvvm_version": "tylo.backend.nvvm",
    "sass_for": "tylo.backend.sass",
}

__all__ = [
    "CompileError",
    "CompileOptions",
    "CompileWarning",
    "CompiledModule",
    "CudaError",
    "DeviceProperties",
    "LaunchError",
    "LinkError",
    "LinkResult",
    "NoDeviceError",
    "Resources",
    "ToolchainError",
    "compile_ir",
    "compile_nvvm",
    "device_properties",
    "disassemble",
    "link_cubin",
    "nvvm_version",
    "sass_for",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tylo.backend' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
