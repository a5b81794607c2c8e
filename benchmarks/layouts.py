"""Layout algebra speed: tylo (static and symbolic) against pycute.

pycute ships inside the ``nvidia-cutlass`` wheel (``pip install --no-deps
nvidia-cutlass==4.2.0.0``); without it the pycute column reads "n/a". Run:

    python benchmarks/layouts.py [--repeat 7] [--number 2000]

Prints one row per case: op, pycute µs, tylo static µs, ratio (pycute/tylo: > 1 means tylo
is faster), tylo symbolic µs (same case with runtime extents), symbolic/static. Each time is
the best of ``--repeat`` runs of ``--number`` calls.
"""

from __future__ import annotations

import argparse
import sys
import timeit
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tylo.layouts import (
    Layout,
    coalesce,
    complement,
    composition,
    dim,
    logical_divide,
)

try:
    import pycute
except ImportError:  # pragma: no cover - optional baseline
    pycute = None

M = dim("M", multiple_of=128)
N = dim("N", multiple_of=64)
K = dim("K", multiple_of=8)


def cases() -> list[tuple[str, Any, Any, Any]]:
    """(label, tylo static thunk, pycute thunk or None, tylo symbolic thunk)."""
    out = []
    pc = pycute

    def pl(shape: Any, stride: Any) -> Any:
        return pc.Layout(shape, stride) if pc else None

    # composition: a 128x64 row-major tile by a (64,32) by-mode tiler, and the
    # the 1-D reference case
    a, pa = Layout((128, 64), (64, 1)), pl((128, 64), (64, 1))
    sa = Layout((M, N), (N, 1))
    out.append(
        (
            "composition (128,64):(64,1) o <64,32>",
            lambda: composition(a, (64, 32)),
            (lambda: pc.composition(pa, (64, 32))) if pc else None,
            lambda: composition(sa, (64, 32)),
        )
    )
    b, pb = Layout((6, 2), (8, 2)), pl((6, 2), (8, 2))
    bb, pbb = Layout((4, 3), (3, 1)), pl((4, 3), (3, 1))
    sb = Layout((6, K), (8, 2))
    out.append(
        (
            "composition (6,2):(8,2) o (4,3):(3,1)",
            lambda: composition(b, bb),
            (lambda: pc.composition(pb, pbb)) if pc else None,
            lambda: composition(sb, bb),
        )
    )
    # logical_divide
    out.append(
        (
            "logical_divide (128,64):(64,1) / <64,32>",
            lambda: logical_divide(a, (64, 32)),
            (lambda: pc.logical_divide(pa, (64, 32))) if pc else None,
            lambda: logical_divide(sa, (64, 32)),
        )
    )
    c, pcc = Layout((4, 2, 3), (2, 1, 8)), pl((4, 2, 3), (2, 1, 8))
    t, pt = Layout(4, 2), pl(4, 2)
    sc = Layout((4, 2, K), (2, 1, 8))
    out.append(
        (
            "logical_divide (4,2,3):(2,1,8) / 4:2",
            lambda: logical_divide(c, t),
            (lambda: pc.logical_divide(pcc, pt)) if pc else None,
            lambda: logical_divide(sc, t),
        )
    )
    # coalesce
    d = Layout(((2, (3, 4)), (3, 2), 1), ((4, (8, 24)), (2, 6), 12))
    pd = pl(((2, (3, 4)), (3, 2), 1), ((4, (8, 24)), (2, 6), 12))
    sd = Layout(((2, (3, K)), (3, 2), 1), ((4, (8, 24)), (2, 6), 12))
    out.append(
        (
            "coalesce ((2,(3,4)),(3,2),1):...",
            lambda: coalesce(d),
            (lambda: pc.coalesce(pd)) if pc else None,
            lambda: coalesce(sd),
        )
    )
    e, pe = Layout((128, 64), (1, 128)), pl((128, 64), (1, 128))
    se = Layout((M, N), (1, M))
    out.append(
        (
            "coalesce (128,64):(1,128)",
            lambda: coalesce(e),
            (lambda: pc.coalesce(pe)) if pc else None,
            lambda: coalesce(se),
        )
    )
    # complement
    f, pf = Layout((2, 2), (1, 6)), pl((2, 2), (1, 6))
    sf = Layout((2, 2), (1, 6))
    n = dim("n")
    out.append(
        (
            "complement (2,2):(1,6), 24",
            lambda: complement(f, 24),
            (lambda: pc.complement(pf, 24)) if pc else None,
            lambda: complement(sf, 24 * n),
        )
    )
    g, pg = Layout((64, 32), (1, 128)), pl((64, 32), (1, 128))
    sg = Layout((64, 32), (1, 2 * N))
    out.append(
        (
            "complement (64,32):(1,128), 8192",
            lambda: complement(g, 8192),
            (lambda: pc.complement(pg, 8192)) if pc else None,
            lambda: complement(sg, 64 * N),
        )
    )
    return out


def best(fn: Any, repeat: int, number: int) -> float:
    return min(timeit.repeat(fn, repeat=repeat, number=number)) / number * 1e6


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--number", type=int, default=2000)
    args = ap.parse_args(argv)
    rows = []
    for label, tylo_fn, pycute_fn, sym_fn in cases():
        tylo_fn(), sym_fn()  # warm caches, and fail early
        if pycute_fn:
            pycute_fn()
        t_static = best(tylo_fn, args.repeat, args.number)
        t_sym = best(sym_fn, args.repeat, max(1, args.number // 10))
        t_py = best(pycute_fn, args.repeat, args.number) if pycute_fn else None
        rows.append((label, t_py, t_static, t_sym))
    head = (
        f"{'op':44} {'pycute µs':>10} {'tylo µs':>9} {'ratio':>6} {'symbolic µs':>12} "
        f"{'sym/static':>10}"
    )
    print(head)
    print("-" * len(head))
    for label, t_py, t_static, t_sym in rows:
        py = f"{t_py:10.2f}" if t_py is not None else f"{'n/a':>10}"
        ratio = f"{t_py / t_static:6.2f}" if t_py is not None else f"{'n/a':>6}"
        print(f"{label:44} {py} {t_static:9.2f} {ratio} {t_sym:12.2f} {t_sym / t_static:10.1f}")
    print(
        "\nratio = pycute / tylo static (> 1: tylo faster); symbolic cases use runtime "
        "extents (dim symbols) with decisions memoized"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
