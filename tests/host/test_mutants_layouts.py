"""Layout algebra behaviour pinned by tests written to kill mutants that survived
tools/mutate.py (the rule each test states is the documented one; no expected value is read
from the code under test)."""

from __future__ import annotations

import pytest

from tylo.layouts import Layout, composition, dim
from tylo.layouts.errors import ShapeError, UndecidableError


@pytest.mark.parametrize("bad", [object(), "4:1", [4, 1], 2.5])
def test_composition_refuses_a_left_operand_that_is_no_layout(bad):
    with pytest.raises(ShapeError, match="composition"):
        composition(bad, Layout(4, 1))


def test_an_undecided_extent_one_is_the_condition_named():
    """A symbolic extent ``N`` between A's modes may or may not be 1, and A's coalesced form
    (what composition is judged on) depends on it: the refusal names ``N == 1``."""
    n = dim("N")
    with pytest.raises(UndecidableError) as info:
        composition(Layout((2, n, 4), (1, 4, 64)), Layout(2, 3))
    assert info.value.condition == "N == 1"
    assert "with assuming(N == 1)" in str(info.value)
