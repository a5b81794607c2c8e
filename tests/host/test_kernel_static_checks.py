"""Static indices, sizes and divisors are checked while tracing, and kernels that return,
yield or are ``async`` are refused, each at the user's line (tylo issue 11, items 4, 7)."""

from __future__ import annotations

import inspect
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tylo

F32, I32 = tylo.f32, tylo.i32
HERE = __file__


def trace_error(kern, *specs, block=64) -> tylo.TraceError:
    with pytest.raises(tylo.TraceError) as info:
        kern.trace(*specs, block=block)
    return info.value


def assert_points_at(err: tylo.TraceError, kern, text: str) -> None:
    """The error names this file, the line of ``kern`` holding ``text``, and shows it."""
    lines, first = inspect.getsourcelines(kern.fn)
    want = [first + k for k, line in enumerate(lines) if line.strip() == text]
    assert err.filename == HERE and [err.lineno] == want, str(err)
    assert err.source_line == text and f"{HERE}:{err.lineno}" in str(err)


# ---------------------------------------------------------------------------- indices


@tylo.kernel
def store_at(out, index: tylo.Static):
    out[index] = 1.0


@tylo.kernel(index_bits=32)
def store_at_32(out, index: tylo.Static):
    out[index] = 1.0


def gep_offset(text: str) -> int:
    gep = r"getelementptr inbounds float, float addrspace\(1\)\* %\"out\", i(?:32|64) (-?\d+)"
    (m,) = re.findall(gep, text)
    return int(m)


@pytest.mark.parametrize(
    ("kern", "index", "bits"),
    [
        (store_at, 2**64 + 5, 64),
        (store_at, 2**63, 64),
        (store_at_32, 2**31 + 5, 32),
        (store_at_32, 2**31, 32),
    ],
)
def test_static_index_past_the_index_width_is_refused(kern, index, bits):
    err = trace_error(kern, F32, index)
    assert f"does not fit the kernel's {bits}-bit index arithmetic" in err.message
    assert str(index) in err.message
    assert_points_at(err, kern, "out[index] = 1.0")


@given(st.integers(-(2**70), 2**70))
@settings(max_examples=60, deadline=None)
def test_static_index_is_stored_exactly_or_refused(index):
    """Brute force of the claim: an index is accepted exactly when it addresses that very
    element (0 <= index, the offset and its byte offset fit 64 bits), and then the IR
    holds that offset."""
    fits = 0 <= index < 2**63 and index * 4 < 2**63
    if fits:
        assert gep_offset(store_at.trace(F32, index, block=32).llvm) == index
    else:
        err = trace_error(store_at, F32, index, block=32)
        assert str(index) in err.message


@given(st.integers(-(2**33), 2**33))
@settings(max_examples=40, deadline=None)
def test_static_index_with_32_bit_indices_is_stored_exactly_or_refused(index):
    if 0 <= index < 2**31:
        assert gep_offset(store_at_32.trace(F32, index, block=32).llvm) == index
    else:
        trace_error(store_at_32, F32, index, block=32)


def test_negative_static_index_is_refused_with_the_python_hint():
    err = trace_error(store_at, F32, -1)
    assert "negative" in err.message and "negative indexing does not apply" in err.message
    assert_points_at(err, store_at, "out[index] = 1.0")


@tylo.kernel
def shared_access(out, k: tylo.Static, vector: tylo.Static):
    t = tylo.thread_idx.x
    s = tylo.shared(F32, 64)
    if vector:
        s.store(k, (1.0, 2.0, 3.0, 4.0))
    else:
        s[t + k] = 1.0
    out[t] = s[t]


@pytest.mark.parametrize(("k", "vector"), [(64, True), (61, True), (64, False), (100, False)])
def test_shared_accesses_past_the_allocation_are_refused(k, vector):
    err = trace_error(shared_access, F32, k, vector, block=64)
    assert "which holds 64 elements" in err.message
    line = "s.store(k, (1.0, 2.0, 3.0, 4.0))" if vector else "s[t + k] = 1.0"
    assert_points_at(err, shared_access, line)


def test_shared_accesses_within_the_allocation_trace():
    shared_access.trace(F32, 60, True, block=64)
    shared_access.trace(F32, 0, False, block=64)


def test_a_runtime_offset_past_the_end_for_an_existing_thread_is_refused():
    # s[t + 1] at the top level: thread 63 of every launch of 64 threads writes s[64]
    # (docs/accesses.md); the range is not entirely outside, so the static check alone
    # would have traced it
    with pytest.raises(tylo.OutOfBoundsError, match="reaches 64, past the 64 elements"):
        shared_access.trace(F32, 1, False, block=64)


@tylo.kernel
def shared_access_in_branch(out, n: tylo.Int):
    t = tylo.thread_idx.x
    s = tylo.shared(F32, 64)
    if t < n:  # the facts of the branch may exclude the threads that would overrun
        s[t + 1] = 1.0
    out[t] = s[t]


def test_a_runtime_offset_under_a_branch_is_traced_and_reported():
    report = shared_access_in_branch.accesses(F32, int, block=64)
    (store,) = [a for a in report.accesses if a.array == "smem" and a.kind == "store"]
    assert store.state == "guarded" and "n" in store.guard


@tylo.kernel
def proved_outside(out, n: tylo.Int(max=100)):
    t = tylo.thread_idx.x
    s = tylo.shared(F32, 64)
    s[t + 64] = 1.0
    out[t] = s[t]


@tylo.kernel
def proved_negative(out):
    t = tylo.thread_idx.x
    out[t - 64] = 1.0


def test_offsets_proved_outside_for_every_thread_are_refused():
    err = trace_error(proved_outside, F32, tylo.Int(max=100), block=64)
    assert "which holds 64 elements" in err.message and "at least 64" in err.message
    assert_points_at(err, proved_outside, "s[t + 64] = 1.0")
    err = trace_error(proved_negative, F32, block=64)
    assert "negative" in err.message
    assert_points_at(err, proved_negative, "out[t - 64] = 1.0")


@tylo.kernel
def huge_shared(out):
    s = tylo.shared(F32, 12 * 1024 + 1)
    out[0] = s[0]


def test_static_shared_memory_over_48_kb_is_refused():
    err = trace_error(huge_shared, F32)
    assert "49156 bytes" in err.message and "tylo.dynamic_shared" in err.message
    assert_points_at(err, huge_shared, "s = tylo.shared(F32, 12 * 1024 + 1)")


@tylo.kernel
def wide_constant(out, n):
    if n < 2**70:
        out[0] = 1.0


def test_index_constants_that_would_wrap_are_refused():
    err = trace_error(wide_constant, F32, int)
    assert str(2**70) in err.message and "would wrap" in err.message
    assert_points_at(err, wide_constant, "if n < 2**70:")


# ---------------------------------------------------------------------------- division


@tylo.kernel
def index_div_zero(out, n):
    out[0] = tylo.value(n // 0).to(F32)


@tylo.kernel
def index_mod_zero(out, n):
    out[0] = tylo.value(n % 0).to(F32)


@tylo.kernel
def value_div_zero(out, x):
    out[0] = x[0] // 0


@tylo.kernel
def value_mod_zero(out, x):
    out[0] = x[0] % tylo.value(0, I32)


@pytest.mark.parametrize(
    ("kern", "specs", "line"),
    [
        (index_div_zero, (F32, int), "out[0] = tylo.value(n // 0).to(F32)"),
        (index_mod_zero, (F32, int), "out[0] = tylo.value(n % 0).to(F32)"),
        (value_div_zero, (I32, I32), "out[0] = x[0] // 0"),
        (value_mod_zero, (I32, I32), "out[0] = x[0] % tylo.value(0, I32)"),
    ],
)
def test_division_by_a_static_zero_is_refused(kern, specs, line):
    err = trace_error(kern, *specs)
    assert "by zero" in err.message or "Modulo by zero" in err.message
    assert_points_at(err, kern, line)


# ---------------------------------------------------------------------------- kernel shape


@tylo.kernel
def returns_value(out):
    out[0] = 1.0
    return 5


@tylo.inline
def helper_returns(x):
    return x + 1


@tylo.kernel
def calls_helper(out, x):
    out[0] = helper_returns(x[0])
    return None


@tylo.kernel
def generator_kernel(out):
    out[0] = 1.0
    yield 1


def test_return_value_and_yield_are_refused_at_their_line():
    err = trace_error(returns_value, F32)
    assert "a kernel returns nothing" in err.message and "int 5" in err.message
    assert_points_at(err, returns_value, "return 5")
    err = trace_error(generator_kernel, F32)
    assert "cannot be a generator" in err.message and err.kernel == "generator_kernel"
    assert_points_at(err, generator_kernel, "yield 1")
    calls_helper.trace(F32, F32, block=32)  # an inline helper may return a value


ASYNC_SOURCE = """
import tylo


@tylo.kernel
async def async_kernel(out):
    out[0] = 1.0
"""


def test_async_kernel_is_refused_at_its_line(tmp_path, monkeypatch):
    path = tmp_path / "async_mod.py"
    path.write_text(ASYNC_SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    import async_mod

    with pytest.raises(tylo.TraceError) as info:
        async_mod.async_kernel.trace(F32, block=32)
    err = info.value
    assert "async def" in err.message
    assert err.filename == str(path) and err.lineno == 6
    assert err.source_line == "async def async_kernel(out):"


@tylo.kernel
def long_loop(out, stop: tylo.Static):
    acc = tylo.value(0.0)
    for i in tylo.range(stop):
        acc = acc + 1.0
    out[0] = acc


@tylo.kernel(index_bits=32)
def long_loop_32(out, stop: tylo.Static):
    acc = tylo.value(0.0)
    for i in tylo.range(stop):
        acc = acc + 1.0
    out[0] = acc


@pytest.mark.parametrize(("kern", "stop"), [(long_loop, 2**63), (long_loop_32, 2**31)])
def test_loop_bounds_past_the_counter_width_are_refused(kern, stop):
    err = trace_error(kern, F32, stop)
    assert f"tylo.range stop {stop} does not fit" in err.message
    assert_points_at(err, kern, "for i in tylo.range(stop):")
    kern.trace(F32, stop - 1, block=32)  # the largest stop traces
