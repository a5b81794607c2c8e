"""What every ``tylo`` subcommand shares: exit statuses, the usage error, the parser class,
and symbols given on the command line (``--dim``, ``--multiple-of``, ``--set``,
``--assume``).

Exit statuses (documented once, in ``docs/cli.md``; the examples' command lines use the
same): 0 success (``prove``: proved), 1 the operation's answer is no or it failed
(``prove``: disproved; ``compile``: a compile or trace error), 2 a usage error (bad
options, values or notation; argparse's own status), 3 unknown (``prove`` only), 69
something needed is not installed (libNVVM, nvdisasm, cairosvg; ``EX_UNAVAILABLE`` of
``sysexits.h``).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
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
    "nonempty_path",
    "parse_int",
    "shown",
    "static_int",
]

EXIT_OK = 0
EXIT_FAILED = 1  # prove: disproved; compile: the kernel does not compile
EXIT_USAGE = 2  # a bad command line (argparse's status; the examples' command lines too)
EXIT_UNKNOWN = 3  # prove: neither proved nor disproved
EXIT_UNAVAILABLE = 69  # sysexits.h EX_UNAVAILABLE: a needed tool or package is missing

#: The most digits an integer on the command line may have (far below Python's own
#: 4300-digit conversion limit, far above any size a GPU or a layout can use).
MAX_DIGITS = 1000
_SHOWN = 60  # a value longer than this is shortened in messages


class CliError(TyloError):
    """A ``tylo`` command that cannot do what it was asked; ``status`` is its exit status."""

    def __init__(self, message: str, status: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.status = status


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors exit with :data:`EXIT_USAGE`."""

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


def shown(text: str) -> str:
    """``repr(text)``, shortened in the middle when it is long (a 5000-digit value)."""
    if len(text) <= _SHOWN:
        return repr(text)
    return repr(text[: _SHOWN // 2] + "..." + text[-10:]) + f" ({len(text)} characters)"


def parse_int(
    text: str, option: str, minimum: int | None = None, maximum: int | None = None
) -> int:
    """The decimal integer ``text`` given to ``option``, within ``[minimum, maximum]``
    (either may be None); a :class:`CliError` (usage) otherwise, also for more than
    :data:`MAX_DIGITS` digits (never Python's int-conversion ValueError)."""
    t = text.strip() if isinstance(text, str) else ""
    if not re.fullmatch(r"[+-]?\d+", t):
        raise CliError(f"{option} {shown(str(text))}: expected an integer")
    if len(t.lstrip("+-").lstrip("0")) > MAX_DIGITS:
        raise CliError(
            f"{option} {shown(t)}: an integer of more than {MAX_DIGITS} digits is not a size"
        )
    v = int(t)
    if minimum is not None and v < minimum:
        raise CliError(f"{option} {shown(t)}: must be >= {minimum}")
    if maximum is not None and v > maximum:
        raise CliError(f"{option} {shown(t)}: must be <= {maximum}")
    return v


def nonempty_path(text: str, option: str, example: str = "out.svg") -> str:
    """``text`` as a file path for ``option``; an empty path is a usage error."""
    if not text.strip():
        raise CliError(f"{option} {text!r}: give a file name, such as {option} {example}")
    return text


def _pair(text: str, option: str) -> tuple[str, int]:
    name, sep, value = text.partition("=")
    name = name.strip()
    if not sep or not _NAME.match(name):
        raise CliError(f"{option} {shown(text)}: expected NAME=INTEGER, such as {option} M=16")
    return name, parse_int(value, f"{option} {name}=")


class Symbols:
    """The symbol table of one command: ``name -> tylo.layouts.Dim`` (with facts), shared
    by every layout and assumption parsed, plus the values given with ``--set``."""

    def __init__(self, args: argparse.Namespace) -> None:
        from tylo.layouts import dim

        multiples: dict[str, int] = {}
        for text in args.multiple_of:
            name, k = _pair(text, "--multiple-of")
            if k < 1:
                raise CliError(f"--multiple-of {shown(text)}: K must be >= 1, got {k}")
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
                raise CliError(f"--set {shown(text)}: {name} is {need} (its facts)")
            self.values[name] = v

    def layout(self, text: str, what: str = "LAYOUT") -> Any:
        """Parse CuTe notation (a Layout or a swizzled ComposedLayout) with these symbols."""
        from tylo.layouts import LayoutError, Swizzle, parse

        try:
            x = parse(text, self.table)
        except LayoutError as err:
            raise CliError(f"{what} {shown(text)}: {err}") from None
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
            raise CliError(f"{what} {shown(text)}: {err}") from None

    def fact(self, text: str, subjects: Sequence[Any] = ()) -> Any:
        """Parse one ``--assume``: ``A >= B`` (also ``>``, ``<=``, ``<``, ``==``) or a
        divisibility ``K | E`` / ``divisible(E, K)``. A relation between numbers that is
        true is returned as ``True`` (nothing to assume); a false one is refused. When
        ``subjects`` (the layouts and parameter expressions proved) are given, a fact that
        names a symbol none of them has is refused: it would silently assume nothing."""
        import sympy

        from tylo.layouts import divisible

        m = re.fullmatch(r"\s*divisible\s*\((.*),(.*)\)\s*", text)
        if m:
            e, k = self.expr(m.group(1), "--assume"), self.expr(m.group(2), "--assume")
            self._known(text, (e, k), subjects)
            return divisible(e, k)
        if "|" in text:
            k_text, _, e_text = text.partition("|")
            e, k = self.expr(e_text, "--assume"), self.expr(k_text, "--assume")
            self._known(text, (e, k), subjects)
            return divisible(e, k)
        m = re.fullmatch(r"(.*?)(>=|<=|==|>|<)(.*)", text)
        if not m:
            raise CliError(
                f"--assume {shown(text)}: expected a relation such as 'lda >= M' (>=, >, <=, "
                "<, ==) or a divisibility such as '8 | M' or 'divisible(M, 8)'"
            )
        a, op, b = self.expr(m.group(1), "--assume"), m.group(2), self.expr(m.group(3), "--assume")
        self._known(text, (a, b), subjects)
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
            raise CliError(f"--assume {shown(text)} is false; an assumption must be satisfiable")
        return rel

    @staticmethod
    def _known(text: str, sides: Sequence[Any], subjects: Sequence[Any]) -> None:
        if not subjects:
            return
        have: set[str] = set()
        for x in subjects:
            have |= {s.name for s in getattr(x, "free_symbols", ())}
        used = {s.name for x in sides for s in getattr(x, "free_symbols", ())}
        unknown = sorted(used - have)
        if unknown:
            raise CliError(
                f"--assume {shown(text)}: {', '.join(unknown)} is not a symbol of what is "
                f"proved (its symbols: {', '.join(sorted(have)) or 'none'})"
            )

    def substitute(self, obj: Any) -> Any:
        """``obj`` with the ``--set`` values in place of their symbols; a ``--set`` of a
        name ``obj`` does not have is a usage error (a misspelt name would be ignored)."""
        from tylo.layouts import substitute

        have = sorted({s.name for s in getattr(obj, "free_symbols", ())})
        for name in self.values:
            if name not in have:
                raise CliError(
                    f"--set {name}=...: {obj} has no symbol {name} "
                    f"({'its symbols: ' + ', '.join(have) if have else 'it has no symbols'})"
                )
        return substitute(obj, self.values) if self.values else obj


def static_int(text: str, option: str, minimum: int = 1) -> int:
    """An integer option value of at least ``minimum``; CliError otherwise."""
    return parse_int(text, option, minimum)
