"""The lowered runtime logic computes what Python computes: traced kernels are run on the
CPU, thread by thread, by LLVM's JIT (special registers become globals the test sets,
address spaces are dropped), and every thread's result is compared with the same Python
code run on ints. This checks the IR of ``match``, ``in``, ``dict.get``, ``tuple[i]`` and
``== True`` end to end without a GPU (``tests/gpu/test_runtime_logic_gpu.py`` runs the
same kind of kernel on the device)."""

from __future__ import annotations

import ctypes
import re

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import tylo

I32 = tylo.i32
BLOCK = 64


class CPUKernel:
    """A traced kernel (one pointer and int parameters, block and grid on axis x) JIT-compiled
    for the host; ``run(out, *ints)`` runs every thread of one block in turn."""

    def __init__(self, kern, *specs) -> None:
        import llvmlite.binding as llvm

        traced = kern.trace(*specs, block=BLOCK)
        text = traced.llvm
        for reg in ("tid", "ctaid", "nctaid"):
            text = re.sub(
                rf'declare i32 @"llvm\.nvvm\.read\.ptx\.sreg\.{reg}\.x"\(\)',
                f'@{reg} = global i32 0\ndefine i32 @"sreg.{reg}.x"() {{\n'
                f"  %v = load i32, i32* @{reg}\n  ret i32 %v\n}}",
                text,
            )
        text = text.replace('@"llvm.nvvm.read.ptx.sreg.', '@"sreg.').replace("addrspace(1)", "")
        text = "\n".join(x for x in text.splitlines() if not x.startswith(("!", "target ")))
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        module = llvm.parse_assembly(text)
        module.verify()
        machine = llvm.Target.from_default_triple().create_target_machine()
        self.engine = llvm.create_mcjit_compiler(module, machine)
        self.engine.finalize_object()
        nints = sum(1 for s in specs if s is int)
        proto = ctypes.CFUNCTYPE(None, ctypes.c_void_p, *([ctypes.c_int64] * nints))
        self.fn = proto(self.engine.get_function_address(traced.entry))
        self.tid = ctypes.c_int32.from_address(self.engine.get_global_value_address("tid"))
        try:
            nctaid = self.engine.get_global_value_address("nctaid")
        except Exception:  # noqa: BLE001 - the kernel does not read the grid size
            nctaid = 0
        if nctaid:
            ctypes.c_int32.from_address(nctaid).value = 1

    def run(self, *ints: int) -> np.ndarray:
        out = np.full(2 * BLOCK, -7, np.int32)
        for t in range(BLOCK):
            self.tid.value = t
            self.fn(out.ctypes.data, *ints)
        return out


@tylo.kernel
def membership(out, n, items: tylo.Static, start: tylo.Static, stop: tylo.Static):
    t = tylo.thread_idx.x
    r = 0
    if t in items:
        r = r + 1
    if t not in range(start, stop, 3):
        r = r + 10
    if n in items:
        r = r + 100
    out[t] = tylo.value(r, I32)


@given(
    st.lists(st.integers(-5, 70), max_size=6).map(tuple),
    st.integers(-5, 70),
    st.integers(-5, 70),
    st.integers(1, 70),
)
@settings(max_examples=15, deadline=None)
def test_in_computes_pythons_answer_for_every_thread(items, start, stop, n):
    cpu = CPUKernel(membership, I32, int, items, start, stop)
    got = cpu.run(n)[:BLOCK]
    want = [
        (t in items) + 10 * (t not in range(start, stop, 3)) + 100 * (n in items)
        for t in range(BLOCK)
    ]
    assert got.tolist() == want


@tylo.kernel
def dispatch(out, n, table: tylo.Static, consts: tylo.Static):
    t = tylo.thread_idx.x
    match t % 8:
        case 0:
            v = 10
        case 1 | 2:
            v = 20
        case k if k > 5:
            v = 30 + k
        case _:
            v = 40
    w = dict(table).get(t % 6, 9) + consts[t % len(consts)]
    if (t < n) == True:  # noqa: E712 - the construct under test
        w = w + 50000
    out[t] = tylo.value(v * 100000 + w, I32)


def dispatch_reference(t: int, n: int, table: dict, consts: tuple) -> int:
    match t % 8:
        case 0:
            v = 10
        case 1 | 2:
            v = 20
        case k if k > 5:
            v = 30 + k
        case _:
            v = 40
    w = table.get(t % 6, 9) + consts[t % len(consts)]
    if t < n:
        w = w + 50000
    return v * 100000 + w


@given(
    st.dictionaries(st.integers(-2, 7), st.integers(-1000, 1000), max_size=4),
    st.lists(st.integers(-1000, 1000), min_size=1, max_size=5).map(tuple),
    st.integers(1, 80),
)
@settings(max_examples=10, deadline=None)
def test_match_get_and_select_compute_pythons_answer_for_every_thread(table, consts, n):
    static_table = tuple(sorted(table.items()))
    cpu = CPUKernel(dispatch, I32, int, static_table, consts)
    got = cpu.run(n)[:BLOCK]
    want = [dispatch_reference(t, n, table, consts) for t in range(BLOCK)]
    assert got.tolist() == want
