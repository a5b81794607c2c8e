"""Row softmax over fragments (``docs/softmax.md``): ``tylo.ops.softmax(x)``
(:mod:`tylo.ops.softmax.api`); lane-local, warp-striped and MMA-layout ownership, with
masking. The kernels are in :mod:`tylo.ops.softmax.kernel`, the planning in
:mod:`tylo.ops.softmax.plan`, launching and verification in :mod:`tylo.ops.softmax.host`.
Command line: ``python -m tylo.ops.softmax ROWS COLS``."""

from __future__ import annotations

from tylo.ops._family import callable_family
from tylo.ops.softmax.api import softmax

__all__ = ["softmax"]

callable_family(__name__, "softmax")
