# TEST_TARGET: cc>=9.0a
"""The Hopper attention forward (tylo/ops/attention/hopper_host.py) on an sm_90a GPU, against
the float64 reference of tylo/ops/attention/reference.py: fresh random data, outputs
poisoned with NaN first, o within 2e-2 of max |o| and lse within 2e-2 absolute. Shapes: L =
1, 17, 1000, 4097, Lq != Lk both ways, D = 64 and 128, bf16 and f16, causal (bottom-right),
per-batch key lengths including 0 (rows with nothing to attend to: o = 0, lse = -inf), and
non-contiguous (B, H, L, D) strides that TMA can still read. The chain alone (S by wgmma,
P = S as register A, O = P V with V MN-major) is checked register by register on small
integers, so a failure there points at the primitives, not the softmax."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from attention_cases import (  # tests/gpu/attention_cases.py
    assert_matches_reference,
    verify_standard_cases,
)

import tylo
from tylo.nvgpu.warpgroup.chain import accumulator_as_register_a
from tylo.nvgpu.warpgroup.mma import (
    WarpgroupMMAAtom,
    commit_group,
    fence,
    fence_shared_to_async,
    mma_async,
    wait_group,
)
from tylo.ops.attention.hopper_host import choose_config, hopper_attention
from tylo.ops.attention.hopper_kernel import (
    BLOCK,
    HopperAttentionConfig,
    block_layout,
    v_operand_layout,
)
from tylo.ops.attention.hopper_verify import verify
from tylo.ops.attention.reference import AttentionInputError, attention_reference
from tylo.tile.fragment import zeros
from tylo.tile.views import SharedTile

INTERPRET_SKIP = (  # the interpreter tier (tests/interp_tier.py)
    "sm_90a kernels (wgmma, TMA, mbarrier, setmaxnreg, clusters): the interpreter refuses "
    "these instructions by name (UnsupportedOperation; docs/interpret.md)"
)


def _heads(length: int) -> tuple[int, int]:
    """(B, H): several heads, but one at L = 4097 (the float64 reference is O(L^2) on a CPU)."""
    return (2, 3) if length < 4000 else (1, 1)


@pytest.mark.parametrize("length", [1, 17, 1000, 4097])
@pytest.mark.parametrize("d", [64, 128])
def test_square(gpu_runtime, length, d):
    verify(*_heads(length), length, d)


@pytest.mark.parametrize(
    "lq, lk", [(17, 1000), (1000, 17), (1, 4097), (4097, 300), (129, 127)], ids=str
)
@pytest.mark.parametrize("causal", [False, True])
def test_lq_differs_from_lk(gpu_runtime, lq, lk, causal):
    verify(1, 2, lq, 64, lk=lk, causal=causal)
    verify(1, 1, lq, 128, lk=lk, causal=causal, dtype="f16")


@pytest.mark.parametrize("length", [1, 17, 1000, 4097])
def test_causal(gpu_runtime, length):
    verify(*_heads(length), length, 64, causal=True)
    verify(*_heads(length), length, 128, causal=True)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d", [64, 128])
def test_key_lengths_outside_the_keys(gpu_runtime, d, causal):
    """Key lengths below 0 and past Lk (issue 34, item 4), given on the host (the host
    clamps them before the copy) and as a device int32 tensor (passed as it is: the kernel
    clamps each to [0, Lk] before it places the causal diagonal), against the reference's
    one meaning; both kernels (one-item and persistent)."""
    import torch

    lens = [-7, 95, 2**31 - 1, -(2**31), 90, 3]
    verify(6, 2, 100, d, lk=90, causal=causal, kv_lens=lens)
    verify(2, 1, 70, d, lk=130, causal=causal, kv_lens=[135, -1])
    g = torch.Generator(device="cuda")
    g.manual_seed(34)
    q = torch.randn(6, 2, 100, d, device="cuda", generator=g).to(torch.bfloat16)
    k = torch.randn(6, 2, 90, d, device="cuda", generator=g).to(torch.bfloat16)
    v = torch.randn(6, 2, 90, d, device="cuda", generator=g).to(torch.bfloat16)
    dev = torch.tensor(lens, dtype=torch.int32, device="cuda")
    for persistent in (False, True):
        cfg = choose_config(d, tylo.bf16, causal, persistent=persistent)
        out = torch.full((6, 2, 100, d), float("nan"), device="cuda", dtype=torch.bfloat16)
        lse = torch.full((6, 2, 100), float("nan"), device="cuda")
        hopper_attention(q, k, v, causal=causal, kv_lens=dev, out=out, lse=lse, cfg=cfg)
        assert_matches_reference(q, k, v, out, lse, causal=causal, kv_lens=lens)


@pytest.mark.parametrize("causal", [False, True])
def test_padding_with_empty_rows(gpu_runtime, causal):
    # entry 1 has no keys at all (every row: o = 0, lse = -inf); with causal and
    # kv_len < Lq the first Lq - kv_len rows of the others see nothing either
    verify(4, 2, 300, 64, lk=333, causal=causal, kv_lens=[333, 0, 17, 129])
    verify(3, 1, 130, 128, lk=200, causal=causal, kv_lens=[0, 200, 64], dtype="f16")


@pytest.mark.parametrize(
    "d, pingpong, overlap",
    [
        (64, True, False),
        (64, False, True),
        (128, True, False),
        (128, False, True),
        (64, True, True),
    ],
)
def test_schedules(gpu_runtime, d, pingpong, overlap):
    """The consumers taking turns at the tensor cores (named barriers) and the softmax
    overlapping P V (two wgmma groups in flight): same results, no deadlock with an odd
    number of tiles, one, none (overlap then runs one fully masked tile), masked ones only."""
    for causal in (False, True):
        # items overlapped off: it needs overlap (tests/gpu/test_attention_hopper_item_overlap.py)
        cfg = choose_config(d, tylo.bf16, causal, pingpong=pingpong, item_overlap=False)
        # d = 128 with overlap: the 64-key tile here (128 keys: test_d128_wide_overlap)
        narrow = {"bn": 64, "stages": 3} if d == 128 and overlap else {}
        cfg = dataclasses.replace(cfg, overlap=overlap, **narrow)
        verify(2, 2, 1000, d, lk=777, causal=causal, cfg=cfg)
        verify(3, 1, 129, d, lk=300, causal=causal, kv_lens=[0, 300, 5], cfg=cfg)
        verify(1, 1, 1, d, lk=4097, causal=causal, cfg=cfg)
        verify(1, 2, 200, d, lk=64, causal=causal, cfg=cfg)


def test_d128_tiles_of_both_widths(gpu_runtime):
    """d = 128 runs 128-key tiles where they compile without spills (the H200's ptxas keeps
    setmaxnreg) and 64-key tiles otherwise (choose_config decides): both are correct."""
    for causal in (False, True):
        for bn, stages in ((64, 3), (128, 2)):
            cfg = HopperAttentionConfig(d=128, causal=causal, bn=bn, stages=stages)
            verify(2, 2, 1000, 128, lk=1500, causal=causal, cfg=cfg)
            verify(2, 1, 33, 128, lk=33, causal=causal, kv_lens=[0, 20], cfg=cfg)


@pytest.mark.parametrize("persistent", [False, True], ids=["one-item", "persistent"])
@pytest.mark.parametrize("pingpong", [False, True], ids=["ov", "pp+ov"])
def test_d128_wide_overlap(gpu_runtime, pingpong, persistent):
    """d = 128 with overlap on 128-key tiles and 2 stages (FlashAttention-3's tile: S, O and
    the previous tile's P take 64 + 64 + 32 registers), O by TMA: the standard cases."""
    for causal in (False, True):
        cfg = HopperAttentionConfig(
            d=128, causal=causal, bn=128, stages=2, pingpong=pingpong,
            overlap=True, persistent=persistent, tma_store=True,
        )  # fmt: skip
        verify_standard_cases(cfg, 128, causal)


def test_strided_views_and_given_outputs(gpu_runtime):
    import torch

    b, h, lq, lk, d = 2, 3, 77, 150, 64
    # (B, L, H, D) storage seen as (B, H, L, D): the head and sequence strides are swapped
    q = torch.randn(b, lq, h, d, device="cuda").to(torch.bfloat16).transpose(1, 2)
    k = torch.randn(b, lk, h, d, device="cuda").to(torch.bfloat16).transpose(1, 2)
    v = torch.randn(b, lk, h, d, device="cuda").to(torch.bfloat16).transpose(1, 2)
    out = torch.full((b, lq, h, d), float("nan"), device="cuda").to(torch.bfloat16).transpose(1, 2)
    lse = torch.full((b, h, lq), float("nan"), device="cuda")
    o2, l2 = hopper_attention(q, k, v, scale=0.3, out=out, lse=lse)
    assert o2 is out and l2 is lse
    torch.cuda.synchronize()
    want_o, want_l = attention_reference(
        q.double().cpu().numpy(), k.double().cpu().numpy(), v.double().cpu().numpy(), scale=0.3
    )
    got = out.double().cpu().numpy()
    assert np.abs(got - want_o).max() <= 2e-2 * np.abs(want_o).max()
    assert np.abs(lse.double().cpu().numpy() - want_l).max() <= 2e-2


def test_allocates_outputs_and_refuses_what_tma_cannot_read(gpu_runtime):
    import torch

    q = torch.randn(1, 2, 40, 64, device="cuda").to(torch.float16)
    o, lse = hopper_attention(q, q, q, causal=True)
    assert o.shape == q.shape and o.dtype == q.dtype and lse.shape == (1, 2, 40)
    # key lengths as an int64 tensor on the device, and past Lk: the same as none
    o1, l1 = hopper_attention(q, q, q)
    o2, l2 = hopper_attention(q, q, q, kv_lens=torch.tensor([99], device="cuda"))
    assert torch.equal(o1, o2) and torch.equal(l1, l2)
    odd = torch.randn(1, 2, 40, 68, device="cuda").to(torch.float16)[..., :64]  # 136-byte rows
    with pytest.raises(AttentionInputError, match="path='warp'"):
        hopper_attention(odd, odd, odd)


# -- the chain alone: S by wgmma from shared memory, P = S as register A, O = P V ----------
# Small integers (exact in bf16 and f32), so the dumped accumulator must equal the float64
# product exactly, register by register, at the coordinate the PTX ISA's D fragment names.
# This isolates the two primitives the kernel is first to use on a GPU: the register-A
# wgmma fed by the proved conversion, and V read MN-major (at d = 128, with the LBO step).


@tylo.kernel
def chain_dump(
    raw, a: tylo.Ptr(align=16), b: tylo.Ptr(align=16), v: tylo.Ptr(align=16), shape: tylo.Static
):
    bn, d = shape
    cfg = HopperAttentionConfig(d=d, bn=bn, stages=1)
    s_atom = WarpgroupMMAAtom((64, bn, 16), a.dtype)
    o_atom = WarpgroupMMAAtom((64, d, 16), a.dtype, a="registers")
    smem = tylo.shared(a.dtype, 64 * BLOCK + 2 * bn * d, align=1024)
    sa = SharedTile(smem, block_layout(64, a.dtype))
    sb = SharedTile(smem, block_layout(bn, a.dtype), base=64 * BLOCK)
    sv = SharedTile(smem, v_operand_layout(cfg), base=64 * BLOCK + bn * d)
    tid = tylo.thread_idx.x
    for i in range(64 * BLOCK // 128):  # a (64, 64) and b (bn, 64), row-major
        e = tid + 128 * i
        smem[sa.offset((e // BLOCK, e % BLOCK))] = a[e]
    for i in range(bn * BLOCK // 128):
        e = tid + 128 * i
        smem[sb.offset((e // BLOCK, e % BLOCK))] = b[e]
    for i in range(bn * d // 128):  # v (bn, d), row-major: B operand coordinate (col, key)
        e = tid + 128 * i
        smem[sv.offset((e % d, e // d))] = v[e]
    fence_shared_to_async()
    tylo.sync_threads()
    fence()
    s = zeros(s_atom.c)
    for kk in range(BLOCK // 16):
        s = mma_async(s_atom, sa, sb, s, k_offset=16 * kk, accumulate=kk > 0)
    commit_group()
    s = wait_group(0, s)
    p = accumulator_as_register_a(s, o_atom)
    o = zeros(o_atom.c)
    fence()
    for ks in range(bn // 16):
        o = mma_async(o_atom, p[ks], sv, o, k_offset=16 * ks)
    commit_group()
    o = wait_group(0, o)
    for j in range(len(o)):
        raw[tid * len(o) + j] = o[j]


CHAIN = [(64, 64), (128, 64), (64, 128), (32, 128)]


def _chain_compile(shape):
    ptr = tylo.pointer(tylo.bf16, align=16)
    return chain_dump.compile(tylo.f32, ptr, ptr, ptr, shape, block=128, target="sm_90a")


def test_chain_assembly():
    sass = _chain_compile((64, 128)).sass  # d = 128: V's two column blocks (the LBO step)
    assert "F2FP" in sass and ".tnspB" in sass
    live = [line for line in sass.splitlines() if "@!PT" not in line]  # never-run padding
    assert not any(op in line for line in live for op in ("LDL", "STL", "LDS"))


def _ptx_d_coord(t: int, v: int) -> tuple[int, int]:
    """PTX ISA 9.7.15.5.1.2 (m64nNk16 D fragment): register d[v] of thread t."""
    warp, lane = divmod(t, 32)
    group, tig = divmod(lane, 4)
    return 16 * warp + group + 8 * ((v >> 1) & 1), 8 * (v >> 2) + 2 * tig + (v & 1)


@pytest.mark.parametrize("shape", CHAIN, ids=str)
def test_chain_registers_match_float64(gpu_runtime, shape):
    import torch

    bn, d = shape
    rng = np.random.default_rng()
    a = rng.integers(-1, 2, size=(64, 64)).astype(np.float64)
    b = rng.integers(-1, 2, size=(bn, 64)).astype(np.float64)
    v = rng.integers(-2, 3, size=(bn, d)).astype(np.float64)
    dev = [torch.tensor(x, dtype=torch.bfloat16, device="cuda") for x in (a, b, v)]
    raw = torch.full((128 * d // 2,), float("nan"), dtype=torch.float32, device="cuda")
    chain_dump[1, 128](raw, *dev, shape)
    torch.cuda.synchronize()
    got = raw.cpu().numpy().reshape(128, d // 2)
    want = (a @ b.T) @ v  # |S| <= 64: exact in bf16
    for t in range(128):
        for j in range(d // 2):
            assert got[t, j] == want[_ptx_d_coord(t, j)], (shape, t, j)


def test_key_lengths_made_once_and_passed_through(gpu_runtime):
    """Without kv_lens the B lengths of Lk are made once per (B, Lk, device) and reused (no
    host-to-device copy per call); a device int32 tensor is passed as it is; and results
    are still right after a call with other lengths."""
    import torch

    from tylo.ops.attention import hopper_host

    q = torch.zeros((3, 2, 5, 64), device="cuda", dtype=torch.bfloat16)
    first = hopper_host._kv_lens(None, 3, 77, q, 0)
    assert hopper_host._kv_lens(None, 3, 77, q, 0) is first
    assert first.tolist() == [77, 77, 77] and first.dtype == torch.int32
    assert hopper_host._kv_lens(None, 3, 78, q, 0).tolist() == [78] * 3
    own = torch.tensor([5, 0, 9], device="cuda", dtype=torch.int32)
    assert hopper_host._kv_lens(own, 3, 77, q, 0) is own
    wide = torch.tensor([5, 2**40, -3], device="cuda", dtype=torch.int64)  # clamped, not wrapped
    assert hopper_host._kv_lens(wide, 3, 77, q, 0).tolist() == [5, 77, 0]
    verify(2, 2, 100, 64, kv_lens=[30, 0])
    verify(2, 2, 100, 64)  # the cached full lengths again


@pytest.mark.parametrize("persistent", [False, True])
def test_remembered_preparation_follows_the_arrays(gpu_runtime, persistent):
    """The launch preparation is remembered per arrays' addresses, shapes and strides: calls
    that reuse q, k, v and out with new contents, then new arrays (some at addresses freed
    just before, as the caching allocator hands out), then a strided out and a new scale,
    each match the float64 reference, with every output poisoned first."""
    import torch

    cfg = choose_config(64, tylo.bf16, True, persistent=persistent)
    g = torch.Generator(device="cuda")
    g.manual_seed(1234)

    def check(q, k, v, out, lse, scale=None):
        out.fill_(float("nan"))
        lse.fill_(float("nan"))
        hopper_attention(q, k, v, causal=True, out=out, lse=lse, cfg=cfg, scale=scale)
        assert_matches_reference(q, k, v, out, lse, causal=True, scale=scale)

    def fresh(lq, lk):
        return tuple(torch.randn((2, 3, n, 64), device="cuda", generator=g).to(torch.bfloat16)
                     for n in (lq, lk, lk))  # fmt: skip

    q, k, v = fresh(200, 300)
    out = torch.empty_like(q)
    lse = torch.empty((2, 3, 200), device="cuda")
    check(q, k, v, out, lse)
    for t in (q, k, v):  # same arrays, new contents
        t.copy_(torch.randn(t.shape, device="cuda", generator=g).to(torch.bfloat16))
    check(q, k, v, out, lse)
    del q, k, v, out
    q, k, v = fresh(200, 300)  # likely the addresses just freed
    out = torch.empty_like(q)
    check(q, k, v, out, lse)
    q, k, v = fresh(130, 77)  # new lengths
    out, lse = torch.empty_like(q), torch.empty((2, 3, 130), device="cuda")
    check(q, k, v, out, lse, scale=0.3)
    wide = torch.empty((2, 3, 130, 72), device="cuda", dtype=torch.bfloat16)[..., :64]
    check(q, k, v, wide, lse, scale=0.3)  # out strided by 72 elements per row
