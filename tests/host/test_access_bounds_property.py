"""The access verdicts against brute force: random affine accesses under random guards.

Two levels, both checked by enumerating every thread, block and loop iteration of small
launches (the oracle is plain Python arithmetic, not tylo):

- ``offset_range`` (tylo.kernel.access_bounds): the bounds it gives, with the launch values
  substituted, contain every offset a thread under the path condition computes;
- a traced kernel: ``check_launch`` never accepts a launch in which some thread reads
  outside its array, and an OutOfBoundsError while tracing is only raised for kernels
  whose every launch has such a thread. Accepting a launch that is in bounds is checked
  too (no false refusal) where the guard is exact: an unconditional affine access.
"""

from __future__ import annotations

import itertools

import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

import tylo
from tylo.kernel import access_bounds, facts
from tylo.layouts.symbolic import assuming

S = tylo.ArraySpec


@st.composite
def affine_access(draw):
    block = draw(st.integers(1, 6))
    coeffs = {
        "c0": draw(st.integers(-12, 12)),
        "ct": draw(st.integers(-3, 3)),
        "cb": draw(st.integers(-8, 8)),
        "ck": draw(st.integers(-3, 3)),
        "cn": draw(st.integers(-2, 2)),
    }
    guard = draw(st.sampled_from(["none", "lt_n", "ge_d"]))
    d = draw(st.integers(-4, 6))
    return block, coeffs, guard, d


@settings(max_examples=150, deadline=None)
@given(affine_access())
def test_offset_range_contains_every_offset(case):
    block, c, guard, d = case
    n = facts.dim("n")
    grid = facts.dim("grid_dim_x")
    tid = facts.index_symbol("tid_x", upper=block)
    bid = facts.index_symbol("bid_x", upper=grid)
    k = facts.index_symbol("k", upper=n)
    inner = c["ct"] * tid + c["cb"] * bid + c["ck"] * k
    expr = c["c0"] + inner + c["cn"] * n
    rel = {"none": None, "lt_n": inner + d < n, "ge_d": inner >= d}[guard]
    rels = [] if rel is None else [rel]
    try:
        with assuming(*rels):
            lo, hi = access_bounds.offset_range(expr, [n], rels, facts.decide)
    except tylo.layouts.AssumptionError:
        return  # a guard no index satisfies: nothing to check
    for nv, gv in itertools.product(range(1, 4), range(1, 4)):
        offsets = []
        for t, b, kk in itertools.product(range(block), range(gv), range(nv)):
            val = c["ct"] * t + c["cb"] * b + c["ck"] * kk
            if guard == "lt_n" and not val + d < nv:
                continue
            if guard == "ge_d" and not val >= d:
                continue
            offsets.append(c["c0"] + val + c["cn"] * nv)
        if not offsets:
            continue
        subs = {n: nv, grid: gv}
        if lo is not None:
            assert int(sympy.sympify(lo).subs(subs)) <= min(offsets), (expr, rel, nv, gv)
        if hi is not None:
            assert int(sympy.sympify(hi).subs(subs)) >= max(offsets), (expr, rel, nv, gv)


@tylo.kernel
def affine(x, n: tylo.Int(min=0), c0: tylo.Static, ct: tylo.Static, cb: tylo.Static,
           masked: tylo.Static):  # fmt: skip
    i = ct * tylo.thread_idx.x + cb * tylo.block_idx.x + c0
    if masked:
        if i < n:
            x[i] = 1.0
    else:
        x[i] = 1.0


def _outside(c0, ct, cb, masked, block, grid, n, length):
    """Whether some thread of the launch stores outside ``length`` elements (brute force)."""
    for t, b in itertools.product(range(block), range(grid)):
        i = ct * t + cb * b + c0
        if masked and not i < n:
            continue
        if not 0 <= i < length:
            return True
    return False


@settings(max_examples=40, deadline=None)
@given(
    c0=st.integers(-3, 8),
    ct=st.integers(-2, 3),
    cb=st.integers(0, 9),
    masked=st.booleans(),
    block=st.integers(1, 8),
    grid=st.integers(1, 4),
    n=st.integers(0, 40),
    length=st.integers(0, 40),
)
def test_check_launch_never_accepts_a_launch_that_leaves_the_array(
    c0, ct, cb, masked, block, grid, n, length
):
    bad = _outside(c0, ct, cb, masked, block, grid, n, length)
    try:
        report = affine.accesses(tylo.f32, int, c0, ct, cb, masked, block=block)
    except tylo.OutOfBoundsError:
        assert bad  # out of bounds for every launch; this one included
        return
    if report.count("unproved"):  # no claim: said so, with the reason
        assert all(a.reason for a in report.accesses if a.state == "unproved")
        return
    try:
        affine.check_launch(grid, block, S(length, tylo.f32), n, c0, ct, cb, masked)
    except tylo.OutOfBoundsError:
        # refused while tracing: out of bounds for every launch; this one included
        assert bad
        return
    except tylo.OutOfBoundsLaunchError:
        if not masked:  # an unconditional affine access: the guard is exact
            assert bad, "refused a launch that stays in bounds"
        return
    assert not bad, "accepted a launch in which a thread leaves the array"


def test_an_offset_that_may_be_negative_under_a_branch_is_unproved_not_accepted():
    """The case hypothesis found first: ``i = bid - 1`` under ``if i < n`` stores at -1 for
    block 0 when n >= 0; the branch may or may not run, so tylo says unproved (and why)."""
    report = affine.accesses(tylo.f32, int, -1, 0, 1, True, block=1)
    (access,) = report.accesses
    assert access.state == "unproved" and "may be negative" in access.reason
