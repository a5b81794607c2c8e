"""``tylo layout``: a layout's size, cosize, rank and coordinate -> offset table; pictures."""

from __future__ import annotations

import argparse
from typing import Any

from tylo.cli.common import (
    EXIT_OK,
    EXIT_UNAVAILABLE,
    CliError,
    Symbols,
    add_symbol_options,
    nonempty_path,
    parse_int,
    shown,
)

__all__ = ["MAX_ROWS", "add_parser", "run"]

#: The most rows a table prints (``--limit`` larger, or ``--limit 0`` of a larger layout,
#: is a usage error): the table is built in memory, and 2**40 rows never finish.
MAX_ROWS = 1 << 16

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
        "--limit",
        default="1024",
        help=f"rows of the table (0: all, up to {MAX_ROWS}; default 1024)",
    )
    p.add_argument(
        "--bank",
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
    if not all(p.strip().lstrip("+-").isdigit() for p in parts):
        raise CliError(f"--tv {shown(text)}: expected a static tile shape such as 16,8")
    tile = tuple(parse_int(p, f"--tv {shown(text)}: an extent") for p in parts)
    if any(s < 1 for s in tile):
        raise CliError(f"--tv {shown(text)}: every extent of the tile must be >= 1")
    return tile


def _rows(n: int, limit: int) -> int:
    """How many of ``n`` rows to print for ``--limit limit`` (0: all), at most MAX_ROWS."""
    if limit == 0 and n > MAX_ROWS:
        raise CliError(
            f"--limit 0: the table has {n} rows, more than the {MAX_ROWS} a table prints; "
            f"give --limit N with N <= {MAX_ROWS}"
        )
    return n if limit == 0 else min(n, limit)


def _crd(c: Any) -> str:
    return "(" + ",".join(_crd(e) for e in c) + ")" if isinstance(c, tuple) else str(c)


def _table(layout: Any, limit: int, bank: int | None) -> list[str]:
    from tylo.layouts import idx2crd, size

    if bank:
        from tylo.pictures import bank_of
    n = int(size(layout))
    count = _rows(n, limit)
    rows = [("index", "coordinate", "offset", *(("bank",) if bank else ()))]
    for i in range(count):
        off = layout(i)
        extra = (str(bank_of(int(off), bank)),) if bank else ()
        rows.append((str(i), _crd(idx2crd(i, layout.shape)), str(off), *extra))
    widths = [max(len(r[k]) for r in rows) for k in range(len(rows[0]))]
    out = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    return out + _more(n, count)


def _more(n: int, count: int) -> list[str]:
    if count >= n:
        return []
    if n > MAX_ROWS:
        return [f"... {n - count} more (a table prints at most {MAX_ROWS} rows)"]
    return [f"... {n - count} more (--limit 0 prints all {n})"]


def _tv_table(layout: Any, tile: tuple[int, ...], limit: int) -> list[str]:
    from math import prod

    from tylo.layouts import idx2crd
    from tylo.pictures import tv_owner_table

    owners = tv_owner_table(layout, tile, what="tylo layout --tv")
    n = prod(tile)
    count = _rows(n, limit)
    out = ["index  coordinate  owners"]
    for i in range(count):
        held = " ".join(f"T{t}V{v}" for t, v in owners.get(i, [])) or "-"
        out.append(f"{i:<5}  {_crd(idx2crd(i, tile)):<10}  {held}")
    return out + _more(n, count)


def run(args: argparse.Namespace) -> int:
    """Run ``tylo layout``; returns the exit status."""
    from math import prod

    from tylo.layouts import depth, rank, size

    limit = parse_int(args.limit, "--limit", 0, MAX_ROWS)
    bank = None if args.bank is None else parse_int(args.bank, "--bank", 1, 1 << 20)
    tile = _tile(args.tv) if args.tv is not None else None
    for option in ("svg", "png"):
        if getattr(args, option) is not None:
            nonempty_path(getattr(args, option), f"--{option}")
    syms = Symbols(args)
    layout = syms.substitute(syms.layout(args.layout))
    if not _free(size(layout)):  # refuse an unbounded table before printing anything
        _rows(prod(tile) if tile is not None else int(size(layout)), limit)
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
    elif tile is not None:
        print()
        print("\n".join(_tv_table(layout, tile, limit)))
    else:
        if bank and missing:
            raise CliError(f"--bank needs static offsets; give {', '.join(missing)} with --set")
        print()
        print("\n".join(_table(layout, limit, bank)))
    if args.svg is not None or args.png is not None:
        if missing:
            raise CliError(
                f"a picture needs a static layout; give {', '.join(missing)} with --set NAME=VALUE"
            )
        from tylo.pictures import PNG_INSTALL_HINT, PictureError, bank_svg, layout_svg, tv_svg

        if tile is not None:
            svg = tv_svg(layout, tile)
        elif bank:
            svg = bank_svg(layout, bank)
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
