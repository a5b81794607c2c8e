"""Moved to :mod:`tylo.tile.ownership`; this alias is kept for one release (0.2) and then removed.

Importing it warns and binds the old name to the new module itself, so attributes, private
helpers and monkeypatching behave exactly as on `tylo.tile.ownership`.
"""

from __future__ import annotations

import sys
import warnings

import tylo.tile.ownership as _moved

warnings.warn(
    "tylo.ownership moved to tylo.tile.ownership; import it from there (the old path is removed in tylo 0.2)",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
