"""Static layouts need no sympy (issue 35, item 4): sympy is imported only when a symbolic
question is asked.

Every operation below runs on all-int layouts in a fresh process that must end with no
sympy imported; the same process then asks one symbolic question, which must import it
(so the check can fail). The stand-ins of :mod:`tylo.layouts._lazy` answer like the real
modules, and the small-layout enumeration of a composed layout's cosize agrees with the
vectorized one.
"""

from __future__ import annotations

import json
import subprocess
import sys
import unittest.mock
from pathlib import Path

import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from tylo.layouts import ComposedLayout, Layout, Swizzle, size
from tylo.layouts import _lazy as lazy_mod
from tylo.layouts import strategies as S
from tylo.layouts._budget import SMALL_ENUMERATION
from tylo.layouts.proofs import static
from tylo.layouts.proofs.normalize import to_form
from tylo.layouts.swizzle import _max_offset, _max_offset_numpy

ROOT = Path(__file__).resolve().parents[3]

SCRIPT = r"""
import json, sys
from tylo.layouts import (
    ComposedLayout, Layout, Swizzle, blocked_product, coalesce, complement, composition,
    cosize, crd2idx, depth, dim, filter_, idx2crd, left_inverse, logical_divide,
    logical_product, make_tv_layout, parse, prove_aligned, prove_bounded, prove_contiguous,
    prove_equal, prove_injective, rank, raked_product, right_inverse, size, tile_to_shape,
    tiled_divide, zipped_divide,
)
a, b = Layout((4, 8), (8, 1)), Layout((2, 2), (1, 4))
sw = ComposedLayout(Swizzle(3, 3, 3), 0, Layout((8, 64), (64, 1)))
ops = {
    "parse": lambda: str(parse("((2,4),8):((1,16),2)")),
    "sizes": lambda: (size(a), cosize(a), rank(a), depth(a), str(a), hash(a), a == b),
    "offsets": lambda: [a(i) for i in range(32)],
    "crd": lambda: (crd2idx((1, 2), a.shape, a.stride), idx2crd(5, a.shape)),
    "algebra": lambda: (coalesce(a), filter_(a), complement(b, 32), composition(a, b)),
    "inverse": lambda: (right_inverse(a), left_inverse(a)),
    "divide": lambda: (logical_divide(a, b), zipped_divide(a, b), tiled_divide(a, b)),
    "product": lambda: (logical_product(b, Layout(4, 1)), blocked_product(b, b),
                        raked_product(b, b), tile_to_shape(b, (8, 8))),
    "swizzle": lambda: (sw.cosize(), [sw(i) for i in range(64)],
                        composition(sw, Layout((8, 8), (64, 1)))),
    "tv": lambda: make_tv_layout(Layout((4, 8), (8, 1)), Layout((2, 2), (2, 1))),
    "proofs": lambda: [v.status for v in (
        prove_injective(a), prove_injective(Layout((4, 4), (1, 2))),
        prove_contiguous(Layout((8, 8), (1, 8)), vector=8),
        prove_aligned(Layout((8, 8), (1, 8)), vector=8, elem_bytes=2),
        prove_bounded(a, extent=32), prove_equal(a, a), prove_equal(a, b))],
}
out = {}
for name, op in ops.items():
    op()
    out[name] = "sympy" in sys.modules
M = dim("M")
out["symbolic"] = ["sympy" in sys.modules, str(size(Layout((M, 4), (1, M))))]
print(json.dumps(out))
"""


def test_static_layouts_import_no_sympy_until_a_symbol_appears() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    symbolic = out.pop("symbolic")
    assert [k for k, v in out.items() if v] == [], "these static operations imported sympy"
    assert symbolic == [True, "4*M"]


def test_the_stand_in_is_replaced_by_the_real_module() -> None:
    """Once sympy is imported (this process has), every module global that held the
    stand-in is sympy itself, and new lookups get the module."""
    import tylo.layouts.layout as layout_mod
    import tylo.layouts.symbolic as symbolic_mod

    sympy.Integer(1) + layout_mod.sympy.Integer(1)  # a use: the stand-in loads and rebinds
    assert layout_mod.sympy is sympy and symbolic_mod.sympy is sympy
    assert lazy_mod.lazy("sympy") is sympy
    assert isinstance(lazy_mod.lazy("tylo.no_such_module_here"), lazy_mod.LazyModule)


@given(st.one_of(st.integers(), st.booleans(), st.floats(allow_nan=True), st.text(max_size=3)))
@settings(max_examples=50, deadline=None)
def test_is_sympy_is_isinstance_basic(x: object) -> None:
    assert lazy_mod.is_sympy(x) is False
    assert lazy_mod.is_sympy(sympy.sympify(7) + sympy.Symbol("q") * 0 + 1) is True
    assert lazy_mod.is_sympy(sympy.Symbol("q")) is True


def test_small_cosize_of_the_documented_tile() -> None:
    sw = ComposedLayout(Swizzle(3, 3, 3), 0, Layout((8, 64), (64, 1)))
    assert _max_offset(sw) == 511 == _max_offset_numpy(sw)
    assert max(sw(i) for i in range(512)) == 511  # brute force


@given(st.one_of(S.swizzled_layouts(max_size=SMALL_ENUMERATION), S.composed_layouts()))
@settings(max_examples=60, deadline=None)
def test_small_enumeration_agrees_with_numpy(c: ComposedLayout) -> None:
    got = _max_offset(c)
    assert got == _max_offset_numpy(c)
    assert got == max(c(i) for i in range(int(size(c))))


def _concrete(layout: object) -> object:
    return to_form(layout, "").static_concrete


LAYOUTS = st.one_of(S.layouts(max_size=64), S.swizzled_layouts(max_size=64), S.composed_layouts(64))


@given(LAYOUTS, LAYOUTS)
@settings(max_examples=80, deadline=None)
def test_small_equal_check_agrees_with_numpy(a: object, b: object) -> None:
    """check_equal in Python (small sizes) against the numpy enumeration and brute force."""
    ca, cb = _concrete(a), _concrete(b)
    small = static.check_equal(ca, cb)
    with unittest.mock.patch.object(static, "SMALL_ENUMERATION", 0):
        vectorized = static.check_equal(ca, cb)
    assert (small.ok, small.rule, small.witness) == (
        vectorized.ok,
        vectorized.rule,
        vectorized.witness,
    )
    n = int(size(a))
    if n == int(size(b)):
        assert small.ok == all(a(i) == b(i) for i in range(n))


def test_small_equal_check_finds_the_first_difference() -> None:
    a, b = Layout((4, 8), (8, 1)), Layout((8, 4), (1, 8))
    out = static.check_equal(_concrete(a), _concrete(b))
    first = next(i for i in range(32) if a(i) != b(i))
    assert out.ok is False and out.witness["indices"] == (first,)
    assert out.witness["offsets"] == (a(first), b(first))
