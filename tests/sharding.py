"""``--shard I/N`` (tests/conftest.py): run one of N disjoint parts of the collected tests.

The tests are put in a stable order, sorted by node id, and shard I (1-based) keeps those
at positions I-1, I-1+N, I-1+2N, ... of it, so the N shards partition the collection
exactly: every test is in one shard and one only, whatever the order pytest collected them
in, and each shard holds a slice of every file (the slow files are spread over all shards).
``tools/gpu_tier.py`` runs the shards of ``tests/gpu`` one after another.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["parse_shard", "shard_members"]

_SHARD = re.compile(r"^\s*([0-9]+)\s*/\s*([0-9]+)\s*$")


def parse_shard(text: str) -> tuple[int, int]:
    """``"2/5"`` -> ``(2, 5)``; anything but ``I/N`` with ``1 <= I <= N`` is refused with
    a ValueError naming the value and the form."""
    m = _SHARD.match(text) if isinstance(text, str) else None
    if m is None:
        raise ValueError(f"--shard {text!r}: expected I/N, such as 1/4 (shard I of N)")
    i, n = int(m.group(1)), int(m.group(2))
    if not 1 <= i <= n:
        raise ValueError(f"--shard {text!r}: I must be between 1 and N (1 <= I <= {n})")
    return i, n


def shard_members(nodeids: Sequence[str], i: int, n: int) -> list[bool]:
    """For each node id (in the given order), whether shard ``i`` of ``n`` keeps it."""
    order = sorted(range(len(nodeids)), key=lambda k: nodeids[k])
    keep = [False] * len(nodeids)
    for position, k in enumerate(order):
        keep[k] = position % n == i - 1
    return keep
