"""The ``tylo`` console command: ``layout``, ``prove``, ``compile``, ``cache``, ``doctor``, ``run``.

Installed as ``tylo`` (``[project.scripts]``) and runnable as ``python -m tylo.cli``. Every
subcommand has ``--help`` with examples; the manual is ``docs/cli.md``. Exit statuses:
0 success (``prove``: proved), 1 disproved or failed, 2 usage error, 3 unknown
(``prove``), 69 a needed component is not installed (see :mod:`tylo.cli.common`).

>>> main(["layout", "(2,2):(2,1)", "--limit", "1"])
layout  (2,2):(2,1)
size    4
cosize  4
rank    2
depth   1
<BLANKLINE>
index  coordinate  offset
0      (0,0)       0
... 3 more (--limit 0 prints all 4)
0
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from tylo.cli import cache_cmd, compile_cmd, doctor_cmd, layout_cmd, prove_cmd, run_cmd
from tylo.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_UNAVAILABLE,
    EXIT_UNKNOWN,
    EXIT_USAGE,
    CliError,
    Parser,
)
from tylo.errors import TyloError

__all__ = [
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_UNAVAILABLE",
    "EXIT_UNKNOWN",
    "EXIT_USAGE",
    "CliError",
    "build_parser",
    "main",
]

EPILOG = """\
exit status: 0 success (prove: proved), 1 disproved or failed, 2 usage error,
3 unknown (prove), 69 a needed component is not installed.

examples:
  tylo layout "((2,4),8):((1,16),2)"
  tylo prove injective "(M,K):(1,lda)" --assume "lda >= M"
  tylo compile kernels.py:vector_add --arg a=ptr:f32 --arg b=ptr:f32 --arg out=ptr:f32 \\
      --arg n=int --block 256 --emit ptx
  tylo cache info
  tylo doctor
"""


def build_parser() -> argparse.ArgumentParser:
    """The ``tylo`` argument parser with every subcommand."""
    import tylo

    p = Parser(
        prog="tylo",
        description="tylo: layouts, proofs and kernels for NVIDIA GPUs from the command line.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"tylo {tylo.__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for module in (layout_cmd, prove_cmd, compile_cmd, cache_cmd, doctor_cmd, run_cmd):
        module.add_parser(sub)
    return p


def _status(err: TyloError) -> int:
    from tylo.backend.errors import ToolchainError
    from tylo.layouts import LayoutError
    from tylo.layouts.proofs import ProofInternalError
    from tylo.pictures import PictureError

    if isinstance(err, CliError):
        return err.status
    if isinstance(err, PictureError):
        return EXIT_USAGE  # what was asked cannot be drawn (too large, not a layout)
    if isinstance(err, ToolchainError):
        return EXIT_UNAVAILABLE
    if isinstance(err, LayoutError) and not isinstance(err, ProofInternalError):
        return EXIT_USAGE  # the layout or its symbols as given cannot be used
    return EXIT_FAILED


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``tylo`` command with ``argv`` (default ``sys.argv[1:]``); returns the exit
    status (see the module docstring). Errors are one line on stderr, no traceback."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return int(args.run(args))
    except TyloError as err:
        print(f"tylo {args.command}: error: {err}", file=sys.stderr)
        return _status(err)
    except BrokenPipeError:  # `tylo ... | head`: the reader left; stop quietly (Python's
        # signal module docs, "Note on SIGPIPE")
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FAILED
