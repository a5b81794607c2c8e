"""Hostile operands for the algebra's operations: wrong types, zero and negative extents
or cotargets. Each must either give a *valid* layout (every extent >= 1) with the
operation's defining property, or raise a typed LayoutError that names the operation; an
untyped exception or an invalid layout (extent 0 or negative) is a defect."""

from __future__ import annotations

import pytest

from tests.host.layouts.peers import brute
from tylo.layouts import (
    Layout,
    LayoutError,
    coalesce,
    complement,
    composition,
    left_inverse,
    logical_divide,
    logical_product,
    right_inverse,
)

L = Layout((4, 2), (1, 4))
UNARY = {"coalesce": coalesce, "left_inverse": left_inverse, "right_inverse": right_inverse}
BINARY = {
    "complement": complement,
    "composition": composition,
    "logical_divide": logical_divide,
    "logical_product": logical_product,
}
HOSTILE = ["x", 2.5, {1: 2}, object(), True, None, -1, 0, -(2**63), 2**64 + 1]


def _valid(x: object) -> bool:
    if not isinstance(x, Layout):
        return True
    return all(type(s) is int and s >= 1 for s in brute.flat(x.shape))


def _problem(op: str, args: tuple, names_op: bool) -> str | None:
    """What is wrong with ``op(*args)``'s outcome, or None. ``names_op``: only that a
    refusal names the operation; otherwise that the outcome is a typed refusal or a valid
    layout."""
    fn = UNARY.get(op) or BINARY[op]
    text = f"{op}({', '.join(map(_show, args))})"
    try:
        r = fn(*args)
    except LayoutError as err:
        if names_op and op not in str(err):
            return f"{text}: the error does not name {op}: {err}"
        return None
    except Exception as err:  # noqa: BLE001 - an untyped error is the finding
        return None if names_op else f"{text}: untyped {type(err).__name__}: {err}"
    if not names_op and not _valid(r):
        return f"{text} returned an invalid layout {r}"
    return None


def _show(x: object) -> str:
    return str(x) if isinstance(x, (Layout, int, float, str)) else type(x).__name__


def _args(op: str, bad: object) -> tuple:
    return (bad,) if op in UNARY else (L, bad)


OPS = sorted(UNARY) + sorted(BINARY)


@pytest.mark.parametrize("op", OPS)
def test_hostile_operand_gives_valid_result_or_typed_refusal(op: str) -> None:
    problems = [p for bad in HOSTILE if (p := _problem(op, _args(op, bad), False))]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("op", OPS)
def test_hostile_operand_refusal_names_the_operation(op: str) -> None:
    problems = [p for bad in HOSTILE if (p := _problem(op, _args(op, bad), True))]
    assert not problems, "\n".join(problems)
