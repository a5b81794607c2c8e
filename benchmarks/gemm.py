"""GEMM benchmark: tylo's warp-MMA GEMM beside torch.matmul (cuBLAS) and a Triton GEMM
restricted to ``mma.sync`` (Hopper's wgmma disabled), in one process, interleaved.

    PYTHONPATH=$PWD python3 benchmarks/gemm.py [--reps 30] [--shapes 4096,4096,4096 ...]

For each shape (default: bf16 4096^3, 8192^3 and the odd 4099x4103x4097, the latter both
with 16-byte aligned leading dimensions and with the unpadded, unaligned ones: tylo then packs A and
B into aligned scratch first and
the time includes the packing, which is also timed alone) it checks
every implementation against a float32 reference, then times them A, B, C, A, B, C, ...
with CUDA events around each launch (inputs rotated through several copies when they would
fit in L2) and prints medians, TFLOP/s, the ratio to cuBLAS, and registers, shared memory
and occupancy. Storage as in tylo/ops/gemm: A (M, K) K-contiguous, B given K-contiguous as
(N, K), D M-contiguous f32 for tylo; cuBLAS and Triton compute the same product (cuBLAS
writes bf16, Triton f32 row-major). Needs a GPU and torch; Triton is optional.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from collections.abc import Callable
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from benchmarks import provenance

DEFAULT_SHAPES = ((4096, 4096, 4096), (8192, 8192, 8192), (4099, 4103, 4097))
L2_BYTES = 60 * 2**20


# ---------------------------------------------------------------------------- triton


def _triton_gemm() -> Any:
    """A Triton matmul (autotuned over mma.sync-friendly tiles) with wgmma disabled, or
    None when Triton is not installed."""
    os.environ["DISABLE_MMA_V3"] = "1"  # Triton's switch for Hopper's wgmma path
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return None
    try:
        triton.knobs.nvidia.disable_mma_v3 = True  # newer Triton reads its knobs
    except AttributeError:
        pass
    configs = [
        triton.Config({"BM": 128, "BN": 256, "BK": 64}, num_stages=3, num_warps=8),
        triton.Config({"BM": 256, "BN": 128, "BK": 64}, num_stages=3, num_warps=8),
        triton.Config({"BM": 128, "BN": 256, "BK": 32}, num_stages=4, num_warps=8),
        triton.Config({"BM": 128, "BN": 128, "BK": 64}, num_stages=4, num_warps=4),
        triton.Config({"BM": 128, "BN": 128, "BK": 32}, num_stages=4, num_warps=4),
    ]

    @triton.autotune(configs=configs, key=["M", "N", "K"])
    @triton.jit
    def matmul(
        a,
        b,
        c,
        M,
        N,
        K,
        lda,
        ldb,
        ldc,
        BM: tl.constexpr,
        BN: tl.constexpr,
        BK: tl.constexpr,
        GROUP: tl.constexpr = 8,
    ):
        pid = tl.program_id(0)
        grid_m = tl.cdiv(M, BM)
        grid_n = tl.cdiv(N, BN)
        width = GROUP * grid_n
        first = (pid // width) * GROUP
        rows = tl.minimum(grid_m - first, GROUP)
        pm = first + (pid % width) % rows
        pn = (pid % width) // rows
        rm = pm * BM + tl.arange(0, BM)
        rn = pn * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k0 in range(0, K, BK):
            ka = k0 + rk
            x = tl.load(
                a + rm[:, None] * lda + ka[None, :],
                mask=(rm[:, None] < M) & (ka[None, :] < K),
                other=0.0,
            )
            y = tl.load(
                b + rn[None, :] * ldb + ka[:, None],
                mask=(rn[None, :] < N) & (ka[:, None] < K),
                other=0.0,
            )
            acc = tl.dot(x, y, acc)
        tl.store(
            c + rm[:, None] * ldc + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N)
        )

    def run(a: Any, b: Any, c: Any, m: int, n: int, k: int, lda: int, ldb: int) -> Any:
        def grid(meta: dict[str, int]) -> tuple[int]:
            return (triton.cdiv(m, meta["BM"]) * triton.cdiv(n, meta["BN"]),)

        compiled = matmul[grid](a, b, c, m, n, k, lda, ldb, n)
        if compiled is not None:
            run.last = compiled  # type: ignore[attr-defined]
        return compiled

    run.kernel = matmul  # type: ignore[attr-defined]
    run.last = None  # type: ignore[attr-defined]
    return run


def triton_info(run: Any) -> dict[str, Any]:
    """The chosen config, registers, shared memory and whether its PTX uses mma.sync only."""
    out: dict[str, Any] = {}
    best = getattr(run.kernel, "best_config", None)
    out["config"] = str(best) if best is not None else "?"
    compiled = run.last
    try:
        ptx = compiled.asm.get("ptx", "")
        out["mma.sync"] = "mma.sync" in ptx
        out["wgmma"] = "wgmma" in ptx
        out["registers"] = getattr(compiled, "n_regs", None)
        out["shared"] = getattr(compiled.metadata, "shared", None)
        out["warps"] = getattr(compiled.metadata, "num_warps", None)
    except Exception as err:  # noqa: BLE001 - introspection differs between versions
        out["introspection"] = f"unavailable ({type(err).__name__})"
    return out


# ---------------------------------------------------------------------------- tylo


def occupancy(compiled: Any, threads: int, shared: int) -> int | None:
    """Resident blocks per SM from the driver (cuOccupancyMaxActiveBlocksPerMultiprocessor)."""
    try:
        from cuda.bindings import driver as cu

        fn = compiled.function(0)
        if shared > 48 * 1024:
            fn.set_max_dynamic_shared_memory(shared)
        err, n = cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(fn.handle, threads, shared)
        return int(n) if not err else None
    except Exception:  # noqa: BLE001 - informative only
        return None


def tylo_runner(cfg: Any, stream: Any) -> Callable[..., Any]:
    """A launcher of the GEMM for ``cfg`` on ``stream`` (torch's current stream); with
    ``cfg`` None, ``tylo.ops.gemm.host.gemm`` (which packs unaligned operands first)."""
    from tylo.ops.gemm.host import gemm
    from tylo.ops.gemm.kernel import tiled_gemm_kernel

    def run(d: Any, a: Any, b: Any, m: int, n: int, k: int, lda: int, ldb: int, ldd: int) -> None:
        if cfg is None:
            gemm(d, a, b, m, n, k, lda, ldb, ldd, stream=stream)
            return
        tiled_gemm_kernel[cfg.grid(m, n), cfg.plan.threads](
            cfg, d, a, b, m, n, k, lda, ldb, ldd, 1.0, False, shared=cfg.shared_bytes, stream=stream
        )

    return run


def pack_runner(stream: Any) -> Callable[..., Any]:
    """The packing alone (both operands, into the scratch ``gemm`` uses)."""
    from tylo.ops.gemm.host import _scratch
    from tylo.ops.gemm.pack import pack_rows, packed_ld

    def run(a: Any, b: Any, m: int, n: int, k: int, lda: int, ldb: int) -> None:
        ldp = packed_ld(k)
        pa = _scratch(("bench a",), m * ldp, tylo_dtype(a), 0)
        pb = _scratch(("bench b",), n * ldp, tylo_dtype(b), 0)
        pack_rows(pa, a, m, k, lda, stream=stream)
        pack_rows(pb, b, n, k, ldb, stream=stream)

    return run


def tylo_dtype(x: Any) -> Any:
    from tylo.arrays import as_device_array

    return as_device_array(x).dtype


def tylo_info(cfg: Any) -> dict[str, Any]:
    """Registers, spills, shared memory and resident blocks per SM of ``cfg``'s kernel."""
    from tylo.ops.gemm.host import compile_gemm
    from tylo.ops.gemm.kernel import sass_summary
    from tylo.target import Target

    compiled = compile_gemm(cfg, Target.from_device(0))
    s = sass_summary(compiled)
    return {
        "registers": s["registers"],
        "shared": cfg.shared_bytes,
        "spills": s["spills"],
        "blocks/SM": occupancy(compiled, cfg.plan.threads, cfg.shared_bytes),
        "loop": s["loop"],
    }


# ---------------------------------------------------------------------------- timing


def interleaved(fns: dict[str, Callable[[int], Any]], reps: int, torch: Any) -> dict[str, list]:
    """Time each ``fns[name](i)`` (``i`` picks the input copy) ``reps`` times, interleaved,
    with CUDA events around each call; returns the milliseconds of every call."""
    times: dict[str, list] = {name: [] for name in fns}
    events = {
        name: [
            (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            for _ in range(reps)
        ]
        for name in fns
    }
    for i in range(reps):
        for name, fn in fns.items():
            start, end = events[name][i]
            start.record()
            fn(i)
            end.record()
    torch.cuda.synchronize()
    for name in fns:
        times[name] = [s.elapsed_time(e) for s, e in events[name]]
    return times


def make_inputs(torch: Any, shape: tuple, pad: bool, copies: int) -> list[dict[str, Any]]:
    """``copies`` independent input sets: A (M, lda) and B (N, ldb) bf16 with K-contiguous
    rows (lda, ldb rounded up to a multiple of 8 when ``pad``), D (N, ldd) f32."""
    m, n, k = shape
    lda = ldb = -(-k // 8) * 8 if pad else k
    ldd = -(-m // 4) * 4 if pad else m
    sets = []
    for _ in range(copies):
        a = torch.randn(m, lda, device="cuda").to(torch.bfloat16)
        b = torch.randn(n, ldb, device="cuda").to(torch.bfloat16)
        sets.append(
            {
                "a": a,
                "b": b,
                "lda": lda,
                "ldb": ldb,
                "ldd": ldd,
                "d": torch.full((n, ldd), float("nan"), device="cuda"),
                "c": torch.empty(m, n, device="cuda"),
                "av": a[:, :k],
                "bv": b[:, :k],
            }
        )
    return sets


def check(name: str, got: Any, want: Any) -> float:
    err = float((got.double() - want.double()).norm() / want.double().norm())
    if not err <= 1e-2 or got.isnan().any():
        raise AssertionError(f"{name}: relative error {err:.3g} against float32 (or NaN)")
    return err


def config_for(base: Any, m: int, n: int, k: int, lda: int, ldb: int, ldd: int) -> Any:
    """The configuration for a problem: :func:`choose_config`'s, or ``base``'s plan, stages,
    swizzle, rasterization and epilogue adapted to the problem's edges, unless the
    edge-handling form of ``base`` would spill registers; None when the operands are not
    16-byte aligned (``gemm()`` then packs them)."""
    from tylo.ops.gemm.host import choose_config, compile_gemm
    from tylo.ops.gemm.kernel import gemm_config, sass_summary

    cfg = choose_config(m, n, k, lda, ldb, ldd=ldd)
    if not cfg.vector:
        return None
    if base is None:
        return cfg
    bm, bn, bk = base.tile
    full = m % bm == 0 and n % bn == 0 and k % bk == 0
    adapted = gemm_config(
        base.plan,
        stages=base.stages,
        swizzle=base.swizzle,
        group_m=base.group_m,
        bounded=not full,
        vector=True,
        epilogue=base.epilogue if ldd % 4 == 0 else "direct",
    )
    if not full and any(sass_summary(compile_gemm(adapted, "sm_90a"))["spills"]):
        print(f"  ({adapted.describe()} spills at the edges; {m}x{n}x{k} uses {cfg.describe()})")
        return cfg
    return adapted


def bench_shape(
    torch: Any, shape: tuple, pad: bool, reps: int, base: Any, triton_run: Any
) -> list[dict[str, Any]]:
    m, n, k = shape
    flops = 2.0 * m * n * k
    per_set = 2 * (m + n) * k
    copies = max(1, min(4, -(-2 * L2_BYTES // per_set)))
    sets = make_inputs(torch, shape, pad, copies)
    s0 = sets[0]
    cfg = config_for(base, m, n, k, s0["lda"], s0["ldb"], s0["ldd"])
    stream = torch.cuda.current_stream()
    run = tylo_runner(cfg, stream)
    fns: dict[str, Callable[[int], Any]] = {
        "tylo": lambda i: run(
            sets[i % copies]["d"],
            sets[i % copies]["a"],
            sets[i % copies]["b"],
            m,
            n,
            k,
            sets[i % copies]["lda"],
            sets[i % copies]["ldb"],
            sets[i % copies]["ldd"],
        ),
        "cuBLAS": lambda i: torch.matmul(sets[i % copies]["av"], sets[i % copies]["bv"].t()),
    }
    if cfg is None:  # unaligned: gemm() packs; the packing alone, too
        from tylo.ops.gemm.host import choose_config
        from tylo.ops.gemm.pack import packed_ld

        pack = pack_runner(stream)
        fns["tylo (pack only)"] = lambda i: pack(
            sets[i % copies]["a"], sets[i % copies]["b"], m, n, k, s0["lda"], s0["ldb"]
        )
        ldp = packed_ld(k)
        cfg = choose_config(m, n, k, ldp, ldp, ldd=s0["ldd"])  # what gemm() runs after
    if triton_run is not None:
        fns["triton mma.sync"] = lambda i: triton_run(
            sets[i % copies]["a"],
            sets[i % copies]["b"],
            sets[i % copies]["c"],
            m,
            n,
            k,
            sets[i % copies]["lda"],
            sets[i % copies]["ldb"],
        )
    want = s0["av"].float() @ s0["bv"].float().t()
    for name, fn in fns.items():
        fn(0)  # warm-up: compile, load, autotune
    torch.cuda.synchronize()
    errors = {"tylo": check("tylo", s0["d"][:, :m].t(), want)}
    errors["cuBLAS"] = check("cuBLAS", torch.matmul(s0["av"], s0["bv"].t()).float(), want)
    if triton_run is not None:
        errors["triton mma.sync"] = check("triton", s0["c"], want)
    for fn in fns.values():  # settle clocks
        for i in range(3):
            fn(i)
    times = interleaved(fns, reps, torch)
    base = statistics.median(times["cuBLAS"])
    info = {"tylo": tylo_info(cfg), "cuBLAS": {}}
    if triton_run is not None:
        info["triton mma.sync"] = triton_info(triton_run)
    rows = []
    for name, t in times.items():
        med = statistics.median(t)
        rows.append(
            {
                "shape": f"{m}x{n}x{k}",
                "lds": "aligned" if pad else "unpadded",
                "impl": name,
                "ms": med,
                "tflops": flops / med / 1e9,
                "vs_cublas": base / med,
                "spread": (max(t) - min(t)) / med,
                "error": errors.get(name),
                **info.get(name, {}),
            }
        )
    rows[0]["config"] = cfg.describe() + (" (after packing)" if not pad else "")
    return rows


def print_rows(rows: list[dict[str, Any]]) -> None:
    head = (
        f"{'shape':>16} {'lds':>8} {'impl':>16} {'ms':>9} {'TFLOP/s':>8} {'x cuBLAS':>8} "
        f"{'regs':>5} {'smem KiB':>8} {'blk/SM':>6}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        smem = r.get("shared")
        print(
            f"{r['shape']:>16} {r['lds']:>8} {r['impl']:>16} {r['ms']:9.3f} "
            f"{r['tflops']:8.1f} {r['vs_cublas']:8.3f} {r.get('registers', '-')!s:>5} "
            f"{(f'{smem / 1024:.0f}' if isinstance(smem, int) else '-'):>8} "
            f"{r.get('blocks/SM', '-')!s:>6}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="*", default=None, help="M,N,K triples")
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--no-triton", action="store_true")
    parser.add_argument("--json", default=None, help="write the rows here")
    provenance.add_arguments(parser)
    parser.add_argument(
        "--variant",
        default=None,
        help="a benchmarks/gemm_variants.py variant name to use for tylo "
        "(default: tylo.ops.gemm.kernel.choose_config)",
    )
    args = parser.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("benchmarks/gemm.py needs a CUDA GPU and torch", file=sys.stderr)
        return 2
    print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
    triton_run = None if args.no_triton else _triton_gemm()
    shapes = (
        [tuple(int(x) for x in s.split(",")) for s in args.shapes]
        if args.shapes
        else DEFAULT_SHAPES
    )
    base = None
    if args.variant:
        from benchmarks.gemm_variants import variants

        base = variants()[args.variant]
        print(f"tylo variant {args.variant!r}: {base.describe()}")
    rows = []
    for shape in shapes:
        odd = any(x % 8 for x in shape)
        for pad in (True, False) if odd else (True,):
            before = len(rows)
            rows += bench_shape(torch, shape, pad, args.reps, base, triton_run)
            print_rows(rows[-(len(rows) - before) :])
    if triton_run is not None:
        print(f"triton: {triton_info(triton_run)}")
    print()
    for r in rows:
        if r.get("config"):
            print(f"{r['shape']} {r['lds']}: tylo {r['config']}")
    print_rows(rows)
    out = args.json or (
        os.path.join(os.environ["OUT"], "gemm.json") if os.environ.get("OUT") else None
    )
    if out:
        meta = provenance.run_metadata(
            ("torch", "triton"), script="benchmarks/gemm.py", argv=argv,
            commit=args.commit, dirty=args.dirty,
        )  # fmt: skip
        provenance.write_json(out, rows, meta)
    return 0


if __name__ == "__main__":
    sys.exit(main())
