"""Source lines for the interpreter: which line of the kernel emitted each IR instruction,
and stopping one thread in ``pdb`` at a line.

The IR carries no debug locations, so the interpreter records them while it traces: for
each instruction the IR builder inserts, the innermost frame of user code on the stack
(the kernel, or a helper of the user's it calls; frames of tylo's machinery and of llvmlite
are skipped, ``tylo/ops`` counts as user code), taken only while the kernel's own frame is
on the stack. Reports then name ``file:line`` beside the instruction.

With ``TYLO_INTERPRET_THREAD`` naming a thread, ``TYLO_INTERPRET_BREAK=LINE`` (or
``FILE:LINE``, the file's base name) stops that thread in ``pdb`` before the first
instruction of that line, each time it reaches it; :func:`breakpoint_at` holds the thread's
values as locals (``source``, ``thread``, ``values``: IR value name -> this thread's value,
``shared``: its CTA's shared memory bytes, ``local``: its local memory bytes).
"""

from __future__ import annotations

import contextlib
import linecache
import os
import sys
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["Location", "break_spec", "breakpoint_at", "describe", "record_lines"]

Location = tuple[str, int]  # (file name, line)

_lock = threading.Lock()
_TYLO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_OPS = os.path.join(_TYLO, "ops")


def _machinery(filename: str) -> bool:
    if filename.startswith(_TYLO):
        return not filename.startswith(_OPS)
    return "llvmlite" in filename or filename.startswith("<")


def _user_line(kernel_code: Any) -> Location | None:
    f = sys._getframe(2)
    found = None
    while f is not None:
        if found is None and not _machinery(f.f_code.co_filename):
            found = (f.f_code.co_filename, f.f_lineno)
        if f.f_code is kernel_code:
            return found
        f = f.f_back
    return None  # emitted outside the kernel's body (the trace's prologue or epilogue)


@contextlib.contextmanager
def record_lines(kernel_code: Any) -> Iterator[dict[int, Location]]:
    """While tracing the kernel whose (rewritten) function has code ``kernel_code``: a dict
    ``id(instruction) -> (file, line)`` for the instructions the IR builder inserts."""
    from llvmlite import ir

    lines: dict[int, Location] = {}
    if os.environ.get("TYLO_INTERPRET_LINES", "1") == "0":  # recording off: no lines
        yield lines
        return
    with _lock:  # one recording at a time: the patch is process-wide
        original = ir.IRBuilder._insert

        def insert(self: Any, instr: Any) -> None:
            loc = _user_line(kernel_code)
            if loc is not None:
                lines[id(instr)] = loc
            original(self, instr)

        ir.IRBuilder._insert = insert
        try:
            yield lines
        finally:
            ir.IRBuilder._insert = original


def describe(loc: Location | None) -> str:
    """``' (file.py:12)'`` for a location, ``''`` without one."""
    return "" if loc is None else f" ({os.path.basename(loc[0])}:{loc[1]})"


def break_spec() -> tuple[str | None, int] | None:
    """``TYLO_INTERPRET_BREAK`` as (file base name or None, line); None when unset.
    :class:`~tylo.interpret.errors.InterpretError` when it is not ``LINE`` or ``FILE:LINE``."""
    from tylo.interpret.errors import InterpretError

    text = os.environ.get("TYLO_INTERPRET_BREAK", "").strip()
    if not text:
        return None
    name, _, line = text.rpartition(":")
    if not line.isdigit() or int(line) < 1:
        raise InterpretError(
            f"TYLO_INTERPRET_BREAK={text!r}: give a source line of the kernel, as 'LINE' or "
            "'FILE:LINE' (e.g. 'kernel.py:42')"
        )
    return (os.path.basename(name) or None, int(line))


def matches(spec: tuple[str | None, int], loc: Location | None) -> bool:
    """Whether location ``loc`` is the line ``spec`` names."""
    if loc is None or loc[1] != spec[1]:
        return False
    return spec[0] is None or os.path.basename(loc[0]) == spec[0]


def _debugger(frame: Any) -> None:  # pragma: no cover - interactive
    import pdb

    pdb.Pdb().set_trace(frame)


#: what :func:`breakpoint_at` calls with its frame (tests replace it)
debugger = _debugger


def breakpoint_at(loc: Location, thread: str, values: dict[str, Any], shared: Any,
                  local: Any) -> None:  # fmt: skip
    """Stop in the debugger with one thread's values as this frame's locals (see the module
    docstring); continue (``c``) to run on."""
    source = linecache.getline(loc[0], loc[1]).strip()
    where = f"{os.path.basename(loc[0])}:{loc[1]}"
    sys.stderr.write(f"tylo.interpret: {thread} at {where}: {source}\n")
    debugger(sys._getframe())
    return None  # pdb stops here: p source, p values, p shared, p local; c runs on
