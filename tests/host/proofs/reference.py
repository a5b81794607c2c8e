"""Brute-force definitions of the five properties on concrete layouts (test oracle).

Independent of the provers: offsets come from the layouts package's own evaluation
(``layout(i)`` on 1-D colexicographic indices), and each property is its definition.
"""

from __future__ import annotations

from math import gcd
from typing import Any

from tylo.layouts import size
from tylo.layouts.inttuple import product


def mode_sizes(layout: Any) -> list[int]:
    shape = layout.shape
    if type(shape) is not tuple:
        return [product(shape)]
    return [product(s) for s in shape]


def offsets(layout: Any) -> list[int]:
    return [layout(i) for i in range(size(layout))]


def _vectors(layout: Any, vector: int, mode: int) -> list[list[int]]:
    """Per vector (all coordinates of the other modes), its 1-D indices (may be short)."""
    sizes = mode_sizes(layout)
    a = 1
    for s in sizes[:mode]:
        a *= s
    n = sizes[mode]
    b = size(layout) // (a * n)
    out = []
    for post in range(b):
        for pre in range(a):
            for j in range(0, n, vector):
                out.append([pre + a * (j + t + n * post) for t in range(vector) if j + t < n])
    return out


def injective(layout: Any) -> bool:
    off = offsets(layout)
    return len(set(off)) == len(off)


def contiguous(layout: Any, vector: int, mode: int = 0) -> bool:
    if mode_sizes(layout)[mode] % vector:
        return False
    for idx in _vectors(layout, vector, mode):
        offs = [layout(i) for i in idx]
        if any(offs[t + 1] - offs[t] != 1 for t in range(len(offs) - 1)):
            return False
    return True


def aligned(
    layout: Any, vector: int, elem_bytes: int, mode: int = 0, base: int = 0, align: int = 16
) -> bool:
    a_e = align // gcd(align, elem_bytes)
    return all((base + layout(idx[0])) % a_e == 0 for idx in _vectors(layout, vector, mode))


def bounded(layout: Any, extent: int, base: int = 0) -> bool:
    return all(0 <= base + o < extent for o in offsets(layout))


def equal(a: Any, b: Any) -> bool:
    return size(a) == size(b) and offsets(a) == offsets(b)


def check(prop: str, layouts: tuple, kwargs: dict) -> bool:
    """The property by definition (``kwargs`` as for the ``prove_*`` function)."""
    fn = {
        "injective": injective,
        "contiguous": contiguous,
        "aligned": aligned,
        "bounded": bounded,
        "equal": equal,
    }[prop]
    return fn(*layouts, **kwargs)
