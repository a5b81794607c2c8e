"""Device arrays: tylo's small :class:`DeviceBuffer` and interop with other frameworks.

:func:`as_device_array` turns anything a kernel may receive into a :class:`DeviceArray`
(pointer, shape, strides in elements, tylo dtype, device ordinal): a DeviceBuffer, any
object with ``__cuda_array_interface__`` (PyTorch CUDA tensors, CuPy, Numba) or
``__dlpack__`` (JAX, PyTorch, CuPy). What cannot be used on the GPU (a CPU tensor, an
unknown dtype, strides that are not whole elements) raises :class:`ArrayError` before any
launch.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tylo.dlpack import read_capsule
from tylo.dtypes import DType, DTypeError, dtype_of
from tylo.errors import ArrayError

__all__ = [
    "NOT_DENSE",
    "READ_ONLY",
    "ArrayError",
    "DeviceArray",
    "DeviceBuffer",
    "array_key",
    "as_device_array",
    "device_clash",
    "internal_overlap",
    "overlap",
    "overlapping_pair",
]

#: :attr:`DeviceArray.flags` bits: what a kernel that reads its pointer as a plain
#: contiguous, writable array must not be given.
NOT_DENSE = 1  # elements are not C-contiguous: strided, transposed, zero or negative strides
READ_ONLY = 2  # the producer marked the memory read-only


@dataclass(frozen=True)
class DeviceArray:
    """A view of device memory: address, shape, strides *in elements*, dtype, device.

    ``owner`` keeps the producing object (tensor, DLPack capsule, buffer) alive while the
    view is in use; it takes no part in equality. ``stream`` is the producer's stream from
    ``__cuda_array_interface__`` v3, when it named one. ``flags`` (computed) holds
    :data:`NOT_DENSE` when the array has elements and they are not C-contiguous (see
    :meth:`is_contiguous`), or its strides do not give one per mode, and :data:`READ_ONLY` when
    ``readonly``: the launch paths test
    one int.
    """

    ptr: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: DType
    device: int | None = None
    readonly: bool = False
    stream: int | None = None
    owner: Any = field(default=None, compare=False, repr=False)
    flags: int = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        _check_fields(self)
        # strides that do not give one per mode say nothing about the layout: not dense
        dense = len(self.strides) == len(self.shape) and (self.size == 0 or self.is_contiguous())
        flags = (0 if dense else NOT_DENSE) | (READ_ONLY if self.readonly else 0)
        object.__setattr__(self, "flags", flags)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.nbytes

    def is_contiguous(self) -> bool:
        """Row-major (C) contiguous, ignoring strides of extent-1 modes: element
        ``(i0, ..., ik)`` is at ``ptr`` plus its row-major rank times the element size."""
        return all(
            n == 1 or s == e for n, s, e in zip(self.shape, self.strides, _c_strides(self.shape))
        )


_I64 = 1 << 63


def _int_arg(x: Any, what: str, lo: int, hi: int) -> int:
    """``x`` as an int in ``[lo, hi)``: ints and numpy integers, never bools (a bool is an
    int in Python, but never a size, stride or address); :class:`ArrayError` otherwise."""
    if type(x) is not int and (
        isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer))
    ):
        raise ArrayError(f"{what} must be an int, got {x!r} ({type(x).__name__})")
    v = int(x)
    if not lo <= v < hi:
        raise ArrayError(f"{what} must be in [{lo}, {hi}), got {v}")
    return v


def _ints(xs: Any, what: str, lo: int, hi: int) -> tuple[int, ...]:
    if type(xs) is tuple and all(type(v) is int and lo <= v < hi for v in xs):
        return xs  # the launch paths' case: checked without a copy
    if not isinstance(xs, (tuple, list)):
        raise ArrayError(f"{what} must be a tuple of ints, got {xs!r} ({type(xs).__name__})")
    return tuple(_int_arg(v, f"{what}[{i}]", lo, hi) for i, v in enumerate(xs))


def _check_fields(a: DeviceArray) -> None:
    """Validate and normalize a :class:`DeviceArray`'s fields (numpy integers become ints;
    a list shape or strides becomes a tuple): :class:`ArrayError` naming the field."""
    set_ = object.__setattr__
    set_(a, "ptr", a.ptr if type(a.ptr) is int and 0 <= a.ptr < 1 << 64
         else _int_arg(a.ptr, "DeviceArray: ptr", 0, 1 << 64))  # fmt: skip
    set_(a, "shape", _ints(a.shape, "DeviceArray: shape", 0, _I64))
    set_(a, "strides", _ints(a.strides, "DeviceArray: strides", -_I64, _I64))
    if not isinstance(a.dtype, DType):
        set_(a, "dtype", _dtype(a.dtype, "DeviceArray: dtype"))
    if a.device is not None and type(a.device) is not int:
        set_(a, "device", _int_arg(a.device, "DeviceArray: device", 0, 1 << 31))
    elif a.device is not None and not 0 <= a.device < 1 << 31:
        raise ArrayError(f"DeviceArray: device must be in [0, 2**31), got {a.device}")
    if type(a.readonly) is not bool:
        raise ArrayError(f"DeviceArray: readonly must be a bool, got {a.readonly!r}")
    if a.stream is not None:
        set_(a, "stream", _int_arg(a.stream, "DeviceArray: stream", 0, 1 << 64))
    if math.prod(a.shape) * a.dtype.nbytes >= _I64:
        raise ArrayError(
            f"DeviceArray: shape {a.shape} of {a.dtype} holds {math.prod(a.shape)} elements, "
            "past any 64-bit byte count"
        )


def _c_strides(shape: Sequence[int]) -> tuple[int, ...]:
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= n
    return tuple(reversed(out))


def _normalize_shape(shape: int | Sequence[int], what: str) -> tuple[int, ...]:
    dims = (shape,) if isinstance(shape, (int, np.integer)) else shape
    ok = isinstance(dims, (tuple, list)) and all(
        isinstance(n, (int, np.integer)) and not isinstance(n, (bool, np.bool_))
        and 0 <= n < _I64 for n in dims
    )  # fmt: skip
    if not ok:
        raise ArrayError(f"{what}: shape {shape!r} must be non-negative ints (not bools)")
    return tuple(int(n) for n in dims)


def _typestr(dtype: DType) -> str:
    # bf16 has no __cuda_array_interface__ typestr; its bits travel as '<u2'.
    return dtype.numpy.str


class DeviceBuffer:
    """A C-contiguous device allocation with a shape and a dtype, freed on close/GC.

    >>> buf = DeviceBuffer.from_numpy(np.arange(4, dtype=np.float32))  # doctest: +SKIP
    >>> buf.to_numpy()                                                 # doctest: +SKIP
    array([0., 1., 2., 3.], dtype=float32)
    """

    def __init__(self, ptr: int, shape: tuple[int, ...], dtype: DType, device: int) -> None:
        """Own the allocation at ``ptr`` (from ``tylo.backend.memory.mem_alloc``; freed on
        close): most
        code wants :meth:`empty`, :meth:`zeros` or :meth:`from_numpy` instead."""
        self._ptr = None  # nothing to free if the checks below refuse
        ptr = _int_arg(ptr, "DeviceBuffer: ptr", 0, 1 << 64)
        shape = _normalize_shape(shape, "DeviceBuffer")
        dtype = _dtype(dtype, "DeviceBuffer")
        device = _int_arg(device, "DeviceBuffer: device", 0, 1 << 31)
        if math.prod(shape) * dtype.nbytes >= _I64:
            raise ArrayError(f"DeviceBuffer: shape {shape} of {dtype} is past any 64-bit size")
        self._ptr = ptr
        self.shape = shape
        self.dtype = dtype
        self.device = device
        self.strides = _c_strides(shape)
        self.nbytes = math.prod(shape) * dtype.nbytes

    @classmethod
    def empty(cls, shape: int | Sequence[int], dtype: Any, *, device: int = 0) -> DeviceBuffer:
        """An uninitialized buffer on device ``device``."""
        from tylo.backend import driver, hostmem, memory

        dims = _normalize_shape(shape, "DeviceBuffer.empty")
        dt = _dtype(dtype, "DeviceBuffer.empty")
        device = _int_arg(device, "DeviceBuffer.empty: device", 0, 1 << 31)
        if math.prod(dims) * dt.nbytes >= _I64:
            raise ArrayError(f"DeviceBuffer.empty: shape {dims} of {dt} is past any 64-bit size")
        if not hostmem.emulating():  # TYLO_INTERPRET=1: host memory, no driver
            driver.current_context(device)
        return cls(memory.mem_alloc(math.prod(dims) * dt.nbytes), dims, dt, device)

    @classmethod
    def zeros(cls, shape: int | Sequence[int], dtype: Any, *, device: int = 0) -> DeviceBuffer:
        """A zero-filled buffer."""
        return cls.empty(shape, dtype, device=device).fill_bytes(0)

    @classmethod
    def from_numpy(cls, array: Any, *, dtype: Any = None, device: int = 0) -> DeviceBuffer:
        """A copy of a host array; ``dtype`` may reinterpret same-size bits (``bf16`` from
        a ``uint16`` array)."""
        try:
            a = np.ascontiguousarray(array)
        except (TypeError, ValueError) as err:  # ragged lists, objects numpy cannot hold
            raise ArrayError(f"DeviceBuffer.from_numpy: not an array: {err}") from None
        dt = _dtype(a.dtype if dtype is None else dtype, "DeviceBuffer.from_numpy")
        if dt.nbytes != a.dtype.itemsize:
            raise ArrayError(
                f"DeviceBuffer.from_numpy: dtype {dt} ({dt.nbytes} B) does not match the "
                f"array's {a.dtype} ({a.dtype.itemsize} B)"
            )
        buf = cls.empty(a.shape, dt, device=device)
        from tylo.backend import memory

        memory.memcpy_htod(buf.ptr, a.reshape(-1).view(np.uint8))  # any dtype, as bytes
        return buf

    @property
    def ptr(self) -> int:
        if self._ptr is None:
            raise ArrayError("DeviceBuffer: used after close()")
        return self._ptr

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def to_numpy(self) -> np.ndarray:
        """A host copy (bf16 comes back as ``uint16`` bits)."""
        from tylo.backend import memory

        out = np.empty(self.shape, dtype=self.dtype.numpy)
        memory.memcpy_dtoh(out, self.ptr, self.nbytes)
        return out

    def fill_bytes(self, value: int) -> DeviceBuffer:
        """Set every byte to ``value`` (0..255); returns self."""
        from tylo.backend import memory

        value = _int_arg(value, "DeviceBuffer.fill_bytes: value", 0, 256)
        memory.memset_d8(self.ptr, value, self.nbytes)
        return self

    def close(self) -> None:
        """Free the memory now (idempotent)."""
        ptr, self._ptr = self._ptr, None
        if ptr:
            from tylo.backend import memory

            memory.mem_free(ptr)

    def __del__(self) -> None:
        # at interpreter shutdown or with a dead context there is nothing left to free
        with contextlib.suppress(Exception):
            self.close()

    def __enter__(self) -> DeviceBuffer:  # noqa: PYI034 (Self needs Python 3.11)
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return {
            "shape": self.shape,
            "typestr": _typestr(self.dtype),
            "data": (self.ptr, False),
            "strides": None,
            "version": 3,
        }

    def __repr__(self) -> str:
        state = "closed" if self._ptr is None else f"ptr=0x{self._ptr:x}"
        return (
            f"DeviceBuffer(shape={self.shape}, dtype={self.dtype}, device={self.device}, {state})"
        )


def _dtype(x: Any, what: str) -> DType:
    try:
        return dtype_of(x)
    except DTypeError as err:
        raise ArrayError(f"{what}: {err}") from None


def as_device_array(obj: Any) -> DeviceArray:
    """View ``obj`` as a :class:`DeviceArray`.

    Accepts a :class:`DeviceArray`, a :class:`DeviceBuffer`, a PyTorch CUDA tensor (read
    directly, without the slower protocol objects), anything with
    ``__cuda_array_interface__`` or with ``__dlpack__`` on a CUDA device.
    """
    if isinstance(obj, DeviceArray):
        return obj
    if isinstance(obj, DeviceBuffer):
        return DeviceArray(obj.ptr, obj.shape, obj.strides, obj.dtype, obj.device, owner=obj)
    if type(obj).__module__.startswith("torch") and hasattr(obj, "data_ptr"):
        return _from_torch(obj)
    if isinstance(obj, np.ndarray):
        raise ArrayError(
            f"as_device_array: a numpy array lives in host memory (shape {obj.shape}); "
            "copy it to the GPU first, e.g. DeviceBuffer.from_numpy(a)"
        )
    problem = ""
    try:
        cai = getattr(obj, "__cuda_array_interface__", None)
    except (TypeError, ValueError, RuntimeError) as err:  # e.g. a dtype the producer refuses
        cai, problem = None, f" (its __cuda_array_interface__ failed: {err})"
    if cai is not None:
        return _from_cai(obj, cai)
    if hasattr(obj, "__dlpack__"):
        return _from_dlpack(obj)
    if problem:
        raise ArrayError(f"as_device_array: cannot read {type(obj).__name__}{problem}")
    raise ArrayError(
        f"as_device_array: {type(obj).__name__} is not a device array; pass a DeviceBuffer, "
        "or an object with __cuda_array_interface__ or __dlpack__ (torch, CuPy, JAX)"
    )


def array_key(obj: Any) -> tuple:
    """A hashable key of what a launch's preparation (tensor maps, strides, checks) can depend
    on in a device array: its address, dtype, shape, strides, device and read-only flag.

    Defining property: two arrays of one kind (torch tensors, or anything else) with equal
    keys view the same memory in the same way, so a preparation made for one is valid for
    the other. Torch tensors are read directly (converting them costs microseconds), without
    keeping a reference; anything else goes through :func:`as_device_array` and raises its
    :class:`ArrayError`. A key holds no reference to the array.
    """
    if type(obj).__module__.startswith("torch") and hasattr(obj, "data_ptr"):
        return ("torch", obj.data_ptr(), obj.dtype, tuple(obj.shape), obj.stride(),
                obj.device.type, obj.device.index)  # fmt: skip
    da = as_device_array(obj)
    return ("array", da.ptr, da.dtype, da.shape, da.strides, da.device, da.readonly)


def device_clash(named: Any) -> str | None:
    """Where ``(name, device)`` pairs name more than one device (None: a device not named):
    ``"a, b on device 0; c on device 1"``, the names in their order, devices ascending;
    None when they name one device or none. What the launcher and the example hosts say
    when the arrays of one launch live on different devices."""
    by_device: dict[int, list[str]] = {}
    try:
        pairs = [tuple(p) for p in named]
    except TypeError:
        pairs = None
    if pairs is None or any(len(p) != 2 for p in pairs):
        raise ArrayError(f"device_clash: expected (name, device) pairs, got {named!r}")
    for name, device in pairs:
        if device is not None:
            device = _int_arg(device, f"device_clash: the device of {name!r}", 0, 1 << 31)
        if device is not None:
            by_device.setdefault(device, []).append(name)
    if len(by_device) < 2:
        return None
    return "; ".join(f"{', '.join(n)} on device {d}" for d, n in sorted(by_device.items()))


def _byte_span(a: DeviceArray) -> tuple[int, int] | None:
    """``[lo, hi)``: the bytes ``a``'s elements lie in (None: no element)."""
    lo = hi = 0
    for n, st in zip(a.shape, a.strides):
        if n == 0:
            return None
        reach = (n - 1) * st
        if reach < 0:
            lo += reach
        else:
            hi += reach
    size = a.dtype.nbytes
    return a.ptr + lo * size, a.ptr + (hi + 1) * size


def _fills_its_span(a: DeviceArray) -> bool:
    """Whether ``a``'s elements are every element of its byte span, each once: the modes
    of extent > 1, ordered by stride, have positive strides 1, n0, n0 n1, ... (a dense
    array in some order of its modes)."""
    expected = 1
    for n, st in sorted(((n, st) for n, st in zip(a.shape, a.strides) if n > 1),
                        key=lambda m: m[1]):  # fmt: skip
        if st != expected:
            return False
        expected *= n
    return True


def overlap(a: Any, b: Any) -> bool | None:
    """Whether arrays ``a`` and ``b`` share memory: False when they certainly do not
    (other devices, byte spans apart, or an empty one), True when they certainly do (the
    spans meet and both fill their spans: dense in some order of their modes), None when
    it is not decided cheaply (strided views whose spans interleave, which may or may not
    share an element).

    Defining property: a True or False answer is the truth about the two sets of element
    bytes. Accepts what :func:`as_device_array` accepts (raising its :class:`ArrayError`).
    """
    x, y = as_device_array(a), as_device_array(b)
    return _overlap(x, _byte_span(x), y, _byte_span(y))


def _overlap(x: DeviceArray, sx: Any, y: DeviceArray, sy: Any) -> bool | None:
    """:func:`overlap` of two views whose byte spans are known."""
    if sx is None or sy is None or sx[1] <= sy[0] or sy[1] <= sx[0]:
        return False
    if x.device is not None and y.device is not None and x.device != y.device:
        return False
    if _fills_its_span(x) and _fills_its_span(y):
        return True
    return None


def internal_overlap(a: Any) -> bool | None:
    """Whether two elements of ``a`` share an address: True when certain (a mode of extent
    > 1 with stride 0, or two modes where stepping one ``s_y / s_x`` times along the other
    lands on the same address: ``s_y`` a multiple of ``s_x`` within its extent), False when
    certainly not (the modes of extent > 1, ordered by absolute stride, each step past
    everything the smaller ones reach), None otherwise.

    Defining property: a True or False answer is the truth about ``a``'s element
    addresses (an output with shared addresses is written by several threads at once).
    Accepts what :func:`as_device_array` accepts."""
    x = as_device_array(a)
    modes = sorted(((abs(st), n) for n, st in zip(x.shape, x.strides) if n > 1))
    if any(n == 0 for n in x.shape) or not modes:
        return False
    if modes[0][0] == 0:
        return True
    for i, (sx, nx) in enumerate(modes):
        for sy, _ in modes[i + 1 :]:
            if sy % sx == 0 and sy // sx <= nx - 1:
                return True
    reach = 0
    for st, n in modes:
        if st <= reach:
            return None
        reach += (n - 1) * st
    return False


def overlapping_pair(outputs: dict[str, Any], inputs: dict[str, Any]) -> tuple[str, str] | None:
    """The first ``(output name, other name)`` whose arrays certainly share memory
    (:func:`overlap` is True): an output against every input and every other output.
    None when no pair certainly does (pairs :func:`overlap` leaves undecided pass). A
    kernel whose outputs may be read by other threads as inputs would return a wrong
    answer without a word: launch paths refuse such a pair."""
    if not isinstance(outputs, dict) or not isinstance(inputs, dict):
        raise ArrayError(
            f"overlapping_pair: outputs and inputs must be dicts of name -> array, got "
            f"{type(outputs).__name__} and {type(inputs).__name__}"
        )
    views = {}
    for name, arr in (*outputs.items(), *inputs.items()):
        if arr is not None and name not in views:
            v = as_device_array(arr)
            views[name] = (v, _byte_span(v))
    outs = [n for n in outputs if n in views]
    for i, name in enumerate(outs):
        x, sx = views[name]
        for other in (*outs[i + 1 :], *(n for n in inputs if n in views and n not in outputs)):
            y, sy = views[other]
            if _overlap(x, sx, y, sy):
                return name, other
    return None


def _from_torch(t: Any) -> DeviceArray:
    if not t.is_cuda:
        raise ArrayError(
            f"as_device_array: torch tensor is on {t.device}, not a CUDA device; "
            "move it with .cuda()"
        )
    dt = _dtype(str(t.dtype), "as_device_array")
    return DeviceArray(
        int(t.data_ptr()), tuple(t.shape), tuple(t.stride()), dt, t.device.index, owner=t
    )


def _from_cai(obj: Any, cai: dict[str, Any]) -> DeviceArray:
    what = f"as_device_array({type(obj).__name__}.__cuda_array_interface__)"
    try:
        shape = _normalize_shape(cai["shape"], what)
        typestr = cai["typestr"]
        ptr, readonly = cai["data"]
    except (KeyError, TypeError, ValueError) as err:
        raise ArrayError(f"{what}: malformed interface {cai!r} ({err})") from None
    if cai.get("mask") is not None:
        raise ArrayError(f"{what}: masked arrays are not supported")
    dt = _dtype(typestr, what)
    byte_strides = cai.get("strides")
    if byte_strides is None:
        strides = _c_strides(shape)
    else:
        strides = _element_strides(tuple(byte_strides), dt, what)
        if len(strides) != len(shape):
            raise ArrayError(f"{what}: {len(strides)} strides for {len(shape)} dimensions")
    stream = cai.get("stream")
    ptr = int(ptr or 0)
    return DeviceArray(
        ptr,
        shape,
        strides,
        dt,
        _pointer_device(ptr, what),
        bool(readonly),
        None if stream is None else int(stream),
        owner=obj,
    )


def _element_strides(byte_strides: tuple[int, ...], dt: DType, what: str) -> tuple[int, ...]:
    bad = [s for s in byte_strides if int(s) % dt.nbytes]
    if bad:
        raise ArrayError(
            f"{what}: byte strides {byte_strides} are not whole multiples of the "
            f"{dt.nbytes}-byte element size of {dt}"
        )
    return tuple(int(s) // dt.nbytes for s in byte_strides)


def _pointer_device(ptr: int, what: str) -> int | None:
    """The device ordinal owning ``ptr``; None for a null pointer or without a GPU (the
    interface's producer vouches for it). With a GPU, an address the driver does not
    know (host memory, a stale or invented pointer) is an :class:`ArrayError`: no kernel
    can read it."""
    from tylo.backend import driver, hostmem
    from tylo.backend.errors import CudaError

    if not ptr:
        return None
    if hostmem.owns(ptr):  # emulated in host memory (TYLO_INTERPRET=1): the interpreter's 0
        return 0

    if driver.device_count() == 0:
        return None
    d = driver._cuda()
    driver._ensure_context()
    attr = d.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
    try:
        return int(driver.check(d.cuPointerGetAttribute(attr, ptr), "cuPointerGetAttribute"))
    except CudaError as err:
        raise ArrayError(
            f"{what}: the CUDA driver does not know address 0x{ptr:x} as device memory "
            f"({err}); pass memory allocated on a GPU (or registered with it)"
        ) from None


def _from_dlpack(obj: Any) -> DeviceArray:
    what = f"as_device_array({type(obj).__name__}.__dlpack__)"
    tensor, readonly, capsule = read_capsule(obj, what)
    dt = _dtype((tensor.dtype.code, tensor.dtype.bits), what)
    ndim = tensor.ndim
    shape = tuple(int(tensor.shape[i]) for i in range(ndim))
    if tensor.strides:
        strides = tuple(int(tensor.strides[i]) for i in range(ndim))
    else:
        strides = _c_strides(shape)
    ptr = (tensor.data or 0) + int(tensor.byte_offset)
    return DeviceArray(
        ptr, shape, strides, dt, int(tensor.device.device_id), readonly, owner=(obj, capsule)
    )
