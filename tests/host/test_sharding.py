"""``--shard I/N`` (tests/conftest.py, tests/sharding.py): the shards partition the suite.

The real check collects ``tests/gpu`` (compile-only collection, no GPU needed) whole and as
three shards, and compares: every test is in exactly one shard. The selection rule is then
tested over random collections, and the option's refusals over hostile values."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sharding import parse_shard, shard_members

ROOT = Path(__file__).resolve().parents[2]


def collect(*args: str) -> list[str]:
    """The node ids ``pytest --collect-only -q`` prints for ``args`` (run at the root)."""
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return [line for line in proc.stdout.splitlines() if "::" in line]


def test_three_shards_of_the_gpu_tier_partition_it() -> None:
    whole = collect("tests/gpu")
    shards = [collect("tests/gpu", "--shard", f"{i}/3") for i in (1, 2, 3)]
    assert len(whole) > 1000 and len(set(whole)) == len(whole)
    seen = Counter(nodeid for shard in shards for nodeid in shard)
    assert set(seen) == set(whole), "a test is lost or invented by sharding"
    assert max(seen.values()) == 1, [n for n, c in seen.items() if c > 1][:5]
    sizes = sorted(len(s) for s in shards)
    assert sizes[-1] - sizes[0] <= 1, sizes
    files = {n.split("::")[0] for n in whole}
    for shard in shards:  # every shard holds a slice of nearly every file
        assert len({n.split("::")[0] for n in shard}) >= len(files) - 3


BAD = [
    "0/3",
    "4/3",
    "1/0",
    "0/0",
    "-1/3",
    "a/b",
    "1/3/5",
    "",
    "1.0/3",
    "3",
    "1 of 3",
    "99999999999999999999/2",
    "\u0661/\u0663",
]


@pytest.mark.parametrize("value", BAD)
def test_a_bad_shard_is_refused(value: str) -> None:
    with pytest.raises(ValueError, match=r"^--shard .*(expected I/N|between 1 and N)"):
        parse_shard(value)


def test_a_bad_shard_is_a_usage_error_of_pytest() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--collect-only",
            "-q",
            "--shard=4/3",
            "tests/host/test_sharding.py",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 4, proc.stderr[-1000:]
    assert "--shard '4/3': I must be between 1 and N" in proc.stderr


@pytest.mark.parametrize(
    "value, expected",
    [("1/1", (1, 1)), (" 2 / 3 ", (2, 3)), ("7/99999999999999999999", (7, 10**20 - 1))],
)
def test_a_good_shard_is_read(value: str, expected: tuple[int, int]) -> None:
    assert parse_shard(value) == expected


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.text(min_size=1, max_size=6), unique=True, max_size=40),
    st.integers(1, 12),
    st.randoms(use_true_random=False),
)
def test_shards_partition_any_collection_in_any_order(ids, n, rnd) -> None:
    """Each id is kept by exactly one shard, the shard sizes differ by at most one, and the
    shard an id lands in does not depend on the order the ids were collected in."""
    where: dict[str, int] = {}
    for i in range(1, n + 1):
        for nodeid, keep in zip(ids, shard_members(ids, i, n)):
            if keep:
                assert nodeid not in where
                where[nodeid] = i
    assert set(where) == set(ids)
    sizes = Counter(where.values())
    assert max(sizes.values(), default=0) - min(sizes.values(), default=0) <= 1
    assert len(sizes) == min(n, len(ids))
    shuffled = list(ids)
    rnd.shuffle(shuffled)
    for i in range(1, n + 1):
        kept = {x for x, k in zip(shuffled, shard_members(shuffled, i, n)) if k}
        assert kept == {x for x, s in where.items() if s == i}
