"""The peer-parity tier: every case of CUTLASS's pycute tests and CuTe's core unit tests
(``cases.py``) run through tylo and judged by its defining property (``judge.py``), each
refusal checked by brute force. ``python -m tests.host.layouts.peers.report`` prints the
table. A case fails here when tylo is silently wrong, crashes with an untyped error, or
refuses although a result exists without a documented reason (a message that claims no
result exists when one does counts as such)."""

from __future__ import annotations

from functools import lru_cache

import pytest

from tests.host.layouts.peers import brute
from tests.host.layouts.peers.cases import GROUPS, SYMBOLIC
from tests.host.layouts.peers.judge import (
    _claims_none,
    _stricter,
    check,
    complement_ok,
    composition_ok,
)
from tests.host.layouts.peers.report import all_verdicts, table
from tylo.layouts import Layout, parse

ACCEPTED = {"pass", "refused_correct", "refused_stricter"}

STATIC = [(g.source, c) for g in GROUPS for c in g.cases]


@lru_cache(maxsize=1)
def _verdicts() -> tuple:
    """Every case judged once per session (the table and the per-case tests share it)."""
    return tuple(all_verdicts())


def _id(case: object) -> str:
    return f"{case.op}{case.args}".replace(" ", "")


@pytest.mark.parametrize("k", range(len(STATIC)), ids=[_id(c) for _, c in STATIC])
def test_peer_case(k: int) -> None:
    v = _verdicts()[k]
    assert v.text.startswith(STATIC[k][1].op)
    assert v.outcome in ACCEPTED, f"{v.outcome}: {v.text} -> {v.result}: {v.detail}"


@pytest.mark.parametrize(
    "k", range(len(SYMBOLIC)), ids=[_id(c) + f"/{c.multiple_of}" for c in SYMBOLIC]
)
def test_peer_case_symbolic(k: int) -> None:
    v = _verdicts()[len(STATIC) + k]
    assert "with N" in v.text
    assert v.outcome in ACCEPTED, f"{v.outcome}: {v.text} -> {v.result}: {v.detail}"


def test_table_accounts_for_every_case(capsys: pytest.CaptureFixture) -> None:
    verdicts = list(_verdicts())
    text = table(verdicts)
    print(text)
    assert len(verdicts) == len(STATIC) + len(SYMBOLIC)
    counts = {}
    for line in text.splitlines()[2:11]:
        label, _, n = line.rpartition(" ")
        counts[label.strip()] = int(n)
    listed = sum(v for k, v in counts.items() if k != "cases run" and "exact" not in k)
    assert listed == counts["cases run"] == len(verdicts)
    for v in verdicts:
        if v.outcome != "pass":
            assert v.text in text, v.text


# ---- the judge itself must be able to fail ----------------------------------------


@pytest.mark.parametrize(
    "op,args,bad",
    [
        ("coalesce", ("(2,4):(1,2)",), "8:2"),
        ("coalesce", ("(2,4):(1,2)",), "(2,4):(1,2)"),  # same function, not fewest modes
        ("composition", ("(4,3):(3,1)", "6:2"), "6:2"),
        ("composition", ("(4,3):(3,1)", "(4,3)"), "12:1"),  # right function? no: shape
        ("left_inverse", ("(2,4):(4,1)",), "8:1"),
        ("right_inverse", ("(2,4):(4,1)",), "8:1"),
        ("complement", ("4:2", 16), "2:1"),  # does not cover [0, 16)
        ("complement", ("4:2", 16), "(2,2):(1,16)"),  # leaves 8..15 uncovered
        ("logical_divide", ("6:1", "2:3"), "(2,3):(1,2)"),  # mode 0 is not A o B
        ("logical_product", ("3:1", "4:1"), "(3,4):(1,4)"),  # mode 1 is not C o B
        # no complement of (2,2):(1,3) for 3 exists: A o (B, 1:0) is no divide
        ("logical_divide", ("3:1", "(2,2):(1,3)"), "((2,2),1):((1,3),0)"),
        # ordered and injective with L, but 2 is never covered (was judged through tylo)
        ("complement", ("(2,2):(1,3)", 3), "1:0"),
        ("complement", ("(4,6):(1,6)", 5), "1:0"),  # 4 is not covered
        # swizzled inverses, judged with the brute-force swizzle evaluator
        ("left_inverse", ("S<1,0,2> o (4,4):(4,1)",), "S<1,0,2> o (4,4):(4,1)"),
        ("left_inverse", ("S<1,0,2> o (4,4):(4,1)",), "(4,4):(4,1)"),  # swizzle dropped
        ("right_inverse", ("S<1,0,1> o (4,4):(8,1)",), "S<1,2,1> o 4:8"),
        ("right_inverse", ("S<1,0,2> o (4,4):(1,4)",), "16:1"),  # swizzle dropped
        ("left_inverse", ("(2,2):(1,2)",), "2:1"),  # offsets 2, 3 outside R's domain
        ("right_inverse", ("4:1",), "8:1"),  # R(i) past size(L)
    ],
)
def test_judge_rejects_wrong_results(op: str, args: tuple, bad: str) -> None:
    ops = tuple(parse(a) if isinstance(a, str) else a for a in args)
    ok, why = check(op, ops, parse(bad))
    assert not ok and why


def test_judge_accepts_known_results() -> None:
    assert complement_ok(parse("4:2"), 16, parse("(2,2):(1,8)"))[0]
    assert composition_ok(parse("(4,3):(3,1)"), parse("6:2"), parse("(2,3):(6,1)"))[0]
    # CuTe's last-mode extension: 1:1 o 4:1 is 4:1
    assert composition_ok(parse("1:1"), parse("4"), parse("4:1"))[0]
    assert not composition_ok(parse("1:1"), parse("4"), parse("4:0"))[0]
    # the swizzled inverses tylo returns pass, and so do the complements tylo's own
    # complement((L, R)) would refuse (the judge no longer calls it)
    assert check(
        "left_inverse", (parse("S<1,0,2> o (4,4):(4,1)"),), parse("S<1,0,-2> o (4,4):(4,1)")
    )[0]
    assert check("right_inverse", (parse("S<1,0,1> o (4,4):(8,1)"),), parse("S<1,2,1> o 4:4"))[0]
    assert check("complement", (parse("(4,6):(1,6)"), 1), parse("1:0"))[0]
    assert check("logical_divide", (parse("48:1"), parse("32:1")), parse("(32,2):(1,32)"))[0]


def test_stricter_classification_needs_a_reason() -> None:
    """Each stricter class applies only where its reason holds."""
    err = ValueError("x")
    assert _stricter("left_inverse", (parse("4:-1"),), err)
    assert _stricter("left_inverse", (parse("(2,2):(2,3)"),), err)  # does not chain
    assert _stricter("left_inverse", (parse("(4,2):(1,5)"),), err) is None  # chains
    assert _stricter("left_inverse", (parse("(2,4):(1,2)"),), err) is None
    assert _stricter("complement", (parse("(2,2):(1,3)"), 3), err)  # not admissible
    assert _stricter("complement", (parse("(2,2):(1,2)"), 3), err) is None
    assert _stricter("logical_divide", (parse("3:1"), parse("(2,2):(1,2)")), err) is None
    assert _stricter("logical_divide", (parse("3:1"), parse("(2,2):(1,5)")), err)
    assert _claims_none(ValueError("... so no left inverse layout exists"))
    assert not _claims_none(ValueError("a left inverse layout may still exist"))


def test_brute_force_layout_recognition() -> None:
    assert brute.is_1d_layout((0, 2, 1, 3))  # (2,2):(2,1)
    assert brute.is_1d_layout((0, 5, 10, 15, 20, 25))
    assert not brute.is_1d_layout((0, 24, 48, 9))  # (8,8):(8,1) o 4:3, CuTe says fails
    assert not brute.is_1d_layout((0, 1, 3))
    assert brute.layout_with_shape_exists((2, 3), [0, 6, 1, 7, 2, 8])
    assert not brute.layout_with_shape_exists((2, 2), [0, 1, 2, 4])  # not additive
    assert brute.left_inverse_exists(Layout((4, 2), (1, 5)))
    assert not brute.left_inverse_exists(Layout((2, 2), (1, 1)))
    cands = brute.complement_candidates(Layout((4, 6), (1, 6)), 34)
    assert cands == []  # CuTe's own default-cotarget case has no complement
    assert Layout(1, 0) in brute.complement_candidates(Layout((4, 6), (1, 6)), 1)


def test_the_documented_table_is_current() -> None:
    """docs/proofs.md's "Peer parity" table is the one this run prints."""
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[4] / "docs" / "proofs.md").read_text()
    block = doc[doc.index("### The table") :].split("\n\n")[1]
    documented = [" ".join(line.split()) for line in block.splitlines()]
    current = [" ".join(line.split()) for line in table(list(_verdicts())).splitlines()[2:11]]
    assert documented == current, "update the table in docs/proofs.md (Peer parity)"
