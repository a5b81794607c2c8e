"""libNVVM and the whole pipeline on hand-written NVVM IR, for sm_80 and sm_90a (no GPU)."""

from __future__ import annotations

import re
import warnings

import pytest

from tylo.backend import CompileError, CompileOptions, compile_ir, compile_nvvm, nvvm_version
from tylo.backend.errors import CompileWarning
from tylo.backend.pipeline import STAGES
from tylo.target import Target
from tylo.testing import add_scaled_ir, shuffle_add_ir, vector_add_ir

TARGETS = ["sm_80", "sm_90a"]


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TYLO_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TYLO_EVIDENCE", raising=False)


@pytest.mark.parametrize("target", TARGETS)
def test_vector_add_ptx(target: str) -> None:
    ptx = compile_nvvm(vector_add_ir(), target)
    assert re.search(rf"^\.target {target}$", ptx, re.MULTILINE)
    assert re.search(r"\.visible \.entry vadd\(", ptx)
    assert ptx.count(".param .u64") == 3 and ptx.count(".param .u32") == 1
    assert re.search(r"ld\.global(\.nc)?\.f32", ptx) and "st.global.f32" in ptx
    assert re.search(r"\badd(\.rn)?\.f32\b", ptx)
    assert ".extern .func llvm." not in ptx
    assert "\0" not in ptx


@pytest.mark.parametrize("target", TARGETS)
def test_inline_ptx_is_kept(target: str) -> None:
    ptx = compile_nvvm(shuffle_add_ir(), Target.parse(target))
    asm_blocks = re.findall(r"// begin inline asm\n(.*?)// end inline asm", ptx, re.DOTALL)
    body = "".join(asm_blocks)
    assert re.search(r"shfl\.sync\.bfly\.b32 %f\d+, %f\d+, 1, 0x1f, 0xffffffff;", body)
    assert re.search(r"add\.f32 %f\d+, %f\d+, %f\d+;", body)


def test_opt_level_and_flags_reach_libnvvm() -> None:
    fast = compile_nvvm(add_scaled_ir(), "sm_90a", options=("-ftz=1",))
    exact = compile_nvvm(add_scaled_ir(), "sm_90a")
    assert ".ftz.f32" in fast and ".ftz.f32" not in exact
    unoptimized = compile_nvvm(vector_add_ir(), "sm_90a", opt_level=0)
    assert unoptimized != compile_nvvm(vector_add_ir(), "sm_90a")
    with pytest.raises(CompileError, match="opt_level must be 0 or 3"):
        compile_nvvm(vector_add_ir(), "sm_90a", opt_level=2)


def test_bad_ir_raises_compile_error_with_log() -> None:
    bad = vector_add_ir().replace("ret void", "ret i32 0")
    with pytest.raises(CompileError) as info:
        compile_nvvm(bad, "sm_90a", name="broken")
    err = info.value
    assert "verifying" in str(err) and "'broken'" in str(err) and "compute_90a" in str(err)
    assert err.log and "doesn't match function result type" in err.log
    assert err.log in str(err) and err.ir == bad


def test_missing_version_metadata_is_a_compile_error() -> None:
    ir = re.sub(r"!nvvmir\.version.*\n", "", vector_add_ir())
    with pytest.raises(CompileError) as info:
        compile_nvvm(ir, "sm_80")
    assert info.value.log or "nvvm" in str(info.value).lower()


def test_unknown_intrinsic_is_caught_before_linking() -> None:
    ir = vector_add_ir().replace("llvm.nvvm.read.ptx.sreg.tid.x", "llvm.nvvm.made.up")
    ptx = compile_nvvm(ir, "sm_90a")
    assert ".extern .func" in ptx  # libNVVM lets it through ...
    with pytest.raises(CompileError, match=r"does not implement llvm\.nvvm\.made\.up.*inline PTX"):
        compile_ir(ir, "sm_90a")  # ... the pipeline does not


@pytest.mark.parametrize("target", TARGETS)
def test_compile_ir_keeps_every_stage(target: str) -> None:
    ir = vector_add_ir()
    m = compile_ir(ir, target, entries=("vadd",))
    assert m.target == Target.parse(target) and m.entries == ("vadd",) and m.name == "vadd"
    assert m.llvm == ir and m.stage("llvm") == ir
    assert m.stage("ptx") == m.ptx and ".entry vadd" in m.ptx
    assert m.stage("cubin") == m.cubin and m.cubin[:4] == b"\x7fELF"
    assert set(m.timings) >= {"nvvm_s", "link_s", "total_s", "cache"}
    assert m.timings["cache"] == "miss" and m.timings["nvvm_s"] > 0 and m.timings["link_s"] > 0
    assert set(m.resources) == {"vadd"} and m.resources["vadd"].registers > 0
    assert "vadd" in repr(m) and target in repr(m)
    with pytest.raises(CompileError, match="unknown stage 'sass2'"):
        m.stage("sass2")
    assert STAGES == ("llvm", "ptx", "cubin", "sass")


def test_entries_are_discovered_and_checked() -> None:
    m = compile_ir(vector_add_ir("first"), "sm_90a")
    assert m.entries == ("first",) and m.name == "first"
    with pytest.raises(CompileError, match=r"entry 'second' is not a kernel.*\['first'\]"):
        compile_ir(vector_add_ir("first"), "sm_90a", entries=("second",))
    assert compile_ir(vector_add_ir("first"), "sm_90a", entries="first").entries == ("first",)


def test_compile_options() -> None:
    o = CompileOptions(ftz=True, max_registers=32, link_options=["-lineinfo"])
    assert o.link_options == ("-lineinfo",) and "-ftz=1" in o.nvvm_flags()
    assert o.canonical() != CompileOptions().canonical()
    assert hash(o) == hash(CompileOptions(ftz=True, max_registers=32, link_options=("-lineinfo",)))
    for bad in (
        {"opt_level": 1},
        {"max_registers": 8},
        {"nvvm_options": "-ftz=1"},
        {"linker": "lld"},
    ):
        with pytest.raises(CompileError, match="CompileOptions"):
            CompileOptions(**bad)
    with pytest.raises(CompileError, match="options must be CompileOptions"):
        compile_ir(vector_add_ir(), "sm_90a", options={"ftz": True})  # type: ignore[arg-type]


def test_a_target_string_is_validated() -> None:
    from tylo.target import TargetError

    with pytest.raises(TargetError):
        compile_ir(vector_add_ir(), "sm_91z")


def test_clean_compile_emits_no_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        compile_ir(vector_add_ir(), "sm_90a", use_cache=False)


def test_nvvm_version_tells_releases_apart() -> None:
    v = nvvm_version()
    assert re.fullmatch(r"\d+\.\d+\.\d+", v.release), v
    assert re.fullmatch(r"\d+\.\d+", v.ptx_isa), v
    assert v.version >= (2, 0) and len(v.ir_version) == 4
    assert v.library and "libnvvm" in v.library.lower()
    assert v.release in str(v) and nvvm_version() is v
    ptx = compile_nvvm(vector_add_ir(), "sm_80")
    assert f".version {v.ptx_isa}" in ptx and f"V{v.release}" in ptx


def test_missing_libnvvm_names_the_package(monkeypatch) -> None:
    from cuda import pathfinder

    from tylo.backend import nvvm
    from tylo.backend.errors import ToolchainError

    def not_found(name: str):
        raise RuntimeError(f"no {name} anywhere")  # what cuda.pathfinder raises derives from it

    monkeypatch.setattr(nvvm, "_loaded", None)
    monkeypatch.setattr(pathfinder, "load_nvidia_dynamic_lib", not_found)
    with pytest.raises(ToolchainError, match=r"pip install nvidia-nvvm.*no nvvm anywhere"):
        compile_nvvm(vector_add_ir(), "sm_80")
