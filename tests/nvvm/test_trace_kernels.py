"""Traced kernels compiled without a GPU for sm_80 and sm_90a: the PTX holds the intended
instructions (vector loads, shuffles, barriers, inline asm) and no calls to unknown
``llvm.*`` functions; the SASS shows the loads, stores and shuffles; the compile-only
object exposes every stage, resources and timings."""

from __future__ import annotations

import pytest

import tylo
from tylo.layouts import Layout

TARGETS = ("sm_80", "sm_90a")
F32 = tylo.f32


@tylo.kernel
def tile_kernel(out: tylo.Ptr(align=16), x: tylo.Ptr(align=16), rows, ld: tylo.Int(multiple_of=4)):
    t = tylo.thread_idx.x
    lane, warp = tylo.lane_id(), tylo.warp_id()
    xv = tylo.view(x, Layout((rows, 128), (ld, 1)))
    tile = tylo.shared(F32, Layout((4, 128), (128, 1)))
    acc = tylo.value(0.0)
    for r in tylo.range(warp, rows, 4):
        a, b, c, d = xv.load((r, 4 * lane), vector=4)
        acc = acc + tylo.fma(a, b, c * d)
    tile[warp, 4 * lane] = acc
    tylo.sync_threads()
    s = tile[(warp + 1) % 4, 4 * lane]
    for offset in (16, 8, 4, 2, 1):
        s = s + tylo.shfl_xor(s, offset)
    s = tylo.ptx("add.rn.f32", s, 1.0)
    out.store(4 * t, (s, s * 2.0, s * 3.0, tylo.exp(s)))


@pytest.fixture(scope="module", params=TARGETS)
def compiled(request):
    return tile_kernel.compile(
        tylo.pointer(F32, align=16),
        tylo.pointer(F32, align=16),
        int,
        int,
        block=128,
        target=request.param,
    )


def test_ptx_has_the_intended_instructions(compiled):
    ptx = compiled.ptx
    for text in (
        "ld.global.v4.f32",
        "st.global.v4.f32",
        "shfl.sync.bfly.b32",
        "bar.sync",
        "st.shared.f32",
        "ld.shared.f32",
        "fma.rn.f32",
        "ex2.approx.ftz.f32",
        "// begin inline asm",
        "add.rn.f32",
        ".maxntid 128, 1, 1",
    ):
        assert text in ptx, text
    assert ".extern .func llvm." not in ptx
    assert f".target {compiled.target.sm}" in ptx


def test_sass_has_loads_stores_and_shuffles(compiled):
    sass = compiled.sass
    assert "LDG.E.128" in sass and "STG.E.128" in sass
    assert "SHFL.BFLY" in sass and "BAR.SYNC" in sass
    assert "STS" in sass and "LDS" in sass


def test_compile_only_object(compiled):
    assert compiled.llvm.startswith("; ModuleID")
    assert compiled.stage("llvm") == compiled.llvm and compiled.stage("ptx") == compiled.ptx
    assert compiled.cubin[:4] == b"\x7fELF"
    r = compiled.resources
    assert r.registers > 0 and r.shared_bytes == 4 * 128 * 4 and not r.spill_stores
    for key in ("trace_s", "ir_s", "nvvm_s", "link_s"):
        assert compiled.timings[key] >= 0
    assert compiled.entry == "tile_kernel" and compiled.block == (128, 1, 1)


def test_compile_is_cached_in_memory():
    a = tile_kernel.compile(
        tylo.pointer(F32, align=16),
        tylo.pointer(F32, align=16),
        int,
        int,
        block=128,
        target="sm_90a",
    )
    b = tile_kernel.compile(
        tylo.pointer(F32, align=16),
        tylo.pointer(F32, align=16),
        int,
        int,
        block=128,
        target="sm_90a",
    )
    assert a is b


@tylo.kernel
def narrow(
    out: tylo.Ptr(tylo.bf16, align=16),
    x: tylo.Ptr(tylo.bf16, align=16),
    n: tylo.Int(multiple_of=8),
):
    i = (tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x) * 8
    if i < n:
        v = x.load(i, vector=8)
        out.store(i, tuple((e.to(F32) * 2.0).to(tylo.bf16) for e in v))
        lo = tylo.pack_bf16x2(v[0].to(F32), v[1].to(F32))
        out[i] = (lo.to(tylo.u16)).to(F32).to(tylo.bf16)


@pytest.mark.parametrize("target", TARGETS)
def test_bf16_vectors_and_conversions(target):
    k = narrow.compile(tylo.bf16, tylo.bf16, int, block=128, target=target)
    assert "ld.global.v4.u32" in k.ptx or "ld.global.v4.b32" in k.ptx
    assert "cvt.rn.bf16.f32" in k.ptx and "cvt.rn.bf16x2.f32" in k.ptx
    assert ".extern .func llvm." not in k.ptx


def test_index_bits_32_specializes_separately():
    k32 = tylo.kernel(tile_kernel.fn, index_bits=32)
    k = k32.compile(
        tylo.pointer(F32, align=16),
        tylo.pointer(F32, align=16),
        int,
        int,
        block=128,
        target="sm_90a",
    )
    assert ".param .u32" in k.ptx or ".param .s32" in k.ptx


def test_evidence_is_saved(tmp_path, monkeypatch):
    monkeypatch.setenv("TYLO_EVIDENCE", str(tmp_path))
    monkeypatch.setenv("TYLO_CACHE", "0")
    fresh = tylo.kernel(narrow.fn)
    fresh.compile(tylo.bf16, tylo.bf16, int, block=64, target="sm_90a")
    names = {p.suffix for p in tmp_path.iterdir()}
    assert {".ll", ".ptx", ".cubin"} <= names
