"""The persistent Hopper attention's shares of work per CTA (``cta_items`` and ``cta_item``
of examples/attention/hopper_persistent.py) without a GPU: the CTAs' item lists partition
the items, each CTA's count is ``cta_items``, a paired CTA's items come as mirrored pairs
whose causal key tiles sum to ``q_tiles + 1``, the u32 evaluation (numpy's uint32 wraps as
the kernel's would) equals Python's and no intermediate leaves ``[0, 2**32)``, and the
causal load per CTA is within one pair of the mean: a few percent at the benchmark's
shapes, where round-robin (and the snake) leave one CTA ~1.5x the mean at 16k."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from examples.attention.hopper_persistent import cta_item, cta_items, item_order, work_items

U32 = 2**32


def _shares(items, grid, q_tiles):
    """Each CTA's items, in the order it takes them."""
    heads = items // q_tiles
    return [[cta_item(i, grid, c, q_tiles, heads) for i in range(cta_items(items, grid, c))]
            for c in range(grid)]  # fmt: skip


def _weight(t, q_tiles):
    """Causal key tiles of item ``t`` (bm = bn): its q-tile ``k`` sees ``k + 1`` of them."""
    return item_order(t, q_tiles, 1, True)[0] + 1


@st.composite
def _shape(draw):
    q_tiles, bh = draw(st.integers(1, 40)), draw(st.integers(1, 40))
    items = q_tiles * bh
    edges = {1, items, max(1, items - 1), max(1, items // 2), (items + 1) // 2,
             max(1, (items - 1) // 2), min(items, 132)}  # fmt: skip
    grid = draw(st.one_of(st.sampled_from(sorted(edges)), st.integers(1, items)))
    return q_tiles, bh, grid


@settings(max_examples=300, deadline=None)
@given(shape=_shape())
def test_ctas_partition_the_items_in_mirrored_pairs(shape):
    q_tiles, bh, grid = shape
    items = q_tiles * bh
    shares = _shares(items, grid, q_tiles)
    assert sorted(t for share in shares for t in share) == list(range(items))
    if items < 2 * grid:  # round-robin: c, then c + grid
        assert shares == [list(range(c, items, grid)) for c in range(grid)]
        return
    for share in shares:
        for a, b in zip(share[::2], share[1::2]):
            ka, ha, _ = item_order(a, q_tiles, bh, True)
            kb, hb, _ = item_order(b, q_tiles, bh, True)
            if ha == hb:  # an odd count's last (batch, head): a q-tile and its mirror
                assert bh % 2 == 1 and ha == bh - 1 and ka + kb == q_tiles - 1 and ka > kb
            else:  # two neighbouring (batch, head)s
                assert hb == ha + 1 and ha % 2 == 0 and ka + kb == q_tiles - 1
            assert _weight(a, q_tiles) + _weight(b, q_tiles) == q_tiles + 1
        # an unpaired item only at the very end (odd items): the last item of the order
        if len(share) % 2:
            assert items % 2 == 1 and share[-1] == _mirror_last(items, q_tiles)


def _mirror_last(items, q_tiles):
    """The last item of an odd count in the mirrored order: the last (batch, head)'s middle
    q-tile."""
    return items - q_tiles + (q_tiles - 1) // 2


class _Checked(int):
    """An int whose every arithmetic result must stay in ``[0, bound]`` (``max(items, 2)``:
    the functions' claim, below 2**32): the kernel's u32 evaluation wraps silently where
    this raises. ``_checked(bound)`` makes the class for one bound."""

    bound = U32 - 1

    def _op(self, other, f):
        r = f(int(self), int(other))
        assert 0 <= r <= self.bound, f"intermediate {r} leaves [0, {self.bound}]"
        return type(self)(r)

    def __add__(self, o):
        return self._op(o, int.__add__)

    def __radd__(self, o):
        return type(self)(o)._op(self, int.__add__)

    def __sub__(self, o):
        return self._op(o, int.__sub__)

    def __rsub__(self, o):
        return type(self)(o)._op(self, int.__sub__)

    def __mul__(self, o):
        return self._op(o, int.__mul__)

    def __rmul__(self, o):
        return type(self)(o)._op(self, int.__mul__)

    def __floordiv__(self, o):
        return self._op(o, int.__floordiv__)

    def __rfloordiv__(self, o):
        return type(self)(o)._op(self, int.__floordiv__)

    def __mod__(self, o):
        return self._op(o, int.__mod__)


def _checked(bound):
    return type("_CheckedTo", (_Checked,), {"bound": bound})


def test_checked_ints_catch_a_wrap():
    """The checker is not vacuous: a sum past its bound and a negative difference raise, and
    the round-robin item ``c + i grid`` one round past a CTA's count leaves the items."""
    with pytest.raises(AssertionError, match="leaves"):
        _Checked(5) + _Checked(U32 - 2) * 1
    with pytest.raises(AssertionError, match="leaves"):
        _Checked(3) - 4
    n = _checked(10)
    with pytest.raises(AssertionError, match="leaves"):
        n(3) + n(3) * 3  # CTA 3 of 3 at i = 3 with 10 items: 12


def _u32_cases(items, rng):
    grids = {1, 2, items, items - 1, max(1, items // 2), (items + 1) // 2, min(items, 132),
             int(rng.integers(1, items + 1))}  # fmt: skip
    for grid in sorted(g for g in grids if 1 <= g <= items):
        for c in sorted({0, grid - 1, grid // 2, int(rng.integers(0, grid))}):
            n = cta_items(items, grid, c)
            for i in sorted(i for i in {0, 1, n - 1, n - 2, int(rng.integers(0, n))} if 0 <= i < n):
                yield grid, c, n, i


@pytest.mark.parametrize("q_tiles, bh", [(65537, 65535), (1, 2**32 - 1), (2**16, 2**16 - 1),
                                         (3, 1431655765), (127, 33818640), (3, 5)])  # fmt: skip
def test_u32_evaluation_equals_pythons(q_tiles, bh):
    """Up to 2**32 - 1 items, grid up to items: numpy's uint32 (the kernel's wrapping
    arithmetic) gives Python's counts and items, and no intermediate leaves
    ``[0, max(items, 2)]``."""
    items = work_items(q_tiles, bh, 1)
    assert items < U32
    rng = np.random.default_rng(items)
    u = np.uint32
    for grid, c, n, i in _u32_cases(items, rng):
        assert int(cta_items(u(items), u(grid), u(c))) == n
        assert cta_items(*map(_checked(max(items, 2)), (items, grid, c))) == n
        t = cta_item(i, grid, c, q_tiles, bh)
        assert 0 <= t < items
        assert int(cta_item(u(i), u(grid), u(c), u(q_tiles), u(bh))) == t
        assert cta_item(*map(_checked(max(items, 2)), (i, grid, c, q_tiles, bh))) == t


@settings(max_examples=150, deadline=None)
@given(q_tiles=st.integers(1, 300), bh=st.integers(1, 300), data=st.data())
def test_u32_evaluation_never_wraps(q_tiles, bh, data):
    items = q_tiles * bh
    grid = data.draw(st.integers(1, items))
    c = data.draw(st.integers(0, grid - 1))
    n = cta_items(items, grid, c)
    assert cta_items(*map(_checked(max(items, 2)), (items, grid, c))) == n
    for i in {0, n - 1, data.draw(st.integers(0, n - 1))}:
        t = cta_item(i, grid, c, q_tiles, bh)
        assert cta_item(*map(_checked(max(items, 2)), (i, grid, c, q_tiles, bh))) == t


def _max_over_mean(loads):
    return max(loads) / (sum(loads) / len(loads))


def _loads(shares, q_tiles):
    return [sum(_weight(t, q_tiles) for t in share) for share in shares]


def _round_robin(items, grid):
    return [list(range(c, items, grid)) for c in range(grid)]


def _snake(items, grid):
    """The boustrophedon alternative: round ``r`` takes ``r grid + c`` (even ``r``) or
    ``r grid + grid - 1 - c`` (odd)."""
    shares = [[] for _ in range(grid)]
    for t in range(items):
        r, pos = divmod(t, grid)
        shares[pos if r % 2 == 0 else grid - 1 - pos].append(t)
    return shares


@pytest.mark.parametrize(
    "q_tiles, bh, bound",
    [
        # benchmarks/attention.py, D = 64 (bm 128), 132 SMs: max / mean causal load
        (8, 256, 1.04),  # L = 1k, B 16 x H 16: round-robin 1.375, snake 1.031; here 1.031
        (32, 64, 1.04),  # L = 4k, B 4 x H 16: round-robin 1.125, snake 1.031; here 1.031
        (128, 16, 1.04),  # L = 16k, B 1 x H 16: round-robin 1.567, snake 1.543; here 1.031
        # and L = 32k, H 16 (not benchmarked), where the snake is the worse one
        (256, 16, 1.04),  # round-robin 1.043, snake 1.513; here 1.031
    ],
)
def test_causal_load_is_balanced_at_the_benchmark_shapes(q_tiles, bh, bound):
    items, grid = q_tiles * bh, 132
    ours = _max_over_mean(_loads(_shares(items, grid, q_tiles), q_tiles))
    rr = _max_over_mean(_loads(_round_robin(items, grid), q_tiles))
    snake = _max_over_mean(_loads(_snake(items, grid), q_tiles))
    assert ours <= bound and ours <= rr and ours <= snake, (ours, rr, snake)


@settings(max_examples=120, deadline=None)
@given(q_tiles=st.integers(1, 200), bh=st.integers(1, 64), sms=st.integers(1, 140))
def test_paired_load_is_within_one_pair_of_the_mean(q_tiles, bh, sms):
    """With ``items >= 2 grid`` every CTA's causal load is at most ``ceil(pairs / grid)``
    pairs of ``q_tiles + 1`` key tiles: within one pair of the mean, whatever the shape
    (round-robin's excess grows with the q-tiles per (batch, head))."""
    items = q_tiles * bh
    grid = min(items, sms)
    loads = _loads(_shares(items, grid, q_tiles), q_tiles)
    if items >= 2 * grid:
        pairs = -(-items // 2)
        assert max(loads) <= -(-pairs // grid) * (q_tiles + 1)
        assert max(loads) <= sum(loads) / grid + (q_tiles + 1) * (1 + 1 / (2 * grid))
    else:  # round-robin, at most two items a CTA
        assert max(map(len, _shares(items, grid, q_tiles))) <= 2


def test_round_robin_would_fail_the_bounds():
    """The bounds above are not vacuous: round-robin breaks the pair bound at 16k."""
    q_tiles, items, grid = 128, 128 * 16, 132
    loads = _loads(_round_robin(items, grid), q_tiles)
    pairs = -(-items // 2)
    assert max(loads) > -(-pairs // grid) * (q_tiles + 1)
    assert _max_over_mean(loads) > 1.04
