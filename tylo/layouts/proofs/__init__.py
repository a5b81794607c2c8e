"""Provers of layout properties: injective, contiguous, aligned, bounded, equal.

Each ``prove_*`` function takes a Layout or a ComposedLayout (swizzled; thread-value
layouts are ordinary layouts) and returns a three-valued :class:`Verdict`: proved (with
the rule and the assumptions used), disproved (with a replayed counterexample and a hint
naming the missing assumption) or unknown (with the open obligation and a launch-time
:class:`Guard`). :func:`require` turns a verdict that is not proved into a typed error.
See ``docs/proofs.md``.

>>> from tylo.layouts import Layout, dim
>>> M, K, lda = dim("M"), dim("K"), dim("lda")
>>> bool(prove_injective(Layout((M, K), (1, lda)), assuming=[lda >= M]))
True
"""

from __future__ import annotations

from tylo.layouts.proofs.aligned import prove_aligned
from tylo.layouts.proofs.bounded import prove_bounded
from tylo.layouts.proofs.contiguous import prove_contiguous
from tylo.layouts.proofs.equal import prove_equal
from tylo.layouts.proofs.errors import (
    GuardError,
    ProofArgumentError,
    ProofError,
    ProofInternalError,
    PropertyDisproved,
    PropertyUnproved,
)
from tylo.layouts.proofs.guards import Guard
from tylo.layouts.proofs.injective import prove_injective
from tylo.layouts.proofs.obligation import Atom, Obligation
from tylo.layouts.proofs.require import require
from tylo.layouts.proofs.verdict import Verdict

__all__ = [
    "Atom",
    "Guard",
    "GuardError",
    "Obligation",
    "ProofArgumentError",
    "ProofError",
    "ProofInternalError",
    "PropertyDisproved",
    "PropertyUnproved",
    "Verdict",
    "prove_aligned",
    "prove_bounded",
    "prove_contiguous",
    "prove_equal",
    "prove_injective",
    "require",
]
