"""tylo: composable tile programming for NVIDIA GPUs, in Python.

Importing :mod:`tylo` is cheap and pulls in no CUDA library: the kernel-facing names
below are resolved on first use, so ``import tylo.layouts`` stays pure (sympy, numpy,
stdlib) and works on any machine.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> module that defines it (resolved lazily by __getattr__)
_LAZY: dict[str, str] = {
    "TyloError": "tylo.errors",
}

__all__ = sorted(["__version__", *_LAZY])


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tylo' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
