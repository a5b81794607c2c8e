"""The persistent Hopper kernel's item options without a GPU: ``item_overlap`` (the next
work item's first ``S`` issued with this item's last ``P V``) and ``o_buffer`` (the
TMA-store epilogue staged in a buffer of its own). Typed refusals where they cannot apply,
the shared bytes of the O buffer (brute force over the tiles), ``describe``,
``choose_config``'s defaults (``ITEM_SCHEDULES``, only where the rest of the configuration
is the measured one; a default O buffer that does not fit beside the stages given is left
out, one given is refused; any combination of the options, by hypothesis: a valid
configuration honouring each option given, or a PlanError), and ``tma_epilogue``'s wait
modes. The barrier protocol with the items overlapped is modelled in
``test_attention_hopper_persistent_host.py`` and ``test_attention_hopper_split_release_host.py``."""

from __future__ import annotations

from dataclasses import replace
from itertools import product

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tylo
from tylo.nvgpu.errors import PlanError
from tylo.ops.attention import hopper_epilogue
from tylo.ops.attention.hopper_host import (
    ITEM_SCHEDULES,
    ItemSchedule,
    choose_config,
    long_keys,
)
from tylo.ops.attention.hopper_kernel import SHARED_LIMIT, HopperAttentionConfig
from tylo.ops.attention.hopper_schedule import cta_shares


def test_refusals():
    for name in ("item_overlap", "o_buffer"):
        for bad in (1, 0, "yes", None, np.bool_(True), 1.0):
            with pytest.raises(PlanError, match=f"{name} must be a bool, got {bad!r}"):
                HopperAttentionConfig(**{name: bad})
            if bad is not None:
                with pytest.raises(PlanError, match=f"choose_config: {name} must be a bool"):
                    choose_config(64, tylo.bf16, False, **{name: bad})
    ok = {"persistent": True, "overlap": True, "stages": 2}
    HopperAttentionConfig(item_overlap=True, **ok)
    for off in ("persistent", "overlap"):
        with pytest.raises(PlanError, match="item_overlap .* needs persistent=True and "):
            HopperAttentionConfig(item_overlap=True, **{**ok, off: False})
    with pytest.raises(PlanError, match="not three consumers with the causal mask"):
        HopperAttentionConfig(item_overlap=True, consumers=3, causal=True, **ok)
    HopperAttentionConfig(item_overlap=True, consumers=3, causal=False, **ok)
    HopperAttentionConfig(item_overlap=True, consumers=2, causal=True, **ok)
    ok = {"persistent": True, "tma_store": True}
    HopperAttentionConfig(o_buffer=True, **ok)
    for off in ("persistent", "tma_store"):
        with pytest.raises(PlanError, match="o_buffer .* needs persistent=True and tma_store"):
            HopperAttentionConfig(o_buffer=True, **{**ok, off: False})
    with pytest.raises(PlanError, match="o_buffer .* needs"):
        choose_config(64, tylo.bf16, False, persistent=False, o_buffer=True)
    with pytest.raises(PlanError, match="item_overlap .* needs"):
        choose_config(64, tylo.bf16, False, overlap=False, item_overlap=True)


def test_o_buffer_shared_bytes():
    """Brute force over every tile: the O buffer is one Q buffer more (``bm d`` elements,
    between the Q buffers and the ring, 1024-byte aligned), the ring moves by it, and a
    tile whose O buffer would pass 227 KiB is refused."""
    accepted = refused = 0
    for d, bn, stages, consumers in product((64, 128), range(16, 257, 16), range(1, 9), (2, 3)):
        kw = {"d": d, "bn": bn, "stages": stages, "consumers": consumers, "persistent": True,
              "tma_store": True}  # fmt: skip
        try:
            cfg = HopperAttentionConfig(**kw)
        except PlanError:
            continue
        extra = cfg.q_elements() * cfg.dtype.nbytes
        if cfg.shared_bytes() + extra > SHARED_LIMIT:
            with pytest.raises(PlanError, match="shared memory > 227 KiB"):
                replace(cfg, o_buffer=True)
            refused += 1
            continue
        ob = replace(cfg, o_buffer=True)
        assert ob.shared_bytes() == cfg.shared_bytes() + extra
        assert ob.o_offset() == cfg.ring_offset() == 2 * cfg.q_elements()
        assert ob.ring_offset() == cfg.ring_offset() + cfg.q_elements()
        assert (ob.o_offset() * cfg.dtype.nbytes) % 1024 == 0
        assert "O staged in a buffer of its own" in ob.describe()
        assert "O staged" not in cfg.describe()
        accepted += 1
    assert accepted > 50 and refused > 10
    io = HopperAttentionConfig(persistent=True, overlap=True, item_overlap=True)
    assert (
        "items overlapped" in io.describe()
        and io.shared_bytes() == replace(io, item_overlap=False).shared_bytes()
    )


@pytest.mark.parametrize("d, causal", [(64, False), (64, True), (128, False)])
def test_choose_config_defaults(d, causal):
    """None is ``ITEM_SCHEDULES``' choice where the configuration is the measured one (two
    consumers, persistent, O by TMA; ``item_overlap`` also needs overlap), else off;
    False and True are taken as given. (D = 128 causal is left out: its choice compiles
    the 128-key tile, seconds per option.)"""
    for lk in (1024, 2 * long_keys(d, causal)):
        base = choose_config(d, tylo.bf16, causal, lk=lk)
        long = lk > long_keys(d, causal)
        item = ITEM_SCHEDULES.get((d, causal, long), ItemSchedule())
        io, ob = item.item_overlap, item.o_buffer
        measured = base.persistent and base.tma_store and base.consumers == 2
        assert base.o_buffer == (ob and measured)
        assert base.item_overlap == (io and measured and base.overlap)
        off = choose_config(d, tylo.bf16, causal, lk=lk, item_overlap=False, o_buffer=False)
        assert replace(base, item_overlap=False, o_buffer=False) == off
        one = choose_config(d, tylo.bf16, causal, lk=lk, persistent=False)
        assert not one.item_overlap and not one.o_buffer
        plain = choose_config(d, tylo.bf16, causal, lk=lk, persistent=True, overlap=False)
        assert not plain.item_overlap
        on = choose_config(d, tylo.bf16, causal, lk=lk, persistent=True, overlap=True,
                           tma_store=True, item_overlap=True, o_buffer=True)  # fmt: skip
        assert on.item_overlap and on.o_buffer


def test_default_o_buffer_left_out_where_it_does_not_fit():
    """D = 64 causal (whose default has both options) with 6 stages: the O buffer would pass
    227 KiB, so the default leaves it out; asked for, it is refused."""
    cfg = choose_config(64, tylo.bf16, True, lk=1024, stages=6)
    assert cfg.stages == 6 and not cfg.o_buffer and not cfg.item_overlap
    with pytest.raises(PlanError, match="shared memory > 227 KiB"):
        choose_config(64, tylo.bf16, True, lk=1024, stages=6, o_buffer=True)


def test_every_cta_has_an_item():
    """``_consume_items_overlapped`` peels each CTA's last item, so every CTA of the
    persistent grid must have one: brute force over small shapes (uniform and causal
    weights, any grid up to the item count)."""
    for q_tiles, heads, causal in product(range(1, 7), range(1, 6), (False, True)):
        items = q_tiles * heads
        w = np.arange(q_tiles, 0, -1) if causal else np.ones(q_tiles, dtype=np.int64)
        weights = np.tile(w.astype(np.int64) + 1, heads)
        for grid in range(1, items + 1):
            shares = cta_shares(weights, q_tiles, heads, grid)
            assert all(len(s) >= 1 for s in shares), (q_tiles, heads, grid)
            assert sorted(np.concatenate(shares).tolist()) == list(range(items))


def test_tma_epilogue_refuses_an_unknown_wait():
    with pytest.raises(PlanError, match="wait must be one of"):
        hopper_epilogue.tma_epilogue.__wrapped__(None, None, None, None, None, None, 0, 0, 0,
                                                 True)  # fmt: skip


OPTION = st.sampled_from([None, False, True])


@settings(max_examples=50, deadline=None)
@given(causal=st.booleans(), lk=st.sampled_from([None, 0, 1, 1024, 4096, 4097, 16384]),
       pingpong=OPTION, overlap=OPTION, persistent=OPTION, tma_store=OPTION,
       consumers=st.sampled_from([None, 2, 3]), stages=st.sampled_from([None, 2, 4, 6]),
       item_overlap=OPTION, o_buffer=OPTION)  # fmt: skip
def test_choose_config_any_options(causal, lk, pingpong, overlap, persistent, tma_store,
                                   consumers, stages, item_overlap, o_buffer):  # fmt: skip
    """Any combination of choose_config's options at D = 64 gives a valid configuration that
    honours every option given, or a PlanError (the config's own refusal), never anything
    else; the item options given as None are on only where ITEM_SCHEDULES names the case
    and the rest is the measured configuration, and given as True they are on."""
    kw = {"pingpong": pingpong, "overlap": overlap, "persistent": persistent,
          "tma_store": tma_store, "consumers": consumers, "stages": stages, "lk": lk,
          "item_overlap": item_overlap, "o_buffer": o_buffer}  # fmt: skip
    try:
        cfg = choose_config(64, tylo.bf16, causal, **kw)
    except PlanError as err:
        assert "HopperAttentionConfig" in str(err) or "choose_config" in str(err), err
        return
    assert HopperAttentionConfig(**cfg.__dict__) == cfg  # valid as it stands
    for name in ("pingpong", "overlap", "persistent", "tma_store", "consumers", "stages",
                 "item_overlap", "o_buffer"):  # fmt: skip
        if kw[name] is not None:
            assert getattr(cfg, name) == kw[name], name
    if cfg.o_buffer and o_buffer is None:
        long = lk is not None and lk > long_keys(64, causal)
        assert ITEM_SCHEDULES.get((64, causal, long), ItemSchedule()).o_buffer
        assert cfg.persistent and cfg.tma_store and cfg.consumers == 2
    if cfg.item_overlap and item_overlap is None:
        long = lk is not None and lk > long_keys(64, causal)
        assert ITEM_SCHEDULES.get((64, causal, long), ItemSchedule()).item_overlap
        assert cfg.overlap
