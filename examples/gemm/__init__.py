"""Warp-MMA GEMM example: see :mod:`examples.gemm.kernel`; run ``python examples/gemm/run.py M N K``."""
