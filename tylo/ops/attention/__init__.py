"""Streaming attention forward: ``O = softmax(Q Kᵀ · scale) V``; ``tylo.ops.attention(q, k, v)``
(:mod:`tylo.ops.attention.api`). See :mod:`tylo.ops.attention.reference` for the exact
semantics (masks, empty rows, log-sum-exp) every path is checked against. Command line:
``python -m tylo.ops.attention B H L D``."""

from __future__ import annotations

from tylo.ops._family import callable_family
from tylo.ops.attention.api import attention

__all__ = ["attention"]

callable_family(__name__, "attention")
