"""``CompileOptions(max_registers=N)`` caps a kernel's registers per thread.

ptxas (13.0, and nvJitLink, which runs it) silently ignores ``-maxrregcount`` for an entry
with ``.maxntid``, and every ``@tylo.kernel`` entry has ``.maxntid`` (its block size). So
the cap is also traced into the entry as ``.maxnreg N`` (the NVVM ``maxnreg``
annotation), and ``compile_ir`` refuses hand-written IR whose ``.maxntid`` entries lack a
``.maxnreg`` within the cap, rather than return a kernel that does not honour it."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tylo
from tylo.backend import compile_ir
from tylo.backend.errors import CompileError
from tylo.backend.ir import IRError, NVVMModule
from tylo.backend.pipeline import CompileOptions
from tylo.kernel.errors import TraceError

LIVE = 48


def _pressure(x, out):
    """Keeps ``LIVE`` loaded floats alive at once (each is used again after their sum):
    more than ``LIVE`` registers without a cap."""
    t = tylo.thread_idx.x
    vals = [x[t + 37 * j] for j in range(LIVE)]
    total = vals[0]
    for j in range(1, LIVE):
        total = total + vals[j]
    acc = vals[0] * (total - vals[0])  # every value is needed again once the total is known
    for j in range(1, LIVE):
        acc = acc + vals[j] * (total - vals[j])
    out[t] = acc


def _kernel(cap):
    options = None if cap is None else CompileOptions(max_registers=cap)
    return tylo.kernel(_pressure, options=options, name=f"pressure_{cap}")


def _maxnreg(ptx):
    return [int(n) for n in re.findall(r"^\s*\.maxnreg\s+(\d+)", ptx, re.MULTILINE)]


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
def test_uncapped_kernel_uses_more_than_the_caps_below(target):
    """The control: without a cap the kernel needs more registers than the caps tested
    below, and its PTX has no ``.maxnreg``; so a capped result under them is the cap's."""
    k = _kernel(None).compile(tylo.f32, tylo.f32, block=128, target=target)
    assert _maxnreg(k.ptx) == []
    assert ".maxntid 128, 1, 1" in k.ptx
    assert k.resources.registers > LIVE, k.resources


@settings(max_examples=4, deadline=None)
@given(cap=st.sampled_from([24, 32, 40]), target=st.sampled_from(["sm_80", "sm_90a"]))
def test_capped_kernel_stays_within_the_cap(cap, target):
    """Defining property: a ``@tylo.kernel`` compiled with ``max_registers = N`` uses at
    most N registers (spilling what does not fit), its entry says ``.maxnreg N``."""
    k = _kernel(cap).compile(tylo.f32, tylo.f32, block=128, target=target)
    assert _maxnreg(k.ptx) == [cap]
    assert k.resources.registers <= cap, k.resources
    assert k.resources.spills, k.resources  # LIVE floats cannot fit: the cap forced spills


def _ir(maxnreg=None, maxntid=(128,)):
    m = NVVMModule("capmod")
    from llvmlite import ir

    fn = m.add_kernel("k", [ir.PointerType(ir.FloatType(), 1)], maxntid=maxntid,
                      maxnreg=maxnreg)  # fmt: skip
    ir.IRBuilder(fn.append_basic_block()).ret_void()
    return m.to_text()


def test_hand_written_ir_must_carry_the_cap():
    """``compile_ir`` with ``max_registers``: an entry with ``.maxntid`` and no
    ``.maxnreg``, or a larger one, is refused (ptxas would ignore the cap); one within it
    compiles; an entry without ``.maxntid`` takes the linker's cap."""
    opts = CompileOptions(max_registers=32)
    with pytest.raises(CompileError, match="max_registers 32 would not hold for entry 'k'"):
        compile_ir(_ir(), "sm_90a", entries=("k",), options=opts, use_cache=False)
    with pytest.raises(CompileError, match=r"\.maxnreg 64"):
        compile_ir(_ir(maxnreg=64), "sm_90a", entries=("k",), options=opts, use_cache=False)
    for ok in (32, 24):
        mod = compile_ir(_ir(maxnreg=ok), "sm_90a", entries=("k",), options=opts,
                         use_cache=False)  # fmt: skip
        assert _maxnreg(mod.ptx) == [ok]
    mod = compile_ir(_ir(maxntid=None), "sm_90a", entries=("k",), options=opts, use_cache=False)
    assert _maxnreg(mod.ptx) == []
    # without a cap nothing is checked
    compile_ir(_ir(), "sm_90a", entries=("k",), use_cache=False)


@pytest.mark.parametrize("bad", [0, 16, 23, 256, -1, 2**63, True, 32.0, "32", None.__class__])
def test_add_kernel_refuses_a_bad_maxnreg(bad):
    """The range is ptxas's: below 24 it raises the count to 24 itself (with a warning),
    which is not the cap asked for."""
    from llvmlite import ir

    m = NVVMModule("bad")
    with pytest.raises(IRError, match="maxnreg .* must be an int in 24..255"):
        m.add_kernel("k", [ir.PointerType(ir.FloatType(), 1)], maxntid=(32,), maxnreg=bad)


@pytest.mark.parametrize("bad", ["max_registers=32", {"max_registers": 32}, 32])
def test_kernel_options_must_be_compile_options(bad):
    with pytest.raises(TraceError, match="expected a tylo CompileOptions"):
        tylo.kernel(_pressure, options=bad)


def test_link_cubin_refuses_a_cap_it_cannot_apply():
    """``link_cubin`` itself (PTX in hand): the same refusal, as a LinkError, and the
    directive within the cap links."""
    from tylo.backend import LinkError, compile_nvvm, link_cubin

    ptx = compile_nvvm(_ir(), "sm_90a")
    with pytest.raises(LinkError, match="max_registers 40 would not hold for entry 'k'"):
        link_cubin(ptx, "sm_90a", max_registers=40)
    link_cubin(compile_nvvm(_ir(maxnreg=40), "sm_90a"), "sm_90a", max_registers=40)
    link_cubin(ptx, "sm_90a")  # no cap: nothing to hold


@pytest.mark.parametrize("directive", [".maxntid 64, 1, 1", ".reqntid 64, 1, 1", ""])
@pytest.mark.parametrize("maxnreg", [None, 24, 40, 41])
def test_register_cap_problem_by_brute_force(directive, maxnreg):
    """Every combination of block directive and ``.maxnreg`` against cap 40, on PTX
    text: refused exactly when the entry fixes its block and lacks a ``.maxnreg <= 40``;
    two entries are judged each on its own."""
    from tylo.backend.link import register_cap_problem

    def entry(name, block, reg):
        lines = [f".visible .entry {name}(", "\t.param .u64 p", ")"]
        lines += [block] if block else []
        lines += [] if reg is None else [f".maxnreg {reg}"]
        return "\n".join(lines + ["{", "\tret;", "}"])

    ptx = entry("a", directive, maxnreg) + "\n" + entry("b", "", None)
    refused = bool(directive) and (maxnreg is None or maxnreg > 40)
    problem = register_cap_problem(ptx, 40)
    assert (problem is not None) == refused, problem
    if refused:
        assert "entry 'a'" in problem
    assert register_cap_problem(ptx, None) is None


@pytest.mark.parametrize("flag", ["-maxrregcount=32", "-Xptxas=-maxrregcount=32",
                                  "--maxrregcount=32"])  # fmt: skip
def test_a_raw_maxrregcount_is_refused(flag):
    """The linker flag itself, passed through ``options`` / ``link_options``, would be
    ignored for a ``.maxntid`` entry just the same: refused, pointing at max_registers."""
    from tylo.backend import LinkError, compile_nvvm, link_cubin

    ptx = compile_nvvm(_ir(), "sm_90a")
    with pytest.raises(LinkError, match="pass max_registers="):
        link_cubin(ptx, "sm_90a", options=[flag])
    with pytest.raises(LinkError, match="pass max_registers="):
        compile_ir(_ir(), "sm_90a", entries=("k",), use_cache=False,
                   options=CompileOptions(link_options=(flag,)))  # fmt: skip
