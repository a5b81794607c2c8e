"""tylo.tile.fragment_io on the host: which slots of an ownership move as one vector (runs of
consecutive elements along one axis), and typed errors for ownerships that have none."""

from __future__ import annotations

import pytest

from tylo.layouts.tv import MMA_M16N8K16_C_TV
from tylo.tile.access import TileError
from tylo.tile.fragment_io import vector_axis
from tylo.tile.ownership import Ownership

C = Ownership(MMA_M16N8K16_C_TV, (16, 8))  # lane t: rows t//4, t//4 + 8; cols 2(t%4), +1
STRIPED = Ownership.from_modes((8, 512), [(32, 1, 4), (8, 0, 1)], [(4, 1, 1), (4, 1, 128)])


def test_vector_runs_follow_the_value_modes():
    assert vector_axis(C, 1) is None
    assert vector_axis(C, 2) == 1  # column pairs: the accumulator's 8-byte stores
    assert vector_axis(C.transpose(), 2) == 0
    assert vector_axis(STRIPED, 4) == 1 and vector_axis(STRIPED, 2) == 1


@pytest.mark.parametrize(
    "own,vector,match",
    [
        (C, 4, "slots 0..3 of .* are not 4 consecutive elements along one axis"),
        (STRIPED, 8, r"slot 4 is at offset \(0, 128\) from slot 0"),
        (STRIPED, 3, "vector must be a positive int dividing the 16 slots"),
        (STRIPED, 0, "vector must be a positive int"),
        (STRIPED, 2.0, "vector must be a positive int"),
    ],
)
def test_no_vector_runs_is_a_typed_error(own, vector, match):
    with pytest.raises(TileError, match=match):
        vector_axis(own, vector)


def test_runs_must_keep_one_axis():
    # slots 0, 1 move along columns, slots 2, 3 along rows: no single vector axis
    mixed = Ownership.from_modes((4, 4), [(4, None, 0)], [(2, 1, 1), (2, 0, 1)])
    assert vector_axis(mixed, 2) == 1
    with pytest.raises(TileError, match="not 4 consecutive"):
        vector_axis(mixed, 4)
    with pytest.raises(TileError, match="expected an Ownership"):
        vector_axis("rows", 2)
