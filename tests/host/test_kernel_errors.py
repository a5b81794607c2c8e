"""Errors raised while tracing name the user's file and line, and say what to do."""

from __future__ import annotations

import inspect
import traceback

import pytest

import tylo

F32 = tylo.f32
HERE = __file__


def line_of(fn, text: str) -> int:
    """The file line number of the first source line of ``fn`` containing ``text``."""
    lines, first = inspect.getsourcelines(fn)
    for k, line in enumerate(lines):
        if line.strip() == text:
            return first + k
    for k, line in enumerate(lines):
        if text in line and not line.lstrip().startswith("def "):
            return first + k
    raise AssertionError(f"{text!r} not in {fn.__name__}")


def trace_error(kern, *specs, block=32) -> tylo.TraceError:
    with pytest.raises(tylo.TraceError) as info:
        kern.trace(*specs, block=block)
    return info.value


def assert_points_at(err: tylo.TraceError, kern, text: str) -> None:
    assert err.filename == HERE
    assert err.lineno == line_of(kern.fn, text), str(err)
    assert text.strip() in err.source_line
    assert f"{HERE}:{err.lineno}" in str(err)


@tylo.kernel
def break_in_loop(out, n):
    for k in tylo.range(n):
        if k > 2:
            break
        out[k] = 1.0


def test_break_in_a_dynamic_loop():
    err = trace_error(break_in_loop, F32, int)
    assert_points_at(err, break_in_loop, "break")
    assert "`break` inside the if-branch" in err.message


@tylo.kernel
def return_in_branch(out, x):
    if x[0] > 0.0:
        return
    out[0] = 1.0


def test_return_in_a_dynamic_branch():
    err = trace_error(return_in_branch, F32, F32)
    assert_points_at(err, return_in_branch, "return")
    assert "not supported" in err.message


@tylo.kernel
def one_branch(out, x):
    if x[0] > 0.0:
        y = 1.0
    out[0] = y


def test_name_bound_in_one_branch_only():
    err = trace_error(one_branch, F32, F32)
    assert_points_at(err, one_branch, "out[0] = y")
    assert "'y' is assigned in only one branch of the dynamic if at line" in err.message


@tylo.kernel
def loop_local(out, n):
    for k in tylo.range(n):
        tmp = tylo.value(1.0)
    out[0] = tmp


@tylo.kernel
def loop_index_after(out, n):
    for k in tylo.range(n):
        out[k] = 1.0
    out[0] = tylo.value(k).to(F32)


def test_names_from_inside_a_loop_have_no_value_after_it():
    err = trace_error(loop_local, F32, int)
    assert_points_at(err, loop_local, "out[0] = tmp")
    assert "first assigned inside the tylo.range loop" in err.message
    err = trace_error(loop_index_after, F32, int)
    assert_points_at(err, loop_index_after, "out[0] = tylo.value(k)")
    assert "index of the tylo.range loop" in err.message


@tylo.kernel
def dynamic_while(out, x):
    v = x[0]
    while v < 10.0:
        v = v * 2.0
    out[0] = v


def test_while_needs_a_static_condition():
    err = trace_error(dynamic_while, F32, F32)
    assert_points_at(err, dynamic_while, "while v < 10.0")
    assert "tylo.range" in err.message


@tylo.kernel
def if_on_float(out, x):
    if x[0]:
        out[0] = 1.0


def test_if_on_a_float_value():
    err = trace_error(if_on_float, F32, F32)
    assert_points_at(err, if_on_float, "if x[0]:")
    assert "compare it explicitly" in err.message


@tylo.kernel
def escaped_value(out, x, n):
    saved = []
    for k in tylo.range(n):
        saved.append(x[k])
    out[0] = saved[0]


def test_a_value_cannot_escape_its_loop_through_a_container():
    err = trace_error(escaped_value, F32, F32, int)
    assert_points_at(err, escaped_value, "out[0] = saved[0]")
    assert "inside the tylo.range loop at line" in err.message


@tylo.kernel
def dtype_change(out, x, n):
    acc = tylo.value(0.0)
    for k in tylo.range(n):
        acc = acc.to(tylo.f64) + 1.0
    out[0] = acc.to(F32)


def test_carried_dtype_must_not_change():
    err = trace_error(dtype_change, F32, F32, int)
    assert "'acc' starts as a f32 value and becomes a f64 value" in err.message
    assert err.lineno == line_of(dtype_change.fn, "for k in tylo.range(n)")


@tylo.kernel
def python_error(out, table):
    out[0] = table["missing"]


def test_python_exceptions_become_trace_errors_with_the_original():
    err = trace_error(python_error, F32, (("present", 1.0),))
    assert_points_at(err, python_error, 'out[0] = table["missing"]')
    assert isinstance(err.original, TypeError)


def test_traceback_keeps_user_frames_only():
    err = trace_error(python_error, F32, (("present", 1.0),))
    files = {f.filename for f in traceback.extract_tb(err.__traceback__)}
    internal = {f for f in files if "/tylo/" in f.replace("\\", "/") and "/tests/" not in f}
    assert files - internal == {HERE}
    assert len(internal) <= 1  # at most the API entry point that re-raised it


@tylo.kernel
def vector_unproven(out, x: tylo.Ptr(align=16), n):
    out[0] = x.load(n, vector=4)[0]


@tylo.kernel
def vector_unaligned(out, x, n: tylo.Int(multiple_of=4)):
    out[0] = x.load(n, vector=4)[0]


def test_vector_access_needs_proved_alignment():
    err = trace_error(vector_unproven, F32, F32, int)
    assert "cannot prove that the element offset n is a multiple of 4" in err.message
    assert "tylo.Int(multiple_of=4)" in err.message
    err = trace_error(vector_unaligned, F32, F32, int)
    assert "only 4-byte alignment is known" in err.message
    assert "tylo.Ptr(align=16)" in err.message


@tylo.kernel
def returns_value(out):
    return 1


def test_a_kernel_returns_nothing():
    err = trace_error(returns_value, F32)
    assert "a kernel returns nothing" in err.message


@tylo.kernel
def int_division(out, a: tylo.Ptr(tylo.i32)):
    out[0] = (a[0] / a[1]).to(F32)


def test_true_division_of_ints():
    err = trace_error(int_division, F32, tylo.i32)
    assert "use // for integer (floor) division" in err.message


@tylo.kernel
def static_rebound(out, n):
    mode = "a"
    for k in tylo.range(n):
        mode = "b"
    out[0] = 1.0 if mode == "a" else 2.0


def test_static_objects_cannot_change_in_a_dynamic_loop():
    err = trace_error(static_rebound, F32, int)
    assert "'mode' is rebound in the tylo.range loop" in err.message


def test_calling_a_kernel_directly_explains_the_launch_syntax():
    with pytest.raises(tylo.TraceError, match=r"python_error\[grid, block\]"):
        python_error(None, ())


def test_errors_are_tylo_errors():
    assert issubclass(tylo.TraceError, tylo.TyloError)
    assert issubclass(tylo.KernelArgumentError, tylo.TyloError)
