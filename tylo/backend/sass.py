"""SASS, the machine code in a cubin, through ``nvdisasm``.

``nvdisasm`` is optional: it comes from the ``nvidia-cuda-nvdisasm`` wheel (the ``sass``
extra, ``pip install 'tylo[sass]'``), a CUDA toolkit on PATH, or ``$CUDA_HOME/bin``.
Compiling, resource usage and launching never need it; only reading SASS does.

nvJitLink adds unused helper functions to some cubins (a shuffle helper on sm_80,
docs/toolchain.md), so checks on one kernel's code should use :func:`sass_for`, which returns
only that function's section.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from tylo.backend.errors import ToolchainError
from tylo.errors import TyloError

__all__ = ["SassError", "disassemble", "find_nvdisasm", "opcodes", "sass_for", "sass_functions"]

_INSTALL_HINT = (
    "nvdisasm was not found (SASS is optional); install it with `pip install 'tylo[sass]'` "
    "or `pip install nvidia-cuda-nvdisasm` (or put a CUDA toolkit's bin directory on PATH)"
)
_SECTION_RE = re.compile(r"^//-+ \.text\.(\S+)\s+-+\s*$", re.MULTILINE)
# an instruction line: /*0070*/  @!P0 BRA `(.L_x_1) ;  -> opcode with its modifiers
_INSTRUCTION_RE = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")


class SassError(TyloError, LookupError):
    """A function asked for is not in the disassembly."""


def _wheel_candidates() -> list[Path]:
    """nvdisasm inside installed nvidia-* wheels (nvidia/cu13/bin, nvidia/cuda_nvdisasm/bin)."""
    out = []
    for entry in sys.path:
        root = Path(entry or ".", "nvidia")
        if root.is_dir():
            out += sorted(root.glob("cu*/bin/nvdisasm"), reverse=True)
            out += sorted(root.glob("cuda_nvdisasm/bin/nvdisasm"))
    return out


@functools.lru_cache(maxsize=1)
def find_nvdisasm() -> str | None:
    """Path of an nvdisasm executable, or None: the wheel, then PATH, then CUDA_HOME."""
    candidates = [str(p) for p in _wheel_candidates()]
    try:
        from cuda import pathfinder

        find = getattr(pathfinder, "find_nvidia_binary_utility", None)
        if find is not None and (found := find("nvdisasm")):
            candidates.append(str(found))
    except (ImportError, OSError, RuntimeError):
        pass  # an older cuda-pathfinder, or it failed: the plain search below still runs
    if found := shutil.which("nvdisasm"):
        candidates.append(found)
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if root := os.environ.get(var):
            candidates.append(str(Path(root, "bin", "nvdisasm")))
    candidates.append("/usr/local/cuda/bin/nvdisasm")
    return next((c for c in candidates if os.path.isfile(c) and os.access(c, os.X_OK)), None)


def disassemble(cubin: bytes) -> str:
    """The SASS of every code section in ``cubin`` (``nvdisasm -c``)."""
    tool = find_nvdisasm()
    if tool is None:
        raise ToolchainError(_INSTALL_HINT)
    with tempfile.TemporaryDirectory(prefix="tylo-sass-") as tmp:
        path = Path(tmp, "module.cubin")
        path.write_bytes(cubin)
        proc = subprocess.run([tool, "-c", str(path)], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise ToolchainError(
            f"nvdisasm ({tool}) failed with exit {proc.returncode}: {proc.stderr.strip()}"
        )
    return proc.stdout


def sass_functions(sass: str) -> dict[str, str]:
    """Split nvdisasm output into ``{function name: its section's text}``."""
    marks = list(_SECTION_RE.finditer(sass))
    return {
        m.group(1): sass[m.start() : marks[i + 1].start() if i + 1 < len(marks) else len(sass)]
        for i, m in enumerate(marks)
    }


def sass_for(cubin_or_sass: bytes | str, entry: str) -> str:
    """The SASS of one function only (helpers the linker adds are left out).

    Accepts a cubin (disassembled here) or nvdisasm output. Raises :class:`SassError`
    naming the functions present when ``entry`` is not one of them.
    """
    sass = disassemble(cubin_or_sass) if isinstance(cubin_or_sass, bytes) else cubin_or_sass
    functions = sass_functions(sass)
    if entry not in functions:
        raise SassError(f"sass_for: no function {entry!r} in the SASS; it has {sorted(functions)}")
    return functions[entry]


def opcodes(sass: str) -> Counter[str]:
    """Count instructions by full opcode (``LDG.E.128``, ``HMMA.16816.F32.BF16``, ...)."""
    return Counter(m.group(1) for m in _INSTRUCTION_RE.finditer(sass))
