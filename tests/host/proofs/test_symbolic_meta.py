"""Random symbolic layouts: every "proved" survives 200 satisfying instances; every
counterexample satisfies the assumptions and reproduces; every guard decides exactly the
failing instances on a sample."""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests.host.proofs import reference
from tests.host.proofs.helpers import check_witness, concrete, instances, satisfies
from tylo.layouts import ComposedLayout, Layout, Swizzle, coalesce, dim, divisible
from tylo.layouts.proofs import (
    prove_aligned,
    prove_bounded,
    prove_contiguous,
    prove_equal,
    prove_injective,
)
from tylo.layouts.strategies import nest, symbolic_layouts

EXAMPLES = int(os.environ.get("TYLO_PROOF_EXAMPLES", "40"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
SURVIVE = 200  # instances every "proved" must survive
GUARD_SAMPLE = 12

M, K, lda, N = dim("M"), dim("K"), dim("lda"), dim("N", multiple_of=4)
FACTS = [lda >= M, divisible(lda, 4), divisible(M, 2), lda >= 2 * M, K >= 2]


@st.composite
def wild_symbolic(draw: st.DrawFn) -> tuple[Any, tuple]:
    """(layout, assumptions): symbolic extents and arbitrary (also zero, negative and
    colliding) symbolic strides, sometimes swizzled; satisfiable assumptions (all of
    FACTS hold at M=2, K=2, lda=4)."""
    n = draw(st.integers(1, 3))
    extents = [draw(st.sampled_from([1, 2, 3, 4, M, K, N])) for _ in range(n)]
    strides = [
        draw(st.sampled_from([0, 1, 2, 3, 4, 8, M, lda, 2 * lda, M * K, K, -1, -M]))
        for _ in range(n)
    ]
    shape = draw(nest(tuple(extents)))
    from tylo.layouts.strategies import _regroup

    lay: Any = Layout(shape, _regroup(strides, shape))
    if draw(st.integers(0, 3)) == 0:
        lay = ComposedLayout(Swizzle(draw(st.integers(1, 2)), draw(st.integers(0, 3)), 2), 0, lay)
    assumptions = tuple(draw(st.lists(st.sampled_from(FACTS), max_size=3, unique_by=str)))
    return lay, assumptions


LAYOUTS = st.one_of(symbolic_layouts(), wild_symbolic())


def audit(prop: str, prover: Any, args: tuple, kw: dict, assumptions: tuple, seed: int) -> None:
    objs = [*args, *(x for k, x in kw.items() if k in ("base", "extent"))]
    symbols = set().union(*(getattr(o, "free_symbols", set()) for o in objs))
    every = set(symbols)
    for f in assumptions:
        every |= f.free_symbols if hasattr(f, "free_symbols") else f.expr.free_symbols
    assume(len({s.name for s in every}) == len(every))  # one symbol per name (else an error)
    v = prover(*args, **kw, assuming=assumptions)
    if v.status == "proved":
        for values in instances(objs, assumptions, SURVIVE, seed):
            lays, ckw = concrete(args, kw, values)
            assert reference.check(prop, lays, ckw), (v, values)
        return
    assert v.guard is not None and v.obligation is not None
    sample = instances(objs, assumptions, GUARD_SAMPLE, seed + 1)
    if v.status == "disproved":
        cex = v.counterexample
        values = {k: x for k, x in cex.items() if k != "witness"}
        assert {s.name for s in symbols} <= set(values)
        if symbols:
            assert satisfies(values, symbols, assumptions), (cex, assumptions)
        lays, ckw = concrete(args, kw, values)
        assert not reference.check(prop, lays, ckw), (v, values)
        check_witness(prop, lays, ckw, cex["witness"])
        sample.append(values)
    for values in sample:
        lays, ckw = concrete(args, kw, values)
        assert v.guard(values) == reference.check(prop, lays, ckw), (v, values)


def _rank(lay: Any) -> int:
    return len(lay.shape) if type(lay.shape) is tuple else 1


@SETTINGS
@given(LAYOUTS, st.integers(0, 1000))
def test_injective_symbolic(case: tuple, seed: int) -> None:
    lay, assumptions = case
    audit("injective", prove_injective, (lay,), {}, assumptions, seed)


@SETTINGS
@given(LAYOUTS, st.sampled_from([1, 2, 4, 8]), st.data())
def test_contiguous_symbolic(case: tuple, vector: int, data: st.DataObject) -> None:
    lay, assumptions = case
    kw = {"vector": vector, "mode": data.draw(st.integers(0, _rank(lay) - 1))}
    audit("contiguous", prove_contiguous, (lay,), kw, assumptions, data.draw(st.integers(0, 99)))


@SETTINGS
@given(
    LAYOUTS,
    st.sampled_from([1, 2, 4, 8]),
    st.sampled_from([1, 2, 4]),
    st.sampled_from([0, 8, 3, M, lda]),
    st.data(),
)
def test_aligned_symbolic(
    case: tuple, vector: int, elem_bytes: int, base: Any, data: st.DataObject
) -> None:
    lay, assumptions = case
    kw = {
        "vector": vector,
        "elem_bytes": elem_bytes,
        "base": base,
        "mode": data.draw(st.integers(0, _rank(lay) - 1)),
    }
    audit("aligned", prove_aligned, (lay,), kw, assumptions, data.draw(st.integers(0, 99)))


@SETTINGS
@given(
    LAYOUTS,
    st.sampled_from([lda * K, M * K, lda * (K - 1) + M, 64, 4 * M * K * N, 2 * lda * K]),
    st.sampled_from([0, 0, 1, -1, M]),
    st.integers(0, 1000),
)
def test_bounded_symbolic(case: tuple, extent: Any, base: Any, seed: int) -> None:
    lay, assumptions = case
    audit("bounded", prove_bounded, (lay,), {"extent": extent, "base": base}, assumptions, seed)


@SETTINGS
@given(LAYOUTS, LAYOUTS, st.booleans(), st.integers(0, 1000))
def test_equal_symbolic(a: tuple, b: tuple, own: bool, seed: int) -> None:
    la, assumptions = a
    lb = b[0]
    if own and isinstance(la, Layout):
        lb = coalesce(la)
    audit("equal", prove_equal, (la, lb), {}, assumptions, seed)
