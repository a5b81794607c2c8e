"""tylo.kernel: the tracer. Python functions become CUDA kernels.

The public names are re-exported by :mod:`tylo` (``tylo.kernel``, ``tylo.range``,
``tylo.thread_idx``, ...); the manual is ``docs/kernels.md``. Modules:

- :mod:`~tylo.kernel.decorator` (``@kernel``, ``Kernel.compile``/``trace``),
  :mod:`~tylo.kernel.launch` (specializations, the launch fast path),
  :mod:`~tylo.kernel.spec` (parameter kinds and annotations), :mod:`~tylo.kernel.guards`
  (facts stated in a kernel and checked at launch), :mod:`~tylo.kernel.diskcache` (the
  first-level disk cache);
- :mod:`~tylo.kernel.ast_rewrite` (the source rewrite), :mod:`~tylo.kernel.control`,
  :mod:`~tylo.kernel.loops` and :mod:`~tylo.kernel.merge` (dynamic branches and loops),
  :mod:`~tylo.kernel.tree` (the flatten protocol of carried containers),
  :mod:`~tylo.kernel.trace` and :mod:`~tylo.kernel.context` (one trace);
- :mod:`~tylo.kernel.facts` and :mod:`~tylo.kernel.lower` (index expressions: facts, and
  lowering to IR), :mod:`~tylo.kernel.values` and :mod:`~tylo.kernel.mathfn` (data
  values), :mod:`~tylo.kernel.memory` (global and shared memory),
  :mod:`~tylo.kernel.intrinsics` (indices, barriers, shuffles, inline PTX),
  :mod:`~tylo.kernel.atomics`, :mod:`~tylo.kernel.printf` (``print_``),
  :mod:`~tylo.kernel.local` (per-thread arrays), :mod:`~tylo.kernel.debug`
  (``TYLO_DEBUG_BOUNDS``);
- :mod:`~tylo.kernel.errors` (``TraceError``, ``KernelArgumentError``).

The package is callable: ``tylo.kernel`` is at once this package and the decorator
(``@tylo.kernel``, ``@tylo.kernel(index_bits=32)``), so the spelling works whichever way
Python's import system binds the name ``kernel`` on :mod:`tylo`.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

# public name -> the submodule that defines it. Each is imported on first use
# (:func:`__getattr__`), so that ``@tylo.kernel`` and a launch served by the disk cache
# import only the launch path (decorator, launch, guards, disk cache), never the tracer
# and its symbolic algebra (sympy): see docs/backend.md, "Cache".
_LAZY: dict[str, str] = {
    name: module
    for module, names in {
        "atomics": "atomic_add atomic_cas atomic_exch atomic_max atomic_min",
        "check_launch": "ArraySpec",
        "control": "all_of any_of range",
        "decorator": "Kernel KernelStats inline kernel",
        "errors": "BoundsProofError KernelArgumentError OutOfBoundsError "
        "OutOfBoundsLaunchError TraceError",
        "guards": "assume assume_aligned divisible",
        "intrinsics": "FULL_MASK WARP_SIZE block_dim block_idx grid_dim lane_id "
        "linear_thread_idx ptx shfl_down shfl_idx shfl_up shfl_xor sync_threads sync_warp "
        "thread_idx value warp_id",
        "launch": "CompiledKernel",
        "local": "LocalArray local",
        "mathfn": "abs exp exp2 fma log log2 maximum minimum pack_bf16x2 pack_f16x2 rsqrt "
        "sqrt where",
        "memory": "Tensor dynamic_shared shared view",
        "printf": "print_",
        "spec": "Dim Float Int Ptr Static pointer",
        "values": "Value",
    }.items()
    for name in names.split()
}

# the modules a launch served by the disk cache imports: none of them imports sympy
# (tests/host/test_warm_start.py)
_LAUNCH_PATH = frozenset({"decorator", "errors", "guards", "launch", "spec"})

__all__ = [
    "FULL_MASK",
    "WARP_SIZE",
    "ArraySpec",
    "BoundsProofError",
    "CompiledKernel",
    "Dim",
    "Float",
    "Int",
    "Kernel",
    "KernelArgumentError",
    "KernelStats",
    "LocalArray",
    "OutOfBoundsError",
    "OutOfBoundsLaunchError",
    "Ptr",
    "Static",
    "Tensor",
    "TraceError",
    "Value",
    "all_of",
    "any_of",
    "assume",
    "assume_aligned",
    "atomic_add",
    "atomic_cas",
    "atomic_exch",
    "atomic_max",
    "atomic_min",
    "block_dim",
    "block_idx",
    "divisible",
    "dynamic_shared",
    "exp",
    "exp2",
    "fma",
    "grid_dim",
    "inline",
    "kernel",
    "lane_id",
    "linear_thread_idx",
    "local",
    "log",
    "log2",
    "maximum",
    "minimum",
    "pack_bf16x2",
    "pack_f16x2",
    "pointer",
    "print_",
    "ptx",
    "rsqrt",
    "shared",
    "shfl_down",
    "shfl_idx",
    "shfl_up",
    "shfl_xor",
    "sqrt",
    "sync_threads",
    "sync_warp",
    "thread_idx",
    "value",
    "view",
    "warp_id",
    "where",
]


# ``tylo.kernel.abs`` and ``tylo.kernel.range`` are public, but ``from tylo.kernel import *``
# leaves them out so that it never replaces Python's builtins (tests/host/test_packaging.py)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None and not name.startswith("__"):
        # a submodule not imported yet (``tylo.kernel.facts`` after ``import tylo.kernel``)
        try:
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as err:
            if err.name != f"{__name__}.{name}":
                raise
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    if module not in _LAUNCH_PATH:
        importlib.import_module(f"{__name__}.ops")  # installs the elementwise funnel first
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


class _CallablePackage(types.ModuleType):
    """The module type of :mod:`tylo.kernel`: calling it is calling :func:`kernel`."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from tylo.kernel.decorator import kernel

        return kernel(*args, **kwargs)

    def __setattr__(self, name: str, value: Any) -> None:
        # importing the submodule ``tylo.kernel.local`` binds it on the package; the name
        # stays the function ``tylo.kernel.local`` (as the public names are)
        if isinstance(value, types.ModuleType) and _LAZY.get(name) == name:
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _CallablePackage
