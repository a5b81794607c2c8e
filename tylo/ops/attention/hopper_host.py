"""Host side of the Hopper attention forward: tensor-map plans (proved), argument checks with
typed errors, launch and verification.

:func:`hopper_attention` runs ``O = softmax(Q Kᵀ · scale) V`` (semantics of
:mod:`tylo.ops.attention.reference`) on an sm_90a GPU. It takes what TMA can read: bf16 or
f16, head dim 64 or 128, the last dimension contiguous, every other stride (of L, of the
heads and of the batch) a multiple of 16 bytes and 16-byte aligned base addresses; anything
else raises :class:`~tylo.ops.attention.reference.AttentionInputError` saying to use
``path="warp"``. :func:`compile_hopper_attention` compiles any configuration without a GPU.
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import cache
from typing import Any

import tylo
from tylo.arrays import DeviceArray, DeviceBuffer
from tylo.constants import LOG2E
from tylo.nvgpu.errors import PlanError
from tylo.nvgpu.tma import TensorMap
from tylo.ops.args import check_scale, require_bool, require_int
from tylo.ops.arrays import empty_like_kind
from tylo.ops.attention.hopper_args import (
    _check_out,
    _kv_lens,
    _tma_strides,
    array_key_of,
    check_inputs,
    same_device,
    takes_tma_store,
)
from tylo.ops.attention.hopper_defaults import (
    ITEM_SCHEDULES,
    LONG_KEYS,
    LONG_KEYS_AT,
    SCHEDULES,
    THREE_CONSUMER_SCHEDULES,
    THREE_CONSUMER_TILES,
    WIDE_OVERLAP,
    Case,
    ItemSchedule,
    Schedule,
    long_keys,
)
from tylo.ops.attention.hopper_kernel import (
    HopperAttentionConfig,
    hopper_attention_kernel,
)
from tylo.ops.attention.hopper_persistent import hopper_attention_persistent_kernel, work_items
from tylo.ops.attention.hopper_plans import (  # noqa: F401 - re-exported
    compile_hopper_attention,
    o_plan,
    plans,
)
from tylo.ops.attention.hopper_schedule import schedule_table
from tylo.ops.attention.reference import (
    AttentionInputError,
    refuse_shared_memory,
)
from tylo.remembered import Remembered

__all__ = [
    "ITEM_SCHEDULES",
    "LONG_KEYS",
    "LONG_KEYS_AT",
    "SCHEDULES",
    "THREE_CONSUMER_SCHEDULES",
    "THREE_CONSUMER_TILES",
    "WIDE_OVERLAP",
    "HopperAttentionConfig",
    "ItemSchedule",
    "Schedule",
    "check_inputs",
    "choose_config",
    "compile_hopper_attention",
    "hopper_attention",
    "long_keys",
    "o_plan",
    "persistent_grid",
    "plans",
    "takes_tma_store",
]


def compile_kernels(args: Any, target: Any) -> dict[str, Any]:
    """What ``tylo/ops/attention/cli.py --path hopper --compile-only`` compiles: the kernel
    of :func:`choose_config` for the command line's head dim, dtype, mask and key length."""
    import tylo as _tylo

    dtype = _tylo.f16 if getattr(args, "dtype", "bf16") == "f16" else _tylo.bf16
    lk = getattr(args, "lk", None) or getattr(args, "l", None)
    cfg = choose_config(args.d, dtype, bool(args.causal), lk=lk, target=target)
    return {"hopper_attention_kernel": compile_hopper_attention(cfg, target)}


def choose_config(
    d: int,
    dtype: Any,
    causal: bool,
    *,
    pingpong: bool | None = None,
    overlap: bool | None = None,
    persistent: bool | None = None,
    tma_store: bool | None = None,
    split_kv: bool | None = None,
    split_release: bool | None = None,
    bn: int | None = None,
    stages: int | None = None,
    lk: int | None = None,
    consumers: int | None = None,
    target: Any = "sm_90a",
    item_overlap: bool | None = None,
    o_buffer: bool | None = None,
) -> HopperAttentionConfig:
    """The default tile: at d = 64, 128 keys per tile and 4 stages; at d = 128, 128 keys and 2
    stages where that compiles without spilling (S, O and P take 64 + 64 + 32 registers per
    thread: it does where the linker keeps ``setmaxnreg``, as ptxas does on the H200), else
    64 keys and 3 stages (nvJitLink, which drops ``setmaxnreg`` and leaves 168 registers);
    with ``overlap`` but not ``split_release`` 64 keys and 3 stages (the 128-key tile
    measured slower there: ``WIDE_OVERLAP``). ``bn`` and ``stages`` given replace the
    default tile's (raises :class:`PlanError` where the tile does not fit).
    ``pingpong`` and ``overlap`` (the FlashAttention-3 schedules), ``tma_store`` (O through
    shared memory and TMA stores; :func:`hopper_attention` falls back to stores by
    ownership for an ``out`` TMA cannot write), ``persistent`` (one CTA per SM walking the
    work items) and ``split_release`` (K and V on empty barriers of their own, K released
    once ``S`` completed): None takes the measured choice for ``(d, causal, lk >
    long_keys(d, causal))`` (``SCHEDULES``; ``lk``, the key length, None: the short side).
    ``split_kv`` (K and V on full barriers of their own,
    :mod:`tylo.ops.attention.hopper_ring`): None is ``split_release`` (which needs those
    full barriers); alone it measured no faster. ``consumers``: the consumer warpgroups, 2
    (128 query rows per CTA) or 3 (192 rows, FlashAttention-3's d = 64 tile, on the tile of
    ``THREE_CONSUMER_TILES``, with the schedules of ``THREE_CONSUMER_SCHEDULES`` where
    measured, else those of ``SCHEDULES``); None: 3 where ``THREE_CONSUMER_SCHEDULES``
    names the case and its one-item kernel links without spilling for ``target`` (d = 64
    without a mask, and causal past ``LONG_KEYS``, where ptxas keeps ``setmaxnreg``; two
    where ``bn``/``stages`` given do not fit three), else 2. ``item_overlap``: a persistent
    consumer issues the next item's first ``S`` with this item's last ``P V``
    (``HopperAttentionConfig``; needs the persistent kernel and ``overlap``), and
    ``o_buffer``: its TMA-store epilogue stages O in a buffer of its own (needs the
    persistent kernel and ``tma_store``); None: the measured choice (``ITEM_SCHEDULES``)
    where the rest of the configuration is the one measured (two consumers, persistent, O
    by TMA, and ``overlap`` for ``item_overlap``), else off."""
    d = require_int("choose_config", "d", d)
    causal = require_bool("choose_config", "causal", causal)
    dtype = tylo.dtype_of(dtype)
    opts = dict(
        pingpong=pingpong,
        overlap=overlap,
        persistent=persistent,
        tma_store=tma_store,
        split_kv=split_kv,
        split_release=split_release,
    )
    for name, value in (*opts.items(), ("item_overlap", item_overlap), ("o_buffer", o_buffer)):
        if value is not None and type(value) is not bool:  # before the cache (1 for True)
            raise PlanError(
                f"choose_config: {name} must be a bool (or None: the default), got {value!r}"
            )
    if consumers is not None and type(consumers) is not int:
        raise PlanError(
            f"choose_config: consumers must be an int, 2 or 3 (or None: 2), got {consumers!r}"
        )
    if lk is not None and (type(lk) is not int or lk < 0):
        raise PlanError(f"choose_config: lk must be an int >= 0 (or None), got {lk!r}")
    long = lk is not None and lk > long_keys(d, causal)
    cfg = _choose_config(d, dtype, causal, long, consumers, target=target, **opts)
    tile = {f: x for f, x in (("bn", bn), ("stages", stages)) if x is not None}
    if tile:
        try:
            cfg = replace(cfg, **tile)
        except PlanError:  # three by default, but the tile given does not fit them: two
            if consumers is not None or cfg.consumers == 2:
                raise
            two = _choose_config(d, dtype, causal, long, 2, target=target, **opts)
            cfg = replace(two, **tile)
    return _item_options(cfg, Case(d, bool(causal), long), item_overlap, o_buffer)


def _item_options(
    cfg: HopperAttentionConfig, case: tuple, item_overlap: bool | None, o_buffer: bool | None
) -> HopperAttentionConfig:
    """``cfg`` with the item options: as given, or for None ``ITEM_SCHEDULES``' choice for
    ``case`` where ``cfg`` is the measured configuration (two consumers, persistent, O by
    TMA, and ``overlap`` for ``item_overlap``), else off; a default O buffer that does not
    fit beside the stages is left out."""
    item = ItemSchedule()
    if cfg.persistent and cfg.tma_store and cfg.consumers == 2:
        item = ITEM_SCHEDULES.get(case, item)
    io, ob = item.item_overlap, item.o_buffer
    extra = {"item_overlap": (io and cfg.overlap) if item_overlap is None else item_overlap,
             "o_buffer": ob if o_buffer is None else o_buffer}  # fmt: skip
    if (extra["item_overlap"], extra["o_buffer"]) == (cfg.item_overlap, cfg.o_buffer):
        return cfg
    try:
        return replace(cfg, **extra)
    except PlanError:  # the O buffer does not fit beside the stages given: as given only
        given = {"item_overlap": item_overlap, "o_buffer": o_buffer}
        return replace(cfg, **{f: bool(x) for f, x in given.items()})


@cache
def _choose_config(
    d: int,
    dtype: Any,
    causal: bool,
    long: bool,
    consumers: int | None,
    *,
    pingpong: bool | None,
    overlap: bool | None,
    persistent: bool | None,
    tma_store: bool | None,
    split_kv: bool | None,
    split_release: bool | None,
    target: Any,
) -> HopperAttentionConfig:
    opts = dict(
        pingpong=pingpong,
        overlap=overlap,
        persistent=persistent,
        tma_store=tma_store,
        split_kv=split_kv,
        split_release=split_release,
    )
    case = Case(d, bool(causal), long)
    if consumers is None:  # three where measured faster and where they fit the registers
        if case in THREE_CONSUMER_SCHEDULES:
            three = _choose_config(d, dtype, causal, long, 3, target=target, **opts)
            if not _one_item_spills(three, target):
                return three
        consumers = 2
    schedule = SCHEDULES.get(case, Schedule())
    if consumers == 3:
        schedule = THREE_CONSUMER_SCHEDULES.get(case, schedule)
    cfg = _two_consumers(d, dtype, causal, schedule, target, **opts)
    return cfg if consumers == cfg.consumers else _three_consumers(cfg, consumers)


def _one_item_spills(cfg: HopperAttentionConfig, target: Any) -> bool:
    """Whether ``cfg``'s one-item kernel spills when linked for ``target`` (what decides a
    tile's fit: the persistent kernel's adds a few bytes of spill in some schedules, and
    measured as fast)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a linker that drops setmaxnreg says so
        one_item = replace(cfg, persistent=False)
        return compile_hopper_attention(one_item, target).resources.spills is not False


def _two_consumers(
    d: int,
    dtype: Any,
    causal: bool,
    schedule: Schedule,
    target: Any,
    *,
    pingpong: bool | None,
    overlap: bool | None,
    persistent: bool | None,
    tma_store: bool | None,
    split_kv: bool | None,
    split_release: bool | None,
) -> HopperAttentionConfig:
    """The two-consumer config of ``schedule`` (its options: the defaults of those given as
    None) and its tile."""
    pingpong = schedule.pingpong if pingpong is None else pingpong
    overlap = schedule.overlap if overlap is None else overlap
    persistent = schedule.persistent if persistent is None else persistent
    tma_store = schedule.tma_store if tma_store is None else tma_store
    split_release = schedule.split_release if split_release is None else split_release
    split_kv = split_release if split_kv is None else split_kv
    opts = dict(
        d=d,
        dtype=dtype,
        causal=causal,
        pingpong=pingpong,
        overlap=overlap,
        persistent=persistent,
        tma_store=tma_store,
        split_kv=split_kv,
        split_release=split_release,
    )
    if d != 128:
        return HopperAttentionConfig(bn=128, stages=4, **opts)
    narrow = HopperAttentionConfig(bn=64, stages=3, **opts)
    if overlap and not (WIDE_OVERLAP or split_release):
        return narrow
    try:
        wide = HopperAttentionConfig(bn=128, stages=2, **opts)
    except tylo.TyloError:  # a tile that does not fit: the narrow one
        return narrow
    return narrow if _one_item_spills(wide, target) else wide


def _three_consumers(cfg: HopperAttentionConfig, consumers: int) -> HopperAttentionConfig:
    """``cfg`` (the two-consumer choice) with ``consumers`` consumer warpgroups, on the tile
    of ``THREE_CONSUMER_TILES`` for its head dim (:class:`PlanError` where it does not
    fit, or ``consumers`` is not a count the kernel takes)."""
    bn, stages = THREE_CONSUMER_TILES.get(cfg.d, (cfg.bn, cfg.stages))
    return replace(cfg, consumers=consumers, bn=bn, stages=stages)


def _sm_count(device: int | None) -> int:
    from tylo.backend.device import device_properties

    return device_properties(device or 0).sm_count


def _check_items(cfg: HopperAttentionConfig, lq: int, h: int, b: int) -> int:
    """The persistent kernel's work items, refused (:class:`AttentionInputError`) where they
    do not fit its u32 item index."""
    items = work_items(-(-lq // cfg.bm), h, b)
    if items >= 2**32:
        raise AttentionInputError(
            f"hopper_attention: {items} work items (ceil(Lq / {cfg.bm}) * H * B) do not fit "
            "the persistent kernel's u32 item index; use persistent=False or split the batch"
        )
    return items


def persistent_grid(
    cfg: HopperAttentionConfig,
    lq: int,
    lk: int,
    h: int,
    b: int,
    device: int | None = None,
    sms: int | None = None,
) -> int:
    """The persistent kernel's 1-D grid: ``min(work items, SMs)`` (``sms`` given, or the
    device's SM count). Raises :class:`AttentionInputError` where the kernel's u32
    arithmetic would wrap: ``2**32`` work items or more, or a CTA whose K/V ring would run
    ``2**32`` iterations or more (its items times ``ceil(Lk / bn)``)."""
    if not isinstance(cfg, HopperAttentionConfig):
        raise AttentionInputError(
            f"persistent_grid: cfg must be a HopperAttentionConfig, got {cfg!r}"
        )
    lq, lk, h, b = (
        require_int("persistent_grid", w, x, minimum=1)
        for w, x in (("lq", lq), ("lk", lk), ("h", h), ("b", b))
    )
    items = _check_items(cfg, lq, h, b)
    sms = _sm_count(device) if sms is None else sms
    sms = require_int("hopper_attention", "the SM count (sms)", sms, minimum=1)
    grid = min(items, sms)
    if -(-items // grid) * -(-lk // cfg.bn) >= 2**32:
        raise AttentionInputError(
            f"hopper_attention: {-(-items // grid)} work items per CTA of {-(-lk // cfg.bn)} "
            "key tiles each overflow the persistent kernel's u32 ring count; use "
            "persistent=False or split the batch"
        )
    return grid


def _default_config(
    d: int, dtype: Any, causal: bool, lq: int, lk: int, h: int, b: int
) -> HopperAttentionConfig:
    """:func:`choose_config` for these lengths, with the other kernel where the chosen one
    cannot take the shape: the one-item grid takes at most 65535 heads and batch entries;
    the persistent kernel counts items and ring iterations in u32, which surely cannot wrap
    while ``items * key tiles < 2**32`` (without asking the device its SM count: no driver
    call before the last check). Where neither fits, the chosen one refuses and says why."""
    cfg = choose_config(d, dtype, causal, lk=lk)
    one_item_fits = h <= 65535 and b <= 65535
    if cfg.persistent and one_item_fits:
        if work_items(-(-lq // cfg.bm), h, b) * -(-lk // cfg.bn) >= 2**32:
            return choose_config(d, dtype, causal, lk=lk, persistent=False)
    elif not cfg.persistent and not one_item_fits:
        cfg = choose_config(d, dtype, causal, lk=lk, persistent=True)
    if not one_item_fits and work_items(-(-lq // cfg.bm), h, b) >= 2**32:
        raise AttentionInputError(
            f"hopper_attention: {h} heads and {b} batch entries fit neither kernel: the "
            "one-item grid takes at most 65535 of each, and the persistent kernel's u32 item "
            f"index at most 2**32 - 1 items (ceil(Lq / {cfg.bm}) * H * B); split the batch"
        )
    return cfg


_PREPARED = Remembered(64)  # ("in", inputs' keys, causal, scale, cfg) or ("out", ...)


def _unowned(a: Any) -> Any:
    """``a`` without its owner: a remembered tensor map must not keep the tensor alive (it
    is found again only by the same address, shape and strides, so never used for another)."""
    return DeviceArray(a.ptr, a.shape, a.strides, a.dtype, a.device)


def _prepare_inputs(q: Any, k: Any, v: Any, causal: bool, scale: float | None, cfg: Any):
    """The checks and choices that depend on q, k, v, the mask, the scale and ``cfg``:
    ``(cfg, grid, (q, k, v) as the maps view them, (lq, lk, h, b, d), dtype, device,
    scale * log2 e)``, the grid None for the persistent kernel (:func:`_prepare_outputs`
    makes it). No driver call."""
    qa, ka, va = check_inputs(q, k, v)
    lq, h, b, d = qa.shape
    lk = ka.shape[0]
    sc = 1.0 / math.sqrt(d) if scale is None else scale
    if not (math.isfinite(sc) and sc > 0):
        raise AttentionInputError(
            f"hopper_attention: the Hopper kernel takes a finite positive scale (its running "
            f"maximum is kept scaled), got {scale!r}; use path='warp'"
        )
    if cfg is None:
        cfg = _default_config(d, qa.dtype, causal, lq, lk, h, b)
    if (cfg.d, cfg.dtype, cfg.causal) != (d, qa.dtype, causal):
        raise AttentionInputError(
            f"hopper_attention: cfg {cfg} does not match d = {d}, {qa.dtype}, causal = {causal}"
        )
    if not cfg.persistent and (h > 65535 or b > 65535):
        raise AttentionInputError(
            f"hopper_attention: {h} heads and {b} batch entries: the grid takes at most 65535 "
            "of each; use cfg=choose_config(..., persistent=True)"
        )
    grid = (-(-lq // cfg.bm), h, b)
    if cfg.persistent:  # the grid asks the device its SM count: after the outputs' checks
        _check_items(cfg, lq, h, b)
        grid = None
    views = tuple(_unowned(a) for a in (qa, ka, va))
    return cfg, grid, views, (lq, lk, h, b, d), qa.dtype, qa.device, sc * LOG2E


def _prepare_outputs(out: Any, lse: Any, prep: tuple, lens: Any = None) -> tuple:
    """The rest of the launch preparation, once ``out`` and ``lse`` are checked (also
    against sharing memory with the inputs, each other, themselves and the caller's device
    ``lens``): ``(cfg, (Q, K, V maps), O map or None, (out's B, H, L strides), (lse's B, H
    strides), grid, the persistent kernel's schedule table or None)``; ``cfg.tma_store``
    dropped where TMA cannot write ``out``. The first driver calls (the SM count of the
    persistent grid, the table's copy, the maps' encoding) come after the last check that
    needs none."""
    cfg, grid, views, (lq, lk, h, b, d), dtype, device, _ = prep
    oa = _check_out(out, (b, h, lq, d), dtype, "out")
    la = _check_out(lse, (b, h, lq), tylo.f32, "lse")
    same_device("hopper_attention", q=views[0], out=oa, lse=la)
    refuse_shared_memory("hopper_attention", {"out": oa, "lse": la},
                         {**dict(zip(("q", "k", "v"), views)), "kv_lens": lens})  # fmt: skip
    table = None
    if grid is None:
        grid = (persistent_grid(cfg, lq, lk, h, b, device),)
        table = _device_table(cfg, lq, lk, h * b, grid[0], device)
    tmo = None
    if cfg.tma_store:
        st = _tma_strides(oa, "out")
        if isinstance(st, str):  # TMA cannot write this out: the stores by ownership
            cfg = replace(cfg, tma_store=False, o_buffer=False)
        else:
            tmo = TensorMap(o_plan(cfg), DeviceArray(oa.ptr, (lq, h, b, d), (*st, 1), oa.dtype,
                                                     oa.device))  # fmt: skip
    # strides of modes of more than one element are positive (_check_out refuses the
    # rest); a mode of one element is never stepped, and its stride goes as 1 (the
    # kernel's stride arguments are positive)
    ostrides = _stepped_strides(oa.shape[:3], oa.strides[:3])
    lstrides = _stepped_strides(la.shape[:2], la.strides[:2])
    maps = tuple(TensorMap(p, a) for p, a in zip(plans(cfg), views))
    return cfg, maps, tmo, ostrides, lstrides, grid, table


def _stepped_strides(shape: tuple, strides: tuple) -> tuple[int, ...]:
    """``strides`` as the kernel takes them: as given where the mode has more than one
    element (positive: checked before), 1 where it has one (never stepped)."""
    return tuple(int(s) if n > 1 else 1 for n, s in zip(shape, strides))


_TABLES = Remembered(16)  # (bm, bn, causal, overlap, Lq, Lk, (batch, head)s, grid, device)


def _device_table(
    cfg: HopperAttentionConfig, lq: int, lk: int, heads: int, grid: int, device: int | None
) -> Any:
    """The persistent kernel's schedule table on the device (:func:`schedule_table`), made
    once per shape and grid and kept (the kernel only reads it): a host-to-device copy on
    every call would wait for the kernels before it."""
    key = (cfg.bm, cfg.bn, cfg.causal, cfg.overlap, lq, lk, heads, grid, device or 0)
    return _TABLES.get(
        key,
        lambda: DeviceBuffer.from_numpy(
            schedule_table(cfg, lq, lk, heads, grid), device=device or 0
        ),
    )


# --8<-- [start:launch]
def hopper_attention(
    q: Any,
    k: Any,
    v: Any,
    *,
    causal: bool = False,
    kv_lens: Any = None,
    scale: float | None = None,
    out: Any = None,
    lse: Any = None,
    cfg: Any = None,
    stream: Any = None,
) -> tuple[Any, Any]:
    """``(out, lse)``: ``out`` (B, H, Lq, D) in the inputs' dtype and ``lse`` (B, H, Lq) f32,
    the natural-log log-sum-exp of the scaled visible scores, by the Hopper kernel. Masks
    (``causal`` bottom-right, ``kv_lens`` per batch entry) and empty rows (o = 0, lse = -inf)
    as :func:`tylo.ops.attention.reference.attention_reference`. ``out``/``lse`` given:
    written in place (last dimension contiguous, other strides free). With
    ``cfg.tma_store`` O is written by TMA stores, which need ``out``'s other strides to be
    positive multiples of 16 bytes and its base 16-byte aligned (:func:`takes_tma_store`):
    a given ``out`` that is not runs with ``tma_store=False`` (stores by ownership, and so
    without ``o_buffer``), with the same result. The preparation (checks, configuration,
    grid, tensor maps) is remembered per combination of the arrays' addresses, shapes and
    strides, the mask, the scale and ``cfg``, for the last 64."""
    if type(causal) is not bool:
        raise AttentionInputError(f"hopper_attention: causal must be a bool, got {causal!r}")
    if cfg is not None and not isinstance(cfg, HopperAttentionConfig):
        raise AttentionInputError(
            f"hopper_attention: cfg must be a HopperAttentionConfig, got {type(cfg).__name__}"
        )
    scale = check_scale("hopper_attention", scale)  # a real number, finite in f32
    keys = (array_key_of(q, "q"), array_key_of(k, "k"), array_key_of(v, "v"))
    pin = _PREPARED.get(("in", keys, causal, scale, cfg),
                    lambda: _prepare_inputs(q, k, v, causal, scale, cfg))  # fmt: skip
    _, _, _, (lq, lk, h, b, d), dtype, device, sc = pin
    lens = _kv_lens(kv_lens, b, lk, q, device)
    # the caller's own device lengths join the key (out and lse must not share their
    # memory); lengths tylo made (the default, or a copy of host ones) cannot
    given = lens if lens is kv_lens else None
    if out is None:
        out = empty_like_kind(q, (b, h, lq, d), dtype, device)
    if lse is None:
        lse = empty_like_kind(q, (b, h, lq), tylo.f32, device)
    run, (tq, tk, tv), tmo, (osb, osh, osl), (lsb, lsh), grid, table = _PREPARED.get(
        ("out", keys, causal, scale, cfg, array_key_of(out, "out"), array_key_of(lse, "lse"),
         None if given is None else array_key_of(given, "kv_lens")),
        lambda: _prepare_outputs(out, lse, pin, given),
    )  # fmt: skip
    if run.persistent:
        hopper_attention_persistent_kernel[grid, run.threads](
            out,
            lse,
            tq,
            tk,
            tv,
            tmo,
            lens,
            table,
            lq,
            lk,
            h,
            osb,
            osh,
            osl,
            lsb,
            lsh,
            sc,
            run,
            shared=run.shared_bytes(),
            stream=stream,
        )
        return out, lse
    hopper_attention_kernel[grid, run.threads](
        out,
        lse,
        tq,
        tk,
        tv,
        tmo,
        lens,
        lq,
        lk,
        osb,
        osh,
        osl,
        lsb,
        lsh,
        sc,
        run,
        shared=run.shared_bytes(),
        stream=stream,
    )
    return out, lse


# --8<-- [end:launch]
