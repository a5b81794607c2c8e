"""The warp path's static configuration: block sizes, the two MMA plans, the shared layouts,
the copy plans, and everything proved about them on the host.

:class:`AttentionConfig` is the kernel's static argument (frozen, hashable). Building it
proves, before anything is traced:

- the chain: the S accumulator of ``s_plan`` (``S = Q Kᵀ``, (Br, Bc)) packed in pairs *is*
  the A operand of ``pv_plan`` (``O += P V``, K = Bc), k-step by k-step
  (:func:`tylo.nvgpu.warp.chain.prove_chain`: every thread, every slot, by brute force), so
  P never touches shared memory;
- the operand loads: Q and K through ``ldmatrix`` (rows along D), V through
  ``ldmatrix.trans`` (V is stored D-contiguous, the B operand of ``P V`` wants it
  K = key-contiguous): each row 8 contiguous elements, 16-byte aligned, and the number of
  shared-memory bank conflicts of every load (0 with the swizzle);
- the copies: every ``cp.async`` destination unique, contiguous and aligned; the stages
  inside the shared allocation.

Block sizes. One CTA of ``warps`` warps (4 by default, or 8) owns ``Br`` query rows; each
warp owns ``Br / warps`` rows of S and O, 16 or 32 (``warps = (warps, 1)``: the warps split
M only, so each thread's S rows are the rows of its O and of its P operand: the chain needs
exactly that). Q stays in registers for the whole key loop (``D / 2`` registers per 16 rows
of a warp), so 16 rows per warp (Br = 64 with 4 warps) leaves room for the S accumulator
(``Bc / 2`` f32), O (``D / 2`` f32) and the packed P: at D = 128, 32 rows per warp would
need 64 (Q) + 128 (O) + 32 (S at Bc = 32) registers before any operand, over the 255 a
thread may use. ``Bc`` = 128 at D = 64 and 64 at D = 128 keeps each K / V stage at 16 KiB
and S at 64 registers.

Why not Br = 128 with 4 warps (32 rows per warp), which halves the shared-memory reads per
MMA (each K and V fragment then feeds two ``mma.sync``)? At D = 64 it compiles without
spills, at the edge of the register file (``block_m=128, block_n=64``: 250 to 255
registers with Q in registers, 244 with ``q_in_registers=False``); at D = 128 the O
accumulator alone is 128 registers and every Bc >= 64 spills. Those configurations stay
available as options (the benchmark's ``--variants`` times them beside the default).

Eight warps (``warps=8``, Br = 128: 16 rows per warp) is FlashAttention-2's Br = 128 at
D = 128 without the spills: each thread holds what it holds at Br = 64 with 4 warps (Q 32,
O 64, S ``Bc / 2`` registers at D = 128), while one K / V block in shared memory serves
twice the query rows, which halves the K / V global loads and stage fills per query row.
What it costs: every copy is shared by 256 threads (at D = 64 a K / V block of 16 keys is
128 vectors and is refused: ``block_n`` >= 32), the barriers wait for 8 warps, and the grid
has half the query blocks (a shorter causal tail to fill, fewer CTAs at short lengths). The
register file holds about as many warps per SM either way (one 256-thread CTA or two
128-thread CTAs at 200-255 registers). Compiled for sm_80 and sm_90a, Br = 128 with Bc 64
and 128 at D = 64 and Bc 32 and 64 at D = 128 has no spills (166 to 253 registers); Bc = 128
at D = 128 is at the edge without the causal mask (252 to 254) and spills with it (255
registers and local memory): an option, not a default. Br = 256 (32 rows per warp) has
the registers of Br = 128 with 4 warps: at D = 64, Bc = 64 252 to 255 (spilling on sm_80
with both masks), at D = 128 it spills. Not measured yet: the default stays 4 warps
(:func:`default_blocks`).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any

import tylo
from tylo.layouts import Layout, Swizzle, composition
from tylo.layouts.tv import WARP_SIZE
from tylo.nvgpu.cpasync import CopyPlan
from tylo.nvgpu.errors import PlanError
from tylo.nvgpu.warp.chain import ChainProof, prove_chain
from tylo.nvgpu.warp.ldmatrix import operand_loads
from tylo.nvgpu.warp.mma import MMAAtom, TiledMMA
from tylo.target import MAX_SHARED_BYTES

__all__ = [
    "HEAD_DIMS",
    "WARPS",
    "WARP_COUNTS",
    "AttentionConfig",
    "attention_config",
    "default_blocks",
    "register_edge",
]

HEAD_DIMS = (64, 128)  # D: one m16n8k16 k-step is 16 columns; ldmatrix rows are 8
BLOCK_NS = (16, 32, 64, 128)  # Bc: multiples of the MMA's K = 16
WARPS = 4  # the default CTA: 4 warps along M (warps = (4, 1))
WARP_COUNTS = (4, 8)  # the CTAs the warp path plans: warps = (4, 1) or (8, 1)
ROWS_PER_WARP = (16, 32)  # one or two m16 repeats of the MMA atom per warp
VECTOR_BYTES = 16  # one cp.async vector
STAGES = 2  # K and V double-buffered
# the most dynamic shared memory a block may use on any target (sm_90's 227 KiB); the
# target's own limit is checked when compiling (compile_attention)
SHARED_LIMIT = MAX_SHARED_BYTES
_DTYPES = {"bf16": tylo.bf16, "f16": tylo.f16}


def default_blocks(d: int) -> tuple[int, int]:
    """(Br, Bc) for head dim ``d`` (see the module docstring for why)."""
    return (64, 128) if d == 64 else (64, 64)


def _dtype(x: Any) -> Any:
    if isinstance(x, str) and x in _DTYPES:
        return _DTYPES[x]
    if x is tylo.bf16 or x is tylo.f16:
        return x
    raise PlanError(
        f"AttentionConfig: dtype {x} is not supported; the warp path takes bf16 or f16 "
        "inputs (f32 accumulators and statistics)"
    )


def _swizzle(row_elements: int) -> Swizzle:
    """XOR the 16-byte chunk index (3 bits above the 8 elements of a chunk) with the row's
    low 3 bits: 8 consecutive rows' chunk ``c`` land in 8 different bank groups. Rows are
    ``row_elements`` long, so the row bits start at bit ``log2(row_elements)``."""
    return Swizzle(3, 3, int(math.log2(row_elements)) - 3)


@dataclass(frozen=True)
class AttentionConfig:
    """The warp path's static configuration (see the module docstring).

    ``d``: head dim (64 or 128); ``dtype``: bf16 or f16; ``block_m`` (Br: query rows per
    CTA, 16 or 32 per warp: 64 or 128 with 4 warps, 128 or 256 with 8), ``block_n`` (Bc:
    keys per block, a multiple of 16 up to 128, and at least one 16-byte ``cp.async``
    vector per thread for each K / V block); ``causal``; ``padding``: per-batch key lengths
    are given; ``aligned``: every row of q, k, v, o is 16-byte aligned (strides multiples
    of 8 elements, 16-byte aligned pointers; launches check), so the copies are 16-byte
    ``cp.async``; otherwise element by element. ``q_in_registers``: Q's A operands are
    loaded once and kept (the default); otherwise they are reloaded from shared memory at
    every k-step, which frees ``D / 2 * rows per warp / 16`` registers for larger blocks.
    ``warps``: the CTA's warps along M (4, the default, or 8), ``threads = 32 * warps``.
    ``late_copies``: each iteration issues the next key block's copies after its softmax
    (before ``P V``) rather than first; ``shared_bases``: the ``ldmatrix`` k-steps of each
    operand share one per-thread base (:func:`~tylo.nvgpu.warp.ldmatrix.load_operand`'s
    ``share_bases``). Both lower the register pressure of the tiles at the register file's
    edge (:func:`attention_config` sets them there). ``sub_n``: the keys of one softmax
    step (None: the whole block), a divisor of ``block_n`` in (16, 32, 64, 128); each step
    computes its S, softmax and ``P V`` in turn, so S holds ``sub_n`` keys while the stage
    holds ``block_n`` (every step's window of the stage is proved a translate of the
    first, so the first's ``ldmatrix`` proofs hold for all). ``lazy_rescale``: O is
    rescaled only when a score passes its row's reference maximum by more than
    ``2**LAZY_LIMIT`` (one warp vote per step; :func:`tylo.ops.attention.kernel.lazy_block`).

    >>> cfg = attention_config(64, "bf16")
    >>> cfg.block_m, cfg.block_n, cfg.chain.registers(0)
    (64, 128, ((0, 1), (2, 3), (4, 5), (6, 7)))
    >>> wide = attention_config(128, "bf16", block_m=128, block_n=64, warps=8)
    >>> wide.threads, wide.rows_per_warp, str(wide.s_plan.warps)
    (256, 16, '(8, 1)')
    """

    d: int = 64
    dtype: Any = tylo.bf16
    block_m: int = 64
    block_n: int = 128
    causal: bool = False
    padding: bool = False
    aligned: bool = True
    q_in_registers: bool = True
    warps: int = WARPS
    late_copies: bool = False
    shared_bases: bool = False
    sub_n: int | None = None
    lazy_rescale: bool = False
    proofs: dict = field(default_factory=dict, compare=False, hash=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", _dtype(self.dtype))
        if type(self.d) is not int or self.d not in HEAD_DIMS:
            raise PlanError(
                f"AttentionConfig: head dim D = {self.d!r} is not supported; the warp path "
                f"takes D in {HEAD_DIMS}"
            )
        if type(self.warps) is not int or self.warps not in WARP_COUNTS:
            raise PlanError(
                f"AttentionConfig: warps = {self.warps!r}; a CTA of 4 or 8 warps along M "
                "(an int): use 4 or 8"
            )
        rows = tuple(r * self.warps for r in ROWS_PER_WARP)
        if type(self.block_m) is not int or self.block_m not in rows:
            raise PlanError(
                f"AttentionConfig: block_m = {self.block_m!r}; {self.warps} warps own 16 or 32 "
                f"rows each: use {rows[0]} or {rows[1]}"
            )
        if type(self.block_n) is not int or self.block_n not in BLOCK_NS:
            raise PlanError(
                f"AttentionConfig: block_n = {self.block_n!r}; use 16, 32, 64 or 128 keys "
                "(a multiple of the MMA's K = 16)"
            )
        if _kv_vectors(self.block_n, self.d, self.dtype) % self.threads:
            fits = [n for n in BLOCK_NS if _kv_vectors(n, self.d, self.dtype) % self.threads == 0]
            raise PlanError(
                f"AttentionConfig: block_n = {self.block_n} at D = {self.d}: a K / V block is "
                f"{_kv_vectors(self.block_n, self.d, self.dtype)} {VECTOR_BYTES}-byte vectors, "
                f"which the {self.threads} threads of {self.warps} warps cannot share evenly; "
                f"use block_n in {tuple(fits)} or fewer warps"
            )
        if self.sub_n is not None and (
            type(self.sub_n) is not int or self.sub_n not in BLOCK_NS or self.block_n % self.sub_n
        ):
            raise PlanError(
                f"AttentionConfig: sub_n = {self.sub_n!r}; the keys each softmax step takes "
                f"must be 16, 32, 64 or 128 and divide block_n = {self.block_n} (or None)"
            )
        for flag in ("causal", "padding", "aligned", "q_in_registers", "late_copies",
                     "shared_bases", "lazy_rescale"):  # fmt: skip
            if type(getattr(self, flag)) is not bool:
                raise PlanError(f"AttentionConfig: {flag} must be a bool")
        if self.shared_bytes > SHARED_LIMIT:
            raise PlanError(
                f"AttentionConfig: {self.shared_bytes} bytes of shared memory exceed the "
                f"{SHARED_LIMIT} a block may use; use a smaller block_n"
            )

    # -- plans -----------------------------------------------------------------------------

    @property
    def rows_per_warp(self) -> int:
        """Query rows each warp owns: ``block_m / warps`` (16 or 32)."""
        return self.block_m // self.warps

    @property
    def rm(self) -> int:
        """m16 repeats per warp along M."""
        return self.rows_per_warp // 16

    @property
    def step_n(self) -> int:
        """Keys per softmax step: ``sub_n``, or the whole block (``block_n``)."""
        return self.block_n if self.sub_n is None else self.sub_n

    @property
    def steps(self) -> int:
        """Softmax steps per key block (``block_n / step_n``)."""
        return self.block_n // self.step_n

    @property
    def s_plan(self) -> TiledMMA:
        """``S = Q Kᵀ`` of one step: (Br, step_n) over K = D."""
        return _plan(self.dtype, self.warps, self.rm, self.step_n // 8, self.d)

    @property
    def pv_plan(self) -> TiledMMA:
        """``O += P V`` of one step: (Br, D) over K = step_n."""
        return _plan(self.dtype, self.warps, self.rm, self.d // 8, self.step_n)

    @property
    def chain(self) -> ChainProof:
        """The proof that S's accumulator is ``pv_plan``'s A operand, packed in pairs."""
        return prove_chain(self.s_plan.acc_ownership, self.pv_plan)

    @property
    def threads(self) -> int:
        """The CTA's threads: ``32 * warps`` (every thread takes part in every copy)."""
        return WARP_SIZE * self.warps

    # -- shared memory ---------------------------------------------------------------------

    @property
    def q_smem(self) -> Any:
        """(Br, D) -> element offset, D-contiguous rows, swizzled."""
        return composition(_swizzle(self.d), Layout((self.block_m, self.d), (self.d, 1)))

    @property
    def kv_smem(self) -> Any:
        """(Bc, D, stage) -> element offset: the K (and V) stages as copied, D-contiguous."""
        bn, d = self.block_n, self.d
        return composition(_swizzle(d), Layout((bn, d, STAGES), (d, 1, bn * d)))

    @property
    def vt_smem(self) -> Any:
        """(D, Bc, stage): the same V stages seen as the B operand of ``P V`` (N = D,
        K = Bc): contiguous along N, hence ``ldmatrix.trans``."""
        bn, d = self.block_n, self.d
        return composition(_swizzle(d), Layout((d, bn, STAGES), (1, d, bn * d)))

    @property
    def q_elements(self) -> int:
        return self.block_m * self.d

    @property
    def kv_elements(self) -> int:
        return self.block_n * self.d * STAGES

    @property
    def shared_bytes(self) -> int:
        """Q, then the K stages, then the V stages."""
        return (self.q_elements + 2 * self.kv_elements) * self.dtype.nbytes

    @property
    def copy_q(self) -> CopyPlan:
        return _copy((self.block_m, self.d), self.dtype, self.threads, self.q_smem)

    @property
    def copy_kv(self) -> CopyPlan:
        return _copy((self.block_n, self.d), self.dtype, self.threads, _stage(self.kv_smem))

    def grid(self, b: int, h: int, lq: int) -> tuple[int, int, int]:
        """(query blocks, heads, batch)."""
        return -(-lq // self.block_m), h, b

    def describe(self) -> str:
        return (
            f"D={self.d} {self.dtype}, Br={self.block_m} x Bc={self.block_n}, "
            f"{'' if self.warps == WARPS else f'{self.warps} warps, '}"
            f"{'causal' if self.causal else 'full'}"
            f"{', per-batch key lengths' if self.padding else ''}, "
            f"{'16-byte' if self.aligned else 'element-wise'} copies, "
            f"Q {'in registers' if self.q_in_registers else 'from shared memory'}, "
            f"{'late copies, ' if self.late_copies else ''}"
            f"{'shared ldmatrix bases, ' if self.shared_bases else ''}"
            f"{f'steps of {self.sub_n} keys, ' if self.sub_n is not None else ''}"
            f"{'lazy rescale, ' if self.lazy_rescale else ''}"
            f"{self.shared_bytes // 1024} KiB smem"
        )


@functools.lru_cache(maxsize=32)
def _plan(dtype: Any, warps: int, rm: int, rn: int, k: int) -> TiledMMA:
    return TiledMMA(MMAAtom((16, 8, 16), dtype), warps=(warps, 1), repeat=(rm, rn), k=k)


def _kv_vectors(block_n: int, d: int, dtype: Any) -> int:
    """16-byte ``cp.async`` vectors in one (Bc, D) K or V block."""
    return block_n * d * dtype.nbytes // VECTOR_BYTES


@functools.lru_cache(maxsize=32)
def _copy(shape: tuple, dtype: Any, threads: int, smem: Any) -> CopyPlan:
    return CopyPlan(shape, dtype, threads, smem)


def _stage(layout: Any) -> Any:
    """One stage (the first two modes) of a staged swizzled layout."""
    inner = layout.inner
    return composition(layout.outer, Layout(inner.shape[:2], inner.stride[:2]))


def _step(layout: Any, n: int, axis: int) -> Any:
    """The first softmax step's window of one stage of a staged swizzled layout: ``n``
    keys along ``axis`` (0 for K as (Bc, D), 1 for V as (D, Bc))."""
    inner = layout.inner
    shape = tuple(n if a == axis else x for a, x in enumerate(inner.shape[:2]))
    return composition(layout.outer, Layout(shape, inner.stride[:2]))


def _prove_steps(cfg: AttentionConfig) -> bool:
    """Every softmax step's window of a K / V stage is the first step's, moved by a
    constant: the swizzle leaves the step's key offset alone (``sub_n`` a multiple of its
    8-row period), so the first step's ``ldmatrix`` proofs and bank conflicts hold for
    every step. Checked element by element; a :class:`PlanError` otherwise."""
    stage, first = _stage(cfg.kv_smem), _step(cfg.kv_smem, cfg.step_n, 0)
    sn, d = cfg.step_n, cfg.d
    for j in range(cfg.steps):
        shift = stage(j * sn, 0)
        for r in range(sn):
            for c in range(d):
                if stage(j * sn + r, c) != shift + first(r, c):
                    raise PlanError(
                        f"attention_config: step {j} of {cfg.steps} ({sn} keys) is not a "
                        f"translate of the first at key {r}, column {c}"
                    )
    return True


# --8<-- [start:config]
def attention_config(
    d: int,
    dtype: Any = "bf16",
    *,
    causal: bool = False,
    padding: bool = False,
    aligned: bool = True,
    block_m: int | None = None,
    block_n: int | None = None,
    q_in_registers: bool = True,
    warps: int | None = None,
    late_copies: bool | None = None,
    shared_bases: bool | None = None,
    sub_n: int | None = None,
    lazy_rescale: bool | None = None,
) -> AttentionConfig:
    """Plan the warp path on the host and prove what the kernel relies on (the module
    docstring lists it); the verdicts are in ``cfg.proofs``. ``warps``: None for the
    default CTA (4 warps); ``block_m`` / ``block_n`` left None take :func:`default_blocks`,
    with Br scaled to keep its rows per warp (8 warps: Br = 128). ``late_copies`` and
    ``shared_bases`` left None are :func:`register_edge`'s verdict.

    >>> cfg = attention_config(128, "f16", causal=True)
    >>> cfg.proofs["V ldmatrix.trans bank conflicts"], cfg.pv_plan.k
    (0, 64)
    >>> attention_config(128, "f16", warps=8).describe()[:40]
    'D=128 f16, Br=128 x Bc=64, 8 warps, full'
    """
    br, bc = default_blocks(d) if d in HEAD_DIMS else (64, 64)
    if type(warps) is int and warps in WARP_COUNTS:  # others: AttentionConfig says why
        br = br // WARPS * warps  # the default's rows per warp
    br = br if block_m is None else block_m
    bc = bc if block_n is None else block_n
    warps = WARPS if warps is None else warps
    edge = register_edge(d, br, bc, q_in_registers, warps)
    cfg = AttentionConfig(
        d, dtype, br, bc, causal, padding, aligned, q_in_registers, warps,
        edge if late_copies is None else late_copies,
        edge if shared_bases is None else shared_bases, sub_n,
        False if lazy_rescale is None else lazy_rescale,
    )  # fmt: skip
    return _prove(cfg)


def register_edge(d: Any, block_m: Any, block_n: Any, q_in_registers: Any, warps: Any) -> bool:
    """Whether a tile is at the register file's edge, where :class:`AttentionConfig`'s
    ``late_copies`` and ``shared_bases`` pay: D = 128 with 32 rows per warp, Q from shared
    memory and Bc <= 64 (each thread holds 128 O accumulators). Anything else, including
    arguments ``AttentionConfig`` refuses, is not an edge tile.

    Compiled by ptxas 13.0 for sm_90a, Br = 128 x Bc = 64 there spills 192 / 268 bytes
    (without / with the causal mask) with neither and 0 / 16 with both (the warp kernel's
    two-step mask limit, ``mask.score_mask(split=True)``; 48 / 24 with key lengths, 12-60
    on sm_80), so it stays an option, not a default. On an H200 (2026-12-02,
    ``benchmarks/attention.py --d 128 --variants``) it runs at 311-344 TFLOP/s without the
    mask (1.05-1.06x the 64 x 64 default, 0.93-0.97x FlashAttention-2) and 245-359 with it
    (1.02-1.06x the default, 0.99-1.13x FlashAttention-2). On the
    64 x 64 default (16 rows per warp, Q in registers) they measured slower: 0.92-0.99x
    with ``shared_bases`` alone, 0.88-0.92x with both; there they stay off."""
    plain = all(type(x) is int for x in (d, block_m, block_n, warps))
    if not plain or type(q_in_registers) is not bool:
        return False
    return d == 128 and warps * 32 == block_m and not q_in_registers and block_n <= 64


@functools.lru_cache(maxsize=64)
def _prove(cfg: AttentionConfig) -> AttentionConfig:
    from tylo.layouts.proofs import prove_bounded

    proofs = cfg.proofs
    s, pv = cfg.s_plan, cfg.pv_plan
    proofs["chain: S accumulator = P V's A operand, packed in pairs"] = cfg.chain
    for name, layout, span in (("Q", cfg.q_smem, cfg.q_elements),
                               ("K/V", cfg.kv_smem, cfg.kv_elements),
                               ("V as (D, Bc)", cfg.vt_smem, cfg.kv_elements)):  # fmt: skip
        v = prove_bounded(layout, extent=span)
        if not v:
            raise PlanError(
                f"attention_config: {name} stages {layout} leave their span: {v.reason}"
            )
        proofs[f"{name} stages within their {span * cfg.dtype.nbytes} shared bytes"] = v
    for name, cp in (("Q", cfg.copy_q), ("K/V", cfg.copy_kv)):
        for what, v in cp.proofs.items():
            proofs[f"{name} copy: {what}"] = v
        proofs[f"{name} cp.async bank conflicts"] = cp.bank_conflicts()
    for name, plan, op, layout, axis in (
        ("Q", s, "a", cfg.q_smem, 1),
        ("K", s, "b", _step(cfg.kv_smem, cfg.step_n, 0), 1),
        ("V", pv, "b", _step(cfg.vt_smem, cfg.step_n, 1), 0),
    ):
        loads = operand_loads(plan, op, axis)
        form = "ldmatrix.trans" if loads.trans else "ldmatrix"
        for what, v in loads.prove(layout).items():
            proofs[f"{name} {what}"] = v
        proofs[f"{name} {form} bank conflicts"] = loads.bank_conflicts(layout)
    if cfg.steps > 1:
        proofs["K/V steps: translates of the first"] = _prove_steps(cfg)
    if operand_loads(pv, "b", 0).trans is not True:
        raise PlanError("attention_config: V must load with ldmatrix.trans")  # by construction
    for what, v in s.proofs.items():
        proofs[f"S MMA: {what}"] = v
    for what, v in pv.proofs.items():
        proofs[f"PV MMA: {what}"] = v
    return cfg


# --8<-- [end:config]
