"""Warp-level matrix operations: ``mma.sync`` atoms and tiled MMA plans (:mod:`.mma`), and
the ``ldmatrix`` operand loads derived from their ownerships (:mod:`.ldmatrix`)."""

from __future__ import annotations
