"""``python -m tylo.ops.gemm M N K [--dtype bf16|f16] [--relu] [--alpha A] [--pad P]``

Plans the GEMM (printing what was proved), compiles it, and, where there is a GPU, runs it
on fresh random data and verifies it against float64. Without a GPU it compiles for
``--target`` (default sm_90a), prints the proofs and resources, says it did not run, and
exits 0. ``--compile-only`` and ``--emit llvm|ptx|sass`` work everywhere. The SASS checks
(the main loop's instruction counts) need nvdisasm, which is optional: without it they are
skipped with a line saying how to install it (``pip install 'tylo[sass]'``).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from tylo.ops.cli import Example, finite_float, non_negative_int, positive_int, run_or_compile


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("m", type=positive_int, help="rows of A and D (>= 1)")
    parser.add_argument("n", type=positive_int, help="columns of B and D (>= 1)")
    parser.add_argument("k", type=positive_int, help="columns of A, rows of B (>= 1)")
    parser.add_argument(
        "--dtype",
        choices=("bf16", "f16"),
        default="bf16",
        help="input element type (output is f32)",
    )
    parser.add_argument("--relu", action="store_true", help="apply ReLU after scaling")
    parser.add_argument("--alpha", type=finite_float, default=1.0, help="scale of A @ B")
    parser.add_argument(
        "--pad",
        type=non_negative_int,
        default=0,
        help="pad every leading dimension by this many elements",
    )
    parser.add_argument("--stages", type=positive_int, default=None, help="pipeline stages (>= 1)")


def _config(args: argparse.Namespace) -> Any:
    """The configuration ``gemm()`` runs (after packing, when the leading dimensions are
    not multiples of 8 elements)."""
    import tylo
    from tylo.ops.gemm.host import choose_config
    from tylo.ops.gemm.pack import packed_ld

    kw = {} if args.stages is None else {"stages": args.stages}
    ld = args.k + args.pad
    if ld % 8:
        ld = packed_ld(args.k)  # gemm() packs A and B first
    dtype = tylo.f16 if args.dtype == "f16" else tylo.bf16
    return choose_config(args.m, args.n, args.k, ld, ld, ldd=args.m + args.pad, dtype=dtype, **kw)


def _print_plan(cfg: Any, out: Any = sys.stdout) -> None:
    print(f"plan: {cfg.plan}", file=out)
    print(f"config: {cfg.describe()}", file=out)
    for what, v in cfg.proofs.items():
        status = getattr(v, "status", v)
        print(f"  {what}: {status}", file=out)


SASS_SKIPPED = (
    "  SASS checks skipped: nvdisasm was not found (it is optional); to see them, "
    "install it with `pip install 'tylo[sass]'` (or `pip install nvidia-cuda-nvdisasm`, or "
    "put a CUDA toolkit's bin directory on PATH)"
)


def print_sass_checks(compiled: Any, out: Any = None) -> bool:
    """Print the main loop's instruction counts (the SASS checks) when nvdisasm exists,
    else say that they were skipped and how to enable them; True when they were printed."""
    from tylo.backend.sass import find_nvdisasm
    from tylo.ops.gemm.kernel import sass_summary

    out = out or sys.stdout
    if find_nvdisasm() is None:
        print(SASS_SKIPPED, file=out)
        return False
    s = sass_summary(compiled)
    print(f"  SASS main loop: {s['loop']}", file=out)
    print(f"  SASS local memory: {s['total']['LDL']} LDL, {s['total']['STL']} STL", file=out)
    return True


def kernels(args: argparse.Namespace, target: Any) -> dict[str, Any]:
    from tylo.ops.gemm.host import compile_gemm

    cfg = _config(args)
    k = compile_gemm(cfg, target, relu=args.relu)
    if args.compile_only:
        _print_plan(cfg)
        print_sass_checks(k)
    return {"tiled_gemm_kernel": k}


def run(args: argparse.Namespace) -> str:
    from tylo.ops.gemm.host import verify

    cfg = _config(args)
    _print_plan(cfg)
    res = verify(
        args.m,
        args.n,
        args.k,
        dtype=args.dtype,
        alpha=args.alpha,
        relu=args.relu,
        pad=(args.pad, args.pad, args.pad),
        seed=args.seed,
        # gemm() chooses the configuration printed above (packing first if needed)
        cfg=cfg if args.stages is not None and (args.k + args.pad) % 8 == 0 else None,
        use_torch=args.torch,
    )
    msg = (
        f"{args.m}x{args.n}x{args.k} {args.dtype}, relative error {res['error']:.3g} "
        "(float64 reference)"
    )
    return msg + _hopper(args)


def _hopper(args: argparse.Namespace) -> str:
    """On a Hopper GPU (sm_90), the same problem through the TMA + wgmma GEMM
    (``tylo/ops/gemm` (its Hopper path)`) too, verified the same way; elsewhere nothing."""
    from tylo.backend.device import device_properties

    if device_properties(0).compute_capability != (9, 0) or args.pad:
        return ""
    try:
        import torch  # noqa: F401 - hopper_gemm.verify draws its data with torch
    except ImportError:
        return "; Hopper GEMM not run (its verification needs torch)"
    from tylo.ops.gemm.hopper_host import verify as hopper_verify

    res = hopper_verify(
        args.m, args.n, args.k, dtype=args.dtype, alpha=args.alpha, relu=args.relu, seed=args.seed
    )
    return f"; Hopper GEMM (TMA + wgmma, {res['path']} path): relative error {res['error']:.3g}"


EXAMPLE = Example(
    "gemm",
    "D = alpha * A @ B (+ReLU) with warp MMAs, checked against float64",
    add_arguments,
    kernels,
    run,
    prog="python -m tylo.ops.gemm",
)


def run_main(argv: list[str]) -> int:
    """The command line: without a GPU, a plain run compiles and proves instead."""
    return run_or_compile(EXAMPLE, argv)


if __name__ == "__main__":
    sys.exit(run_main(sys.argv[1:]))
