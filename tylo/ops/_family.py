"""One op family is both a package and a function: ``tylo.ops.gemm(a, b)`` calls the op,
``python -m tylo.ops.gemm`` runs its command line, and ``tylo.ops.gemm.host`` is still the
module below it. :func:`callable_family` gives the family package's module object a
``__call__`` that forwards to the op, so the two meanings never shadow each other."""

from __future__ import annotations

import sys
import types
from typing import Any

__all__ = ["callable_family"]


def callable_family(module_name: str, op_name: str) -> None:
    """Make the (already imported) package ``module_name`` callable as its ``op_name``."""

    class _Family(types.ModuleType):
        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            return getattr(self, op_name)(*args, **kwargs)

    _Family.__name__ = f"{op_name}_family"
    _Family.__call__.__doc__ = f"Call :func:`{module_name}.{op_name}`."
    sys.modules[module_name].__class__ = _Family
