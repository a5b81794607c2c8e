"""NVVM IR emission (tylo.backend.ir) and the inline-PTX builder (tylo.backend.inline_ptx),
compiled through libNVVM for sm_80 and sm_90a: annotations, shared memory forms, special
registers, escaping, operand counting."""

from __future__ import annotations

import pytest
from llvmlite import ir

from tylo.backend import compile_ir
from tylo.backend.inline_ptx import InlinePTXError, PTXAsm, escape_asm, inline_asm
from tylo.backend.ir import ADDRSPACE_GLOBAL, IRError, NVVMModule

TARGETS = ("sm_80", "sm_90a")
F32 = ir.FloatType()
I32 = ir.IntType(32)


def kernel_module(name="k", *, maxntid=(128,)):
    m = NVVMModule(name)
    fn = m.add_kernel(
        name, [F32.as_pointer(ADDRSPACE_GLOBAL)], maxntid=maxntid, param_names=["out"]
    )
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    return m, fn, b


@pytest.mark.parametrize("target", TARGETS)
def test_module_header_annotations_and_sregs(target):
    m, fn, b = kernel_module(maxntid=(32, 4))
    tid = m.sreg(b, "tid.x")
    tidy = m.sreg(b, "tid.y")
    lane = m.sreg(b, "laneid")
    v = b.uitofp(b.add(b.add(tid, tidy), lane), F32)
    b.store(v, b.gep(fn.args[0], [tid]))
    b.ret_void()
    text = m.to_text()
    assert 'target triple = "nvptx64-nvidia-cuda"' in text
    assert "e-p:64:64:64" in text and "!nvvmir.version" in text
    assert '!"kernel", i32 1' in text and '!"maxntidy", i32 4' in text
    mod = compile_ir(text, target, entries=("k",), use_cache=False)
    assert ".maxntid 32, 4, 1" in mod.ptx
    assert "%tid.x" in mod.ptx and "%laneid" in mod.ptx
    assert ".extern .func" not in mod.ptx


@pytest.mark.parametrize("target", TARGETS)
def test_shared_memory_static_and_dynamic(target):
    m, fn, b = kernel_module()
    stat = m.shared_array("tile", F32, 64, align=16)
    dyn = m.dynamic_shared()
    assert m.dynamic_shared() is dyn  # one per module
    tid = m.sreg(b, "tid.x")
    zero = I32(0)
    b.store(b.uitofp(tid, F32), b.gep(stat, [zero, tid]))
    p = b.bitcast(b.gep(dyn, [zero, I32(32)]), F32.as_pointer(3))
    b.store(b.load(b.gep(stat, [zero, tid])), b.gep(p, [tid]))
    b.store(b.load(b.gep(p, [tid])), b.gep(fn.args[0], [tid]))
    b.ret_void()
    text = m.to_text()
    assert "internal addrspace(3) global [64 x float] undef, align 16" in text
    assert "external addrspace(3) global [0 x i8], align 16" in text
    mod = compile_ir(text, target, entries=("k",), use_cache=False)
    assert ".shared .align 16 .b8 tile[256]" in mod.ptx
    assert ".extern .shared .align 16 .b8 tylo_dynamic_smem[]" in mod.ptx
    assert mod.resources["k"].shared_bytes == 256


@pytest.mark.parametrize("target", TARGETS)
def test_grid_constant_byval_parameter(target):
    m = NVVMModule("tmap")
    blob = ir.ArrayType(ir.IntType(8), 128).as_pointer()
    fn = m.add_kernel(
        "tmap", [blob, I32.as_pointer(ADDRSPACE_GLOBAL)], byval=(0,), grid_constant=(0,)
    )
    fn.args[0].attributes.align = 64
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    first = b.bitcast(fn.args[0], I32.as_pointer())
    b.store(b.load(first), fn.args[1])
    b.ret_void()
    text = m.to_text()
    assert "byval align 64" in text and "byval(" not in text
    assert '!"grid_constant", !' in text
    mod = compile_ir(text, target, entries=("tmap",), use_cache=False)
    assert ".param .align 64 .b8 tmap_param_0[128]" in mod.ptx


def test_module_errors_are_typed():
    m, _, _ = kernel_module()
    with pytest.raises(IRError, match="already exists"):
        m.add_kernel("k", [])
    with pytest.raises(IRError, match="unknown special register"):
        m.sreg(ir.IRBuilder(), "tid.w")
    with pytest.raises(IRError, match="power of two"):
        m.shared_array("s", F32, 4, align=12)
    with pytest.raises(IRError, match="maxntid"):
        m.add_kernel("k2", [], maxntid=(0,))


@pytest.mark.parametrize("target", TARGETS)
def test_inline_ptx_escaping_and_counting(target):
    m, fn, b = kernel_module()
    tid = m.sreg(b, "tid.x")
    x = b.uitofp(tid, F32)
    asm = PTXAsm("scoped")
    d = asm.output(F32)
    a = asm.input(x)
    acc = asm.inout(x)
    # a PTX scope with a predicate register, a label with `$` and a string escape
    asm.line("{")
    asm.line("  .reg .pred p;")
    asm.line(f"  setp.gt.f32 p, {a}, 0f00000000;")
    asm.line(f"  selp.f32 {d}, {a}, 0f3F800000, p;")
    asm.line(f"  add.f32 {acc}, {acc}, {d};")
    asm.line("}")
    out, acc_out = asm.emit(b)
    fma = inline_asm(b, "fma.rn.f32 $0, $1, $2, $3;", [F32], [out, acc_out, x])[0]
    b.store(fma, b.gep(fn.args[0], [tid]))
    b.ret_void()
    text = m.to_text()
    assert '"=f,=f,f,1"' in text
    mod = compile_ir(text, target, entries=("k",), use_cache=False)
    assert "setp.gt.f32" in mod.ptx and "selp.f32" in mod.ptx and "fma.rn.f32" in mod.ptx


def test_inline_ptx_count_check_and_escapes():
    b = ir.IRBuilder(
        ir.Function(ir.Module(), ir.FunctionType(ir.VoidType(), [F32]), "f").append_basic_block()
    )
    x = b.function.args[0]
    asm = PTXAsm("unused")
    asm.output(F32)
    asm.input(x)
    asm.line("mov.f32 {{o0}}, 0f00000000;")
    with pytest.raises(InlinePTXError, match=r"operand\(s\) \[1\] declared but not used"):
        asm.emit(b)
    bad = PTXAsm("undeclared")
    bad.line("mov.f32 {{o0}}, 1.0;")
    with pytest.raises(InlinePTXError, match="names output 0, but only 0"):
        bad.emit(b)
    with pytest.raises(InlinePTXError, match=r"declare operands \[0, 1\], but the text uses"):
        inline_asm(b, "mov.f32 $0, $2;", [F32], [x])
    assert escape_asm('a "b" \\c\n') == "a \\22b\\22 \\5Cc\\0A"
    lit = PTXAsm("dollar")
    o = lit.output(F32)
    lit.line(f"mov.f32 {o}, 0f00000000; // $literal")
    assert "$$literal" in lit.text()
