"""How often the hypothesis strategies of ``tylo.layouts.strategies`` reach the cases a
property's rule is about (issue 36: a strategy drew 0 mergeable negative-stride pairs in
2,000 draws, so the coalesce rule for them was never exercised).

Each row is (rule, strategy, predicate): the predicate decides, by looking at the drawn
value's shape and stride tuples directly (never through tylo's algebra), whether the
draw reaches the case. Draws come from ``@given`` with ``derandomize=True``, so they are
the values a property sees and the table is reproducible.

Run from the repository root::

    PYTHONPATH=$PWD python tools/strategy_hits.py            # 400 draws per row
    PYTHONPATH=$PWD python tools/strategy_hits.py --draws 2000

``tests/host/layouts/test_strategy_hits.py`` asserts every rate is at least ``FLOOR``.
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sympy
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tylo.layouts import Layout
from tylo.layouts import strategies as S

FLOOR = 0.05
"""The lowest hit rate a row may have (``test_strategy_hits.py`` enforces it)."""

EDGE_31 = (2**31 - 1, 2**31, 2**31 + 1)
EDGE_63 = (2**63 - 1, 2**63, 2**63 + 1)


def flat(t: Any) -> tuple:
    """The leaves of a nested tuple, in order (a scalar is one leaf)."""
    return tuple(x for e in t for x in flat(e)) if type(t) is tuple else (t,)


def modes(x: Any) -> list[tuple[Any, Any]]:
    """The (extent, stride) leaves of a Layout."""
    return list(zip(flat(x.shape), flat(x.stride)))


def neg_merge(x: Layout) -> bool:
    """Two adjacent modes (extent-1 modes skipped, as coalesce drops them) that coalesce
    merges, with negative strides: ``d0 < 0`` and ``d1 == s0*d0``."""
    live = [(s, d) for s, d in modes(x) if s != 1]
    return any(d0 < 0 and d1 == s0 * d0 for (s0, d0), (_, d1) in itertools.pairwise(live))


def _not_one(s: Any) -> bool:
    return s != 1


def negative_reach(x: Layout) -> bool:
    """A negative stride on a mode of extent >= 2 (the layout reaches a negative offset)."""
    return any(s != 1 and d < 0 for s, d in modes(x))


def stride_zero(x: Layout) -> bool:
    """A mode of stride 0 whose extent is not 1 (a symbolic extent counts)."""
    return any(_not_one(s) and d == 0 for s, d in modes(x))


def reaches_negative(b: Any) -> bool:
    """A right operand (a plain layout) with a negative offset: composition evaluates A
    there, below its domain."""
    if not isinstance(b, Layout):
        return False
    return sum((s - 1) * d for s, d in modes(b) if d < 0) < 0


def symbol_at_one(case: tuple) -> bool:
    """Some symbol that is an extent of the layout is assigned 1."""
    (layout, _), values = case
    return any(isinstance(s, sympy.Symbol) and values.get(s) == 1 for s, _ in modes(layout))


def extent_at(edge: tuple) -> Callable[[Layout], bool]:
    def pred(x: Layout) -> bool:
        return any(s in edge for s, _ in modes(x))

    pred.__doc__ = f"an extent in {edge}"
    return pred


@dataclass(frozen=True)
class Row:
    rule: str
    strategy: str
    make: Callable[[], st.SearchStrategy]
    hit: Callable[[Any], bool]


def _with_values(max_value: int) -> st.SearchStrategy:
    return S.symbolic_layouts().flatmap(
        lambda c: st.tuples(st.just(c), S.assignments_for(c[0], c[1], max_value=max_value))
    )


ROWS: tuple[Row, ...] = (
    Row(
        "coalesce: mergeable negative-stride pair",
        "negative_stride_layouts()",
        lambda: S.negative_stride_layouts(),
        neg_merge,
    ),
    Row(
        "coalesce: mergeable negative-stride pair",
        "negative_stride_layouts(injective=True)",
        lambda: S.negative_stride_layouts(injective=True),
        neg_merge,
    ),
    Row(
        "negative stride on a mode of extent >= 2",
        "negative_stride_layouts()",
        lambda: S.negative_stride_layouts(),
        negative_reach,
    ),
    Row(
        "stride-0 mode of extent != 1",
        "strided_layouts()",
        lambda: S.strided_layouts(),
        stride_zero,
    ),
    Row("stride-0 mode of extent != 1", "layouts()", lambda: S.layouts(), stride_zero),
    Row(
        "stride-0 mode of extent != 1",
        "negative_stride_layouts()",
        lambda: S.negative_stride_layouts(),
        stride_zero,
    ),
    Row("stride-0 mode of extent != 1", "deep_layouts()", lambda: S.deep_layouts(), stride_zero),
    Row(
        "stride-0 mode of extent != 1",
        "symbolic_layouts()",
        lambda: S.symbolic_layouts().map(lambda c: c[0]),
        stride_zero,
    ),
    Row(
        "stride-0 mode of extent != 1",
        "composable_pairs() (B)",
        lambda: S.composable_pairs().map(lambda p: p[1]),
        stride_zero,
    ),
    Row(
        "stride-0 mode of extent != 1",
        "wide_composition_pairs() (B)",
        lambda: S.wide_composition_pairs().map(lambda p: p[1]),
        lambda b: isinstance(b, Layout) and stride_zero(b),
    ),
    Row(
        "composition: B reaches a negative index of A",
        "wide_composition_pairs() (B)",
        lambda: S.wide_composition_pairs().map(lambda p: p[1]),
        reaches_negative,
    ),
    Row(
        "symbol takes the value 1",
        "symbolic_layouts() + assignments_for(max_value=8)",
        lambda: _with_values(8),
        symbol_at_one,
    ),
    Row(
        "symbol takes the value 1",
        "symbolic_layouts() + assignments_for()",
        lambda: _with_values(40),
        symbol_at_one,
    ),
    Row(
        "extent at the 2**31 edge (2**31 +- 1)",
        "huge_layouts()",
        lambda: S.huge_layouts(),
        extent_at(EDGE_31),
    ),
    Row(
        "extent at the 2**63 edge (2**63 +- 1)",
        "huge_layouts()",
        lambda: S.huge_layouts(),
        extent_at(EDGE_63),
    ),
)


def draws(strategy: st.SearchStrategy, n: int) -> list:
    """``n`` values as ``@given`` draws them (derandomized: the same values every run)."""
    out: list = []

    @settings(
        max_examples=n,
        database=None,
        derandomize=True,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def collect(x: Any) -> None:
        out.append(x)

    collect()
    return out


def measure(n: int = 400, rows: tuple[Row, ...] = ROWS) -> list[tuple[Row, int, int]]:
    """(row, hits, draws) for each row."""
    out = []
    for row in rows:
        values = draws(row.make(), n)
        out.append((row, sum(1 for v in values if row.hit(v)), len(values)))
    return out


def table(results: list[tuple[Row, int, int]]) -> str:
    """The results as a markdown table."""
    lines = ["| rule | strategy | hits/draws | rate |", "|---|---|---|---|"]
    for row, hits, n in results:
        rate = hits / n if n else 0.0
        lines.append(f"| {row.rule} | `{row.strategy}` | {hits}/{n} | {rate:.1%} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--draws", type=int, default=400, help="draws per row (default 400)")
    args = p.parse_args(argv)
    if args.draws < 1:
        p.error("--draws must be >= 1")
    results = measure(args.draws)
    print(table(results))
    low = [f"{r.rule} / {r.strategy}" for r, h, n in results if h < FLOOR * n]
    if low:
        print(f"\nbelow the {FLOOR:.0%} floor: " + "; ".join(low))
    return 1 if low else 0


if __name__ == "__main__":
    raise SystemExit(main())
