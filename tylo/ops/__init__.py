"""tylo's kernels, ready to call: array in, array out, in the conventions of torch and numpy.

- :func:`tylo.ops.gemm` ``(a, b)``: ``a @ b``, routed between the Hopper kernel (TMA +
  wgmma), the packed path and the warp-MMA kernel;
- :func:`tylo.ops.attention` ``(q, k, v)``: the streaming attention forward, warp-MMA or
  Hopper path;
- :func:`tylo.ops.softmax` ``(x)``: row softmax with masking.

Each family is also a package (``tylo.ops.gemm.host``, ``.kernel``, ...) holding the lower
levels for experts (explicit leading dimensions, configurations, schedules), and a command
line: ``python -m tylo.ops.gemm 4096 4096 4096 --compile-only``.
"""

from __future__ import annotations

from tylo.ops import attention, gemm, softmax

__all__ = ["attention", "gemm", "softmax"]
