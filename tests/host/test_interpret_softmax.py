"""The softmax example's kernels (lane, warp and MMA styles; no mask, a bool mask, row
lengths) run in the interpreter and agree with the float64 reference. The bool-mask path
loads ``<1 x i32>`` vectors of mask bytes (a one-element vector keeps its element axis)."""

from __future__ import annotations

import numpy as np
import pytest

from tylo.ops.softmax.host import kernel_for, launch_shape, make_inputs, reference
from tylo.ops.softmax.plan import choose_config, vector_width


@pytest.mark.parametrize("style", ["lane", "warp", "mma"])
@pytest.mark.parametrize("mask", ["none", "bool", "length"])
def test_softmax_styles_and_masks(style: str, mask: str) -> None:
    rng = np.random.default_rng(11)
    rows, cols = 17, 100
    x, bool_mask, lengths = make_inputs(rows, cols, mask, rng)
    out = np.full_like(x, np.nan)
    vec = vector_width(4, cols, True)
    if style == "mma":
        vec = max(vec, 2)
    cfg = choose_config(rows, cols, vec=vec, itemsize=4, mask=mask, style=style, cc=(8, 0))
    grid, shared = launch_shape(cfg, rows, 4)
    aux = bool_mask if mask == "bool" else lengths if mask == "length" else None
    kernel_for(cfg).interpret[grid, cfg.threads](
        cfg, out, x, aux, rows, cols, cols, cols, cols, shared=shared
    )
    want = reference(x, mask=bool_mask, lengths=lengths)
    # exp is ex2.approx on the GPU (here numpy's exp2 in f32): a few ulp of f32
    assert not np.isnan(out).any()
    assert np.abs(out - want).max() <= 1e-6
