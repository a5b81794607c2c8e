"""Argument readers: per (parameter, argument type), the specialization key part and the
value a launch passes.

A reader returns ``(key, value)``: ``(dtype, device)`` and ``data_ptr()`` for a torch
tensor, ``int`` and the int for a runtime integer, ``(type, value)`` and the value for a
static argument... The launcher looks readers up by ``type(arg)`` and builds the
specialization key from the key parts.

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
from tylo.kernel.spec import ParamKind, classify, static_key

__all__ = ["ArgSpec", "Reader", "inline_spec", "make_reader"]

Reader = Callable[[Any], tuple[Any, Any]]


@dataclass(frozen=True)
class ArgSpec:
    """How the inline launch path reads one argument like the one seen.

    ``kind``: ``"buffer"`` (a tylo DeviceArray: ``dtype`` is its dtype object, ``device``
    its ordinal, the value ``.ptr``), ``"owned"`` (a tylo DeviceBuffer: the same, read
    through ``._ptr`` where that is faster, ``.ptr`` once it is closed), ``"torch"`` (a tensor: ``dtype``,
    ``get_device()``, ``data_ptr()``), ``"int"`` (an exact int), ``"float"`` (the value
    ``float(arg)``) or ``"static"`` (an argument equal to ``value``). ``type`` is the
    argument's exact type. The guard these imply holds exactly when the reader would give
    the same specialization key (or is stricter: a dtype object of the same name that is
    not the same object fails it and takes the reader path).
    """

    kind: str
    type: type
    dtype: Any = None
    device: Any = None
    value: Any = None


def _read_int(a: Any) -> tuple[Any, Any]:
    return int, a


def _read_float(a: Any) -> tuple[Any, Any]:
    return float, float(a)


def _read_buffer(a: Any) -> tuple[Any, Any]:
    return (a.dtype.name, a.device), a.ptr


def _read_torch(a: Any) -> tuple[Any, Any]:
    return (a.dtype, a.get_device()), a.data_ptr()


def _buffer_kind(a: Any) -> str:
    from tylo.arrays import DeviceBuffer

    return "owned" if type(a) is DeviceBuffer else "buffer"


_INLINE: dict[Any, Callable[[Any], ArgSpec]] = {
    _read_int: lambda a: ArgSpec("int", int),
    _read_float: lambda a: ArgSpec("float", type(a)),
    _read_buffer: lambda a: ArgSpec(_buffer_kind(a), type(a), a.dtype, a.device),
    _read_torch: lambda a: ArgSpec("torch", type(a), a.dtype, a.get_device()),
}


def inline_spec(reader: Reader, arg: Any) -> ArgSpec | None:
    """How to inline ``reader`` for arguments like ``arg`` (None: it cannot be inlined,
    e.g. an array read through DLPack, so launches with it stay on the reader path)."""
    if reader in _INLINE:
        return _INLINE[reader](arg)
    if getattr(reader, "static", False):
        types, value = reader(arg)[0]  # the key: (types, value)
        if not isinstance(types, type):  # a container: its items' types count too
            return None  # (the reader path compares whole keys)
        return ArgSpec("static", types, value=value)
    return None


def _array_reader(name: str) -> Reader:
    def read(a: Any) -> tuple[Any, Any]:
        from tylo.arrays import ArrayError, as_device_array

        try:
            arr = as_device_array(a)
        except ArrayError as err:
            raise KernelArgumentError(f"argument {name!r}: {err}") from None
        return (arr.dtype.name, arr.device), arr.ptr

    return read


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
    if kind is ParamKind.FLOAT:
        if t is bool or not isinstance(arg, (int, float)) and not hasattr(arg, "__float__"):
            raise KernelArgumentError(
                f"argument {name!r}: expected a float, got {t.__name__} {arg!r}"
            )
        return kind, _read_float
    # pointers
    from tylo.arrays import DeviceArray, DeviceBuffer

    if t is DeviceBuffer or t is DeviceArray:
        return kind, _read_buffer
    if t.__module__.startswith("torch") and hasattr(arg, "data_ptr"):
        return kind, _read_torch
    return kind, _array_reader(name)


def _is_int(x: Any) -> bool:
    try:
        operator.index(x)
        return True
    except TypeError:
        return False
