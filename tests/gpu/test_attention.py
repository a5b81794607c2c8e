# TEST_TARGET: cc>=8.0
"""tylo/ops/attention's warp path on the GPU against the float64 reference, on fresh random
data with ``out`` and ``lse`` poisoned with NaN first (an element never written fails):
relative max-norm error of ``o`` <= 1e-2, ``lse`` within 1e-3 where finite and ``-inf``
exactly where the reference has no visible key. L = 1, 17, 1000, 4097; Lq != Lk both ways;
D 64 and 128; bf16 and f16; causal (bottom-right aligned) and per-batch key lengths with
some rows that see nothing; strided (B, L, H, D) storage and padded rows; rows whose stride
is not a multiple of 8 elements (element-wise copies); torch tensors. The same for CTAs of 8
warps (``warps=8``: Br = 128, and 256 with 32 rows per warp), and for the softmax in steps
(``sub_n``) with and without the lazy rescale (``lazy_rescale``), the sm_90 default at D = 128
among them, at scales that make the rescale's vote pass on most steps and on none."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tylo.ops.attention.host import STEPPED_128, attention, verify  # noqa: E402

# the interpreter tier (tests/interp_tier.py) runs the shapes up to L = 130; the others:
INTERPRET_SKIP = (
    "runs a shape with L >= 200 (several with 1000 or 4097): too slow for the interpreter "
    "tier, which runs this file's tests whose shapes stay within L = 130"
)
TORCH_CUDA = "makes torch CUDA tensors; the interpreter takes CPU tensors"


@pytest.mark.interpret(when=lambda length, **_: length <= 17)
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("length", [1, 17, 1000, 4097])
def test_lengths(gpu_runtime, d, length):
    heads = 2 if length > 1000 else 3
    verify(1 if length > 1000 else 2, heads, length, d)


@pytest.mark.interpret(when=lambda lq, lk, **_: max(lq, lk) <= 130)
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(("lq", "lk"), [(17, 1000), (1000, 17), (1, 4097), (4097, 130), (64, 64)])
def test_lq_differs_from_lk(gpu_runtime, d, causal, lq, lk):
    verify(2, 2, lq, d, lk=lk, causal=causal)


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
@pytest.mark.parametrize("causal", [False, True])
def test_dtypes(gpu_runtime, dtype, causal):
    verify(2, 3, 333, 64, lk=517, dtype=dtype, causal=causal)
    verify(1, 2, 200, 128, dtype=dtype, causal=causal)


@pytest.mark.interpret(when=lambda d, causal: d == 64 and causal)
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_key_lengths_outside_the_keys(gpu_runtime, d, causal):
    """Key lengths below 0 and past Lk (issue 34, item 4): the kernel clamps each to
    [0, Lk] before it places the causal diagonal, as the reference does (a length of Lk + 5
    masks as Lk, a negative one as 0: every row of that entry empty)."""
    lens = [-7, 95, 2**31 - 1, -(2**31), 90, 3]
    verify(6, 2, 100, d, lk=90, causal=causal, kv_lens=lens)
    verify(2, 1, 70, d, lk=130, causal=causal, kv_lens=[135, -1])  # Lq < Lk


@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_key_lengths_with_empty_rows(gpu_runtime, d, causal):
    """Batch entries with no keys (all rows empty: zero output, lse -inf), a partial last
    block, a key length of exactly one block, and (causal, Lq > kv_len) leading rows that see
    nothing."""
    lens = [0, 1, 77, 128, 300, 64]
    verify(6, 2, 300, d, lk=300, causal=causal, kv_lens=lens)
    verify(3, 1, 1000, d, lk=1000, causal=causal, kv_lens=[999, 0, 3])


@pytest.mark.parametrize(("d", "causal"), [(64, False), (128, True)])
def test_strided_inputs(gpu_runtime, d, causal):
    """(B, L, H, D) storage seen as (B, H, L, D), and rows padded by 8 elements."""
    verify(2, 3, 257, d, lk=300, layout="blhd", causal=causal)
    verify(2, 3, 257, d, lk=300, layout="bhld", pad=8, causal=causal)
    verify(2, 3, 100, d, lk=90, layout="blhd", pad=16, causal=causal, kv_lens=[50, 0])


@pytest.mark.interpret
def test_unaligned_rows_copy_element_wise(gpu_runtime):
    res = verify(1, 2, 130, 64, lk=70, layout="bhld", pad=1)  # row stride 65
    assert res["error"] <= 1e-2
    verify(1, 2, 130, 128, lk=70, layout="blhd", pad=3, causal=True)


@pytest.mark.parametrize(
    ("d", "blocks", "q_regs"),
    [(64, (128, 64), True), (64, (128, 64), False), (64, (64, 64), True), (128, (64, 32), True),
     (128, (64, 64), False)],
)  # fmt: skip
def test_other_block_sizes(gpu_runtime, d, blocks, q_regs):
    bm, bn = blocks
    kw = {"block_m": bm, "block_n": bn, "q_in_registers": q_regs}
    verify(2, 2, 300, d, lk=333, causal=True, **kw)
    verify(2, 2, 300, d, lk=333, kv_lens=[1, 200], **kw)
    verify(1, 2, 1000, d, lk=17, causal=True, **kw)


@pytest.mark.parametrize("bn", [32, 64])
def test_register_edge_tiles(gpu_runtime, bn):
    """D = 128, 32 rows per warp, Q from shared memory: the tiles where ``late_copies`` and
    ``shared_bases`` are on (``config.register_edge``): every mask, Lq != Lk, f16."""
    from tylo.ops.attention.config import attention_config

    kw = {"block_m": 128, "block_n": bn, "q_in_registers": False}
    cfg = attention_config(128, "bf16", **kw)
    assert cfg.late_copies and cfg.shared_bases
    for case in [{"causal": True}, {"kv_lens": [1, 200]}, {"causal": True, "kv_lens": [0, 90]}]:
        verify(2, 2, 300, 128, lk=333, **case, **kw)
    verify(1, 2, 1000, 128, lk=17, causal=True, **kw)
    verify(1, 2, 17, 128, lk=1000, **kw)
    verify(1, 2, 4097, 128, dtype="f16", **kw)


# the softmax in steps (sub_n) with the lazy rescale: the sm_90 default at D = 128 without
# masks (host.STEPPED_128), and the same options on other tiles
STEPPED = [
    (128, STEPPED_128),
    (128, {"block_m": 128, "block_n": 32, "sub_n": 16, "lazy_rescale": True,
           "shared_bases": True}),
    (64, {"block_m": 128, "block_n": 64, "sub_n": 32, "lazy_rescale": True}),
    (64, {"block_m": 64, "block_n": 128, "sub_n": 32}),  # steps, each rescaling O
    (128, {"block_m": 64, "block_n": 64, "lazy_rescale": True}),  # one step per block
]  # fmt: skip
STEPPED_INTERPRETED = [STEPPED[0][1], STEPPED[2][1]]  # the interpreter tier's two


@pytest.mark.interpret(when=lambda length, d, kw: length <= 17 and kw in STEPPED_INTERPRETED)
@pytest.mark.parametrize(("d", "kw"), STEPPED)
@pytest.mark.parametrize("length", [1, 17, 1000, 4097])
def test_steps_lengths(gpu_runtime, d, kw, length):
    verify(1 if length > 1000 else 2, 2, length, d, **kw)


@pytest.mark.parametrize(("d", "kw"), STEPPED)
@pytest.mark.parametrize("causal", [False, True])
def test_steps_masks_and_shapes(gpu_runtime, d, kw, causal):
    """Every mask (the steps of a masked block each take their own 16 / 32 keys of it), Lq
    != Lk both ways, rows that see nothing, f16, element-wise copies."""
    verify(2, 2, 1000, d, lk=4097, causal=causal, **kw)
    verify(1, 2, 4097, d, lk=130, causal=causal, **kw)
    verify(2, 3, 17, d, lk=1000, causal=causal, **kw)
    verify(3, 2, 333, d, lk=500, kv_lens=[0, 17, 499], causal=causal, dtype="f16", **kw)
    verify(1, 2, 130, d, lk=70, pad=1, causal=causal, **kw)  # row stride d + 1


@pytest.mark.parametrize(("d", "kw"), STEPPED)
@pytest.mark.parametrize("scale", [0.01, 3.0])
def test_steps_scales(gpu_runtime, d, kw, scale):
    """A scale of 3 (scores of several dozen in log2 units: the lazy rescale's vote passes
    often, on most steps) and of 0.01 (never after the first step)."""
    verify(1, 2, 257, d, lk=1000, scale=scale, **kw)
    verify(1, 2, 257, d, lk=1000, scale=scale, causal=True, **kw)


@pytest.mark.parametrize("group", [1, 2, 3, 64])
@pytest.mark.parametrize("d", [64, 128])
def test_causal_groups(gpu_runtime, monkeypatch, group, d):
    """The causal launch's longest-first order (kernel.causal_order) with groups of 1, 2
    and 3 (batch, head)s (5 and 6 of them: a smaller last group) and the whole launch:
    every CTA's rows are written once (outputs poisoned first), with every mask."""
    from tylo.ops.attention import host

    monkeypatch.setattr(host, "CAUSAL_GROUPS", {64: group, 128: group})
    monkeypatch.setattr(host, "_PLANS", host.Remembered(64))  # plans made with this group
    verify(5, 1, 300, d, lk=333, causal=True)
    verify(2, 3, 1000, d, causal=True, kv_lens=[0, 700])
    verify(3, 2, 129, d, lk=127, causal=True, block_m=64, block_n=64)


# CTAs of 8 warps, Br = 128 (16 rows per warp): D -> Bc (tests/nvvm compiles the same ones)
EIGHT_WARPS = [(64, 64), (64, 128), (128, 32), (128, 64)]


@pytest.mark.parametrize(("d", "bn"), EIGHT_WARPS)
@pytest.mark.parametrize("length", [1, 17, 1000, 4097])
def test_eight_warps_lengths(gpu_runtime, d, bn, length):
    kw = {"block_m": 128, "block_n": bn, "warps": 8}
    b = 1 if length > 1000 else 2
    verify(b, 2 if length > 1000 else 3, length, d, **kw)
    verify(b, 2, length, d, causal=True, **kw)


@pytest.mark.interpret(when=lambda lq, lk, d, bn, **_: max(lq, lk) <= 130 and d == bn == 64)
@pytest.mark.parametrize(("d", "bn"), EIGHT_WARPS)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(("lq", "lk"), [(17, 1000), (1000, 17), (1, 4097), (4097, 130), (128, 128)])
def test_eight_warps_lq_differs_from_lk(gpu_runtime, d, bn, causal, lq, lk):
    verify(2, 2, lq, d, lk=lk, causal=causal, block_m=128, block_n=bn, warps=8)


@pytest.mark.parametrize(("d", "bn"), EIGHT_WARPS)
@pytest.mark.parametrize("causal", [False, True])
def test_eight_warps_key_lengths_with_empty_rows(gpu_runtime, d, bn, causal):
    """As :func:`test_key_lengths_with_empty_rows`, with 8 warps: entries with no key, a
    partial last block, a length of exactly one block, leading causal rows that see
    nothing."""
    kw = {"block_m": 128, "block_n": bn, "warps": 8}
    verify(6, 2, 300, d, lk=300, causal=causal, kv_lens=[0, 1, 77, 128, 300, bn], **kw)
    verify(3, 1, 1000, d, lk=1000, causal=causal, kv_lens=[999, 0, 3], **kw)


@pytest.mark.parametrize(
    ("d", "kw"),
    [(64, {"warps": 8}), (128, {"warps": 8}),  # Br = 128 and the default Bc for D
     (64, {"block_m": 256, "block_n": 64, "warps": 8}),  # 32 rows per warp
     (64, {"block_m": 128, "block_n": 64, "warps": 8, "q_in_registers": False}),
     (128, {"block_m": 128, "block_n": 64, "warps": 8, "q_in_registers": False})],
)  # fmt: skip
def test_eight_warps_other_shapes_dtypes_and_layouts(gpu_runtime, d, kw):
    verify(2, 2, 300, d, lk=333, causal=True, dtype="f16", **kw)
    verify(2, 3, 257, d, lk=300, layout="blhd", kv_lens=[300, 0], **kw)
    verify(1, 2, 130, d, lk=70, layout="bhld", pad=1, causal=True, **kw)  # element-wise copies


def test_large_scores_stay_finite(gpu_runtime):
    """Scores of several hundred: the running maximum keeps every exponent <= 0."""
    verify(1, 2, 300, 64, lk=500, scale=8.0, causal=True, tolerance=2e-2)


@pytest.mark.interpret(skip=TORCH_CUDA)
@pytest.mark.parametrize("dtype", ["bf16", "f16"])
@pytest.mark.parametrize(("d", "kw"), [(64, {}), (128, {}), (128, STEPPED_128)])
def test_rising_scores(gpu_runtime, dtype, d, kw):
    """Scores that rise along the keys by about 87 log2 units over the sequence, so that
    every key block raises every row's running maximum and O is rescaled by a factor far
    from 1 at each (random data raises it rarely after the first blocks)."""
    torch = pytest.importorskip("torch", reason="torch is not installed")
    from tylo.ops.attention.reference import attention_reference

    g = torch.Generator(device="cuda").manual_seed(1)
    tdt = torch.bfloat16 if dtype == "bf16" else torch.float16
    lq, lk = 200, 1000
    u = torch.ones(d, device="cuda") / d**0.5  # |u| = 1
    noise = 0.1 * torch.randn((1, 2, lq, d), device="cuda", generator=g)
    q = (6.0 * d**0.5 / 8 * u + noise).to(tdt)  # q . u ~ 6 sqrt(d) / 8
    ramp = torch.linspace(0.0, 80.0, lk, device="cuda")[None, None, :, None]
    k = (ramp * u).expand(1, 2, lk, d).to(tdt)  # q . k / sqrt(d) rises to ~ 60: ~ 87 in log2
    v = torch.randn((1, 2, lk, d), device="cuda", generator=g).to(tdt)
    o, lse = attention(q, k, v, path="warp", **kw)
    torch.cuda.synchronize()
    ref_o, ref_lse = attention_reference(*(x.float().cpu().numpy() for x in (q, k, v)))
    got = o.float().cpu().numpy()
    assert np.isfinite(got).all()
    assert np.abs(got - ref_o).max() <= 1e-2 * np.abs(ref_o).max()
    assert np.abs(lse.cpu().numpy() - ref_lse).max() <= 1e-3


@pytest.mark.interpret(skip=TORCH_CUDA)
def test_torch_tensors_and_allocated_outputs(gpu_runtime):
    torch = pytest.importorskip("torch", reason="torch is not installed")
    from tylo.ops.attention.reference import attention_reference

    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (
        torch.randn((2, 77, 3, 64), device="cuda", dtype=torch.bfloat16, generator=g).transpose(
            1, 2
        )
        for _ in range(3)
    )
    lens = torch.tensor([77, 5], dtype=torch.int32, device="cuda")
    o, lse = attention(q, k, v, causal=True, kv_lens=lens)
    torch.cuda.synchronize()
    ref_o, ref_lse = attention_reference(
        *(x.float().cpu().numpy() for x in (q, k, v)), causal=True, kv_lens=[77, 5]
    )
    got = o.float().cpu().numpy()
    assert o.dtype == torch.bfloat16 and lse.dtype == torch.float32
    assert np.abs(got - ref_o).max() <= 1e-2 * np.abs(ref_o).max()
    fin = np.isfinite(ref_lse)
    assert np.abs(lse.cpu().numpy()[fin] - ref_lse[fin]).max() <= 1e-3


def test_cli_runs_and_verifies(gpu_runtime):
    import subprocess

    out = subprocess.run(
        [sys.executable, "-m", "tylo.ops.attention", "2", "2", "300", "128",
         "--lk", "200", "--causal", "--kv-lens", "150,0", "--dtype", "f16", "--layout", "blhd"],
        check=False, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "attention: OK" in out.stdout
