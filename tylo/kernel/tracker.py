"""Which user code ran during a trace: the first-level cache's record of what a trace read.

:class:`DependencyTracker` reports every code object that runs between :meth:`start
<DependencyTracker.start>` and :meth:`stop <DependencyTracker.stop>` to a
:class:`~tylo.kernel.reads.Dependencies` (which keeps the user's code and the globals it
names). How it sees the calls depends on the Python and on what else is watching:

- ``"monitoring"`` (Python 3.12+): ``sys.monitoring``'s ``PY_START`` event, each code
  object reported once and then disabled, so it costs nothing per call afterwards;
- ``"lsprof"`` (Python 3.10 and 3.11, or when the monitoring tool id is taken): a
  profiler of the standard library's C ``_lsprof`` module, whose per-call hook is C code
  (no Python function runs per call, and no frame's locals are copied); the code objects
  come from its statistics at :meth:`stop`, each with its module's globals (found by file
  among ``sys.modules``);
- ``"shared"``: a ``cProfile`` profiler is already running (the user is profiling a
  compile): its hook is left in place and the code objects whose counts changed during
  the trace are read from its statistics, so the user's profile still covers the trace;
- ``"hook"``: some other Python profile function is installed: a Python hook that
  records each call and then calls it (slow, but both see every call), restored after;
- ``"blind"``: a profiler whose hook cannot be called from Python (a C extension's) is
  installed: it is left alone, nothing is recorded and the record is marked
  unverifiable, so the specialization is traced in each process (never stale).

No mode runs for a kernel of tylo's own (``tylo.ops``) whose static values and closure hold
no user code (:func:`may_run_user_code`): such a trace runs only tylo's code, whose sources
the first-level key already stamps, so it is traced with no hook at all.

Python 3.10 and 3.11 pay for any profile hook while it is on (the interpreter leaves its
specialized instructions and makes a frame object for each call), so ``"lsprof"`` costs
more than ``"monitoring"``; it is about half the cost of a Python hook.
"""

from __future__ import annotations

import gc
import sys
import types
from typing import Any

from tylo.kernel.errors import is_user_file

try:
    import _lsprof
except ImportError:  # pragma: no cover - a Python built without it
    _lsprof = None  # type: ignore[assignment]

__all__ = ["MODES", "DependencyTracker", "may_run_user_code"]

MODES = ("monitoring", "lsprof", "shared", "hook", "blind")


class DependencyTracker:
    """Records the user code that runs during a trace, with its globals, into ``deps`` (a
    :class:`~tylo.kernel.reads.Dependencies`); see the module doc for the modes. ``mode``
    forces one (tests compare them); by default the cheapest that fits is chosen."""

    _TOOL = 4  # a sys.monitoring tool id reserved for optimizers; free in practice

    def __init__(self, deps: Any, mode: str | None = None) -> None:
        if mode is not None and mode not in MODES:
            raise ValueError(f"DependencyTracker: mode {mode!r} is not one of {MODES}")
        self.deps = deps
        self.mode = mode
        self._seen: dict[int, types.CodeType] = {}  # by id: equal code of two files differs
        self._previous: Any = None
        self._profiler: Any = None
        self._before: dict[int, tuple[Any, int]] = {}

    # ------------------------------------------------------------------ start / stop

    def start(self) -> None:
        """Begin recording (call :meth:`stop` in a ``finally``)."""
        mode = self.mode or self._choose()
        if mode == "monitoring" and not self._start_monitoring():
            mode = self._choose(monitoring=False)
        self._previous = sys.getprofile()
        if mode == "lsprof":
            try:
                self._profiler = _lsprof.Profiler(builtins=False, subcalls=False)
                self._profiler.enable()
            except (AttributeError, ValueError, RuntimeError):
                # no _lsprof, or (3.12+) another profiler holds its monitoring tool
                self._profiler = None
                mode = "hook" if self._previous is None or callable(self._previous) else "blind"
        if mode == "shared":
            self._before = _counts(self._previous)
        elif mode == "hook":
            sys.setprofile(self._profile)
        elif mode == "blind":
            what = type(self._previous).__name__
            self.deps.unverifiable = (
                f"a profiler ({what}) was running, whose hook tylo cannot share: what the "
                "trace read was not recorded"
            )
        self.mode = mode

    def stop(self) -> None:
        """Stop recording, restore whatever hook was there before, and report the code
        that ran (in the ``lsprof`` and ``shared`` modes, only now)."""
        mode = self.mode
        if mode == "monitoring":
            mon = sys.monitoring  # type: ignore[attr-defined]
            mon.set_events(self._TOOL, 0)
            mon.register_callback(self._TOOL, mon.events.PY_START, None)
            mon.free_tool_id(self._TOOL)
        elif mode == "lsprof":
            self._profiler.disable()
            self._report(entry.code for entry in self._profiler.getstats())
            self._profiler = None
        elif mode == "shared":
            after = _counts(self._previous)
            ran = [
                code for key, (code, n) in after.items() if self._before.get(key, (0, 0))[1] != n
            ]
            if not ran:  # a trace always runs tylo's own code: the statistics missed it
                self.deps.unverifiable = (
                    f"the running profiler ({type(self._previous).__name__}) showed none of "
                    "the trace's calls: what the trace read was not recorded"
                )
            else:
                self._report(ran)
        elif mode == "hook":
            sys.setprofile(self._previous)

    def _choose(self, monitoring: bool = True) -> str:
        if monitoring and hasattr(sys, "monitoring"):
            return "monitoring"
        previous = sys.getprofile()
        if previous is None:
            return "lsprof" if _lsprof is not None else "hook"
        if _lsprof is not None and isinstance(previous, _lsprof.Profiler):
            return "shared"
        return "hook" if callable(previous) else "blind"

    def _start_monitoring(self) -> bool:
        mon = getattr(sys, "monitoring", None)
        if mon is None:
            return False
        try:
            mon.use_tool_id(self._TOOL, "tylo-trace")
        except ValueError:  # taken
            return False
        mon.register_callback(self._TOOL, mon.events.PY_START, self._on_start)
        mon.set_events(self._TOOL, mon.events.PY_START)
        mon.restart_events()
        return True

    # ------------------------------------------------------------------ recording

    def _record(self, code: Any, f_globals: Any) -> None:
        if id(code) not in self._seen:
            self._seen[id(code)] = code
            if is_user_file(code.co_filename):
                self.deps.add_code(code, f_globals)

    def _report(self, codes: Any) -> None:
        """Record code objects that ran, each with the globals of the module(s) loaded
        from its file (no module: its globals were not visible, the record unverifiable)."""
        user = [c for c in codes if isinstance(c, types.CodeType) and is_user_file(c.co_filename)]
        modules = _modules_by_file({c.co_filename for c in user})
        for code in user:
            if id(code) in self._seen:
                continue
            self._seen[id(code)] = code
            found = modules.get(code.co_filename) or [None]
            for namespace in found:
                self.deps.add_code(code, namespace)

    def _on_start(self, code: Any, offset: int) -> Any:
        frame = sys._getframe(1)
        self._record(code, frame.f_globals if frame.f_code is code else None)
        return sys.monitoring.DISABLE  # type: ignore[attr-defined]

    def _profile(self, frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            self._record(frame.f_code, frame.f_globals)
        previous = self._previous
        if previous is not None:
            previous(frame, event, arg)


def _counts(profiler: Any) -> dict[int, tuple[Any, int]]:
    """``id(code) -> (code, calls)`` of every Python function in ``profiler``'s stats."""
    out: dict[int, tuple[Any, int]] = {}
    for entry in profiler.getstats():
        code = entry.code
        if isinstance(code, types.CodeType):
            out[id(code)] = (code, entry.callcount + entry.reccallcount)
    return out


def _modules_by_file(files: set[str]) -> dict[str, list[dict[str, Any]]]:
    """The namespaces of the loaded modules whose ``__file__`` is one of ``files`` (a
    script run as ``__main__`` and imported by name is two modules of one file)."""
    out: dict[str, list[dict[str, Any]]] = {}
    if not files:
        return out
    for module in list(sys.modules.values()):
        if not isinstance(module, types.ModuleType):
            continue
        namespace = vars(module)
        path = namespace.get("__file__")
        if type(path) is str and path in files:
            found = out.setdefault(path, [])
            if all(ns is not namespace for ns in found):
                found.append(namespace)
    return out


_SCAN_LIMIT = 20000  # objects looked at before giving up (then: assume user code)


def may_run_user_code(fn: Any, statics: Any) -> bool:
    """Whether tracing ``fn`` with the static values ``statics`` might run code from a
    user's file: ``fn`` itself is user code, or a user function, class, module or an
    instance of a user class is reachable from ``statics`` or ``fn``'s closure (functions
    through their closure, defaults and ``__wrapped__``; any other object through what it
    references, ``gc.get_referents``). Errs towards True: a class of no loaded module or a
    scan past its limit counts as user code."""
    code = getattr(fn, "__code__", None)
    if code is None or is_user_file(code.co_filename):
        return True
    cells = [c.cell_contents for c in getattr(fn, "__closure__", None) or () if _full(c)]
    stack: list[Any] = [*cells, *statics]
    seen: set[int] = set()
    while stack:
        value = stack.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        if len(seen) > _SCAN_LIMIT:
            return True
        if isinstance(value, (int, float, complex, str, bytes, bool, type(None))):
            continue
        if isinstance(value, types.ModuleType):
            if _user_path(vars(value).get("__file__")):
                return True
            continue
        if isinstance(value, types.FunctionType):
            if is_user_file(value.__code__.co_filename):
                return True
            stack += [c.cell_contents for c in value.__closure__ or () if _full(c)]
            stack += list(value.__defaults__ or ())
            wrapped = vars(value).get("__wrapped__")
            if wrapped is not None:
                stack.append(wrapped)
            continue
        if isinstance(value, type):
            if _user_class(value):
                return True
            continue
        if _user_class(type(value)):
            return True
        # anything else: what it references (containers' items, instance dicts and slots,
        # a partial's function and arguments, a bound method's function and self, ...)
        stack += gc.get_referents(value)
    return False


def _full(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises
    except ValueError:
        return False
    return True


def _user_path(path: Any) -> bool:
    return type(path) is str and is_user_file(path)


def _user_class(cls: type) -> bool:
    """Whether ``cls`` or a class it derives from is defined in a user's file."""
    for klass in getattr(cls, "__mro__", (cls,)):
        module = sys.modules.get(getattr(klass, "__module__", None) or "")
        if module is None:  # a class of no loaded module (exec'd code): assume the user's
            return True
        if _user_path(vars(module).get("__file__")):
            return True
    return False
