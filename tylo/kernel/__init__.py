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

import sys
import types
from typing import Any

from tylo.kernel import ops as _ops  # noqa: F401 - installs the elementwise funnel first
from tylo.kernel.atomics import atomic_add, atomic_cas, atomic_exch, atomic_max, atomic_min
from tylo.kernel.check_launch import ArraySpec
from tylo.kernel.control import all_of, any_of, range  # noqa: F401 - tylo.kernel.range (not in __all__)
from tylo.kernel.decorator import Kernel, KernelStats, inline, kernel
from tylo.kernel.errors import (
    BoundsProofError,
    KernelArgumentError,
    OutOfBoundsError,
    OutOfBoundsLaunchError,
    TraceError,
)
from tylo.kernel.guards import assume, assume_aligned, divisible
from tylo.kernel.intrinsics import (
    FULL_MASK,
    WARP_SIZE,
    block_dim,
    block_idx,
    grid_dim,
    lane_id,
    linear_thread_idx,
    ptx,
    shfl_down,
    shfl_idx,
    shfl_up,
    shfl_xor,
    sync_threads,
    sync_warp,
    thread_idx,
    value,
    warp_id,
)
from tylo.kernel.launch import CompiledKernel
from tylo.kernel.local import LocalArray, local
from tylo.kernel.mathfn import (
    abs,  # noqa: F401 - tylo.kernel.abs (not in __all__: it would shadow the builtin)
    exp,
    exp2,
    fma,
    log,
    log2,
    maximum,
    minimum,
    pack_bf16x2,
    pack_f16x2,
    rsqrt,
    sqrt,
    where,
)
from tylo.kernel.memory import Tensor, dynamic_shared, shared, view
from tylo.kernel.printf import print_
from tylo.kernel.spec import Dim, Float, Int, Ptr, Static, pointer
from tylo.kernel.values import Value

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


class _CallablePackage(types.ModuleType):
    """The module type of :mod:`tylo.kernel`: calling it is calling :func:`kernel`."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return kernel(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
