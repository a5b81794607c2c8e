"""The shapes every Hopper attention configuration is checked at on the GPU (imported by the
``test_attention_hopper_*.py`` files; not a test module itself)."""

from __future__ import annotations

import re
import warnings
from typing import Any

import numpy as np

from tylo.ops.attention.hopper_host import compile_hopper_attention
from tylo.ops.attention.hopper_verify import verify
from tylo.ops.attention.reference import attention_reference

# The configurations whose assembly may spill on the H200 (ptxas 13.0), and by how much:
# since the score mask became one i32 compare per score (tylo/ops/attention/mask.py), which
# removed the 12 bytes of the d = 128 persistent kernel without the mask and the 4 of three
# consumers' at d = 64, only three consumers' persistent kernel with split K/V barriers at
# d = 64 without the mask (not a default): 12 bytes (ptxas 13.0 here and on the H200).
SPILL_BOUND = {(64, 128, True, False, 3, True): 12}  # (d, bn, persistent, causal, consumers,
#                                                      split_kv) -> spill bytes


def assert_no_spill(cfg: Any, k: Any, live: str) -> None:
    """No ``LDL``/``STL``/``CALL`` in ``live`` (the SASS of :func:`compile_unserialized` for
    ``cfg``, kernel ``k``), except a spill within ``SPILL_BOUND`` for the configuration it
    names."""
    assert not re.search(r"\bCALL\b", live), f"CALL in the SASS of {cfg.describe()}"
    key = (cfg.d, cfg.bn, cfg.persistent, cfg.causal, cfg.consumers, cfg.split_kv)
    bound = SPILL_BOUND.get(key)
    if bound is not None and k.resources.spills:
        assert 0 < k.resources.spill_stores <= bound, (cfg.describe(), k.resources, bound)
        return
    for op in ("LDL", "STL"):
        assert not re.search(rf"\b{op}\b", live), f"{op} in the SASS of {cfg.describe()}"


def verify_standard_cases(cfg: Any, d: int, causal: bool) -> None:
    """``verify`` (fresh random data, poisoned outputs, the float64 reference) of ``cfg`` at
    L = 1, 17, 1000 and 4097 (one head: the reference is quadratic on the CPU), Lq != Lk
    both ways and off the tile sizes, and key lengths with a zero-length entry (its rows
    give o = 0, lse = -inf)."""
    for length in (1, 17, 1000):
        verify(2, 3, length, d, causal=causal, cfg=cfg)
    verify(1, 1, 4097, d, causal=causal, cfg=cfg)
    for lq, lk in ((17, 1000), (1000, 17), (129, 127)):
        verify(1, 2, lq, d, lk=lk, causal=causal, cfg=cfg)
    verify(3, 1, 130, d, lk=200, causal=causal, kv_lens=[0, 200, 64], cfg=cfg)
    verify(4, 2, 300, d, lk=333, causal=causal, kv_lens=[333, 0, 17, 129], cfg=cfg)


def compile_unserialized(cfg: Any) -> tuple[Any, str]:
    """Compile ``cfg`` as this machine's linker does (on the H200 ptxas keeps setmaxnreg),
    check that neither the warnings nor the link log say ptxas serialized the wgmma (C7509,
    C7519, C7513), and return the kernel and its SASS without the never-run ``@!PT`` lines."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        k = compile_hopper_attention(cfg)
        sass = k.sass
    logs = " ".join(str(w.message) for w in caught) + k.module.info_log
    for note in ("C7509", "C7519", "C7513", "serialized"):
        assert note not in logs, logs
    return k, "\n".join(line for line in sass.splitlines() if "@!PT" not in line)


def assert_matches_reference(q: Any, k: Any, v: Any, out: Any, lse: Any, *, causal: bool,
                             scale: float | None = None, kv_lens: Any = None) -> None:  # fmt: skip
    """``out`` and ``lse`` (torch, written by a launch on ``q``, ``k``, ``v``) against the
    float64 reference: no NaN left of the poison, o within 2e-2 of max |o|, the same rows
    at lse = -inf, and the finite lse within 2e-2."""
    import torch

    torch.cuda.synchronize()
    want_o, want_l = attention_reference(
        q.double().cpu().numpy(), k.double().cpu().numpy(), v.double().cpu().numpy(),
        causal=causal, scale=scale, kv_lens=kv_lens,
    )  # fmt: skip
    got_o, got_l = out.double().cpu().numpy(), lse.double().cpu().numpy()
    assert not np.isnan(got_o).any() and not np.isnan(got_l).any()
    assert np.abs(got_o - want_o).max() <= 2e-2 * np.abs(want_o).max()
    fin = np.isfinite(want_l)
    assert np.array_equal(np.isneginf(got_l), np.isneginf(want_l))
    assert np.abs(got_l[fin] - want_l[fin]).max() <= 2e-2
