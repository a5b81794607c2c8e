"""The Hopper attention forward's configuration (:class:`HopperAttentionConfig`) and the
shared-memory layouts it fixes: the 128-byte swizzle, a column block as TMA writes it and
wgmma reads it, V as wgmma's MN-major B operand. The kernel is
:mod:`tylo.ops.attention.hopper_kernel`; the walk-through is docs/attention_hopper.md."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import tylo
from tylo import dtypes as dt
from tylo.constants import LOG2E, NEG_INF
from tylo.layouts import ComposedLayout, Layout, Swizzle, byte_swizzle
from tylo.nvgpu.errors import PlanError
from tylo.ops.attention.hopper_roles import (
    CONSUMER_COUNTS,
    registers,
)
from tylo.target import Target

__all__ = [
    "BLOCK",
    "Dim",
    "CONSUMERS",
    "CONSUMER_REGISTERS",
    "HEADROOM",
    "HopperAttentionConfig",
    "LOG2E",
    "NEG_INF",
    "OWN_TILES",
    "PRODUCER_REGISTERS",
    "SHARED_LIMIT",
    "THREADS",
    "block_layout",
    "box_layout",
    "own_tiles",
    "swizzle",
    "v_operand_layout",
]

Dim = tylo.Dim  # sizes and strides the kernel takes: positive, below 2**31
CONSUMERS = 2  # the default config's consumer warpgroups (cfg.consumers)
# consumer counts whose consumers each compute only the key tiles their own 64 rows see,
# with the causal mask (key_loop, own_tiles): with 3 (192 rows per item) the causal
# diagonal is 192 rows wide. With 2 (bm = 128, and bn = 128 or 64) the two consumers'
# bounds differ only in partial last q-tiles; without the mask only there too (1024 =
# 5 * 192 + 64), and the bounds cost the one-item kernel registers (ptxas 13.0 spills it by
# 4 bytes), so those kernels stay as measured.
OWN_TILES = (3,)


def own_tiles(cfg: Any) -> bool:
    """Whether ``cfg``'s consumers each compute only the key tiles their own rows see:
    three consumers (``OWN_TILES``) with the causal mask."""
    return cfg.consumers in OWN_TILES and cfg.causal


THREADS = 128 * (1 + CONSUMERS)  # and its threads per CTA (cfg.threads)
# and its roles' registers after setmaxnreg (cfg.producer_registers, cfg.consumer_registers)
PRODUCER_REGISTERS, CONSUMER_REGISTERS = registers(CONSUMERS)
# consumers -> registers a consumer thread keeps beyond its accumulators (S, O and one P):
# 232 - 56 = 176 with two; with three, 160 - 32 = 128 admits d = 64's 128-key tile, which
# ptxas 13.0 links without spilling in most schedules (docs/attention_hopper.md, "Three
# consumer warpgroups")
HEADROOM = {2: 56, 3: 32}
BLOCK = 64  # columns of one 128-byte swizzled block of bf16/f16
SHARED_LIMIT = Target.parse("sm_90a").max_shared_bytes  # 227 KiB a block may use


# --8<-- [start:config]
@dataclass(frozen=True)
class HopperAttentionConfig:
    """``d`` (head dim, 64 or 128), input ``dtype`` (bf16 or f16), ``bn`` keys per tile
    (a multiple of 16 in [16, 256]; 128 by default), ``stages`` of the K/V ring, ``causal``
    (bottom-right diagonal), the schedule options ``pingpong`` and ``overlap`` (module
    docstring), ``persistent``: one CTA per SM walks the work items (query tiles of
    ``bm = 64 * consumers`` rows of one (batch, head)) with Q double-buffered
    (:mod:`tylo.ops.attention.hopper_persistent`), otherwise one CTA per item; and
    ``tma_store``: O leaves through shared memory (the consumer's rows of the Q buffer) by
    TMA stores (:mod:`tylo.ops.attention.hopper_epilogue`) instead of stores by ownership;
    ``split_kv``: K and V of a stage complete on full barriers of their own, S waiting for K
    only (:mod:`tylo.ops.attention.hopper_ring`; alone measured no faster); ``split_release``
    (needs ``split_kv``): K and V also have empty barriers of their own, K released as soon
    as ``S = Q Kᵀ`` of its tile completed, V after ``P V`` (the measured default at d = 128,
    with the 128-key tile; ``hopper_defaults.SCHEDULES``); ``consumers``: the
    consumer warpgroups, 2 (the config's default) or 3 (FlashAttention-3's 192-row tile at
    d = 64; :mod:`tylo.ops.attention.hopper_roles`; ``choose_config``'s default at d = 64
    without a mask, and causal past 4096 keys, ``hopper_defaults.THREE_CONSUMER_SCHEDULES``);
    ``item_overlap`` (needs ``persistent`` and ``overlap``, not with three consumers and the
    causal mask): a consumer issues the next work item's first ``S = Q Kᵀ`` together with
    this item's last ``P V``, runs that tile's softmax while ``P V`` runs, and only then
    stores this item's O (:mod:`tylo.ops.attention.hopper_persistent`); ``o_buffer`` (needs
    ``persistent`` and ``tma_store``): the TMA-store epilogue stages O in a buffer of its
    own instead of the Q buffer, so Q is released before the epilogue and the stores'
    read of shared memory is waited for only before the next item's staging
    (:mod:`tylo.ops.attention.hopper_epilogue`)."""

    d: int = 64
    dtype: Any = tylo.bf16
    causal: bool = False
    bn: int = 128
    stages: int = 2
    pingpong: bool = False
    overlap: bool = False
    persistent: bool = False
    tma_store: bool = False
    split_kv: bool = False
    split_release: bool = False
    consumers: int = 2
    item_overlap: bool = False
    o_buffer: bool = False

    def __post_init__(self) -> None:
        try:
            d = dt.dtype_of(self.dtype)
        except tylo.TyloError as err:
            raise PlanError(f"HopperAttentionConfig: dtype: {err}") from None
        if d not in (dt.bf16, dt.f16):
            raise PlanError(
                f"HopperAttentionConfig: wgmma takes bf16 or f16 inputs, got {d}; use "
                "path='warp' or convert the inputs"
            )
        object.__setattr__(self, "dtype", d)
        if self.d not in (64, 128):
            raise PlanError(f"HopperAttentionConfig: head dim d must be 64 or 128, got {self.d!r}")
        if type(self.bn) is not int or not 16 <= self.bn <= 256 or self.bn % 16:
            raise PlanError(
                f"HopperAttentionConfig: bn must be a multiple of 16 in [16, 256], got {self.bn!r}"
            )
        if type(self.stages) is not int or not 1 <= self.stages <= 8:
            raise PlanError(f"HopperAttentionConfig: stages must be 1..8, got {self.stages!r}")
        for name in ("causal", "pingpong", "overlap", "persistent", "tma_store", "split_kv",
                     "split_release", "item_overlap", "o_buffer"):  # fmt: skip
            if type(getattr(self, name)) is not bool:
                raise PlanError(
                    f"HopperAttentionConfig: {name} must be a bool, got {getattr(self, name)!r}"
                )
        if type(self.consumers) is not int or self.consumers not in CONSUMER_COUNTS:
            raise PlanError(
                f"HopperAttentionConfig: consumers must be an int in {CONSUMER_COUNTS} (consumer "
                f"warpgroups of 64 query rows each), got {self.consumers!r}"
            )
        if self.split_release and not self.split_kv:
            raise PlanError(
                "HopperAttentionConfig: split_release releases K and V of a stage on their "
                "own, which needs them landing on full barriers of their own: pass "
                "split_kv=True with it (choose_config(split_release=True) does)"
            )
        if self.item_overlap and (not (self.persistent and self.overlap) or own_tiles(self)):
            raise PlanError(
                "HopperAttentionConfig: item_overlap issues a work item's first S = Q Kᵀ with "
                "the previous item's last P V, so it needs persistent=True and overlap=True, "
                "and every consumer computing every key tile (not three consumers with the "
                f"causal mask); got persistent={self.persistent}, overlap={self.overlap}, "
                f"consumers={self.consumers}, causal={self.causal}"
            )
        if self.o_buffer and not (self.persistent and self.tma_store):
            raise PlanError(
                "HopperAttentionConfig: o_buffer stages the persistent kernel's TMA-store "
                "epilogue in a buffer of its own, so it needs persistent=True and "
                f"tma_store=True; got persistent={self.persistent}, tma_store={self.tma_store}"
            )
        if self.overlap and self.stages < 2:
            raise PlanError(
                "HopperAttentionConfig: overlap holds the previous stage (its V) while it "
                "waits for the next one, so it needs stages >= 2"
            )
        # accumulator registers per consumer thread at the peak: S of the tile (bn/2 f32),
        # O (d/2 f32) and one packed P (bn/4). With overlap that P is the previous tile's,
        # the A operand of the P V in flight while this tile's softmax runs; this tile's P
        # is packed only after that wgmma completed (_overlapped_tile), so never two at once
        need, fit = self.bn // 2 + self.d // 2 + self.bn // 4, self.accumulator_registers
        if need > fit:
            raise PlanError(
                f"HopperAttentionConfig: bn {self.bn} with d {self.d} needs {need} "
                f"accumulator registers per thread, over the {fit} that fit under setmaxnreg "
                f"{self.consumer_registers} ({self.consumers} consumer warpgroups); use a "
                "smaller bn" + (" or consumers=2" if self.consumers > 2 else "")
            )
        if self.shared_bytes() > SHARED_LIMIT:
            raise PlanError(
                f"HopperAttentionConfig: {self.shared_bytes()} B of shared memory > "
                f"{SHARED_LIMIT // 1024} KiB (sm_90a); "
                "use fewer stages or a smaller bn"
            )

    @property
    def bm(self) -> int:
        """Query rows per CTA (per work item): 64 per consumer warpgroup."""
        return 64 * self.consumers

    @property
    def threads(self) -> int:
        """Threads per CTA: the producer warpgroup and the consumers, 128 each."""
        return 128 * (1 + self.consumers)

    @property
    def producer_registers(self) -> int:
        """The producer's registers per thread after ``setmaxnreg.dec``
        (:func:`~tylo.ops.attention.hopper_roles.registers`)."""
        return registers(self.consumers)[0]

    @property
    def consumer_registers(self) -> int:
        """A consumer's registers per thread after ``setmaxnreg.inc``."""
        return registers(self.consumers)[1]

    @property
    def accumulator_registers(self) -> int:
        """The accumulator registers a consumer thread may hold at its peak (S, O and one
        packed P): ``consumer_registers - HEADROOM[consumers]``: 176 with two consumers,
        128 with three."""
        return self.consumer_registers - HEADROOM[self.consumers]

    @property
    def blocks(self) -> int:
        """64-column swizzled blocks per row of Q, K and V."""
        return self.d // BLOCK

    def q_elements(self) -> int:
        """Elements of one Q buffer (``bm`` rows of ``d``)."""
        return self.bm * self.d

    @property
    def q_buffers(self) -> int:
        """Q buffers at the start of shared memory: two with ``persistent`` (item ``i``'s Q
        in buffer ``i % 2``, so the next item's Q loads during this one), else one."""
        return 2 if self.persistent else 1

    def o_offset(self) -> int:
        """With ``o_buffer``, the element offset of the O staging buffer (Q's shape), after
        the Q buffers."""
        return self.q_buffers * self.q_elements()

    def ring_offset(self) -> int:
        """The element offset of the K/V ring, after the Q buffers and the O buffer, if any
        (1024-byte aligned: a Q buffer is a multiple of 64 rows of 128 bytes)."""
        return (self.q_buffers + self.o_buffer) * self.q_elements()

    def kv_elements(self) -> int:
        return self.bn * self.d

    def shared_bytes(self) -> int:
        return (self.ring_offset() + 2 * self.stages * self.kv_elements()) * self.dtype.nbytes

    def describe(self) -> str:
        return (
            f"{self.bm} query rows x {self.bn} keys, d {self.d}, {self.stages} stages, "
            f"{self.consumers} consumer warpgroups + 1 producer, {self.shared_bytes() // 1024} KiB "
            f"shared, {self.dtype}{', causal' if self.causal else ''}"
            f"{', persistent (Q double-buffered)' if self.persistent else ''}"
            f"{', TMA-store epilogue' if self.tma_store else ''}"
            f"{', split K/V barriers' if self.split_kv else ''}"
            f"{', K released after S' if self.split_release else ''}"
            f"{', items overlapped' if self.item_overlap else ''}"
            f"{', O staged in a buffer of its own' if self.o_buffer else ''}"
        )


# --8<-- [end:config]


def swizzle(dtype: Any) -> Swizzle:
    """The 128-byte swizzle on element offsets of a 2-byte dtype."""
    return byte_swizzle(128, dt.dtype_of(dtype).nbytes)


def block_layout(rows: int, dtype: Any) -> ComposedLayout:
    """One (rows, 64) column block, rows 128 bytes apart, 128-byte swizzled: what TMA
    writes for a box and what wgmma reads K-major."""
    return ComposedLayout(swizzle(dtype), 0, Layout((rows, BLOCK), (BLOCK, 1)))


def box_layout(rows: int, dtype: Any) -> ComposedLayout:
    """The same block seen with the tensor map's 4 modes (L, H, B, D), H and B of extent 1
    (the strides TMA's row-major box order gives them)."""
    far = rows * BLOCK
    return ComposedLayout(swizzle(dtype), 0, Layout((rows, 1, 1, BLOCK), (BLOCK, far, far, 1)))


def v_operand_layout(cfg: HopperAttentionConfig) -> ComposedLayout:
    """V's tile (bn keys, d) seen as wgmma's B of ``O += P V``: (N = d, K = bn) with d
    contiguous (MN-major), column blocks of 64 ``bn * 64`` elements apart."""
    return ComposedLayout(
        swizzle(cfg.dtype),
        0,
        Layout(((BLOCK, cfg.blocks), cfg.bn), ((1, cfg.bn * BLOCK), BLOCK)),
    )
