"""Command-line plumbing shared by every op's command line (``python -m tylo.ops.gemm``,
``attention``, ``softmax``) and by the examples (vector_add, row_reduce).

Every command builds an :class:`Example` and calls :func:`main`, which gives
it the same options:

- ``--target sm_90a --compile-only``: compile every kernel the example would launch for
  that target and print resource usage (registers, shared memory, spills, stack) and
  compile timings; needs no GPU;
- ``--emit llvm|ptx|sass``: print that stage of every kernel (no GPU needed; ``sass``
  needs nvdisasm: ``pip install 'tylo[sass]'``);
- otherwise: run on the GPU and verify against a float64 reference (outputs poisoned
  first, fresh random data each run, every CUDA call checked, the device synchronized
  before reading results); the exit status is 0 only when verification passed.

``--seed`` fixes the random data; ``--torch`` launches with PyTorch tensors instead of
tylo's own DeviceBuffers (when torch is installed).

Errors are one line on stderr, ``<prog>: error: ...``, never a traceback: exit status 2
for a usage error (a size below 1, a negative seed, an unknown target, ``--torch``
without torch) and for "no GPU to run on", 1 for a failed verification or any other
error tylo raised on purpose (:class:`tylo.errors.TyloError`). ``TYLO_CLI_TRACEBACK=1``
shows the traceback of such an error instead.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

__all__ = [
    "EXIT_FAILED",
    "EXIT_USAGE",
    "Example",
    "VerificationError",
    "access_summary",
    "add_common_arguments",
    "finite_float",
    "has_gpu",
    "main",
    "non_negative_int",
    "positive_int",
    "report_resources",
    "run_or_compile",
]

EXIT_FAILED = 1  # verification failed, or tylo refused the work (a TyloError)
EXIT_USAGE = 2  # bad command line, or nothing to run on (no GPU)
STAGES = ("llvm", "ptx", "sass")
TRACEBACK_ENV = "TYLO_CLI_TRACEBACK"


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
    prog: str | None = None  # the name errors start with; default ``examples/<name>/run.py``


def _integer(text: str) -> int:
    try:
        return int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None


def positive_int(text: str) -> int:
    """An argparse type: an integer >= 1 (sizes); anything else is a usage error.

    >>> positive_int("65")
    65
    """
    value = _integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a size: it must be >= 1")
    return value


def non_negative_int(text: str) -> int:
    """An argparse type: an integer >= 0 (seeds, paddings, offsets).

    >>> non_negative_int("0")
    0
    """
    value = _integer(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative: it must be >= 0")
    return value


def finite_float(text: str) -> float:
    """An argparse type: a finite float (scales); ``nan`` and ``inf`` are usage errors.

    >>> finite_float("0.5")
    0.5
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def _target_name(text: str) -> str:
    """An argparse type: a target tylo can compile for (checked by ``Target.parse``)."""
    from tylo.errors import TyloError
    from tylo.target import Target

    try:
        Target.parse(text)
    except TyloError as err:
        raise argparse.ArgumentTypeError(_one_line(err)) from None
    return text


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line on stderr (exit status 2)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see --help)\n")


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options every example has: ``--target``, ``--compile-only``, ``--emit``,
    ``--seed`` and ``--torch``."""
    parser.add_argument(
        "--target",
        type=_target_name,
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
        help="print this stage of every kernel (no GPU needed; sass needs nvdisasm: "
        "pip install 'tylo[sass]')",
    )
    parser.add_argument(
        "--seed", type=non_negative_int, default=None, help="random seed for the data (>= 0)"
    )
    parser.add_argument(
        "--torch",
        action="store_true",
        help="launch with torch tensors instead of tylo DeviceBuffers (needs torch)",
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
        split = _register_split(k)
        if split:
            print(f"  {split}", file=out)


def _register_split(k: Any) -> str | None:
    """The kernel's ``setmaxnreg`` split (warp-specialized kernels), and whether the SASS
    kept it when nvdisasm can tell."""
    from tylo.backend.resources import register_split
    from tylo.errors import TyloError

    ptx = k.ptx
    if "setmaxnreg" not in ptx:
        return None
    try:
        sass = k.sass
    except (TyloError, OSError):  # nvdisasm is optional
        sass = None
    return register_split(ptx, sass)


def _one_line(err: BaseException) -> str:
    """``err``'s message on one line: its first line, and how many lines were left out."""
    lines = [line for line in str(err).splitlines() if line.strip()] or ["(no message)"]
    more = len(lines) - 1
    if more:
        return f"{lines[0]} (+{more} more line(s); set {TRACEBACK_ENV}=1 to see them)"
    return lines[0]


def _fail(prog: str, err: BaseException, status: int, hint: str = "") -> int:
    if os.environ.get(TRACEBACK_ENV) == "1":
        raise err
    print(f"{prog}: error: {type(err).__name__}: {_one_line(err)}{hint}", file=sys.stderr)
    return status


def _torch_installed() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def main(example: Example, argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and compile, emit, or run and verify ``example``; returns the exit
    status: 0 success, 1 (:data:`EXIT_FAILED`) a failed verification or a typed tylo
    error, 2 (:data:`EXIT_USAGE`) a usage error or no GPU to run on. Every error is one
    line on stderr."""
    prog = example.prog or f"examples/{example.name}/run.py"
    parser = _Parser(prog=prog, description=example.description)
    example.add_arguments(parser)
    add_common_arguments(parser)
    args = parser.parse_args(argv)
    if args.torch and not _torch_installed():
        parser.error(
            "--torch needs PyTorch, which is not installed; install it with "
            "`pip install torch` (see https://pytorch.org), or leave out --torch"
        )
    from tylo.backend.errors import NoDeviceError
    from tylo.errors import TyloError

    prog = parser.prog
    start = time.perf_counter()
    try:
        if args.compile_only or args.emit:
            kernels = example.kernels(args, _target(args))
            if args.emit:  # every stage first, so that an error prints no partial output
                texts = [(label, k, k.stage(args.emit)) for label, k in kernels.items()]
                for label, k, text in texts:
                    print(f"// ===== {label} ({args.emit}, {k.target}) =====")
                    print(text)
            if args.compile_only:
                report_resources(kernels)
                print(access_summary(kernels))
            return 0
        summary = example.run(args)
    except AssertionError as err:  # VerificationError, or a verify() assertion
        print(f"{example.name}: FAILED: {err}", file=sys.stderr)
        return EXIT_FAILED
    except NoDeviceError as err:
        hint = "; without a GPU, use --compile-only or --emit llvm|ptx|sass"
        return _fail(prog, err, EXIT_USAGE, hint)
    except TyloError as err:
        return _fail(prog, err, EXIT_FAILED)
    except MemoryError as err:  # host arrays for sizes this machine cannot hold
        return _fail(prog, err, EXIT_FAILED, " (out of host memory: use smaller sizes)")
    print(f"{example.name}: OK: {summary} ({time.perf_counter() - start:.2f} s)")
    return 0


def access_summary(kernels: dict[str, Any]) -> str:
    """``accesses: N proved, G guarded, U unproved`` over the compiled ``kernels``
    (:mod:`tylo.kernel.accesses`); kernels whose counts are not known say so."""
    from tylo.kernel.access_counts import summary_line  # no sympy: a cache hit prints it

    total, unknown = [0, 0, 0], []
    for label, k in kernels.items():
        counts = getattr(k, "access_counts", None)
        if counts is None:
            unknown.append(label)
            continue
        total = [a + b for a, b in zip(total, counts)]
    line = summary_line((total[0], total[1], total[2]))
    return line + (f" (not known for {', '.join(unknown)})" if unknown else "")


def has_gpu() -> bool:
    """Whether device 0 exists (a driver and a GPU); never raises."""
    try:
        from tylo.target import Target

        Target.from_device(0)
        return True
    except Exception:  # noqa: BLE001 - no driver, no device: compile-only instead
        return False


def run_or_compile(example: Example, argv: Sequence[str]) -> int:
    """:func:`main`, except that without a GPU a plain run compiles and proves instead
    (``--compile-only``) and says so: what the README's main job relies on to pass on a
    machine without a GPU."""
    argv = list(argv)
    if "--compile-only" in argv or "--emit" in argv or any(a.startswith("--emit=") for a in argv):
        return main(example, argv)
    if "-h" in argv or "--help" in argv or has_gpu():
        return main(example, argv)
    rc = main(example, [*argv, "--compile-only"])
    if rc == 0:
        print(f"{example.name}: no GPU found: compiled and proved, not run")
    return rc
