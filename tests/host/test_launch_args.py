"""Launch arguments match what the kernel reads (no libNVVM, no GPU).

A pointer parameter receives only an address, so a launch refuses an array the kernel would
misread: strided, transposed, zero- or negative-stride (unless ``tylo.Ptr(strided=True)``),
read-only (unless ``tylo.Ptr(readonly=True)``), null with elements, or misaligned for its
elements or the declared ``align``. A wrong-typed argument (``n="16"``, ``out=None``) is a
KernelArgumentError naming the parameter. Each refusal is checked against a brute-force
statement of its claim, on the readers and on both inline launch functions (C and Python),
which may only accept what the readers accept.
"""

from __future__ import annotations

import ctypes
import dataclasses
import decimal
import enum
import fractions
import itertools
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tylo
from tylo.arrays import NOT_DENSE, READ_ONLY, DeviceArray
from tylo.backend import driver, launchex
from tylo.kernel import fastpath
from tylo.kernel.fastpath import Hot, make_inline
from tylo.kernel.launch import Alignment, CompiledKernel
from tylo.kernel.readers import inline_spec, make_reader
from tylo.kernel.spec import ParamKind, Ptr, classify
from tylo.kernel.trace import Binding
from tylo.testing import require_c_launch


@pytest.fixture(autouse=True)
def _as_without_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """These host tests use made-up device addresses; on a machine with a GPU the driver
    would (rightly) refuse them, so they run as on a machine without one (the driver's
    check of addresses is tested in tests/gpu/test_launch_args_gpu.py)."""
    from tylo.backend import driver

    monkeypatch.setattr(driver, "device_count", lambda: 0)


F32, F16 = tylo.f32, tylo.f16
PTR = 0x7F00_0000_0000
DIMS = (1, 1, 1, 32, 1, 1)
ANNOTATIONS = [None, Ptr(strided=True), Ptr(readonly=True), Ptr(strided=True, readonly=True)]


def dense_by_brute_force(shape, strides) -> bool:
    """Every element sits at its row-major rank: what a kernel indexing ``x[i]`` reads."""
    coords = itertools.product(*(range(n) for n in shape))
    return all(
        sum(c * s for c, s in zip(coord, strides)) == rank for rank, coord in enumerate(coords)
    )


def c_strides(shape):
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= n
    return tuple(reversed(out))


@st.composite
def layouts(draw):
    """Shapes of 0-4 modes (extents 0-4) with C strides, or C strides with one mode's
    stride replaced (zero, negative, transposed...), or any strides."""
    extent = st.integers(0, 12).map(lambda k: 0 if k == 0 else 1 + k % 4)  # rarely empty
    shape = tuple(draw(st.lists(extent, max_size=4)))
    strides = list(c_strides(shape))
    how = draw(st.sampled_from(["c", "one", "any"]))
    if how == "one" and shape:
        strides[draw(st.integers(0, len(shape) - 1))] = draw(st.integers(-6, 6))
    elif how == "any":
        strides = [draw(st.integers(-6, 6)) for _ in shape]
    return shape, tuple(strides)


class TorchDType:
    """A stand-in for ``torch.float32``: identity is what the inline path compares."""

    def __str__(self) -> str:
        return "torch.float32"


TORCH_F32 = TorchDType()


class FakeTensor:
    """Enough of a CUDA torch tensor for the launch path, with torch's own contiguity
    rule (extent-1 modes ignored; empty tensors contiguous)."""

    __module__ = "torch.fake"  # the launch path reads torch tensors directly by module

    def __init__(self, shape, strides, ptr=PTR, device=0) -> None:
        self.shape, self._strides, self._ptr = tuple(shape), tuple(strides), ptr
        self.dtype, self.is_cuda = TORCH_F32, True
        self.device = type("Device", (), {"index": device})()
        self._device = device

    def data_ptr(self) -> int:
        return self._ptr

    def stride(self):
        return self._strides

    def get_device(self) -> int:
        return self._device

    def numel(self) -> int:
        n = 1
        for e in self.shape:
            n *= e
        return n

    def is_contiguous(self) -> bool:
        if self.numel() == 0:
            return True
        expected = 1
        for n, s in zip(reversed(self.shape), reversed(self._strides)):
            if n != 1 and s != expected:
                return False
            expected *= n
        return True


class FakeCAI:
    def __init__(self, shape, strides, ptr=PTR, readonly=False) -> None:
        self.__cuda_array_interface__ = {
            "shape": shape,
            "typestr": "<f4",
            "data": (ptr, readonly),
            "strides": tuple(4 * s for s in strides),
            "version": 3,
        }


def carriers(shape, strides, ptr, readonly):
    out = {
        "DeviceArray": DeviceArray(ptr, shape, strides, F32, 0, readonly),
        "CAI": FakeCAI(shape, strides, ptr, readonly),
    }
    if not readonly:  # a tensor has no read-only flag
        out["torch"] = FakeTensor(shape, strides, ptr)
    return out


def refusal(shape, strides, ptr, readonly, annotation) -> str | None:
    """The brute-force verdict: which claim a launch must make, or None to accept."""
    size = 1
    for n in shape:
        size *= n
    spec = annotation or Ptr()
    if not spec.strided and not dense_by_brute_force(shape, strides):
        return "not C-contiguous"
    if readonly and not spec.readonly:
        return "read-only"
    if ptr == 0 and size:
        return "null address"
    return None


# ---------------------------------------------------------------------------- arrays


@settings(max_examples=300, deadline=None)
@given(layouts(), st.booleans())
def test_flags_say_dense_and_read_only_by_brute_force(layout, readonly):
    shape, strides = layout
    a = DeviceArray(PTR, shape, strides, F32, 0, readonly)
    assert bool(a.flags & NOT_DENSE) is not dense_by_brute_force(shape, strides)
    assert bool(a.flags & READ_ONLY) is readonly
    assert a == DeviceArray(PTR, shape, strides, F32, 0, readonly)  # flags take no part


def test_without_a_stride_per_mode_an_array_is_not_dense():
    assert DeviceArray(PTR, (4, 8), (1,), F32, 0).flags & NOT_DENSE
    assert DeviceArray(PTR, (1,), (), F32, 0).flags & NOT_DENSE
    _, read = make_reader(None, DeviceArray(PTR, (8,), (1,), F32, 0), "x")
    with pytest.raises(tylo.KernelArgumentError, match="'x'.*not C-contiguous"):
        read(DeviceArray(PTR, (4, 8), (1,), F32, 0))


@settings(max_examples=150, deadline=None)
@given(
    layouts(),
    st.sampled_from([PTR, 0]),
    st.booleans(),
    st.sampled_from(ANNOTATIONS),
)
def test_readers_refuse_exactly_what_the_kernel_cannot_read(layout, ptr, readonly, ann):
    shape, strides = layout
    want = refusal(shape, strides, ptr, readonly, ann)
    for what, arg in carriers(shape, strides, ptr, readonly).items():
        kind, read = make_reader(ann, arg, "x")
        assert kind is ParamKind.POINTER
        if want is None:
            key, value = read(arg)
            assert value == ptr, what
            continue
        with pytest.raises(tylo.KernelArgumentError, match=want) as err:
            read(arg)
        assert str(err.value).startswith("argument 'x':"), what
        fix = {"not C-contiguous": "strided=True", "read-only": "readonly=True"}.get(want)
        assert fix is None or fix in str(err.value)


def test_a_transposed_view_names_its_shape_and_strides():
    _, read = make_reader(None, DeviceArray(PTR, (4, 8), (1, 4), F32, 0), "a")
    with pytest.raises(tylo.KernelArgumentError, match=r"shape \(4, 8\), strides \(1, 4\)"):
        read(DeviceArray(PTR, (4, 8), (1, 4), F32, 0))


# ---------------------------------------------------------------------------- wrong types


class Level(enum.IntEnum):
    LOW = 1


@dataclasses.dataclass(frozen=True)
class Config:
    tile: int


@pytest.mark.parametrize(
    "value", ["16", b"16", 1j, decimal.Decimal("16"), fractions.Fraction(1, 2)]
)
def test_wrong_typed_arguments_name_the_parameter(value):
    with pytest.raises(tylo.KernelArgumentError, match=r"argument 'n'.*n: tylo.Static"):
        classify(None, value, "n")
    assert classify(tylo.Static, value, "n") is ParamKind.STATIC


@pytest.mark.parametrize(
    "value", [True, None, (1, "a"), frozenset({2}), F16, Level.LOW, Config(4), len]
)
def test_configuration_values_stay_static_unannotated(value):
    assert classify(None, value, "cfg") is ParamKind.STATIC


@pytest.mark.parametrize(
    ("annotation", "value", "match"),
    [
        (tylo.Int(), "16", "expected a Python int"),
        (int, None, "expected a Python int"),
        (tylo.Float(), "2.0", "expected a float"),
        (tylo.Ptr(), None, "NoneType is not a device array"),
        (tylo.Ptr(), 3, "int is not a device array"),
    ],
)
def test_annotated_parameters_refuse_other_types(annotation, value, match):
    with pytest.raises(tylo.KernelArgumentError, match=f"argument 'p'.*{match}"):
        _, read = make_reader(annotation, value, "p")
        read(value)


def add_one(out, x, n):
    i = tylo.thread_idx.x
    if i < n:
        out[i] = x[i] + 1.0


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ((DeviceArray(PTR, (8,), (1,), F32, 0), "16"), "argument 'n': got str '16'"),
        ((DeviceArray(PTR, (8,), (2,), F32, 0), 8), "argument 'out'.*not C-contiguous"),
        ((DeviceArray(PTR, (8,), (0,), F32, 0), 8), "argument 'out'.*not C-contiguous"),
        ((DeviceArray(PTR, (8,), (1,), F32, 0, True), 8), "argument 'out'.*read-only"),
        ((DeviceArray(0, (8,), (1,), F32, 0), 8), "argument 'out'.*null address"),
    ],
)
def test_launches_refuse_before_anything_is_compiled(args, match):
    k = tylo.kernel(add_one)
    out, n = args
    with pytest.raises(tylo.KernelArgumentError, match=match):
        k[1, 32](out, DeviceArray(PTR, (8,), (1,), F32, 0), n)
    assert k.stats.compiles == 0 and k.stats.traces == 0


# ---------------------------------------------------------------------------- alignment

DTYPES = [tylo.i8, F16, tylo.bf16, F32, tylo.f64, tylo.i64]


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(DTYPES),
    st.sampled_from([None, 1, 2, 4, 8, 16, 32]),
    st.one_of(st.integers(0, 1 << 12), st.integers(0, (1 << 64) - 1)),
)
def test_alignment_is_the_larger_of_declared_and_element_size(dtype, declared, address):
    b = Binding("x", ParamKind.POINTER, dtype, check=Ptr(dtype, declared) if declared else None)
    a = Alignment.of(b)
    need = max(declared or 1, dtype.nbytes)
    assert a.align == need
    if address % need == 0:
        a.check("x", address)
        return
    first_bad = min(m for m in (1, 2, 4, 8, 16, 32) if m <= need and address % m)
    assert first_bad <= need  # the brute-force witness of the misalignment
    with pytest.raises(tylo.KernelArgumentError, match=f"argument 'x': address 0x{address:x}"):
        a.check("x", address)


def test_alignment_messages_say_which_assumption_fails():
    elem = Alignment.of(Binding("x", ParamKind.POINTER, F32))
    with pytest.raises(tylo.KernelArgumentError, match="size of its f32 elements"):
        elem.check("x", PTR + 2)
    declared = Alignment.of(Binding("x", ParamKind.POINTER, F32, check=Ptr(align=16)))
    with pytest.raises(tylo.KernelArgumentError, match=r"tylo.Ptr\(align=16\)"):
        declared.check("x", PTR + 4)


# ---------------------------------------------------------------------------- inline paths


@pytest.fixture(params=["python", "c"])
def inline_factory(request, monkeypatch):
    """``make(annotation, warm)``: the inline launch function of a one-pointer kernel,
    made from argument ``warm`` as the launcher would, with the driver call recorded."""
    if request.param == "c":
        require_c_launch()
    monkeypatch.setattr(fastpath, "ACCELERATED", request.param == "c")
    monkeypatch.setattr(driver._tls, "ordinal", 0)
    calls: list[int] = []
    keep = launchex.LAUNCH_EX_TYPE(lambda config, handle, params, extra: calls.append(1) or 0)
    monkeypatch.setattr(launchex, "_launch_ex", keep)

    def make(annotation, warm):
        check = annotation if isinstance(annotation, Ptr) else None
        binding = Binding("x", ParamKind.POINTER, F32, check=check)
        entry = CompiledKernel(
            name="k",
            module=None,
            entry="k",
            bindings=(binding,),
            runtime=(0,),
            block=(32, 1, 1),
            index_bits=64,
            dynamic_shared_bytes=0,
            timings={},
        )
        hot = Hot(entry, 0)
        hot.launch, hot.handle = keep, 0x1000
        record = launchex.LaunchRecord(entry.argpack().signature)
        spec = inline_spec(make_reader(annotation, warm, "x")[1], warm)
        fn = make_inline(hot, record, threading.get_ident(), [spec])

        def values():
            if isinstance(fn, fastpath._accel.InlineLaunch if fastpath._accel else ()):
                return int.from_bytes(fn.packed()[0], "little")
            return record.values()[0]

        return fn, values

    make.calls = calls
    make.path = request.param
    return make


# the fixture makes a fresh inline function per call and counts launches relatively
@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    layouts(),
    st.sampled_from([PTR, PTR + 4, PTR + 2, 0]),
    st.booleans(),
    st.sampled_from(ANNOTATIONS),
    st.sampled_from(["DeviceArray", "torch"]),
)
def test_inline_launches_accept_only_what_the_readers_accept(
    inline_factory, layout, ptr, readonly, ann, carrier
):
    """After a contiguous array, the inline function sees a view of the same type: it
    launches exactly when the reader path would accept the view and its alignment, and
    passes the view's address; otherwise it launches nothing (the reader path decides)."""
    shape, strides = layout
    if carrier == "torch":
        readonly = False
        warm = FakeTensor((8,), (1,))
        view = FakeTensor(shape, strides, ptr)
    else:
        warm = DeviceArray(PTR, (8,), (1,), F32, 0)
        view = DeviceArray(ptr, shape, strides, F32, 0, readonly)
    fn, values = inline_factory(ann, warm)
    assert fn(DIMS, (warm,), 0, None) is True
    before = len(inline_factory.calls)
    accept = refusal(shape, strides, ptr, readonly, ann) is None and ptr != 0 and ptr % 4 == 0
    assert fn(DIMS, (view,), 0, None) is accept
    assert len(inline_factory.calls) == before + accept
    if accept:
        assert values() == ptr


def test_inline_launches_refuse_other_dtypes_and_devices(inline_factory):
    fn, _ = inline_factory(None, DeviceArray(PTR, (8,), (1,), F32, 0))
    assert fn(DIMS, (DeviceArray(PTR, (8,), (1,), F16, 0),), 0, None) is False
    assert fn(DIMS, (DeviceArray(PTR, (8,), (1,), F32, 1),), 0, None) is False
    assert fn(DIMS, (DeviceArray(PTR, (8,), (1,), F32, 0),), 0, None) is True


def test_the_c_inline_launch_rejects_unknown_refusal_bits():
    accel = require_c_launch()
    noop = ctypes.cast(ctypes.pythonapi.PyGILState_Check, ctypes.c_void_p).value
    with pytest.raises(ValueError, match="malformed"):
        accel.InlineLaunch(
            noop,
            1,
            0,
            0,
            driver._tls,
            lambda err: None,
            None,
            {},
            0,
            49152,
            ((0, DeviceArray, F32, 0, None, 4),),
            ((0, "Q", 56),),
            (),
            (),
            64,
        )


def test_an_address_the_driver_does_not_know_is_refused(monkeypatch):
    """With a GPU, a ``__cuda_array_interface__`` address the driver cannot place (host
    memory, a stale pointer) is refused; without one the producer is trusted."""
    from types import SimpleNamespace

    from tylo.backend.errors import CudaError

    def unknown(result, what):
        raise CudaError(what, 1, "CUDA_ERROR_INVALID_VALUE")

    attrs = SimpleNamespace(CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL=9)
    fake = SimpleNamespace(CUpointer_attribute=attrs, cuPointerGetAttribute=lambda a, p: (1, 0))
    monkeypatch.setattr(driver, "_cuda", lambda: fake)
    monkeypatch.setattr(driver, "_ensure_context", lambda: None)
    monkeypatch.setattr(driver, "check", unknown)
    monkeypatch.setattr(driver, "device_count", lambda: 0)
    _, read = make_reader(None, FakeCAI((8,), (1,)), "x")
    assert read(FakeCAI((8,), (1,))) == ((F32.name, None), PTR)
    monkeypatch.setattr(driver, "device_count", lambda: 1)
    with pytest.raises(tylo.KernelArgumentError, match=f"'x'.*does not know address 0x{PTR:x}"):
        read(FakeCAI((8,), (1,)))
