"""CUDA-graph capture: what may not happen while a stream is captured, and the typed error
that says so before the driver would invalidate the capture.

While a stream is captured (``torch.cuda.graph``, ``cuStreamBeginCapture``), the work
queued on it is recorded, not run. Allocating through the driver, synchronizing, copying
from the host with the synchronous calls, or loading a freshly compiled module are not
stream work: in the default (global) capture mode the driver refuses them and invalidates
the whole capture. tylo checks first. Inside :func:`capture_scope` (the ops enter it when
the current torch stream is capturing) each such call raises :class:`CaptureError`, which
says to run the call once before capturing ("warm up"): the first call of a shape compiles
and allocates what later calls reuse. A kernel launch that must compile asks the driver
whether its stream is capturing (:func:`tylo.backend.driver.stream_is_capturing`) whatever the
scope.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from tylo.backend.errors import LaunchError

__all__ = ["CaptureError", "capture_scope", "forbid_in_capture", "in_capture_scope"]


class CaptureError(LaunchError):
    """Work that a CUDA-graph capture cannot record was asked for during one."""


class _Scope(threading.local):
    depth = 0


_SCOPE = _Scope()


def in_capture_scope() -> bool:
    """True inside :func:`capture_scope` on this thread."""
    return _SCOPE.depth > 0


@contextlib.contextmanager
def capture_scope(active: bool = True) -> Iterator[None]:
    """Mark this thread as capturing (when ``active``) for the ``with`` body."""
    if not active:
        yield
        return
    _SCOPE.depth += 1
    try:
        yield
    finally:
        _SCOPE.depth -= 1


def forbid_in_capture(what: str) -> None:
    """Raise :class:`CaptureError` for ``what`` inside a capture scope."""
    if _SCOPE.depth:
        raise CaptureError(
            f"{what} during CUDA-graph capture: run this call once with the same shapes, "
            "dtypes and arguments before capturing (a warm-up), so that what it compiles "
            "and allocates exists before the capture starts"
        )
