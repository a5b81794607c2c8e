"""A corpus of kernels written wrong the way users write them wrong, each refused with the
access named, beside its fix, accepted on the same launch.

Each kernel takes a static ``bug``: ``True`` traces the wrong line, ``False`` the fix; the
same launch (grid, block, arrays sized for the fix) is checked with
``kernel.check_launch`` (no GPU). The wrong one must be refused, while tracing
(:class:`tylo.OutOfBoundsError`, for an access out of bounds for every launch) or at
launch (:class:`tylo.OutOfBoundsLaunchError`), or, where tylo cannot decide it, be
reported unproved and refused under ``bounds="prove"`` (:class:`tylo.BoundsProofError`).
The brute-force column checks each wrong launch really leaves its array (plain Python
over every thread), so no case is refused for a reason that is not a bug.
"""

from __future__ import annotations

import numpy as np
import pytest

import tylo

S = tylo.ArraySpec
f32 = tylo.f32
Int0 = tylo.Int(min=0)
St = tylo.Static
A16 = tylo.Ptr(align=16)


def tid():
    return tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x


# ------------------------------------------------------------------ off-by-one loop bounds


@tylo.kernel
def row_sum(out, x, rows: Int0, cols: Int0, bug: St):
    r = tid()
    if r < rows:
        acc = tylo.value(0.0, f32)
        for k in tylo.range(cols + 1 if bug else cols):
            acc = acc + x[r * cols + k]
        out[r] = acc


@tylo.kernel
def shift_copy(y, x, n: Int0, bug: St):
    for k in tylo.range(n):
        y[k + 1 if bug else k] = x[k]


@tylo.kernel
def prefix_pairs(out, x, n: Int0, bug: St):
    for k in tylo.range(n if bug else n - 1):
        out[k] = x[k] + x[k + 1]


@tylo.kernel
def strided_loop(out, x, n: Int0, s: Int0, bug: St):
    for k in tylo.range(0, n + 1 if bug else n):
        out[k] = x[k * s]


@tylo.kernel
def loop_from_one(out, n: Int0, bug: St):
    for k in tylo.range(1, n + 1 if bug else n):
        out[k] = 0.0


@tylo.kernel
def loop_inclusive_last(out, x, n: Int0, bug: St):
    i = tid()
    if i <= n if bug else i < n:
        out[i] = x[i]


# ------------------------------------------------------------------ a missing tail mask


@tylo.kernel
def axpy(y, x, n: Int0, bug: St):
    i = tid()
    if bug:
        y[i] = y[i] + 2.0 * x[i]
    elif i < n:
        y[i] = y[i] + 2.0 * x[i]


@tylo.kernel
def masked_read_only(out, x, n: Int0, bug: St):
    i = tid()
    v = tylo.value(0.0, f32)
    if i < n:
        v = x[i]
    if bug:
        out[i] = v
    elif i < n:
        out[i] = v


@tylo.kernel
def copy_2d(out, x, rows: Int0, cols: Int0, bug: St):
    r = tylo.block_idx.y * tylo.block_dim.y + tylo.thread_idx.y
    c = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    if r < rows if bug else r < rows and c < cols:
        out[r * cols + c] = x[r * cols + c]


@tylo.kernel
def scale_rows_tail(x, n: Int0, bug: St):
    i = 4 * tid()
    if i < n:
        x[i] = 0.0
        x[i + 3 if bug else i] = 0.0


# ------------------------------------------------------------------ a wrong leading dimension


@tylo.kernel
def write_tile_ld(out, rows: Int0, cols: Int0, ld: Int0, bug: St):
    r = tylo.thread_idx.y
    c = tylo.thread_idx.x
    if r < rows and c < cols:
        out[r * (ld + 1 if bug else ld) + c] = 1.0


@tylo.kernel
def read_with_cols_as_ld(out, x, rows: Int0, cols: Int0, ld: Int0, bug: St):
    r = tylo.thread_idx.y
    c = tylo.thread_idx.x
    if r < rows and c < cols:
        out[r * cols + c] = x[r * (ld if bug else cols) + c]


@tylo.kernel
def output_ld_of_input(out, x, rows: Int0, cols: Int0, ldx: Int0, bug: St):
    r = tylo.thread_idx.y
    c = tylo.thread_idx.x
    if r < rows and c < cols:
        out[r * (ldx if bug else cols) + c] = x[r * ldx + c]


# ------------------------------------------------------------------ a transposed index


@tylo.kernel
def transpose_store(out, x, rows: Int0, cols: Int0, bug: St):
    r = tylo.thread_idx.y
    c = tylo.thread_idx.x
    if r < rows and c < cols:
        out[(c * cols + r) if bug else (c * rows + r)] = x[r * cols + c]


@tylo.kernel
def transposed_mask(out, rows: Int0, cols: Int0, bug: St):
    r = tylo.thread_idx.y
    c = tylo.thread_idx.x
    if (r < cols and c < rows) if bug else (r < rows and c < cols):
        out[r * cols + c] = 1.0


@tylo.kernel
def rows_beyond_grid(out, rows: Int0, cols: Int0, bug: St):
    r = tylo.block_idx.x  # one block per row: a grid rounded up has more blocks than rows
    c = tylo.thread_idx.x
    if c < cols if bug else c < cols and r < rows:
        out[r * cols + c] = 1.0


# ------------------------------------------------------------------ a shared buffer too small


@tylo.kernel
def stage_block(out, bug: St):
    s = tylo.shared(f32, 255 if bug else 256)
    t = tylo.thread_idx.x
    s[t] = 1.0
    tylo.sync_threads()
    out[t] = s[t]


@tylo.kernel
def double_buffer(out, bug: St):
    s = tylo.shared(f32, 256 if bug else 512)
    t = tylo.thread_idx.x
    s[t] = 1.0
    s[256 + t] = 2.0
    tylo.sync_threads()
    out[t] = s[t] + s[256 + t]


@tylo.kernel
def padded_tile(out, bug: St):
    s = tylo.shared(f32, 16 * 16 if bug else 16 * 17)
    r = tylo.thread_idx.y
    c = tylo.thread_idx.x
    s[r * 17 + c] = 1.0
    tylo.sync_threads()
    out[r * 16 + c] = s[r * 17 + c]


@tylo.kernel
def halo(out, bug: St):
    s = tylo.shared(f32, 128 if bug else 130)
    t = tylo.thread_idx.x
    s[t + 1] = 1.0
    tylo.sync_threads()
    out[t] = s[t] + s[t + 2]


@tylo.kernel
def per_warp_scratch(out, bug: St):
    s = tylo.shared(f32, 4 if bug else 8)
    w = tylo.thread_idx.x // 32
    if tylo.thread_idx.x % 32 == 0:
        s[w] = 1.0
    tylo.sync_threads()
    out[tylo.thread_idx.x] = s[w]


@tylo.kernel
def local_too_small(out, bug: St):
    acc = tylo.local(f32, 3 if bug else 4, fill=0.0)
    for k in range(4):
        acc[k] = 1.0
    out[tylo.thread_idx.x] = acc[0]


# ------------------------------------------------------------------ a reduction past the row


@tylo.kernel
def row_sum_shifted(out, x, rows: Int0, cols: Int0, bug: St):
    r = tid()
    if r < rows:
        acc = tylo.value(0.0, f32)
        for k in tylo.range(cols):
            acc = acc + x[r * cols + k + (1 if bug else 0)]
        out[r] = acc


@tylo.kernel
def tree_reduce(out, bug: St):
    s = tylo.shared(f32, 256)
    t = tylo.thread_idx.x
    s[t] = 1.0
    tylo.sync_threads()
    if bug:
        s[t] = s[t] + s[t + 128]
    elif t < 128:
        s[t] = s[t] + s[t + 128]
    tylo.sync_threads()
    if t == 0:
        out[0] = s[0]


@tylo.kernel
def pairwise_last(out, x, n: Int0, bug: St):
    i = tid()
    if i < n:
        out[i] = x[2 * i] + x[2 * i + (2 if bug else 1)]


@tylo.kernel
def row_max_cols_plus_ld(out, x, rows: Int0, cols: Int0, ld: Int0, bug: St):
    r = tid()
    if r < rows:
        acc = tylo.value(0.0, f32)
        for k in tylo.range(ld if bug else cols):
            acc = tylo.maximum(acc, x[r * ld + k])
        out[r] = acc


# ------------------------------------------------------------------ a stride for an extent


@tylo.kernel
def stride_as_extent(out, x, n: Int0, bug: St):
    i = tid()
    if i < n:
        out[i] = x[i * n if bug else i]


@tylo.kernel
def column_read(out, x, rows: Int0, cols: Int0, bug: St):
    c = tid()
    if c < cols:
        acc = tylo.value(0.0, f32)
        for r in tylo.range(cols if bug else rows):
            acc = acc + x[r * cols + c]
        out[c] = acc


@tylo.kernel
def extent_as_stride(out, x, rows: Int0, cols: Int0, bug: St):
    r = tid()
    if r < rows:
        out[r] = x[r * (rows if bug else cols)]


# ------------------------------------------------------------------ a vector at the last element


@tylo.kernel
def vec4_tail(out: A16, x: A16, n: Int0, bug: St):
    i = tid()
    if 4 * i < n if bug else 4 * i + 3 < n:
        out.store(4 * i, x.load(4 * i, vector=4))


@tylo.kernel
def vec2_last(out: A16, x: A16, n: Int0, bug: St):
    i = tid()
    if 2 * i < n if bug else 2 * i + 1 < n:
        out.store(2 * i, x.load(2 * i, vector=2))


@tylo.kernel
def quads_rounded_up(out, x: A16, n: Int0, bug: St):
    i = tid()
    if i < ((n + 3) // 4 if bug else n // 4):
        out[i] = x.load(4 * i, vector=4)[3]


# ------------------------------------------------------------------ more of the same kinds


@tylo.kernel
def offset_unmasked(out, x, n: Int0, off: Int0, bug: St):
    i = tid()
    if i < n if bug else i + off < n:
        out[i] = x[i + off]


@tylo.kernel
def local_mod(out, bug: St):
    acc = tylo.local(f32, 4, fill=1.0)
    t = tylo.thread_idx.x
    out[t] = acc[t % 5 if bug else t % 4]


@tylo.kernel
def shared_swapped(out, bug: St):
    s = tylo.shared(f32, 8 * 32)
    r = tylo.thread_idx.y
    c = tylo.thread_idx.x
    s[(c * 32 + r) if bug else (r * 32 + c)] = 1.0
    tylo.sync_threads()
    out[r * 32 + c] = s[r * 32 + c]


@tylo.kernel
def left_halo(out, bug: St):
    s = tylo.shared(f32, 64)
    t = tylo.thread_idx.x
    s[t] = 1.0
    tylo.sync_threads()
    if bug:
        out[t] = s[t - 1]
    elif t > 0:
        out[t] = s[t - 1]


@tylo.kernel
def step_two(out, n: Int0, bug: St):
    for k in tylo.range(0, n if bug else n - 1, 2):
        out[k + 1] = 1.0


@tylo.kernel
def base_offset(x, n: Int0, base: Int0, bug: St):
    i = tid()
    if i < n if bug else base + i < n:
        x[base + i] = 0.0


@tylo.kernel
def atomic_inclusive(out, n: Int0, bug: St):
    i = tid()
    if i <= n if bug else i < n:
        tylo.atomic_add(out, i, 1.0)


@tylo.kernel
def pair_store(out: A16, n: Int0, bug: St):
    i = tid()
    if i < n if bug else 2 * i + 1 < n:  # n counts elements, not pairs
        out.store(2 * i, (1.0, 2.0))


# ------------------------------------------------------------------ the cases

W, F = True, False  # wrong, fixed


def _a(n):
    return S(n, f32)


# (id, kernel, grid, block, args(bug), brute(bug) -> whether a thread leaves an array)
CASES = [
    ("row_sum+1", row_sum, 1, 32, lambda b: (_a(8), _a(8 * 5), 8, 5, b)),
    ("shift_copy", shift_copy, 1, 1, lambda b: (_a(9), _a(9), 9, b)),
    ("prefix_pairs", prefix_pairs, 1, 1, lambda b: (_a(9), _a(10), 10, b)),
    ("strided_loop", strided_loop, 1, 1, lambda b: (_a(6), _a(16), 6, 3, b)),
    ("loop_from_one", loop_from_one, 1, 1, lambda b: (_a(7), 7, b)),
    ("inclusive_last", loop_inclusive_last, 2, 32, lambda b: (_a(50), _a(50), 50, b)),
    ("axpy_unmasked", axpy, 4, 64, lambda b: (_a(200), _a(200), 200, b)),
    ("store_unmasked", masked_read_only, 4, 64, lambda b: (_a(200), _a(200), 200, b)),
    ("copy_2d_cols", copy_2d, (2, 1), (32, 4), lambda b: (_a(4 * 40), _a(4 * 40), 4, 40, b)),
    ("tail_vec_rows", scale_rows_tail, 2, 32, lambda b: (_a(250), 250, b)),
    ("tile_ld+1", write_tile_ld, 1, (16, 8), lambda b: (_a(8 * 20), 8, 16, 20, b)),
    (
        "cols_as_ld",
        read_with_cols_as_ld,
        1,
        (16, 8),
        lambda b: (_a(8 * 16), _a(8 * 16), 8, 16, 20, b),
    ),  # fmt: skip
    (
        "ldx_for_out",
        output_ld_of_input,
        1,
        (16, 8),
        lambda b: (_a(8 * 16), _a(8 * 20), 8, 16, 20, b),
    ),  # fmt: skip
    ("transpose", transpose_store, 1, (16, 8), lambda b: (_a(8 * 16), _a(8 * 16), 8, 16, b)),
    ("transposed_mask", transposed_mask, 1, (16, 16), lambda b: (_a(4 * 12), 4, 12, b)),
    ("rows_beyond_grid", rows_beyond_grid, 3, 16, lambda b: (_a(2 * 16), 2, 16, b)),
    ("stage_block", stage_block, 1, 256, lambda b: (_a(256), b)),
    ("double_buffer", double_buffer, 1, 256, lambda b: (_a(256), b)),
    ("padded_tile", padded_tile, 1, (16, 16), lambda b: (_a(256), b)),
    ("halo", halo, 1, 128, lambda b: (_a(128), b)),
    ("warp_scratch", per_warp_scratch, 1, 256, lambda b: (_a(256), b)),
    ("local_small", local_too_small, 1, 32, lambda b: (_a(32), b)),
    ("row_sum_shift", row_sum_shifted, 1, 32, lambda b: (_a(8), _a(8 * 5), 8, 5, b)),
    ("tree_reduce", tree_reduce, 1, 256, lambda b: (_a(1), b)),
    ("pairwise_last", pairwise_last, 1, 64, lambda b: (_a(30), _a(60), 30, b)),
    ("cols_plus_ld", row_max_cols_plus_ld, 1, 32, lambda b: (_a(8), _a(7 * 12 + 10), 8, 10, 12, b)),
    ("stride_extent", stride_as_extent, 1, 32, lambda b: (_a(20), _a(20), 20, b)),
    ("column_read", column_read, 1, 32, lambda b: (_a(12), _a(5 * 12), 5, 12, b)),
    ("extent_stride", extent_as_stride, 1, 32, lambda b: (_a(12), _a(11 * 5 + 1), 12, 5, b)),
    ("vec4_tail", vec4_tail, 1, 32, lambda b: (_a(62), _a(62), 62, b)),
    ("vec2_last", vec2_last, 1, 32, lambda b: (_a(63), _a(63), 63, b)),
    ("quads_rounded_up", quads_rounded_up, 1, 64, lambda b: (_a(16), _a(61), 61, b)),
    ("offset_unmasked", offset_unmasked, 1, 32, lambda b: (_a(20), _a(20), 20, 3, b)),
    ("local_mod", local_mod, 1, 32, lambda b: (_a(32), b)),
    ("shared_swapped", shared_swapped, 1, (32, 8), lambda b: (_a(256), b)),
    ("left_halo", left_halo, 1, 64, lambda b: (_a(64), b)),
    ("step_two", step_two, 1, 1, lambda b: (_a(9), 9, b)),
    ("base_offset", base_offset, 1, 32, lambda b: (_a(20), 20, 5, b)),
    ("atomic_inclusive", atomic_inclusive, 1, 64, lambda b: (_a(40), 40, b)),
    ("pair_store", pair_store, 1, 32, lambda b: (_a(40), 40, b)),
]
REFUSED = (tylo.OutOfBoundsError, tylo.OutOfBoundsLaunchError)


@pytest.mark.parametrize(
    ("name", "kern", "grid", "block", "args"), CASES, ids=[c[0] for c in CASES]
)
def test_the_fix_is_accepted(name, kern, grid, block, args):
    kern.check_launch(grid, block, *args(F))


@pytest.mark.parametrize(
    ("name", "kern", "grid", "block", "args"), CASES, ids=[c[0] for c in CASES]
)
def test_the_wrong_kernel_is_refused_with_the_access_named(name, kern, grid, block, args):
    try:
        kern.check_launch(grid, block, *args(W))
    except REFUSED as err:
        assert "[" in str(err) and any(p in str(err) for p in kern.param_names + ("s[", "acc["))
        return
    # not refused under "guard": it must be reported unproved, and refused under "prove"
    specs = [a.dtype if isinstance(a, S) else a for a in args(W)]
    report = kern.accesses(*specs, block=block)
    assert report.count("unproved") >= 1, f"{name}: accepted with no unproved access:\n{report}"
    strict = tylo.kernel(bounds="prove")(kern.fn)
    with pytest.raises(tylo.BoundsProofError, match="unproved"):
        strict.check_launch(grid, block, *args(W))


def test_the_corpus_is_at_least_forty_kernels():
    assert len(CASES) >= 40
    assert len({c[1] for c in CASES}) == len(CASES)  # forty different kernels


def _host(args):
    """The launch's arguments for the CPU interpreter: an ArraySpec becomes a zeroed
    numpy array of its length."""
    return [np.zeros(a.shape, np.float32) if isinstance(a, S) else a for a in args]


@pytest.mark.parametrize(
    ("name", "kern", "grid", "block", "args"), CASES, ids=[c[0] for c in CASES]
)
def test_the_interpreter_agrees_the_wrong_launch_leaves_an_array(name, kern, grid, block, args):
    """The oracle is the CPU interpreter (tylo.interpret), which runs every thread and
    checks each address against its array: the wrong kernel's launch leaves an array,
    the fix's does not. Both run with bounds="off", so the interpreter alone decides."""
    from tylo.interpret import OutOfBounds

    loose = tylo.kernel(bounds="off")(kern.fn)
    loose.interpret[grid, block](*_host(args(F)))
    if name in CONSTANT_OFFSETS:  # refused while tracing whatever the policy: see below
        with pytest.raises(tylo.OutOfBoundsError):
            loose.interpret[grid, block](*_host(args(W)))
        return
    with pytest.raises(OutOfBounds):
        loose.interpret[grid, block](*_host(args(W)))


# Wrong kernels the tracer refuses under every policy, bounds="off" included, because even
# the least offset is outside the array (plain arithmetic): acc[3] of a 3-element local
# array (an unrolled Python loop), and s[256 + t] of a 256-element shared buffer.
CONSTANT_OFFSETS = {"local_small", "double_buffer"}
