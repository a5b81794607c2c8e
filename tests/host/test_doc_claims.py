"""The static facts README.md and docs/*.md state (sizes, limits, counts) against the code
that makes them true, so that a change to either shows up here instead of in a reader's
surprise. Timing claims are re-measured by ``tools/claims.py`` and carry the machine and
Python version they were taken on; the last test checks that each one says so."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import tylo
from tylo.backend.cache import DEFAULT_MAX_BYTES
from tylo.layouts._budget import ENUMERATION_LIMIT
from tylo.ops.attention import host as attention_host
from tylo.ops.attention.config import attention_config
from tylo.ops.gemm.hopper_host import SMALL_K, default_config
from tylo.ops.softmax.plan import choose_config

ROOT = Path(__file__).resolve().parents[2]
KIB = 1024


def doc(name: str) -> str:
    """A page's text with its line breaks folded into spaces (sentences wrap)."""
    return re.sub(r"\s+", " ", (ROOT / name).read_text())


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def test_the_size_budget_is_the_one_the_proofs_page_states():
    m = re.search(r"ENUMERATION_LIMIT` \(([\d,]+) elements", doc("docs/proofs.md"))
    assert m is not None
    assert _int(m.group(1)) == ENUMERATION_LIMIT


@pytest.mark.parametrize("page", ["docs/backend.md", "docs/kernels.md"])
def test_the_cache_default_size_is_the_one_the_pages_state(page):
    m = re.search(r"TYLO_CACHE_MAX_BYTES` bytes \([^)]*?default (\d+) GiB", doc(page))
    assert m is not None, page
    assert int(m.group(1)) * KIB**3 == DEFAULT_MAX_BYTES


def test_the_module_size_limit_is_the_one_the_structure_test_enforces():
    m = re.search(r"on any module of (\d+) lines or more", doc("docs/design.md"))
    enforced = re.search(r"^MAX_LINES = (\d+)$", (ROOT / "tests/host/test_structure.py")
                         .read_text(), re.MULTILINE)  # fmt: skip
    assert m is not None and enforced is not None
    assert m.group(1) == enforced.group(1)


def test_the_strategy_hit_floor_is_the_one_the_tool_uses():
    m = re.search(r"test_strategy_hits\.py` fails when one falls under (\d+)%", doc(
        "docs/layouts.md"))  # fmt: skip
    floor = re.search(r"^FLOOR = ([0-9.]+)", (ROOT / "tools/strategy_hits.py").read_text(),
                      re.MULTILINE)  # fmt: skip
    assert m is not None and floor is not None
    assert int(m.group(1)) == round(100 * float(floor.group(1)))


def test_the_attention_page_remembers_as_many_plans_as_the_host():
    m = re.search(r"remembers the plan for the last (\d+)", doc("docs/attention.md"))
    assert m is not None
    assert int(m.group(1)) == attention_host._PLANS.limit


_TABLE_ROW = re.compile(
    r"^\| (sm_\w+) \| (\d+) \| (no|yes) \| no / yes \| [\d /]+ \| (\d+) KiB \|$",
                        re.MULTILINE)  # fmt: skip
_WIDE_ROW = re.compile(r"^\| (sm_\w+) \| (\d+) \| (\d+) \| [\d /]+ \| [\d /]+ \| (\d+) KiB \|$",
                       re.MULTILINE)  # fmt: skip


def test_the_attention_resource_tables_state_each_configurations_shared_memory():
    text = (ROOT / "docs/attention.md").read_text()
    rows = _TABLE_ROW.findall(text)
    wide = _WIDE_ROW.findall(text)
    assert len(rows) == 8 and len(wide) == 8  # the two tables, every row read
    for _target, d, causal, kib in rows:
        for padding in (False, True):
            cfg = attention_config(int(d), tylo.bf16, causal=causal == "yes", padding=padding)
            assert cfg.shared_bytes == int(kib) * KIB, (d, causal, padding)
    for _target, d, bn, kib in wide:
        cfg = attention_config(int(d), tylo.bf16, warps=8, block_m=128, block_n=int(bn))
        assert cfg.shared_bytes == int(kib) * KIB, (d, bn)


def test_the_attention_pages_shared_memory_of_other_tiles():
    text = doc("docs/attention.md")
    m = re.search(r"At D = 128, Bc = 128 \((\d+) KiB\)", text)
    assert m is not None
    wide = attention_config(128, tylo.bf16, warps=8, block_m=128, block_n=128)  # that table's
    assert wide.shared_bytes == int(m.group(1)) * KIB
    m = re.search(r"with (\d+) KiB of dynamic shared memory \(Q (\d+) KiB, two K and two V "
                  r"stages of (\d+) KiB\)", text)  # fmt: skip
    assert m is not None
    total, q, stage = (int(x) * KIB for x in m.groups())
    cfg = attention_config(128, tylo.bf16, **attention_host.STEPPED_128)
    assert cfg.shared_bytes == total == q + 4 * stage
    assert cfg.block_m * cfg.d * cfg.dtype.nbytes == q
    assert cfg.block_n * cfg.d * cfg.dtype.nbytes == stage


def test_the_hopper_gemm_buffers_are_the_sizes_the_page_states():
    text = doc("docs/hopper.md")
    m = re.search(
        r"cooperative 128x256 default keeps (\d+) stages \((\d+) KiB\) and two 64x256 buffers "
        r"\((\d+) KiB\); the ping-pong 128x128 tiles keep (\d+) stages \((\d+) KiB\) and two "
        r"128x128 buffers \((\d+) KiB\): (\d+) KiB of dynamic shared memory",
        text,
    )
    assert m is not None
    co_stages, co_ring, co_epi, pp_stages, pp_ring, pp_epi, most = (int(x) for x in m.groups())
    coop, pingpong = default_config(k=SMALL_K + 1), default_config(k=SMALL_K)
    assert not coop.pingpong and pingpong.pingpong
    assert (coop.stages, pingpong.stages) == (co_stages, pp_stages)
    assert (coop.ring_bytes(), coop.epilogue_bytes()) == (co_ring * KIB, co_epi * KIB)
    assert (pingpong.ring_bytes(), pingpong.epilogue_bytes()) == (pp_ring * KIB, pp_epi * KIB)
    assert max(coop.shared_bytes(), pingpong.shared_bytes()) == most * KIB


def test_the_softmax_grid_the_page_states():
    m = re.search(r"\((\d+) blocks for (\d+) x (\d+)\)", doc("docs/softmax.md"))
    assert m is not None
    blocks, rows, cols = (int(x) for x in m.groups())
    assert choose_config(rows, cols, vec=4).grid(rows) == blocks


# The CPU-side timing claims: each names its Python and machine (tools/claims.py measures).
_TIMING = re.compile(r"\d(?:\.\d+)?(?:-\d+(?:\.\d+)?)? ?(?:µs|us|ms|s)\b")
_CPU_PAGES = {
    "README.md": ["launch"],
    "docs/kernels.md": ["traced in", "C no-op", "*without tracing*"],
    "docs/backend.md": ["A cache hit"],
    "docs/proofs.md": ["65,532 elements", "ENUMERATION_LIMIT` ("],
    "docs/attention.md": ["a repeated call costs"],
    "docs/interpret.md": ["vector_add over"],
}


@pytest.mark.parametrize("page", sorted(_CPU_PAGES))
def test_cpu_timing_claims_say_which_python_and_machine(page):
    prose = re.sub(r"```.*?```", " ", (ROOT / page).read_text(), flags=re.DOTALL)
    sentences = re.split(r"(?<=\.)\s+(?=[A-Z(`])", re.sub(r"\s+", " ", prose))
    for anchor in _CPU_PAGES[page]:
        hits = [s for s in sentences if anchor in s and _TIMING.search(s)]
        assert hits, (page, anchor)
        for s in hits:
            assert re.search(r"Python 3\.\d+", s) and "core" in s, (page, s)
