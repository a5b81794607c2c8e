"""Right and left inverses of layouts.

``right_inverse(L)`` is the largest ``R`` (a compact prefix of L's codomain) with
``L(R(i)) == i``; ``left_inverse(L)`` is an ``R`` with ``R(L(i)) == i`` for every index
of an injective ``L``.
"""

from __future__ import annotations

from typing import Any

from tylo.layouts.algebra import coalesce, complement, is_one, is_zero
from tylo.layouts.errors import ComplementError, InverseError, LayoutError
from tylo.layouts.inttuple import fmt, vmul
from tylo.layouts.layout import Layout, _as_layout, make_layout
from tylo.layouts.symbolic import decide_cmp, undecidable_cmp

__all__ = ["left_inverse", "right_inverse"]


def right_inverse(layout: Any) -> Layout:
    """The largest layout ``R`` with ``layout(R(i)) == i`` for every ``i < size(R)``: it
    follows the modes whose strides chain ``1, s0, s0*s1, ...`` from stride 1.

    >>> str(right_inverse(Layout((2, 4, 6), (4, 1, 8)))), str(right_inverse(Layout((2, 4), (4, 1))))
    ('(4,2,6):(2,1,8)', '(4,2):(2,1)')
    """
    x = _as_layout(layout, "right_inverse")
    if not isinstance(x, Layout):
        raise InverseError(f"right_inverse({x}): composed layouts have no inverse layout here")
    c = coalesce(x)
    fs, fd = c.flat()
    # index strides of the coalesced modes (colexicographic)
    idx_strides = []
    acc: Any = 1
    for s in fs:
        idx_strides.append(acc)
        acc = vmul(acc, s)
    remaining = [k for k in range(len(fs)) if not is_one(fs[k])]
    rs: list = []
    rd: list = []
    cur: Any = 1
    while remaining:
        found = None
        unknown = None
        for k in remaining:
            d = fd[k]
            if type(d) is int and type(cur) is int:
                if d == cur:
                    found = k
                    break
                continue
            r = decide_cmp(d, "==", cur)
            if r is True:
                found = k
                break
            if r is None and unknown is None:
                unknown = k
        if found is None:
            if unknown is not None:
                raise undecidable_cmp(
                    "right_inverse",
                    fd[unknown],
                    "==",
                    cur,
                    f"does a mode of {x} continue the inverse",
                )
            break
        remaining.remove(found)
        rs.append(fs[found])
        rd.append(idx_strides[found])
        cur = vmul(fs[found], fd[found])
    if not rs:
        return Layout._make(1, 0)
    return coalesce(Layout._make(tuple(rs), tuple(rd)))


def left_inverse(layout: Any) -> Layout:
    """A layout ``R`` with ``R(layout(i)) == i`` for every ``i < size(layout)``; exists
    for injective layouts whose sorted strides divide each other (admissible ones).
    Raises InverseError for a non-injective layout.

    >>> str(left_inverse(Layout((2, 3), (1, 2)))), str(left_inverse(Layout((2, 4, 6), (4, 1, 8))))
    ('6:1', '(4,2,6):(2,1,8)')
    """
    x = _as_layout(layout, "left_inverse")
    if not isinstance(x, Layout):
        raise InverseError(f"left_inverse({x}): composed layouts have no inverse layout here")
    fs, fd = x.flat()
    for s, d in zip(fs, fd):
        if is_zero(d) and not is_one(s):
            big = decide_cmp(s, ">=", 2)
            if big is None:
                raise undecidable_cmp("left_inverse", s, "==", 1, f"mode {fmt(s)}:0 of {x}")
            raise InverseError(
                f"left_inverse({x}): the layout is not injective (mode {fmt(s)}:0 maps "
                f"{fmt(s)} coordinates to one offset), so no left inverse exists"
            )
    try:
        comp = complement(x)
    except ComplementError as e:
        raise InverseError(
            f"left_inverse({x}): the layout is not injective, or its strides are not "
            f"admissible, so no left inverse layout exists ({e})"
        ) from None
    except LayoutError as e:
        raise e.within(f"left_inverse({x})") from None
    return right_inverse(make_layout(x, comp))
