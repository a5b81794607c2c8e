"""Verdicts and their guards pickle, so they can be sent to a process pool: the round trip
keeps every field, and the guard answers every instance exactly as before (the same bool,
or the same GuardError), on random values of every kind of symbol fact."""

from __future__ import annotations

import multiprocessing as mp
import pickle
import random
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tests.host.proofs.test_guards_exact import SETTINGS, M, _random_values, bs, cases, lda, t
from tylo.layouts import Layout, dim
from tylo.layouts.errors import AssumptionError
from tylo.layouts.proofs import (
    GuardError,
    prove_aligned,
    prove_bounded,
    prove_contiguous,
    prove_equal,
    prove_injective,
)


def _answer(guard: Any, values: dict) -> Any:
    try:
        return guard(values)
    except GuardError as err:
        return ("GuardError", str(err))


def _answers(guard: Any, seed: int, n: int = 12) -> list:
    rng = random.Random(seed)
    symbols = set(guard.problem.symbols)
    return [_answer(guard, _random_values(symbols, rng)) for _ in range(n)]


def _same_after_round_trip(v: Any, seed: int) -> None:
    w = pickle.loads(pickle.dumps(v))
    for field in ("status", "property", "reason", "hint", "subject", "counterexample"):
        assert getattr(w, field) == getattr(v, field), field
    assert str(w.obligation) == str(v.obligation)
    assert w.assumptions == v.assumptions
    if v.guard is None:
        assert w.guard is None
        return
    assert repr(w.guard) == repr(v.guard) and w.guard.symbols == v.guard.symbols
    # the copy first (its memo starts empty), then the original
    assert _answers(w.guard, seed) == _answers(v.guard, seed)


def test_the_issue_example_goes_through_a_process_pool():
    """A verdict with a guard sent to a worker process and back, the guard called there."""
    M_, K_, lda_ = dim("M"), dim("K"), dim("lda", multiple_of=4)
    v = prove_injective(Layout((M_, K_), (1, lda_)))
    assert v.guard is not None
    with ProcessPoolExecutor(1, mp_context=mp.get_context("spawn")) as pool:
        remote = pool.submit(_call_guard, v, {"M": 64, "K": 32, "lda": 64}).result(timeout=120)
        bad = pool.submit(_call_guard, v, {"M": 64, "K": 32, "lda": 60}).result(timeout=120)
        back = pool.submit(pickle.loads, pickle.dumps(v)).result(timeout=120)
    assert (
        (remote, bad) == (True, False) == (v.guard(M=64, K=32, lda=64), v.guard(M=64, K=32, lda=60))
    )
    assert back.guard(M=8, K=2, lda=4) is False and back.guard(M=8, K=2, lda=8) is True


def _call_guard(v: Any, values: dict) -> bool:
    return v.guard(values)


def _prove(prover: Any, *args: Any, **kw: Any) -> Any:
    try:
        return prover(*args, **kw)
    except AssumptionError:
        return None  # an unsatisfiable combination: refused, nothing to pickle


@SETTINGS
@given(cases(), st.integers(0, 10**6))
def test_injective_and_equal_verdicts_round_trip(case, seed):
    lay, facts = case
    v = _prove(prove_injective, lay, assuming=facts)
    if v is not None:
        _same_after_round_trip(v, seed)
    v = _prove(prove_equal, lay, Layout((M, 4), (1, lda)), assuming=facts)
    if v is not None:
        _same_after_round_trip(v, seed)


@SETTINGS
@given(cases(), st.sampled_from([2, 4]), st.sampled_from([0, M, t]), st.integers(0, 10**6))
def test_contiguous_aligned_bounded_verdicts_round_trip(case, vector, base, seed):
    lay, facts = case
    for v in (
        _prove(prove_contiguous, lay, vector=vector, assuming=facts),
        _prove(prove_aligned, lay, vector=vector, elem_bytes=2, align=8, base=base, assuming=facts),
        _prove(prove_bounded, lay, extent=lda * 4 + bs, base=base, assuming=facts),
    ):
        if v is not None:
            _same_after_round_trip(v, seed)
