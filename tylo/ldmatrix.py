"""Moved to :mod:`tylo.nvgpu.warp.ldmatrix`; this alias is kept for one release (0.2) and then removed.

Importing it warns and binds the old name to the new module itself, so attributes, private
helpers and monkeypatching behave exactly as on `tylo.nvgpu.warp.ldmatrix`.
"""

from __future__ import annotations

import sys
import warnings

import tylo.nvgpu.warp.ldmatrix as _moved

warnings.warn(
    "tylo.ldmatrix moved to tylo.nvgpu.warp.ldmatrix; import it from there (the old path is removed in tylo 0.2)",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
