"""Each strategy of tylo.layouts.strategies reaches the cases its properties' rules are about
(issue 36: 0 mergeable negative-stride pairs in 2,000 draws once), at a rate of at least
``FLOOR`` (5%): negative-stride merges for coalesce, stride-0 modes, symbols at 1, extents
at the 2**31 and 2**63 edges, right operands below 0. The rows and predicates are
``tools/strategy_hits.py``'s (``python tools/strategy_hits.py`` prints the table); draws
are derandomized, so a rate that falls under the floor fails every time, not by luck."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from tylo.layouts import Layout, dim

ROOT = Path(__file__).resolve().parents[3]
DRAWS = 200


def _load_tool():
    spec = importlib.util.spec_from_file_location(
        "_strategy_hits", ROOT / "tools" / "strategy_hits.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


hits = _load_tool()
P = Layout.parse


@pytest.mark.parametrize("row", hits.ROWS, ids=[f"{r.rule} | {r.strategy}" for r in hits.ROWS])
def test_rate_is_above_the_floor(row):
    ((_, n_hits, n),) = hits.measure(DRAWS, (row,))
    assert n == DRAWS
    assert n_hits >= hits.FLOOR * n, (
        f"{row.strategy} reaches '{row.rule}' in {n_hits} of {n} draws, under the "
        f"{hits.FLOOR:.0%} floor: raise that case's share in the strategy"
    )


def test_the_predicates_tell_hits_from_misses():
    assert hits.neg_merge(P("(2,2):(-1,-2)")) and hits.neg_merge(P("(2,1,3):(-3,7,-6)"))
    assert not hits.neg_merge(P("(2,2):(-1,2)")) and not hits.neg_merge(P("(2,2):(1,2)"))
    assert not hits.neg_merge(P("(2,2):(-1,-3)"))
    assert hits.stride_zero(P("(1,2):(1,0)")) and not hits.stride_zero(P("(1,2):(0,1)"))
    assert hits.stride_zero(Layout((dim("N"), 2), (0, 1)))
    assert hits.negative_reach(P("(2,1):(1,-1)")) is False and hits.negative_reach(P("2:-1"))
    assert hits.reaches_negative(P("(2,2):(4,-1)")) and not hits.reaches_negative(P("4:1"))
    assert not hits.reaches_negative("not a layout")
    n = dim("N")
    lay = Layout((n, 4), (1, n))
    assert hits.symbol_at_one(((lay, ()), {n: 1}))
    assert not hits.symbol_at_one(((lay, ()), {n: 2}))
    edge = hits.extent_at(hits.EDGE_31)
    assert edge(Layout((3, 2**31), (1, 3))) and not edge(Layout((3, 2**32), (1, 3)))


def test_the_table_prints_each_row():
    rows = hits.ROWS[:2]
    text = hits.table([(rows[0], 3, 10), (rows[1], 0, 10)])
    assert "| 3/10 | 30.0% |" in text and "| 0/10 | 0.0% |" in text
