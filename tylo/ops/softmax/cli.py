"""``python -m tylo.ops.softmax ROWS COLS [--style lane|warp|mma] [--dtype f32|bf16]
[--out-dtype f32|bf16] [--mask none|length|bool] [--pad P]``

Row softmax of a ``ROWS x COLS`` array, checked against float64 on fresh random data (with
``-inf`` entries, and masks with fully masked rows). Without ``--style`` the best style for
the row length is picked. ``--target sm_90a --compile-only`` and ``--emit llvm|ptx|sass``
need no GPU.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from tylo.ops.cli import Example, main, non_negative_int, positive_int


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("rows", type=positive_int, help="number of rows (>= 1)")
    parser.add_argument("cols", type=positive_int, help="row length (>= 1)")
    parser.add_argument(
        "--style",
        choices=("lane", "warp", "mma"),
        default=None,
        help="ownership style (default: the best for the row length)",
    )
    parser.add_argument("--dtype", choices=("f32", "bf16"), default="f32", help="input type")
    parser.add_argument(
        "--out-dtype", choices=("f32", "bf16"), default=None, help="output type (default: input)"
    )
    parser.add_argument(
        "--mask",
        choices=("none", "length", "bool"),
        default="none",
        help="masking: none, a valid length per row, or a boolean mask (True keeps)",
    )
    parser.add_argument(
        "--pad", type=non_negative_int, default=0, help="pad every row by this many elements"
    )


def config(args: argparse.Namespace) -> Any:
    """The configuration a run would use (16-byte aligned rows unless padded otherwise)."""
    from tylo.ops.softmax.plan import choose_config, vector_width

    itemsize = 4 if args.dtype == "f32" else 2
    out_size = 4 if (args.out_dtype or args.dtype) == "f32" else 2
    ld = args.cols + args.pad
    aligned = (ld * itemsize) % 16 == 0 and (ld * out_size) % 16 == 0
    vec = vector_width(itemsize, args.cols, aligned)
    if args.style == "mma" and vec < 2 and args.cols % 2 == 0 and ld % 2 == 0:
        vec = 2
    if args.mask == "bool" and vec >= 4 and ld % vec:
        vec = 2 if args.cols % 2 == 0 else 1
    cc = (9, 0)
    if args.target:
        from tylo.target import Target

        cc = Target.parse(args.target).cc
    return choose_config(
        args.rows, args.cols, vec=vec, itemsize=itemsize, mask=args.mask, style=args.style, cc=cc
    )


def kernels(args: argparse.Namespace, target: Any) -> dict[str, Any]:
    from tylo.ops.softmax.host import compile_softmax, kernel_for

    cfg = config(args)
    k = compile_softmax(cfg, args.dtype, args.out_dtype, target)
    return {f"{kernel_for(cfg).name}[{cfg.describe()}]": k}


def run(args: argparse.Namespace) -> str:
    from tylo.ops.softmax.host import verify

    r = verify(
        args.rows,
        args.cols,
        style=args.style,
        dtype=args.dtype,
        out_dtype=args.out_dtype,
        mask=args.mask,
        use_torch=args.torch,
        seed=args.seed,
        pad=args.pad,
    )
    return (
        f"{args.rows}x{args.cols} {args.dtype}, mask {args.mask}: {r['config'].describe()}; "
        f"relative error {r['rel_error']:.3g} (float64 reference, seed {r['seed']})"
    )


EXAMPLE = Example(
    "softmax",
    "row softmax over register fragments (lane-local, warp-striped or MMA-layout rows), "
    "checked against float64",
    add_arguments,
    kernels,
    run,
    prog="python -m tylo.ops.softmax",
)


def run_main(argv: list[str]) -> int:
    """The command line (:func:`tylo.ops.cli.main`); returns the exit status."""
    return main(EXAMPLE, argv)


if __name__ == "__main__":
    sys.exit(run_main(sys.argv[1:]))
