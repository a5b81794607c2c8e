"""tylo.layouts: CuTe-style ``shape:stride`` layouts with static or symbolic values.

Pure Python (sympy, numpy, stdlib): importing it never loads CUDA, llvmlite,
``tylo.backend`` or hypothesis. See ``docs/layouts.md``.
"""

from __future__ import annotations

from tylo.layouts.errors import (
    AssumptionError,
    ComplementError,
    CompositionError,
    DivisibilityError,
    InverseError,
    LayoutError,
    NotationError,
    ShapeError,
    StaticRequiredError,
    SwizzleError,
    UndecidableError,
)
from tylo.layouts.symbolic import (
    Dim,
    IndexSymbol,
    assuming,
    current_assumptions,
    decide,
    dim,
    divides,
    divisible,
    index_symbol,
    sample_assignment,
    substitute,
)

__all__ = [
    "AssumptionError",
    "ComplementError",
    "CompositionError",
    "Dim",
    "DivisibilityError",
    "IndexSymbol",
    "InverseError",
    "LayoutError",
    "NotationError",
    "ShapeError",
    "StaticRequiredError",
    "SwizzleError",
    "UndecidableError",
    "assuming",
    "current_assumptions",
    "decide",
    "dim",
    "divides",
    "divisible",
    "index_symbol",
    "sample_assignment",
    "substitute",
]
