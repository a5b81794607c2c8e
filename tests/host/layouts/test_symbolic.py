"""The fact system of tylo.layouts.symbolic: symbols, assumptions, exact decisions."""

from __future__ import annotations

import pickle
import random

import pytest
import sympy

from tylo.layouts import AssumptionError, DivisibilityError, StaticRequiredError, UndecidableError
from tylo.layouts.symbolic import (
    assuming,
    ceil_div,
    current_assumptions,
    decide,
    decide_cmp,
    dim,
    divides,
    divisible,
    exact_div,
    floor_div,
    index_symbol,
    is_static,
    mod,
    require_static,
    sample_assignment,
    substitute,
    sym_max,
    sym_min,
)

M, K, lda = dim("M"), dim("K"), dim("lda")


def test_dim_facts_are_identity_and_pickle():
    n16, n = dim("N", multiple_of=16), dim("N")
    assert n16 != n and hash(n16) != hash(n)
    assert n16 is dim("N", multiple_of=16)
    assert pickle.loads(pickle.dumps(n16)) is n16
    t = index_symbol("tid", upper=n16)
    assert pickle.loads(pickle.dumps(t)) == t
    assert index_symbol("tid", upper=64) != index_symbol("tid", upper=128)


def test_bad_symbols_raise():
    with pytest.raises(AssumptionError, match="multiple_of"):
        dim("N", multiple_of=0)
    with pytest.raises(AssumptionError, match="identifier"):
        dim("not a name")
    with pytest.raises(AssumptionError, match="upper"):
        index_symbol("i", upper=0)


@pytest.mark.parametrize(
    ("rel", "expected"),
    [
        (M >= 1, True),
        (2 * M >= M + 1, True),
        (sympy.Eq(M, 1), None),
        (M * K >= M, True),
        (M < 1, False),
        (sympy.Ne(M, 0), True),
        (dim("N", multiple_of=16) >= 16, True),
        (sympy.Eq(dim("N", multiple_of=16), 8), False),
        (lda >= M, None),
    ],
)
def test_decide_without_assumptions(rel, expected):
    assert decide(rel) is expected


def test_decide_static_and_bools():
    three = 3
    assert decide(three >= 2) is True
    assert decide_cmp(3, "<", 2) is False
    assert decide(sympy.true) is True


def test_relational_assumptions():
    with assuming(lda >= M):
        assert decide(lda >= M) is True
        assert decide(lda * K >= M * K) is True
        assert decide(lda > M) is None
        assert current_assumptions() == (lda >= M,)
    assert current_assumptions() == ()
    with assuming(sympy.Eq(lda, M)):
        assert decide(sympy.Eq(lda * K, M * K)) is True
        assert divides(lda, M * K) is True
    with assuming(lda > M):
        assert decide(lda >= M + 1) is True


def test_assumptions_nest_and_are_thread_local():
    import threading

    with assuming(M >= 4):
        with assuming(K >= M):
            assert decide(K >= 4) is True
        assert decide(K >= 4) is None
        seen = []
        th = threading.Thread(target=lambda: seen.append(decide(M >= 4)))
        th.start()
        th.join()
        assert seen == [None]


def test_unsatisfiable_assumptions_raise():
    with pytest.raises(AssumptionError, match="unsatisfiable"), assuming(lda >= M, lda <= M - 1):
        pass
    n4 = dim("N", multiple_of=4)
    with pytest.raises(AssumptionError, match="unsatisfiable"), assuming(sympy.Eq(n4, 6)):
        pass
    with pytest.raises(AssumptionError, match="not a fact"), assuming("lda >= M"):
        pass


def test_divides():
    n = dim("N", multiple_of=128)
    assert divides(16, n) is True
    assert divides(256, n) is None
    assert divides(n, 3 * n) is True
    assert divides(n / 128, n) is True
    assert divides(2, 2 * M + 1) is False
    assert divides(2, M * (M + 1)) is True
    with assuming(divisible(K, 8)):
        assert divides(4, K) is True
        assert divides(16, K) is None
    with assuming(divisible(M, 8), lda >= M):
        assert divides(8, M) is True


def test_index_symbols_use_their_bounds():
    tid = index_symbol("tid", upper=128)
    assert decide(tid < 128) is True
    assert decide(8 * tid + 7 < 1024) is True
    assert decide(tid >= 64) is None
    assert mod(tid, 128) == tid
    assert floor_div(tid, 128) == 0
    assert divides(4, 4 * tid + 8) is True
    n = dim("N")
    t = index_symbol("t", upper=n)
    assert decide(t <= n - 1) is True


def test_helpers_static_fast_paths():
    assert exact_div(12, 4) == 3 and type(exact_div(12, 4)) is int
    assert ceil_div(10, 4) == 3 and floor_div(10, 4) == 2 and mod(10, 4) == 2
    assert sym_min(3, 1, 2) == 1 and sym_max(3, 1, 2) == 3
    assert is_static((1, (2, 3))) and not is_static((1, M))
    assert require_static(sympy.Integer(5)) == 5


def test_helpers_symbolic():
    n = dim("N", multiple_of=16)
    assert exact_div(n, 16) == n / 16
    assert exact_div(M * K, M) == K
    assert ceil_div(n, 8) == n / 8
    assert ceil_div(M, 64) == sympy.ceiling(M / 64)
    assert sym_min(M, M + 3) == M and sym_max(M, 2 * M) == 2 * M
    with assuming(lda >= M):
        assert sym_max(M, lda) == lda


def test_helper_errors_name_the_fact():
    with pytest.raises(UndecidableError) as info:
        exact_div(dim("N"), 16, op="composition")
    msg = str(info.value)
    assert "composition needs 16 | N" in msg and "multiple_of=16" in msg
    assert info.value.condition == "16 | N"
    with pytest.raises(DivisibilityError):
        exact_div(12, 5)
    with pytest.raises(DivisibilityError):
        exact_div(2 * M + 1, 2)
    with pytest.raises(UndecidableError, match="lda"):
        sym_min(M, lda)
    with pytest.raises(StaticRequiredError, match="tile_m"):
        require_static(M, what="tile_m")


def test_substitute():
    n = dim("N", multiple_of=16)
    assert substitute(n / 16 + 1, {"N": 64}) == 5
    assert substitute((n, (2 * n, 3)), {n: 32}) == (32, (64, 3))
    assert type(substitute(n, {"N": 16})) is int


def test_sample_assignment_respects_facts():
    rng = random.Random(7)
    n = dim("N", multiple_of=8)
    tid = index_symbol("tid", upper=n)
    with assuming(lda >= M, divisible(lda * K, 4)):
        for _ in range(50):
            v = sample_assignment([lda, K, tid], rng, max_value=40)
            assert v[lda] >= v[M] >= 1 and (v[lda] * v[K]) % 4 == 0
            assert 0 <= v[tid] < v[n] and v[n] % 8 == 0


def test_sampler_reports_impossible():
    with pytest.raises(AssumptionError, match="no values"):
        sample_assignment([M], 0, assumptions=[sympy.Eq(M**2, 2)], tries=20)


def test_divisibility_fact_mentioning_other_symbols_still_counts():
    # 4 | lda is stated directly, but under lda >= 2*M the engine rewrites lda = 2*M + z:
    # the fact then mentions M too and must still decide the question.
    from tylo.layouts.symbolic import assuming, dim, divides, divisible

    m, lda = dim("M"), dim("lda")
    with assuming(divisible(m, 2), lda >= 2 * m, divisible(lda, 4)):
        assert divides(4, lda) is True
        assert divides(2, lda) is True
        assert divides(8, lda) is None
