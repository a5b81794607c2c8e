"""The warp path of tylo/ops/attention compiled for sm_80 and sm_90a without a GPU, every
configuration it ships (D 64 and 128, causal or not, per-batch key lengths or not): the
assembly has tensor-core ``HMMA`` for both products, ``LDSM`` in the transposed form
(``LDSM.16.MT88``: V through ``ldmatrix.trans``) beside the plain one (Q and K), ``SHFL`` (the
row reductions), ``MUFU.EX2`` (``exp2``), ``LDGSTS`` (``cp.async``), no local memory (``LDL``
/ ``STL``) and no shared-memory round trip of P (no ``STS`` / ``LDS`` at all: shared memory is
written by ``cp.async`` and read by ``ldmatrix`` only); at most 255 registers, no spills. The
same for CTAs of 8 warps with Br = 128 (D 64: Bc 64 and 128; D 128: Bc 32 and 64)."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tylo.ops.attention.config import attention_config  # noqa: E402
from tylo.ops.attention.host import compile_attention  # noqa: E402

_LINE = re.compile(r"^\s*/\*[0-9a-f]+\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]+)", re.MULTILINE)
TARGETS = ("sm_80", "sm_90a")
CONFIGS = [
    (d, causal, padding) for d in (64, 128) for causal in (False, True) for padding in (False, True)
]


def executed(sass: str) -> list[str]:
    """Opcodes in program order, without ptxas's never-executed ``@!PT`` padding."""
    return [op for pred, op in _LINE.findall(sass) if pred.strip() != "@!PT"]


@pytest.fixture(scope="module")
def compiled():
    """Every (config, target) compiled once for the whole module."""
    cache: dict = {}

    def get(d, causal, padding, target, dtype="bf16", **kw):
        cfg = attention_config(d, dtype, causal=causal, padding=padding, **kw)
        key = (cfg, target)
        if key not in cache:
            cache[key] = (cfg, compile_attention(cfg, target))
        return cache[key]

    return get


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize(("d", "causal", "padding"), CONFIGS)
def test_assembly(compiled, d, causal, padding, target):
    cfg, k = compiled(d, causal, padding, target)
    seq = executed(k.sass)
    ops = Counter(op.split(".")[0] for op in seq)
    # two loop bodies (whole blocks, masked blocks), each S = Q K^T and O += P V
    per_body = 2 * (cfg.block_m // 64) * cfg.block_n * d // 128
    assert ops["HMMA"] == 2 * per_body, ops["HMMA"]
    assert "HMMA.16816.F32.BF16" in k.sass
    assert any(op.startswith("LDSM.16.MT88") for op in seq)  # V: ldmatrix.trans
    assert any(op.startswith("LDSM.16.M88") for op in seq)  # Q, K
    assert "MUFU.EX2" in seq and ops["SHFL"] >= 4 and ops["LDGSTS"] >= 1
    assert ops["LDL"] == 0 and ops["STL"] == 0, ops
    assert ops["STS"] == 0 and ops["LDS"] == 0, ops  # P stays in registers
    # P packed as the A operand (cvt.rn.bf16x2.f32): every register of both bodies
    packs = 2 * (cfg.block_m // 64) * cfg.block_n // 4
    assert ops["F2FP"] >= packs
    r = k.resources
    assert r.registers <= 255 and (r.spill_stores, r.spill_loads, r.stack_bytes) == (0, 0, 0)
    assert r.shared_bytes == 0  # all of it dynamic: cfg.shared_bytes at launch


# 8 warps, Br = 128 (16 rows per warp, the registers of Br = 64 with 4): D -> Bc
EIGHT_WARPS = [(64, 64), (64, 128), (128, 32), (128, 64)]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(("d", "bn"), EIGHT_WARPS)
def test_eight_warp_assembly(compiled, d, bn, causal, target):
    """A CTA of 8 warps (256 threads): each warp's MMAs are those of a 4-warp Br = 64 CTA
    (one m16 repeat), so the HMMA count per thread is the same formula in ``cfg.rm``; V
    still through ``ldmatrix.trans``, P still in registers, no local memory."""
    cfg, k = compiled(d, causal, False, target, block_m=128, block_n=bn, warps=8)
    assert cfg.threads == 256 and cfg.rm == 1
    seq = executed(k.sass)
    ops = Counter(op.split(".")[0] for op in seq)
    assert ops["HMMA"] == 2 * cfg.rm * bn * d // 64, ops["HMMA"]  # two loop bodies
    assert "HMMA.16816.F32.BF16" in k.sass
    assert any(op.startswith("LDSM.16.MT88") for op in seq)  # V: ldmatrix.trans
    assert any(op.startswith("LDSM.16.M88") for op in seq)  # Q, K
    assert "MUFU.EX2" in seq and ops["SHFL"] >= 4 and ops["LDGSTS"] >= 1
    assert ops["LDL"] == 0 and ops["STL"] == 0, ops
    assert ops["STS"] == 0 and ops["LDS"] == 0, ops
    assert ops["F2FP"] >= 2 * cfg.rm * bn // 4
    r = k.resources
    assert r.registers <= 255 and (r.spill_stores, r.spill_loads, r.stack_bytes) == (0, 0, 0)
    assert r.shared_bytes == 0


@pytest.mark.parametrize(
    ("d", "kw"),
    [
        (64, {"block_m": 128, "block_n": 64}),
        (64, {"block_m": 128, "block_n": 64, "q_in_registers": False}),
        (128, {"block_m": 64, "block_n": 32}),
    ],
)
def test_optional_block_sizes_do_not_spill(compiled, d, kw):
    """The variants the benchmark times: Q reloaded from shared memory shows as more LDSM
    (the A operand's, every k-step of every block), and still no local memory."""
    cfg, k = compiled(d, True, True, "sm_90a", **kw)
    ops = Counter(op.split(".")[0] for op in executed(k.sass))
    r = k.resources
    assert (r.spill_stores, r.spill_loads, r.stack_bytes) == (0, 0, 0) and ops["LDL"] == 0
    assert ops["HMMA"] == 2 * 2 * (cfg.block_m // 64) * cfg.block_n * d // 128
    if not cfg.q_in_registers:
        _, base = compiled(d, True, True, "sm_90a", block_m=cfg.block_m, block_n=cfg.block_n)
        more = Counter(op.split(".")[0] for op in executed(base.sass))
        assert ops["LDSM"] > more["LDSM"]


def test_f16_compiles_with_f16_mma(compiled):
    _, k = compiled(64, True, False, "sm_80", "f16")
    assert "HMMA.16816.F32" in k.sass and "BF16" not in k.sass
    assert k.ptx.count("cvt.rn.f16x2.f32") >= 2 * 128 // 4


def test_exp2_is_the_approximate_unit_with_the_scale_folded(compiled):
    """``exp2(fma(s, c, -m c))``: ex2.approx in the PTX, one FFMA feeding each MUFU.EX2."""
    _, k = compiled(64, False, False, "sm_80")
    assert "ex2.approx" in k.ptx and "ex.approx" not in k.ptx.replace("ex2.approx", "")
    assert "fma.rn.f32" in k.ptx


def test_cli_compile_only_prints_the_proofs():
    out = subprocess.run(
        [sys.executable, "-m", "tylo.ops.attention", "2", "3", "100", "64",
         "--lk", "37", "--causal", "--kv-lens", "5,0", "--compile-only", "--target", "sm_80"],
        check=False, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "chain: S accumulator = P V's A operand, packed in pairs: proved" in out.stdout
    assert "V ldmatrix.trans bank conflicts: 0" in out.stdout
    assert "spills 0/0" in out.stdout


def test_cli_refuses_wrong_key_lengths_in_one_line():
    out = subprocess.run(
        [sys.executable, "-m", "tylo.ops.attention", "2", "1", "8", "64",
         "--kv-lens", "5", "--compile-only"],
        check=False, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert "--kv-lens: give B = 2 lengths" in out.stderr and out.stdout == ""


@pytest.mark.parametrize("causal", [False, True])
def test_register_edge_flags_cut_the_spills(compiled, causal):
    """D = 128, Br = 128 x Bc = 64, Q from shared memory (an option, not a default: it
    still spills a little): ``late_copies`` and ``shared_bases``, on there by default, leave
    ptxas fewer bytes to spill than with both off, and ``shared_bases`` shows in the PTX as
    the XOR of a shared base with a constant (a k-step's offset through the swizzle)."""
    kw = {"block_m": 128, "block_n": 64, "q_in_registers": False}
    cfg, edge = compiled(128, causal, False, "sm_90a", **kw)
    assert cfg.late_copies and cfg.shared_bases
    _, off = compiled(128, causal, False, "sm_90a", late_copies=False, shared_bases=False, **kw)
    assert edge.resources.spill_stores < off.resources.spill_stores
    xor_imm = re.compile(r"xor\.b32\s+%r\d+,\s*%r\d+,\s*-?\d+;")
    # K and Q: 7 k-steps past the first share its base, per loop body
    assert len(xor_imm.findall(edge.ptx)) >= 2 * 7 > len(xor_imm.findall(off.ptx))


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_the_stepped_tile(compiled, dtype):
    """The sm_90 default at D = 128 without masks (``host.STEPPED_128``: 32 rows per warp,
    Q in registers, 64-key blocks in softmax steps of 16 keys, lazy rescale): no local
    memory on sm_90a; per loop body 4 steps of 32 ``HMMA`` for S and 32 for P V, and one
    ``VOTE.ANY`` per step (the lazy rescale's test; no other vote in the kernel); P still
    packed in registers (no STS / LDS), V still through ``ldmatrix.trans``."""
    from tylo.ops.attention.host import STEPPED_128

    cfg, k = compiled(128, False, False, "sm_90a", dtype, **STEPPED_128)
    seq = executed(k.sass)
    ops = Counter(op.split(".")[0] for op in seq)
    r = k.resources
    assert r.registers <= 255 and (r.spill_stores, r.spill_loads, r.stack_bytes) == (0, 0, 0)
    assert ops["LDL"] == 0 and ops["STL"] == 0 and ops["STS"] == 0 and ops["LDS"] == 0, ops
    steps = cfg.steps * 2  # two loop bodies (whole blocks, masked blocks)
    assert cfg.steps == 4 and ops["HMMA"] == steps * (32 + 32), ops["HMMA"]
    assert ops["VOTE"] == steps, ops["VOTE"]
    assert any(op.startswith("LDSM.16.MT88") for op in seq) and "MUFU.EX2" in seq


def test_the_stepped_tile_is_not_for_sm80(compiled):
    """Why ``launch_options`` keeps it to sm_90 and later: ptxas 13.0 spills it on sm_80."""
    from tylo.ops.attention.host import STEPPED_128

    _, k = compiled(128, False, False, "sm_80", **STEPPED_128)
    assert k.resources.spill_stores > 0
