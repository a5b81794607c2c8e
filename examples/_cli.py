"""Command-line plumbing shared by every example (vector_add, row_reduce, and later gemm,
softmax, attention).

Every example's ``run.py`` builds an :class:`Example` and calls :func:`main`, which gives
it the same options:

- ``--target sm_90a --compile-only``: compile every kernel the example would launch for
  that target and print resource usage (registers, shared memory, spills, stack) and
  compile timings; needs no GPU;
- ``--emit llvm|ptx|sass``: print that stage of every kernel (no GPU needed);
- otherwise: run on the GPU and verify against a float64 reference (outputs poisoned
  first, fresh random data each run, every CUDA call checked, the device synchronized
  before reading results); the exit status is 0 only when verification passed.

``--seed`` fixes the random data; ``--torch`` launches with PyTorch tensors instead of
tylo's own DeviceBuffers (when torch is installed).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:  # run as `python examples/<name>/run.py` from anywhere
    sys.path.insert(0, ROOT)

__all__ = ["Example", "VerificationError", "add_common_arguments", "main", "report_resources"]

STAGES = ("llvm", "ptx", "sass")


class VerificationError(AssertionError):
    """The GPU result does not match the reference."""


@dataclass(frozen=True)
class Example:
    """One example's hooks for :func:`main`.

    ``add_arguments(parser)`` adds its positional sizes and options; ``kernels(args,
    target)`` compiles (without a GPU) every kernel the run would launch and returns
    ``{label: CompiledKernel}``; ``run(args)`` runs on the GPU, verifies, and returns a
    one-line summary (raising :class:`VerificationError` on a mismatch).
    """

    name: str
    description: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    kernels: Callable[[argparse.Namespace, Any], dict[str, Any]]
    run: Callable[[argparse.Namespace], str]


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--target",
        default=None,
        help="compile for this target (e.g. sm_90a, sm_80); default: the "
        "GPU's, or sm_90a without one",
    )
    parser.add_argument(
        "--compile-only",
        action="store_true",
        help="compile only and print resource usage (no GPU needed)",
    )
    parser.add_argument(
        "--emit",
        choices=STAGES,
        default=None,
        help="print this stage of every kernel (no GPU needed)",
    )
    parser.add_argument("--seed", type=int, default=None, help="random seed for the data")
    parser.add_argument(
        "--torch",
        action="store_true",
        help="launch with torch tensors instead of tylo DeviceBuffers",
    )


def _target(args: argparse.Namespace) -> Any:
    from tylo.target import Target

    if args.target:
        return Target.parse(args.target)
    try:
        return Target.from_device(0)
    except Exception:  # noqa: BLE001 - no driver or no GPU: a sensible default target
        return Target.parse("sm_90a")


def report_resources(kernels: dict[str, Any], out: Any = None) -> None:
    """Print one line per kernel: registers, shared memory, spills, stack, compile times."""
    out = out or sys.stdout
    for label, k in kernels.items():
        t = k.timings
        times = ", ".join(
            f"{name} {1e3 * t[key]:.1f} ms"
            for name, key in (
                ("trace", "trace_s"),
                ("IR", "ir_s"),
                ("libNVVM", "nvvm_s"),
                ("link", "link_s"),
            )
            if key in t
        )
        print(
            f"{label} [{k.target}, block {k.block}]: {k.resources}; {times} "
            f"(cache {t.get('cache')})",
            file=out,
        )


def main(example: Example, argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and compile, emit, or run and verify ``example``; returns the exit
    status (0 success, 1 verification failure, 2 no GPU to run on)."""
    parser = argparse.ArgumentParser(
        prog=f"examples/{example.name}/run.py", description=example.description
    )
    example.add_arguments(parser)
    add_common_arguments(parser)
    args = parser.parse_args(argv)
    if args.compile_only or args.emit:
        target = _target(args)
        kernels = example.kernels(args, target)
        if args.emit:
            for label, k in kernels.items():
                print(f"// ===== {label} ({args.emit}, {k.target}) =====")
                print(k.stage(args.emit))
        if args.compile_only:
            report_resources(kernels)
        return 0
    from tylo.backend.errors import NoDeviceError

    start = time.perf_counter()
    try:
        summary = example.run(args)
    except AssertionError as err:  # VerificationError, or a verify() assertion
        print(f"{example.name}: FAILED: {err}", file=sys.stderr)
        return 1
    except NoDeviceError as err:
        print(
            f"{example.name}: running needs a GPU ({err}); without one, use "
            "--compile-only or --emit llvm|ptx|sass",
            file=sys.stderr,
        )
        return 2
    print(f"{example.name}: OK: {summary} ({time.perf_counter() - start:.2f} s)")
    return 0
