"""as_device_array with fake producers of __cuda_array_interface__ and DLPack (no GPU).

The DLPack producers below build real capsules with ctypes, laid out as dlpack.h says, so
the parser reads the same bytes it would read from PyTorch or JAX.
"""

from __future__ import annotations

import ctypes
import gc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tylo.arrays import (
    ArrayError,
    DeviceArray,
    array_key,
    as_device_array,
    device_clash,
    internal_overlap,
    overlap,
    overlapping_pair,
)
from tylo.dlpack import _DLManagedTensor, _DLManagedTensorVersioned
from tylo.dtypes import bf16, f16, f32, i8, i64, u8
from tylo.errors import TyloError


@pytest.fixture(autouse=True)
def _as_without_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """These host tests use made-up device addresses; on a machine with a GPU the driver
    would (rightly) refuse them, so they run as on a machine without one (the driver's
    check of addresses is tested in tests/gpu/test_launch_args_gpu.py)."""
    from tylo.backend import driver

    monkeypatch.setattr(driver, "device_count", lambda: 0)


PTR = 0x7F00_0000_0000


class FakeCAI:
    def __init__(self, **overrides) -> None:
        self.__cuda_array_interface__ = {
            "shape": (4, 8),
            "typestr": "<f4",
            "data": (PTR, False),
            "version": 3,
            "strides": None,
            **overrides,
        }


def test_cai_contiguous() -> None:
    obj = FakeCAI()
    a = as_device_array(obj)
    assert (a.ptr, a.shape, a.strides, a.dtype) == (PTR, (4, 8), (8, 1), f32)
    assert a.is_contiguous() and a.size == 32 and a.nbytes == 128 and a.ndim == 2
    assert a.owner is obj and not a.readonly and a.stream is None


def test_cai_byte_strides_become_element_strides() -> None:
    a = as_device_array(FakeCAI(strides=(4, 16), typestr="<f4"))  # column-major
    assert a.strides == (1, 4) and not a.is_contiguous()
    b = as_device_array(FakeCAI(shape=(3,), strides=(-2,), typestr="<f2"))
    assert b.strides == (-1,) and b.dtype == f16


def test_cai_readonly_stream_and_types() -> None:
    a = as_device_array(FakeCAI(data=(PTR, True), stream=7, typestr="|i1", shape=(5,)))
    assert a.readonly and a.stream == 7 and a.dtype == i8
    assert as_device_array(FakeCAI(typestr="<i8")).dtype == i64
    assert as_device_array(FakeCAI(typestr="|u1")).dtype == u8


def test_cai_non_integral_strides() -> None:
    with pytest.raises(ArrayError, match=r"not whole multiples of the 4-byte"):
        as_device_array(FakeCAI(strides=(6, 4)))


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"typestr": "<c8"}, "complex64"),
        ({"typestr": "|O"}, "unknown dtype name '\\|O'"),
        ({"mask": object()}, "masked"),
        ({"shape": (4, -1)}, "non-negative"),
        ({"strides": (4,)}, "1 strides for 2 dimensions"),
    ],
)
def test_cai_rejections_are_typed(overrides, match) -> None:
    with pytest.raises(ArrayError, match=match) as info:
        as_device_array(FakeCAI(**overrides))
    assert isinstance(info.value, TyloError)


def test_cai_malformed() -> None:
    obj = FakeCAI()
    del obj.__cuda_array_interface__["data"]
    with pytest.raises(ArrayError, match="malformed"):
        as_device_array(obj)


def test_not_an_array() -> None:
    with pytest.raises(ArrayError, match="numpy array lives in host memory"):
        as_device_array(np.zeros(3))
    with pytest.raises(ArrayError, match="not a device array"):
        as_device_array([1, 2, 3])


def test_device_array_passthrough_and_equality() -> None:
    a = DeviceArray(PTR, (2,), (1,), f32, 0, owner=object())
    assert as_device_array(a) is a
    assert a == DeviceArray(PTR, (2,), (1,), f32, 0, owner=object())  # owner not compared


# ---------------------------------------------------------------------------- DLPack

_pythonapi_new = ctypes.pythonapi.PyCapsule_New
_pythonapi_new.restype = ctypes.py_object
_pythonapi_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
NAMES = {"dltensor": ctypes.c_char_p(b"dltensor"), "v": ctypes.c_char_p(b"dltensor_versioned")}


class FakeDLPack:
    """A producer of DLPack capsules (legacy or versioned) over fake device memory."""

    def __init__(
        self,
        shape=(2, 3),
        strides=None,
        code=2,
        bits=32,
        lanes=1,
        device=(2, 1),
        versioned=False,
        readonly=False,
        byte_offset=0,
        advertise_device=True,
    ) -> None:
        self.ndim = len(shape)
        self.shape = (ctypes.c_int64 * self.ndim)(*shape)
        self.strides = (ctypes.c_int64 * self.ndim)(*strides) if strides else None
        self.managed = _DLManagedTensorVersioned() if versioned else _DLManagedTensor()
        if versioned:
            self.managed.version_major, self.managed.version_minor = 1, 0
            self.managed.flags = 1 if readonly else 0
        t = self.managed.dl_tensor
        t.data = PTR
        t.device.device_type, t.device.device_id = device
        t.ndim = self.ndim
        t.dtype.code, t.dtype.bits, t.dtype.lanes = code, bits, lanes
        t.shape = self.shape
        if self.strides is not None:
            t.strides = self.strides
        t.byte_offset = byte_offset
        self.versioned = versioned
        self.device = device
        self.calls: list[dict] = []
        if not advertise_device:
            self.__dlpack_device__ = None  # type: ignore[assignment]

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, **kwargs):
        self.calls.append(kwargs)
        if not self.versioned and "max_version" in kwargs:
            raise TypeError("__dlpack__() got an unexpected keyword argument 'max_version'")
        name = NAMES["v" if self.versioned else "dltensor"]
        return _pythonapi_new(ctypes.addressof(self.managed), name, None)


def test_dlpack_legacy_capsule() -> None:
    src = FakeDLPack()
    a = as_device_array(src)
    assert (a.ptr, a.shape, a.strides, a.dtype, a.device) == (PTR, (2, 3), (3, 1), f32, 1)
    assert src.calls == [{"max_version": (1, 0)}, {}]  # retried without max_version
    assert a.owner[0] is src


def test_dlpack_versioned_strided_readonly_offset() -> None:
    src = FakeDLPack(
        shape=(4, 5),
        strides=(1, 8),
        versioned=True,
        readonly=True,
        byte_offset=64,
        code=4,
        bits=16,
    )
    a = as_device_array(src)
    assert a.ptr == PTR + 64 and a.strides == (1, 8) and a.readonly and a.dtype == bf16
    assert src.calls == [{"max_version": (1, 0)}]


def test_dlpack_keeps_capsule_alive() -> None:
    a = as_device_array(FakeDLPack())
    gc.collect()
    capsule = a.owner[1]
    assert ctypes.pythonapi.PyCapsule_IsValid(ctypes.py_object(capsule), b"dltensor")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"device": (1, 0)}, "lives on CPU, not a CUDA device"),
        ({"device": (10, 0)}, "lives on ROCM"),
        ({"device": (1, 0), "advertise_device": False}, "lives on CPU"),
        ({"code": 5, "bits": 64}, "no tylo dtype"),  # complex
        ({"lanes": 4}, "vector dtypes"),
    ],
)
def test_dlpack_rejections_are_typed(kwargs, match) -> None:
    with pytest.raises(ArrayError, match=match):
        as_device_array(FakeDLPack(**kwargs))


def test_dlpack_managed_memory_is_accepted() -> None:
    assert as_device_array(FakeDLPack(device=(13, 0))).device == 0


class FakeTorchTensor:
    """Stands in for torch.Tensor on the fast path (matched by module name)."""

    __module__ = "torch"

    def __init__(self, is_cuda=True) -> None:
        self.is_cuda = is_cuda
        self.dtype = "torch.bfloat16"
        self.shape = (3, 4)
        attrs = {"index": 0, "type": "cuda" if is_cuda else "cpu", "__str__": lambda s: "cpu"}
        self.device = type("Dev", (), attrs)()

    def data_ptr(self) -> int:
        return PTR

    def stride(self):
        return (1, 3)


def test_torch_fast_path() -> None:
    a = as_device_array(FakeTorchTensor())
    assert (a.ptr, a.shape, a.strides, a.dtype, a.device) == (PTR, (3, 4), (1, 3), bf16, 0)
    with pytest.raises(ArrayError, match=r"on cpu, not a CUDA device"):
        as_device_array(FakeTorchTensor(is_cuda=False))


class RefusingProducer:
    """Like a torch bf16 tensor: the interface property raises instead of answering."""

    @property
    def __cuda_array_interface__(self):
        raise TypeError("dtype bfloat16 is not supported by __cuda_array_interface__")


class RefusingDLPack(RefusingProducer):
    def __dlpack__(self, **kwargs):
        raise BufferError("cannot export a tensor that requires grad")


def test_producer_failures_become_array_errors() -> None:
    with pytest.raises(ArrayError, match=r"RefusingProducer.*bfloat16 is not supported"):
        as_device_array(RefusingProducer())
    with pytest.raises(ArrayError, match="refused to export: cannot export a tensor"):
        as_device_array(RefusingDLPack())


_FIELDS = st.tuples(
    st.sampled_from([PTR, PTR + 256, 0]),
    st.sampled_from([(4, 8), (8, 4), (32,), ()]),
    st.sampled_from([bf16, f16, f32]),
    st.booleans(),
    st.sampled_from([0, 1, None]),
)


@settings(max_examples=200, deadline=None)
@given(a=_FIELDS, b=_FIELDS, transpose=st.booleans())
def test_array_key_is_equal_exactly_for_the_same_view(a, b, transpose) -> None:
    """Defining property: two arrays' keys are equal iff address, dtype, shape, strides,
    device and read-only flag are (the owner takes no part), and a key is hashable."""

    def make(f, owner):
        ptr, shape, dt, ro, dev = f
        strides = tuple(reversed(shape)) if transpose and len(shape) == 2 else None
        strides = strides or tuple(int(np.prod(shape[i + 1 :])) for i in range(len(shape)))
        return DeviceArray(ptr, shape, strides, dt, dev, readonly=ro, owner=owner)

    x, y = make(a, object()), make(b, object())
    same = (x.ptr, x.dtype, x.shape, x.strides, x.device, x.readonly) == (
        y.ptr, y.dtype, y.shape, y.strides, y.device, y.readonly)  # fmt: skip
    assert (array_key(x) == array_key(y)) == same
    assert hash(array_key(x)) == hash(array_key(make(a, None)))
    assert all(part is not x.owner for part in array_key(x))


def test_array_key_of_torch_and_other_producers() -> None:
    t = FakeTorchTensor()
    assert array_key(t) == ("torch", PTR, "torch.bfloat16", (3, 4), (1, 3), "cuda", 0)
    assert t not in array_key(t)  # no reference to the tensor
    cpu = array_key(FakeTorchTensor(is_cuda=False))
    assert cpu != array_key(t) and cpu[5] == "cpu"  # a CPU tensor's key is not a CUDA one's
    assert array_key(FakeCAI()) == array_key(FakeCAI()) != array_key(FakeCAI(data=(PTR, True)))
    assert array_key(FakeCAI(strides=(4, 16))) != array_key(FakeCAI())
    with pytest.raises(ArrayError, match="host memory"):
        array_key(np.zeros(3))
    with pytest.raises(ArrayError, match="not a device array"):
        array_key([1, 2])


def _element_bytes(a: DeviceArray) -> set[int]:
    """Every byte of every element of ``a``, by enumeration."""
    out = set()
    for idx in np.ndindex(*a.shape):
        at = a.ptr + sum(i * s for i, s in zip(idx, a.strides)) * a.dtype.nbytes
        out.update(range(at, at + a.dtype.nbytes))
    return out


_SMALL = st.integers(0, 4)


@st.composite
def _views(draw):
    ndim = draw(st.integers(0, 3))
    shape = tuple(draw(_SMALL) for _ in range(ndim))
    strides = tuple(draw(st.integers(-6, 12)) for _ in range(ndim))
    dt = draw(st.sampled_from([bf16, f32, u8]))
    ptr = 4096 + draw(st.integers(0, 64))
    dense = draw(st.booleans())
    if dense:  # a dense array in a random order of its modes
        order = draw(st.permutations(range(ndim)))
        strides, step = [0] * ndim, 1
        for m in order:
            strides[m] = step
            step *= max(shape[m], 1)
        strides = tuple(strides)
    return DeviceArray(ptr, shape, strides, dt, draw(st.sampled_from([0, 0, 0, 1, None])))


@settings(max_examples=600, deadline=None)
@given(a=_views(), b=_views())
def test_overlap_answers_are_the_truth(a, b):
    """A True or False answer matches the element bytes enumerated; None only where both
    spans meet and one of the arrays does not fill its span."""
    got = overlap(a, b)
    other_device = a.device is not None and b.device is not None and a.device != b.device
    truth = not other_device and bool(_element_bytes(a) & _element_bytes(b))
    if got is None:
        assert not other_device
    else:
        assert got == truth, (a, b)
    assert overlap(b, a) == got  # symmetric


def test_overlap_of_common_cases():
    x = DeviceArray(PTR, (4, 8), (8, 1), f32, 0)
    assert overlap(x, x) is True
    assert overlap(x, DeviceArray(PTR + 128, (4, 8), (8, 1), f32, 0)) is False  # adjacent
    assert overlap(x, DeviceArray(PTR + 124, (4, 8), (8, 1), f32, 0)) is True  # one element
    assert overlap(x, DeviceArray(PTR, (8, 4), (1, 8), f32, 0)) is True  # the transpose
    evens = DeviceArray(PTR, (16,), (2,), f32, 0)
    odds = DeviceArray(PTR + 4, (16,), (2,), f32, 0)
    assert overlap(evens, odds) is None  # interleaved: not decided cheaply (in truth: no)
    assert overlap(x, DeviceArray(PTR, (0, 8), (8, 1), f32, 0)) is False  # empty
    assert overlap(x, DeviceArray(PTR, (4, 8), (8, 1), f32, 1)) is False  # other device
    with pytest.raises(ArrayError, match="host memory"):
        overlap(x, np.zeros(3))


def test_overlapping_pair_names_the_first_certain_pair():
    a = DeviceArray(PTR, (8,), (1,), f32, 0)
    b = DeviceArray(PTR + 64, (8,), (1,), f32, 0)
    o = DeviceArray(PTR + 128, (8,), (1,), f32, 0)
    assert overlapping_pair({"o": o}, {"a": a, "b": b}) is None
    assert overlapping_pair({"o": b}, {"a": a, "b": b}) == ("o", "b")
    assert overlapping_pair({"o": o, "l": o}, {"a": a}) == ("o", "l")  # two outputs
    assert overlapping_pair({"o": o, "l": None}, {"a": a, "k": None}) is None
    evens = DeviceArray(PTR, (8,), (2,), f32, 0)
    odds = DeviceArray(PTR + 4, (8,), (2,), f32, 0)
    assert overlapping_pair({"o": evens}, {"a": odds}) is None  # undecided: passes


@st.composite
def _strided(draw):
    ndim = draw(st.integers(0, 3))
    shape = tuple(draw(st.integers(0, 5)) for _ in range(ndim))
    strides = tuple(draw(st.integers(-9, 9)) for _ in range(ndim))
    return DeviceArray(4096, shape, strides, draw(st.sampled_from([bf16, f32])), 0)


@settings(max_examples=800, deadline=None)
@given(a=_strided())
def test_internal_overlap_answers_are_the_truth(a):
    """True or False matches an enumeration of the element offsets (None: undecided)."""
    offsets = [sum(i * s for i, s in zip(idx, a.strides)) for idx in np.ndindex(*a.shape)]
    truth = len(set(offsets)) < len(offsets)
    got = internal_overlap(a)
    if got is not None:
        assert got == truth, a


def test_internal_overlap_of_common_cases():
    assert internal_overlap(DeviceArray(PTR, (4, 8), (8, 1), f32, 0)) is False
    assert internal_overlap(DeviceArray(PTR, (4, 8), (0, 1), f32, 0)) is True  # broadcast
    assert internal_overlap(DeviceArray(PTR, (4, 8), (4, 1), f32, 0)) is True  # rows meet
    assert internal_overlap(DeviceArray(PTR, (1, 8), (0, 1), f32, 0)) is False  # extent 1
    assert internal_overlap(DeviceArray(PTR, (3, 2), (2, 3), f32, 0)) is None  # 0,2,4 / 3,5,7
    assert internal_overlap(DeviceArray(PTR, (0, 8), (0, 0), f32, 0)) is False  # empty


def test_device_clash_names_each_device_s_arrays():
    assert device_clash([("a", 0), ("b", None), ("c", 0)]) is None
    assert device_clash([]) is None
    assert device_clash([("c", 1), ("a", 0), ("b", 1)]) == "a on device 0; c, b on device 1"
