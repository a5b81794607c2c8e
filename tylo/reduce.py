"""Moved: the host-side recipe to :mod:`tylo.tile.reduce`, the kernel-side ``reduce`` to
:mod:`tylo.tile.fragment`. This alias is kept for one release (0.2) and then removed."""

from __future__ import annotations

import warnings

from tylo.tile.fragment import reduce
from tylo.tile.reduce import (
    REDUCTION_OPS,
    ReductionError,
    ReductionPlan,
    fold_pairwise,
    reduction_plan,
    reduction_scratch,
)

__all__ = [
    "REDUCTION_OPS",
    "ReductionError",
    "ReductionPlan",
    "fold_pairwise",
    "reduce",
    "reduction_plan",
    "reduction_scratch",
]

warnings.warn(
    "tylo.reduce moved to tylo.tile.reduce (the recipe) and tylo.tile.fragment (reduce); "
    "import them from there (the old path is removed in tylo 0.2)",
    DeprecationWarning,
    stacklevel=2,
)
