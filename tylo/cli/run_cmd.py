"""``tylo run FAMILY ...``: the command line of one of tylo's ops (``gemm``, ``attention``,
``softmax``), the same as ``python -m tylo.ops.FAMILY ...``: the same options, the same OK
line and the same exit statuses (0 verified, 1 failed or refused by tylo, 2 a usage error or
no GPU to run on). Everything after FAMILY goes to the op's command line unchanged."""

from __future__ import annotations

import argparse
import importlib
from typing import Any

__all__ = ["FAMILIES", "add_parser", "run"]

FAMILIES = ("gemm", "attention", "softmax")

EXAMPLES = """\
examples:
  tylo run gemm 4096 4096 4096 --target sm_90a --compile-only
  tylo run attention 2 8 1024 128 --causal
  tylo run softmax 512 4096 --mask bool
  tylo run gemm --help        the op's own options
"""


def add_parser(sub: Any) -> None:
    """Register ``tylo run``."""
    p = sub.add_parser(
        "run",
        help="run, verify or compile one of tylo's ops (gemm, attention, softmax)",
        description=__doc__.split("\n\n", 1)[0].replace("``", "'"),
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        add_help=True,
    )
    p.add_argument("family", choices=FAMILIES, help="which op")
    p.add_argument("args", nargs=argparse.REMAINDER, help="the op's arguments (see its --help)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Hand the arguments to ``tylo.ops.<family>``'s command line; its exit status."""
    cli = importlib.import_module(f"tylo.ops.{args.family}.cli")
    try:
        return int(cli.run_main(list(args.args)))
    except SystemExit as stop:  # the op's parser: --help, or a usage error already printed
        return stop.code if isinstance(stop.code, int) else 0 if stop.code is None else 1
