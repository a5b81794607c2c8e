"""The compile pipeline: NVVM IR -> PTX (libNVVM) -> cubin (nvJitLink), every stage kept.

:func:`compile_ir` needs no GPU. It consults the disk cache (:mod:`tylo.backend.cache`),
parses resource usage, and, when ``TYLO_EVIDENCE=<dir>`` is set, saves each module's
``.ll``, ``.ptx``, ``.cubin``, ``.sass`` (when nvdisasm is available) and a resource summary
under a readable name plus a short hash of its cache key.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
import warnings
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from tylo.backend import cache as _cache
from tylo.backend.errors import CompileError, CompileWarning, ToolchainError
from tylo.backend.link import link_cubin, linker_fingerprint, register_cap_problem
from tylo.backend.nvvm import compile_nvvm, nvvm_fingerprint
from tylo.backend.resources import Resources, kernel_resources
from tylo.target import Target

__all__ = [
    "STAGES",
    "CompileOptions",
    "CompiledModule",
    "compile_ir",
    "save_evidence",
    "toolchain_versions",
]

STAGES = ("llvm", "ptx", "cubin", "sass")
_ENTRY_RE = re.compile(r"^\s*\.(?:visible\s+|weak\s+)?\.entry\s+([A-Za-z_$][\w$]*)", re.MULTILINE)
_EXTERN_LLVM_RE = re.compile(r"^\s*\.extern\s+\.func\b[^\n]*?\b(llvm\.[\w.]+)", re.MULTILINE)
_LINKERS = ("auto", "nvjitlink", "ptxas")


@dataclass(frozen=True)
class CompileOptions:
    """Options of one compile; part of the cache key.

    ``opt_level`` (libNVVM ``-opt``, 0 or 3); ``ftz``, ``prec_div``, ``prec_sqrt``,
    ``fma`` (libNVVM floating-point flags, defaults as libNVVM's); ``max_registers``
    (registers per thread: the linker's cap, and ``.maxnreg`` on every ``@tylo.kernel``
    entry, since ptxas ignores the linker's cap on an entry with ``.maxntid``);
    ``nvvm_options`` and ``link_options`` (extra raw flags); ``linker`` (``'auto'``,
    ``'nvjitlink'`` or ``'ptxas'``).
    """

    opt_level: int = 3
    ftz: bool = False
    prec_div: bool = True
    prec_sqrt: bool = True
    fma: bool = True
    max_registers: int | None = None
    nvvm_options: tuple[str, ...] = ()
    link_options: tuple[str, ...] = ()
    linker: str = "auto"

    def __post_init__(self) -> None:
        if self.opt_level not in (0, 3):
            raise CompileError(f"CompileOptions: opt_level must be 0 or 3, got {self.opt_level!r}")
        if self.max_registers is not None and not (
            type(self.max_registers) is int and 24 <= self.max_registers <= 255
        ):  # below 24 ptxas raises the count to 24 itself: not the cap asked for
            raise CompileError(
                "CompileOptions: max_registers must be an int in 24..255, got "
                f"{self.max_registers!r}"
            )
        for name in ("nvvm_options", "link_options"):
            value = getattr(self, name)
            if isinstance(value, str) or not all(isinstance(v, str) for v in value):
                raise CompileError(
                    f"CompileOptions: {name} must be a tuple of strings, got {value!r}"
                )
            object.__setattr__(self, name, tuple(value))
        if self.linker not in _LINKERS:
            raise CompileError(
                f"CompileOptions: linker must be one of {_LINKERS}, got {self.linker!r}"
            )

    def nvvm_flags(self) -> tuple[str, ...]:
        """libNVVM flags besides ``-arch`` and ``-opt``."""
        return (
            f"-ftz={int(self.ftz)}",
            f"-prec-div={int(self.prec_div)}",
            f"-prec-sqrt={int(self.prec_sqrt)}",
            f"-fma={int(self.fma)}",
            *self.nvvm_options,
        )

    def canonical(self) -> str:
        """A stable text of every field, for cache keys."""
        return ";".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self))


@dataclass(frozen=True, eq=False)
class CompiledModule:
    """Every stage of one compile: ``llvm`` (NVVM IR text), ``ptx`` (text), ``cubin``
    (bytes), SASS on demand (:attr:`sass`), ``resources`` per kernel entry, ``timings``
    (``nvvm_s``, ``link_s``, ``total_s`` in seconds and ``cache``: ``'hit'``, ``'miss'``,
    ``'corrupt'`` or ``'off'``), the linker's ``info_log`` and the cache ``key``."""

    llvm: str
    ptx: str
    cubin: bytes
    target: Target
    entries: tuple[str, ...]
    resources: dict[str, Resources]
    timings: dict[str, Any]
    info_log: str
    key: str
    name: str
    _memo: dict[str, Any] = field(default_factory=dict, repr=False)

    def stage(self, name: str) -> str | bytes:
        """One stage by name: ``'llvm'``, ``'ptx'``, ``'cubin'`` or ``'sass'``."""
        if name == "sass":
            return self.sass
        if name in ("llvm", "ptx", "cubin"):
            return getattr(self, name)
        raise CompileError(f"CompiledModule.stage: unknown stage {name!r}; stages: {STAGES}")

    @property
    def sass(self) -> str:
        """The SASS of the whole cubin (nvdisasm, computed once)."""
        if "sass" not in self._memo:
            from tylo.backend.sass import disassemble

            self._memo["sass"] = disassemble(self.cubin)
        return self._memo["sass"]

    def sass_for(self, entry: str) -> str:
        """The SASS of one kernel entry only (linker helpers left out)."""
        from tylo.backend.sass import sass_for

        return sass_for(self.sass, entry)

    def load(self, ordinal: int = 0) -> Any:
        """The cubin loaded on device ``ordinal`` as a :class:`tylo.backend.driver.Module`
        (loaded once per device)."""
        loaded = self._memo.setdefault("modules", {})
        if ordinal not in loaded:
            from tylo.backend.driver import Module

            loaded[ordinal] = Module.load(self.cubin, ordinal=ordinal)
        return loaded[ordinal]

    def __repr__(self) -> str:
        return (
            f"CompiledModule({self.name!r}, target={self.target}, entries={self.entries}, "
            f"cache={self.timings.get('cache')})"
        )


def toolchain_versions(linker: str = "auto") -> dict[str, str]:
    """Identities of libNVVM, the linker and cuda-bindings (cache-key material)."""
    try:
        from cuda.bindings import __version__ as bindings_version
    except ImportError:  # pragma: no cover - a dependency
        bindings_version = "missing"
    return {
        "nvvm": nvvm_fingerprint(),
        "linker": linker_fingerprint(linker),
        "cuda-bindings": str(bindings_version),
    }


def compile_ir(
    llvm_ir: str,
    target: Target | str,
    *,
    entries: tuple[str, ...] = (),
    options: CompileOptions | None = None,
    use_cache: bool = True,
    name: str | None = None,
) -> CompiledModule:
    """Compile NVVM IR text to a cubin for ``target``, keeping every stage.

    ``entries`` names the kernels the module must define (checked; all entries get
    resources either way). ``name`` is a readable label for evidence files (default: the
    first entry). Raises :class:`CompileError` (libNVVM failures, missing entries, calls to
    intrinsics libNVVM does not know) or :class:`~tylo.backend.errors.LinkError`.
    """
    start = time.perf_counter()
    target = Target.parse(target)
    options = CompileOptions() if options is None else options
    if not isinstance(options, CompileOptions):
        raise CompileError(
            f"compile_ir: options must be CompileOptions, got {type(options).__name__}"
        )
    entries = (entries,) if isinstance(entries, str) else tuple(entries)
    key = _cache.cache_key(
        llvm_ir, target.sm, options.canonical(), toolchain_versions(options.linker)
    )
    disk = _cache.default_cache() if use_cache else None
    entry, status = disk.lookup(key) if disk is not None else (None, "off")
    label = name or (entries[0] if entries else None)
    timings: dict[str, Any] = {"nvvm_s": 0.0, "link_s": 0.0, "cache": status}
    if entry is not None:
        ptx, cubin, info_log = entry.ptx, entry.cubin, entry.info_log
    else:
        module_name = label or "tylo_module"
        t = time.perf_counter()
        ptx = compile_nvvm(
            llvm_ir,
            target,
            opt_level=options.opt_level,
            options=options.nvvm_flags(),
            name=module_name,
        )
        timings["nvvm_s"] = time.perf_counter() - t
        _check_ptx(ptx, llvm_ir)
        _check_register_cap(ptx, options.max_registers, llvm_ir)
        t = time.perf_counter()
        linked = link_cubin(
            ptx,
            target,
            options=options.link_options,
            max_registers=options.max_registers,
            linker=options.linker,
            name=module_name,
        )
        timings["link_s"] = time.perf_counter() - t
        cubin, info_log = linked.cubin, linked.info_log
        if disk is not None:
            disk.put(key, _cache.CacheEntry(ptx, cubin, info_log, {"target": target.sm}))
    defined = tuple(_ENTRY_RE.findall(ptx))
    missing = [e for e in entries if e not in defined]
    if missing:
        raise CompileError(
            f"compile_ir: entry {missing[0]!r} is not a kernel of this module; it defines "
            f"{list(defined)} (mark kernels with !nvvm.annotations 'kernel')",
            ir=llvm_ir,
        )
    module = CompiledModule(
        llvm=llvm_ir,
        ptx=ptx,
        cubin=cubin,
        target=target,
        entries=entries or defined,
        resources=kernel_resources(cubin, info_log),
        timings=timings,
        info_log=info_log,
        key=key,
        name=label or (defined[0] if defined else "module"),
    )
    timings["total_s"] = time.perf_counter() - start
    evidence = os.environ.get("TYLO_EVIDENCE")
    if evidence:
        save_evidence(module, evidence)
    return module


def _check_ptx(ptx: str, llvm_ir: str) -> None:
    """Reject PTX that calls ``llvm.*`` functions: libNVVM emits unknown ``llvm.nvvm.*``
    intrinsics as external calls that only ptxas rejects (docs/toolchain.md)."""
    unknown = sorted(set(_EXTERN_LLVM_RE.findall(ptx)))
    if unknown:
        raise CompileError(
            f"libNVVM does not implement {', '.join(unknown)}: it emitted external calls "
            "that cannot be linked; express the instruction as inline PTX instead",
            ir=llvm_ir,
        )


def _check_register_cap(ptx: str, cap: int | None, llvm_ir: str) -> None:
    """``max_registers`` must hold for every entry (:func:`tylo.backend.link.register_cap_problem`):
    refused before linking, with the IR."""
    problem = register_cap_problem(ptx, cap)
    if problem is not None:
        raise CompileError(f"compile_ir: {problem}", ir=llvm_ir)


def _safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).lstrip(".")[:80] or "module"


def save_evidence(module: CompiledModule, directory: str | os.PathLike[str]) -> Path | None:
    """Write the module's stages into ``directory`` as ``<name>-<hash>.{ll,ptx,cubin,sass}``
    plus ``.resources.txt``; returns the common path prefix (None if it could not write)."""
    base = Path(directory) / f"{_safe_name(module.name)}-{module.target.sm}-{module.key[:12]}"
    files: dict[str, str | bytes] = {
        ".ll": module.llvm,
        ".ptx": module.ptx,
        ".cubin": module.cubin,
        ".resources.txt": "".join(f"{k}: {v}\n" for k, v in module.resources.items()),
    }
    try:
        files[".sass"] = module.sass
    except ToolchainError:
        pass  # nvdisasm is optional
    try:
        base.parent.mkdir(parents=True, exist_ok=True)
        for suffix, content in files.items():
            _write_atomic(Path(f"{base}{suffix}"), content)
    except OSError as err:
        warnings.warn(CompileWarning(f"TYLO_EVIDENCE: cannot write {base}.*: {err}"), stacklevel=3)
        return None
    return base


def _write_atomic(path: Path, content: str | bytes) -> None:
    data = content.encode() if isinstance(content, str) else content
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
