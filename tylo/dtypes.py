"""Element types of tylo arrays, fragments and kernel values.

A :class:`DType` is a frozen, hashable value (it can specialize a kernel). Each one knows
its size, its numpy equivalent where numpy has one (bfloat16 has none: it travels as
``uint16`` bits on the host), its DLPack code, and the ``__cuda_array_interface__``
typestr, so arrays from any framework can be matched against what a kernel expects.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tylo.errors import TyloError

__all__ = [
    "DType",
    "DTypeError",
    "bf16",
    "bool_",
    "dtype_of",
    "f16",
    "f32",
    "f64",
    "i8",
    "i16",
    "i32",
    "i64",
    "u8",
    "u16",
    "u32",
    "u64",
]

# DLPack type codes (dlpack.h, DLDataTypeCode)
_DL_INT, _DL_UINT, _DL_FLOAT, _DL_BFLOAT, _DL_BOOL = 0, 1, 2, 4, 6


class DTypeError(TyloError, TypeError):
    """An element type tylo does not know, or one that does not match what was expected."""


@dataclass(frozen=True)
class DType:
    """An element type: ``name`` (tylo's spelling), ``kind`` ('f', 'i', 'u', 'b'), ``bits``.

    >>> bf16.bits, bf16.nbytes, str(f32)
    (16, 2, 'f32')
    """

    name: str
    kind: str
    bits: int

    @property
    def nbytes(self) -> int:
        """Size of one element in bytes."""
        return self.bits // 8

    @property
    def is_float(self) -> bool:
        return self.kind == "f"

    @property
    def is_signed(self) -> bool:
        return self.kind in ("f", "i")

    @property
    def numpy(self) -> np.dtype:
        """The numpy dtype that holds this type's bits (``uint16`` for bf16)."""
        return np.dtype(_NUMPY[self.name])

    @property
    def dlpack(self) -> tuple[int, int]:
        """(DLPack type code, bits)."""
        return _DLPACK[self.name], self.bits

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"tylo.{self.name}"


f64 = DType("f64", "f", 64)
f32 = DType("f32", "f", 32)
f16 = DType("f16", "f", 16)
bf16 = DType("bf16", "f", 16)
i64 = DType("i64", "i", 64)
i32 = DType("i32", "i", 32)
i16 = DType("i16", "i", 16)
i8 = DType("i8", "i", 8)
u64 = DType("u64", "u", 64)
u32 = DType("u32", "u", 32)
u16 = DType("u16", "u", 16)
u8 = DType("u8", "u", 8)
bool_ = DType("bool", "b", 8)

_ALL = (f64, f32, f16, bf16, i64, i32, i16, i8, u64, u32, u16, u8, bool_)
_BY_NAME = {d.name: d for d in _ALL}
_NUMPY = {
    "f64": "float64",
    "f32": "float32",
    "f16": "float16",
    "bf16": "uint16",
    "i64": "int64",
    "i32": "int32",
    "i16": "int16",
    "i8": "int8",
    "u64": "uint64",
    "u32": "uint32",
    "u16": "uint16",
    "u8": "uint8",
    "bool": "bool",
}
_DLPACK = {
    "f64": _DL_FLOAT,
    "f32": _DL_FLOAT,
    "f16": _DL_FLOAT,
    "bf16": _DL_BFLOAT,
    "i64": _DL_INT,
    "i32": _DL_INT,
    "i16": _DL_INT,
    "i8": _DL_INT,
    "u64": _DL_UINT,
    "u32": _DL_UINT,
    "u16": _DL_UINT,
    "u8": _DL_UINT,
    "bool": _DL_BOOL,
}
_FROM_DLPACK = {(code, d.bits): d for d in _ALL for code in [_DLPACK[d.name]]}
_FROM_NUMPY = {np.dtype(v): _BY_NAME[k] for k, v in _NUMPY.items() if k != "bf16"}
_ALIASES = {
    "float64": f64,
    "float32": f32,
    "float16": f16,
    "bfloat16": bf16,
    "half": f16,
    "float": f32,
    "double": f64,
    "int64": i64,
    "int32": i32,
    "int16": i16,
    "int8": i8,
    "uint64": u64,
    "uint32": u32,
    "uint16": u16,
    "uint8": u8,
    "bool_": bool_,
}


def dtype_of(x: object) -> DType:
    """The tylo DType named or carried by ``x``.

    Accepts a DType, a name ('bf16', 'float32', 'bfloat16'), a numpy dtype or array, a
    ``(dlpack_code, bits)`` pair, a ``__cuda_array_interface__`` typestr ('<f4'), or a
    torch dtype (matched by name, without importing torch).

    >>> dtype_of("bfloat16") is bf16, dtype_of(np.float32) is f32, dtype_of("<f2") is f16
    (True, True, True)
    """
    if isinstance(x, DType):
        return x
    if isinstance(x, tuple) and len(x) == 2:
        ok = all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in x)
        found = _FROM_DLPACK.get((int(x[0]), int(x[1]))) if ok else None
        if found is None:
            raise DTypeError(f"dtype_of: no tylo dtype for DLPack (code, bits) {x}")
        return found
    if isinstance(x, str):
        key = x.removeprefix("torch.")
        if key in _BY_NAME:
            return _BY_NAME[key]
        if key in _ALIASES:
            return _ALIASES[key]
        if key[:1] in "<>|=" and len(key) >= 3:
            try:
                npd = np.dtype(key)
            except TypeError:
                raise DTypeError(f"dtype_of: {x!r} is not a typestr numpy understands") from None
            return _from_numpy(npd, x)
        raise DTypeError(f"dtype_of: unknown dtype name {x!r}; known: {sorted(_BY_NAME)}")
    module = type(x).__module__
    if module.startswith("torch"):
        return dtype_of(str(x))
    if hasattr(x, "dtype") and not isinstance(x, (np.dtype, type)):
        return dtype_of(x.dtype)
    try:
        npd = np.dtype(x)  # type: ignore[call-overload]
    except TypeError as err:
        raise DTypeError(f"dtype_of: cannot read a dtype from {x!r}") from err
    return _from_numpy(npd, x)


def _from_numpy(npd: np.dtype, original: object) -> DType:
    if npd.name == "bfloat16":  # ml_dtypes' bfloat16
        return bf16
    found = _FROM_NUMPY.get(npd.newbyteorder("=") if npd.byteorder == ">" else npd)
    if found is None:
        raise DTypeError(f"dtype_of: numpy dtype {npd} (from {original!r}) has no tylo dtype")
    return found
