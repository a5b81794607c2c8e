"""Lowering of symbolic index arithmetic to IR (no libNVVM): division and remainder rules,
32-bit narrowing of thread-index math, sharing of subexpressions, dominance of the cache,
and floor semantics for values of unknown sign."""

from __future__ import annotations

import re

import sympy

import tylo
from tylo.layouts import Layout

F32 = tylo.f32


def ir(kern, *specs, block=256):
    return kern.trace(*specs, block=block).llvm


def body(text: str) -> str:
    """The instructions of the kernel (the entry block included)."""
    return text[text.index("{") : text.index("\n}")]


@tylo.kernel
def lanes(out):
    t = tylo.thread_idx.x
    out[t] = tylo.value(tylo.warp_id() * 1000 + tylo.lane_id()).to(F32)


def test_powers_of_two_become_shifts_and_masks_in_32_bits():
    text = body(ir(lanes, F32))
    assert re.search(r"lshr i32 %\"tid_x\", 5", text)
    assert re.search(r"and i32 %\"tid_x\", 31", text)
    assert "udiv" not in text and "urem" not in text and "sdiv" not in text


@tylo.kernel
def divisions(out, n):
    t = tylo.thread_idx.x
    q = (t + 7) // 3  # non-negative: udiv
    r = t % 5  # non-negative: urem
    s = (t - 100) // 8  # may be negative: an arithmetic shift is floor division
    u = (n - t) // 3  # sign unknown, general divisor: sdiv with the floor correction
    out[t] = tylo.value(q + r + s + u).to(F32)


def test_division_rules_follow_the_sign_knowledge():
    text = body(ir(divisions, F32, int))
    assert "udiv i32" in text and "urem i32" in text
    assert "ashr" in text
    assert "sdiv i64" in text and "srem i64" in text  # (n - t) // 3 with a correction


@tylo.kernel
def shared_subexpressions(out, x, ld):
    r, c = tylo.block_idx.x, tylo.thread_idx.x
    xv = tylo.view(x, Layout((1024, 1024), (ld, 1)))
    out[r] = xv[r, c] + xv[r, c + 1] + xv[r, c + 2]


def test_common_subexpressions_are_shared():
    text = body(ir(shared_subexpressions, F32, F32, int))
    assert text.count("mul i64") == 1  # r * ld computed once, in the entry block
    assert text.index("mul i64") < text.index("body:")


@tylo.kernel
def scoped(out, x, n):
    t = tylo.thread_idx.x
    for k in tylo.range(n):
        out[k * 256 + t] = x[k * 256 + t]
    out[t] = x[t + 256]


def test_values_lowered_in_a_loop_body_are_not_reused_after_it():
    text = ir(scoped, F32, F32, int)
    after = text[text.index("loop_exit:") :]
    # the address after the loop is computed there, not taken from the loop body
    assert "getelementptr" in after and "add" in after


@tylo.kernel
def index_width(out, x, n):
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    if i < n:
        out[i] = x[i]


def test_grid_wide_indices_are_64_bit_by_default_and_32_with_index_bits():
    wide = body(ir(index_width, F32, F32, int))
    assert re.search(r"zext i32 %\"ctaid_x\" to i64", wide) and "icmp slt i64" in wide
    narrow_kernel = tylo.kernel(index_width.fn, index_bits=32)
    narrow = narrow_kernel.trace(F32, F32, int, block=256).llvm
    assert "i64" not in body(narrow).replace("i64 %", "")  # index math in 32 bits
    assert 'i32 %"n"' in narrow


@tylo.kernel
def signed_floor(out, a: tylo.Ptr(tylo.i32)):
    t = tylo.thread_idx.x
    v = a[t]
    out[t] = (v // 4 + v % 4 + v // 3 + v % 3).to(F32)


def test_value_floor_division_has_python_semantics():
    text = body(ir(signed_floor, F32, tylo.i32))
    # // is sdiv corrected by the remainder's sign; % is srem corrected the same way
    assert text.count("sdiv") == 2 and text.count("srem") == 4
    assert text.count("select") >= 2


def test_lowering_helpers_directly():
    from tylo.kernel.lower import bounds

    @tylo.kernel
    def probe(out):
        t = tylo.thread_idx.x
        from tylo.kernel.context import current

        ctx = current()
        assert bounds(ctx, t) == (0, 127)
        assert bounds(ctx, 4 * t + 3) == (3, 511)
        assert bounds(ctx, sympy.floor(t / 8)) == (0, 15)
        assert bounds(ctx, sympy.Mod(t + 1000, 32)) == (0, 31)
        out[t] = 1.0

    probe.trace(F32, block=128)
