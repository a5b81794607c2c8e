"""tylo.ops on the host: every argument check of the array-level ops, without a GPU (the
arrays are descriptions: :class:`tylo.arrays.DeviceArray` with no memory behind them).

- ``f32_scalar`` accepts exactly the reals whose f32 rounding is finite (numpy's own f32
  conversion is the oracle), ``require_bool`` exactly the bools, ``require_int`` exactly
  the integers (numpy's included, never a bool);
- ``tylo.ops.gemm``'s kernel call computes ``a @ b`` in the kernels' convention: checked
  address by address over every element for random shapes and both ``out`` layouts;
- zero, negative and overlapping output strides, wrong shapes, dtypes and dims are refused
  with the argument named; type confusion (``relu="no"``, ``causal="False"``) is refused;
- each family is a package, a function and a command line.
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tylo
import tylo.ops
from tylo.arrays import DeviceArray
from tylo.errors import TyloError
from tylo.ops.args import F32_MAX, OpArgumentError, f32_scalar, require_bool, require_int
from tylo.ops.attention.api import check_scale
from tylo.ops.gemm.api import gemm_operands
from tylo.ops.gemm.route import kernel_call

ROOT = Path(__file__).resolve().parents[2]


def arr(shape, strides=None, dtype=tylo.bf16, ptr=1 << 30):
    if strides is None:
        strides = tuple(math.prod(shape[i + 1 :]) for i in range(len(shape)))
    return DeviceArray(ptr, tuple(shape), tuple(strides), dtype, 0)


# ------------------------------------------------------------------ scalars


def _f32_finite(v) -> bool:
    with np.errstate(over="ignore"):
        try:
            return bool(np.isfinite(np.float32(float(v))))
        except OverflowError:
            return False


@settings(max_examples=300, deadline=None)
@given(
    st.floats(allow_nan=True, allow_infinity=True)
    | st.floats(min_value=F32_MAX * 0.999999, max_value=F32_MAX * 1.000001)
    | st.floats(min_value=-F32_MAX * 1.000001, max_value=-F32_MAX * 0.999999)
    | st.integers(min_value=-(2**200), max_value=2**200)
    | st.integers(min_value=2**127, max_value=2**129)
)
def test_f32_scalar_accepts_exactly_what_f32_holds(v):
    if _f32_finite(v):
        assert f32_scalar("op", "alpha", v) == float(v)
    else:
        with pytest.raises(OpArgumentError, match="alpha"):
            f32_scalar("op", "alpha", v)


def test_f32_boundary_values():
    half_ulp = 2.0**103  # half an ulp of F32_MAX: ties round to even, past F32_MAX
    assert f32_scalar("op", "x", F32_MAX) == F32_MAX
    assert f32_scalar("op", "x", F32_MAX + half_ulp / 2) > 0
    for bad in (F32_MAX + half_ulp, 1e39, -1e39, math.inf, math.nan, 10**400):
        with pytest.raises(OpArgumentError):
            f32_scalar("op", "x", bad)
    for bad in (True, "1.0", None, [1.0], 1j):
        with pytest.raises(OpArgumentError, match="real number"):
            f32_scalar("op", "x", bad)
    assert f32_scalar("op", "x", np.float64(0.25)) == 0.25


@given(
    st.one_of(
        st.booleans(),
        st.integers(),
        st.text(max_size=3),
        st.none(),
        st.floats(),
        st.just(np.bool_(True)),
        st.just(np.int64(1)),
    )
)
def test_require_bool_takes_only_bools(v):
    if isinstance(v, (bool, np.bool_)):
        assert require_bool("op", "relu", v) is bool(v)
    else:
        with pytest.raises(OpArgumentError, match="relu must be True or False"):
            require_bool("op", "relu", v)


@given(
    st.one_of(
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(),
        st.text(max_size=3),
        st.just(np.int32(7)),
        st.just(np.uint64(9)),
    )
)
def test_require_int_takes_only_integers(v):
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        assert require_int("op", "n", v) == int(v)
    else:
        with pytest.raises(OpArgumentError, match="n must be an integer"):
            require_int("op", "n", v)


def test_scale_must_stay_finite_times_log2e():
    assert check_scale("op", None) is None
    assert check_scale("op", 0.125) == 0.125
    for bad in (1e39, F32_MAX, -F32_MAX, math.nan, "abc", True):
        with pytest.raises(OpArgumentError, match="scale"):
            check_scale("op", bad)


# ------------------------------------------------------------------ gemm's kernel call


def _addr(x: DeviceArray, *idx) -> int:
    return x.ptr + sum(i * s for i, s in zip(idx, x.strides)) * x.dtype.nbytes


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 6),
    st.integers(1, 6),
    st.integers(1, 6),
    st.booleans(),
    st.integers(0, 3),
    st.integers(0, 3),
    st.integers(0, 3),
)
def test_the_kernel_call_reads_and_writes_the_users_elements(m, n, k, row_major, pa, pb, po):
    """Kernel convention (tylo/ops/gemm/kernel.py): A' (M', K) at i*lda + kk, B' (K, N') at
    kk + j*ldb, D (M', N') at i + j*ldd. Every product term and output lands on the user's."""
    a = arr((m, k), (k + pa, 1), ptr=1 << 20)
    b = arr((k, n), (1, k + pb), ptr=1 << 24)
    out = (
        arr((m, n), (n + po, 1), tylo.f32, 1 << 28)
        if row_major
        else arr((m, n), (1, m + po), tylo.f32, 1 << 28)
    )
    desc = gemm_operands(a, b, out, None)
    d_, a_, b_, mm, nn, kk, lda, ldb, ldd = kernel_call(desc, out, a, b)
    assert kk == k and {mm, nn} == {m, n}
    for i in range(mm):
        for j in range(nn):
            user = (j, i) if desc["row_major"] else (i, j)  # the op's reading of out
            assert d_.ptr + (i + j * ldd) * 4 == _addr(out, *user)
            for t in range(k):
                ka = a_.ptr + (i * lda + t) * 2
                kb = b_.ptr + (t + j * ldb) * 2
                ui, uj = user
                assert {ka, kb} == {_addr(a, ui, t), _addr(b, t, uj)}


BAD_GEMM = [
    ("shapes", dict(a=arr((4, 8)), b=arr((9, 4), (1, 9))), "a's columns must equal b's rows"),
    (
        "dtype",
        dict(a=arr((4, 8)), b=arr((8, 4), (1, 8), tylo.f32)),
        "must both be bf16 or both f16",
    ),
    ("dims", dict(a=arr((4, 8, 1)), b=arr((8, 4), (1, 8))), "a must have 2 dimensions"),
    ("a col-major", dict(a=arr((4, 8), (1, 4)), b=arr((8, 4), (1, 8))), "a must be row-major"),
    ("out stride 0", dict(out=arr((4, 4), (0, 1), tylo.f32)), "out has stride 0"),
    ("out negative", dict(out=arr((4, 4), (-4, 1), tylo.f32)), "out has stride -4"),
    ("a negative", dict(a=arr((4, 8), (-8, 1))), "a has stride -8"),
    ("out strided", dict(out=arr((4, 4), (8, 2), tylo.f32)), "row- or column-major"),
    ("out rows overlap", dict(out=arr((4, 4), (2, 1), tylo.f32)), "rows overlap"),
    ("out shape", dict(out=arr((4, 5), None, tylo.f32)), r"out must be \(4, 4\)"),
    ("out dtype", dict(out=arr((4, 4), None, tylo.i32)), "out is i32"),
    ("out_dtype", dict(out_dtype="f64"), "out_dtype must be one of"),
    (
        "out_dtype clash",
        dict(out=arr((4, 4), None, tylo.f32), out_dtype="bf16"),
        "equal out_dtype bf16",
    ),
    ("a not an array", dict(a=3), "a must be a device array"),
    ("b None", dict(b=None), "b must be a device array"),
]


@pytest.mark.parametrize(("label", "change", "says"), BAD_GEMM, ids=[c[0] for c in BAD_GEMM])
def test_gemm_refuses_with_the_argument_named(label, change, says):
    kw = dict(a=arr((4, 8)), b=arr((8, 4), (1, 8)), out=None, out_dtype=None)
    kw.update(change)
    with pytest.raises(OpArgumentError, match=says):
        gemm_operands(kw["a"], kw["b"], kw["out"], kw["out_dtype"])


@pytest.mark.parametrize(
    ("kw", "says"),
    [
        (dict(relu="no"), "relu must be True or False"),
        (dict(relu=1), "relu must be True or False"),
        (dict(alpha=1e39), "alpha = 1e\\+39 does not fit in f32"),
        (dict(alpha=None), "alpha must be a real number"),
        (dict(alpha="2"), "alpha must be a real number"),
        (dict(alpha=math.nan), "does not fit in f32"),
    ],
)
def test_gemm_scalars_and_options_are_checked_first(kw, says):
    with pytest.raises(OpArgumentError, match=says):
        tylo.ops.gemm(arr((4, 8)), arr((8, 4), (1, 8)), **kw)


@pytest.mark.parametrize(
    ("kw", "says"),
    [
        (dict(causal="False"), "causal must be True or False"),
        (dict(causal=0), "causal must be True or False"),
        (dict(return_lse="yes"), "return_lse must be True or False"),
        (dict(scale=1e39), "scale"),
        (dict(scale=3e38), "scale \\* log2\\(e\\)"),
        (dict(out=arr((2, 3, 16, 64), (-3072, 1024, 64, 1))), "out has stride -3072"),
        (dict(out=arr((2, 3, 16, 64), (0, 1024, 64, 1))), "out has stride 0"),
    ],
)
def test_attention_options_are_checked(kw, says):
    q = arr((2, 3, 16, 64))
    with pytest.raises(OpArgumentError, match=says):
        tylo.ops.attention(q, q, q, **kw)


def test_attention_refuses_a_negative_input_stride():
    q = arr((2, 3, 16, 64))
    k = arr((2, 3, 16, 64), (3072, 1024, -64, 1))
    with pytest.raises(OpArgumentError, match="k has stride -64"):
        tylo.ops.attention(q, k, q)


@pytest.mark.parametrize(
    ("kw", "says"),
    [
        (dict(dim=0), "dim must be the last dimension"),
        (dict(dim=True), "dim must be an integer"),
        (dict(dim="1"), "dim must be an integer"),
        (dict(out=arr((4, 8), (-8, 1), tylo.f32)), "out has stride -8"),
    ],
)
def test_softmax_options_are_checked(kw, says):
    with pytest.raises(OpArgumentError, match=says):
        tylo.ops.softmax(arr((4, 8), None, tylo.f32), **kw)


@pytest.mark.parametrize("op", ["gemm", "attention", "softmax"])
def test_every_refusal_is_a_tylo_error(op):
    fn = getattr(tylo.ops, op)
    for bad in (None, 1, "x", 2.5, b"x", object()):
        with pytest.raises(TyloError):
            fn(*[bad] * {"gemm": 2, "attention": 3, "softmax": 1}[op])


# ------------------------------------------------------------------ the families


@pytest.mark.parametrize("fam", ["gemm", "attention", "softmax"])
def test_each_family_is_package_function_and_command(fam):
    mod = getattr(tylo.ops, fam)
    assert callable(mod) and mod.__name__ == f"tylo.ops.{fam}"
    assert getattr(mod, fam).__module__ == f"tylo.ops.{fam}.api"
    import importlib

    assert importlib.import_module(f"tylo.ops.{fam}.host").__name__.endswith(".host")
    r = subprocess.run(
        [sys.executable, "-m", f"tylo.ops.{fam}", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
    )
    assert r.returncode == 0 and f"python -m tylo.ops.{fam}" in r.stdout, r.stderr
