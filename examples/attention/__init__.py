"""Streaming attention forward: ``O = softmax(Q Kᵀ · scale) V``; see :mod:`examples.attention.reference`
for the exact semantics (masks, empty rows, log-sum-exp) every path is checked against."""
