"""Proof times of the layout provers: static layouts up to 64K elements and symbolic
GEMM-style layouts (a runtime ``(M,K):(1,lda)`` operand tiled by a 64x32 tile, a thread
block's tile at symbolic block indices, and a swizzled shared-memory tile with a runtime
number of pipeline stages). Run:

    python benchmarks/proofs.py [--repeat 21]

Prints one row per (layout, property): the verdict, the first call in the process (fully
cold), the median of ``--repeat`` calls with the provers' verdict cache cleared before each
(the fact engine's memo of decided conditions stays warm, as in a process that plans many
kernels), and the median cached call. Targets: static <= 1 ms, symbolic <= 5 ms (median).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tylo.layouts import (
    Layout,
    Swizzle,
    composition,
    dim,
    index_symbol,
    logical_divide,
    zipped_divide,
)
from tylo.layouts.proofs import (
    prove_aligned,
    prove_bounded,
    prove_contiguous,
    prove_equal,
    prove_injective,
)
from tylo.layouts.proofs.engine import clear_cache
from tylo.layouts.tv import wgmma_m64_c_tv

STATIC_TARGET_MS = 1.0
SYMBOLIC_TARGET_MS = 5.0


def static_cases() -> list[tuple[str, Any, list[tuple[str, Any]]]]:
    """(name, layout, [(property, thunk)]) for static layouts of up to 64K elements."""
    out = []
    col = Layout((256, 256), (1, 256))
    out.append(
        (
            "(256,256):(1,256) [64K]",
            col,
            [
                ("injective", lambda: prove_injective(col)),
                ("contiguous v8", lambda: prove_contiguous(col, vector=8)),
                ("aligned v8 bf16", lambda: prove_aligned(col, vector=8, elem_bytes=2)),
                ("bounded", lambda: prove_bounded(col, extent=65536)),
                ("equal 65536:1", lambda: prove_equal(col, Layout(65536, 1))),
            ],
        )
    )
    # sorted span fails (3 <= reach 4) and no pair of modes collides: enumeration decides
    odd = Layout((3, 2, 8, 1365), (2, 3, 8, 64))
    out.append(
        (
            "(3,2,8,1365):(2,3,8,64) [65520]",
            odd,
            [
                ("injective (enumerated block)", lambda: prove_injective(odd)),
                ("contiguous v2 (disproved)", lambda: prove_contiguous(odd, vector=2)),
                ("bounded", lambda: prove_bounded(odd, extent=1 << 17)),
            ],
        )
    )
    full = Layout((4096, 3, 5), (1, 4096, 6000))
    out.append(
        (
            "(4096,3,5):(1,4096,6000) [61440]",
            full,
            [("injective (full enumeration)", lambda: prove_injective(full))],
        )
    )
    pairs = Layout(((8, 8), (32, 32)), ((1, 64), (8, 4096)))
    out.append(
        (
            "((8,8),(32,32)):((1,64),(8,4096)) [64K]",
            pairs,
            [("injective (pair collision)", lambda: prove_injective(pairs))],
        )
    )
    bad = Layout((64, 32, 32), (1, 60, 2048))
    out.append(
        (
            "(64,32,32):(1,60,2048) [64K]",
            bad,
            [
                ("injective (disproved)", lambda: prove_injective(bad)),
                ("equal to itself", lambda: prove_equal(bad, Layout((64, 32, 32), (1, 60, 2048)))),
            ],
        )
    )
    sw = composition(Swizzle(3, 3, 3), Layout((256, 256), (256, 1)))
    out.append(
        (
            "S<3,3,3> o (256,256):(256,1) [64K]",
            sw,
            [
                ("injective", lambda: prove_injective(sw)),
                ("contiguous v8 mode 1", lambda: prove_contiguous(sw, vector=8, mode=1)),
                (
                    "aligned v8 bf16 mode 1",
                    lambda: prove_aligned(sw, vector=8, elem_bytes=2, mode=1),
                ),
                ("bounded", lambda: prove_bounded(sw, extent=65536)),
            ],
        )
    )
    smem = composition(Swizzle(3, 3, 3), Layout((64, (8, 4)), (8, (1, 512))))
    out.append(
        (
            "smem S<3,3,3> o (64,(8,4)):(8,(1,512)) [2K]",
            smem,
            [
                ("injective", lambda: prove_injective(smem)),
                ("contiguous v8 mode 1", lambda: prove_contiguous(smem, vector=8, mode=1)),
                ("bounded 2048", lambda: prove_bounded(smem, extent=2048)),
            ],
        )
    )
    tv = wgmma_m64_c_tv(256)
    out.append(
        (
            "WGMMA 64x256 C TV [32K]",
            tv,
            [
                ("injective", lambda: prove_injective(tv)),
                ("contiguous v2 mode 1", lambda: prove_contiguous(tv, vector=2, mode=1)),
                ("bounded", lambda: prove_bounded(tv, extent=64 * 256)),
            ],
        )
    )
    return out


def symbolic_cases() -> list[tuple[str, Any, list[tuple[str, Any]]]]:
    """GEMM-style layouts with runtime sizes, strides and block indices."""
    M, K = dim("M", multiple_of=64), dim("K", multiple_of=32)
    lda = dim("lda", multiple_of=8)
    facts = [lda >= M]
    a = Layout((M, K), (1, lda))
    tiled = zipped_divide(a, (64, 32))  # ((64,32),(M/64,K/32))
    bm, kt = index_symbol("bm", upper=M / 64), index_symbol("kt", upper=K / 32)
    tile = Layout((64, 32), (1, lda))
    base = 64 * bm + 32 * kt * lda
    stages = dim("P")
    shared = composition(Swizzle(3, 3, 3), Layout((64, (64, stages)), (64, (1, 4096))))
    n = dim("N", multiple_of=64)
    divided = logical_divide(Layout((n, K), (1, lda)), 64)
    out = [
        (
            "A (M,K):(1,lda), lda >= M",
            a,
            [
                ("injective", lambda: prove_injective(a, assuming=facts)),
                ("contiguous v8", lambda: prove_contiguous(a, vector=8, assuming=facts)),
                (
                    "aligned v8 bf16",
                    lambda: prove_aligned(a, vector=8, elem_bytes=2, assuming=facts),
                ),
                ("bounded lda*K", lambda: prove_bounded(a, extent=lda * K, assuming=facts)),
            ],
        ),
        (
            "zipped_divide(A, (64,32))",
            tiled,
            [
                ("injective", lambda: prove_injective(tiled, assuming=facts)),
                ("contiguous v8 (tile)", lambda: prove_contiguous(tiled, vector=8, assuming=facts)),
                (
                    "aligned v8 bf16 (tile)",
                    lambda: prove_aligned(tiled, vector=8, elem_bytes=2, assuming=facts),
                ),
                ("bounded lda*K", lambda: prove_bounded(tiled, extent=lda * K, assuming=facts)),
            ],
        ),
        (
            "block tile (64,32):(1,lda) at bm, kt",
            tile,
            [
                ("injective", lambda: prove_injective(tile, assuming=facts)),
                (
                    "aligned v8 bf16, base",
                    lambda: prove_aligned(tile, vector=8, elem_bytes=2, base=base, assuming=facts),
                ),
                (
                    "bounded lda*K, base",
                    lambda: prove_bounded(tile, extent=lda * K, base=base, assuming=facts),
                ),
            ],
        ),
        (
            "logical_divide((N,K):(1,lda), 64)",
            divided,
            [
                (
                    "equal ((64,N/64),K)",
                    lambda: prove_equal(
                        divided, Layout(((64, n / 64), K), ((1, 64), lda)), assuming=[lda >= n]
                    ),
                ),
            ],
        ),
        (
            "smem S<3,3,3> o (64,(64,P)):(64,(1,4096))",
            shared,
            [
                ("injective", lambda: prove_injective(shared)),
                ("contiguous v8 mode 1", lambda: prove_contiguous(shared, vector=8, mode=1)),
                (
                    "aligned v8 bf16 mode 1",
                    lambda: prove_aligned(shared, vector=8, elem_bytes=2, mode=1),
                ),
                ("bounded 4096*P", lambda: prove_bounded(shared, extent=4096 * stages)),
            ],
        ),
    ]
    wild = Layout((M, K), (1, dim("ldb")))
    out.append(
        (
            "(M,K):(1,ldb), no assumption",
            wild,
            [
                ("injective (disproved)", lambda: prove_injective(wild)),
                (
                    "aligned v8 (disproved)",
                    lambda: prove_aligned(wild, vector=8, elem_bytes=2),
                ),
                ("bounded M*K (disproved)", lambda: prove_bounded(wild, extent=M * K)),
            ],
        )
    )
    return out


def _median_ms(fn: Any, repeat: int, cold: bool) -> float:
    times = []
    for _ in range(repeat):
        if cold:
            clear_cache()
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def run(repeat: int) -> list[tuple]:
    rows = []
    for kind, cases, target in (
        ("static", static_cases(), STATIC_TARGET_MS),
        ("symbolic", symbolic_cases(), SYMBOLIC_TARGET_MS),
    ):
        for name, _, props in cases:
            for prop, fn in props:
                clear_cache()
                t0 = time.perf_counter()
                v = fn()
                first = (time.perf_counter() - t0) * 1e3
                cold = _median_ms(fn, repeat, cold=True)
                warm = _median_ms(fn, repeat, cold=False)
                ok = "yes" if cold <= target else "NO"
                rows.append((kind, name, prop, v.status, first, cold, warm, ok))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=21)
    args = ap.parse_args(argv)
    rows = run(args.repeat)
    w = max(len(r[1]) for r in rows)
    p = max(len(r[2]) for r in rows)
    head = (
        f"{'kind':8} {'layout':{w}} {'property':{p}} {'verdict':9} "
        f"{'first ms':>9} {'median ms':>9} {'cached ms':>9} target"
    )
    print(head)
    print("-" * len(head))
    for kind, name, prop, status, first, cold, warm, ok in rows:
        print(
            f"{kind:8} {name:{w}} {prop:{p}} {status:9} {first:9.3f} {cold:9.3f} {warm:9.4f} {ok}"
        )
    misses = [r for r in rows if r[-1] != "yes"]
    print(
        f"\nstatic target {STATIC_TARGET_MS} ms, symbolic target {SYMBOLIC_TARGET_MS} ms "
        f"(median, verdict cache cleared): {len(rows) - len(misses)}/{len(rows)} within target"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
