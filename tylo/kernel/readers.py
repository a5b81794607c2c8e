"""Argument readers: per (parameter, argument type), the specialization key part and the
value a launch passes.

A reader returns ``(key, value)``: ``(dtype, device)`` and ``data_ptr()`` for a torch
tensor, ``int`` and the int for a runtime integer, ``(type, value)`` and the value for a
static argument... The launcher looks readers up by ``type(arg)`` and builds the
specialization key from the key parts. A pointer's reader also refuses an array the
kernel cannot read through its address alone (:func:`check_array`: strided or read-only
unless the parameter's ``tylo.Ptr`` allows it, null with elements), naming the parameter.

Each reader also says how to *inline* it (:func:`inline_spec`): what an argument must be
(its type, dtype, device or value) to give the same key as the one seen, and where its
value comes from. The launch fast path (:mod:`tylo.kernel.fastpath`) turns these into one
launch function per specialization, so a repeated launch does identity tests and
attribute reads instead of calling a reader per argument.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tylo.kernel.errors import KernelArgumentError
from tylo.kernel.spec import ParamKind, Ptr, classify, static_key

__all__ = [
    "TENSOR_MAP_BYTES",
    "ArgSpec",
    "Reader",
    "check_array",
    "inline_spec",
    "make_reader",
    "refusals",
    "tensor_map_device",
]

Reader = Callable[[Any], tuple[Any, Any]]

#: The size of an encoded ``CUtensorMap`` (CUDA driver API, "Tensor Map Object Management":
#: an opaque 64-byte-aligned object of 128 bytes), the by-value parameter a tensor map is.
TENSOR_MAP_BYTES = 128


@dataclass(frozen=True)
class ArgSpec:
    """How the inline launch path reads one argument like the one seen.

    ``kind``: ``"buffer"`` (a tylo DeviceArray: ``dtype`` is its dtype object, ``device``
    its ordinal, the value ``.ptr``), ``"owned"`` (a tylo DeviceBuffer: the same, read
    through ``._ptr`` where that is faster, ``.ptr`` once it is closed), ``"torch"`` (a
    tensor: ``dtype``, ``get_device()``, ``data_ptr()``), ``"int"`` (an exact int),
    ``"float"`` (the value ``float(arg)``), ``"static"`` (an argument equal to
    ``value``) or ``"tensor_map"`` (a TMA tensor map: ``value`` is its plan (the same or an equal
    one),
    ``device`` the device of its array, :func:`tensor_map_device`; the value its ``data``,
    which must be ``bytes`` of exactly :data:`TENSOR_MAP_BYTES`). ``type`` is the
    argument's exact type. ``refuse``: the
    :data:`~tylo.arrays.DeviceArray.flags` bits an array must not have (a DeviceArray's
    ``flags``; for a tensor, :data:`~tylo.arrays.NOT_DENSE` asks ``is_contiguous()``);
    a null pointer is never inlined. The guard these imply holds exactly when the reader
    would give the same specialization key and accept the array (or is stricter: a dtype
    object of the same name that is not the same object fails it and takes the reader
    path, which decides).
    """

    kind: str
    type: type
    dtype: Any = None
    device: Any = None
    value: Any = None
    refuse: int = 0


def _read_int(a: Any) -> tuple[Any, Any]:
    return int, a


def _read_float(a: Any) -> tuple[Any, Any]:
    return float, float(a)


_read_int.inline = lambda a: ArgSpec("int", int)  # type: ignore[attr-defined]
_read_float.inline = lambda a: ArgSpec("float", type(a))  # type: ignore[attr-defined]


def inline_spec(reader: Reader, arg: Any) -> ArgSpec | None:
    """How to inline ``reader`` for arguments like ``arg`` (None: it cannot be inlined,
    e.g. an array read through DLPack, so launches with it stay on the reader path)."""
    make = getattr(reader, "inline", None)
    if make is not None:
        return make(arg)
    if getattr(reader, "static", False):
        types, value = reader(arg)[0]  # the key: (types, value)
        if not isinstance(types, type):  # a container: its items' types count too
            return None  # (the reader path compares whole keys)
        return ArgSpec("static", types, value=value)
    return None


def refusals(annotation: Any) -> int:
    """The :class:`~tylo.arrays.DeviceArray` ``flags`` a pointer parameter refuses:
    :data:`~tylo.arrays.NOT_DENSE` unless annotated ``tylo.Ptr(strided=True)``,
    :data:`~tylo.arrays.READ_ONLY` unless ``tylo.Ptr(readonly=True)``."""
    from tylo.arrays import NOT_DENSE, READ_ONLY

    spec = annotation if isinstance(annotation, Ptr) else Ptr()
    return (0 if spec.strided else NOT_DENSE) | (0 if spec.readonly else READ_ONLY)


def check_array(name: str, arr: Any, refuse: int) -> None:
    """Raise :class:`KernelArgumentError` unless the :class:`~tylo.arrays.DeviceArray`
    ``arr`` may be passed to pointer parameter ``name``: none of the ``refuse`` flags,
    and a non-null address unless it has no elements."""
    from tylo.arrays import NOT_DENSE, READ_ONLY

    if arr.flags & refuse & NOT_DENSE:
        raise KernelArgumentError(
            f"argument {name!r}: the array (shape {arr.shape}, strides {arr.strides} in "
            f"elements) is not C-contiguous, but the kernel receives only its address and "
            "reads it as a contiguous array; pass a contiguous copy (e.g. "
            "x.contiguous()), or annotate the parameter tylo.Ptr(strided=True) if the "
            "kernel takes the strides as arguments"
        )
    if arr.flags & refuse & READ_ONLY:
        raise KernelArgumentError(
            f"argument {name!r}: the array is marked read-only, and tylo does not know "
            "that the kernel never writes it; pass a writable array, or annotate the "
            "parameter tylo.Ptr(readonly=True) if the kernel only reads it"
        )
    if not arr.ptr and arr.size:
        raise KernelArgumentError(
            f"argument {name!r}: the array has {arr.size} elements (shape {arr.shape}) "
            "but a null address; pass an allocated array"
        )


def _owned_reader(name: str) -> Reader:
    """A tylo DeviceBuffer: C-contiguous and writable by construction."""

    def read(a: Any) -> tuple[Any, Any]:
        p = a.ptr
        if not p and a.size:
            check_array(name, _as_array(name, a), 0)
        return (a.dtype.name, a.device), p

    read.inline = lambda a: ArgSpec(  # type: ignore[attr-defined]
        "owned", type(a), a.dtype, a.device
    )
    return read


def _view_reader(name: str, refuse: int) -> Reader:
    """A tylo DeviceArray: its precomputed ``flags`` say what it is."""

    def read(a: Any) -> tuple[Any, Any]:
        if a.flags & refuse or not a.ptr and a.size:
            check_array(name, a, refuse)
        return (a.dtype.name, a.device), a.ptr

    read.inline = lambda a: ArgSpec(  # type: ignore[attr-defined]
        "buffer", type(a), a.dtype, a.device, refuse=refuse
    )
    return read


def _torch_reader(name: str, refuse: int) -> Reader:
    """A torch tensor, read directly: ``is_contiguous()`` unless the parameter is strided
    (a tensor has no read-only flag)."""
    from tylo.arrays import NOT_DENSE

    dense = bool(refuse & NOT_DENSE)

    def read(a: Any) -> tuple[Any, Any]:
        p = a.data_ptr()
        if dense and not a.is_contiguous() or not p and a.numel():
            check_array(name, _as_array(name, a), refuse)
        return (a.dtype, a.get_device()), p

    read.inline = lambda a: ArgSpec(  # type: ignore[attr-defined]
        "torch", type(a), a.dtype, a.get_device(), refuse=refuse & NOT_DENSE
    )
    return read


def _as_array(name: str, a: Any) -> Any:
    from tylo.arrays import ArrayError, as_device_array

    try:
        return as_device_array(a)
    except ArrayError as err:
        raise KernelArgumentError(f"argument {name!r}: {err}") from None


def _array_reader(name: str, refuse: int) -> Reader:
    def read(a: Any) -> tuple[Any, Any]:
        arr = _as_array(name, a)
        check_array(name, arr, refuse)
        return (arr.dtype.name, arr.device), arr.ptr

    return read


def _tensor_map_reader(name: str) -> Reader:
    """A TMA tensor map: the key is its plan and the device of the array it was encoded
    for (so a launch whose maps and pointers name different devices is specialized, and
    refused, afresh), the value its 128 encoded bytes, exactly (any other value is
    refused here, before a launch record's ``"128s"`` could pad or truncate it). Inlined
    as a ``"tensor_map"`` :class:`ArgSpec` when the map names its array's device."""

    def read(a: Any) -> tuple[Any, Any]:
        data = getattr(a, "data", None)
        if type(data) is not bytes or len(data) != TENSOR_MAP_BYTES:
            raise KernelArgumentError(
                f"argument {name!r}: a tensor map parameter takes a tylo.nvgpu.tma.TensorMap "
                f"(encoded for an array), got {type(a).__name__}"
            )
        return ("tensor_map", a.plan, tensor_map_device(a)), data

    read.inline = _inline_tensor_map  # type: ignore[attr-defined]
    return read


def _inline_tensor_map(a: Any) -> ArgSpec | None:
    device = tensor_map_device(a)
    if type(device) is not int:  # no array device to test: the reader path keys it
        return None
    return ArgSpec("tensor_map", type(a), device=device, value=a.plan)


def tensor_map_device(a: Any) -> int | None:
    """The device of the array a tensor map was encoded for (None where it names none)."""
    return getattr(getattr(a, "array", None), "device", None)


def _static_reader(name: str) -> Reader:
    def read(a: Any) -> tuple[Any, Any]:
        return static_key(name, a), a

    read.static = True  # type: ignore[attr-defined]
    return read


def make_reader(annotation: Any, arg: Any, name: str) -> tuple[ParamKind, Reader]:
    """The reader for arguments of ``type(arg)`` given to parameter ``name``."""
    kind = classify(annotation, arg, name)
    t = type(arg)
    if kind is ParamKind.STATIC:
        return kind, _static_reader(name)
    if kind is ParamKind.INT:
        if t is bool or not _is_int(arg):
            raise KernelArgumentError(
                f"argument {name!r}: expected a Python int (a runtime integer), got "
                f"{t.__name__} {arg!r}"
            )
        return kind, (_read_int if t is int else lambda a: (int, int(a)))
    if kind is ParamKind.TENSOR_MAP:
        return kind, _tensor_map_reader(name)
    if kind is ParamKind.FLOAT:
        if t is bool or not isinstance(arg, (int, float)) and not hasattr(arg, "__float__"):
            raise KernelArgumentError(
                f"argument {name!r}: expected a float, got {t.__name__} {arg!r}"
            )
        return kind, _read_float
    # pointers
    from tylo.arrays import DeviceArray, DeviceBuffer

    refuse = refusals(annotation)
    if t is DeviceBuffer:
        return kind, _owned_reader(name)
    if t is DeviceArray:
        return kind, _view_reader(name, refuse)
    if t.__module__.startswith("torch") and hasattr(arg, "data_ptr"):
        return kind, _torch_reader(name, refuse)
    return kind, _array_reader(name, refuse)


def _is_int(x: Any) -> bool:
    try:
        operator.index(x)
        return True
    except TypeError:
        return False
