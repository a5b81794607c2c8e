"""A TMA tensor map inside a kernel: the 128-byte ``grid_constant`` parameter and its plan.

The host encodes the map (:class:`tylo.nvgpu.tma.TensorMap`); the kernel receives it by value
(``.param .align 64 .b8 p[128]``) and hands its generic address to the TMA instructions
(:mod:`tylo.nvgpu.tma`), which read the plan for the box, swizzle and shared layout.
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir

__all__ = ["TensorMapParam"]


class TensorMapParam:
    """The kernel-side view of a tensor-map parameter: ``plan`` (static, the
    :class:`~tylo.nvgpu.tma.TensorMapPlan` it was encoded from) and its IR argument."""

    __slots__ = ("arg", "name", "plan")

    def __init__(self, plan: Any, arg: ir.Value, name: str) -> None:
        self.plan = plan
        self.arg = arg
        self.name = name

    def address(self) -> ir.Value:
        """The tensor map's 64-bit generic address (``cvta.param`` of the grid_constant
        parameter), as TMA instructions take it."""
        from tylo.kernel.context import current

        return current().builder.ptrtoint(self.arg, ir.IntType(64))

    def __repr__(self) -> str:
        return f"TensorMapParam({self.name!r}, box={self.plan.box}, {self.plan.swizzle})"
