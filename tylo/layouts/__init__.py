"""tylo.layouts: CuTe-style ``shape:stride`` layouts with static or symbolic values.

The whole CuTe layout algebra (names and argument orders as in CuTe and pycute), exact on
symbolic extents and strides: a condition is decided from the symbols' facts and the
assumptions in force, or an error names the fact that is missing. Pure Python (sympy,
numpy, stdlib): importing it never loads CUDA, llvmlite, ``tylo.backend`` or hypothesis.
Hypothesis strategies live in :mod:`tylo.layouts.strategies`; the manual is
``docs/layouts.md``.

>>> from tylo.layouts import Layout, composition, logical_divide
>>> str(logical_divide(Layout((6, 8), (8, 1)), (3, 4)))
'((3,2),(4,2)):((8,24),(1,4))'
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tylo.layouts.algebra import coalesce, complement, filter_
from tylo.layouts.compose import composition
from tylo.layouts.divide import flat_divide, logical_divide, tiled_divide, zipped_divide
from tylo.layouts.errors import (
    AssumptionError,
    ComplementError,
    CompositionError,
    DivisibilityError,
    InverseError,
    LayoutError,
    NotationError,
    ShapeError,
    SizeBudgetError,
    StaticRequiredError,
    SwizzleError,
    UndecidableError,
)
from tylo.layouts.inttuple import crd2idx, idx2crd
from tylo.layouts.inverse import left_inverse, right_inverse
from tylo.layouts.layout import (
    Layout,
    cosize,
    depth,
    flatten,
    group_modes,
    make_layout,
    rank,
    select,
    size,
)
from tylo.layouts.parse import parse
from tylo.layouts.product import (
    blocked_product,
    flat_product,
    logical_product,
    make_ordered_layout,
    raked_product,
    tile_to_shape,
    tiled_product,
    zipped_product,
)
from tylo.layouts.proofs import (
    Guard,
    GuardError,
    ProofArgumentError,
    ProofError,
    PropertyDisproved,
    PropertyUnproved,
    Verdict,
    prove_aligned,
    prove_bounded,
    prove_contiguous,
    prove_equal,
    prove_injective,
    require,
)
from tylo.layouts.swizzle import ComposedLayout, Swizzle, byte_swizzle
from tylo.layouts.symbolic import (
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
from tylo.layouts.tv import make_tv_layout, tv_coords, tv_owners

if TYPE_CHECKING:
    from tylo.layouts._swizzle_xor import SwizzleXor
    from tylo.layouts._symbols import Dim, IndexSymbol

__all__ = [
    "AssumptionError",
    "ComplementError",
    "ComposedLayout",
    "CompositionError",
    "Dim",
    "DivisibilityError",
    "Guard",
    "GuardError",
    "IndexSymbol",
    "InverseError",
    "Layout",
    "LayoutError",
    "NotationError",
    "ProofArgumentError",
    "ProofError",
    "PropertyDisproved",
    "PropertyUnproved",
    "ShapeError",
    "SizeBudgetError",
    "StaticRequiredError",
    "Swizzle",
    "SwizzleError",
    "SwizzleXor",
    "UndecidableError",
    "Verdict",
    "assuming",
    "blocked_product",
    "byte_swizzle",
    "coalesce",
    "complement",
    "composition",
    "cosize",
    "crd2idx",
    "current_assumptions",
    "decide",
    "depth",
    "dim",
    "divides",
    "divisible",
    "filter_",
    "flat_divide",
    "flat_product",
    "flatten",
    "group_modes",
    "idx2crd",
    "index_symbol",
    "left_inverse",
    "logical_divide",
    "logical_product",
    "make_layout",
    "make_ordered_layout",
    "make_tv_layout",
    "parse",
    "prove_aligned",
    "prove_bounded",
    "prove_contiguous",
    "prove_equal",
    "prove_injective",
    "raked_product",
    "rank",
    "require",
    "right_inverse",
    "sample_assignment",
    "select",
    "size",
    "substitute",
    "tile_to_shape",
    "tiled_divide",
    "tiled_product",
    "tv_coords",
    "tv_owners",
    "zipped_divide",
    "zipped_product",
]


def __getattr__(name: str) -> Any:
    # sympy classes: sympy is imported when one is first named (static layouts need none)
    if name in ("Dim", "IndexSymbol"):
        from tylo.layouts import _symbols

        return getattr(_symbols, name)
    if name == "SwizzleXor":
        from tylo.layouts._swizzle_xor import SwizzleXor

        return SwizzleXor
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
