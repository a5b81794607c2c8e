"""The public surface: Verdict, require and its errors, guards, arguments, assumptions,
caching and exports."""

from __future__ import annotations

import pickle

import pytest
import sympy

from tylo.layouts import Layout, LayoutError, assuming, dim, divisible, proofs
from tylo.layouts.proofs import (
    Guard,
    GuardError,
    Obligation,
    ProofArgumentError,
    ProofError,
    PropertyDisproved,
    PropertyUnproved,
    Verdict,
    prove_aligned,
    prove_bounded,
    prove_contiguous,
    prove_equal,
    prove_injective,
    require,
)

M, K, lda = dim("M"), dim("K"), dim("lda")
A = Layout((M, K), (1, lda))
# injective iff no a*lda == 3*b with 0 < |b| < 3, |a| < K: true for 4 | lda, but the
# rules cannot show it (unknown), and no counterexample exists
HARD = Layout((K, 3), (lda, 3))


def test_all_is_sorted_and_resolves() -> None:
    assert proofs.__all__ == sorted(proofs.__all__)
    for name in proofs.__all__:
        assert getattr(proofs, name) is not None
    for name in ("Verdict", "prove_injective", "require", "ProofError"):
        assert name in proofs.__all__


def test_verdict_fields_and_truth() -> None:
    v = prove_injective(A, assuming=[lda >= M])
    assert isinstance(v, Verdict) and v.status == "proved" and bool(v) and v.proved
    assert "sorted-span" in v.reason and "lda >= M" in v.reason
    assert v.counterexample is None and v.obligation is None and v.guard is None
    d = prove_injective(A)
    assert not d and d.disproved and not d.proved and not d.unknown
    assert d.values == {"K": 2, "M": 2, "lda": 1}
    assert d.witness is d.counterexample["witness"]
    with pytest.raises(TypeError, match="read-only"):
        d.counterexample["M"] = 3  # type: ignore[index]
    assert dict(d.counterexample)["M"] == 2
    assert pickle.loads(pickle.dumps(d.counterexample)) == d.counterexample
    with pytest.raises(AttributeError):
        d.status = "proved"  # type: ignore[misc]
    hash(d)


def test_unknown_has_obligation_and_exact_guard() -> None:
    v = prove_injective(HARD, assuming=[divisible(lda, 4)])
    assert v.status == "unknown", v
    assert isinstance(v.obligation, Obligation) and str(v.obligation)
    assert isinstance(v.guard, Guard) and v.guard.symbols == ("K", "lda")
    for k in range(1, 6):
        for ld in range(1, 13):
            truth = len(_offsets(k, ld)) == 3 * k
            assert v.guard(K=k, lda=ld) == truth, (k, ld)
    assert v.guard({"K": 4, "lda": 8}) is True
    assert v.guard({K: 4, lda: 3}) is False
    out = v.guard.check(K=4, lda=3)
    assert out.ok is False and out.witness is not None


def _offsets(k: int, ld: int) -> set:
    return {a * ld + 3 * b for a in range(k) for b in range(3)}


def test_guard_errors() -> None:
    g = prove_injective(A).guard
    with pytest.raises(GuardError, match="no value for lda"):
        g(M=4, K=4)
    with pytest.raises(GuardError, match="not an int"):
        g(M=4, K=4, lda="x")
    with pytest.raises(GuardError, match="M=0 is not a positive integer"):
        g(M=0, K=4, lda=4)
    g16 = prove_contiguous(Layout(dim("N", multiple_of=16), 1), vector=32).guard
    with pytest.raises(GuardError, match="not a positive multiple of 16"):
        g16(N=17)
    assert g16(N=64) and not g16(N=16)
    assert g(M=4, K=4, lda=4, unrelated=7) is True
    assert "Guard(injective" in repr(g)


def test_require_proved_returns_none() -> None:
    assert require(prove_injective(A, assuming=[lda >= M]), what="copy A") is None


def test_require_disproved_message() -> None:
    with pytest.raises(PropertyDisproved) as info:
        require(prove_injective(A), what="store D")
    msg = str(info.value)
    assert msg.startswith("store D: injective is disproved for (M,K):(1,lda)")
    for part in ("K=2, M=2, lda=1", "coordinates (1,0) -> offset 1", "(0,1) -> offset 1"):
        assert part in msg
    assert "hint: needs lda >= M" in msg
    assert info.value.verdict.disproved
    assert isinstance(info.value, ProofError) and isinstance(info.value, LayoutError)


def test_require_unknown_message() -> None:
    with pytest.raises(PropertyUnproved) as info:
        require(prove_injective(HARD, assuming=[divisible(lda, 4)]), what="copy")
    msg = str(info.value)
    assert "could not be proved (nor disproved)" in msg
    assert "open obligation:" in msg and "guard" in msg


def test_require_rejects_non_verdicts() -> None:
    with pytest.raises(ProofArgumentError, match="expected a Verdict"):
        require(True)  # type: ignore[arg-type]


def test_require_renders_each_property() -> None:
    cases = [
        prove_contiguous(A, vector=8, assuming=[lda >= M]),
        prove_aligned(A, vector=8, elem_bytes=2, assuming=[divisible(M, 8), lda >= M]),
        prove_bounded(A, extent=M * K, assuming=[lda >= M]),
        prove_equal(Layout((M, K), (1, lda)), Layout(M * K, 1)),
    ]
    for v in cases:
        assert v.disproved, v
        with pytest.raises(PropertyDisproved) as info:
            require(v)
        assert "why:" in str(info.value) and "offset" in str(info.value)
    assert "index" in str(pytest.raises(PropertyDisproved, require, cases[-1]).value)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: prove_injective("(4,8):(1,4)"), "expected a Layout"),
        (lambda: prove_contiguous(A, vector=0), "vector must be a positive static int"),
        (lambda: prove_contiguous(A, vector=M), "vector must be a positive static int"),
        (lambda: prove_contiguous(A, vector=8, mode=2), "mode 2 does not exist"),
        (lambda: prove_aligned(A, vector=8, elem_bytes=0), "elem_bytes"),
        (lambda: prove_aligned(A, vector=8, elem_bytes=2, align=True), "align"),
        (lambda: prove_bounded(A, extent="big"), "extent"),
        (lambda: prove_injective(A, assuming=["lda >= M"]), "not a relation"),
        (
            lambda: prove_equal(Layout(dim("N"), 1), Layout(dim("N", multiple_of=2), 1)),
            "two different symbols are named N",
        ),
    ],
)
def test_argument_errors(call: object, match: str) -> None:
    with pytest.raises(ProofArgumentError, match=match):
        call()  # type: ignore[operator]


def test_negative_mode_counts_from_the_end() -> None:
    assert prove_contiguous(Layout((4, 8), (8, 1)), vector=8, mode=-1).proved


def test_assuming_context_combines_with_argument() -> None:
    with assuming(lda >= M):
        assert prove_injective(A).proved
        assert prove_contiguous(A, vector=8, assuming=divisible(M, 8)).proved
    assert prove_injective(A).disproved
    assert prove_injective(A, assuming=sympy.And(lda >= M, K >= 1)).proved


def test_unsatisfiable_assumptions_in_context_raise() -> None:
    from tylo.layouts import AssumptionError

    with pytest.raises(AssumptionError, match="unsatisfiable"), assuming(lda >= M):
        prove_injective(A, assuming=[lda <= M - 1])


def test_verdicts_are_cached() -> None:
    a = prove_injective(A, assuming=[lda >= M])
    assert prove_injective(A, assuming=[lda >= M]) is a
    assert prove_injective(A, assuming=[lda >= M + 1]) is not a


def test_equal_counterexample_with_different_sizes() -> None:
    v = prove_equal(Layout(M, 1), Layout(2 * M, 1))
    assert v.disproved
    w = v.witness
    assert w["indices"] == (1,) and w["coordinates"][0] is None and w["offsets"] == (None, 1)
