"""The one mechanism behind the deprecated module paths of 0.1 (``tylo.ownership``,
``tylo.mma``, ...): importing an old path warns and binds it to the new module itself, so
attributes, private helpers and monkeypatching behave exactly as on the new path. The aliases
are removed in tylo 0.2 (docs/reading.md lists them)."""

from __future__ import annotations

import importlib
import sys
import warnings

__all__ = ["alias"]


def alias(old: str, new: str) -> None:
    """Make module ``old`` (being imported) the module ``new``, with a DeprecationWarning
    pointing at the importer."""
    warnings.warn(
        f"{old} moved to {new}; import it from there (the old path is removed in tylo 0.2)",
        DeprecationWarning,
        stacklevel=3,
    )
    sys.modules[old] = importlib.import_module(new)
