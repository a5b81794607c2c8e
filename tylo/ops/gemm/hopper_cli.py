"""``python -m tylo.ops.gemm.hopper_cli M N K [--dtype bf16|f16] [--out-dtype f32|bf16|f16]
[--relu] [--alpha A] [--bn 128|256] [--stages S] [--cooperative] [--tma-store]``

The warp-specialized TMA + wgmma GEMM (sm_90a). With a Hopper GPU it runs on fresh random
data and verifies against float64 (operands TMA cannot read go to the warp-MMA GEMM, and the
output says which path ran); without one it compiles for ``--target`` and prints what the
plans proved and the resources. ``--compile-only`` and ``--emit llvm|ptx|sass`` work anywhere.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from tylo.ops.cli import Example, finite_float, main, positive_int


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("m", type=positive_int, help="rows of A and D (>= 1)")
    parser.add_argument("n", type=positive_int, help="columns of B and D (>= 1)")
    parser.add_argument("k", type=positive_int, help="columns of A, rows of B (>= 1)")
    parser.add_argument("--dtype", choices=("bf16", "f16"), default="bf16")
    parser.add_argument(
        "--out-dtype", choices=("f32", "bf16", "f16"), default="f32", help="D's dtype"
    )
    parser.add_argument("--relu", action="store_true", help="D = max(alpha * A @ B, 0)")
    parser.add_argument("--alpha", type=finite_float, default=1.0, help="scale of A @ B")
    parser.add_argument(
        "--bn",
        type=int,
        choices=(128, 256),
        default=None,
        help="tile columns (default: tylo.ops.gemm.hopper_host.default_config)",
    )
    parser.add_argument("--stages", type=positive_int, default=None, help="TMA ring depth")
    schedule = parser.add_mutually_exclusive_group()
    schedule.add_argument(
        "--cooperative",
        action="store_true",
        help="both consumers on one tile, 64 rows each (the default for a "
        "bf16/f16 D and K > 512: 128x256 tiles)",
    )
    schedule.add_argument(
        "--pingpong",
        action="store_true",
        help="each consumer on its own 128x128 tile, taking turns (the "
        "default for an f32 D or K <= 512)",
    )
    parser.add_argument(
        "--tma-store",
        action="store_true",
        help="the epilogue through shared memory and TMA stores (D bf16/f16)",
    )


def _config(args: argparse.Namespace) -> Any:
    from dataclasses import replace

    import tylo
    from tylo.ops.gemm.hopper_host import default_config

    # gemm()'s default for this output: the TMA-store epilogue writes bf16/f16 only
    cfg = default_config(
        tylo.f16 if args.dtype == "f16" else tylo.bf16, tma_store=args.out_dtype != "f32", k=args.k
    )
    changes: dict[str, Any] = {"out": getattr(tylo, args.out_dtype), "relu": args.relu}
    if args.cooperative:
        changes.update(pingpong=False, m_atoms=1)
    if args.pingpong:
        changes.update(pingpong=True, m_atoms=2, bn=128, stages=5)
    if args.bn is not None:
        changes.update(bn=args.bn, m_atoms=1 if args.bn == 256 else changes.get("m_atoms", 2))
    if args.stages is not None:
        changes["stages"] = args.stages
    if args.tma_store:
        changes["tma_store"] = True
    return replace(cfg, **changes)


def kernels(args: argparse.Namespace, target: Any) -> dict[str, Any]:
    from tylo.ops.gemm.hopper_host import c_plan, compile_hopper_gemm, plans

    cfg = _config(args)
    if args.compile_only:
        print(f"config: {cfg.describe()}")
        for name, p in zip(("X (= B)", "Y (= A)", "C (= D)"), (*plans(cfg), c_plan(cfg))):
            if p is not None:
                print(
                    f"  {name} tensor map: box {p.box}, {p.swizzle} swizzle; shared layout "
                    f"{p.smem_layout} equals the box's: proved"
                )
    return {"hopper_gemm_kernel": compile_hopper_gemm(cfg, target)}


def run(args: argparse.Namespace) -> str:
    from tylo.ops.gemm.hopper_host import verify

    res = verify(
        args.m,
        args.n,
        args.k,
        dtype=args.dtype,
        out=args.out_dtype,
        alpha=args.alpha,
        relu=args.relu,
        seed=args.seed,
        cfg=_config(args),
    )
    return (
        f"{args.m}x{args.n}x{args.k} {args.dtype} -> {args.out_dtype}"
        f"{' ReLU' if args.relu else ''} on the {res['path']} path, relative "
        f"error {res['error']:.3g} (float64 reference)"
    )


EXAMPLE = Example(
    "hopper_gemm",
    "D = alpha * A @ B with TMA and wgmma (warp-specialized), checked against float64",
    add_arguments,
    kernels,
    run,
    prog="python -m tylo.ops.gemm.hopper_cli",
)


def run_main(argv: list[str]) -> int:
    """The command line (:func:`tylo.ops.cli.main`); returns the exit status."""
    return main(EXAMPLE, argv)


if __name__ == "__main__":
    sys.exit(run_main(sys.argv[1:]))
