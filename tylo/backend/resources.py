"""Per-kernel resource usage: registers, shared memory, spills, stack.

Two sources, both without any external tool:

* the ptxas report in the linker's info log (links run with ``-verbose``):
  ``Used 40 registers, used 1 barriers, 1024 bytes smem`` and
  ``768 bytes stack frame, 484 bytes spill stores, 572 bytes spill loads``;
* the cubin itself, an ELF file: the ``.nv.info`` section's ``EIATTR_REGCOUNT`` and
  ``EIATTR_FRAME_SIZE`` attributes per function, and the size of ``.nv.shared.<kernel>``.

:func:`kernel_resources` lists the kernel entries from the cubin and fills each from the
log when it reports the kernel (that is the only source of spill counts), else from the
ELF attributes. Registers come from the ELF when present: it is the artifact that runs.

Linker releases differ in what they write, and both forms are read (docs/toolchain.md: CUDA
13.0 on the H200 machine, 13.5 from the wheels): nvJitLink may leave out ptxas' lines and
give only its own summary, whose shared-memory figure includes the block the system
reserves on sm_90 and newer; and a 13.5 cubin names that block's size
(``.nv.reservedSmem.cap``) where a 13.0 cubin only marks that it is there
(``.nv.reservedSmem.offset0``). ``shared_bytes`` is always the kernel's own static shared
memory, without the reserved block.

:func:`cubin_param_sizes` reads each kernel's parameter sizes from the same ELF
(``EIATTR_KPARAM_INFO``), so a launch can check its arguments without asking the driver.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, replace

__all__ = [
    "SYSTEM_RESERVED_SHARED_BYTES",
    "CubinFormatError",
    "Resources",
    "cubin_entries",
    "cubin_param_sizes",
    "kernel_resources",
    "parse_ptxas_log",
    "read_cubin_resources",
]

# ELF constants (System V gABI) and NVIDIA's extensions.
_ELF_MAGIC = b"\x7fELF"
_SHT_SYMTAB = 2
_SHT_NOBITS = 8
_STT_FUNC = 2
_STO_CUDA_ENTRY = 0x10  # st_other bit of kernel entry points
# .nv.info attribute records: u8 format, u8 attribute, u16 size-or-value, then a payload
# when the format is EIFMT_SVAL. Attribute numbers as printed by `cuobjdump -elf`.
_EIFMT_SVAL = 0x04
EIATTR_FRAME_SIZE = 0x11
EIATTR_REGCOUNT = 0x2F
# per kernel (.nv.info.<kernel>): the parameter block's constant-bank slot (u32 symbol,
# u16 offset, u16 size) and one record per parameter (u32 index, u16 ordinal, u16 offset,
# u32 whose bits 18..31 are the size in bytes)
EIATTR_PARAM_CBANK = 0x0A
EIATTR_KPARAM_INFO = 0x17
_RESERVED_SMEM_CAP = ".nv.reservedSmem.cap"
_RESERVED_SMEM_PREFIX = ".nv.reservedSmem."
# Shared memory the system reserves per block on sm_80 and newer (CUDA C++ Programming
# Guide, "Features and Technical Specifications": 1 KB;
# CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK). On sm_90 and newer a kernel's
# .nv.shared section includes it; a cubin that marks the block without giving its size
# (.nv.reservedSmem.offset0, no .nv.reservedSmem.cap: CUDA 13.0) holds this much.
SYSTEM_RESERVED_SHARED_BYTES = 1024


class CubinFormatError(ValueError):
    """The bytes are not a cubin this module can read (internal; callers fall back)."""


@dataclass(frozen=True)
class Resources:
    """Resource usage of one kernel; byte counts per thread except ``shared_bytes``.

    ``spill_stores``/``spill_loads`` are None when only the cubin was available (the ELF
    does not record spills). ``source`` says where the numbers came from.

    >>> str(Resources(registers=40, shared_bytes=0))
    'registers 40, shared 0 B, spills 0/0 B, stack 0 B'
    """

    registers: int
    shared_bytes: int
    spill_stores: int | None = 0
    spill_loads: int | None = 0
    stack_bytes: int = 0
    barriers: int | None = None
    source: str = "ptxas"

    @property
    def spills(self) -> bool | None:
        """True if the kernel spills registers to local memory (None if unknown)."""
        if self.spill_stores is None or self.spill_loads is None:
            return None
        return bool(self.spill_stores or self.spill_loads)

    def __str__(self) -> str:
        if self.spill_stores is None or self.spill_loads is None:
            spills = "spills unknown"
        else:
            spills = f"spills {self.spill_stores}/{self.spill_loads} B"
        return (
            f"registers {self.registers}, shared {self.shared_bytes} B, {spills}, "
            f"stack {self.stack_bytes} B"
        )


_COMPILING_RE = re.compile(r"Compiling entry function '([^']+)'")
_PROPERTIES_RE = re.compile(r"Function properties for '?([^'\s]+)'?")
_FRAME_RE = re.compile(
    r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads"
)
_USED_RE = re.compile(r"Used (\d+) registers")
_BARRIERS_RE = re.compile(r"used (\d+) barriers")
_SMEM_RE = re.compile(r"(\d+) bytes smem")
# nvJitLink's own summary: "info    : used 24 registers, used 5 barriers, 0 stack,
# 0 bytes smem, 592 bytes cmem[0], 0 bytes lmem"
_NVJL_USED_RE = re.compile(
    r"used (\d+) registers,.*?(\d+) stack, (\d+) bytes smem,.*?(\d+) bytes lmem"
)


def parse_ptxas_log(log: str) -> dict[str, Resources]:
    """Resources of every entry the ptxas report in ``log`` describes.

    Reads ptxas' lines as nvJitLink relays them (``ptxas info    : ...``) and as ptxas
    prints them itself (the stack/spill line indented, without prefix). nvJitLink's own
    ``info    :`` summary is used only for an entry ptxas' lines do not report (nvJitLink
    sometimes leaves them out): it gives registers, stack and local memory but no spill
    counts, so spills are 0 when the entry uses no local memory at all and unknown
    otherwise, its barrier count includes the system's, and its shared-memory figure
    includes the system-reserved block on sm_90 and newer (:func:`kernel_resources`
    takes shared memory from the cubin instead).
    """
    found: dict[str, Resources] = {}
    frames: dict[str, tuple[int, int, int]] = {}
    summaries: dict[str, Resources] = {}
    entry = props = summary = None
    for line in log.splitlines():
        if line.lstrip().startswith("info"):
            if m := _PROPERTIES_RE.search(line):
                summary = m.group(1)
            elif summary is not None and (m := _NVJL_USED_RE.search(line)):
                regs, stack, smem, lmem = (int(g) for g in m.groups())
                no_local = stack == 0 and lmem == 0  # then nothing can have spilled
                summaries[summary] = Resources(
                    registers=regs,
                    shared_bytes=smem,
                    spill_stores=0 if no_local else None,
                    spill_loads=0 if no_local else None,
                    stack_bytes=stack,
                    barriers=None,  # counts the system's barriers too
                    source="nvjitlink",
                )
                summary = None
            continue
        if m := _COMPILING_RE.search(line):
            entry = m.group(1)
        elif m := _PROPERTIES_RE.search(line):
            props = m.group(1)
        elif (m := _FRAME_RE.search(line)) and props is not None:
            frames[props] = (int(m.group(1)), int(m.group(2)), int(m.group(3)))
        elif (m := _USED_RE.search(line)) and entry is not None:
            barriers = _BARRIERS_RE.search(line)
            smem = _SMEM_RE.search(line)
            stack, stores, loads = frames.get(entry, (0, 0, 0))
            found[entry] = Resources(
                registers=int(m.group(1)),
                shared_bytes=int(smem.group(1)) if smem else 0,
                spill_stores=stores,
                spill_loads=loads,
                stack_bytes=stack,
                barriers=int(barriers.group(1)) if barriers else None,
                source="ptxas",
            )
            entry = None
    for name, res in summaries.items():
        found.setdefault(name, res)
    return found


@dataclass(frozen=True)
class _Section:
    name: str
    type: int
    offset: int
    size: int
    link: int
    info: int


def _read_elf(cubin: bytes) -> tuple[list[_Section], list[tuple[str, int, int, int, int]]]:
    """(sections, symbols as (name, info, other, shndx, value)) of a 64-bit little-endian ELF."""
    if len(cubin) < 64 or cubin[:4] != _ELF_MAGIC or cubin[4] != 2 or cubin[5] != 1:
        raise CubinFormatError("not a 64-bit little-endian ELF image")
    try:
        (shoff,) = struct.unpack_from("<Q", cubin, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
        raw = [
            struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * shentsize) for i in range(shnum)
        ]
        strtab = raw[shstrndx]

        def cstr(table_offset: int, offset: int) -> str:
            start = table_offset + offset
            return cubin[start : cubin.index(b"\0", start)].decode(errors="replace")

        sections = [_Section(cstr(strtab[4], r[0]), r[1], r[4], r[5], r[6], r[7]) for r in raw]
        symbols = []
        for sec in sections:
            if sec.type != _SHT_SYMTAB:
                continue
            names = sections[sec.link]
            for j in range(sec.size // 24):
                n, info, other, shndx, value, _ = struct.unpack_from(
                    "<IBBHQQ", cubin, sec.offset + j * 24
                )
                symbols.append((cstr(names.offset, n), info, other, shndx, value))
    except (struct.error, IndexError, ValueError) as err:
        raise CubinFormatError(f"malformed ELF: {err}") from None
    return sections, symbols


def cubin_entries(cubin: bytes) -> tuple[str, ...]:
    """Names of the kernel entry points in a cubin (helper functions excluded)."""
    _, symbols = _read_elf(cubin)
    return tuple(
        name
        for name, info, other, _, _ in symbols
        if info & 0xF == _STT_FUNC and other & _STO_CUDA_ENTRY
    )


def read_cubin_resources(cubin: bytes) -> dict[str, Resources]:
    """Registers, stack and static shared memory of each entry, from the cubin's ELF."""
    sections, symbols = _read_elf(cubin)
    entries = [
        name
        for name, info, other, _, _ in symbols
        if info & 0xF == _STT_FUNC and other & _STO_CUDA_ENTRY
    ]
    regs: dict[str, int] = {}
    frame: dict[str, int] = {}
    for sec in sections:
        if sec.name != ".nv.info":
            continue
        pos, end = sec.offset, sec.offset + sec.size
        while pos + 4 <= end:
            fmt, attr, size = struct.unpack_from("<BBH", cubin, pos)
            pos += 4
            if fmt != _EIFMT_SVAL:
                continue
            if attr in (EIATTR_REGCOUNT, EIATTR_FRAME_SIZE) and size == 8:
                sym, value = struct.unpack_from("<II", cubin, pos)
                if sym < len(symbols):
                    target = regs if attr == EIATTR_REGCOUNT else frame
                    target[symbols[sym][0]] = value
            pos += size
    reserved = _reserved_shared_bytes(symbols)
    out = {}
    for name in entries:
        text = next((s for s in sections if s.name == f".text.{name}"), None)
        registers = regs.get(name, (text.info >> 24) if text is not None else 0)
        shared = next((s.size for s in sections if s.name == f".nv.shared.{name}"), 0)
        if shared and reserved:  # sm_90+: the section includes the system-reserved block
            shared = max(shared - reserved, 0)
        out[name] = Resources(
            registers=registers,
            shared_bytes=shared,
            spill_stores=None,
            spill_loads=None,
            stack_bytes=frame.get(name, 0),
            barriers=None,
            source="elf",
        )
    return out


def _reserved_shared_bytes(symbols: list[tuple[str, int, int, int, int]]) -> int:
    """Bytes of the system-reserved block included in each .nv.shared section: the size
    the cubin names, else the documented size when the cubin only marks the block."""
    names = {name: value for name, _, _, _, value in symbols}
    if _RESERVED_SMEM_CAP in names:
        return names[_RESERVED_SMEM_CAP]
    if any(name.startswith(_RESERVED_SMEM_PREFIX) for name in names):
        return SYSTEM_RESERVED_SHARED_BYTES
    return 0


def cubin_param_sizes(cubin: bytes) -> dict[str, tuple[int, ...]]:
    """The byte size of every parameter of every kernel entry in ``cubin``, in order:
    what ``cuFuncGetParamInfo`` reports for indices ``0 .. count - 1``, read from the
    ELF's ``EIATTR_KPARAM_INFO`` records without a driver.

    An entry whose records are incomplete, or do not end where its parameter block
    (``EIATTR_PARAM_CBANK``) ends, is left out: its sizes are unknown, never guessed. Raises
    :class:`CubinFormatError` when ``cubin`` is not an ELF image this module can read.
    """
    sections, symbols = _read_elf(cubin)
    entries = {
        name
        for name, info, other, _, _ in symbols
        if info & 0xF == _STT_FUNC and other & _STO_CUDA_ENTRY
    }
    out: dict[str, tuple[int, ...]] = {}
    for sec in sections:
        name = sec.name.removeprefix(".nv.info.")
        if name == sec.name or name not in entries:
            continue
        params: dict[int, tuple[int, int]] = {}  # ordinal -> (offset, size)
        block: int | None = None
        pos, end = sec.offset, min(sec.offset + sec.size, len(cubin))
        try:
            while pos + 4 <= end:
                fmt, attr, size = struct.unpack_from("<BBH", cubin, pos)
                pos += 4
                if fmt != _EIFMT_SVAL:
                    continue
                if attr == EIATTR_KPARAM_INFO and size >= 12:
                    _, ordinal, offset, bits = struct.unpack_from("<IHHI", cubin, pos)
                    params[ordinal] = (offset, (bits >> 18) & 0x3FFF)
                elif attr == EIATTR_PARAM_CBANK and size >= 8:
                    (block,) = struct.unpack_from("<H", cubin, pos + 6)
                pos += size
        except struct.error:
            continue
        if sorted(params) != list(range(len(params))):
            continue  # a parameter without its record: unknown
        sizes = tuple(params[i][1] for i in range(len(params)))
        extent = max((o + n for o, n in params.values()), default=0)
        if extent != (block or 0):
            continue  # the records do not end where the parameter block ends: unknown
        out[name] = sizes
    return out


def kernel_resources(cubin: bytes, info_log: str = "") -> dict[str, Resources]:
    """Resources of every kernel entry in ``cubin``, combining the ptxas report in
    ``info_log`` (spills, barriers, shared) with the cubin's own attributes (registers).
    Falls back to the log alone if the cubin cannot be read."""
    logged = parse_ptxas_log(info_log)
    try:
        from_elf = read_cubin_resources(cubin)
    except CubinFormatError:
        return logged
    out = {}
    for name, elf in from_elf.items():
        log = logged.get(name)
        if log is None:
            out[name] = elf
        elif log.source == "nvjitlink":  # its shared figure includes the reserved block
            out[name] = replace(
                log, registers=elf.registers or log.registers, shared_bytes=elf.shared_bytes
            )
        else:
            out[name] = replace(log, registers=elf.registers or log.registers)
    return out


_SETMAXNREG_RE = re.compile(r"setmaxnreg\.(inc|dec)\.sync\.aligned\.u32\s+(\d+)")


def register_split(ptx: str, sass: str | None = None) -> str | None:
    """How a warp-specialized kernel splits the register file (``setmaxnreg``, PTX ISA
    9.7.19.1), read from its PTX: one phrase per distinct request, in program order, with
    how many places in the code make it (a warpgroup role each, in a warp-specialized
    kernel: the producer gives, the consumers take); None if the kernel makes none. With ``sass``,
    also whether the
    linker kept them (``USETMAXREG``: nvJitLink's relocatable path drops them, ptxas note
    C7504).

    >>> ptx = "setmaxnreg.dec.sync.aligned.u32 40;\\n"
    >>> ptx += "setmaxnreg.inc.sync.aligned.u32 232;\\n" * 2
    >>> register_split(ptx, sass="USETMAXREG.DEALLOC ... USETMAXREG.TRY_ALLOC ... x2")
    ... # doctest: +NORMALIZE_WHITESPACE
    'setmaxnreg: dec to 40 (1 place), inc to 232 (2 places) (the warpgroups that run a dec give
    registers to those that run an inc); kept in SASS'
    """
    found: dict[tuple[str, int], int] = {}
    for op, n in _SETMAXNREG_RE.findall(ptx):
        key = (op, int(n))
        found[key] = found.get(key, 0) + 1
    if not found:
        return None
    parts = []
    for (op, n), count in sorted(found.items(), key=lambda kv: kv[0][0] != "dec"):
        parts.append(f"{op} to {n} ({count} place{'s' if count > 1 else ''})")
    line = "setmaxnreg: " + ", ".join(parts)
    if {op for op, _ in found} == {"dec", "inc"}:
        line += " (the warpgroups that run a dec give registers to those that run an inc)"
    if sass is not None:
        line += (
            "; kept in SASS"
            if "USETMAXREG" in sass
            else (
                "; dropped by the linker (no USETMAXREG in SASS: every warp keeps the entry count)"
            )
        )
    return line
