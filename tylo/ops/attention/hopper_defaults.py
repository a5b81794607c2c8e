"""The Hopper attention's measured defaults, as named values: which schedule
:func:`~tylo.ops.attention.hopper_host.choose_config` takes for a head dim, a mask and a key
length. A row of the tables reads as what it means::

    Case(d=64, causal=False, long=False): Schedule(overlap=True, tma_store=True, persistent=True)

Every table was measured on an H200 (``benchmarks/attention.py --path hopper --variants``);
the comments give the dates and the ratios that decided each entry."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

__all__ = [
    "ITEM_SCHEDULES",
    "LONG_KEYS",
    "LONG_KEYS_AT",
    "SCHEDULES",
    "THREE_CONSUMER_SCHEDULES",
    "THREE_CONSUMER_TILES",
    "WIDE_OVERLAP",
    "Case",
    "ItemSchedule",
    "Schedule",
    "long_keys",
]


class Case(NamedTuple):
    """What a default depends on: the head dim ``d``, the causal mask, and whether the key
    length is past :func:`long_keys` (``long``). A plain ``(d, causal, long)`` tuple finds
    the same entry."""

    d: int
    causal: bool
    long: bool


@dataclass(frozen=True)
class Schedule:
    """The schedule options of a default configuration (each a
    :class:`~tylo.ops.attention.hopper_config.HopperAttentionConfig` field of that name;
    all off by default): ``pingpong`` and ``overlap`` (the FlashAttention-3 schedules),
    ``tma_store`` (O through shared memory and TMA stores), ``persistent`` (one CTA per SM
    walking the work items) and ``split_release`` (K released once ``S = Q Kᵀ`` completed)."""

    pingpong: bool = False
    overlap: bool = False
    tma_store: bool = False
    persistent: bool = False
    split_release: bool = False


@dataclass(frozen=True)
class ItemSchedule:
    """The persistent kernel's item options of a default: ``item_overlap`` (the next item's
    first ``S`` issued with this item's last ``P V``) and ``o_buffer`` (O staged in a
    buffer of its own)."""

    item_overlap: bool = False
    o_buffer: bool = False


# What measured fastest on an H200 (benchmarks/attention.py --path hopper --variants,
# 2026-12-01, 5-10 interleaved rounds, at L = 1k, 4k and 16k; "long" is Lk > LONG_KEYS,
# between the 4k and 16k shapes, so lengths in (4k, 16k) take an unmeasured side of the
# boundary).
# - d = 64 without a mask: overlap alone, O by TMA, persistent, at every length (the TMA
#   store only pays with the persistent kernel: 1.32x the old default at 1k, 1.01x at 16k).
# - persistent up to 4k keys elsewhere (1.10-1.30x the one-item kernel there), and not at
#   16k, where the one-item kernel was 1.03-1.14x faster (d = 64 causal: overlap alone).
# - d = 128: both schedules on FlashAttention-3's tile (128 keys, 2 stages) with K released
#   once S completed (split_release): 1.19-1.32x the previous default (the 64-key tile)
#   without the mask, 1.19-1.31x with it at 1k and 4k and 1.25x at 16k. Without the early
#   release that tile was 0.66-0.90x (WIDE_OVERLAP). At d = 64 split_release was 0.83-0.87x
#   without the mask from 4k, so it stays off there.
_BOTH = {"pingpong": True, "overlap": True, "tma_store": True}  # both schedules, O by TMA
SCHEDULES: dict[tuple, Schedule] = {
    Case(d=64, causal=False, long=False): Schedule(overlap=True, tma_store=True,
                                                   persistent=True),
    Case(d=64, causal=False, long=True): Schedule(overlap=True, tma_store=True,
                                                  persistent=True),
    Case(d=64, causal=True, long=False): Schedule(**_BOTH, persistent=True),
    Case(d=64, causal=True, long=True): Schedule(overlap=True, tma_store=True),
    Case(d=128, causal=False, long=False): Schedule(**_BOTH, persistent=True,
                                                    split_release=True),
    Case(d=128, causal=False, long=True): Schedule(**_BOTH, split_release=True),
    Case(d=128, causal=True, long=False): Schedule(**_BOTH, persistent=True,
                                                   split_release=True),
    Case(d=128, causal=True, long=True): Schedule(**_BOTH, split_release=True),
}  # fmt: skip
LONG_KEYS = 4096

# The item options of the default where it is the two-consumer persistent kernel with O by
# TMA: the O staging buffer where it measured faster on an H200 (benchmarks/attention.py
# --path hopper --variants, 2026-12-02), and at d = 64 causal with the items overlapped as
# well (o_buffer alone was 0.92-0.97x there).
ITEM_SCHEDULES: dict[tuple, ItemSchedule] = {
    Case(d=128, causal=False, long=False): ItemSchedule(o_buffer=True),
    Case(d=128, causal=True, long=False): ItemSchedule(o_buffer=True),
    Case(d=64, causal=True, long=False): ItemSchedule(item_overlap=True, o_buffer=True),
}

# (d, causal) whose "long" side starts elsewhere: d = 64 without a mask, where the three
# consumers' persistent kernel was faster at 1k and the one-item kernel at 4k and 16k
# (THREE_CONSUMER_SCHEDULES); 2048 lies between the measured 1k and 4k.
LONG_KEYS_AT = {(64, False): 2048}

# The schedule of the default with three consumer warpgroups (192 query rows,
# THREE_CONSUMER_TILES), taken where its one-item kernel links without spilling (ptxas
# keeps setmaxnreg: the consumers' 160 registers; nvJitLink does not, and there the
# two-consumer default of SCHEDULES stays). Measured on an H200 (benchmarks/attention.py
# --path hopper --variants --only '^3 cons', 10 rounds, 2026-12-02): at d = 64 without a
# mask ping-pong + overlap, O by TMA, was 1.04x the two-consumer default at 1k with the
# persistent kernel (one-item 0.93x), 1.07x and 1.08x at 4k and 16k with the one-item
# kernel (persistent 0.99x, 0.97x); every other schedule was 0.75-0.98x. With the causal
# mask, once each consumer computes only the key tiles its own rows see
# (hopper_kernel.own_tiles; 6 rounds, 2026-12-02), ping-pong + overlap with the one-item
# kernel was 1.16x the two-consumer default at 16k, but 0.98x at 4k and 0.83x at 1k (every
# other schedule 0.82-1.04x): three only past LONG_KEYS there. At d = 128 (0.66-0.90x) two.
THREE_CONSUMER_SCHEDULES: dict[tuple, Schedule] = {
    Case(d=64, causal=False, long=False): Schedule(**_BOTH, persistent=True),
    Case(d=64, causal=False, long=True): Schedule(**_BOTH),
    Case(d=64, causal=True, long=True): Schedule(**_BOTH),
}

# consumers = 3 (192 query rows per CTA): the consumer keeps 160 registers, not 232
# (hopper_roles.REGISTERS), so the default tiles' accumulators do not fit at d = 128. Per
# head dim, (bn, stages) of the tile choose_config takes: FA3's 128 keys at d = 64, 64 at
# d = 128; ptxas 13.0 links them without spilling in most schedules (docs/attention_hopper.md,
# "Three consumer warpgroups", lists which).
THREE_CONSUMER_TILES = {64: (128, 4), 128: (64, 3)}

# d = 128 with overlap but without split_release: 128 keys and 2 stages (FlashAttention-3's
# tile) where it compiles without spilling, rather than 64 keys and 3 stages. It fits: S, O
# and the previous tile's P take 64 + 64 + 32 registers. Off, by measurement: the "wide
# overlap" variants were 0.66-0.90x the 64-key tile without the mask (the tile's one spare
# stage is held until P V completes). With split_release (K released once S completed) the
# 128-key tile is the default (SCHEDULES).
WIDE_OVERLAP = False


def long_keys(d: int, causal: bool) -> int:
    """The key length past which ``(d, causal)`` takes the "long" schedules: ``LONG_KEYS``,
    or its own (``LONG_KEYS_AT``). ``d`` an int, ``causal`` a bool
    (:class:`~tylo.ops.args.OpArgumentError` otherwise)."""
    from tylo.ops.args import require_bool, require_int

    key = (require_int("long_keys", "d", d), require_bool("long_keys", "causal", causal))
    return LONG_KEYS_AT.get(key, LONG_KEYS)
