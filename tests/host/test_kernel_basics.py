"""The kernel language's basics, traced to NVVM IR without libNVVM or a GPU (tylo issue 15,
item 4): atomics (the PTX each (op, dtype, space, scope, order) becomes, and typed refusals
at the user's line), per-thread local arrays (static bounds) and static shared bounds.
The device print and the bounds-debug mode are in test_kernel_basics_print.py."""

from __future__ import annotations

import inspect
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tylo
from tylo.kernel import atomics

HERE = __file__
DTYPES = [
    tylo.u32,
    tylo.i32,
    tylo.u64,
    tylo.i64,
    tylo.f32,
    tylo.f64,
    tylo.f16,
    tylo.bf16,
    tylo.u16,
    tylo.i8,
]
OPS = ["add", "min", "max", "exch", "cas"]


def points_at(err: tylo.TraceError, kern, text: str) -> None:
    """The error names this file and the line of ``kern`` whose text is ``text``."""
    lines, first = inspect.getsourcelines(kern.fn)
    want = [first + k for k, line in enumerate(lines) if line.strip() == text]
    assert err.filename == HERE and [err.lineno] == want, str(err)


def atom_lines(llvm: str) -> list[str]:
    """The atom/red statements of the kernel's inline PTX, each with its predicate."""
    return re.findall(r"((?:@!?%neg )?(?:atom|red)\.[^;\"]*);", llvm)


# ---------------------------------------------------------------------------- atomics


@tylo.kernel
def atomic_global(out, x, op: tylo.Static, kw: tylo.Static):
    i = tylo.thread_idx.x
    v = x[i]
    if op == "cas":
        out[i] = tylo.atomic_cas(out, i, v, v, **kw)
    else:
        getattr(tylo, f"atomic_{op}")(out, i, v, **kw)


@tylo.kernel
def atomic_shared(out, x, dtype: tylo.Static, op: tylo.Static, kw: tylo.Static):
    s = tylo.shared(dtype, 64)
    i = tylo.thread_idx.x
    v = x[i]
    if op == "cas":
        _old = tylo.atomic_cas(s, i, v, v, **kw)
    else:
        _old = getattr(tylo, f"atomic_{op}")(s, i, v, **kw)
    out[i] = s[i]


def expected_lines(op: str, d, head: str) -> list[str] | None:
    """The atom statements of op on d, by PTX ISA 9.7.13.5's tables (written independently
    of tylo.kernel.atomics); f32/f64 min and max are two integer atoms chosen by the sign
    (module docstring of tylo.kernel.atomics)."""
    ints = {"u32": "u32", "i32": "s32", "u64": "u64", "i64": "s64"}
    if op in ("min", "max") and d.name in ("f32", "f64"):
        n = d.bits
        neg, pos = ("min", "max") if op == "max" else ("max", "min")
        return [f"@%neg {head}.{neg}.u{n} $0, [$1], $2", f"@!%neg {head}.{pos}.s{n} $0, [$1], $2"]
    if op == "add":
        suffix = {
            "u32": "u32",
            "i32": "s32",
            "u64": "u64",
            "i64": "u64",
            "f32": "f32",
            "f64": "f64",
            "f16": "noftz.f16",
            "bf16": "noftz.bf16",
        }.get(d.name)
    elif op in ("min", "max"):
        suffix = ints.get(d.name)
    else:
        suffix = {32: "b32", 64: "b64"}.get(d.bits) if d.name != "bool" else None
    if suffix is None:
        return None
    ops = "$2, $3" if op == "cas" else "$2"
    return [f"{head}.{op}.{suffix} $0, [$1], {ops}"]


def test_atomic_ptx_matches_the_isa_table():
    """Every (op, dtype, space), brute force (100 traces), each with one of the 16 (scope,
    order) pairs in turn: the PTX is the ISA table's, or the trace refuses the type."""
    pairs = [(sc, o) for sc in atomics.SCOPES for o in atomics.ORDERS]
    cases = [(op, d, sp) for op in OPS for d in DTYPES for sp in ("global", "shared")]
    for k, (op, d, space) in enumerate(cases):
        scope, order = pairs[k % len(pairs)]
        kw = {"scope": scope, "order": order}
        quals = "" if (scope, order) == ("gpu", "relaxed") else f".{order}.{scope}"
        want = expected_lines(op, d, f"atom{quals}.{space}")
        if space == "global":
            trace = lambda: atomic_global.trace(d, d, op, kw, block=64)  # noqa: E731
        else:
            trace = lambda: atomic_shared.trace(d, d, d, op, kw, block=64)  # noqa: E731
        if want is None:
            with pytest.raises(tylo.TraceError, match=rf"PTX has no atom\.{op} on {d.name} "):
                trace()
            continue
        assert atom_lines(trace().llvm) == want


@pytest.mark.parametrize("op", ["add", "min", "max"])
@pytest.mark.parametrize("order", ["relaxed", "release"])
def test_unused_results_may_use_red(op, order):
    """red for add/min/max with the orders red allows."""
    kw = {"result": False, "order": order}
    llvm = atomic_global.trace(tylo.u32, tylo.u32, op, kw, block=64).llvm
    quals = "" if order == "relaxed" else ".release.gpu"
    assert atom_lines(llvm) == [f"red{quals}.global.{op}.u32 [$0], $1"]


@tylo.kernel
def atomic_bad(out, how: tylo.Static):
    i = tylo.thread_idx.x
    if how == "scope":
        tylo.atomic_add(out, i, 1.0, scope="block")
    if how == "order":
        tylo.atomic_add(out, i, 1.0, order="seq_cst")
    if how == "type":
        tylo.atomic_min(tylo.shared(tylo.f16, 4), 0, 1.0)
    if how == "red":
        tylo.atomic_exch(out, i, 1.0, result=False)
    if how == "red-order":
        tylo.atomic_add(out, i, 1.0, result=False, order="acquire")
    if how == "not-memory":
        tylo.atomic_add(i, 0, 1.0)
    if how == "dtype":
        tylo.atomic_add(out, i, tylo.value(1, tylo.f64))


@pytest.mark.parametrize(
    ("how", "line", "message"),
    [
        ("scope", 'tylo.atomic_add(out, i, 1.0, scope="block")', r"scope='block' is not"),
        ("order", 'tylo.atomic_add(out, i, 1.0, order="seq_cst")', r"order='seq_cst' is not"),
        (
            "type",
            "tylo.atomic_min(tylo.shared(tylo.f16, 4), 0, 1.0)",
            r"no atom\.min on f16 elements in shared .*only as a vector: pass a pair",
        ),
        (
            "red",
            "tylo.atomic_exch(out, i, 1.0, result=False)",
            r"unexpected keyword argument 'result'",
        ),
        (
            "red-order",
            'tylo.atomic_add(out, i, 1.0, result=False, order="acquire")',
            r"only relaxed or release",
        ),
        ("not-memory", "tylo.atomic_add(i, 0, 1.0)", r"must be global or shared memory"),
        ("dtype", "tylo.atomic_add(out, i, tylo.value(1, tylo.f64))", r"f64 value into f32"),
    ],
)
def test_atomic_refusals_name_the_line(how, line, message):
    with pytest.raises(tylo.TraceError, match=message) as info:
        atomic_bad.trace(tylo.f32, how, block=32)
    points_at(info.value, atomic_bad, line)


@tylo.kernel
def atomic_shared_at(out, k: tylo.Static):
    s = tylo.shared(tylo.u32, 16)
    out[0] = tylo.atomic_add(s, k, 1)


@settings(max_examples=25, deadline=None)
@given(k=st.one_of(st.integers(-(2**63), 2**63), st.integers(-3, 20)))
def test_static_atomic_indices_are_checked_like_accesses(k):
    """Brute force: a static index traces iff 0 <= k < 16, else names the line."""
    if 0 <= k < 16:
        atomic_shared_at.trace(tylo.u32, k, block=32)
        return
    with pytest.raises(tylo.TraceError) as info:
        atomic_shared_at.trace(tylo.u32, k, block=32)
    points_at(info.value, atomic_shared_at, "out[0] = tylo.atomic_add(s, k, 1)")


# ---------------------------------------------------------------------------- local arrays


@tylo.kernel
def local_static(out, x, n: tylo.Static, k: tylo.Static):
    a = tylo.local(tylo.f32, n)
    a[k] = x[0]
    out[0] = a[k]


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 40), k=st.one_of(st.integers(-50, 50), st.integers(-(2**64), 2**64)))
def test_local_static_indices_within_the_array_only(n, k):
    if 0 <= k < n:
        llvm = local_static.trace(tylo.f32, tylo.f32, n, k, block=32).llvm
        assert f"alloca [{n} x float]" in llvm
        return
    with pytest.raises(tylo.TraceError, match=rf"index {k} is outside the local array of {n}"):
        local_static.trace(tylo.f32, tylo.f32, n, k, block=32)


@tylo.kernel
def local_sized(out, n: tylo.Static, d: tylo.Static):
    _a = tylo.local(d, n)
    out[0] = 1.0


@pytest.mark.parametrize(
    ("n", "d", "message"),
    [
        (0, tylo.f32, "size must be a static int >= 1, got 0"),
        (-3, tylo.f32, "got -3"),
        (2.0, tylo.f32, "got 2.0"),
        (True, tylo.f32, "got True"),
        (2**17 + 1, tylo.f32, "over the 524288-byte local memory"),
    ],
)
def test_local_sizes_are_refused(n, d, message):
    with pytest.raises(tylo.TraceError, match=re.escape(message)):
        local_sized.trace(tylo.f32, n, d, block=32)


@tylo.kernel
def local_runtime(out, x, j):
    a = tylo.local(tylo.i32, 8, fill=0)
    a[j % 8] = x[0]
    for r in tylo.range(j):
        a[r % 8] = a[r % 8] + 1
    out[0] = a[3]


def test_local_runtime_indices_and_dynamic_loops_trace():
    llvm = local_runtime.trace(tylo.i32, tylo.i32, int, block=32).llvm
    assert llvm.count("alloca [8 x i32]") == 1


@tylo.kernel
def local_provably_outside(out, j: tylo.Int(min=0, max=100)):
    a = tylo.local(tylo.i32, 8)
    a[j + 8] = 1


def test_local_index_proved_outside_is_refused():
    with pytest.raises(tylo.TraceError, match=r"entirely outside the local array of 8"):
        local_provably_outside.trace(tylo.i32, int, block=32)


# ---------------------------------------------------------------------------- shared bounds


@tylo.kernel
def shared_static(out, n: tylo.Static, k: tylo.Static):
    s = tylo.shared(tylo.f32, n)
    s[k] = 1.0


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 4096), k=st.integers(-5, 5000))
def test_static_shared_stores_past_the_allocation_name_the_line(n, k):
    if 0 <= k < n:
        shared_static.trace(tylo.f32, n, k, block=32)
        return
    with pytest.raises(tylo.TraceError) as info:
        shared_static.trace(tylo.f32, n, k, block=32)
    points_at(info.value, shared_static, "s[k] = 1.0")


def test_bf16_atomic_add_needs_sm_90():
    with pytest.raises(tylo.TraceError, match=r"noftz\.bf16 needs sm_90\+, target is sm_80"):
        atomic_global.trace(tylo.bf16, tylo.bf16, "add", {}, block=32, target="sm_80")
    atomic_global.trace(tylo.f16, tylo.f16, "add", {}, block=32, target="sm_80")
