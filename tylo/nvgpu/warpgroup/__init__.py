"""Warpgroup-level matrix operations (Hopper, sm_90a): ``wgmma`` atoms and their completion
(:mod:`.mma`), and the shared-memory matrix descriptors derived from tile layouts
(:mod:`.descriptor`)."""

from __future__ import annotations
