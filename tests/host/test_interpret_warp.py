"""Warp-level operations in the interpreter against their PTX ISA definitions, over random
fragments: ``mma.sync`` m16n8k16 (bf16, f16), ``ldmatrix`` (x1/x2/x4, .trans), ``vote``;
``cp.async`` groups and their misuse; the warp-MMA GEMM against float64."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tylo
from tylo.interpret import AsyncMisuse, HostArray
from tylo.interpret.numerics import bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16

_MMA = ("mma.sync.aligned.m16n8k16.row.col.f32.{t}.{t}.f32 {{$0, $1, $2, $3}}, "
        "{{$4, $5, $6, $7}}, {{$8, $9}}, {{$10, $11, $12, $13}};")  # fmt: skip


@tylo.kernel
def mma_once(d, a, b, c, kind: tylo.Static):
    lane = tylo.thread_idx.x
    ar = [a[lane * 4 + r] for r in range(4)]
    br = [b[lane * 2 + r] for r in range(2)]
    cr = [c[lane * 4 + r] for r in range(4)]
    f32 = tylo.f32
    out = tylo.ptx(_MMA.format(t=kind), *ar, *br, *cr, out=(f32, f32, f32, f32))
    for r in range(4):
        d[lane * 4 + r] = out[r]


def _element_a(i: int, lane: int) -> tuple[int, int]:
    """PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type": a_i."""
    g, t = lane >> 2, lane % 4
    row = g if i in (0, 1, 4, 5) else g + 8
    col = t * 2 + (i & 1) + (8 if i >= 4 else 0)
    return row, col


def _element_b(i: int, lane: int) -> tuple[int, int]:
    g, t = lane >> 2, lane % 4
    return t * 2 + (i & 1) + (8 if i >= 2 else 0), g


def _element_c(i: int, lane: int) -> tuple[int, int]:
    g, t = lane >> 2, lane % 4
    return g + (8 if i >= 2 else 0), t * 2 + (i & 1)


@settings(max_examples=10, deadline=None)
@given(kind=st.sampled_from(["bf16", "f16"]), seed=st.integers(0, 2**32 - 1))
def test_mma_m16n8k16_matches_its_definition(kind: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    to16 = f32_to_bf16 if kind == "bf16" else f32_to_f16
    back = bf16_to_f32 if kind == "bf16" else f16_to_f32
    A = back(to16(rng.standard_normal((16, 16)).astype(np.float32))).astype(np.float64)
    B = back(to16(rng.standard_normal((16, 8)).astype(np.float32))).astype(np.float64)
    C = rng.standard_normal((16, 8)).astype(np.float32)
    a_regs = np.zeros((32, 4), np.uint32)
    b_regs = np.zeros((32, 2), np.uint32)
    c_regs = np.zeros((32, 4), np.float32)
    for lane in range(32):
        for i in range(8):
            bits = int(to16(np.float32(A[_element_a(i, lane)])).view(np.uint16))
            a_regs[lane, i // 2] |= bits << (16 * (i & 1))
        for i in range(4):
            bits = int(to16(np.float32(B[_element_b(i, lane)])).view(np.uint16))
            b_regs[lane, i // 2] |= bits << (16 * (i & 1))
        for i in range(4):
            c_regs[lane, i] = C[_element_c(i, lane)]
    d = np.zeros(128, np.float32)
    mma_once.interpret[1, 32](d, a_regs.ravel(), b_regs.ravel(), c_regs.ravel(), kind)
    want = A @ B + C
    for lane in range(32):
        for i in range(4):
            assert d[lane * 4 + i] == np.float32(want[_element_c(i, lane)])


@tylo.kernel
def ld_matrix(out, x, num: tylo.Static, trans: tylo.Static):
    lane = tylo.thread_idx.x
    s = tylo.shared(tylo.u32, 128)  # four 8x8 b16 matrices: 8 rows of 16 bytes each
    for r in range(4):
        s[lane * 4 + r] = x[lane * 4 + r]
    tylo.sync_warp()
    regs = "{" + ", ".join(f"${k}" for k in range(num)) + "}"
    t = ".trans" if trans else ""
    text = f"ldmatrix.sync.aligned.m8n8.x{num}{t}.shared.b16 {regs}, [${num}];"
    outs = tylo.ptx(text, s.address(lane * 4), out=(tylo.u32,) * num)
    outs = outs if isinstance(outs, tuple) else (outs,)
    for r in range(num):
        out[lane * 4 + r] = outs[r]


@settings(max_examples=8, deadline=None)
@given(num=st.sampled_from([1, 2, 4]), trans=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_ldmatrix_matches_its_definition(num: int, trans: bool, seed: int) -> None:
    x = np.random.default_rng(seed).integers(0, 2**32, 128, dtype=np.uint64).astype(np.uint32)
    out = np.zeros(128, np.uint32)
    ld_matrix.interpret[1, 32](out, x, num, trans)
    halves = x.view(np.uint16).reshape(32, 8)  # row q (lane q's 16 bytes): 8 b16 elements
    for lane in range(32):
        g, c = lane // 4, 2 * (lane % 4)
        for i in range(num):
            m = halves[8 * i : 8 * i + 8]
            lo, hi = (m[c, g], m[c + 1, g]) if trans else (m[g, c], m[g, c + 1])
            assert out[lane * 4 + i] == (int(hi) << 16) | int(lo)


@tylo.kernel
def staged(out, x, wait: tylo.Static):
    t = tylo.thread_idx.x
    s = tylo.shared(tylo.f32, 32)
    tylo.ptx("cp.async.ca.shared.global [$0], [$1], 4;", s.address(t), x.address(t), out=None)
    tylo.ptx("cp.async.commit_group;", out=None)
    if wait:
        tylo.ptx("cp.async.wait_group 0;", out=None)
    out[t] = s[t]


def test_cp_async_waited_and_not() -> None:
    x = np.arange(32, dtype=np.float32)
    out = np.zeros(32, np.float32)
    staged.interpret[1, 32](out, x, True)
    assert np.array_equal(out, x)
    with pytest.raises(AsyncMisuse) as info:
        staged.interpret[1, 32](out, x, False)
    assert "thread (0, 0, 0)" in str(info.value)


@tylo.kernel
def votes(out, x, member: tylo.Static, mode: tylo.Static):
    t = tylo.thread_idx.x
    out[t] = 7
    if ((tylo.value(member, tylo.u32) >> tylo.value(t, tylo.u32)) & 1) != 0:  # members vote
        flag = tylo.where(x[t] > 0, tylo.value(1, tylo.u32), tylo.value(0, tylo.u32))
        if mode == "ballot":
            text = ("{ .reg .pred %p; setp.ne.u32 %p, $1, 0; "
                    "vote.sync.ballot.b32 $0, %p, $2; }")  # fmt: skip
        else:
            text = ("{ .reg .pred %p, %q; setp.ne.u32 %p, $1, 0; "
                    f"vote.sync.{mode}.pred %q, %p, $2; selp.u32 $0, 1, 0, %q; }}")  # fmt: skip
        out[t] = tylo.ptx(text, flag, tylo.value(member, tylo.u32), out=tylo.u32)


@settings(max_examples=20, deadline=None)
@given(
    mode=st.sampled_from(["ballot", "any", "all", "uni"]),
    member=st.integers(1, 2**32 - 1),
    preds=st.integers(0, 2**32 - 1),
)
def test_vote_matches_its_definition(mode: str, member: int, preds: int) -> None:
    x = np.array([1.0 if preds >> k & 1 else -1.0 for k in range(32)], np.float32)
    out = np.zeros(32, np.uint32)
    votes.interpret[1, 32](out, x, member, mode)
    ballot = preds & member
    want = {"ballot": ballot, "any": int(ballot != 0), "all": int(ballot == member),
            "uni": int(ballot in (0, member))}[mode]  # fmt: skip
    for lane in range(32):
        assert out[lane] == (want if member >> lane & 1 else 7)


@pytest.mark.parametrize("shape", [(65, 97, 73), (128, 256, 64)])
def test_warp_mma_gemm_against_float64(shape: tuple[int, int, int]) -> None:
    from tylo.ops.gemm.host import choose_config
    from tylo.ops.gemm.kernel import tiled_gemm_kernel

    m, n, k = shape
    rng = np.random.default_rng(8)
    a = f32_to_bf16(rng.standard_normal((m, k)).astype(np.float32))
    b = f32_to_bf16(rng.standard_normal((n, k)).astype(np.float32))  # B^T, K-contiguous
    cfg = choose_config(m, n, k, k, k, dtype=tylo.bf16, ldd=m)
    d = np.full((n, m), np.nan, np.float32)  # D column-major: (N, M) rows of M
    tiled_gemm_kernel.interpret[cfg.grid(m, n), cfg.plan.threads](
        cfg, d, HostArray(a, tylo.bf16), HostArray(b, tylo.bf16), m, n, k, k, k, m, 1.0,
        False, shared=cfg.shared_bytes,
    )  # fmt: skip
    want = bf16_to_f32(a).astype(np.float64) @ bf16_to_f32(b).astype(np.float64).T
    # products exact, sums of k terms in f32 with f64 inside each mma: relative 1e-6
    assert np.abs(d.T - want).max() <= 1e-6 * np.abs(want).max() * np.sqrt(k)


@tylo.kernel
def st_matrix(out, x, trans: tylo.Static):
    lane = tylo.thread_idx.x
    s = tylo.shared(tylo.u32, 128)
    t = ".trans" if trans else ""
    regs = [x[lane * 4 + r] for r in range(4)]
    tylo.ptx(f"stmatrix.sync.aligned.m8n8.x4{t}.shared.b16 [$0], {{$1, $2, $3, $4}};",
             s.address(lane * 4), *regs, out=None)  # fmt: skip
    tylo.sync_warp()
    for r in range(4):
        out[lane * 4 + r] = s[lane * 4 + r]


@pytest.mark.parametrize("trans", [False, True])
def test_stmatrix_is_the_inverse_of_ldmatrix(trans: bool) -> None:
    x = np.random.default_rng(9).integers(0, 2**32, 128, dtype=np.uint64).astype(np.uint32)
    out = np.zeros(128, np.uint32)
    st_matrix.interpret[1, 32](out, x, trans)
    regs = x.reshape(32, 4)
    rows = out.view(np.uint16).reshape(32, 8)  # row q of matrix q // 8, from lane q's address
    for q in range(32):
        i, r = q // 8, q % 8
        for col in range(8):
            if trans:  # lane l holds (rows 2t, 2t+1 ; column g) of matrix i
                lane, half = 4 * col + r // 2, r % 2
            else:
                lane, half = 4 * r + col // 2, col % 2
            assert rows[q, col] == (int(regs[lane, i]) >> (16 * half)) & 0xFFFF
