"""Kernel parameters: static versus runtime, annotations, specialization keys, checks.

A kernel parameter is one of four kinds:

- **static** (``x: tylo.Static``, or an unannotated bool, DType, None, tuple, frozenset
  or frozen plan object): folded in at trace time; its value is part of the
  specialization. A string or a number other than an int or float is static only when
  annotated (unannotated, it is a wrong-typed runtime argument: ``n="16"``);
- **pointer** (``x: tylo.Ptr(align=16)``, or an unannotated array: a tylo DeviceBuffer,
  a torch/CuPy/JAX device array): a typed global pointer; the element dtype and device
  are part of the specialization; at every launch the array must be C-contiguous,
  writable, non-null (unless empty) and aligned to its element size and to ``align``
  (``tylo.Ptr(strided=True)`` / ``readonly=True`` accept strided / read-only arrays);
- **int** (``n: tylo.Int(min=0, multiple_of=8)``, or an unannotated Python int): a
  runtime integer, a symbol with those facts inside the kernel; the facts are checked at
  every launch (default: ``min=1``, a positive extent);
- **float** (``alpha: tylo.Float()`` / ``tylo.Float(tylo.f64)``, or an unannotated Python
  float): a runtime f32 (or f64) value;
- **tensor map** (a :class:`tylo.nvgpu.tma.TensorMap`): a 128-byte TMA descriptor passed by
  value as a ``grid_constant`` parameter; its plan is part of the specialization.

For compile-only use (:meth:`tylo.kernel.decorator.Kernel.compile`) an argument *spec*
stands for a runtime argument: ``tylo.pointer(tylo.f32, align=16)`` or a bare DType for a
pointer, ``int`` or ``tylo.Int(...)`` for an int, ``float`` or ``tylo.Float(...)``.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tylo import dtypes as dt
from tylo.dtypes import DType
from tylo.kernel.errors import KernelArgumentError, TraceError

__all__ = [
    "BOUNDS_POLICIES",
    "Binding",
    "Dim",
    "Float",
    "Int",
    "ParamKind",
    "Ptr",
    "Static",
    "is_array_like",
    "pointer",
]

#: The memory-access policies of ``@tylo.kernel(bounds=...)`` (docs/accesses.md): check
#: what is not proved at launch, refuse to compile what is not proved, or record nothing.
BOUNDS_POLICIES = ("guard", "prove", "off")


class Static:
    """Annotation: the parameter is static (folded in at trace time; part of the
    specialization key). ``def k(..., relu: tylo.Static)``."""

    def __init__(self) -> None:
        raise TraceError("tylo.Static is an annotation (`x: tylo.Static`), not a value")


@dataclass(frozen=True)
class Int:
    """Annotation and spec of a runtime integer: ``min`` (default 1, a positive extent),
    optional inclusive ``max``, and ``multiple_of``; all are facts inside the kernel and
    are checked at launch."""

    min: int = 1
    max: int | None = None
    multiple_of: int = 1

    def __post_init__(self) -> None:
        if type(self.min) is not int or self.min < 0:
            raise TraceError(f"tylo.Int: min must be an int >= 0, got {self.min!r}")
        if type(self.multiple_of) is not int or self.multiple_of < 1:
            raise TraceError(f"tylo.Int: multiple_of must be an int >= 1, got {self.multiple_of!r}")
        if self.max is not None and (type(self.max) is not int or self.max < self.min):
            raise TraceError(f"tylo.Int: max must be an int >= min, got {self.max!r}")

    def check(self, name: str, value: int, index_bits: int) -> None:
        """Raise :class:`KernelArgumentError` unless ``value`` satisfies the facts."""
        limit = (1 << (index_bits - 1)) - 1
        if value < self.min:
            need = "positive (>= 1)" if self.min == 1 else f">= {self.min}"
            hint = "; annotate it tylo.Int(min=0) to allow 0" if self.min == 1 else ""
            raise KernelArgumentError(f"argument {name!r} = {value}: must be {need}{hint}")
        if self.max is not None and value > self.max:
            raise KernelArgumentError(f"argument {name!r} = {value}: must be <= {self.max}")
        if value > limit:
            raise KernelArgumentError(
                f"argument {name!r} = {value}: does not fit the kernel's {index_bits}-bit "
                "index arithmetic"
            )
        if value % self.multiple_of:
            raise KernelArgumentError(
                f"argument {name!r} = {value}: must be a multiple of {self.multiple_of} "
                "(the kernel was compiled assuming it)"
            )


Dim = Int(min=1, max=2**31 - 1)
"""The annotation of a positive extent that fits the kernel's i32 index arithmetic
(``tylo.Int(min=1, max=2**31 - 1)``): ``def k(x, n: tylo.Dim)``. What the ops' kernels take
for their sizes and leading dimensions."""


@dataclass(frozen=True)
class Float:
    """Annotation and spec of a runtime float (f32 by default, or f64)."""

    dtype: DType = dt.f32

    def __post_init__(self) -> None:
        d = dt.dtype_of(self.dtype)
        if d not in (dt.f32, dt.f64):
            raise TraceError(f"tylo.Float: dtype must be f32 or f64, got {d}")
        object.__setattr__(self, "dtype", d)


@dataclass(frozen=True)
class Ptr:
    """Annotation and spec of a pointer parameter.

    ``dtype``: the element dtype (None: taken from the argument); ``align``: the byte
    alignment the kernel may assume (checked at launch); ``strided=True``: the kernel
    takes the array's strides as other arguments, so a strided, transposed, zero- or
    negative-stride view is accepted (the kernel receives the address of element 0);
    ``readonly=True``: the kernel only reads this parameter, so arrays marked read-only
    are accepted. Without these, launches refuse such arrays (see docs/kernels.md).
    """

    dtype: DType | None = None
    align: int | None = None
    strided: bool = False
    readonly: bool = False

    def __post_init__(self) -> None:
        if self.dtype is not None:
            object.__setattr__(self, "dtype", dt.dtype_of(self.dtype))
        if self.align is not None and (
            type(self.align) is not int or self.align < 1 or self.align & (self.align - 1)
        ):
            raise TraceError(f"tylo.Ptr: align must be a power of two, got {self.align!r}")
        for flag in ("strided", "readonly"):
            if type(getattr(self, flag)) is not bool:
                raise TraceError(
                    f"tylo.Ptr: {flag} must be True or False, got {getattr(self, flag)!r}"
                )

    def check(self, name: str, address: int) -> None:
        """Raise :class:`KernelArgumentError` unless ``address`` is a multiple of
        ``align``."""
        if self.align is not None and address % self.align:
            raise KernelArgumentError(
                f"argument {name!r}: address 0x{address:x} is not aligned to {self.align} "
                "bytes, which the kernel was compiled to assume (tylo.Ptr(align="
                f"{self.align})); pass an aligned array (a fresh allocation, or a view at a "
                "multiple of the alignment)"
            )


def pointer(dtype: Any, *, align: int | None = None) -> Ptr:
    """A pointer spec for :meth:`Kernel.compile`: ``tylo.pointer(tylo.f32, align=16)``."""
    return Ptr(dt.dtype_of(dtype), align)


class ParamKind(enum.Enum):
    STATIC = "static"
    POINTER = "pointer"
    INT = "int"
    FLOAT = "float"
    TENSOR_MAP = "tensor_map"


def is_tensor_map(x: Any) -> bool:
    """Whether ``x`` is a TMA tensor map argument (a :class:`tylo.nvgpu.tma.TensorMap`) or
    its compile spec (a :class:`~tylo.nvgpu.tma.TensorMapPlan`): duck-typed, so the tracer
    does not import the hardware layer above it."""
    return getattr(type(x), "tylo_param_kind", None) == "tensor_map"


def is_array_like(x: Any) -> bool:
    """Whether ``x`` can be passed where a pointer is expected."""
    t = type(x)
    if t.__module__.startswith("torch") and hasattr(x, "data_ptr"):
        return True
    return (
        hasattr(x, "__cuda_array_interface__")
        or hasattr(x, "__dlpack__")
        or (t.__name__ in ("DeviceBuffer", "DeviceArray") and t.__module__ == "tylo.arrays")
        or (t.__name__ == "ArraySpec" and t.__module__ == "tylo.kernel.check_launch")
    )


def value_types(value: Any) -> Any:
    """``type(value)``, through tuples, lists and frozensets (their items' types too):
    ``True``, ``1`` and ``1.0`` compare equal in Python, but a trace may branch on the
    type, so they select different specializations, inside containers too."""
    if isinstance(value, (tuple, list)):
        return (type(value), tuple(value_types(v) for v in value))
    if isinstance(value, frozenset):
        return (frozenset, frozenset(value_types(v) for v in value))
    return type(value)


def static_key(name: str, value: Any) -> Any:
    """The specialization key of a static value: (its types, see :func:`value_types`,
    and the value); it must be hashable."""
    try:
        hash(value)
    except TypeError:
        raise KernelArgumentError(
            f"static argument {name!r}: a {type(value).__name__} is not hashable, so it "
            "cannot select a compiled configuration; pass a tuple or a frozen dataclass"
        ) from None
    return (value_types(value), value)


# Values an unannotated parameter never takes as static: each is far likelier a wrong
# runtime argument (``n="16"``) than a configuration value, so the launch refuses it rather
# than tracing with it; ``x: tylo.Static`` passes any of them. (None stays static: it is how
# an optional array is left out; see launch.none_arguments_blamed for ``out=None``.)
_NOT_STATIC_UNANNOTATED = (str, bytes, bytearray, complex)


def classify(annotation: Any, value: Any, name: str) -> ParamKind:
    """The kind of parameter ``name`` given its annotation and an argument (or spec).

    Unannotated, the argument's type decides; a string, bytes, a complex number or any
    other number that is neither an int nor a float is refused
    (:class:`KernelArgumentError`) unless the parameter is annotated ``tylo.Static``."""
    if annotation is Static:
        return ParamKind.STATIC
    if isinstance(annotation, Int) or annotation is int:
        return ParamKind.INT
    if isinstance(annotation, Float) or annotation is float:
        return ParamKind.FLOAT
    if isinstance(annotation, Ptr):
        return ParamKind.POINTER
    # unannotated (or annotated with something tylo does not interpret): by the value
    if is_tensor_map(value):
        return ParamKind.TENSOR_MAP
    if isinstance(value, (bool, DType)) or value is None:
        return ParamKind.STATIC
    if isinstance(value, Ptr):
        return ParamKind.POINTER
    if isinstance(value, (Int,)) or value is int or type(value) is int:
        return ParamKind.INT
    if isinstance(value, Float) or value is float or type(value) is float:
        return ParamKind.FLOAT
    if isinstance(value, np.ndarray):
        raise KernelArgumentError(
            f"argument {name!r}: a numpy array lives in host memory; copy it to the GPU "
            "first (tylo.DeviceBuffer.from_numpy(a), or a torch/CuPy device array)"
        )
    if isinstance(value, np.bool_):
        return ParamKind.STATIC
    if isinstance(value, np.integer):
        return ParamKind.INT
    if isinstance(value, np.floating):
        return ParamKind.FLOAT
    if is_array_like(value):
        return ParamKind.POINTER
    if isinstance(value, _NOT_STATIC_UNANNOTATED) or _is_other_number(value):
        raise KernelArgumentError(
            f"argument {name!r}: got {type(value).__name__} {value!r}, which is not an "
            "array, an int or a float; pass one of those, or, if the kernel takes it as a "
            f"trace-time value, annotate the parameter `{name}: tylo.Static`"
        )
    if dataclasses.is_dataclass(value) or isinstance(value, (tuple, frozenset)):
        return ParamKind.STATIC
    try:
        hash(value)
    except TypeError:
        raise KernelArgumentError(
            f"argument {name!r}: cannot pass a {type(value).__name__} to a kernel (not an "
            "array, number, or hashable static value)"
        ) from None
    return ParamKind.STATIC


def _is_other_number(value: Any) -> bool:
    """A number that is neither an int nor a float (Decimal, Fraction, a numpy complex):
    a kernel has no parameter kind for it."""
    import numbers

    return isinstance(value, numbers.Number) and not isinstance(value, (int, float, enum.Enum))


@dataclass(frozen=True)
class Binding:
    """One parameter of one specialization: its kind and what was chosen for it.

    ``dtype``: pointer element or float dtype; ``static``: the static value;
    ``check``: the :class:`Int` / :class:`Ptr` facts that launches must satisfy.
    """

    name: str
    kind: ParamKind
    dtype: DType | None = None
    static: Any = None
    check: Any = None
    # the static value's types, so that `True`, `1` and `1.0` (equal in Python) select
    # different specializations: a trace may branch on the type
    static_types: Any = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "static_types", value_types(self.static))
