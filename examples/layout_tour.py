"""A short tour of tylo.layouts: layouts, the algebra, a swizzle picture, symbolic results.

Run ``python examples/layout_tour.py`` (``--verify`` also checks every printed result
against brute force and exits non-zero on a mismatch). Pure Python: no GPU needed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tylo.layouts import (
    Layout,
    Swizzle,
    UndecidableError,
    assuming,
    coalesce,
    complement,
    composition,
    dim,
    divisible,
    index_symbol,
    logical_divide,
    logical_product,
    make_tv_layout,
    right_inverse,
    size,
    substitute,
    tv_coords,
    zipped_divide,
)
from tylo.layouts.tv import MMA_M16N8K16_C_TV


def grid(fn, rows: int, cols: int, width: int = 4) -> str:
    """An ASCII picture: cell (r, c) shows fn(r, c)."""
    head = " " * 6 + "".join(f"{c:>{width}}" for c in range(cols))
    lines = [head]
    for r in range(rows):
        lines.append(f"r{r:<4} " + "".join(f"{fn(r, c):>{width}}" for c in range(cols)))
    return "\n".join(lines)


def section(title: str) -> None:
    print(f"\n== {title} " + "=" * max(0, 70 - len(title)))


def tour() -> dict:
    """Print the tour; return the results that verify() checks."""
    out = {}
    section("layouts: shape:stride, colexicographic coordinates")
    row_major = Layout((4, 8), (8, 1))
    print(f"row-major 4x8 tile   {row_major}   L(1,2) = {row_major(1, 2)}")
    nested = Layout.parse("((2,2),8):((1,16),2)")
    print(f"nested               {nested}   offsets 0..7: {[nested(i) for i in range(8)]}")

    section("the algebra")
    a = Layout((128, 64), (64, 1))
    tiles = zipped_divide(a, (64, 32))
    print(f"zipped_divide({a}, <64,32>) = {tiles}")
    print(f"   tile (i,j) -> offset of its first element: tiles[1] = {tiles[1]}")
    comp = composition(Layout((6, 2), (8, 2)), Layout((4, 3), (3, 1)))
    print(f"composition((6,2):(8,2), (4,3):(3,1)) = {comp}")
    print(f"complement((2,2):(1,6), 24) = {complement(Layout((2, 2), (1, 6)), 24)}")
    print(f"logical_product((2,2):(4,1), 6:1) = {logical_product(Layout((2, 2), (4, 1)), 6)}")
    print(f"right_inverse((2,4,6):(4,1,8)) = {right_inverse(Layout((2, 4, 6), (4, 1, 8)))}")
    out.update(tiles=tiles, a=a, comp=comp)

    section("a swizzle: S<3,3,3> o (8,64):(64,1) on element offsets")
    sw = composition(Swizzle(3, 3, 3), Layout((8, 64), (64, 1)))
    print("row r, 8-element chunk c (16 bytes of bf16) -> the chunk slot it lands in")
    print(grid(lambda r, c: sw(r, 8 * c) % 64 // 8, 8, 8))
    print(
        "every row and every column holds each slot once: 8 consecutive rows read by "
        "ldmatrix hit 8 different bank groups"
    )
    print(
        f"a bijection on [0, {size(sw)}): "
        f"{sorted(sw(i) for i in range(size(sw))) == list(range(512))}"
    )
    out.update(sw=sw)

    section("who owns what: mma.m16n8k16 accumulator (16x8), thread of each element")
    owner = {}
    for t in range(32):
        for v, crd in enumerate(tv_coords(MMA_M16N8K16_C_TV, (16, 8), t)):
            owner[crd] = (t, v)
    print(grid(lambda r, c: f"T{owner[(r, c)][0]}", 16, 8, width=5))
    tile, tv = make_tv_layout(Layout((16, 8), (8, 1)), Layout((1, 8)))
    print(f"cp.async 16B copy, threads (16,8):(8,1), values (1,8): tile {tile}, TV {tv}")
    out.update(owner=owner)

    section("symbolic: runtime extents, exact answers")
    m, k = dim("M"), dim("K")
    n = dim("N", multiple_of=128)
    lda = dim("lda")
    print(f"coalesce((M,4):(1,M))          = {coalesce(Layout((m, 4), (1, m)))}")
    print(f"coalesce((16,N/128):(8,128))   = {coalesce(Layout((16, n / 128), (8, 128)))}")
    print(f"right_inverse((16,K):(1,16))   = {right_inverse(Layout((16, k), (1, 16)))}")
    gmem = Layout((m, k), (1, lda))
    print(f"A in global memory             = {gmem}")
    tid = index_symbol("tid", upper=128)
    print(f"thread tid's offset in (128,4):(1,128): {Layout((128, 4), (1, 128))(tid)}")
    print(f"logical_divide(A, <64,32>) rounds up: {logical_divide(gmem, (64, 32))}")
    try:
        logical_divide(gmem, 64)
    except UndecidableError as e:
        print(f"logical_divide(A, 64:1) needs a fact:\n   {e}")
    m64, k32 = dim("M", multiple_of=64), dim("K", multiple_of=32)
    with assuming(lda >= m64, divisible(lda, 8)):
        g = Layout((m64, k32), (1, lda))
        blocks = zipped_divide(g, (64, 32))
    print(f"with M%64 == 0, K%32 == 0, lda >= M: zipped_divide = {blocks}")
    values = {"M": 128, "K": 64, "lda": 136}
    print(f"   at {values}: {substitute(blocks, values)}")
    out.update(blocks=blocks, g=g, values=values)
    return out


def verify(results: dict) -> bool:
    """Check the tour's results against brute force."""
    ok = True
    a, tiles = results["a"], results["tiles"]
    offsets = sorted(tiles(i) for i in range(size(tiles)))
    ok &= offsets == sorted(a(i) for i in range(size(a)))
    comp = results["comp"]
    b, bb = Layout((6, 2), (8, 2)), Layout((4, 3), (3, 1))
    ok &= all(comp(i) == b(bb(i)) for i in range(size(bb)))
    sw = results["sw"]
    ok &= sorted(sw(i) for i in range(512)) == list(range(512))
    ok &= len(results["owner"]) == 128
    blocks = substitute(results["blocks"], results["values"])
    g = substitute(results["g"], results["values"])
    ok &= sorted(blocks(i) for i in range(size(blocks))) == sorted(g(i) for i in range(size(g)))
    return bool(ok)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="A tour of tylo.layouts")
    ap.add_argument("--verify", action="store_true", help="check results by brute force")
    args = ap.parse_args(argv)
    results = tour()
    if args.verify:
        good = verify(results)
        print(f"\nverify: {'ok' if good else 'MISMATCH'}")
        return 0 if good else 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
