"""One meaning of a key length outside [0, Lk] (issue 34, item 4): it is clamped to [0, Lk]
first (a negative one to 0, one past Lk to Lk), and the causal diagonal sits at the clamped
length. The reference (``tylo/ops/attention/reference.py``) is checked against a brute-force
definition written from the corner of the score matrix; the kernels' mask limits
(``mask.row_limit`` after the kernels' clamp) against the reference; and both kernels'
sources are checked to clamp before the mask. The GPU comparison of the kernels with the
reference is in tests/gpu/test_attention.py and test_attention_hopper.py
(``test_key_lengths_outside_the_keys``)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tylo.ops.attention.mask import row_limit
from tylo.ops.attention.reference import attention_reference, visible

ROOT = Path(__file__).resolve().parents[2]


def brute_visible(lq: int, lk: int, causal: bool, kv_len: int | None) -> np.ndarray:
    """Written from the definition, one row at a time: the entry has ``n`` keys, ``kv_len``
    clamped to [0, lk]; without the mask every row sees them all; with it the diagonal ends
    at the bottom-right corner of the (lq, n) matrix, so the last row sees all n keys and
    each row above sees one fewer (never fewer than none)."""
    n = lk if kv_len is None else (0 if kv_len < 0 else (lk if kv_len > lk else kv_len))
    out = np.zeros((lq, lk), dtype=bool)
    for i in range(lq):
        sees = n if not causal else max(0, n - (lq - 1 - i))
        for j in range(sees):
            out[i, j] = True
    return out


lengths = st.integers(1, 12)
raw_len = st.one_of(
    st.none(), st.integers(-40, 40), st.sampled_from([-(2**31), 2**31 - 1, -(2**63), 2**63 - 1])
)


@settings(max_examples=200, deadline=None)
@given(lengths, lengths, st.booleans(), raw_len)
def test_the_mask_is_the_brute_force_definition(lq, lk, causal, kv_len):
    assert (visible(lq, lk, causal=causal, kv_len=kv_len)
            == brute_visible(lq, lk, causal, kv_len)).all()  # fmt: skip


def test_a_length_past_lk_places_the_diagonal_at_lk():
    """The issue's example: with causal, kv_len = Lk + 5 is Lk (the diagonal was placed at
    the unclamped length, so the first rows saw 5 keys too many); a negative length is 0."""
    for lq, lk in ((2, 3), (5, 5), (7, 4)):
        assert (visible(lq, lk, causal=True, kv_len=lk + 5)
                == visible(lq, lk, causal=True, kv_len=lk)).all()  # fmt: skip
        assert not visible(lq, lk, causal=True, kv_len=-3).any()
        assert not visible(lq, lk, causal=False, kv_len=-3).any()
    assert visible(2, 3, causal=True, kv_len=8).sum(axis=1).tolist() == [2, 3]


def _brute_attention(q, k, v, causal, kv_lens, scale):
    """Row by row with math.exp over the brute-force visible keys."""
    b, h, lq, d = q.shape
    lk = k.shape[2]
    o = np.zeros((b, h, lq, d))
    lse = np.full((b, h, lq), -math.inf)
    for bi in range(b):
        vis = brute_visible(lq, lk, causal, None if kv_lens is None else kv_lens[bi])
        for hi in range(h):
            for i in range(lq):
                js = [j for j in range(lk) if vis[i, j]]
                if not js:
                    continue
                s = [scale * float(np.dot(q[bi, hi, i], k[bi, hi, j])) for j in js]
                m = max(s)
                w = [math.exp(x - m) for x in s]
                total = sum(w)
                o[bi, hi, i] = sum(wj * v[bi, hi, j] for wj, j in zip(w, js)) / total
                lse[bi, hi, i] = m + math.log(total)
    return o, lse


@settings(max_examples=25, deadline=None)
@given(
    st.integers(1, 3),
    st.integers(1, 6),
    st.integers(1, 6),
    st.booleans(),
    st.lists(st.integers(-8, 14), min_size=3, max_size=3),
    st.integers(0, 2**32 - 1),
)
def test_the_reference_is_the_brute_force_attention(b, lq, lk, causal, raw, seed):
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal(s) for s in ((b, 2, lq, 4), (b, 2, lk, 4), (b, 2, lk, 4)))
    kv_lens = raw[:b]
    o, lse = attention_reference(q, k, v, causal=causal, kv_lens=kv_lens, scale=0.5)
    want_o, want_l = _brute_attention(q, k, v, causal, kv_lens, 0.5)
    np.testing.assert_allclose(o, want_o, rtol=1e-12, atol=1e-12)
    assert np.array_equal(np.isneginf(lse), np.isneginf(want_l))
    fin = np.isfinite(want_l)
    np.testing.assert_allclose(lse[fin], want_l[fin], rtol=1e-12, atol=1e-12)


@settings(max_examples=200, deadline=None)
@given(lengths, lengths, st.booleans(), st.integers(-(2**31), 2**31 - 1))
def test_the_kernels_limits_are_the_reference(lq, lk, causal, raw):
    """What both kernels compute (``kv = minimum(maximum(kv_lens[b], 0), Lk)``, then
    ``mask.row_limit``) sees exactly the reference's keys, for any i32 length."""
    kv = min(max(raw, 0), lk)
    want = visible(lq, lk, causal=causal, kv_len=raw)
    for i in range(lq):
        limit = row_limit(causal, i, kv, lq)
        assert [j < limit for j in range(lk)] == want[i].tolist()


def test_both_kernels_clamp_before_the_mask():
    """The kernels' sources clamp the batch entry's length to [0, Lk] where they read it
    (the warp kernel, the one-item Hopper kernel and the persistent one)."""
    clamp = re.compile(r"tylo\.minimum\(tylo\.maximum\((to_index\()?kv_lens\[\w+\]\)?, 0\), lk\)")
    for name in ("kernel.py", "hopper_kernel.py", "hopper_persistent.py"):
        src = (ROOT / "tylo" / "ops" / "attention" / name).read_text(encoding="utf-8")
        assert clamp.search(src), name
        assert len(re.findall(r"kv_lens\[", src)) == len(clamp.findall(src)), name
