"""Kernels run in the CPU interpreter (tylo.interpret) give the answers their definitions
give: element-wise maps, loops and branches, shuffles, shared memory with barriers,
atomics, local arrays, bf16 conversions; and the TYLO_INTERPRET=1 switch."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tylo
from tylo.interpret import UnsupportedOperation


@tylo.kernel
def add(c, a, b, n):
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    if i < n:
        c[i] = a[i] + b[i]


@tylo.kernel
def trips(out, x, n):
    """A loop with a data-dependent trip count per thread, and a branch inside."""
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    if i < n:
        acc = tylo.value(0, tylo.i64)
        for k in tylo.range(x[i]):
            if k % 3 == 0:
                acc = acc + k
            else:
                acc = acc - 1
        out[i] = acc


@tylo.kernel
def shuffles(out, x, mode: tylo.Static, k: tylo.Static, width: tylo.Static):
    t = tylo.thread_idx.x
    v = x[t]
    if mode == "xor":
        r = tylo.shfl_xor(v, k, width=width)
    elif mode == "up":
        r = tylo.shfl_up(v, k, width=width)
    elif mode == "down":
        r = tylo.shfl_down(v, k, width=width)
    elif mode == "idx":
        r = tylo.shfl_idx(v, k, width=width)
    else:  # a source lane computed per lane at run time
        r = tylo.shfl_idx(v, (tylo.lane_id() * 7 + k) % 32, width=width)
    out[t] = r


@tylo.kernel
def block_sum(out, x, n):
    """One block per 256 elements: warp shuffles, then the warps meet in shared memory."""
    t = tylo.thread_idx.x
    i = tylo.block_idx.x * 256 + t
    acc = tylo.value(0.0)
    if i < n:
        acc = x[i]
    for off in (16, 8, 4, 2, 1):
        acc = acc + tylo.shfl_xor(acc, off)
    part = tylo.shared(tylo.f32, 8)
    if tylo.lane_id() == 0:
        part[tylo.warp_id()] = acc
    tylo.sync_threads()
    if t == 0:
        s = part[0]
        for w in range(1, 8):
            s = s + part[w]
        out[tylo.block_idx.x] = s


@tylo.kernel
def histogram(bins, x, n):
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    if i < n:
        tylo.atomic_add(bins, x[i], 1)


@tylo.kernel
def to_bf16(out: tylo.Ptr(tylo.bf16), x, n):
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    if i < n:
        out[i] = x[i].to(tylo.bf16)


def _launch(k, n, *args, block=128):
    k.interpret[(n + block - 1) // block, block](*args)


def test_vector_add_matches_numpy_exactly() -> None:
    rng = np.random.default_rng(1)
    for n in (1, 127, 128, 1000):
        a, b = rng.standard_normal((2, n)).astype(np.float32)
        c = np.full(n, np.nan, np.float32)
        _launch(add, n, c, a, b, n)
        assert np.array_equal(c, a + b)


def test_vector_add_example_kernel() -> None:
    from examples.vector_add.kernel import vector_add

    n = 3000
    a = np.arange(n, dtype=np.float32)
    c = np.zeros(n, np.float32)
    vector_add.interpret[(n + 255) // 256, 256](c, a, a, n)
    assert np.array_equal(c, 2 * a)


def test_int_wraparound() -> None:
    a = np.array([2**31 - 1, -(2**31), 5], dtype=np.int32)
    b = np.array([1, -1, 7], dtype=np.int32)
    c = np.zeros(3, np.int32)
    _launch(add, 3, c, a, b, 3)
    assert c.tolist() == [-(2**31), 2**31 - 1, 12]


def _trips(v: int) -> int:
    return sum(k if k % 3 == 0 else -1 for k in range(v))


def test_divergent_loop_with_branch() -> None:
    x = np.random.default_rng(5).integers(0, 40, 300).astype(np.int64)
    out = np.zeros(len(x), np.int64)
    _launch(trips, len(x), out, x, len(x), block=64)
    assert out.tolist() == [_trips(int(v)) for v in x]


def _shfl_reference(x: np.ndarray, mode: str, k: int, width: int) -> np.ndarray:
    """CUDA C++ Programming Guide, "Warp Shuffle Functions": lanes form groups of
    ``width``; up/down/xor past their group (xor: into a later group) keep their own
    value; idx reads lane ``k % width`` of the group."""
    lane = np.arange(32)
    start = lane // width * width
    end = start + width
    if mode == "xor":
        j = lane ^ k
        j = np.where(j >= end, lane, j)
    elif mode == "up":
        j = np.where(lane - k >= start, lane - k, lane)
    elif mode == "down":
        j = np.where(lane + k < end, lane + k, lane)
    elif mode == "idx":
        j = start + k % width
    else:
        j = start + (lane * 7 + k) % 32 % width
    return x.reshape(-1, 32)[:, j].reshape(-1)


@settings(max_examples=30, deadline=None)
@given(
    mode=st.sampled_from(["xor", "up", "down", "idx", "lane"]),
    k=st.integers(0, 31),
    width=st.sampled_from([1, 2, 4, 8, 16, 32]),
    seed=st.integers(0, 2**32 - 1),
)
def test_shuffles_match_their_definition(mode: str, k: int, width: int, seed: int) -> None:
    x = np.random.default_rng(seed).standard_normal(64).astype(np.float32)
    out = np.zeros(64, np.float32)
    shuffles.interpret[1, 64](out, x, mode, k, width)
    assert np.array_equal(out, _shfl_reference(x, mode, k, width))


def test_shuffle_with_a_partial_member_mask() -> None:
    @tylo.kernel
    def low(out, x):
        t = tylo.thread_idx.x
        out[t] = x[t]
        if t % 32 < 16:
            out[t] = tylo.shfl_xor(x[t], 5, mask=0xFFFF)

    x = np.arange(64, dtype=np.float32)
    out = np.zeros(64, np.float32)
    low.interpret[1, 64](out, x)
    lane = np.arange(64) % 32
    want = np.where(lane < 16, (np.arange(64) // 32) * 32 + (lane ^ 5), np.arange(64))
    assert out.tolist() == want.astype(np.float32).tolist()


def test_shared_memory_and_barrier_reduction() -> None:
    rng = np.random.default_rng(2)
    n = 1000
    x = rng.standard_normal(n).astype(np.float32)
    out = np.zeros(4, np.float32)
    block_sum.interpret[4, 256](out, x, n)
    want = [x[b * 256 : (b + 1) * 256].astype(np.float64).sum() for b in range(4)]
    assert np.allclose(out, want, rtol=1e-5, atol=1e-5)


def test_row_reduce_example_kernel() -> None:
    from examples.row_reduce.kernel import row_reduce_kernel

    rng = np.random.default_rng(3)
    rows, cols = 9, 1000
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    out = np.full(rows, np.nan, np.float32)
    row_reduce_kernel.interpret[(rows + 1) // 2, 256](out, x, rows, cols, cols, 1, "max", 4, 4,
                                                      4, None)  # fmt: skip
    assert np.array_equal(out, x.max(axis=1))


@pytest.mark.parametrize("view", ["columns", "transpose"])
def test_row_reduce_example_through_strided_views(view: str) -> None:
    """Every other column of a matrix (a strided numpy view), or a transposed one: the
    kernel reads through the strides it is given, and only inside the view's span."""
    from examples.row_reduce.kernel import row_reduce_kernel

    rng = np.random.default_rng(13)
    base = rng.standard_normal((8, 300)).astype(np.float32)
    x = base[:, ::2] if view == "columns" else base.T[:150]
    rows, cols = x.shape
    ld, cs = (s // 4 for s in x.strides)
    out = np.full(rows, np.nan, np.float32)
    row_reduce_kernel.interpret[(rows + 1) // 2, 256](out, x, rows, cols, ld, cs, "sum", 1, 4,
                                                      4, None)  # fmt: skip
    assert np.allclose(out, x.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-4)


def test_atomic_histogram() -> None:
    rng = np.random.default_rng(4)
    x = rng.integers(0, 10, 2000).astype(np.int64)
    bins = np.zeros(10, np.int32)
    _launch(histogram, len(x), bins, x, len(x))
    assert bins.tolist() == np.bincount(x, minlength=10).tolist()


def test_bf16_store_rounds_to_nearest_even() -> None:
    from tylo.interpret.numerics import f32_to_bf16

    x = np.array([1.0, 1.00390625, 1.01171875, -3.5e-39, np.inf, 65504.0], np.float32)
    out = np.zeros(len(x), np.uint16)
    to_bf16.interpret[1, 32](out, x, len(x))
    assert out.tolist() == f32_to_bf16(x).view(np.uint16).tolist()
    assert out[1] == 0x3F80 and out[2] == 0x3F82  # ties to even: down, then up


def test_environment_switch_runs_the_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TYLO_INTERPRET", "1")
    a = np.ones(5, np.float32)
    c = np.zeros(5, np.float32)
    add[1, 32](c, a, a, 5)
    assert c.tolist() == [2.0] * 5


def test_unsupported_instruction_is_refused_by_name() -> None:
    @tylo.kernel
    def clock(out):
        out[0] = tylo.ptx("bfind.u32", tylo.value(7, tylo.u32), out=tylo.u32)

    out = np.zeros(1, np.uint32)
    with pytest.raises(UnsupportedOperation) as info:
        clock.interpret[1, 32](out)
    assert info.value.operation == "bfind.u32"


@tylo.kernel
def packed_atomic(out, x, op: tylo.Static):
    tylo.ptx(f"{op} [$0], $1;", out.address(0), x[tylo.thread_idx.x], out=None)


@pytest.mark.parametrize(
    "op", ["red.global.max.noftz.f16x2", "red.global.min.noftz.v2.bf16", "red.global.max.f16",
           "red.global.inc.u32", "red.global.add.f16"],
)  # fmt: skip
def test_atomics_the_interpreter_lacks_are_refused_by_name(op: str) -> None:
    """16-bit float atomics other than ``add.noftz`` (their bits are not integers), vector
    forms and inc/dec: a typed refusal naming the instruction, never a KeyError or an
    integer operation on float bits."""
    dtype = np.uint32 if op.endswith(("x2", "u32")) else np.uint16
    with pytest.raises(UnsupportedOperation) as info:
        packed_atomic.interpret[1, 32](np.zeros(1, dtype), np.ones(32, dtype), op)
    assert info.value.operation == op


@tylo.kernel
def alu(out, a, b, c, op: tylo.Static, dt: tylo.Static):
    t = tylo.thread_idx.x
    if op in ("fma.rn.f32", "mad.lo.s32", "mad.lo.u32"):
        out[t] = tylo.ptx(op, a[t], b[t], c[t])
    elif op.split(".")[0] in ("neg", "abs", "not", "popc", "clz", "brev", "rcp", "sqrt"):
        out[t] = tylo.ptx(op, a[t], out=dt)
    else:
        out[t] = tylo.ptx(op, a[t], b[t], out=dt)


def _u32(x: int) -> int:
    return x % 2**32


def _s32(x: int) -> int:
    x %= 2**32
    return x - 2**32 if x >= 2**31 else x


_INT_OPS = {
    "add.s32": lambda a, b, c: _s32(a + b), "sub.s32": lambda a, b, c: _s32(a - b),
    "mul.lo.s32": lambda a, b, c: _s32(a * b), "mul.hi.s32": lambda a, b, c: (a * b) >> 32,
    "mul.hi.u32": lambda a, b, c: (_u32(a) * _u32(b)) >> 32,
    "mad.lo.s32": lambda a, b, c: _s32(a * b + c), "min.s32": lambda a, b, c: min(a, b),
    "max.u32": lambda a, b, c: max(_u32(a), _u32(b)), "and.b32": lambda a, b, c: _u32(a & b),
    "xor.b32": lambda a, b, c: _u32(a ^ b), "shl.b32": lambda a, b, c: _u32(a << (b % 40))
    if b % 40 < 32 else 0, "shr.u32": lambda a, b, c: _u32(a) >> (b % 40)
    if b % 40 < 32 else 0, "shr.s32": lambda a, b, c: a >> min(b % 40, 31),
    "popc.b32": lambda a, b, c: _u32(a).bit_count(),
    "clz.b32": lambda a, b, c: 32 - _u32(a).bit_length(),
    "brev.b32": lambda a, b, c: int(f"{_u32(a):032b}"[::-1], 2),
    "neg.s32": lambda a, b, c: _s32(-a), "not.b32": lambda a, b, c: _u32(~a),
}  # fmt: skip


@pytest.mark.parametrize("op", sorted(_INT_OPS))
@settings(max_examples=3, deadline=None)
@given(vals=st.lists(st.integers(-(2**31), 2**31 - 1), min_size=96, max_size=96))
def test_ptx_integer_alu_against_python(op: str, vals: list[int]) -> None:
    unsigned = op.endswith(("u32", "b32"))
    dt = tylo.u32 if unsigned else tylo.i32
    a, b, c = (np.array(vals[k::3][:32], np.int64) for k in range(3))
    if op.startswith(("shl", "shr")):
        b = b % 40
    conv = (lambda x: np.array(x % 2**32, np.uint32)) if unsigned else (
        lambda x: np.array(x, np.int32))  # fmt: skip
    out = np.zeros(32, np.uint32 if unsigned else np.int32)
    alu.interpret[1, 32](out, conv(a), conv(b), conv(c), op, dt)
    for k in range(32):
        want = _INT_OPS[op](int(a[k]), int(b[k]), int(c[k]))
        assert int(out[k]) == (_u32(want) if unsigned else _s32(want)), (op, k)


def test_ptx_fma_rounds_once_mostly() -> None:
    rng = np.random.default_rng(14)
    a, b, c = rng.standard_normal((3, 32)).astype(np.float32)
    out = np.zeros(32, np.float32)
    alu.interpret[1, 32](out, a, b, c, "fma.rn.f32", tylo.f32)
    exact = a.astype(np.float64) * b + c  # the f32 product is exact in f64
    assert np.array_equal(out, exact.astype(np.float32))


@tylo.kernel
def hopper(out, text: tylo.Static):
    tylo.ptx(text, out=None)
    out[0] = 1


@pytest.mark.parametrize(
    ("text", "operation"),
    [
        ("setmaxnreg.inc.sync.aligned.u32 240;", "setmaxnreg"),
        ("wgmma.fence.sync.aligned;", "wgmma"),
        ("fence.proxy.async.shared::cta;", "fence.proxy.async"),
        ("griddepcontrol.wait;", "griddepcontrol"),
        ("{ .reg .pred %e; elect.sync _|%e, 0xffffffff; }", "elect"),
    ],
)
def test_refused_hopper_instruction_names_it(text: str, operation: str) -> None:
    with pytest.raises(UnsupportedOperation) as info:
        hopper.interpret[1, 128](np.zeros(1, np.int32), text)
    assert info.value.operation == operation
    assert operation in str(info.value)


def test_print_formats_like_c(capsys: pytest.CaptureFixture[str]) -> None:
    @tylo.kernel
    def say(x, n):
        t = tylo.thread_idx.x
        if t < n:
            big = tylo.value(2**40 + 3, tylo.i64)
            tylo.print_(
                "b%d t%d x=%.2f big=%lld hex=%x%%\n", tylo.block_idx.x, t, x[t], big, t + 250
            )

    say.interpret[2, 32](np.array([0.5, -1.25], np.float32), 2)
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "b0 t0 x=0.50 big=1099511627779 hex=fa%",
        "b0 t1 x=-1.25 big=1099511627779 hex=fb%",
        "b1 t0 x=0.50 big=1099511627779 hex=fa%",
        "b1 t1 x=-1.25 big=1099511627779 hex=fb%",
    ]


@tylo.kernel
def atoms(ticket, mx, mn, fsum, slot, cas_out, x):
    t = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    tylo.atomic_add(ticket, 0, 1)
    tylo.atomic_max(mx, 0, x[t])
    tylo.atomic_min(mn, 0, x[t])
    tylo.atomic_add(fsum, 0, x[t])
    tylo.atomic_exch(slot, 0, t)
    cas_out[t] = tylo.atomic_cas(ticket, 1, 0, t + 1)


def test_atomics_apply_one_after_another_in_lane_order() -> None:
    x = np.random.default_rng(6).standard_normal(128).astype(np.float32)
    ticket = np.zeros(2, np.int32)
    mx, mn = np.full(1, -np.inf, np.float32), np.full(1, np.inf, np.float32)
    fsum, slot, cas = np.zeros(1, np.float32), np.full(1, -1, np.int64), np.zeros(128, np.int32)
    atoms.interpret[2, 64](ticket, mx, mn, fsum, slot, cas, x)
    assert ticket.tolist() == [128, 1]  # the first CAS (thread 0) swapped 0 for 1
    assert mx[0] == x.max() and mn[0] == x.min()
    assert fsum[0] == np.add.accumulate(x, dtype=np.float32)[-1]  # f32 adds in lane order
    assert slot[0] == 127  # the last exchange stays
    assert (cas == 0).sum() == 1 and (cas[1:] == 1).all()


def test_one_threads_steps_are_printed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TYLO_INTERPRET_THREAD", "1/3")
    a = np.arange(300, dtype=np.float32)
    c = np.zeros(300, np.float32)
    add.interpret[3, 128](c, a, a, 300)
    err = capsys.readouterr().err
    assert "[block (1, 0, 0) thread (3, 0, 0)] block entry" in err
    assert "fadd float" in err and "-> 262.0" in err  # 2 * a[128 + 3]
    assert "thread (4, 0, 0)" not in err
    monkeypatch.setenv("TYLO_INTERPRET_THREAD", "one/two")
    with pytest.raises(tylo.TyloError):
        add.interpret[3, 128](c, a, a, 300)
