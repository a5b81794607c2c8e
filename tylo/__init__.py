"""tylo: composable tile programming for NVIDIA GPUs, in Python.

Importing :mod:`tylo` is cheap and pulls in no CUDA library: the kernel-facing names
below are resolved on first use, so ``import tylo.layouts`` stays pure (sympy, numpy,
stdlib) and works on any machine.
"""

from __future__ import annotations

import builtins
import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> module that defines it (resolved lazily by __getattr__)
_LAZY: dict[str, str] = {
    "TyloError": "tylo.errors",
    "ArrayError": "tylo.arrays",
    "CompileOptions": "tylo.backend.pipeline",
    "compile_ir": "tylo.backend.pipeline",
    "LaunchError": "tylo.backend.errors",
    "CudaError": "tylo.backend.errors",
    "CompileError": "tylo.backend.errors",
    "NoDeviceError": "tylo.backend.errors",
    "DeviceProperties": "tylo.backend.device",
    "device_properties": "tylo.backend.device",
    "reduction_plan": "tylo.tile.reduce",
    "reduction_scratch": "tylo.tile.reduce",
    "ReductionPlan": "tylo.tile.reduce",
    "load_fragment": "tylo.tile.fragment_io",
    "store_fragment": "tylo.tile.fragment_io",
    "load": "tylo.tile.access",
    "store": "tylo.tile.access",
    "SharedTile": "tylo.tile.views",
    "GlobalTile": "tylo.tile.views",
    "wait_copies": "tylo.nvgpu.cpasync",
    "commit_copies": "tylo.nvgpu.cpasync",
    "copy_async": "tylo.nvgpu.cpasync",
    "CopyPlan": "tylo.nvgpu.cpasync",
    "threads": "tylo.nvgpu.warp.mma",
    "size": "tylo.nvgpu.warp.mma",
    "zero_accumulator": "tylo.nvgpu.warp.mma",
    "load_operands": "tylo.nvgpu.warp.mma",
    "mma_atoms": "tylo.nvgpu.warp.mma",
    "mma": "tylo.nvgpu.warp.mma",
    "PlanError": "tylo.nvgpu.warp.mma",
    "TiledMMA": "tylo.nvgpu.warp.mma",
    "MMAAtom": "tylo.nvgpu.warp.mma",
    "Ownership": "tylo.tile.ownership",
    "Fragment": "tylo.tile.fragment",
    "DType": "tylo.dtypes",
    "bf16": "tylo.dtypes",
    "bool_": "tylo.dtypes",
    "f16": "tylo.dtypes",
    "f32": "tylo.dtypes",
    "f64": "tylo.dtypes",
    "i8": "tylo.dtypes",
    "i16": "tylo.dtypes",
    "i32": "tylo.dtypes",
    "i64": "tylo.dtypes",
    "u8": "tylo.dtypes",
    "u16": "tylo.dtypes",
    "u32": "tylo.dtypes",
    "u64": "tylo.dtypes",
    "dtype_of": "tylo.dtypes",
    "DeviceBuffer": "tylo.arrays",
    "as_device_array": "tylo.arrays",
    "Target": "tylo.target",
    "FULL_MASK": "tylo.kernel",
    "WARP_SIZE": "tylo.kernel",
    "ArraySpec": "tylo.kernel",
    "BoundsProofError": "tylo.kernel",
    "CompiledKernel": "tylo.kernel",
    "Dim": "tylo.kernel",
    "Float": "tylo.kernel",
    "Int": "tylo.kernel",
    "Kernel": "tylo.kernel",
    "KernelArgumentError": "tylo.kernel",
    "KernelStats": "tylo.kernel",
    "LocalArray": "tylo.kernel",
    "OutOfBoundsError": "tylo.kernel",
    "OutOfBoundsLaunchError": "tylo.kernel",
    "Ptr": "tylo.kernel",
    "Static": "tylo.kernel",
    "Tensor": "tylo.kernel",
    "TraceError": "tylo.kernel",
    "Value": "tylo.kernel",
    "abs": "tylo.kernel",
    "all_of": "tylo.kernel",
    "any_of": "tylo.kernel",
    "assume": "tylo.kernel",
    "atomic_add": "tylo.kernel",
    "atomic_cas": "tylo.kernel",
    "atomic_exch": "tylo.kernel",
    "atomic_max": "tylo.kernel",
    "atomic_min": "tylo.kernel",
    "assume_aligned": "tylo.kernel",
    "divisible": "tylo.kernel",
    "block_dim": "tylo.kernel",
    "block_idx": "tylo.kernel",
    "dynamic_shared": "tylo.kernel",
    "exp": "tylo.kernel",
    "exp2": "tylo.kernel",
    "fma": "tylo.kernel",
    "grid_dim": "tylo.kernel",
    "inline": "tylo.kernel",
    "kernel": "tylo.kernel",
    "lane_id": "tylo.kernel",
    "linear_thread_idx": "tylo.kernel",
    "local": "tylo.kernel",
    "log": "tylo.kernel",
    "log2": "tylo.kernel",
    "maximum": "tylo.kernel",
    "minimum": "tylo.kernel",
    "pack_bf16x2": "tylo.kernel",
    "pack_f16x2": "tylo.kernel",
    "pointer": "tylo.kernel",
    "print_": "tylo.kernel",
    "ptx": "tylo.kernel",
    "range": "tylo.kernel",
    "rsqrt": "tylo.kernel",
    "shared": "tylo.kernel",
    "shfl_down": "tylo.kernel",
    "shfl_idx": "tylo.kernel",
    "shfl_up": "tylo.kernel",
    "shfl_xor": "tylo.kernel",
    "sqrt": "tylo.kernel",
    "sync_threads": "tylo.kernel",
    "sync_warp": "tylo.kernel",
    "thread_idx": "tylo.kernel",
    "value": "tylo.kernel",
    "view": "tylo.kernel",
    "warp_id": "tylo.kernel",
    "where": "tylo.kernel",
}

# Names that are also Python builtins stay attributes (``tylo.abs``, ``tylo.range``) but are
# left out of ``__all__``, so that ``from tylo import *`` never replaces ``abs``/``range``.
_SHADOWS_BUILTINS: frozenset[str] = frozenset(n for n in _LAZY if n in vars(builtins))

__all__ = sorted(["__version__", *(n for n in _LAZY if n not in _SHADOWS_BUILTINS)])


def __getattr__(name: str) -> Any:
    if name == "kernel":
        # ``tylo.kernel`` is the subpackage, which is callable as the decorator (whichever
        # of the two Python's import system binds here first, they are the same object)
        return importlib.import_module("tylo.kernel")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tylo' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def _notebook_svg(obj: Any) -> str | None:
    """The picture a notebook shows for ``obj`` (:func:`tylo.pictures.repr_svg`), or None
    when ``tylo.pictures`` cannot be imported. ``Layout._repr_svg_`` and
    ``ComposedLayout._repr_svg_`` call it: ``tylo.layouts`` sits below ``tylo.pictures``
    and never imports it, so the hook that joins them lives in the package root, and
    ``tylo.pictures`` is imported only when a notebook first asks for a picture."""
    try:
        from tylo.pictures import repr_svg
    except ImportError:
        return None
    return repr_svg(obj)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
