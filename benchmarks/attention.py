"""Attention forward: tylo beside SDPA's FlashAttention-2 and cuDNN backends and a Triton
flash-attention forward, interleaved in one process, CUDA events, medians.

    PYTHONPATH=$PWD python3 benchmarks/attention.py [--quick] [--reps 20] [--path warp]
        [--dtype bf16] [--inner 3] [--d 64|128] [--causal yes|no] [--variants [--only REGEX]]
        [--json FILE] [--lengths L,L,...]

Every implementation computes ``O = softmax(Q Kᵀ / sqrt(D)) V`` on the same (B, H, L, D)
contiguous bf16 tensors, causal or not. Shapes: D = 64 and 128, causal and not, L = 1k, 4k
and 16k with B x H x L = 256k tokens (B = 256k / (16 L), H = 16), so that each call takes
about a millisecond or more. TFLOP/s count ``4 B H L L D``, halved for causal
(:func:`tylo.ops.attention.reference.attention_flops`); ratios > 1 mean tylo is faster. The
Triton kernel is the fused-attention tutorial's algorithm (one program per block of 128
query rows and one (batch, head), K / V blocks of 64, online softmax with exp2), written
here; it is skipped, with the reason printed, when triton is missing or fails. Each sample
times ``--inner`` calls back to back after ``--lead-us`` of GPU sleep, so that the host's
preparation of every call (the first's too) hides behind the GPU's work and the events time
kernels alone; the side that opens each round rotates. The host's time per call is reported
beside, measured with the GPU idle.
"""

from __future__ import annotations

import argparse
import math
import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import provenance

TOKENS = 256 * 1024
SHAPES = [(d, causal, length) for d in (64, 128) for causal in (False, True)
          for length in (1024, 4096, 16384)]  # fmt: skip
QUICK = [(64, False, 1024), (128, True, 1024)]
# --variants: other warp-path configurations timed beside the default (name: options)
# ("-8w": CTAs of 8 warps, 16 rows per warp; measured 0.79-0.96x the default)
VARIANTS = {
    64: {"128x64": {"block_m": 128, "block_n": 64},
         "128x64-qsmem": {"block_m": 128, "block_n": 64, "q_in_registers": False},
         "64x64": {"block_m": 64, "block_n": 64},
         "128x64-8w": {"block_m": 128, "block_n": 64, "warps": 8},
         "128x128-8w": {"block_m": 128, "block_n": 128, "warps": 8},
         # the default tile with the register-edge options (AttentionConfig); on the H200
         # (2026-12-02) 0.86-0.93x the default: copies issued early pay where registers allow
         "128x64 late": {"block_m": 128, "block_n": 64, "late_copies": True},
         "128x64 late shared": {"block_m": 128, "block_n": 64, "late_copies": True,
                                "shared_bases": True}},
    128: {"64x32": {"block_m": 64, "block_n": 32},
          "128x64-qsmem": {"block_m": 128, "block_n": 64, "q_in_registers": False},
          "128x32-qsmem": {"block_m": 128, "block_n": 32, "q_in_registers": False},
          "128x64-8w": {"block_m": 128, "block_n": 64, "warps": 8},
          "128x32-8w": {"block_m": 128, "block_n": 32, "warps": 8},
          # 32 rows per warp with Q in registers: 16 keys per block is what sm_90a fits without
          # spilling; on the H200 (2026-12-02) 0.78-0.85x the 64x64 tile (a rescale per 16
          # keys); the sm_90 default takes 64-key blocks in 16-key steps instead
          "128x16": {"block_m": 128, "block_n": 16},
          # the portable default (sm_80, and with masks on sm_90): 16 rows per warp
          "64x64": {"block_m": 64, "block_n": 64},
          # the sm_90 default's softmax steps (sub_n = 16, lazy rescale) on 32-key blocks
          "128x32 s16 lazy": {"block_m": 128, "block_n": 32, "sub_n": 16, "lazy_rescale": True,
                              "shared_bases": True}},
}  # fmt: skip
# --variants with --path hopper: the FlashAttention-3 schedules (choose_config's options;
# its default, SCHEDULES, is one of them), and the persistent kernel (one CTA per SM walking
# the work items) with the default schedules and with each of them
HOPPER_VARIANTS = {"plain": {"pingpong": False, "overlap": False},
                   "pingpong": {"pingpong": True, "overlap": False},
                   "overlap": {"pingpong": False, "overlap": True},
                   "pingpong+overlap": {"pingpong": True, "overlap": True},
                   "persistent": {"persistent": True},
                   "one-item": {"persistent": False},  # the default schedules, a CTA per item
                   "persistent plain": {"persistent": True, "pingpong": False, "overlap": False},
                   "persistent pingpong+overlap": {"persistent": True, "pingpong": True,
                                                   "overlap": True},
                   "tma-store": {"tma_store": True},  # the default schedules, O by TMA
                   "persistent tma-store": {"persistent": True, "tma_store": True},
                   "persistent overlap": {"persistent": True, "pingpong": False, "overlap": True},
                   "persistent overlap tma-store": {"persistent": True, "pingpong": False,
                                                    "overlap": True, "tma_store": True},
                   # K and V on barriers of their own (S waits for K only): alone no faster
                   "split-kv": {"split_kv": True},
                   "persistent split-kv": {"persistent": True, "split_kv": True},
                   # and on empty barriers of their own: K released once S completed (FA3's
                   # separate K and V pipelines; implies split_kv): the default at d = 128
                   # (on the wide tile), slower at d = 64
                   "split release": {"split_release": True},
                   "persistent split release": {"persistent": True, "split_release": True},
                   # more K/V stages than the default tile has (skipped where not more)
                   "4 stages": {"stages": 4},
                   "6 stages": {"stages": 6},
                   "3 stages pingpong": {"stages": 3, "pingpong": True, "overlap": False},
                   # d = 128: overlap on 128-key tiles (FA3's tile; hopper_host.WIDE_OVERLAP)
                   "wide overlap": {"bn": 128, "stages": 2},
                   "wide overlap persistent": {"bn": 128, "stages": 2, "persistent": True},
                   "wide overlap alone": {"bn": 128, "stages": 2, "pingpong": False,
                                          "overlap": True},
                   "wide overlap alone persistent": {"bn": 128, "stages": 2, "pingpong": False,
                                                     "overlap": True, "persistent": True},
                   # the same tile with K released early: the producer loads K of the next
                   # tile while this one's P V runs (what 2 stages lacked)
                   "wide split release": {"bn": 128, "stages": 2, "split_release": True},
                   # the persistent consumers run on from one item into the next: its first
                   # S with this item's last P V, this item's O stored after
                   "persistent items overlapped": {"persistent": True, "overlap": True,
                                                   "item_overlap": True},
                   # the persistent TMA-store epilogue staged in a buffer of its own (Q
                   # released before it, the stores' read waited for one item later)
                   "persistent o buffer": {"persistent": True, "tma_store": True, "o_buffer": True},
                   # the default without either (what it was before they were measured)
                   "neither": {"item_overlap": False, "o_buffer": False},
                   "persistent items overlapped o buffer": {
                       "persistent": True, "overlap": True, "item_overlap": True,
                       "tma_store": True, "o_buffer": True},
                   "wide split release persistent": {"bn": 128, "stages": 2,
                                                     "split_release": True, "persistent": True},
                   "wide split release one-item": {"bn": 128, "stages": 2, "persistent": False,
                                                   "split_release": True},
                   # and with each schedule named (d = 128 causal's default has neither)
                   "wide split release overlap": {"bn": 128, "stages": 2, "split_release": True,
                                                  "pingpong": False, "overlap": True},
                   "wide split release overlap persistent": {
                       "bn": 128, "stages": 2, "split_release": True, "pingpong": False,
                       "overlap": True, "persistent": True},
                   "wide split release pingpong+overlap": {
                       "bn": 128, "stages": 2, "split_release": True, "pingpong": True,
                       "overlap": True},
                   "wide split release pingpong+overlap persistent": {
                       "bn": 128, "stages": 2, "split_release": True, "pingpong": True,
                       "overlap": True, "persistent": True},
                   # three consumer warpgroups, 192 query rows per CTA (FA3's d = 64 tile;
                   # hopper_host.THREE_CONSUMER_TILES: 128 keys at d = 64, 64 at d = 128),
                   # with THREE_CONSUMER_SCHEDULES where measured: the default at d = 64
                   # without a mask (1.04-1.08x two), 0.66-0.98x elsewhere (2026-12-02);
                   # skipped where choose_config finds no tile that fits
                   "2 consumers": {"consumers": 2},  # the two-consumer default
                   "3 consumers": {"consumers": 3},
                   "3 consumers persistent": {"consumers": 3, "persistent": True},
                   "3 consumers one-item": {"consumers": 3, "persistent": False},
                   "3 consumers pingpong": {"consumers": 3, "pingpong": True, "overlap": False},
                   "3 consumers pingpong persistent": {"consumers": 3, "pingpong": True,
                                                       "overlap": False, "persistent": True},
                   "3 consumers pingpong+overlap one-item": {"consumers": 3, "pingpong": True,
                                                             "overlap": True,
                                                             "persistent": False},
                   "3 consumers pingpong+overlap persistent": {"consumers": 3, "pingpong": True,
                                                               "overlap": True,
                                                               "persistent": True}}  # fmt: skip


def _triton_attention():
    """A Triton flash-attention forward (the tutorial's algorithm), or a reason string."""
    try:
        import triton
        import triton.language as tl
    except Exception as err:  # noqa: BLE001 - any import failure: skip with the reason
        return f"triton unavailable ({type(err).__name__}: {err})"

    @triton.jit
    def _fwd(Q, K, V, Out, sm_scale, L, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
             D: tl.constexpr, CAUSAL: tl.constexpr):  # fmt: skip
        start_m = tl.program_id(0)
        bh = tl.program_id(1)
        base = bh.to(tl.int64) * L * D
        offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = tl.arange(0, BLOCK_N)
        offs_d = tl.arange(0, D)
        q = tl.load(Q + base + offs_m[:, None] * D + offs_d[None, :], mask=offs_m[:, None] < L)
        m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
        l_i = tl.zeros([BLOCK_M], tl.float32)
        acc = tl.zeros([BLOCK_M, D], tl.float32)
        qk_scale = sm_scale * 1.44269504
        hi = tl.minimum((start_m + 1) * BLOCK_M, L) if CAUSAL else L
        for start_n in range(0, hi, BLOCK_N):
            cols = start_n + offs_n
            k = tl.load(K + base + cols[None, :] * D + offs_d[:, None], mask=cols[None, :] < L)
            qk = tl.dot(q, k) * qk_scale
            keep = cols[None, :] < L
            if CAUSAL:
                keep = keep & (cols[None, :] <= offs_m[:, None])
            qk = tl.where(keep, qk, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(qk, 1))
            p = tl.math.exp2(qk - m_new[:, None])
            alpha = tl.math.exp2(m_i - m_new)
            l_i = l_i * alpha + tl.sum(p, 1)
            acc = acc * alpha[:, None]
            v = tl.load(V + base + cols[:, None] * D + offs_d[None, :], mask=cols[:, None] < L)
            acc = tl.dot(p.to(v.dtype), v, acc)
            m_i = m_new
        acc = acc / l_i[:, None]
        tl.store(Out + base + offs_m[:, None] * D + offs_d[None, :], acc.to(Out.dtype.element_ty),
                 mask=offs_m[:, None] < L)  # fmt: skip

    def run(q, k, v, o, causal):
        b, h, length, d = q.shape
        grid = (triton.cdiv(length, 128), b * h)
        _fwd[grid](q, k, v, o, 1.0 / math.sqrt(d), length, BLOCK_M=128, BLOCK_N=64, D=d,
                   CAUSAL=causal, num_warps=8 if d == 128 else 4, num_stages=3)  # fmt: skip

    return run


def _time(fn, reps_out, inner=1, lead=0):
    """Append the GPU time of one call of ``fn`` (ms): ``inner`` calls back to back between
    two events, divided by ``inner``. ``lead``: cycles of GPU sleep queued before the first
    event, so that every call's host preparation (the first's too) happens while the GPU is
    busy and the events time the kernels alone, as in a real model's stream of launches
    (without it the first call's host time falls inside the timed span; 0: none)."""
    import torch

    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    if lead:  # only nonzero where _sleep_cycles found torch.cuda._sleep
        torch.cuda._sleep(lead)
    s.record()
    for _ in range(inner):
        fn()
    e.record()
    torch.cuda.synchronize()
    reps_out.append(s.elapsed_time(e) / inner)


def _sleep_cycles(us):
    """Cycles of ``torch.cuda._sleep`` that take about ``us`` microseconds on this GPU
    (measured: the clock rate varies); 0 for none."""
    if us <= 0:
        return 0
    import torch

    if not callable(getattr(torch.cuda, "_sleep", None)):  # a private torch helper
        print("no torch.cuda._sleep in this torch: samples start without the GPU sleep "
              "(the first call's host time is then timed too)", file=sys.stderr)  # fmt: skip
        return 0
    cycles = 1_000_000
    torch.cuda._sleep(cycles)  # warm up
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    torch.cuda._sleep(cycles)
    e.record()
    torch.cuda.synchronize()
    return max(1, int(cycles * us / (s.elapsed_time(e) * 1000)))


def tdt_name(dtype):
    import tylo

    return getattr(tylo, dtype)


def bench(
    d, causal, length, reps, path, dtype, triton_fn, variants=False, inner=1, only=None, lead=0
):
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    from tylo.nvgpu.errors import PlanError
    from tylo.ops.attention.host import attention, launch, plan_attention
    from tylo.ops.attention.reference import attention_flops

    tdt = torch.bfloat16 if dtype == "bf16" else torch.float16
    b, h = max(1, TOKENS // (16 * length)), 16
    q, k, v = (torch.randn((b, h, length, d), device="cuda", dtype=tdt) for _ in range(3))
    o = torch.empty_like(q)
    lse = torch.empty((b, h, length), device="cuda", dtype=torch.float32)
    runs = {}
    if path == "hopper":
        runs["tylo"] = lambda: attention(q, k, v, causal=causal, out=o, lse=lse, path="hopper")
        from tylo.ops.attention.hopper_host import choose_config, hopper_attention

        for name, kw in (HOPPER_VARIANTS if variants else {}).items():
            if only is not None and not re.search(only, name):
                continue
            if "bn" in kw and d != 128:
                continue  # the wide-overlap tiles are d = 128's
            try:
                c2 = choose_config(d, tdt_name(dtype), causal, lk=length, **kw)
            except PlanError:  # a tile that does not fit
                continue
            if "stages" in kw and "bn" not in kw:
                base = choose_config(d, tdt_name(dtype), causal, lk=length,
                                     **{f: x for f, x in kw.items() if f != "stages"})  # fmt: skip
                if c2.stages <= base.stages:
                    continue  # not more stages than the default has
            runs[f"tylo {name}"] = lambda c2=c2: hopper_attention(
                q, k, v, causal=causal, out=o, lse=lse, cfg=c2
            )
    else:
        cfg, val = plan_attention(q, k, v, o, lse, causal=causal)
        runs["tylo"] = lambda: launch(cfg, val, q, k, v, o, lse, None)
        for name, kw in (VARIANTS.get(d, {}) if variants else {}).items():
            if only is not None and not re.search(only, name):
                continue
            c2, v2 = plan_attention(q, k, v, o, lse, causal=causal, **kw)
            runs[f"tylo {name}"] = lambda c2=c2, v2=v2: launch(c2, v2, q, k, v, o, lse, None)

    def backend(which):
        def run():
            with sdpa_kernel(which):
                sdpa(q, k, v, is_causal=causal)

        return run

    skipped = {}
    for name, which in (("fa2", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
        try:
            backend(which)()
            runs[name] = backend(which)
        except Exception as err:  # noqa: BLE001 - a backend this build lacks: skip it
            skipped[name] = f"{type(err).__name__}: {str(err).splitlines()[0][:100]}"
    if callable(triton_fn):
        ot = torch.empty_like(q)
        try:
            triton_fn(q, k, v, ot, causal)
            runs["triton"] = lambda: triton_fn(q, k, v, ot, causal)
        except Exception as err:  # noqa: BLE001 - triton failed to compile or run: skip
            skipped["triton"] = f"{type(err).__name__}: {str(err).splitlines()[0][:100]}"
    else:
        skipped["triton"] = triton_fn
    for fn in runs.values():  # compile and warm up
        fn()
    torch.cuda.synchronize()
    times = {name: [] for name in runs}
    names = list(runs)
    for i in range(reps):  # interleaved: every implementation once per round, and the
        # round's first side rotating (the first after a pause measured up to 25% slower)
        for name in names[i % len(names) :] + names[: i % len(names)]:
            _time(runs[name], times[name], inner, lead)
    flops = attention_flops(b, h, length, length, d, causal=causal)
    row = {"d": d, "causal": causal, "L": length, "B": b, "H": h, "dtype": dtype,
           "path": path, "skipped": skipped}  # fmt: skip
    for name, ts in times.items():
        ms = statistics.median(ts)
        row[f"{name}_ms"] = ms
        row[f"{name}_tflops"] = flops / ms / 1e9
    for other in ("fa2", "cudnn", "triton"):
        if f"{other}_ms" in row:
            row[f"vs_{other}"] = row[f"{other}_ms"] / row["tylo_ms"]
    for name in ("tylo", "fa2", "cudnn", "triton"):  # the host's share of a call
        if name in runs:
            row[f"{name}_host_us"] = _host_us(runs[name])
    return row


def _host_us(fn, n=15):
    """Median host time of one call (µs), the GPU idle before each: what a stream of short
    kernels pays between launches when the host cannot run ahead."""
    import time

    import torch

    ts = []
    for _ in range(n):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    torch.cuda.synchronize()
    return statistics.median(ts) * 1e6


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--quick", action="store_true", help="two small shapes, 5 rounds")
    p.add_argument("--path", choices=("warp", "hopper"), default="warp")
    p.add_argument("--dtype", choices=("bf16", "f16"), default="bf16")
    p.add_argument("--json", default=None, help="write the rows to this file")
    provenance.add_arguments(p)
    p.add_argument(
        "--inner",
        type=int,
        default=3,
        help="calls per timed sample, back to back (1: include the host's launch time)",
    )
    p.add_argument(
        "--d", type=int, choices=(64, 128), default=None, help="only this head dim's shapes"
    )
    p.add_argument("--variants", action="store_true",
                   help="also time other configurations (warp: VARIANTS, block sizes; "
                        "hopper: HOPPER_VARIANTS, the FA3 schedules)")  # fmt: skip
    p.add_argument("--lead-us", type=float, default=1000.0,
                   help="GPU sleep queued before each sample, so that the host's preparation "
                        "of its calls stays out of the timed span (0: none)")  # fmt: skip
    p.add_argument(
        "--only",
        default=None,
        metavar="REGEX",
        help="with --variants: only the variants whose name this regex finds",
    )
    p.add_argument(
        "--causal",
        choices=("yes", "no"),
        default=None,
        help="only the causal (yes) or the unmasked (no) shapes",
    )
    p.add_argument(
        "--lengths",
        default=None,
        metavar="L,L,...",
        help="only these of the shapes' lengths (1024, 4096, 16384)",
    )
    args = p.parse_args(argv)
    if args.only is not None:
        try:
            re.compile(args.only)
        except re.error as err:
            p.error(f"--only: not a regular expression ({err})")
    lengths = None
    if args.lengths is not None:
        try:
            lengths = {int(x) for x in args.lengths.split(",")}
        except ValueError:
            p.error(f"--lengths: comma-separated integers, got {args.lengths!r}")
        known = sorted({length for _, _, length in SHAPES})
        if not lengths <= set(known):
            p.error(f"--lengths: {sorted(lengths - set(known))} not among the shapes' lengths "
                    f"{known}")  # fmt: skip
    try:
        import torch
    except ImportError:
        print("benchmarks/attention.py needs torch", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("benchmarks/attention.py needs a CUDA GPU", file=sys.stderr)
        return 2
    shapes, reps = (QUICK, 5) if args.quick else (SHAPES, args.reps)
    lead = _sleep_cycles(args.lead_us)
    triton_fn = _triton_attention()
    if not callable(triton_fn):
        print(f"triton skipped: {triton_fn}")
    print(f"device: {torch.cuda.get_device_name(0)}; tylo path {args.path}, {args.dtype}; "
          f"{args.inner} calls per sample after {args.lead_us:g} µs of GPU sleep")  # fmt: skip
    head = ["D", "causal", "L", "BxH", "tylo TF/s", "FA2 TF/s", "cuDNN TF/s", "Triton TF/s",
            "vs FA2", "vs cuDNN", "vs Triton"]  # fmt: skip
    print(" ".join(f"{x:>11}" for x in head))
    rows = []
    for d, causal, length in shapes:
        if args.d is not None and d != args.d:
            continue
        if args.causal is not None and causal != (args.causal == "yes"):
            continue
        if lengths is not None and length not in lengths:
            continue
        r = bench(
            d,
            causal,
            length,
            reps,
            args.path,
            args.dtype,
            triton_fn,
            args.variants,
            args.inner,
            args.only,
            lead,
        )
        rows.append(r)
        cells = [d, causal, length, f"{r['B']}x{r['H']}"]
        for name in ("tylo", "fa2", "cudnn", "triton"):
            t = r.get(f"{name}_tflops")
            cells.append("-" if t is None else f"{t:.1f}")
        for name in ("fa2", "cudnn", "triton"):
            x = r.get(f"vs_{name}")
            cells.append("-" if x is None else f"{x:.2f}x")
        print(" ".join(f"{x!s:>11}" for x in cells), flush=True)
        host = ", ".join(f"{n} {r[f'{n}_host_us']:.0f}" for n in ("tylo", "fa2", "cudnn", "triton")
                         if f"{n}_host_us" in r)  # fmt: skip
        print(f"    host µs per call: {host}")
        for name in (n for n in r if n.startswith("tylo ") and n.endswith("_tflops")):
            label = name[: -len("_tflops")]
            print(f"    {label}: {r[name]:.1f} TF/s, "
                  f"{r[name] / r['tylo_tflops']:.2f}x the default")  # fmt: skip
        for name, why in r["skipped"].items():
            if name != "triton" or callable(triton_fn):
                print(f"    {name} skipped: {why}")
    if args.json:
        meta = provenance.run_metadata(
            ("torch", "triton", "cudnn"),
            script="benchmarks/attention.py",
            argv=argv,
            commit=args.commit,
            dirty=args.dirty,
        )
        provenance.write_json(args.json, rows, meta)
    return 0


if __name__ == "__main__":
    sys.exit(main())
