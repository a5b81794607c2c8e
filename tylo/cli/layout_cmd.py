"""``tylo layout``: a layout's size, cosize, rank and coordinate -> offset table; pictures."""

from __future__ import annotations

import argparse
from typing import Any

from tylo.cli.common import EXIT_OK, EXIT_UNAVAILABLE, CliError, Symbols, add_symbol_options

__all__ = ["add_parser", "run"]

EXAMPLES = """\
examples:
  tylo layout "((2,4),8):((1,16),2)"
  tylo layout "(8,8):(8,1)" --svg layout.svg
  tylo layout "S<3,3,3> o (8,64):(64,1)" --bank 2 --svg banks.svg
  tylo layout "((4,8),(2,2)):((32,1),(16,8))" --tv 16,8 --svg mma_c.svg
  tylo layout "(M,K):(1,lda)" --multiple-of M=8          (symbolic: sizes, then asks --set)
  tylo layout "(M,K):(1,lda)" --set M=8 --set K=2 --set lda=16
"""


def add_parser(sub: Any) -> None:
    """Register ``tylo layout``."""
    p = sub.add_parser(
        "layout",
        help="print a layout's size, cosize, rank and offset table; draw it",
        description="Print a CuTe-notation layout's size, cosize, rank, depth and its "
        "coordinate -> offset table (index, hierarchical coordinate, offset), and draw it "
        "as SVG (or PNG with cairosvg installed).",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("layout", metavar="LAYOUT", help="CuTe notation, e.g. '((2,4),8):((1,16),2)'")
    add_symbol_options(p, values=True)
    p.add_argument(
        "--limit", type=int, default=1024, help="rows of the table (0: all; default 1024)"
    )
    p.add_argument(
        "--bank",
        type=int,
        metavar="ELEM_BYTES",
        help="add each element's shared-memory bank ((offset*ELEM_BYTES//4) %% 32); "
        "the picture is coloured by bank",
    )
    p.add_argument(
        "--tv",
        metavar="TILE",
        help="read LAYOUT as a (thread, value) layout over a tile of shape TILE (e.g. 16,8): "
        "the table and picture show which thread and value hold each element (T0V1)",
    )
    p.add_argument("--svg", metavar="FILE", help="write an SVG picture")
    p.add_argument("--png", metavar="FILE", help="write a PNG picture (needs cairosvg)")
    p.set_defaults(run=run)


def _tile(text: str) -> tuple[int, ...]:
    parts = text.strip().strip("()").split(",")
    try:
        tile = tuple(int(s) for s in parts)
    except ValueError:
        raise CliError(f"--tv {text!r}: expected a static tile shape such as 16,8") from None
    if not tile or any(s < 1 for s in tile):
        raise CliError(f"--tv {text!r}: every extent of the tile must be >= 1")
    return tile


def _crd(c: Any) -> str:
    return "(" + ",".join(_crd(e) for e in c) + ")" if isinstance(c, tuple) else str(c)


def _table(layout: Any, limit: int, bank: int | None) -> list[str]:
    from tylo.layouts import idx2crd, size
    from tylo.pictures import bank_of

    n = int(size(layout))
    shown = n if limit <= 0 else min(n, limit)
    rows = [("index", "coordinate", "offset", *(("bank",) if bank else ()))]
    for i in range(shown):
        off = layout(i)
        extra = (str(bank_of(int(off), bank)),) if bank else ()
        rows.append((str(i), _crd(idx2crd(i, layout.shape)), str(off), *extra))
    widths = [max(len(r[k]) for r in rows) for k in range(len(rows[0]))]
    out = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    if shown < n:
        out.append(f"... {n - shown} more (--limit 0 prints all {n})")
    return out


def _tv_table(layout: Any, tile: tuple[int, ...], limit: int) -> list[str]:
    from math import prod

    from tylo.layouts import idx2crd
    from tylo.pictures import tv_owner_table

    owners = tv_owner_table(layout, tile, what="tylo layout --tv")
    n = prod(tile)
    shown = n if limit <= 0 else min(n, limit)
    out = ["index  coordinate  owners"]
    for i in range(shown):
        held = " ".join(f"T{t}V{v}" for t, v in owners.get(i, [])) or "-"
        out.append(f"{i:<5}  {_crd(idx2crd(i, tile)):<10}  {held}")
    if shown < n:
        out.append(f"... {n - shown} more (--limit 0 prints all {n})")
    return out


def run(args: argparse.Namespace) -> int:
    """Run ``tylo layout``; returns the exit status."""
    from tylo.layouts import depth, rank, size
    from tylo.pictures import PNG_INSTALL_HINT, PictureError, bank_svg, layout_svg, tv_svg

    if args.bank is not None and args.bank < 1:
        raise CliError(f"--bank {args.bank}: the element size in bytes must be >= 1")
    syms = Symbols(args)
    layout = syms.substitute(syms.layout(args.layout))
    print(f"layout  {layout}")
    print(f"size    {size(layout)}")
    static_shape = not _free(size(layout))
    print(f"cosize  {_cosize(layout)}")
    print(f"rank    {rank(layout)}")
    print(f"depth   {depth(layout)}")
    missing = sorted(s.name for s in layout.free_symbols)
    if missing:
        print(f"symbols {', '.join(missing)}")
    if not static_shape:
        shape_syms = sorted(s.name for s in size(layout).free_symbols)
        need = " ".join(f"--set {n}=..." for n in shape_syms)
        print(f"the table needs values for {', '.join(shape_syms)} (the shape): {need}")
    elif args.tv:
        print()
        print("\n".join(_tv_table(layout, _tile(args.tv), args.limit)))
    else:
        if args.bank and missing:
            raise CliError(f"--bank needs static offsets; give {', '.join(missing)} with --set")
        print()
        print("\n".join(_table(layout, args.limit, args.bank)))
    if args.svg or args.png:
        if missing:
            raise CliError(
                f"a picture needs a static layout; give {', '.join(missing)} with --set NAME=VALUE"
            )
        if args.tv:
            svg = tv_svg(layout, _tile(args.tv))
        elif args.bank:
            svg = bank_svg(layout, args.bank)
        else:
            svg = layout_svg(layout)
        if args.svg:
            _write(args.svg, svg)
        if args.png:
            from tylo.pictures import svg_to_png

            try:
                svg_to_png(svg, args.png)
            except PictureError as err:
                if "cairosvg" in str(err):
                    raise CliError(f"--png: {PNG_INSTALL_HINT}", EXIT_UNAVAILABLE) from None
                raise
            print(f"wrote {args.png}")
    return EXIT_OK


def _cosize(layout: Any) -> Any:
    from tylo.layouts import LayoutError, cosize

    try:
        return cosize(layout)
    except LayoutError as err:  # a symbolic swizzled layout: enumeration needs values
        return f"unknown ({err})"


def _free(x: Any) -> bool:
    return bool(getattr(x, "free_symbols", None))


def _write(path: str, text: str) -> None:
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as err:
        raise CliError(f"cannot write {path}: {err}", 1) from None
    print(f"wrote {path}")
