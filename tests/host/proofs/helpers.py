"""Shared checks of verdicts against the brute-force oracle (tests only)."""

from __future__ import annotations

import random
from typing import Any

import sympy

from tests.host.proofs import reference
from tylo.layouts import Dim, size, substitute
from tylo.layouts.symbolic import assignments

PROVERS_KW = ("vector", "elem_bytes", "mode", "base", "align", "extent")


def satisfies(values: dict, symbols: set, assumptions: tuple) -> bool:
    """The named values satisfy every symbol's own facts and every assumption."""
    symbols = set(symbols)
    for a in assumptions:
        symbols |= sympy.sympify(a.expr).free_symbols if hasattr(a, "divisor") else a.free_symbols
    by_sym = {}
    for s in symbols:
        v = values[s.name]
        if isinstance(s, Dim) and (v < 1 or v % s.multiple_of):
            return False
        by_sym[s] = sympy.Integer(v)
    for a in assumptions:
        if hasattr(a, "divisor"):
            e = sympy.sympify(a.expr).xreplace(by_sym)
            d = sympy.sympify(a.divisor).xreplace(by_sym)
            if int(e) % int(d):
                return False
        elif a.xreplace(by_sym) is not sympy.true:
            return False
    return True


def concrete(prop_args: tuple, kwargs: dict, values: dict) -> tuple[tuple, dict]:
    layouts = tuple(substitute(x, values) for x in prop_args)
    kw = {k: substitute(v, values) for k, v in kwargs.items() if k in PROVERS_KW}
    return layouts, kw


def check_witness(prop: str, layouts: tuple, kw: dict, witness: Any) -> None:
    """The witness shows the failure on the concrete layouts."""
    coords, offs = witness["coordinates"], witness["offsets"]
    if prop == "equal":
        a, b = layouts
        i = witness["indices"][0]
        if None in offs:
            assert size(a) != size(b) and min(size(a), size(b)) == i
            return
        assert (a(coords[0]), b(coords[1])) == tuple(offs) and offs[0] != offs[1]
        assert (a(i), b(i)) == tuple(offs)
        return
    (lay,) = layouts
    got = tuple(lay(c) for c in coords)
    assert got == tuple(offs), (got, offs)
    if prop == "injective":
        assert coords[0] != coords[1] and offs[0] == offs[1]
    elif prop == "contiguous":
        n = reference.mode_sizes(lay)[kw.get("mode", 0) % len(reference.mode_sizes(lay))]
        if n % kw["vector"] == 0:
            assert len(offs) == kw["vector"]
            assert any(offs[t + 1] - offs[t] != 1 for t in range(len(offs) - 1))
    elif prop == "aligned":
        from math import gcd

        a_e = kw.get("align", 16) // gcd(kw.get("align", 16), kw["elem_bytes"])
        assert (kw.get("base", 0) + offs[0]) % a_e != 0
    elif prop == "bounded":
        assert not 0 <= kw.get("base", 0) + offs[0] < kw["extent"]


def check_verdict_static(prop: str, layouts: tuple, kw: dict, v: Any) -> None:
    """A verdict on static layouts equals brute force, with a valid witness."""
    truth = reference.check(prop, layouts, kw)
    assert v.status == ("proved" if truth else "disproved"), (v, layouts, kw)
    if not truth:
        check_witness(prop, layouts, kw, v.counterexample["witness"])


def instances(objs: Any, assumptions: tuple, count: int, seed: int, max_value: int = 10) -> list:
    """``count`` random satisfying assignments, by name."""
    rng = random.Random(seed)
    return [
        {s.name: int(x) for s, x in env.items()}
        for env in assignments(
            [objs], rng, count=count, max_value=max_value, assumptions=assumptions
        )
    ]
