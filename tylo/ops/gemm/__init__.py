"""The GEMM family: ``tylo.ops.gemm(a, b)`` computes ``a @ b`` on the fastest path the
operands allow (:mod:`tylo.ops.gemm.api`). Below it: the warp-MMA kernel
(:mod:`tylo.ops.gemm.kernel`, :mod:`tylo.ops.gemm.host`), the packing of unaligned operands
(:mod:`tylo.ops.gemm.pack`) and the Hopper TMA + wgmma kernel
(:mod:`tylo.ops.gemm.hopper_kernel`, :mod:`tylo.ops.gemm.hopper_host`). Command line:
``python -m tylo.ops.gemm M N K``."""

from __future__ import annotations

from tylo.ops._family import callable_family
from tylo.ops.gemm.api import gemm

__all__ = ["gemm"]

callable_family(__name__, "gemm")
