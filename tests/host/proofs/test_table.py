"""Every row of the table of cases with known verdicts (written out from the design notes)."""

from __future__ import annotations

from typing import Any

import pytest
import sympy

from tests.host.proofs import reference
from tylo.layouts import (
    AssumptionError,
    ComposedLayout,
    Layout,
    Swizzle,
    composition,
    dim,
    divisible,
    logical_divide,
    substitute,
)
from tylo.layouts.proofs import (
    prove_aligned,
    prove_bounded,
    prove_contiguous,
    prove_equal,
    prove_injective,
)

M, K, N, B = dim("M"), dim("K"), dim("N"), dim("B")
lda, ldm, bs = dim("lda"), dim("ldm"), dim("bs")
m8, k4, m4, m = dim("m8"), dim("k4"), dim("m4"), dim("m")
A = Layout((M, K), (1, lda))
SW = composition(Swizzle(3, 3, 3), Layout((8, 64), (64, 1)))
SW_M = composition(Swizzle(3, 3, 3), Layout((M, 64), (64, 1)))

PROVED = [
    ("injective", (Layout((4, 8), (1, 4)),), {}),
    ("injective", (Layout((4, 8), (8, 1)),), {}),
    ("injective", (Layout((8, (2, 4)), (2, (1, 16))),), {}),
    ("injective", (Layout((3, 2), (2, 3)),), {}),
    ("injective", (A,), {"assuming": [lda >= M]}),
    ("injective", (Layout((M, 1), (1, lda)),), {}),
    ("injective", (Layout((M, K), (K, 1)),), {}),
    ("injective", (Layout((M, N, B), (1, M, M * N)),), {}),
    ("injective", (Layout((M, N, B), (1, ldm, ldm * N)),), {"assuming": [ldm >= M]}),
    ("injective", (Layout((M, N, B), (1, ldm, bs)),), {"assuming": [ldm >= M, bs >= ldm * N]}),
    (
        "injective",
        (Layout(((8, m8), (4, k4)), ((1, 8), (lda, 4 * lda))),),
        {"assuming": [divisible(lda, 8), lda >= 8 * m8]},
    ),
    ("injective", (SW,), {}),
    ("injective", (SW_M,), {}),
    ("injective", (Layout(((32, 4), 8), ((8, 256), 1)),), {}),
    ("contiguous", (A,), {"vector": 8, "assuming": [divisible(M, 8), lda >= M]}),
    ("contiguous", (Layout(((8, m8), K), ((1, 8), lda)),), {"vector": 8}),
    (
        "contiguous",
        (Layout(((4, m4), K), ((1, 4), lda)),),
        {"vector": 8, "assuming": [divisible(m4, 2)]},
    ),
    ("contiguous", (SW,), {"vector": 8, "mode": 1}),
    (
        "aligned",
        (A,),
        {"vector": 8, "elem_bytes": 2, "assuming": [divisible(M, 8), divisible(lda, 8)]},
    ),
    (
        "aligned",
        (A,),
        {"vector": 4, "elem_bytes": 4, "assuming": [divisible(M, 4), divisible(lda, 4)]},
    ),
    ("bounded", (A,), {"extent": lda * K, "assuming": [lda >= M]}),
    ("bounded", (A,), {"extent": lda * (K - 1) + M, "assuming": [lda >= M]}),
    ("equal", (Layout((M, N), (1, M)), Layout(M * N, 1)), {}),
    ("equal", (Layout(((4, m), N), ((1, 4), lda)), Layout((4 * m, N), (1, lda))), {}),
    ("equal", (Layout((M, N), (1, lda)), Layout(M * N, 1)), {"assuming": [sympy.Eq(lda, M)]}),
    (
        "equal",
        (logical_divide(Layout((16, N), (1, lda)), 8), Layout(((8, 2), N), ((1, 8), lda))),
        {"assuming": [lda >= 16]},
    ),
]

PROVERS = {
    "injective": prove_injective,
    "contiguous": prove_contiguous,
    "aligned": prove_aligned,
    "bounded": prove_bounded,
    "equal": prove_equal,
}


@pytest.mark.parametrize(("prop", "layouts", "kwargs"), PROVED, ids=lambda x: str(x)[:40])
def test_proved_rows(prop: str, layouts: tuple, kwargs: dict) -> None:
    v = PROVERS[prop](*layouts, **kwargs)
    assert v.status == "proved", v
    assert bool(v) and v.reason
    assert v.counterexample is None and v.guard is None


def _replay(prop: str, layouts: tuple, kwargs: dict, cex: dict) -> None:
    """The counterexample's values make the property false by brute force."""
    values = {k: v for k, v in cex.items() if k != "witness"}
    concrete = tuple(substitute(x, values) for x in layouts)
    kw = {k: substitute(v, values) for k, v in kwargs.items() if k != "assuming"}
    assert not reference.check(prop, concrete, kw)
    for a in kwargs.get("assuming", ()):
        if hasattr(a, "divisor"):
            assert substitute(a.expr, values) % substitute(a.divisor, values) == 0
        else:
            assert bool(a.subs({s: values[s.name] for s in a.free_symbols}))


@pytest.mark.parametrize(
    ("prop", "layouts", "kwargs", "values", "coords", "offsets", "hint"),
    [
        ("injective", (Layout((4, 8), (1, 2)),), {}, {}, ((2, 0), (0, 1)), (2, 2), None),
        ("injective", (Layout((4, 3), (2, 3)),), {}, {}, ((3, 0), (0, 2)), (6, 6), None),
        (
            "injective",
            (A,),
            {},
            {"M": 2, "K": 2, "lda": 1},
            ((1, 0), (0, 1)),
            (1, 1),
            "lda >= M",
        ),
        ("injective", (Layout((M, N), (0, 1)),), {}, {"M": 2, "N": 1}, None, None, None),
        ("contiguous", (A,), {"vector": 8, "assuming": [lda >= M]}, {"M": 1}, None, None, "8 | M"),
        (
            "contiguous",
            (Layout(((4, m4), K), ((1, 4), lda)),),
            {"vector": 8},
            {"m4": 1},
            None,
            None,
            None,
        ),
        (
            "aligned",
            (A,),
            {
                "vector": 8,
                "elem_bytes": 2,
                "assuming": [divisible(M, 8), divisible(lda, 4), lda >= M],
            },
            {"M": 8, "K": 2, "lda": 12},
            ((0, 1),),
            (12,),
            "8 | lda",
        ),
        (
            "bounded",
            (A,),
            {"extent": M * K, "assuming": [lda >= M]},
            {"M": 1, "K": 2, "lda": 2},
            ((0, 1),),
            (2,),
            None,
        ),
    ],
    ids=lambda x: str(x)[:30],
)
def test_disproved_rows(
    prop: str, layouts: tuple, kwargs: dict, values: dict, coords: Any, offsets: Any, hint: Any
) -> None:
    v = PROVERS[prop](*layouts, **kwargs)
    assert v.status == "disproved", v
    assert not v
    cex = v.counterexample
    for name, value in values.items():
        assert cex[name] == value, cex
    symbols = {s.name for x in layouts for s in x.free_symbols}
    assert set(cex) == symbols | {"witness"}
    w = cex["witness"]
    if coords is not None:
        assert w["coordinates"] == coords
    if offsets is not None:
        assert w["offsets"] == offsets
    if hint is not None:
        assert v.hint is not None and v.hint.startswith(f"needs {hint}")
    _replay(prop, layouts, kwargs, cex)


def test_unsatisfiable_assumptions_raise() -> None:
    with pytest.raises(AssumptionError, match="unsatisfiable"):
        prove_injective(A, assuming=[lda >= M, lda <= M - 1])


def test_swizzle_column_zero() -> None:
    """A documented CuTe case: S<3,3,3> o (8,64):(64,1), column 0 of rows 0..7."""
    assert [SW(r, 0) for r in range(8)] == [0, 72, 144, 216, 288, 360, 432, 504]
    assert isinstance(SW, ComposedLayout)
    assert prove_bounded(SW, extent=512).status == "proved"
