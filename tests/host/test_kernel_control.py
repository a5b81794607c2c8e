"""Tracing control flow to IR (no libNVVM needed): static versus dynamic `if`, loops,
loop-carried rebinding (Python ints, tuples, lists, protocol objects), and/or, ternaries."""

from __future__ import annotations

import re

import tylo
from tylo.layouts import Layout

F32 = tylo.f32


def ir_of(kern, *specs, block=128, **kw):
    return kern.trace(*specs, block=block, **kw).llvm


@tylo.kernel
def relu_or_copy(out, x, n, relu):
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    if i < n:
        v = x[i]
        if relu:
            v = tylo.maximum(v, 0.0)
        out[i] = v


def test_static_if_on_a_static_argument_costs_nothing():
    with_relu = ir_of(relu_or_copy, F32, F32, int, True)
    without = ir_of(relu_or_copy, F32, F32, int, False)
    assert "llvm.maxnum.f32" in with_relu and "llvm.maxnum.f32" not in without
    # only the bounds check branches; the static `if relu` made no blocks
    assert without.count("if_then") == with_relu.count("if_then") == 2  # label + br target
    assert "phi" not in without


@tylo.kernel
def decided(out):
    t = tylo.thread_idx.x
    if t < 128:  # decided from the fact t < block_dim.x: no branch
        out[t] = 1.0
    if t >= 128:
        out[t] = 2.0


def test_relations_the_facts_settle_are_static():
    text = ir_of(decided, F32, block=128)
    assert "br i1" not in text
    assert text.count("store float") == 1 and "1.0" in text or "0x3ff0000000000000" in text


@tylo.kernel
def merge(out, x, n):
    i = tylo.thread_idx.x
    v = x[i]
    count = 0
    if v > 0.0:
        v = v * 2.0
        count = 1
    else:
        count = i + 2
    out[i] = v + tylo.value(count).to(F32)


def test_dynamic_if_merges_rebound_names_with_phis():
    text = ir_of(merge, F32, F32, int)
    assert re.search(r'%"v" = phi\s+float', text)
    # the Python int / index expression `count` becomes a runtime integer (i64 phi)
    assert re.search(r'%"count" = phi\s+i64', text)


@tylo.kernel
def loop_carried(out, x, n):
    t = tylo.thread_idx.x
    total = 0.0
    steps = 0
    pair = (tylo.value(0.0), tylo.value(1.0))
    items = [tylo.value(0, tylo.i32), 5]
    for k in tylo.range(n):
        total = total + x[k * 128 + t]
        steps = steps + 1
        pair = (pair[1], pair[0] + pair[1])
        items = [items[0] + 1, 5]
    out[t] = total + pair[0] + tylo.value(steps).to(F32) + items[0].to(F32)


def test_loop_carried_values_become_phis_of_the_right_types():
    text = ir_of(loop_carried, F32, F32, int)
    assert re.search(r'%"total" = phi\s+float', text)
    assert re.search(r'%"steps" = phi\s+i64', text)  # a Python int counter
    assert len(re.findall(r'%"pair(_\d+)?" = phi\s+float', text)) == 2  # tuple leaves
    assert re.search(r'%"items(_\d+)?" = phi\s+i32', text)  # the Value leaf of a list
    # index, total, steps, pair x2, items x2 (the int 5 is rebound, so it is carried too)
    assert text.count("phi") == 1 + 1 + 1 + 2 + 2


class Acc:
    """A container with the flatten protocol: carried leaf by leaf."""

    def __init__(self, a, b):
        self.a, self.b = a, b

    def __tylo_flatten__(self):
        return (self.a, self.b), "acc"

    @classmethod
    def __tylo_unflatten__(cls, aux, children):
        assert aux == "acc"
        return cls(*children)


@tylo.kernel
def protocol(out, x, n):
    acc = Acc(tylo.value(0.0), tylo.value(0.0))
    for k in tylo.range(n):
        v = x[k]
        acc = Acc(acc.a + v, tylo.maximum(acc.b, v))
    out[0] = acc.a
    out[1] = acc.b


def test_flatten_protocol_objects_are_carried():
    text = ir_of(protocol, F32, F32, int, block=1)
    assert len(re.findall(r'%"acc(_\d+)?" = phi\s+float', text)) == 2


@tylo.kernel
def nested(out, n, m):
    s = 0
    for i in tylo.range(n):
        for j in tylo.range(i, m, 2):
            s = s + i * j
    out[0] = tylo.value(s).to(F32)


def test_nested_loops_and_loop_index_facts():
    text = ir_of(nested, F32, int, int, block=1)
    assert text.count("loop_body") >= 4  # two loops
    assert "icmp slt" in text


@tylo.kernel
def short_circuit(out, x, n):
    i = tylo.thread_idx.x
    # x[i] must only be read when i < n: the right operand is traced in its own block
    if i < n and x[i] > 0.0:
        out[i] = 1.0
    keep = n > 4 or x[0] < 0.0
    out[0] = tylo.where(keep, 1.0, 0.0)


def test_and_or_short_circuit_with_control_flow():
    text = ir_of(short_circuit, F32, F32, int)
    body = text[text.index("and_then") :]
    assert "load float" in body.split("and_end")[0]  # the load sits in the rhs block
    assert "or_then" in text and "phi  i1" in text.replace("phi i1", "phi  i1")


@tylo.kernel
def ternary(out, x, n):
    i = tylo.thread_idx.x
    v = x[i] if i < n else 0.0
    out[i] = v


def test_dynamic_ternary_is_a_guarded_branch():
    text = ir_of(ternary, F32, F32, int)
    then = text[text.index("ifexp_then:") : text.index("ifexp_else:")]
    assert "load float" in then
    assert re.search(r"phi\s+float", text)


@tylo.kernel
def unrolled(out):
    t = tylo.thread_idx.x
    acc = tylo.value(0.0)
    for off in (16, 8, 4, 2, 1):
        acc = acc + tylo.shfl_xor(acc, off)
    for k in range(3):
        acc = acc * 2.0
    out[t] = acc


def test_python_loops_unroll():
    text = ir_of(unrolled, F32, block=32)
    assert text.count("llvm.nvvm.shfl.sync.bfly.f32") == 5 + 1  # 5 calls + 1 declaration
    assert "phi" not in text


@tylo.kernel
def views(out, x, rows, cols, ld):
    r = tylo.block_idx.x
    c = tylo.thread_idx.x
    xv = tylo.view(x, Layout((rows, cols), (ld, 1)))
    if c < cols:
        out[r] = xv[r, c]


def test_layout_views_with_runtime_strides():
    text = ir_of(views, F32, F32, int, int, int)
    assert re.search(r'mul i64 %"?\.?\w*"?, %"ld"', text) or '%"ld"' in text
