"""Symbol facts: empty index ranges are refused, one symbol's facts never decide a
question about other symbols, and every decision is exact on the symbols' facts
(``True``: holds at every allowed value; ``False``: at none), checked by brute force
over small values for symbols with every kind of fact."""

from __future__ import annotations

import itertools
import subprocess
import sys

import pytest
import sympy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tylo.layouts import symbolic
from tylo.layouts.errors import AssumptionError
from tylo.layouts.symbolic import decide, dim, divides, index_symbol

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("upper", ["1 - N", "-N", "0*N", "-N - M", "1 - N*M"])
def test_empty_index_ranges_are_refused(upper):
    n, m = dim("N"), dim("M")
    ub = sympy.sympify(upper, locals={"N": n, "M": m})
    with pytest.raises(AssumptionError, match="empty|>= 1"):
        index_symbol("t", upper=ub)


def test_non_integer_bounds_are_refused_and_integer_ones_kept():
    with pytest.raises(AssumptionError, match="not an integer"):
        index_symbol("t", upper=dim("N") / 2)
    t = index_symbol("t", upper=dim("N", multiple_of=2) / 2)
    assert decide(2 * t + 1 < dim("N", multiple_of=2)) is True


def test_the_issue_sequence_in_a_fresh_process():
    """The exact sequence from the issue, in a process of its own (decisions are cached
    per process, so an earlier answer could hide the leak)."""
    code = (
        "from tylo.layouts.symbolic import dim, index_symbol, decide\n"
        "from tylo.layouts.errors import AssumptionError\n"
        "N, K = dim('N'), dim('K')\n"
        "try:\n"
        "    index_symbol('t', upper=1 - N)\n"
        "    raise SystemExit('accepted an empty range')\n"
        "except AssumptionError:\n"
        "    pass\n"
        "t = index_symbol('s', upper=N - 5)  # empty for N <= 5 only: accepted\n"
        "assert decide(t >= 0) is True and decide(N - t >= 6) is True\n"
        "assert decide(K + 1 >= 1000) is None, decide(K + 1 >= 1000)\n"
        "assert decide(N >= 6) is None\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "ok", out.stderr


# -- decisions are exact on every kind of fact ----------------------------------------------

M = dim("M")
N4 = dim("N", multiple_of=4)
P3 = dim("P", multiple_of=3)
T = index_symbol("T", upper=6)
U = index_symbol("U", upper=M)  # a bound that is an expression
W = index_symbol("W", upper=M - 2)  # empty for M <= 2: its fact only speaks about W
SYMBOLS = [M, N4, P3, T, U, W]


def _domain(s) -> range:
    return {
        "M": range(1, 9),
        "N": range(4, 25, 4),
        "P": range(3, 19, 3),
        "T": range(0, 6),
        "U": range(0, 8),
        "W": range(0, 7),
    }[s.name]


def _instances(symbols: set):
    syms = sorted(symbols, key=lambda s: s.name)
    for vals in itertools.product(*(_domain(s) for s in syms)):
        env = dict(zip(syms, vals))
        m = env.get(M)
        if U in env and (m is None or env[U] >= m):
            continue
        if W in env and (m is None or env[W] >= m - 2):
            continue
        yield env


TERMS = st.sampled_from(SYMBOLS + [M * T, U * U, N4 * W, P3 - T])


@st.composite
def relations(draw):
    lhs = sum(draw(st.integers(-3, 3)) * draw(TERMS) for _ in range(draw(st.integers(1, 3))))
    rhs = draw(st.integers(-10, 30))
    op = draw(st.sampled_from([">=", ">", "<=", "<", "==", "!="]))
    return lhs, op, rhs


def _with_m(symbols: set) -> set:
    return symbols | ({M} if symbols & {U, W} else set())


@SETTINGS
@given(relations())
def test_decisions_are_exact(rel):
    lhs, op, rhs = rel
    lhs = sympy.sympify(lhs)
    got = symbolic.decide_cmp(lhs, op, rhs)
    if got is None:
        return
    fn = {
        ">=": lambda a: a >= rhs,
        ">": lambda a: a > rhs,
        "<=": lambda a: a <= rhs,
        "<": lambda a: a < rhs,
        "==": lambda a: a == rhs,
        "!=": lambda a: a != rhs,
    }[op]
    for env in _instances(_with_m(lhs.free_symbols)):
        value = int(lhs.xreplace({s: sympy.Integer(v) for s, v in env.items()}))
        assert fn(value) == got, (lhs, op, rhs, env)


@SETTINGS
@given(st.sampled_from([2, 3, 4, 6, 8, 12]), relations())
def test_divisibility_is_exact(d, rel):
    e = sympy.sympify(rel[0]) + rel[2]
    got = divides(d, e)
    if got is None:
        return
    for env in _instances(_with_m(e.free_symbols)):
        value = int(e.xreplace({s: sympy.Integer(v) for s, v in env.items()}))
        assert (value % d == 0) == got, (d, e, env)


@SETTINGS
@given(relations())
def test_a_possibly_empty_range_does_not_leak(rel):
    """Decisions over symbols other than W are the same whether or not W's fact (which
    alone would imply M >= 3) has been used in this process."""
    lhs, op, rhs = rel
    lhs = sympy.sympify(lhs).xreplace({W: sympy.Integer(0)})
    if not lhs.free_symbols:
        return
    symbolic._MEMO.clear()
    before = symbolic.decide_cmp(lhs, op, rhs)
    assert decide(W + 1 >= 1) is True and decide(M >= 3 + W) is True  # uses W's fact
    symbolic._MEMO.clear()
    assert symbolic.decide_cmp(lhs, op, rhs) == before
    if lhs.free_symbols <= {M}:
        assert decide(M >= 3) is None


HUGE = st.sampled_from([2**61, 3 * 2**60, 2**62 + 1, 2**63 - 1, 2**63, 5 * 2**62])


@settings(max_examples=25, deadline=None)
@given(HUGE, HUGE, st.integers(-3, 3), st.integers(600, 900))
def test_divisibility_by_huge_moduli_is_exact(d, c, c0, upper):
    """Residue enumeration (over more than 512 values: the vectorized path) stays exact
    when coefficients and moduli pass 2**62."""
    t = index_symbol(f"h{upper}", upper=upper)
    e = c * t + c0 * d + (c if c0 > 0 else 0)
    got = divides(d, e)
    truth = {(c * v + c0 * d + (c if c0 > 0 else 0)) % d == 0 for v in range(upper)}
    assert got == (truth.pop() if len(truth) == 1 else None), (d, c, c0, upper)
