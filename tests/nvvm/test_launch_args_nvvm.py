"""Launch argument refusals through the whole launcher, compiled (libNVVM) but with the
driver replaced by the recorder of test_trace_launch: after contiguous arrays have warmed
the checked, reader and inline paths (C and Python), a strided, transposed, zero-stride,
read-only, null or misaligned view of the same type, or a wrong-typed argument, is a
KernelArgumentError naming the parameter and launches nothing; the opt-ins launch."""

from __future__ import annotations

import pytest
from test_trace_launch import recorder  # noqa: F401 - the fixture, shared

import tylo
from tylo.arrays import DeviceArray

F32 = tylo.f32


def view(ptr=0x1000, shape=(256,), strides=(1,), readonly=False, dtype=F32):
    return DeviceArray(ptr, shape, strides, dtype, 0, readonly)


def make_kernel(out_ann=None, x_ann=None, bounds="guard"):
    def add_one(out, x, n):
        i = tylo.thread_idx.x
        if i < n:
            out[i] = x[i] + 1.0

    if out_ann is not None:
        add_one.__annotations__["out"] = out_ann
    if x_ann is not None:
        add_one.__annotations__["x"] = x_ann
    return tylo.kernel(add_one, bounds=bounds)


REFUSED = [
    (view(shape=(128,), strides=(2,)), "'out'.*not C-contiguous"),
    (view(shape=(16, 16), strides=(1, 16)), "'out'.*not C-contiguous"),  # transposed
    (view(shape=(16, 16), strides=(0, 1)), "'out'.*not C-contiguous"),  # broadcast rows
    (view(shape=(256,), strides=(-1,)), "'out'.*not C-contiguous"),  # reversed
    (view(readonly=True), "'out'.*read-only.*readonly=True"),
    (view(ptr=0), "'out'.*null address"),
    (view(ptr=0x1002), "'out'.*0x1002 is not a multiple of 4 bytes"),
]


@pytest.mark.parametrize(("bad", "match"), REFUSED)
def test_a_bad_view_after_good_ones_is_refused_on_every_path(recorder, bad, match):  # noqa: F811
    k = make_kernel()
    launcher = k[1, 32]
    for n in (1, 2, 3):  # checked, reader path, inline path
        launcher(view(), view(0x2000), n)
    assert launcher.inline is not None
    with pytest.raises(tylo.KernelArgumentError, match=match):
        launcher(bad, view(0x2000), 4)
    assert [c[0] for c in recorder] == ["checked", "direct", "direct"]
    launcher(view(0x3000), view(0x2000), 5)  # the launcher still takes the fast path
    assert recorder[-1] == ("direct", (1, 1, 1), (32, 1, 1), 0, (0x3000, 0x2000, 5))
    assert k.stats.compiles == 1


def test_the_opt_ins_launch_strided_and_read_only_arrays(recorder):  # noqa: F811
    k = make_kernel(out_ann=tylo.Ptr(strided=True), x_ann=tylo.Ptr(readonly=True))
    launcher = k[1, 32]
    for n in (1, 2, 3):
        launcher(view(0x1000), view(0x2000, readonly=True), n)
    launcher(view(0x1100, shape=(16, 16), strides=(1, 16)), view(0x2000, readonly=True), 4)
    assert recorder[-1] == ("direct", (1, 1, 1), (32, 1, 1), 0, (0x1100, 0x2000, 4))
    with pytest.raises(tylo.KernelArgumentError, match="'x'.*not C-contiguous"):
        launcher(view(0x1000), view(0x2000, strides=(2,), shape=(64,)), 5)  # x is not strided
    with pytest.raises(tylo.KernelArgumentError, match="'out'.*read-only"):
        launcher(view(0x1000, readonly=True), view(0x2000), 5)  # out is not read-only
    assert len(recorder) == 4 and k.stats.compiles == 1


def test_an_empty_array_may_have_a_null_address(recorder):  # noqa: F811
    # bounds="off": the reader's rule alone (with the default guards, the four stores
    # into an empty out are refused: the test below)
    k = make_kernel(bounds="off")
    launcher = k[1, 32]
    for n in (1, 2, 3):
        launcher(view(), view(0x2000), n)
    launcher(view(0, shape=(0,)), view(0x2000), 4)  # declined inline, accepted by the reader
    assert recorder[-1] == ("direct", (1, 1, 1), (32, 1, 1), 0, (0, 0x2000, 4))


def test_stores_into_an_empty_array_are_refused_before_the_driver(recorder):  # noqa: F811
    launcher = make_kernel()[1, 32]
    launcher(view(), view(0x2000), 3)
    before = len(recorder)
    with pytest.raises(tylo.OutOfBoundsLaunchError, match=r"argument 'out'.*len\(out\) = 0"):
        launcher(view(0, shape=(0,)), view(0x2000), 4)
    assert len(recorder) == before  # nothing reached the driver


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ((view(), view(0x2000), "16"), "argument 'n': got str '16'"),
        ((None, view(0x2000), 4), r"add_one: argument 'out' is None.*item assignment"),
    ],
)
def test_wrong_types_after_good_launches(recorder, args, match):  # noqa: F811
    k = make_kernel()
    launcher = k[1, 32]
    for n in (1, 2, 3):
        launcher(view(), view(0x2000), n)
    with pytest.raises(tylo.KernelArgumentError, match=match):
        launcher(*args)
    assert len(recorder) == 3 and k.stats.compiles == 1


def test_an_annotated_pointer_refuses_a_number(recorder):  # noqa: F811
    """Unannotated, an int is a runtime integer (a new specialization); annotated
    tylo.Ptr, the parameter refuses it at launch."""
    k = make_kernel(x_ann=tylo.Ptr())
    launcher = k[1, 32]
    for n in (1, 2, 3):
        launcher(view(), view(0x2000), n)
    with pytest.raises(tylo.KernelArgumentError, match="argument 'x': .*int is not a device"):
        launcher(view(), 2, 4)
    assert len(recorder) == 3 and k.stats.compiles == 1


def test_none_for_an_optional_array_is_a_static_value(recorder):  # noqa: F811
    """An unannotated None is how an optional array is left out: a specialization of
    its own. Only a kernel that then uses the None blames the argument; a failure that has
    nothing to do with the None stays the TraceError it is."""

    @tylo.kernel
    def maybe_scaled(out, x, scale, n):
        i = tylo.thread_idx.x
        if i < n:
            out[i] = x[i] if scale is None else x[i] * scale[i]

    launcher = maybe_scaled[1, 32]
    launcher(view(), view(0x2000), None, 4)
    launcher(view(), view(0x2000), view(0x3000), 4)
    assert maybe_scaled.stats.compiles == 2 and len(recorder) == 2

    @tylo.kernel
    def broken(out, unused, n):
        out[tylo.thread_idx.x] = undefined_name  # noqa: F821

    with pytest.raises(tylo.TraceError, match="undefined_name"):
        broken[1, 32](view(), None, 4)

    @tylo.kernel
    def two(out, a, b):
        out[tylo.thread_idx.x] = a[0] + b[0]

    with pytest.raises(tylo.KernelArgumentError, match="argument 'a' or 'b' is None"):
        two[1, 32](view(), None, None)
