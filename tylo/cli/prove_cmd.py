"""``tylo prove``: run one of the layout provers and print its verdict; the exit status is
0 proved, 1 disproved, 3 unknown (2 is a usage error). A static layout that no rule
settles and that is too large to enumerate (``tylo.layouts.SizeBudgetError``) is
unknown, with the budget as the reason."""

from __future__ import annotations

import argparse
from typing import Any

from tylo.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_UNKNOWN,
    CliError,
    Symbols,
    add_symbol_options,
    static_int,
)

__all__ = ["PROPERTIES", "add_parser", "run", "verdict_lines"]

PROPERTIES = ("injective", "contiguous", "aligned", "bounded", "equal")

EXAMPLES = """\
examples:
  tylo prove injective "(M,K):(1,lda)" --assume "lda >= M"               -> proved (0)
  tylo prove injective "(M,K):(1,lda)"                                   -> disproved (1)
  tylo prove contiguous "(M,K):(1,lda)" --vector 8 --multiple-of M=8 --assume "lda >= M"
  tylo prove aligned "(M,K):(1,lda)" --vector 8 --elem-bytes 2 --assume "8 | M" --assume "8 | lda"
  tylo prove bounded "(M,K):(1,lda)" --extent "lda*(K-1)+M" --assume "lda >= M"
  tylo prove equal "(M,N):(1,M)" "M*N:1"

exit status: 0 proved, 1 disproved, 2 usage error, 3 unknown.
"""


def add_parser(sub: Any) -> None:
    """Register ``tylo prove``."""
    p = sub.add_parser(
        "prove",
        help="prove a layout injective, contiguous, aligned, bounded or equal to another",
        description="Prove a property of a layout for every allowed value of its symbols. "
        "Prints the verdict, the reason, and a replayed counterexample (disproved) or the "
        "open obligation and the launch-time guard (unknown). Exit status: 0 proved, "
        "1 disproved, 2 usage error, 3 unknown.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("property", choices=PROPERTIES, metavar="PROPERTY", help=" | ".join(PROPERTIES))
    p.add_argument("layout", metavar="LAYOUT", help="CuTe notation, e.g. '(M,K):(1,lda)'")
    p.add_argument("other", nargs="?", metavar="LAYOUT2", help="the second layout (equal only)")
    add_symbol_options(p, values=False)
    p.add_argument(
        "--assume",
        action="append",
        default=[],
        metavar="FACT",
        help="a fact: 'lda >= M' (>=, >, <=, <, ==) or '8 | M' / 'divisible(M, 8)'",
    )
    p.add_argument("--vector", help="contiguous, aligned: the vector width in elements")
    p.add_argument(
        "--mode", default="0", help="contiguous, aligned: the vectorized mode (default 0)"
    )
    p.add_argument("--elem-bytes", help="aligned: the element size in bytes")
    p.add_argument("--align", default="16", help="aligned: the alignment in bytes (default 16)")
    p.add_argument("--base", default="0", help="aligned, bounded: the start offset (an expression)")
    p.add_argument("--extent", help="bounded: the allocation's extent in elements (an expression)")
    p.set_defaults(run=run)


def _need(args: argparse.Namespace, name: str, prop: str) -> str:
    value = getattr(args, name.replace("-", "_"))
    if value is None:
        raise CliError(f"tylo prove {prop}: --{name} is required")
    return value


def verdict_lines(v: Any) -> list[str]:
    """The lines ``tylo prove`` prints for verdict ``v``."""
    out = [f"{v.property}: {v.status}", f"subject: {v.subject}", f"reason: {v.reason}"]
    if v.hint:
        out.append(f"hint: {v.hint}")
    if v.counterexample is not None:
        values = ", ".join(f"{k}={val}" for k, val in sorted(v.values.items()))
        out.append(f"counterexample: {values or '(no symbols)'}")
        w = v.witness or {}
        for key in sorted(w):
            out.append(f"  {key}: {w[key]}")
    if v.obligation is not None and not v.proved:
        out.append(f"obligation: {v.obligation}")
    if v.guard is not None and not v.proved:
        out.append(f"guard: {v.guard}")
    if v.assumptions:
        out.append("assumptions: " + "; ".join(_fact_text(a) for a in v.assumptions))
    return out


def _fact_text(fact: Any) -> str:
    import sympy

    if isinstance(fact, sympy.Eq):  # sympy prints Eq(a, b); the command line wrote a == b
        return f"{fact.lhs} == {fact.rhs}"
    return str(fact)


def run(args: argparse.Namespace) -> int:
    """Run ``tylo prove``; returns 0 proved, 1 disproved, 3 unknown."""
    from tylo.layouts import (
        ProofArgumentError,
        SizeBudgetError,
        prove_aligned,
        prove_bounded,
        prove_contiguous,
        prove_equal,
        prove_injective,
    )

    prop = args.property
    syms = Symbols(args)
    layout = syms.layout(args.layout)
    if (args.other is not None) != (prop == "equal"):
        raise CliError(
            "tylo prove equal takes two layouts"
            if prop == "equal"
            else f"tylo prove {prop} takes one layout, got a second: {args.other!r}"
        )
    other = syms.layout(args.other, "LAYOUT2") if prop == "equal" else None
    subject = f"{layout} and {other}" if other is not None else str(layout)
    try:
        base = syms.expr(args.base, "--base") if prop in ("aligned", "bounded") else 0
        extent = syms.expr(_need(args, "extent", prop), "--extent") if prop == "bounded" else 0
        subjects = [layout, other, base, extent]
        facts = tuple(f for f in (syms.fact(t, subjects) for t in args.assume) if f is not True)
        if prop == "injective":
            v = prove_injective(layout, assuming=facts)
        elif prop == "contiguous":
            vector = static_int(_need(args, "vector", prop), "--vector")
            mode = static_int(args.mode, "--mode", 0)
            v = prove_contiguous(layout, vector=vector, mode=mode, assuming=facts)
        elif prop == "aligned":
            v = prove_aligned(
                layout,
                vector=static_int(_need(args, "vector", prop), "--vector"),
                elem_bytes=static_int(_need(args, "elem-bytes", prop), "--elem-bytes"),
                mode=static_int(args.mode, "--mode", 0),
                base=base,
                align=static_int(args.align, "--align"),
                assuming=facts,
            )
        elif prop == "bounded":
            v = prove_bounded(layout, extent=extent, base=base, assuming=facts)
        else:
            v = prove_equal(layout, other, assuming=facts)
    except ProofArgumentError as err:
        raise CliError(f"tylo prove {prop}: {err}") from None
    except SizeBudgetError as err:  # no rule settles it; enumerating it is over the budget
        print(f"{prop}: unknown")
        print(f"subject: {subject}")
        print(f"reason: {err}")
        return EXIT_UNKNOWN
    print("\n".join(verdict_lines(v)))
    return EXIT_OK if v.proved else EXIT_FAILED if v.disproved else EXIT_UNKNOWN
