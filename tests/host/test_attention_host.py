"""tylo/ops/attention on the host: the proofs the warp path relies on for its exact plans, the
block arithmetic of the masks, the per-thread partial sums, the typed refusals of every bad
argument (checked before anything compiles or launches), and the float64 reference itself
against a naive per-row loop."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tylo

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tylo.arrays import DeviceArray  # noqa: E402
from tylo.nvgpu.errors import PlanError  # noqa: E402
from tylo.nvgpu.warp.chain import prove_chain  # noqa: E402
from tylo.nvgpu.warp.mma import MMAAtom, TiledMMA  # noqa: E402
from tylo.ops.args import OpArgumentError  # noqa: E402
from tylo.ops.attention.config import (  # noqa: E402
    HEAD_DIMS,
    AttentionConfig,
    attention_config,
    default_blocks,
)
from tylo.ops.attention.host import AttentionPathError, attention, plan_attention  # noqa: E402
from tylo.ops.attention.kernel import key_blocks, partial_ownership, thread_partials  # noqa: E402
from tylo.ops.attention.reference import (  # noqa: E402
    AttentionInputError,
    attention_flops,
    attention_reference,
    visible,
)
from tylo.tile.fragment import Fragment  # noqa: E402

SHIPPED = [(d, dtype) for d in HEAD_DIMS for dtype in ("bf16", "f16")]


# ---------------------------------------------------------------- the plans and their proofs


@pytest.mark.parametrize(("d", "dtype"), SHIPPED)
def test_chain_of_the_shipped_plans_holds_by_brute_force(d, dtype):
    """The S accumulator, packed in pairs, is P V's A operand: checked here against the two
    ownerships' coordinates directly, for every thread, k-step and slot."""
    cfg = attention_config(d, dtype)
    acc = cfg.s_plan.acc_ownership
    a = cfg.pv_plan.operand_ownership("a", k_steps=1)
    proof = cfg.chain
    assert len(proof.slots) == cfg.block_n // 16 == cfg.pv_plan.k_steps
    for t in range(cfg.threads):
        held, need = acc.coords(t), a.coords(t)
        for s, row in enumerate(proof.slots):
            for slot, u in enumerate(row):
                assert held[u] == (need[slot][0], need[slot][1] + 16 * s)
    # every accumulator slot feeds exactly one A slot: nothing is dropped or duplicated
    used = sorted(u for row in proof.slots for u in row)
    assert used == list(range(acc.values))


@pytest.mark.parametrize(("d", "dtype"), SHIPPED)
def test_shipped_configs_prove_loads_and_have_no_bank_conflicts(d, dtype):
    for causal in (False, True):
        cfg = attention_config(d, dtype, causal=causal)
        p = cfg.proofs
        assert p["V ldmatrix.trans bank conflicts"] == 0
        assert p["K ldmatrix bank conflicts"] == 0 and p["Q ldmatrix bank conflicts"] == 0
        assert p["K/V cp.async bank conflicts"] == 0 and p["Q cp.async bank conflicts"] == 0
        for what, v in p.items():
            if "conflicts" not in what and not what.startswith("chain"):
                assert bool(v), what
        assert (cfg.block_m, cfg.block_n) == default_blocks(d)
        assert cfg.shared_bytes == (cfg.block_m * d + 4 * cfg.block_n * d) * 2


def test_bank_conflict_count_is_not_vacuous():
    """Without the swizzle, 8 rows of one 16-byte column share a bank group: the same
    counter says so (8-way: 7 extra wavefronts)."""
    from tylo.layouts import Layout
    from tylo.nvgpu.warp.ldmatrix import operand_loads

    cfg = attention_config(64, "bf16")
    plain = Layout((cfg.d, cfg.block_n), (1, cfg.d))  # V seen as (D, Bc), unswizzled
    assert operand_loads(cfg.pv_plan, "b", 0).bank_conflicts(plain) == 7


def test_chain_refuses_a_plan_whose_warps_split_the_keys():
    """With warps side by side along N, a thread's S columns are not its P columns: the
    proof names a witness instead of converting."""
    atom = MMAAtom((16, 8, 16), tylo.bf16)
    s = TiledMMA(atom, warps=(2, 2), repeat=(1, 8), k=64)
    pv = TiledMMA(atom, warps=(2, 2), repeat=(1, 4), k=128)
    with pytest.raises(PlanError, match="prove_chain"):
        prove_chain(s.acc_ownership, pv)


@pytest.mark.parametrize(
    ("kw", "says"),
    [
        ({"d": 96}, "head dim D = 96"),
        ({"d": 32}, "head dim D = 32"),
        ({"d": 64.0}, "head dim D = 64.0"),
        ({"dtype": tylo.f32}, "bf16 or f16"),
        ({"dtype": "fp8"}, "bf16 or f16"),
        ({"block_m": 32}, "block_m = 32"),
        ({"block_n": 48}, "block_n = 48"),
        ({"block_n": 256}, "block_n = 256"),
        ({"causal": 1}, "causal must be a bool"),
    ],
)
def test_config_refusals_are_typed(kw, says):
    args = {"d": 64, "dtype": tylo.bf16, **kw}
    with pytest.raises(PlanError, match=says):
        AttentionConfig(**args)


def test_config_is_a_hashable_static_key():
    a, b = attention_config(64, "bf16"), attention_config(64, tylo.bf16)
    assert a == b and hash(a) == hash(b) and a is b  # planned once
    assert attention_config(64, "bf16", causal=True) != a


# ---------------------------------------------------------------- block arithmetic of the masks


@settings(max_examples=300, deadline=None)
@given(
    lq=st.integers(1, 700),
    lk=st.integers(1, 700),
    kv_frac=st.floats(0, 1),
    causal=st.booleans(),
    d=st.sampled_from(HEAD_DIMS),
    block_m=st.sampled_from([64, 128]),
    data=st.data(),
)
def test_key_blocks_split_exactly_by_visibility(lq, lk, kv_frac, causal, d, block_m, data):
    """Blocks before ``unmasked`` are visible whole to every real row of the CTA, blocks from
    ``total`` on to none, and every visible key lies before ``total``: checked against the
    reference's mask, element by element."""
    cfg = attention_config(d, "bf16", causal=causal, block_m=block_m)
    kv = int(round(kv_frac * lk))
    m0 = data.draw(st.integers(0, (lq - 1) // block_m)) * block_m
    unmasked, total = key_blocks(cfg, m0, lq, kv)
    bc = cfg.block_n
    mask = visible(lq, lk, causal=causal, kv_len=kv)[m0 : m0 + block_m]
    assert 0 <= unmasked <= total <= -(-lk // bc)
    for n in range(-(-lk // bc)):
        block = mask[:, n * bc : (n + 1) * bc]
        if n < unmasked:
            assert block.shape[1] == bc and block.all(), (n, unmasked)
        if n >= total:
            assert not block.any(), (n, total)
    # total is tight: the last counted block has a visible key
    if total:
        assert mask[:, (total - 1) * bc : total * bc].any()


# ---------------------------------------------------------------- per-thread partial sums


@pytest.mark.parametrize("rm", [1, 2])
def test_thread_partials_then_sum_is_the_row_sum(rm):
    """Each thread's partial, placed by :func:`partial_ownership`, covers the (M, T) tile
    once; summing it along the row gives the full tile's row sums (host emulation)."""
    cfg = attention_config(64, "bf16", block_m=64 * rm, block_n=64)
    acc = cfg.s_plan.acc_ownership
    part = partial_ownership(acc, 1)
    rng = np.random.default_rng(0)
    x = rng.integers(-50, 50, size=acc.shape).astype(float)  # exact sums
    grid = np.full(part.shape, np.nan)
    for t in range(acc.threads):
        f = Fragment([x[c] for c in acc.coords(t)], acc)
        p = thread_partials(f)
        assert p.ownership == part
        for c, val in zip(part.coords(t), p.values):
            assert np.isnan(grid[c]) or grid[c] == val  # one value per coordinate
            grid[c] = val
    assert not np.isnan(grid).any() and part.shape == (acc.shape[0], 4)
    np.testing.assert_array_equal(grid.sum(axis=1), x.sum(axis=1))
    # the finishing reduction is the full one's: the same lane shuffles
    from tylo.tile.reduce import reduction_plan

    assert reduction_plan(part, 1).lane_masks == reduction_plan(acc, 1).lane_masks


# ---------------------------------------------------------------- typed argument errors


def _arr(shape, dtype=tylo.bf16, strides=None, ptr=1 << 20):
    if strides is None:
        strides = tuple(int(np.prod(shape[i + 1 :])) for i in range(len(shape)))
    return DeviceArray(ptr, tuple(shape), tuple(strides), dtype, 0)


def _args(b=2, h=3, lq=17, lk=33, d=64, dtype=tylo.bf16):
    """Inputs at the default address, the outputs apart (and apart from each other): an
    output sharing memory with an input is refused."""
    q = _arr((b, h, lq, d), dtype)
    k = _arr((b, h, lk, d), dtype)
    v = _arr((b, h, lk, d), dtype)
    o = _arr((b, h, lq, d), dtype, ptr=1 << 32)
    lse = _arr((b, h, lq), tylo.f32, ptr=1 << 33)
    return q, k, v, o, lse


def test_plan_accepts_and_reads_strides():
    q, k, v, o, lse = _args()
    # (B, L, H, D) storage seen as (B, H, L, D)
    k = _arr((2, 3, 33, 64), strides=(33 * 3 * 64, 64, 3 * 64, 1))
    cfg, val = plan_attention(q, k, v, o, lse, causal=True, scale=0.5)
    assert cfg.causal and cfg.aligned and not cfg.padding
    assert val["shape"] == (2, 3, 17, 33, 64)
    assert val["strides"][3:6] == [33 * 3 * 64, 64, 3 * 64]
    assert math.isclose(val["c"], 0.5 * math.log2(math.e))
    # row strides that are multiples of 8 elements keep 16-byte copies; others do not
    q2 = _arr((2, 3, 17, 64), strides=(3 * 17 * 72, 17 * 72, 72, 1))
    assert plan_attention(q2, k, v, o, lse)[0].aligned
    q3 = _arr((2, 3, 17, 64), strides=(3 * 17 * 66, 17 * 66, 66, 1))
    assert not plan_attention(q3, k, v, o, lse)[0].aligned
    q4 = _arr((2, 3, 17, 64), ptr=(1 << 20) + 8)
    assert not plan_attention(q4, k, v, o, lse)[0].aligned
    # extent-1 modes: their strides never matter (and are passed as 0)
    q1, k1, v1, o1, lse1 = _args(b=1, lq=1)
    q1 = _arr((1, 3, 1, 64), strides=(5, 3 * 64, 7, 1))
    cfg1, val1 = plan_attention(q1, k1, v1, o1, lse1)
    assert cfg1.aligned and val1["strides"][:3] == [0, 3 * 64, 0]


@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize(("b", "h"), [(1, 1), (2, 3), (4, 16), (16, 16), (64, 16)])
def test_plan_causal_group(d, b, h):
    """The causal order's group is the head dim's (host.CAUSAL_GROUPS: the same K / V
    bytes per group at D = 64 and 128), or all the (batch, head)s when there are fewer."""
    from tylo.ops.attention.host import CAUSAL_GROUPS

    assert CAUSAL_GROUPS == {64: 64, 128: 32}
    _, val = plan_attention(*_args(b=b, h=h, d=d), causal=True)
    assert val["group"] == min(b * h, 64 * 64 // d)


def _bad_cases():
    q, k, v, o, lse = _args()
    lens = _arr((2,), tylo.i32)
    return [
        ({"q": _arr((2, 3, 17))}, AttentionInputError, "q must be 4-D"),
        ({"k": _arr((2, 3, 33, 128))}, AttentionInputError, "disagree"),
        ({"v": _arr((2, 3, 34, 64))}, AttentionInputError, "disagree"),
        ({"k": _arr((1, 3, 33, 64))}, AttentionInputError, "disagree"),
        ({"k": _arr((2, 3, 33, 64), tylo.f16)}, AttentionInputError, "k has dtype f16"),
        (
            {"q": _arr((2, 3, 17, 64), strides=(3 * 17 * 128, 17 * 128, 1, 17))},
            AttentionInputError,
            "last dimension must be contiguous",
        ),
        (
            {"q": _arr((2, 3, 17, 64), strides=(-3 * 17 * 64, 17 * 64, 64, 1))},
            AttentionInputError,
            "negative stride",
        ),
        ({"o": _arr((2, 3, 17, 64), tylo.f16)}, AttentionInputError, "out must be"),
        ({"lse": _arr((2, 3, 17), tylo.bf16)}, AttentionInputError, "lse must be"),
        (
            {"lse": _arr((2, 3, 17), tylo.f32, strides=(1, 2, 6))},
            AttentionInputError,
            "lse must be a contiguous",
        ),
        ({"kv_lens": _arr((2,), tylo.i64)}, AttentionInputError, "kv_lens must be"),
        ({"kv_lens": _arr((3,), tylo.i32)}, AttentionInputError, "kv_lens must be"),
        ({"kv_lens": lens, "scale": 0.0}, AttentionInputError, "scale must be a positive"),
        ({"scale": -1.0}, AttentionInputError, "scale must be a positive"),
        ({"scale": math.inf}, OpArgumentError, "scale = inf does not fit in f32"),
        ({"scale": math.nan}, OpArgumentError, "scale = nan does not fit in f32"),
        ({"scale": True}, OpArgumentError, "scale must be a real number"),
        ({"scale": "1"}, OpArgumentError, "scale must be a real number"),
        ({"scale": 1e39}, OpArgumentError, "scale = 1e\\+39 does not fit in f32"),
        ({"scale": 3e38}, OpArgumentError, "scale \\* log2\\(e\\)"),
        ({"q": np.zeros((2, 3, 17, 64))}, AttentionInputError, "q is not a device array"),
        ({"o": _arr((2, 3, 17, 64))}, AttentionInputError, "out and q share memory"),
        (
            {"o": _arr((2, 3, 17, 64), ptr=(1 << 20) + 20000)},
            AttentionInputError,  # past q
            "out and k share memory",
        ),
        (
            {"lse": _arr((2, 3, 17), tylo.f32, ptr=1 << 32)},
            AttentionInputError,
            "out and lse share memory",
        ),
        (
            {"kv_lens": _arr((2,), tylo.i32, ptr=(1 << 33) + 8)},
            AttentionInputError,
            "lse and kv_lens share memory",
        ),
        (
            {"o": _arr((2, 3, 17, 64), strides=(0, 17 * 64, 64, 1), ptr=1 << 32)},
            OpArgumentError,
            "out has stride 0 on dimension 0",
        ),  # batch broadcast
        (
            {"o": _arr((2, 3, 17, 64), strides=(-3 * 17 * 64, 17 * 64, 64, 1), ptr=1 << 32)},
            OpArgumentError,
            "out has stride -3264 on dimension 0",
        ),
        (
            {"lse": _arr((2, 3, 17), tylo.f32, strides=(51, 0, 1), ptr=1 << 34)},
            OpArgumentError,
            "lse has stride 0 on dimension 1",
        ),
        (
            {"o": _arr((2, 3, 17, 64), strides=(3 * 17 * 32, 17 * 32, 32, 1), ptr=1 << 32)},
            AttentionInputError,
            "out .* has elements at one address",
        ),  # rows that meet
    ]


@pytest.mark.parametrize(("change", "err", "says"), _bad_cases())
def test_bad_arguments_are_refused_before_launch(change, err, says):
    q, k, v, o, lse = _args()
    args = {"q": q, "k": k, "v": v, "o": o, "lse": lse, "kv_lens": None, "scale": None}
    args.update(change)
    with pytest.raises(err, match=says):
        plan_attention(
            args["q"], args["k"], args["v"], args["o"], args["lse"],
            kv_lens=args["kv_lens"], scale=args["scale"],
        )  # fmt: skip


@pytest.mark.parametrize(
    ("d", "dtype", "err", "says"),
    [
        (96, tylo.bf16, PlanError, "head dim D = 96"),
        (256, tylo.f16, PlanError, "head dim D = 256"),
        (64, tylo.f32, PlanError, "dtype f32 is not supported"),
        (64, tylo.i16, PlanError, "dtype i16 is not supported"),
    ],
)
def test_unsupported_head_dims_and_dtypes_are_plan_errors(d, dtype, err, says):
    q, k, v, o, lse = _args(d=d, dtype=dtype)
    with pytest.raises(err, match=says):
        plan_attention(q, k, v, o, lse)


def test_zero_extents_and_grid_limits_are_refused():
    for shape in [(0, 3, 17), (2, 0, 17), (2, 3, 0)]:
        b, h, lq = shape
        q, k, v, o, lse = _args(b=b, h=h, lq=lq)
        with pytest.raises(AttentionInputError, match="every extent must be >= 1"):
            plan_attention(q, k, v, o, lse)
    q, k, v, o, lse = _args(b=65536, h=1, lq=1, lk=1)
    with pytest.raises(AttentionInputError, match="at most 65535"):
        plan_attention(q, k, v, o, lse)


def test_unknown_and_missing_paths_are_typed():
    q, k, v, o, lse = _args()
    with pytest.raises(AttentionPathError, match="path must be one of"):
        attention(q, k, v, out=o, lse=lse, path="cuda")
    try:
        import tylo.ops.attention.hopper_host  # noqa: F401
    except ModuleNotFoundError:
        with pytest.raises(AttentionPathError, match="hopper_host.py"):
            attention(q, k, v, out=o, lse=lse, path="hopper")


# ---------------------------------------------------------------- the reference


def _naive(q, k, v, scale, causal, kv_lens):
    """One query row at a time, with Python's own loops for the softmax."""
    b, h, lq, d = q.shape
    lk = k.shape[2]
    o = np.zeros((b, h, lq, d))
    lse = np.full((b, h, lq), -math.inf)
    for bi in range(b):
        kv = lk if kv_lens is None else kv_lens[bi]
        for hi in range(h):
            for i in range(lq):
                keys = [j for j in range(lk) if j < kv and (not causal or j <= i + kv - lq)]
                if not keys:
                    continue
                s = [scale * float(np.dot(q[bi, hi, i], k[bi, hi, j])) for j in keys]
                mx = max(s)
                w = [math.exp(x - mx) for x in s]
                total = sum(w)
                o[bi, hi, i] = sum(wj * v[bi, hi, j] for wj, j in zip(w, keys)) / total
                lse[bi, hi, i] = mx + math.log(total)
    return o, lse


@settings(max_examples=40, deadline=None)
@given(
    b=st.integers(1, 2),
    h=st.integers(1, 2),
    lq=st.integers(1, 9),
    lk=st.integers(1, 9),
    d=st.integers(1, 5),
    causal=st.booleans(),
    padded=st.booleans(),
    scale=st.one_of(st.none(), st.floats(0.01, 4.0)),
    data=st.data(),
)
def test_reference_matches_a_naive_per_row_loop(b, h, lq, lk, d, causal, padded, scale, data):
    kv_lens = data.draw(st.lists(st.integers(0, lk), min_size=b, max_size=b)) if padded else None
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    q, k, v = (rng.standard_normal((b, h, n, d)) * 3 for n in (lq, lk, lk))
    o, lse = attention_reference(q, k, v, scale=scale, causal=causal, kv_lens=kv_lens)
    sc = 1.0 / math.sqrt(d) if scale is None else scale
    want_o, want_lse = _naive(q, k, v, sc, causal, kv_lens)
    assert not np.isnan(o).any() and not np.isnan(lse).any()
    np.testing.assert_allclose(o, want_o, rtol=1e-9, atol=1e-9)
    assert np.array_equal(np.isneginf(lse), np.isneginf(want_lse))
    fin = np.isfinite(want_lse)
    np.testing.assert_allclose(lse[fin], want_lse[fin], rtol=1e-12, atol=1e-12)
    assert (o[np.isneginf(lse)] == 0).all()  # rows with nothing visible: exactly zero


def test_flops_count_halves_for_causal():
    assert attention_flops(2, 3, 5, 7, 64) == 4 * 2 * 3 * 5 * 7 * 64
    assert attention_flops(2, 3, 5, 7, 64, causal=True) == 2 * 2 * 3 * 5 * 7 * 64


# ---------------------------------------------------------------- the command line


@pytest.mark.parametrize(
    ("argv", "status", "says"),
    [
        (["1", "1", "1", "96", "--compile-only"], 1, "PlanError: AttentionConfig: head dim D = 96"),
        (["0", "1", "1", "64"], 2, "argument b: 0 is not a size"),
        (["1", "1", "1", "64", "--kv-lens", "3,x"], 2, "not a comma-separated list"),
        (["1", "1", "1", "64", "--kv-lens", "-1"], 2, "key lengths must be >= 0"),
        (["2", "1", "4", "64", "--kv-lens", "1,5", "--compile-only"], 1, "each at most Lk = 4"),
        (["1", "1", "1", "64", "--path", "cuda"], 2, "argument --path: invalid choice"),
        (["1", "1", "1", "64", "--warps", "6"], 2, "argument --warps: invalid choice"),
        (
            ["1", "1", "1", "64", "--path", "hopper", "--warps", "8", "--compile-only"],
            1,
            "--warps configures the warp path",
        ),
    ],
)
def test_cli_refusals_are_one_line(capsys, argv, status, says):
    from tylo.ops.attention.cli import run_main

    try:
        rc = run_main(argv)
    except SystemExit as stop:  # argparse's usage errors
        rc = stop.code
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == status and len(err) == 1 and says in err[0], (rc, err)
    assert err[0].startswith("python -m tylo.ops.attention: error: ")


def test_cli_hopper_path_without_its_module_is_typed(capsys):
    from tylo.ops.attention.cli import run_main

    try:
        import tylo.ops.attention.hopper_host  # noqa: F401
    except ModuleNotFoundError:
        assert run_main(["1", "1", "1", "64", "--path", "hopper", "--compile-only"]) == 1
        assert "AttentionPathError" in capsys.readouterr().err


def test_cli_eight_warps_compile_only(capsys):
    """--warps 8 reaches the warp path's configuration (and its plan printout)."""
    from tylo.ops.attention.cli import run_main

    assert run_main(["1", "1", "200", "64", "--warps", "8", "--compile-only"]) == 0
    out = capsys.readouterr().out
    assert "8 warps" in out and "warps=(8, 1)" in out


@pytest.mark.parametrize("option", [{"block_m": 64}, {"block_n": 64}, {"warps": 8},
                                    {"q_in_registers": False}, {"late_copies": True},
                                    {"shared_bases": False}])  # fmt: skip
def test_warp_options_are_refused_on_the_hopper_path(option):
    """A warp-path option given with path='hopper' is refused, not ignored."""
    from tylo.ops.attention.host import AttentionPathError, attention

    q = DeviceArray(1 << 20, (1, 1, 8, 64), (512, 512, 64, 1), tylo.bf16, 0)
    with pytest.raises(AttentionPathError, match=f"{next(iter(option))} configure the warp"):
        attention(q, q, q, path="hopper", **option)


@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("bm", [64, 128])
@pytest.mark.parametrize("bn", [16, 32, 64, 128])
@pytest.mark.parametrize("q_regs", [True, False])
def test_register_edge_sets_late_copies_and_shared_bases(d, bm, bn, q_regs):
    """``late_copies`` and ``shared_bases`` default to ``register_edge``'s verdict, which
    is true exactly for D = 128, 32 rows per warp, Q from shared memory, Bc <= 64; given
    explicitly, they are kept."""
    from tylo.ops.attention.config import attention_config, register_edge

    want = d == 128 and bm == 128 and not q_regs and bn <= 64
    assert register_edge(d, bm, bn, q_regs, 4) is want
    try:
        cfg = attention_config(d, "bf16", block_m=bm, block_n=bn, q_in_registers=q_regs)
    except PlanError:  # a block the warp path refuses (its own tests say why)
        return
    assert (cfg.late_copies, cfg.shared_bases) == (want, want)
    assert ("late copies" in cfg.describe()) is want
    flipped = attention_config(d, "bf16", block_m=bm, block_n=bn, q_in_registers=q_regs,
                               late_copies=not want, shared_bases=False)  # fmt: skip
    assert (flipped.late_copies, flipped.shared_bases) == (not want, False)


@pytest.mark.parametrize("flag", ["late_copies", "shared_bases"])
@pytest.mark.parametrize("bad", [1, "yes", None])
def test_late_copies_and_shared_bases_must_be_bools(flag, bad):
    from tylo.ops.attention.config import AttentionConfig

    with pytest.raises(PlanError, match=f"{flag} must be a bool"):
        AttentionConfig(128, "bf16", 128, 64, q_in_registers=False, **{flag: bad})


def test_register_edge_refuses_nothing():
    """Odd arguments (the refusals are AttentionConfig's): not an edge tile, no exception."""
    from tylo.ops.attention.config import register_edge

    assert register_edge(128, None, 64, False, 4) is False
    assert register_edge("128", 128, 64, False, 4) is False
    assert register_edge(128, 128, 64, np.array([False]), np.array([4, 4])) is False
    assert register_edge(128, 128, 64, 0, 4) is False  # q_in_registers: a bool
    assert register_edge(128, 256, 64, False, 8) is True
