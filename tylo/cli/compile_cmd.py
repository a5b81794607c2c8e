"""``tylo compile``: compile a kernel from a Python file for a target, without a GPU, and
print one stage (LLVM IR, PTX, SASS or the resource usage)."""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import re
import sys
from pathlib import Path
from typing import Any

from tylo.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_UNAVAILABLE,
    CliError,
    nonempty_path,
    parse_int,
    shown,
)

__all__ = ["EMITS", "MAX_BLOCK", "add_parser", "arg_spec", "module_name", "run"]

#: The most threads per dimension of a block (x, y, z) and in all: CUDA's limits.
MAX_BLOCK = (1024, 1024, 64)
MAX_THREADS = 1024

EMITS = ("llvm", "ptx", "sass", "resources")

EXAMPLES = """\
argument specs (--arg NAME=SPEC, one per kernel parameter):
  ptr:DTYPE[:ALIGN]     a pointer to DTYPE elements (f32, bf16, ...), ALIGN bytes aligned
                        (tylo.pointer(tylo.bf16, align=16) for ptr:bf16:16)
  int[:FACTS]           a runtime int; FACTS as min=0,max=4096,multiple_of=8 (tylo.Int(...))
  float[:f64]           a runtime float (tylo.Float(); f32 unless :f64)
  py:EXPR               a static value: the Python expression EXPR, evaluated with the
                        kernel module's globals and `tylo` in scope (py:128, py:tylo.bf16)

examples:
  tylo compile examples/vector_add/kernel.py:vector_add --arg a=ptr:f32 --arg b=ptr:f32 \\
      --arg out=ptr:f32 --arg n=int --block 256 --emit ptx
  tylo compile k.py:gemm --target sm_90a --block 256 --arg a=ptr:bf16:16 \\
      --arg n=int:multiple_of=8 --arg plan=py:make_plan(128) --emit resources
"""


def add_parser(sub: Any) -> None:
    """Register ``tylo compile``."""
    p = sub.add_parser(
        "compile",
        help="compile a kernel for a target without a GPU; print LLVM IR, PTX, SASS or resources",
        description="Import FILE.py, take its tylo kernel KERNEL, compile it for --target "
        "with the argument specs given by --arg (no GPU needed), and print one stage.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("kernel", metavar="FILE.py:KERNEL", help="the file and the kernel's name in it")
    p.add_argument(
        "--target",
        default="sm_90a",
        help="sm_90a, sm_80, ... (default sm_90a): a GPU CUDA 13 compiles for",
    )
    p.add_argument("--emit", choices=EMITS, default="ptx", help="the stage to print (default ptx)")
    p.add_argument(
        "--arg", action="append", default=[], metavar="NAME=SPEC", help="a parameter's spec"
    )
    p.add_argument(
        "--block",
        required=True,
        help="the block shape, required: 256 or 16,8 (at most 1024 threads; z <= 64)",
    )
    p.add_argument("-o", "--output", metavar="FILE", help="write the stage to FILE, not stdout")
    p.add_argument(
        "--export",
        metavar="DIR",
        help="also copy the compiled specialization into the export directory DIR, which "
        "another process launches from with tylo.kernel.export.load(DIR) or "
        "TYLO_CACHE_DIR=DIR (no tracing, no libNVVM)",
    )
    p.add_argument(
        "--accesses",
        action="store_true",
        help="print each memory access with its bounds state (proved, guarded, unproved), "
        "its condition or reason and its source line, instead of a stage (docs/accesses.md)",
    )
    p.set_defaults(run=run)


def _load(target: str) -> Any:
    path_text, sep, name = target.rpartition(":")
    if not sep or not path_text or not re.fullmatch(r"[A-Za-z_][A-Za-z_0-9]*", name):
        raise CliError(f"{target!r}: expected FILE.py:KERNEL, such as kernels.py:vector_add")
    path = Path(path_text)
    if not path.is_file():
        raise CliError(f"{target!r}: no file {path_text}")
    name_in_modules = module_name(path)
    spec = importlib.util.spec_from_file_location(name_in_modules, path)
    if spec is None or spec.loader is None:
        raise CliError(f"{target!r}: {path_text} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    # the kernel file's own imports (its sibling modules) resolve from its directory, after
    # everything else: a file there named like a standard module (random.py, typing.py)
    # must not shadow that module for the rest of the process
    here = str(path.resolve().parent)
    if here not in sys.path:
        sys.path.append(here)
    sys.modules[name_in_modules] = module
    try:
        spec.loader.exec_module(module)
    except SystemExit as err:  # exit() at import: nothing would be compiled; not a success
        raise CliError(
            f"importing {path_text} failed: it raised SystemExit({err.code!r}) at import; "
            'put its script part under `if __name__ == "__main__":`',
            EXIT_FAILED,
        ) from None
    except Exception as err:  # noqa: BLE001 - the user's module failed to import: say so, exit 1
        raise CliError(
            f"importing {path_text} failed: {type(err).__name__}: {err}", EXIT_FAILED
        ) from None
    kernel = getattr(module, name, None)
    if kernel is None:
        raise CliError(f"{target!r}: {path_text} has no name {name!r}")
    if not hasattr(kernel, "compile") or not hasattr(kernel, "param_names"):
        raise CliError(
            f"{target!r}: {name} is a {type(kernel).__name__}, not a tylo kernel "
            "(decorate it with @tylo.kernel)"
        )
    return module, kernel


def module_name(path: Path) -> str:
    """The private name ``tylo compile`` imports ``path`` under: ``_tylo_cli_<stem>_<hash
    of the resolved path>``, so a kernel file named ``json.py`` does not replace (and is
    not replaced by) the module ``json``, and the name is the same in every process (the
    kernel cache keys on it)."""
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
    stem = re.sub(r"\W", "_", path.stem)
    return f"_tylo_cli_{stem}_{digest}"


def _facts(text: str, spec: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        key, sep, value = item.partition("=")
        if (
            not sep
            or key.strip() not in ("min", "max", "multiple_of")
            or not re.fullmatch(r"\d+", value.strip())
        ):
            raise CliError(f"--arg {shown(spec)}: int facts are min=N, max=N, multiple_of=N")
        out[key.strip()] = parse_int(value, f"--arg {shown(spec)}: {key.strip()}")
    return out


def arg_spec(spec: str, scope: dict[str, Any]) -> tuple[str, Any]:
    """``(name, value)`` for one ``--arg NAME=SPEC`` (see the epilog for SPEC)."""
    import tylo

    name, sep, text = spec.partition("=")
    name = name.strip()
    if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z_0-9]*", name):
        raise CliError(f"--arg {spec!r}: expected NAME=SPEC, such as --arg n=int")
    kind, _, rest = text.partition(":")
    try:
        if kind == "ptr":
            dtype, _, align = rest.partition(":")
            if not dtype:
                raise CliError(f"--arg {spec!r}: ptr needs an element type: ptr:f32")
            if align and not align.isdigit():
                raise CliError(f"--arg {spec!r}: the alignment is bytes, such as ptr:bf16:16")
            return name, tylo.pointer(dtype, align=int(align) if align else None)
        if kind == "int":
            return name, tylo.Int(**_facts(rest, spec))
        if kind == "float":
            return name, tylo.Float(rest) if rest else tylo.Float()
        if kind == "py":
            if not rest:
                raise CliError(f"--arg {spec!r}: py needs an expression, such as py:128")
            try:
                return name, eval(rest, {**scope, "tylo": tylo})  # the user's own expression
            except Exception as err:  # noqa: BLE001 - the user's expression failed: usage
                raise CliError(f"--arg {spec!r}: {type(err).__name__}: {err}") from None
    except tylo.TyloError as err:
        if isinstance(err, CliError):
            raise
        raise CliError(f"--arg {spec!r}: {err}") from None
    raise CliError(
        f"--arg {spec!r}: the spec is ptr:DTYPE[:ALIGN], int[:FACTS], float[:f64] or py:EXPR"
    )


def _block(text: str) -> tuple[int, ...]:
    """The ``--block`` shape: one to three extents within CUDA's limits (at most
    :data:`MAX_BLOCK` per dimension and :data:`MAX_THREADS` threads); else a usage error."""
    parts = text.strip().strip("()").split(",")
    if not 1 <= len(parts) <= 3 or not all(re.fullmatch(r"\s*\d+\s*", p) for p in parts):
        raise CliError(f"--block {shown(text)}: expected one to three ints such as 256 or 16,8")
    block = tuple(
        parse_int(p, f"--block {shown(text)}: extent {'xyz'[i]}", 1, MAX_BLOCK[i])
        for i, p in enumerate(parts)
    )
    threads = 1
    for b in block:
        threads *= b
    if threads > MAX_THREADS:
        raise CliError(
            f"--block {shown(text)}: {threads} threads; a block holds at most {MAX_THREADS}"
        )
    return block


def run(args: argparse.Namespace) -> int:
    """Run ``tylo compile``; returns the exit status."""
    from tylo.backend.errors import CompileError, LinkError, ToolchainError
    from tylo.backend.sass import SassError
    from tylo.kernel.errors import TraceError
    from tylo.target import Target, TargetError

    try:
        target = Target.parse(args.target)
    except TargetError as err:
        raise CliError(f"--target {shown(args.target)}: {err}") from None
    if not target.known:
        from tylo.target import KNOWN_CAPABILITIES

        names = ", ".join(f"sm_{a}{b}" for a, b in sorted(KNOWN_CAPABILITIES))
        raise CliError(
            f"--target {shown(args.target)}: {target.sm} is not a GPU CUDA 13 compiles for; "
            f"known: {names} (with an 'a' suffix from sm_90a on)"
        )
    block = _block(args.block)
    if args.output is not None:
        nonempty_path(args.output, "-o", "kernel.ptx")
    if args.export is not None:
        nonempty_path(args.export, "--export", "exported")
    module, kernel = _load(args.kernel)
    specs = dict(arg_spec(s, vars(module)) for s in args.arg)
    missing = [p for p in kernel.param_names if p not in specs]
    extra = [n for n in specs if n not in kernel.param_names]
    if missing or extra:
        raise CliError(
            f"{kernel.name}({', '.join(kernel.param_names)}): "
            + (f"give --arg for {', '.join(missing)}" if missing else "")
            + ("; " if missing and extra else "")
            + (f"no parameter named {', '.join(extra)}" if extra else "")
        )
    try:
        if args.accesses:
            return _print(str(kernel.accesses(block=block, target=target, **specs)), args)
        compiled = kernel.compile(block=block, target=target, **specs)
        if args.emit == "resources":
            text = _resources(compiled)
        else:
            text = getattr(compiled, args.emit)
    except ToolchainError as err:
        raise CliError(str(err), EXIT_UNAVAILABLE) from None
    except SassError as err:
        raise CliError(str(err), EXIT_FAILED) from None
    except (TraceError, CompileError, LinkError) as err:
        raise CliError(f"{type(err).__name__}: {err}", EXIT_FAILED) from None
    if args.export is not None:
        from tylo.kernel.export import ExportError, export

        try:
            key = export(kernel, compiled, args.export)
        except ExportError as err:
            raise CliError(str(err), EXIT_FAILED) from None
        print(f"exported {compiled.entry} to {args.export} (key {key[:16]})", file=sys.stderr)
    return _print(text, args)


def _print(text: str, args: argparse.Namespace) -> int:
    """Write ``text`` to ``-o FILE`` or stdout; the exit status."""
    if args.output:
        try:
            Path(args.output).write_text(text)
        except OSError as err:
            raise CliError(f"cannot write {args.output}: {err}", EXIT_FAILED) from None
        print(f"wrote {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return EXIT_OK


def _resources(compiled: Any) -> str:
    r = compiled.resources
    if r is None:
        return f"{compiled.entry}: no resource information in the cubin\n"
    fields = getattr(r, "__dataclass_fields__", None)
    lines = [f"kernel  {compiled.entry}", f"target  {compiled.target}"]
    if fields:
        for k in fields:
            lines.append(f"{k:<22}{getattr(r, k)}")
            if k == "shared_bytes":  # the cubin's static shared memory; then the dynamic
                lines.append(f"{'dynamic_shared_bytes':<22}{compiled.dynamic_shared_bytes}")
    else:
        lines.append(str(r))
    return "\n".join(lines) + "\n"
