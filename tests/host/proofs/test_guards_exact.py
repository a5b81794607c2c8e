"""Guards decide every concrete instance exactly, also for values that break the
assumptions the verdict relied on: ``guard(values) == brute force`` on random values that
satisfy the assumptions and on values that violate them. Symbols carry every kind of
fact (multiple_of, index bounds that are ints or expressions)."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests.host.proofs import reference
from tests.host.proofs.helpers import check_witness, concrete, instances, satisfies
from tylo.layouts import ComposedLayout, Layout, Swizzle, dim, divisible, index_symbol
from tylo.layouts.errors import AssumptionError, LayoutError
from tylo.layouts.proofs import (
    GuardError,
    prove_aligned,
    prove_bounded,
    prove_contiguous,
    prove_injective,
)

SETTINGS = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
VALUES_PER_CASE = 10

M, K, lda, bs = dim("M"), dim("K"), dim("lda"), dim("bs")
N4 = dim("N", multiple_of=4)
t = index_symbol("t", upper=4)
u = index_symbol("u", upper=M)  # an expression bound
FACTS = [
    lda >= M,
    lda >= 2 * M,
    bs >= lda * K,
    divisible(lda, 4),
    divisible(M, 2),
    K >= 2,
    lda <= 3 * M,
    t <= 2,
    u >= 1,
]


def test_the_issue_example():
    """The obligation ``bs >= M + lda*(N-1)`` suffices only under ``lda >= M``; with
    lda < M the layout collides however large bs is."""
    n = dim("N")
    lay = Layout((M, n, K), (1, lda, bs))
    v = prove_injective(lay, assuming=[lda >= M])
    assert v.guard is not None and v.obligation.holds({M: 4, n: 2, K: 2, lda: 1, bs: 100})
    values = {"M": 4, "N": 2, "K": 2, "lda": 1, "bs": 100}
    assert v.guard(values) is False
    assert not reference.injective(Layout((4, 2, 2), (1, 1, 100)))
    assert v.guard({**values, "lda": 4}) is True


@st.composite
def cases(draw: Any) -> tuple[Any, tuple]:
    n = draw(st.integers(1, 3))
    extents = [draw(st.sampled_from([2, 3, 4, M, K, N4, u + 1])) for _ in range(n)]
    strides = [
        draw(st.sampled_from([0, 1, 2, 4, M, lda, 2 * lda, bs, t + 1, K, -1, lda - M]))
        for _ in range(n)
    ]
    lay: Any = Layout(tuple(extents), tuple(strides))
    if draw(st.integers(0, 3)) == 0:
        lay = ComposedLayout(Swizzle(1, draw(st.integers(0, 2)), 2), 0, lay)
    facts = tuple(draw(st.lists(st.sampled_from(FACTS), min_size=1, max_size=3, unique_by=str)))
    return lay, facts


def _random_values(symbols: set, rng: random.Random) -> dict:
    """Values that respect each Dim's own promise (the guard refuses others) but nothing
    else: assumptions and index bounds are violated about half the time."""
    out = {}
    for s in sorted(symbols, key=lambda s: s.name):
        if hasattr(s, "multiple_of"):
            out[s.name] = s.multiple_of * rng.randint(1, 8 // s.multiple_of + 2)
        else:
            out[s.name] = rng.randint(0, 7)
    return out


def _audit(prop: str, prover: Any, lay: Any, kw: dict, facts: tuple, seed: int) -> None:
    try:
        v = prover(lay, **kw, assuming=facts)
    except AssumptionError:
        assume(False)  # an unsatisfiable combination: refused, nothing to audit
    if v.disproved:
        values = v.values
        every = set(v.guard.problem.symbols)
        if every:  # the counterexample satisfies every fact and assumption
            assert satisfies(values, every, facts), (v, facts)
        lays, ckw = concrete((lay,), kw, values)
        check_witness(prop, lays, ckw, v.witness)
    if v.proved:  # holds at every instance that satisfies the facts and assumptions
        for values in instances([lay, *kw.values()], facts, 30, seed):
            lays, ckw = concrete((lay,), kw, values)
            assert reference.check(prop, lays, ckw), (v, values, facts)
            STATS["proved"] += 1
    if v.guard is None:
        return
    g = v.guard
    symbols = set(g.problem.symbols)
    rng = random.Random(seed)
    drawn = []
    for _ in range(4 * VALUES_PER_CASE):
        values = _random_values(symbols, rng)
        try:
            lays, ckw = concrete((lay,), kw, values)
        except LayoutError:
            with pytest.raises(GuardError):
                g(values)
            continue
        env = {x: values[x.name] for x in symbols}
        # the dangerous instances first: the obligation holds where the assumptions or
        # index bounds it was derived under do not
        risky = g.obligation.holds(env) and not g._obligation_applies(env)
        drawn.append((not risky, len(drawn), values, lays, ckw))
    drawn.sort(key=lambda d: d[:2])
    for safe, _, values, lays, ckw in drawn[:VALUES_PER_CASE]:
        assert g(values) == reference.check(prop, lays, ckw), (v, values, facts)
        STATS["checked"] += 1
        STATS["risky"] += not safe


STATS = {"checked": 0, "risky": 0, "proved": 0}


@SETTINGS
@given(cases(), st.integers(0, 10**6))
def test_injective_guard_is_exact(case, seed):
    lay, facts = case
    _audit("injective", prove_injective, lay, {}, facts, seed)


@SETTINGS
@given(cases(), st.sampled_from([2, 4]), st.integers(0, 10**6))
def test_contiguous_guard_is_exact(case, vector, seed):
    lay, facts = case
    _audit("contiguous", prove_contiguous, lay, {"vector": vector}, facts, seed)


@SETTINGS
@given(cases(), st.sampled_from([2, 4]), st.sampled_from([0, M, t]), st.integers(0, 10**6))
def test_aligned_guard_is_exact(case, vector, base, seed):
    lay, facts = case
    kw = {"vector": vector, "elem_bytes": 2, "align": 8, "base": base}
    _audit("aligned", prove_aligned, lay, kw, facts, seed)


@SETTINGS
@given(cases(), st.sampled_from([lda * K, M * K + bs, 64]), st.integers(0, 10**6))
def test_bounded_guard_is_exact(case, extent, seed):
    lay, facts = case
    _audit("bounded", prove_bounded, lay, {"extent": extent}, facts, seed)


def test_zz_instances_breaking_the_assumptions_were_checked():
    """The property tests above compared guards on instances where the obligation holds
    but an assumption it relied on does not (runs after them in file order; alone it
    has nothing to check)."""
    if STATS["checked"] > 100:
        assert STATS["risky"] > 0 and STATS["proved"] > 0, STATS
