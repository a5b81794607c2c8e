"""tylo.print_ (vprintf with C's argument promotions, conversions counted at trace time)
and the bounds-debug mode TYLO_DEBUG_BOUNDS=1 (run-time checks that print and trap), traced
to NVVM IR without libNVVM or a GPU (tylo issue 15, item 4)."""

from __future__ import annotations

import inspect
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tylo
from tylo.kernel import debug
from tylo.kernel.printf import conversions
from tylo.layouts import Layout

HERE = __file__


def points_at(err: tylo.TraceError, kern, text: str) -> None:
    lines, first = inspect.getsourcelines(kern.fn)
    want = [first + k for k, line in enumerate(lines) if line.strip() == text]
    assert err.filename == HERE and [err.lineno] == want, str(err)


def line_of(kern, text: str) -> int:
    lines, first = inspect.getsourcelines(kern.fn)
    (k,) = [k for k, line in enumerate(lines) if line.strip() == text]
    return first + k


# ---------------------------------------------------------------------------- conversions

_CONV = st.sampled_from(list("diouxXcfFeEgGaAp"))
_PIECE = st.one_of(
    st.text(alphabet="ab =:,\n", max_size=4),
    st.just("%%"),
    st.builds(
        lambda flags, width, prec, length, conv: f"%{flags}{width}{prec}{length}{conv}",
        st.sampled_from(["", "-", "+", " ", "#", "0", "-0"]),
        st.sampled_from(["", "1", "12"]),
        st.sampled_from(["", ".", ".3"]),
        st.sampled_from(["", "h", "hh", "l", "ll", "z"]),
        _CONV,
    ),
)


@settings(max_examples=200, deadline=None)
@given(pieces=st.lists(_PIECE, max_size=8))
def test_conversions_count_what_printf_reads(pieces):
    """Brute force against the pieces the format was built from: every piece that is a
    conversion (not %%) consumes exactly one argument, in order."""
    fmt = "".join(pieces)
    want = [p[-1] for p in pieces if p.startswith("%") and p != "%%"]
    assert [c for _, c in conversions(fmt)] == want


@pytest.mark.parametrize(
    ("fmt", "message"),
    [
        ("100%", "not a complete conversion"),
        ("%*d", "'*' widths are not supported"),
        ("%.*f", "'*' widths are not supported"),
        ("%s", "%s in '%s' is not supported"),
        ("%n", "%n in '%n' is not supported"),
        ("%5%", "write %% alone"),
    ],
)
def test_unsupported_formats_are_refused(fmt, message):
    with pytest.raises(tylo.TraceError, match=re.escape(message)):
        conversions(fmt)


# ---------------------------------------------------------------------------- print_


@tylo.kernel
def printer(x, fmt: tylo.Static, what: tylo.Static):
    t = tylo.thread_idx.x
    values = {
        "none": (),
        "mixed": (t, x[t], tylo.value(3, tylo.i64), tylo.value(1, tylo.u8), True, 2.5),
        "int": (t,),
        "float": (x[t],),
        "wide": (tylo.value(3, tylo.i64),),
        "half": (tylo.value(1.5, tylo.f16),),
    }[what]
    tylo.print_(fmt, *values)


def vprintf_args(llvm: str) -> list[str]:
    """The field types of the packed argument buffer (the alloca passed to vprintf)."""
    m = re.search(r'%"printf_args[_0-9]*" = alloca \{([^}]*)\}', llvm)
    return [f.strip() for f in m.group(1).split(",")] if m else []


def test_print_packs_arguments_with_c_promotions():
    fmt = "t=%d x=%f w=%lld b=%u c=%d y=%g\n"
    llvm = printer.trace(tylo.f32, fmt, "mixed", block=32).llvm
    assert re.search(r'declare i32 @"vprintf"\(i8\* %"[^"]*", i8\* %"[^"]*"\)', llvm)
    # f32 -> double, i64 stays, u8 and bool -> i32, Python float -> double
    assert vprintf_args(llvm) == ["i32", "double", "i64", "i32", "i32", "double"]
    data = fmt.encode() + b"\0"
    want = f'internal addrspace(4) constant [{len(data)} x i8] c"t=%d x=%f w=%lld b=%u c=%d y=%g'
    assert want + '\\0a\\00", align 1' in llvm


def test_print_without_values_passes_null():
    llvm = printer.trace(tylo.f32, "hello\n", "none", block=32).llvm
    assert re.search(r'call i32 @"vprintf"\(i8\* %"[^"]+", i8\* null\)', llvm)


def test_half_precision_prints_as_double():
    llvm = printer.trace(tylo.f32, "%f", "half", block=32).llvm
    assert vprintf_args(llvm) == ["double"]


@pytest.mark.parametrize(
    ("fmt", "what", "message"),
    [
        ("%d %d", "int", "has 2 conversion(s) but 1 value(s)"),
        ("no conversions", "int", "has 0 conversion(s) but 1 value(s)"),
        ("%%d", "int", "has 0 conversion(s) but 1 value(s)"),
        ("%d", "none", "has 1 conversion(s) but 0 value(s)"),
        ("%d", "float", "is a f32 but %d prints an integer"),
        ("%f", "int", "is an integer but %f prints a double"),
        ("%e", "wide", "is a i64 but %e prints a double"),
        ("%d", "wide", "64-bit i64 but %d prints 32 bits; use %lld"),
        ("%s", "int", "%s in '%s' is not supported"),
    ],
)
def test_print_refusals_name_the_line(fmt, what, message):
    with pytest.raises(tylo.TraceError, match=re.escape(message)) as info:
        printer.trace(tylo.f32, fmt, what, block=32)
    points_at(info.value, printer, "tylo.print_(fmt, *values)")


def test_print_format_must_be_a_str():
    with pytest.raises(tylo.TraceError, match="the format must be a Python str, got int"):
        printer.trace(tylo.f32, 5, "none", block=32)


# ---------------------------------------------------------------------------- debug bounds


@tylo.kernel
def dyn_access(out, x, j, where: tylo.Static):
    t = tylo.thread_idx.x
    s = tylo.shared(tylo.f32, 64)
    a = tylo.local(tylo.f32, 4, fill=0.0)
    if where == "shared":
        s[t] = x[t]
        out[t] = s[t + j]
    if where == "global":
        out[t - j] = 1.0
    if where == "view":
        v = tylo.view(out, Layout((4, 8), (8, 1)))
        v[j, t % 8] = 1.0
    if where == "local":
        out[t] = a[j]
    if where == "atomic":
        tylo.atomic_add(s, j, 1.0)
    if where == "proved":
        out[t] = s[t]
    if where == "vector":
        out[t] = s.load(4 * j, vector=4)[0]


@pytest.fixture
def debug_bounds(monkeypatch):
    monkeypatch.setenv(debug.ENV, "1")


def traps(llvm: str) -> int:
    return llvm.count('call void asm sideeffect "trap;"')


@pytest.mark.parametrize(
    ("where", "text", "bound", "checks"),
    [
        ("shared", "out[t] = s[t + j]", 64, 1),
        ("global", "out[t - j] = 1.0", -1, 1),
        ("view", "v[j, t % 8] = 1.0", 32, 1),
        ("local", "out[t] = a[j]", 4, 1),
        ("atomic", "tylo.atomic_add(s, j, 1.0)", 64, 1),
        ("proved", "out[t] = s[t]", None, 0),
        ("vector", "out[t] = s.load(4 * j, vector=4)[0]", 64, 1),
    ],
)
def test_debug_mode_checks_dynamic_accesses(debug_bounds, where, text, bound, checks):
    llvm = dyn_access.trace(tylo.f32, tylo.f32, int, where, block=64).llvm
    assert traps(llvm) == checks
    if checks:
        line = line_of(dyn_access, text)
        msg = re.search(r'c"(tylo: out-of-bounds [^"]*)\\0a\\00"', llvm).group(1)
        assert msg.startswith("tylo: out-of-bounds ")
        assert f" in kernel dyn_access at {HERE.rsplit('/', 1)[-1]}:{line}: " in msg
        if bound == -1:
            assert msg.endswith("index %lld is negative (the pointer's length is not known)")
        else:
            assert msg.endswith(f", bound {bound}") and "index %lld" in msg
            limit = 61 if where == "vector" else bound  # the last vector starts at 60
            assert re.search(rf'icmp uge i64 %"[^"]+", {limit}\n', llvm)
            assert ("a vector of 4 elements" in msg) == (where == "vector")


def test_debug_mode_off_emits_no_checks(monkeypatch):
    monkeypatch.delenv(debug.ENV, raising=False)
    for where in ("shared", "global", "view", "local", "atomic"):
        llvm = dyn_access.trace(tylo.f32, tylo.f32, int, where, block=64).llvm
        assert traps(llvm) == 0 and "vprintf" not in llvm


@pytest.mark.parametrize(
    ("value", "on"),
    [("1", True), ("true", True), ("ON", True), ("0", False), ("", False), ("no", False)],
)
def test_debug_mode_is_part_of_the_key(monkeypatch, value, on):
    monkeypatch.setenv(debug.ENV, value)
    assert debug.enabled() is on and debug.key_text() == ("bounds" if on else "")


@tylo.kernel
def many_checks(out, x, j):
    t = tylo.thread_idx.x
    s = tylo.shared(tylo.f32, 64)
    for k in range(5):
        s[t + j + k] = x[t - j]
    tylo.print_("%d\n", t)
    tylo.print_("%d\n", t)


def test_debug_traps_share_one_print_buffer(debug_bounds):
    """Each check may trap only once per thread, so all checks share one vprintf buffer;
    the user's own prints keep theirs. The load x[t - j], repeated, is checked once (the
    first check dominates the others)."""
    llvm = many_checks.trace(tylo.f32, tylo.f32, int, block=64).llvm
    assert traps(llvm) == 6
    assert llvm.count("alloca {i64}") == 1 and llvm.count("alloca {i32}") == 2


@tylo.kernel
def checks_in_regions(out, x, j, n):
    t = tylo.thread_idx.x
    if t < n:
        out[t - j] = 1.0
    out[t - j] = 2.0  # the branch's check does not dominate this one
    for r in tylo.range(n):
        out[t - j] = 3.0  # the check above dominates the loop body
        out[t - r] = 4.0


def test_debug_checks_are_reused_only_where_they_dominate(debug_bounds):
    llvm = checks_in_regions.trace(tylo.f32, tylo.f32, int, int, block=64).llvm
    assert traps(llvm) == 3


@tylo.kernel
def print_static(x, fmt: tylo.Static, v: tylo.Static):
    tylo.print_(fmt, v)


@settings(max_examples=60, deadline=None)
@given(
    v=st.one_of(st.integers(-(2**65), 2**65), st.integers(-(2**33), 2**33)),
    length=st.sampled_from(["", "l", "ll"]),
    conv=st.sampled_from(list("diuxXo")),
)
def test_python_ints_print_as_c_passes_them(v, length, conv):
    """Brute force: a Python int is accepted iff it fits the conversion's width (signed,
    or unsigned for o/u/x/X), and the buffer holds its bits modulo that width."""
    bits = 64 if length else 32
    fits = -(2 ** (bits - 1)) <= v < 2 ** (bits - 1) or (conv in "uxXo" and 0 <= v < 2**bits)
    fmt = f"%{length}{conv}"
    if not fits:
        with pytest.raises(tylo.TraceError, match=f"does not fit the {bits} bits"):
            print_static.trace(tylo.f32, fmt, v, block=1)
        return
    llvm = print_static.trace(tylo.f32, fmt, v, block=1).llvm
    (stored,) = re.findall(rf"store i{bits} (-?\d+), i{bits}\*", llvm)
    assert int(stored) % 2**bits == v % 2**bits
