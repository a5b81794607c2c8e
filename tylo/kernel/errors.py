"""Typed errors of the kernel tracer and of kernel launches.

:class:`TraceError` is what a user sees when tracing a kernel fails: the message names the
kernel, the user's file and line and the source line; the traceback keeps only the user's
frames (tylo's own frames are stripped), and ``original`` holds the exception first raised.
:class:`KernelArgumentError` reports a launch argument that does not fit the kernel (wrong
kind, dtype, device, alignment, or a runtime integer outside its declared facts), raised
before anything is launched.
"""

from __future__ import annotations

import linecache
import os
import sysconfig
import types
from typing import Any

from tylo.backend.errors import LaunchError
from tylo.errors import TyloError

__all__ = [
    "BoundsProofError",
    "KernelArgumentError",
    "OutOfBoundsError",
    "OutOfBoundsLaunchError",
    "TraceError",
    "Undefined",
    "is_user_file",
    "user_frames",
]

_TYLO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_LIB_DIRS = tuple(
    os.path.abspath(p) + os.sep
    for p in {sysconfig.get_path(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    if p
)


class TraceError(TyloError):
    """Tracing a kernel failed; the message points at the user's line.

    Attributes: ``kernel`` (name), ``filename``, ``lineno``, ``source_line`` and
    ``original`` (the exception first raised, or None when tylo raised this directly).
    """

    def __init__(
        self,
        message: str,
        *,
        kernel: str | None = None,
        filename: str | None = None,
        lineno: int | None = None,
        original: BaseException | None = None,
    ) -> None:
        self.message = message
        self.kernel = kernel
        self.filename = filename
        self.lineno = lineno
        self.original = original
        self.source_line = (
            linecache.getline(filename, lineno).strip() if filename and lineno else ""
        )
        super().__init__(self._render())

    def _render(self) -> str:
        where = ""
        if self.filename and self.lineno:
            where = f"{self.filename}:{self.lineno}"
        head = f"kernel {self.kernel!r}" if self.kernel else "kernel"
        if where:
            head += f", {where}"
        text = f"{head}: {self.message}"
        if self.source_line:
            text += f"\n    {self.source_line}"
        return text

    @property
    def located(self) -> bool:
        """Whether the error already names a user file and line."""
        return bool(self.filename and self.lineno)


class KernelArgumentError(LaunchError, TypeError):
    """A launch argument does not fit the kernel's parameter (raised before launching)."""


class OutOfBoundsError(TraceError):
    """A memory access of a kernel is out of bounds for every launch the facts allow
    (``x[i - 1]`` where thread 0 exists), or for its static offset: refused while tracing
    (:mod:`tylo.kernel.accesses`)."""


class BoundsProofError(TraceError):
    """``@tylo.kernel(bounds="prove")``: an access is guarded or unproved, so the kernel is
    not compiled; the message lists each one with its condition or reason."""


class OutOfBoundsLaunchError(KernelArgumentError):
    """A launch would access memory outside an array: a bounds guard of the kernel
    (:mod:`tylo.kernel.bounds_check`) fails for these arguments. Raised before the driver
    is called; the message names the parameter, the access's source line, the condition
    and the values."""


def is_user_file(filename: str) -> bool:
    """Whether ``filename`` is user code: not tylo's own, not the standard library nor an
    installed package, not a synthetic ``<string>`` source."""
    if not filename or filename.startswith("<"):
        return False
    path = os.path.abspath(filename)
    if path.startswith(_TYLO_DIR):
        return False
    return not path.startswith(_LIB_DIRS)


def user_frames(tb: types.TracebackType | None) -> types.TracebackType | None:
    """A copy of traceback ``tb`` keeping only the user's frames (see :func:`is_user_file`)."""
    kept: list[types.TracebackType] = []
    while tb is not None:
        if is_user_file(tb.tb_frame.f_code.co_filename):
            kept.append(tb)
        tb = tb.tb_next
    out: types.TracebackType | None = None
    for t in reversed(kept):
        out = types.TracebackType(out, t.tb_frame, t.tb_lasti, t.tb_lineno)
    return out


class Undefined:
    """Bound to a name that has no value at this point of a traced kernel; any use raises
    a :class:`TraceError` that says why."""

    __slots__ = ("name", "reason")

    def __init__(self, name: str, reason: str) -> None:
        self.name = name
        self.reason = reason

    def _fail(self, *args: Any, **kwargs: Any) -> Any:
        raise TraceError(f"name {self.name!r} {self.reason}")

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return self._fail()

    def __repr__(self) -> str:
        return f"<undefined {self.name}>"

    __bool__ = __call__ = __getitem__ = __setitem__ = __iter__ = __len__ = _fail
    __index__ = __int__ = __float__ = __neg__ = __pos__ = __abs__ = __invert__ = _fail
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _fail
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = _fail
    __and__ = __rand__ = __or__ = __ror__ = __xor__ = __rxor__ = _fail
    __lshift__ = __rlshift__ = __rshift__ = __rrshift__ = __pow__ = __rpow__ = _fail
    __lt__ = __le__ = __gt__ = __ge__ = _fail
