"""``tylo doctor``: which parts of the CUDA stack tylo finds, their versions, where they
are, and the exact command that installs what is missing.

Checked: the CUDA driver and GPUs (launching needs them; compiling does not), libNVVM and
nvJitLink (compiling needs both, or ptxas in place of nvJitLink), ptxas and nvdisasm
(optional). The exit status is 0 when tylo can compile (libNVVM and a linker found) and
69 otherwise; a machine with no GPU can still be healthy for compiling.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from dataclasses import asdict, dataclass
from typing import Any

from tylo.cli.common import EXIT_OK, EXIT_UNAVAILABLE

__all__ = ["Check", "add_parser", "checks", "run"]

EXAMPLES = """\
examples:
  tylo doctor           a table: component, status, version, where, how to install
  tylo doctor --json    the same as JSON
"""

DRIVER_FIX = (
    "install an NVIDIA GPU driver that supports CUDA 13 (release 580 or newer) on a machine "
    "with an NVIDIA GPU; compiling (tylo compile) works without one"
)
NVVM_FIX = "pip install nvidia-nvvm"
NVJITLINK_FIX = "pip install nvidia-nvjitlink"
PTXAS_FIX = "pip install nvidia-cuda-nvcc   (optional: the fallback linker)"
NVDISASM_FIX = "pip install 'tylo[sass]'   (or: pip install nvidia-cuda-nvdisasm)"


@dataclass(frozen=True)
class Check:
    """One component: ``ok`` (found and usable), its version, where it was found, why not
    (``detail``) and the command that installs it (``fix``, for what is missing)."""

    name: str
    ok: bool
    version: str = ""
    where: str = ""
    detail: str = ""
    fix: str = ""
    required: bool = True


def _error(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}".splitlines()[0]


def _libcuda_path() -> str:
    try:
        with open("/proc/self/maps", encoding="utf-8") as f:
            for line in f:
                if "libcuda.so" in line:
                    return line.split()[-1]
    except OSError:
        pass
    return ""


def check_driver() -> list[Check]:
    """The driver and every GPU it reports."""
    from tylo.backend import driver

    version = driver.driver_version()
    if version is None:
        from tylo.backend.device import device_properties
        from tylo.errors import TyloError

        reason = "no driver/GPU"
        try:
            device_properties(0)  # fails, and its error says why (no library, cuInit's code)
        except TyloError as err:
            reason = f"no driver/GPU ({_error(err)})"
        return [
            Check("driver", False, detail=reason, fix=DRIVER_FIX, required=False),
            Check("gpu", False, detail="no driver/GPU", required=False),
        ]
    out = [
        Check(
            "driver",
            True,
            f"CUDA {version // 1000}.{version % 1000 // 10}",
            _libcuda_path(),
            required=False,
        )
    ]
    count = driver.device_count()
    if count == 0:
        out.append(
            Check("gpu", False, detail="the driver reports no GPU", fix=DRIVER_FIX, required=False)
        )
    for i in range(count):
        try:
            from tylo.backend.device import device_properties

            p = device_properties(i)
            cc = p.compute_capability
            out.append(
                Check(
                    f"gpu {i}", True, f"{p.name}, sm_{cc[0]}{cc[1]}", f"device {i}", required=False
                )
            )
        except Exception as err:  # noqa: BLE001 - report, do not crash: doctor must always print
            out.append(Check(f"gpu {i}", False, detail=_error(err), required=False))
    return out


def check_nvvm() -> Check:
    """libNVVM: its release and library path (one tiny compile)."""
    try:
        from tylo.backend.nvvm import nvvm_version

        v = nvvm_version()
        return Check("libNVVM", True, f"{v.release} (PTX ISA {v.ptx_isa})", v.library)
    except Exception as err:  # noqa: BLE001 - any failure is what doctor reports
        return Check("libNVVM", False, detail=_error(err), fix=NVVM_FIX)


def check_nvjitlink() -> Check:
    """nvJitLink: its version and library path."""
    try:
        from cuda import pathfinder

        lib = pathfinder.load_nvidia_dynamic_lib("nvJitLink")
        from cuda.bindings import nvjitlink

        major, minor = nvjitlink.version()
        return Check("nvJitLink", True, f"{major}.{minor}", str(getattr(lib, "abs_path", "")))
    except Exception as err:  # noqa: BLE001 - ImportError, OSError, pathfinder's RuntimeError, ...
        return Check("nvJitLink", False, detail=_error(err), fix=NVJITLINK_FIX)


def _tool_version(path: str) -> str:
    try:
        out = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=20, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError) as err:
        return f"version unknown ({_error(err)})"
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    release = [
        ln for ln in lines if "release" in ln
    ]  # "Cuda compilation tools, release 13.0, V13.0.88"
    return (release or lines or ["version unknown"])[-1]


def check_tools() -> list[Check]:
    """ptxas (the fallback linker) and nvdisasm (SASS), both optional."""
    from tylo.backend.link import find_ptxas
    from tylo.backend.sass import find_nvdisasm

    out = []
    for name, find, fix in (
        ("ptxas", find_ptxas, PTXAS_FIX),
        ("nvdisasm", find_nvdisasm, NVDISASM_FIX),
    ):
        path = find()
        if path:
            out.append(Check(name, True, _tool_version(path), path, required=False))
        else:
            out.append(Check(name, False, detail="not found", fix=fix, required=False))
    return out


def checks() -> list[Check]:
    """Every check, in the order printed."""
    return [*check_driver(), check_nvvm(), check_nvjitlink(), *check_tools()]


def add_parser(sub: Any) -> None:
    """Register ``tylo doctor``."""
    p = sub.add_parser(
        "doctor",
        help="check the driver, GPUs, libNVVM, nvJitLink, ptxas and nvdisasm",
        description=__doc__.split("\n\n", 1)[0].replace("``", "'"),
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(run=run)


def can_compile(found: list[Check]) -> bool:
    """True when libNVVM and a linker (nvJitLink or ptxas) were found."""
    ok = {c.name: c.ok for c in found}
    return ok.get("libNVVM", False) and (ok.get("nvJitLink", False) or ok.get("ptxas", False))


def run(args: argparse.Namespace) -> int:
    """Run ``tylo doctor``; 0 when tylo can compile here, 69 when it cannot."""
    import tylo

    found = checks()
    status = EXIT_OK if can_compile(found) else EXIT_UNAVAILABLE
    if args.json:
        print(
            json.dumps(
                {
                    "tylo": tylo.__version__,
                    "can_compile": status == 0,
                    "checks": [asdict(c) for c in found],
                },
                indent=2,
            )
        )
        return status
    print(f"tylo {tylo.__version__}")
    for c in found:
        state = "ok" if c.ok else ("MISSING" if c.required else "missing")
        line = f"{c.name:<10} {state:<8} {c.version or c.detail}"
        print(line.rstrip())
        if c.ok and c.where:
            print(f"{'':<10} at       {c.where}")
        if not c.ok and c.version == "" and c.detail and c.fix:
            print(f"{'':<10} install  {c.fix}")
    print(
        "compiling: " + ("possible" if status == 0 else "NOT possible (install the MISSING parts)")
    )
    launch = any(c.ok for c in found if c.name.startswith("gpu"))
    print("launching: " + ("possible" if launch else "not possible here (no driver/GPU)"))
    return status
