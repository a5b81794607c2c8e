"""Typed errors of :mod:`tylo.layouts.proofs`.

All derive from :class:`ProofError`, itself a :class:`tylo.layouts.errors.LayoutError`, so
``except LayoutError`` catches every layout failure. Unsatisfiable assumptions raise the
layouts' own :class:`~tylo.layouts.errors.AssumptionError`.
"""

from __future__ import annotations

from typing import Any

from tylo.layouts.errors import LayoutError

__all__ = [
    "GuardError",
    "ProofArgumentError",
    "ProofError",
    "ProofInternalError",
    "PropertyDisproved",
    "PropertyUnproved",
]


class ProofError(LayoutError):
    """Base class of the errors raised by the provers and by :func:`require`.

    ``verdict`` holds the :class:`~tylo.layouts.proofs.verdict.Verdict` that caused the
    error (None for argument errors).
    """

    def __init__(self, message: str, *, verdict: Any = None) -> None:
        super().__init__(message)
        self.verdict = verdict


class PropertyDisproved(ProofError):
    """``require`` was given a disproved verdict: a replayed counterexample exists."""


class PropertyUnproved(ProofError):
    """``require`` was given an unknown verdict: neither proved nor disproved; the
    verdict's ``obligation`` and ``guard`` say what to check at launch."""


class ProofArgumentError(ProofError):
    """A prover was called with invalid arguments (a mode out of range, a vector width that
    is not a positive static int, an object that is not a layout)."""


class GuardError(ProofError):
    """A guard was called without a value for one of the symbols it needs, or with a
    value that is not an int."""


class ProofInternalError(ProofError):
    """A counterexample failed its replay on the concrete layout: a bug in the provers.
    Never reported as a verdict."""
