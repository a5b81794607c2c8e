"""``python -m tylo.ops.attention B H L D [--lk LK] [--causal] [--dtype bf16|f16]
[--path warp|hopper|auto] [--kv-lens N,N,...]``

Plans the warp path (printing what was proved), compiles it, and, where there is a GPU,
runs it on fresh random data (outputs poisoned with NaN) and verifies ``o`` and ``lse``
against the float64 reference. Without a GPU it compiles for ``--target`` (default sm_90a),
prints the proofs and resources, says it did not run, and exits 0. ``--compile-only`` and
``--emit llvm|ptx|sass`` work everywhere. ``--path hopper`` runs the Hopper path
(:mod:`tylo.ops.attention.hopper_host`) when this checkout has it.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from tylo.ops.cli import Example, positive_int, run_or_compile


def _lens(text: str) -> list[int]:
    try:
        out = [int(x, 10) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a comma-separated list of integers"
        ) from None
    if any(x < 0 for x in out):
        raise argparse.ArgumentTypeError(f"{text!r}: key lengths must be >= 0")
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("b", type=positive_int, help="batch (>= 1)")
    parser.add_argument("h", type=positive_int, help="heads (>= 1)")
    parser.add_argument("l", type=positive_int, help="query sequence length Lq (>= 1)")
    parser.add_argument("d", type=positive_int, help="head dim (64 or 128)")
    parser.add_argument("--lk", type=positive_int, default=None, help="key length (default L)")
    parser.add_argument("--causal", action="store_true", help="causal mask (bottom-right)")
    parser.add_argument("--dtype", choices=("bf16", "f16"), default="bf16")
    parser.add_argument("--path", choices=("warp", "hopper", "auto"), default="auto")
    parser.add_argument(
        "--kv-lens", type=_lens, default=None, help="per-batch key lengths, e.g. 100,0,37"
    )
    parser.add_argument("--warps", type=int, choices=(4, 8), default=None,
                        help="warp path: warps per CTA (default 4; 8: 128 query rows)")  # fmt: skip
    parser.add_argument("--layout", choices=("bhld", "blhd"), default="bhld",
                        help="storage order of q, k, v (blhd: strided B, H, L views)")  # fmt: skip


def _config(args: argparse.Namespace, capability: Any) -> Any:
    """The warp path's configuration ``attention()`` launches for these arguments on a GPU
    of ``capability`` ((major, minor), None when unknown): ``host.launch_config``, with
    16-byte rows (the command line's arrays always have them)."""
    from tylo.ops.attention.host import launch_config

    return launch_config(
        args.d,
        args.dtype,
        causal=args.causal,
        padding=args.kv_lens is not None,
        aligned=True,
        capability=capability,
        warps=args.warps,
    )


def _check_args(args: argparse.Namespace) -> None:
    from tylo.ops.attention.host import AttentionPathError
    from tylo.ops.attention.reference import AttentionInputError

    if args.path == "hopper" and args.warps is not None:
        raise AttentionPathError("--warps configures the warp path; drop it or use --path warp")
    lk = args.lk or args.l
    if args.kv_lens is not None and (len(args.kv_lens) != args.b or max(args.kv_lens) > lk):
        raise AttentionInputError(
            f"--kv-lens: give B = {args.b} lengths, each at most Lk = {lk}; got {args.kv_lens}"
        )


def kernels(args: argparse.Namespace, target: Any) -> dict[str, Any]:
    from tylo.ops.attention.host import compile_attention

    _check_args(args)
    if args.path == "hopper":
        from tylo.ops.attention.host import AttentionPathError, _hopper_module

        compile_kernels = getattr(_hopper_module(), "compile_kernels", None)
        if compile_kernels is None:
            raise AttentionPathError(
                "--path hopper --compile-only: tylo.ops.attention.hopper_host has no "
                "compile_kernels(args, target)"
            )
        return compile_kernels(args, target)
    cfg = _config(args, (target.major, target.minor))
    if args.compile_only:
        _print_plan(cfg)
    return {"attention_kernel": compile_attention(cfg, target)}


def _print_plan(cfg: Any) -> None:
    print(f"config: {cfg.describe()}")
    print(f"  S plan: {cfg.s_plan}")
    print(f"  PV plan: {cfg.pv_plan}")
    for what, v in cfg.proofs.items():
        print(f"  {what}: {getattr(v, 'status', 'proved' if what.startswith('chain') else v)}")


def run(args: argparse.Namespace) -> str:
    from tylo.ops.attention.host import verify

    _check_args(args)
    if args.path != "hopper":
        from tylo.ops.attention.host import device_capability

        _print_plan(_config(args, device_capability(0)))
    res = verify(
        args.b, args.h, args.l, args.d, lk=args.lk, dtype=args.dtype, causal=args.causal,
        kv_lens=args.kv_lens, layout=args.layout, path=args.path, seed=args.seed,
        warps=args.warps,
    )  # fmt: skip
    return f"{res['where']}: o error {res['error']:.3g}, lse error {res['lse_error']:.3g}"


EXAMPLE = Example(
    "attention",
    "O = softmax(Q K^T * scale) V (warp MMA, FlashAttention-2 class), checked against float64",
    add_arguments,
    kernels,
    run,
    prog="python -m tylo.ops.attention",
)


def run_main(argv: list[str]) -> int:
    """The command line: without a GPU, a plain run compiles and proves instead."""
    return run_or_compile(EXAMPLE, argv)


if __name__ == "__main__":
    sys.exit(run_main(sys.argv[1:]))
