"""Packing operands whose leading dimension is not a multiple of 8 elements.

The fast GEMM copies 16-byte vectors; a row that starts at an odd element offset cannot be
read that way, and the element-wise copy path is several times slower. :func:`pack_rows`
copies the (rows, cols) matrix into a scratch buffer whose rows are ``ldp`` elements apart,
``ldp`` the next multiple of 8 above ``cols`` (columns ``cols .. ldp-1`` zero-filled),
16-byte aligned, one block per row: one read and one write of each operand (about 30 us
each for A and B at
4099 x 4097 bf16 on an H200), after which the aligned kernel runs. Each thread writes one
16-byte vector, reading its 8 elements one by one (a warp's loads still cover 512
contiguous bytes of a row; the read-only path keeps the lines between them).
"""

from __future__ import annotations

from typing import Any

import tylo
from tylo.layouts._lazy import sympy

__all__ = ["BLOCK", "pack_rows", "pack_rows_kernel", "packed_ld"]

BLOCK = 128
VECTOR = 8  # 16-bit elements in 16 bytes


@tylo.kernel(index_bits=32)
def pack_rows_kernel(
    dst: tylo.Ptr(align=16),
    src,
    cols: tylo.Int(min=1),
    lds: tylo.Int(min=1),
    ldp: tylo.Int(min=VECTOR, multiple_of=VECTOR),
):
    r = tylo.block_idx.x  # one block per row
    for c in tylo.range(tylo.thread_idx.x * VECTOR, ldp, BLOCK * VECTOR):  # 16-byte vectors
        values = []
        for e in range(VECTOR):
            x = src.load(r * lds + sympy.Min(c + e, cols - 1), cache="nc")  # in bounds
            values.append(tylo.where(c + e < cols, x, 0.0))  # zeros past the row
        dst.store(r * ldp + c, tuple(values))


def packed_ld(cols: int) -> int:
    """The packed leading dimension: ``cols`` rounded up to a multiple of 8."""
    return -(-cols // VECTOR) * VECTOR


def pack_rows(dst: Any, src: Any, rows: int, cols: int, lds: int, *, stream: Any = None) -> int:
    """Launch the packing of ``src`` (``rows`` rows of ``cols`` elements, ``lds`` apart)
    into ``dst`` (16-byte aligned, at least ``rows * packed_ld(cols)`` elements); returns
    the packed leading dimension."""
    ldp = packed_ld(cols)
    pack_rows_kernel[rows, BLOCK](dst, src, cols, lds, ldp, stream=stream)
    return ldp
