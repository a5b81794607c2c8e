"""``python examples/row_reduce/run.py ROWS COLS [--op sum|max] [--transpose] [--offset K]``
(``--target sm_90a --compile-only`` or ``--emit ptx`` need no GPU)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from tylo.ops.cli import Example, main, non_negative_int, positive_int


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("rows", type=positive_int, help="number of rows (>= 1)")
    parser.add_argument("cols", type=positive_int, help="row length (>= 1)")
    parser.add_argument("--op", choices=("sum", "max"), default="sum")
    parser.add_argument(
        "--transpose", action="store_true", help="read a column-major array (column stride != 1)"
    )
    parser.add_argument(
        "--offset",
        type=non_negative_int,
        default=0,
        help="start the data this many elements (>= 0) into its allocation",
    )


def kernels(args: argparse.Namespace, target: Any) -> dict[str, Any]:
    from examples.row_reduce.kernel import compile_for, plan

    rows, cols = args.rows, args.cols
    ld, cs = (1, rows) if args.transpose else (cols, 1)
    p = plan(rows, cols, ld, cs, 4 * args.offset, 4)
    k = compile_for(args.op, p["vec"], p["warps_per_row"], target)
    label = f"row_reduce_kernel[{args.op}, vec={p['vec']}, warps_per_row={p['warps_per_row']}]"
    return {label: k}


def run(args: argparse.Namespace) -> str:
    from examples.row_reduce.kernel import verify

    r = verify(
        args.rows,
        args.cols,
        args.op,
        use_torch=args.torch,
        seed=args.seed,
        transpose=args.transpose,
        offset=args.offset,
    )
    return (
        f"{args.op} over {args.rows}x{args.cols}: vec={r['vec']}, warps_per_row="
        f"{r['warps_per_row']}, max relative error {r['max_rel_error']:.3g}"
    )


EXAMPLE = Example(
    "row_reduce",
    "row sums or maxima of a 2-D array, checked against numpy",
    add_arguments,
    kernels,
    run,
)

if __name__ == "__main__":
    sys.exit(main(EXAMPLE))
