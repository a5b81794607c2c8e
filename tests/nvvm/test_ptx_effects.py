"""``tylo.ptx`` keeps every instruction that has effects (tylo issue 11, item 3): stores,
reductions, atomics, barriers, fences and reads of volatile special registers survive
libNVVM's optimizer into the PTX; the short form writes ``[a]`` address operands; an
unknown instruction, one without an inferable result type and a control transfer are
refused at the user's line. Also: ``match`` and ``in`` on runtime values keep their
branches through libNVVM (issue 11, item 2)."""

from __future__ import annotations

import inspect
import re
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tylo
from tylo.backend import inline_ptx
from tylo.backend.inline_ptx import (
    PTX_INSTRUCTIONS,
    address_operands,
    has_destination,
    instruction_effects,
)

F32, U32, U64 = tylo.f32, tylo.u32, tylo.u64
TARGETS = ("sm_80", "sm_90a")
HERE = __file__


@tylo.kernel
def effects(out, counts, x):
    t = tylo.thread_idx.x
    v = x[t]
    tylo.ptx("red.global.add.u32", counts.address(0), tylo.value(1, U32))
    tylo.ptx("atom.global.max.u32", counts.address(1), tylo.value(t, U32))  # result unused
    tylo.ptx("st.global.f32", out.address(t), v)
    tylo.ptx("st.global.f32 [$0], $1;", out.address(t + 64), v * 2.0)  # a template
    tylo.ptx("fence.acq_rel.gpu")
    tylo.ptx("bar.warp.sync", tylo.value(0xFFFFFFFF, U32))
    a = tylo.ptx("mov.u64 $0, %clock64;", out=U64)
    b = tylo.ptx("mov.u64 $0, %clock64;", out=U64)
    out[t + 128] = (b - a).to(F32)


@pytest.fixture(scope="module", params=TARGETS)
def compiled(request):
    return effects.compile(F32, U32, F32, block=64, target=request.param)


def test_instructions_with_effects_reach_the_ptx(compiled):
    ptx = compiled.ptx
    assert re.search(r"red(\.relaxed\.gpu)?\.global\.add\.u32\s+\[%rd\d+\], %r\d+;", ptx)
    assert re.search(r"atom\.global\.max\.u32\s+%r\d+, \[%rd\d+\], %r\d+;", ptx)
    assert len(re.findall(r"st\.global\.f32\s+\[%rd\d+\], %f\d+;", ptx)) >= 2
    assert "fence.acq_rel.gpu;" in ptx and "bar.warp.sync" in ptx
    assert len(re.findall(r"mov\.u64\s+%rd\d+, %clock64;", ptx)) == 2  # not merged


def test_ir_marks_effects_by_opcode(compiled):
    llvm = compiled.llvm
    for name in ("red.global.add.u32", "atom.global.max.u32", "st.global.f32", "fence"):
        lines = [x for x in llvm.splitlines() if f'"{name}' in x]
        assert lines and all("asm sideeffect" in x and "~{memory}" in x for x in lines), lines
    (clock, _) = [x for x in llvm.splitlines() if "%clock64" in x]
    assert "asm sideeffect" in clock


@tylo.kernel
def pure(out, x):
    t = tylo.thread_idx.x
    out[t] = tylo.ptx("fma.rn.f32", x[t], x[t], 1.0)


def test_pure_instructions_stay_pure():
    llvm = pure.trace(F32, F32, block=32).llvm
    (line,) = [x for x in llvm.splitlines() if "fma.rn.f32" in x]
    assert "sideeffect" not in line and "~{memory}" not in line


@tylo.kernel
def unknown(out, x):
    out[0] = tylo.ptx("foo.bar.f32", x[0])


@tylo.kernel
def untyped(out, x):
    out[0] = tylo.ptx("mov", x[0])


@tylo.kernel
def branch(out, x):
    tylo.ptx("bra", x[0])


@tylo.kernel
def float_address(out, x):
    tylo.ptx("st.global.f32", x[0], x[1])


@pytest.mark.parametrize(
    ("kern", "text", "message"),
    [
        (unknown, 'out[0] = tylo.ptx("foo.bar.f32", x[0])', "'foo' (in 'foo.bar.f32') is not"),
        (untyped, 'out[0] = tylo.ptx("mov", x[0])', "cannot infer the result type of 'mov'"),
        (branch, 'tylo.ptx("bra", x[0])', "transfers control"),
        (float_address, 'tylo.ptx("st.global.f32", x[0], x[1])', "is an address"),
    ],
)
def test_bad_instructions_are_refused_at_the_users_line(kern, text, message):
    with pytest.raises(tylo.TraceError) as info:
        kern.trace(F32, F32, block=32)
    err = info.value
    assert message in err.message, err.message
    lines, first = inspect.getsourcelines(kern.fn)
    want = [first + k for k, line in enumerate(lines) if line.strip() == text]
    assert err.filename == HERE and [err.lineno] == want and err.source_line == text


# ---------------------------------------------------------------------------- the tables


def test_tables_name_only_ptx_instructions():
    for table in (inline_ptx._MEMORY, inline_ptx._EFFECTS):
        assert table <= PTX_INSTRUCTIONS
    for key in (*inline_ptx._NO_DESTINATION, *inline_ptx._ADDRESSES):
        assert key.split(".")[0] in PTX_INSTRUCTIONS, key


# Written out from the PTX ISA, not read from tylo's tables (an oracle of its own): the
# instructions that access or order memory (9.7.9 data movement: ld ldu st prefetch(u)
# applypriority discard cp(.async/.bulk) multimem tensormap, ldmatrix stmatrix; atom red;
# 9.7.10 texture and surface: tex tld4 suld sust sured; 9.7.13 parallel synchronization:
# bar barrier membar fence mbarrier; 9.7.14-16 wmma wgmma tcgen05; stack: alloca stacksave
# stackrestore; clusterlaunchcontrol), and those with effects beyond their results (9.7.13
# trap exit brkpt nanosleep pmevent setmaxnreg griddepcontrol, warp-collective vote shfl
# match redux elect activemask, control flow bra brx call ret).
ISA_MEMORY = frozenset(
    "ld ldu st red atom cp ldmatrix stmatrix prefetch prefetchu mbarrier bar barrier fence "
    "membar wgmma wmma tcgen05 multimem discard applypriority tensormap suld sust sured tex "
    "tld4 clusterlaunchcontrol alloca stacksave stackrestore".split()
)
ISA_EFFECTS = frozenset(
    "trap exit brkpt nanosleep pmevent setmaxnreg griddepcontrol vote shfl match redux elect "
    "activemask bra brx call ret".split()
)
# a few that are neither: pure arithmetic, conversion, comparison and moves
ISA_PURE = frozenset("add sub mul mad fma div rem abs neg min max cvt mov setp selp and".split())


def test_pure_instructions_have_no_effects():
    assert ISA_PURE <= PTX_INSTRUCTIONS and not ISA_PURE & (ISA_MEMORY | ISA_EFFECTS)
    for root in sorted(ISA_PURE):
        assert instruction_effects(f"{root}.u32 $0, $1, $2;") == (False, False), root


def test_every_instruction_is_classified_as_the_isa_says():
    for root in sorted(PTX_INSTRUCTIONS):
        want = (root in ISA_MEMORY or root in ISA_EFFECTS, root in ISA_MEMORY)
        assert instruction_effects(f"{root} $0, $1;") == want, root


@given(
    st.sampled_from(sorted(PTX_INSTRUCTIONS)),
    st.lists(st.sampled_from(["global", "shared", "add", "u32", "f32", "sync", "gpu"]), max_size=3),
    st.sampled_from(["", "@%p ", "@!%p "]),
)
@settings(max_examples=200, deadline=None)
def test_effects_follow_the_instruction_name(root, suffix, guard):
    name = ".".join([root, *suffix])
    side, memory = instruction_effects(f"{guard}{name} $0, $1;")
    assert memory == (root in ISA_MEMORY)
    assert side == (root in ISA_MEMORY or root in ISA_EFFECTS)
    # every instruction of a multi-line template counts
    assert instruction_effects(f"add.u32 $0, $1, $2;\n\t{name} $0, $1;") == (side, memory)


def test_destinations_and_addresses_by_instruction():
    assert not has_destination("red.global.add.u32") and has_destination("atom.global.add.u32")
    assert not has_destination("mbarrier.init.shared.b64")
    assert has_destination("mbarrier.arrive.shared.b64")
    assert address_operands("atom.global.cas.b32") == (0,)
    assert address_operands("cp.async.cg.shared.global") == (0, 1)
    assert address_operands("add.u32") == ()


def test_asm_without_outputs_always_has_side_effects():
    from llvmlite import ir

    fn = ir.Function(ir.Module(), ir.FunctionType(ir.VoidType(), [ir.IntType(32)]), "f")
    b = ir.IRBuilder(fn.append_basic_block())
    inline_ptx.inline_asm(b, "add.u32 $0, $0, 1;", [], [fn.args[0]])
    asm = inline_ptx.PTXAsm("x")
    asm.line(f"add.u32 {asm.input(fn.args[0])}, 1, 1;")
    asm.emit(b)
    assert str(fn).count("asm sideeffect") == 2


# ---------------------------------------------------------------------------- runtime logic


@tylo.kernel
def dispatch(out, n):
    t = tylo.thread_idx.x
    match t % 4:
        case 0:
            out[t] = 1.0
        case 1 | 2:
            out[t] = 2.0
        case _:
            out[t] = 3.0
    if n in (3, 7, 11):
        out[t + 64] = 4.0


@pytest.mark.parametrize("target", TARGETS)
def test_match_and_in_keep_their_branches_through_libnvvm(target):
    k = dispatch.compile(F32, int, block=64, target=target)
    ptx = k.ptx
    # each arm's constant is stored (as its f32 bits), on its own path
    stored = {int(m) for m in re.findall(r"mov\.(?:u32|b32)\s+%r\d+, (\d+);", ptx)}
    stored |= {int(m, 16) for m in re.findall(r"0f([0-9A-F]{8})", ptx)}
    for value in (1.0, 2.0, 3.0, 4.0):
        bits = int.from_bytes(struct.pack(">f", value), "big")
        assert bits in stored, (value, ptx)
    assert len(re.findall(r"@%p\d+ bra", ptx)) >= 4  # t % 4 == 0, in {1, 2}, n in {...}


def test_templates_are_read_statement_by_statement():
    text = "{\n.reg .pred p;\nsetp.ne.b32 p, $1, 0;\ndone: @p red.global.add.u32 [$0], 1;\n}"
    assert instruction_effects(text) == (True, True)
    assert inline_ptx.unknown_instructions(text) == []
    assert inline_ptx.unknown_instructions("L1: fma.rn.f32 $0, $1;\n@%p fmaa.rn.f32 $0, $1;") == [
        "fmaa.rn.f32"
    ]


@tylo.kernel
def bad_template(out, x):
    out[0] = tylo.ptx("fma.rn.f32 $0, $1, $1, $1;\n\tsqrtt.f32 $0, $0;", x[0], out=F32)


def test_unknown_instruction_in_a_template_is_refused():
    with pytest.raises(tylo.TraceError, match="'sqrtt.f32' in .* is not a PTX instruction"):
        bad_template.trace(F32, F32, block=32)
