"""``python examples/vector_add/run.py N [--target sm_90a --compile-only | --emit ptx]``"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from tylo.ops.cli import Example, main, positive_int


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("n", type=positive_int, help="number of elements (>= 1)")


def kernels(args: argparse.Namespace, target: Any) -> dict[str, Any]:
    import tylo
    from examples.vector_add.kernel import BLOCK, vector_add

    f32 = tylo.f32
    return {"vector_add": vector_add.compile(f32, f32, f32, int, block=BLOCK, target=target)}


def run(args: argparse.Namespace) -> str:
    from examples.vector_add.kernel import verify

    err = verify(args.n, use_torch=args.torch, seed=args.seed)
    return f"n={args.n}, max abs error {err:.3g}"


EXAMPLE = Example(
    "vector_add", "c = a + b on the GPU, checked against numpy", add_arguments, kernels, run
)

if __name__ == "__main__":
    sys.exit(main(EXAMPLE))
