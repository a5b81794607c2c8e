"""Every bad input raises a LayoutError subclass whose message names the operation, the
operands in CuTe notation, what failed and the fix."""

from __future__ import annotations

import pytest
import sympy

from tylo.errors import TyloError
from tylo.layouts import (
    AssumptionError,
    ComplementError,
    CompositionError,
    InverseError,
    Layout,
    LayoutError,
    NotationError,
    ShapeError,
    StaticRequiredError,
    Swizzle,
    SwizzleError,
    UndecidableError,
    assuming,
    complement,
    composition,
    dim,
    left_inverse,
    logical_divide,
    right_inverse,
    select,
    tile_to_shape,
)
from tylo.layouts.symbolic import require_static

P = Layout.parse


def test_hierarchy():
    for cls in (
        AssumptionError,
        ComplementError,
        CompositionError,
        InverseError,
        NotationError,
        ShapeError,
        StaticRequiredError,
        SwizzleError,
        UndecidableError,
    ):
        assert issubclass(cls, LayoutError) and issubclass(cls, TyloError)
    assert issubclass(NotationError, ShapeError)


def test_composition_stride_divisibility():
    with pytest.raises(CompositionError) as info:
        composition(P("(4,6):(1,5)"), P("4:3"))
    msg = str(info.value)
    for part in ("composition", "(4,6):(1,5)", "4:3", "stride 3", "extent 4", "use a right"):
        assert part in msg


def test_composition_shape_divisibility():
    with pytest.raises(CompositionError) as info:
        composition(P("(3,5):(1,4)"), P("4:1"))
    assert "shape divisibility" in str(info.value) and "(3,5):(1,4)" in str(info.value)


def test_composition_tiler_too_long():
    with pytest.raises(CompositionError, match="tiler has 3 modes"):
        composition(P("(4,8):(1,4)"), (2, 2, 2))


def test_inadmissible_complement():
    with pytest.raises(ComplementError) as info:
        complement(P("(4,8):(1,2)"), 64)
    msg = str(info.value)
    assert "complement((4,8):(1,2), 64)" in msg and "not admissible" in msg
    with pytest.raises(ComplementError, match="negative"):
        complement(P("4:-1"), 8)


def test_left_inverse_of_non_injective():
    with pytest.raises(InverseError, match=r"left_inverse\(\(4,8\):\(1,2\)\).*not injective"):
        left_inverse(P("(4,8):(1,2)"))
    with pytest.raises(InverseError, match="not injective"):
        left_inverse(P("(4,2):(1,0)"))


@pytest.mark.parametrize(
    ("shape", "stride", "match"),
    [
        ((4, 8), (1,), "not congruent"),
        ((4, (2, 2)), (1, 4), "not congruent"),
        ((4, 0), None, "not positive"),
        ((4, -2), None, "not positive"),
        ((), None, "empty tuple"),
        ((4, 2.5), None, "float"),
        ((4, True), None, "bool"),
        ((sympy.Symbol("x"), 2), None, "not an integer expression"),
    ],
)
def test_bad_layouts(shape, stride, match):
    with pytest.raises(ShapeError, match=match):
        Layout(shape, stride)


def test_symbolic_extent_needs_facts():
    n = dim("N")
    with pytest.raises(UndecidableError, match="must be an integer"):
        Layout((4, n / 8))
    with pytest.raises(UndecidableError) as info:
        Layout((4, n - 2))
    assert "N-2 >= 1" in info.value.condition
    with assuming(n >= 3):
        assert Layout((4, n - 2)).shape == (4, n - 2)


@pytest.mark.parametrize(
    "text",
    ["((2,2),8):((1,16),2", "(2,,3)", "(2,3):(1,2)x", "", "(2,3):", "S<3,3,3> o", "(2;3)"],
)
def test_malformed_notation(text):
    with pytest.raises(NotationError) as info:
        Layout.parse(text)
    assert "Layout.parse" in str(info.value)


def test_parse_of_a_composed_layout_as_layout():
    with pytest.raises(NotationError, match="ComposedLayout"):
        Layout.parse("S<3,3,3> o (8,64):(64,1)")


def test_undecidable_names_the_fact():
    n = dim("N")
    with pytest.raises(UndecidableError) as info:
        composition(Layout((n, 4), (1, 2 * n)), Layout(8, 1))
    e = info.value
    assert e.operation == "composition" and "N" in e.condition
    assert "assum" in str(e) and "(N,4):(1,2*N)" in str(e)
    # a divide of a symbolic size rounds up (CuTe's ceil); crossing a symbolic mode does not
    with pytest.raises(UndecidableError, match=r"N \| 16 \(or 16 <= N"):
        logical_divide(Layout((n, 4), (1, 2 * n)), Layout(16, 1)).shape  # noqa: B018
    lda, m = dim("lda"), dim("m")
    with pytest.raises(UndecidableError, match="lda == m"):
        right_inverse(Layout((m, 4), (1, lda)))


def test_swizzle_errors():
    with pytest.raises(SwizzleError, match="overlap"):
        Swizzle(3, 3, 2)
    with pytest.raises(SwizzleError, match=">= 0"):
        Swizzle(-1, 3, 3)
    with pytest.raises(SwizzleError, match="static"):
        Swizzle(dim("B"), 3, 3)


def test_misc_errors():
    with pytest.raises(ShapeError, match="out of range"):
        select(P("(2,3):(1,2)"), 5)
    with pytest.raises(LayoutError, match="tile_to_shape"):
        tile_to_shape(P("(2,2):(1,2)"), (6, 7))
    with pytest.raises(StaticRequiredError, match="tile_m"):
        require_static(dim("M"), what="tile_m")
    with (
        pytest.raises(AssumptionError, match="unsatisfiable"),
        assuming(dim("M") >= 4, dim("M") < 3),
    ):
        pass
