"""What every ``tylo`` subcommand shares: exit statuses, the usage error, the parser class,
and symbols given on the command line (``--dim``, ``--multiple-of``, ``--set``,
``--assume``).

Exit statuses (documented in ``docs/cli.md``): 0 success (``prove``: proved), 1 the
operation's answer is no or it failed (``prove``: disproved; ``compile``: a compile or
trace error), 2 unknown (``prove`` only), 64 a usage error (bad options or notation; the
``EX_USAGE`` of ``sysexits.h``), 69 something needed is not installed (libNVVM,
nvdisasm, cairosvg; ``EX_UNAVAILABLE``).
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any, NoReturn

from tylo.errors import TyloError

__all__ = [
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_UNAVAILABLE",
    "EXIT_UNKNOWN",
    "EXIT_USAGE",
    "CliError",
    "Parser",
    "Symbols",
    "add_symbol_options",
]

EXIT_OK = 0
EXIT_FAILED = 1  # prove: disproved; compile: the kernel does not compile
EXIT_UNKNOWN = 2  # prove: neither proved nor disproved
EXIT_USAGE = 64  # sysexits.h EX_USAGE
EXIT_UNAVAILABLE = 69  # sysexits.h EX_UNAVAILABLE: a needed tool or package is missing


class CliError(TyloError):
    """A ``tylo`` command that cannot do what it was asked; ``status`` is its exit status."""

    def __init__(self, message: str, status: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.status = status


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors exit with :data:`EXIT_USAGE` (argparse's own
    2 is ``prove``'s "unknown")."""

    def error(self, message: str) -> NoReturn:
        """Print the usage and ``message`` to stderr and exit with :data:`EXIT_USAGE`."""
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def add_symbol_options(p: argparse.ArgumentParser, *, values: bool) -> None:
    """Add ``--dim``, ``--multiple-of`` (and ``--set`` when ``values``) to ``p``."""
    g = p.add_argument_group("symbols")
    g.add_argument(
        "--dim",
        action="append",
        default=[],
        metavar="NAME[,NAME...]",
        help="declare positive integer symbols (names in the notation are symbols anyway)",
    )
    g.add_argument(
        "--multiple-of",
        action="append",
        default=[],
        metavar="NAME=K",
        help="the fact K | NAME (tylo.layouts.dim(NAME, multiple_of=K))",
    )
    if values:
        g.add_argument(
            "--set",
            action="append",
            default=[],
            metavar="NAME=VALUE",
            help="give a symbol a value (>= 1, a multiple of its --multiple-of)",
        )


_NAME = re.compile(r"^[A-Za-z_][A-Za-z_0-9]*$")


def _pair(text: str, option: str) -> tuple[str, int]:
    name, sep, value = text.partition("=")
    name, value = name.strip(), value.strip()
    if not sep or not _NAME.match(name) or not re.fullmatch(r"-?\d+", value):
        raise CliError(f"{option} {text!r}: expected NAME=INTEGER, such as {option} M=16")
    return name, int(value)


class Symbols:
    """The symbol table of one command: ``name -> tylo.layouts.Dim`` (with facts), shared
    by every layout and assumption parsed, plus the values given with ``--set``."""

    def __init__(self, args: argparse.Namespace) -> None:
        from tylo.layouts import dim

        multiples: dict[str, int] = {}
        for text in args.multiple_of:
            name, k = _pair(text, "--multiple-of")
            if k < 1:
                raise CliError(f"--multiple-of {text!r}: K must be >= 1, got {k}")
            multiples[name] = k
        names = [n.strip() for group in args.dim for n in group.split(",") if n.strip()]
        for name in names:
            if not _NAME.match(name):
                raise CliError(f"--dim {name!r}: a symbol name is a Python identifier")
        self.table: dict[str, Any] = {
            n: dim(n, multiple_of=multiples.get(n, 1)) for n in [*names, *multiples]
        }
        self.values: dict[str, int] = {}
        for text in getattr(args, "set", []):
            name, v = _pair(text, "--set")
            k = multiples.get(name, 1)
            if v < 1 or v % k:
                need = "a positive integer" + (f" and a multiple of {k}" if k > 1 else "")
                raise CliError(f"--set {text!r}: {name} is {need} (its facts), got {v}")
            self.values[name] = v

    def layout(self, text: str, what: str = "LAYOUT") -> Any:
        """Parse CuTe notation (a Layout or a swizzled ComposedLayout) with these symbols."""
        from tylo.layouts import LayoutError, Swizzle, parse

        try:
            x = parse(text, self.table)
        except LayoutError as err:
            raise CliError(f"{what} {text!r}: {err}") from None
        if isinstance(x, Swizzle):
            raise CliError(
                f"{what} {text!r} is a bare swizzle; compose it with a layout: "
                f"'{text} o (8,64):(64,1)'"
            )
        return x

    def expr(self, text: str, what: str) -> Any:
        """Parse one integer expression over the symbols (``lda*(K-1)+M``)."""
        from tylo.layouts import LayoutError
        from tylo.layouts.parse import _Parser
        from tylo.layouts.symbolic import to_value

        try:
            p = _Parser(text, self.table)
            if not p.tokens:
                raise CliError(f"{what}: empty expression")
            value = p.expr()
            p.done()
            return to_value(value)
        except LayoutError as err:
            raise CliError(f"{what} {text!r}: {err}") from None

    def fact(self, text: str) -> Any:
        """Parse one ``--assume``: ``A >= B`` (also ``>``, ``<=``, ``<``, ``==``) or a
        divisibility ``K | E`` / ``divisible(E, K)``. A relation between numbers that is
        true is returned as ``True`` (nothing to assume); a false one is refused."""
        import sympy

        from tylo.layouts import divisible

        m = re.fullmatch(r"\s*divisible\s*\((.*),(.*)\)\s*", text)
        if m:
            return divisible(self.expr(m.group(1), "--assume"), self.expr(m.group(2), "--assume"))
        if "|" in text:
            k, _, e = text.partition("|")
            return divisible(self.expr(e, "--assume"), self.expr(k, "--assume"))
        m = re.fullmatch(r"(.*?)(>=|<=|==|>|<)(.*)", text)
        if not m:
            raise CliError(
                f"--assume {text!r}: expected a relation such as 'lda >= M' (>=, >, <=, <, ==) "
                "or a divisibility such as '8 | M' or 'divisible(M, 8)'"
            )
        a, op, b = self.expr(m.group(1), "--assume"), m.group(2), self.expr(m.group(3), "--assume")
        rel = {
            ">=": sympy.Ge,
            "<=": sympy.Le,
            ">": sympy.Gt,
            "<": sympy.Lt,
            "==": sympy.Eq,
        }[op](a, b)
        if rel is sympy.true:
            return True  # trivially true: nothing to assume
        if rel is sympy.false:
            raise CliError(f"--assume {text!r} is false; an assumption must be satisfiable")
        return rel

    def substitute(self, obj: Any) -> Any:
        """``obj`` with the ``--set`` values in place of their symbols."""
        from tylo.layouts import substitute

        return substitute(obj, self.values) if self.values else obj


def static_int(text: str, option: str, minimum: int = 1) -> int:
    """An integer option value of at least ``minimum``; CliError otherwise."""
    try:
        v = int(text)
    except ValueError:
        raise CliError(f"{option} {text!r}: expected an integer") from None
    if v < minimum:
        raise CliError(f"{option} {text!r}: must be >= {minimum}")
    return v
