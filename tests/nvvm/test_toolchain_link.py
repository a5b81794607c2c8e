"""Linking PTX to cubins, resource usage, and SASS (no GPU; SASS needs nvdisasm)."""

from __future__ import annotations

import re
import subprocess
import warnings
from dataclasses import replace

import pytest
from extras import require_nvdisasm

from tylo.backend import LinkError, Resources, compile_ir, compile_nvvm, link_cubin
from tylo.backend.errors import CompileWarning, ToolchainError
from tylo.backend.link import find_ptxas
from tylo.backend.pipeline import CompileOptions
from tylo.backend.resources import (
    SYSTEM_RESERVED_SHARED_BYTES,
    _read_elf,
    cubin_entries,
    cubin_param_sizes,
    kernel_resources,
    parse_ptxas_log,
    read_cubin_resources,
)
from tylo.backend.sass import SassError, opcodes, sass_for, sass_functions
from tylo.testing import raw_param_ir, shuffle_add_ir, spill_ir, vector_add_ir

TARGETS = ["sm_80", "sm_90a"]
needs_nvdisasm = pytest.mark.usefixtures("nvdisasm")  # in the test extra: never a skip


@pytest.fixture
def nvdisasm() -> str:
    return require_nvdisasm()


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TYLO_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TYLO_EVIDENCE", raising=False)


def _summary_only(log: str) -> str:
    """The info log as some nvJitLink releases write it: without ptxas' own lines."""
    return "\n".join(line for line in log.splitlines() if not line.startswith("ptxas"))


@pytest.mark.parametrize("target", TARGETS)
def test_link_reports_resources(target: str) -> None:
    ptx = compile_nvvm(vector_add_ir(), target)
    result = link_cubin(ptx, target)
    assert result.cubin[:4] == b"\x7fELF" and result.linker in ("nvjitlink", "ptxas")
    # the log reports the kernel, in whichever form this linker release writes it
    logged = parse_ptxas_log(result.info_log)["vadd"]
    assert logged.source in ("ptxas", "nvjitlink")
    elf = read_cubin_resources(result.cubin)["vadd"]
    assert 0 < logged.registers <= 255 and logged.registers == elf.registers
    assert logged.spill_stores == 0 and logged.spill_loads == 0 and logged.spills is False
    assert (
        (logged.shared_bytes, logged.stack_bytes) == (0, 0) == (elf.shared_bytes, elf.stack_bytes)
    )
    assert elf.spill_stores is None and elf.spills is None and elf.source == "elf"
    assert cubin_entries(result.cubin) == ("vadd",)
    assert kernel_resources(result.cubin, _summary_only(result.info_log))["vadd"] == replace(
        logged, barriers=None, source="nvjitlink"
    )


def test_bad_ptx_raises_link_error_with_log() -> None:
    ptx = compile_nvvm(vector_add_ir(), "sm_90a").replace("st.global.f32", "st.global.f99")
    with pytest.raises(LinkError) as info:
        link_cubin(ptx, "sm_90a", name="broken")
    assert "'broken'" in str(info.value) and "sm_90a" in str(info.value)
    assert info.value.log and info.value.log in str(info.value) and info.value.ptx == ptx


def test_link_argument_errors() -> None:
    ptx = compile_nvvm(vector_add_ir(), "sm_90a")
    with pytest.raises(LinkError, match="linker must be"):
        link_cubin(ptx, "sm_90a", linker="ld")
    with pytest.raises(LinkError, match="max_registers 300"):
        link_cubin(ptx, "sm_90a", max_registers=300)


def test_wgmma_ptx_for_non_a_target_fails_at_link() -> None:
    ptx = compile_nvvm(vector_add_ir(), "sm_90a").replace(
        "ret;", "wgmma.fence.sync.aligned;\n\tret;"
    )
    link_cubin(ptx, "sm_90a")
    with pytest.raises(LinkError):
        link_cubin(ptx.replace(".target sm_90a", ".target sm_90"), "sm_90")


def _spill_resources(r: Resources, f: Resources) -> None:
    """What a capped (r) and a free (f) compile of spill_ir() must report, from any log
    form; each is judged by its own log (two links in one run can log differently: the
    H200's nvJitLink sometimes leaves ptxas' lines out under parallel links)."""
    assert r.registers <= 24 < f.registers
    for x, capped in ((r, True), (f, False)):
        if x.source == "ptxas":  # only ptxas' own lines count spills and barriers
            assert x.barriers == 1
            if capped:
                assert x.spill_stores > 0 and x.spill_loads > 0 and x.spills is True
            else:
                assert x.spills is False
        else:
            assert x.barriers is None
            assert x.spills is None if capped else x.spills in (False, None)
    assert r.shared_bytes == f.shared_bytes == 1024  # the 256-float tile, without reserved smem
    assert r.stack_bytes > f.stack_bytes >= 256  # 64-float local array (+ spill slots)


@pytest.mark.parametrize("target", TARGETS)
def test_spills_static_shared_and_stack(target: str) -> None:
    capped = compile_ir(spill_ir(), target, options=CompileOptions(max_registers=24))
    free = compile_ir(spill_ir(), target)
    r, f = capped.resources["spill"], free.resources["spill"]
    _spill_resources(r, f)
    elf = read_cubin_resources(capped.cubin)["spill"]
    assert (elf.registers, elf.shared_bytes, elf.stack_bytes) == (
        r.registers,
        r.shared_bytes,
        r.stack_bytes,
    )
    spills = "spills unknown" if r.spills is None else f"spills {r.spill_stores}/{r.spill_loads} B"
    assert str(r) == f"registers {r.registers}, shared 1024 B, {spills}, stack {r.stack_bytes} B"
    # the same numbers when the linker writes only its own summary
    _spill_resources(
        *(kernel_resources(m.cubin, _summary_only(m.info_log))["spill"] for m in (capped, free))
    )


def _without_reserved_cap(cubin: bytes) -> bytes:
    """The cubin as CUDA 13.0 writes it: the reserved block marked, its size not named."""
    name = b".nv.reservedSmem.cap\0"
    return cubin.replace(name, b".nv.reservedSmem.xyz\0") if name in cubin else cubin


@pytest.mark.parametrize("target", TARGETS)
def test_static_shared_memory_leaves_the_reserved_block_out(target: str) -> None:
    m = compile_ir(spill_ir(), target)
    section = next(s for s in _read_elf(m.cubin)[0] if s.name == ".nv.shared.spill")
    reserved = section.size - 1024
    # sm_80 cubins hold the tile alone; sm_90 and newer add the system's block
    assert reserved == (0 if target == "sm_80" else SYSTEM_RESERVED_SHARED_BYTES)
    for cubin in (m.cubin, _without_reserved_cap(m.cubin)):
        assert read_cubin_resources(cubin)["spill"].shared_bytes == 1024
        assert kernel_resources(cubin, _summary_only(m.info_log))["spill"].shared_bytes == 1024
    if target != "sm_80":  # nvJitLink's summary counts the block, the result does not
        summary = parse_ptxas_log(_summary_only(m.info_log))["spill"]
        assert summary.shared_bytes in (1024, 1024 + reserved)


_PTX_PARAM_RE = re.compile(r"\.param\s+(?:\.align\s+\d+\s+)?\.(\w+)\s+\w+(?:\[(\d+)\])?")
_PTX_TYPE_BYTES = {"b8": 1, "u8": 1, "s8": 1, "b16": 2, "u16": 2, "s16": 2, "f16": 2}
_PTX_TYPE_BYTES |= {t: 4 for t in ("b32", "u32", "s32", "f32")}
_PTX_TYPE_BYTES |= {t: 8 for t in ("b64", "u64", "s64", "f64")}


def _ptx_param_sizes(ptx: str, entry: str) -> tuple[int, ...]:
    """Parameter sizes as the PTX ``.entry`` declares them (an independent reading)."""
    m = re.search(rf"\.entry\s+{entry}\s*\((.*?)\)", ptx, re.DOTALL)
    assert m, f"no .entry {entry} in the PTX"
    return tuple(
        _PTX_TYPE_BYTES[kind] * int(count or 1) for kind, count in _PTX_PARAM_RE.findall(m[1])
    )


@pytest.mark.parametrize("target", TARGETS)
def test_cubin_param_sizes_match_the_ptx_declarations(target: str) -> None:
    kernels = [vector_add_ir(), spill_ir(), shuffle_add_ir(), raw_param_ir()]
    kernels += [raw_param_ir(name="raw3", size=3), raw_param_ir(name="map128", size=128)]
    for ir in kernels:
        m = compile_ir(ir, target)
        got = cubin_param_sizes(m.cubin)
        assert set(got) == set(m.entries) and got  # every entry, nothing else
        for entry, sizes in got.items():
            assert sizes == _ptx_param_sizes(m.ptx, entry), entry


def test_resources_fall_back_to_the_cubin() -> None:
    m = compile_ir(vector_add_ir(), "sm_90a")
    only_elf = kernel_resources(m.cubin, "")
    assert only_elf["vadd"].source == "elf" and only_elf["vadd"].registers > 0
    assert kernel_resources(b"not an elf", m.info_log) == parse_ptxas_log(m.info_log)
    assert str(only_elf["vadd"]).endswith("spills unknown, stack 0 B")


def test_parse_ptxas_log_formats() -> None:
    log = (
        "ptxas info    : 0 bytes gmem\n"
        "ptxas info    : Compiling entry function 'k1' for 'sm_80'\n"
        "ptxas info    : Function properties for k1\n"
        "ptxas         .     16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads\n"
        "ptxas info    : Used 40 registers, used 1 barriers, 2048 bytes smem, 380 bytes cmem[0]\n"
        "ptxas info    : Compiling entry function 'k2' for 'sm_80'\n"
        "ptxas info    : Function properties for k2\n"
        "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
        "ptxas info    : Used 8 registers, 356 bytes cmem[0]\n"
        "info    : used 99 registers, 4096 bytes smem\n"
        "ptxas info    : Compiling entry function 'k3' for 'sm_90a'\n"
        "ptxas info    : Function properties for k3\n"
        "    768 bytes stack frame, 484 bytes spill stores, 572 bytes spill loads\n"
        "ptxas info    : Used 24 registers, used 1 barriers, 768 bytes cumulative stack size, "
        "1024 bytes smem"
    )
    got = parse_ptxas_log(log)
    assert got["k1"] == Resources(40, 2048, 8, 4, 16, 1)
    assert got["k2"] == Resources(8, 0, 0, 0, 0, None)
    assert got["k3"] == Resources(24, 1024, 484, 572, 768, 1)
    assert parse_ptxas_log("") == {}


def test_parse_nvjitlink_summary_when_ptxas_lines_are_missing() -> None:
    log = (
        "info    : 0 bytes gmem\n"
        "info    : Function properties for 'k':\n"
        "info    : used 24 registers, used 5 barriers, 0 stack, 0 bytes smem, "
        "592 bytes cmem[0], 0 bytes lmem\n"
        "info    : Function properties for 'spilly':\n"
        "info    : used 255 registers, used 1 barriers, 64 stack, 1024 bytes smem, "
        "592 bytes cmem[0], 64 bytes lmem\n"
        "ptxas info    : Compiling entry function 'both' for 'sm_90a'\n"
        "ptxas info    : Function properties for both\n"
        "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
        "ptxas info    : Used 8 registers, used 0 barriers\n"
        "info    : Function properties for 'both':\n"
        "info    : used 8 registers, used 5 barriers, 0 stack, 0 bytes smem, "
        "592 bytes cmem[0], 0 bytes lmem"
    )
    got = parse_ptxas_log(log)
    assert got["k"] == Resources(24, 0, 0, 0, 0, None, source="nvjitlink")
    assert got["spilly"].spill_stores is None and got["spilly"].stack_bytes == 64
    assert got["both"].source == "ptxas" and got["both"].barriers == 0


def _ptxas_release(ptxas: str) -> tuple[int, int]:
    out = subprocess.run([ptxas, "--version"], capture_output=True, text=True, check=False).stdout
    m = re.search(r"release (\d+)\.(\d+)", out)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def _readable_by(ptx: str, ptxas_minor: int) -> str:
    """Lower the PTX ISA version for an older CUDA 13 ptxas (reads up to PTX 9.<minor>);
    the test kernels use nothing newer than PTX 9.0."""
    have = tuple(int(v) for v in re.search(r"^\.version (\d+)\.(\d+)", ptx, re.MULTILINE).groups())
    isa = min(have, (9, ptxas_minor))
    return re.sub(r"^\.version \d+\.\d+", f".version {isa[0]}.{isa[1]}", ptx, flags=re.MULTILINE)


@pytest.mark.skipif(find_ptxas() is None, reason="needs ptxas (found: none)")
def test_ptxas_fallback() -> None:
    ptxas = find_ptxas()
    major, minor = _ptxas_release(ptxas)
    if major < 13:
        pytest.skip(f"needs ptxas from CUDA 13 (found: {major}.{minor} at {ptxas})")
    ptx = _readable_by(compile_nvvm(vector_add_ir(), "sm_90a"), minor)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        result = link_cubin(ptx, "sm_90a", linker="ptxas", options=["-Xptxas=-O3"])
    assert result.linker == "ptxas" and result.cubin[:4] == b"\x7fELF"
    via_ptxas = parse_ptxas_log(result.info_log)["vadd"]
    assert via_ptxas.registers == read_cubin_resources(result.cubin)["vadd"].registers > 0
    spill_ptx = _readable_by(compile_nvvm(spill_ir(), "sm_90a"), minor)
    capped = link_cubin(spill_ptx, "sm_90a", linker="ptxas", max_registers=24)
    spilled = parse_ptxas_log(capped.info_log)["spill"]
    assert spilled.registers <= 24 and spilled.spill_stores > 0 and spilled.stack_bytes > 0
    with pytest.raises(LinkError, match="ptxas"):
        link_cubin(ptx.replace("st.global.f32", "st.global.f99"), "sm_90a", linker="ptxas")


@needs_nvdisasm
@pytest.mark.parametrize("target", TARGETS)
def test_sass_of_vector_add(target: str) -> None:
    m = compile_ir(vector_add_ir(), target)
    sass = m.sass
    assert m.stage("sass") is sass  # memoized
    ops = opcodes(m.sass_for("vadd"))
    assert any(op.startswith("LDG") for op in ops) and any(op.startswith("STG") for op in ops)
    assert any(op.startswith("FADD") for op in ops) and "EXIT" in ops


@needs_nvdisasm
@pytest.mark.parametrize("target", TARGETS)
def test_sass_for_leaves_linker_helpers_out(target: str) -> None:
    m = compile_ir(shuffle_add_ir(), target)
    functions = sass_functions(m.sass)
    assert "shfl_add" in functions
    own = sass_for(m.cubin, "shfl_add")
    assert "SHFL.BFLY" in own and own == functions["shfl_add"]
    helpers = [name for name in functions if name != "shfl_add"]
    if target == "sm_80":  # nvJitLink's unused shuffle helper (docs/toolchain.md)
        assert helpers and all("SHFL" in functions[h] for h in helpers)
    for h in helpers:
        assert functions[h] not in own
    with pytest.raises(SassError, match=r"no function 'nope'.*shfl_add"):
        sass_for(m.sass, "nope")


def test_missing_nvdisasm_names_the_package(monkeypatch) -> None:
    from tylo.backend import sass

    monkeypatch.setattr(sass, "find_nvdisasm", lambda: None)
    with pytest.raises(ToolchainError, match="pip install nvidia-cuda-nvdisasm"):
        sass.disassemble(b"\x7fELF")


def test_missing_linker_names_the_package(monkeypatch) -> None:
    from tylo.backend import link

    monkeypatch.setattr(link, "_load_nvjitlink", lambda: None)
    monkeypatch.setattr(link, "find_ptxas", lambda: None)
    with pytest.raises(ToolchainError, match="pip install nvidia-nvjitlink"):
        link.link_cubin(".version 9.0", "sm_90a")
    with pytest.raises(ToolchainError, match="pip install nvidia-cuda-nvcc"):
        link.link_cubin(".version 9.0", "sm_90a", linker="ptxas")
