"""The DLPack exchange protocol (dlpack.h), read with ctypes: the tensor structures of
DLPack 0.x and 1.0, and :func:`read_capsule`, which exports an object through
``__dlpack__`` and returns its tensor for :func:`tylo.arrays.as_device_array`."""

from __future__ import annotations

import ctypes
from typing import Any

from tylo.errors import ArrayError

__all__ = ["KDL_CPU", "KDL_CUDA", "KDL_CUDA_HOST", "KDL_CUDA_MANAGED", "read_capsule"]

# DLPack device types (dlpack.h, DLDeviceType)
KDL_CPU, KDL_CUDA, KDL_CUDA_HOST, KDL_CUDA_MANAGED = 1, 2, 3, 13
_DL_DEVICE_NAMES = {
    1: "CPU",
    2: "CUDA",
    3: "CUDAHost",
    4: "OpenCL",
    7: "Vulkan",
    8: "Metal",
    9: "VPI",
    10: "ROCM",
    11: "ROCMHost",
    13: "CUDAManaged",
    14: "OneAPI",
}


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [
        ("dl_tensor", _DLTensor),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
    ]


class _DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version_major", ctypes.c_uint32),
        ("version_minor", ctypes.c_uint32),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", _DLTensor),
    ]


_DLPACK_FLAG_READ_ONLY = 1
_capsule_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_is_valid.restype = ctypes.c_int
_capsule_is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_get_pointer.restype = ctypes.c_void_p
_capsule_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def read_capsule(obj: Any, what: str) -> tuple[Any, bool, Any]:
    """Export ``obj`` through ``__dlpack__`` (DLPack 1.0 first, then the unversioned form)
    and read its tensor: ``(DLTensor, read-only flag, capsule)``. The capsule stays
    unconsumed: the caller keeps it alive with the view, and when it is collected the
    producer's capsule destructor calls the tensor's deleter (DLPack spec).
    :class:`ArrayError` for memory that is not on a CUDA device, vector dtypes, and
    producers that refuse to export."""
    device = getattr(obj, "__dlpack_device__", None)
    if device is not None:
        dev_type, _ = device()
        _require_cuda_device(int(dev_type), what)
    try:
        try:
            capsule = obj.__dlpack__(max_version=(1, 0))
        except TypeError:  # producers older than DLPack 1.0 take no max_version
            capsule = obj.__dlpack__()
    except (BufferError, RuntimeError, TypeError, ValueError) as err:
        raise ArrayError(f"{what}: the producer refused to export: {err}") from None
    readonly = False
    if _capsule_is_valid(capsule, b"dltensor_versioned"):
        managed = _DLManagedTensorVersioned.from_address(
            _capsule_get_pointer(capsule, b"dltensor_versioned")
        )
        if managed.version_major > 1:
            raise ArrayError(f"{what}: DLPack version {managed.version_major} is not supported")
        tensor = managed.dl_tensor
        readonly = bool(managed.flags & _DLPACK_FLAG_READ_ONLY)
    elif _capsule_is_valid(capsule, b"dltensor"):
        tensor = _DLManagedTensor.from_address(_capsule_get_pointer(capsule, b"dltensor")).dl_tensor
    else:
        raise ArrayError(f"{what}: __dlpack__ did not return an unused DLPack capsule")
    _require_cuda_device(tensor.device.device_type, what)
    if tensor.dtype.lanes != 1:
        raise ArrayError(f"{what}: vector dtypes (lanes={tensor.dtype.lanes}) are not supported")
    return tensor, readonly, capsule


def _require_cuda_device(dev_type: int, what: str) -> None:
    if dev_type not in (KDL_CUDA, KDL_CUDA_MANAGED):
        name = _DL_DEVICE_NAMES.get(dev_type, f"device type {dev_type}")
        raise ArrayError(
            f"{what}: the array lives on {name}, not a CUDA device; move it to the GPU first"
        )
