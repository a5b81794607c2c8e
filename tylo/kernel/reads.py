"""What a trace read, recorded so that the disk cache can re-check it before a hit.

The first-level disk cache (:mod:`tylo.kernel.diskcache`) keys a specialization on what
is known *before* tracing (the kernel, its options, bindings, closure). What the trace
then reads from elsewhere is recorded here, stored with the entry, and re-checked by a
lookup: any difference is a miss, never a stale cubin.

:class:`Dependencies` records, for each user code object that ran during the trace
(reported by the tracer's hook, :class:`tylo.kernel.trace._DependencyTracker`):

- the sha256 of its source file, and of the files of user modules it references;
- every global its code names (``code.co_names``) that exists in its module, by a digest
  of the value's :func:`stable_text` (numbers, strings, tuples, lists, dicts, sets,
  DTypes, enums, dataclasses field by field, numpy arrays by content, llvmlite IR types
  by their IR text, functions by name, bytecode, closure and defaults,
  ``functools.partial`` and ``lru_cache`` functions by what they wrap, objects with
  ``__tylo_cache_key__``), and names that resolve to builtins (a later global of that name shadows
  the builtin: a miss);
- through modules and user classes it names, their attributes that the code names too:
  ``othermodule.ATTR``, ``pkg.sub.TABLE``, ``Config.TILE`` (recursively, a few levels).

A value read from the user's namespace that has no stable text (a plain object, an open
file) makes the trace *unverifiable* (the reason names the value, its type and the
function and line that read it): its entry is not stored, so each process traces
and finds its cubin in the IR-keyed cache (whose key is the IR itself, always exact).
Objects reached through installed libraries' modules without a stable text (numpy's
ufuncs, say) are recorded by their type: the installation is assumed not to change
between processes. tylo's own modules are covered by the key's stamp of tylo's sources.
What a trace reads from outside Python values (environment variables, data files) is not
seen: such inputs belong in static arguments, or set ``TYLO_CACHE=0``.
"""

from __future__ import annotations

import builtins
import dataclasses
import enum
import functools
import hashlib
import os
import stat
import sys
import types
from typing import Any

from tylo.dtypes import DType

__all__ = ["Dependencies", "code_digest", "stable_text"]

_SIMPLE = (int, float, str, bytes, bool, type(None), complex)
_MAX_DEPTH = 48  # nesting of a value's text (deeper: no stable text)
_ATTR_DEPTH = 3  # module / class attribute chains followed from a global
_ABSENT = "<absent>"
_TYLO = "tylo"
_TYLO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


class _Unstable(Exception):
    """A value has no stable text (internal)."""


def stable_text(value: Any, _depth: int = 0) -> str:
    """A text of ``value`` that is the same in every process that has the same value (and
    differs when the value differs, for the kinds listed in the module doc); raises
    ``_Unstable`` for a value without one."""
    if _depth > _MAX_DEPTH:
        raise _Unstable("nested too deeply")
    d = _depth + 1
    if isinstance(value, enum.Enum):
        return f"{type(value).__module__}.{type(value).__qualname__}.{value.name}"
    if isinstance(value, _SIMPLE):
        return repr(value)
    if isinstance(value, DType):
        return f"tylo.{value.name}"
    if isinstance(value, (tuple, list)):
        return f"{type(value).__name__}({','.join(stable_text(v, d) for v in value)})"
    if isinstance(value, (frozenset, set)):
        items = sorted(stable_text(v, d) for v in value)
        return f"{type(value).__name__}({','.join(items)})"
    if isinstance(value, dict):
        items = sorted(f"{stable_text(k, d)}:{stable_text(v, d)}" for k, v in value.items())
        return f"{type(value).__name__}{{{','.join(items)}}}"
    hook = getattr(value, "__tylo_cache_key__", None)
    if hook is not None and not isinstance(value, type):
        return f"{_qualname(type(value))}:{stable_text(hook(), d)}"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = ",".join(
            f"{f.name}={stable_text(getattr(value, f.name), d)}" for f in dataclasses.fields(value)
        )
        return f"{_qualname(type(value))}({fields})"
    if isinstance(value, types.FunctionType):
        return _function_text(value, d)
    if isinstance(value, functools.partial):
        parts = (value.func, value.args, value.keywords)
        return f"partial({','.join(stable_text(p, d) for p in parts)})"
    if type(value).__name__ == "_lru_cache_wrapper" and hasattr(value, "__wrapped__"):
        return f"lru_cache({stable_text(value.__wrapped__, d)})"  # its memo: not a value
    if isinstance(value, (type, types.BuiltinFunctionType)):
        return _qualname(value)
    if isinstance(value, types.ModuleType):
        return f"module:{value.__name__}"
    if type(value).__module__ == "numpy" and type(value).__name__ == "ndarray":
        data = hashlib.sha256(value.tobytes()).hexdigest()
        return f"ndarray({value.dtype.str},{value.shape},{data})"
    module = type(value).__module__
    if module == "llvmlite.ir.types":
        return _llvm_type_text(value, d)
    if module.startswith("tylo.") and type(value).__repr__ is not object.__repr__:
        return f"{_qualname(type(value))}:{value!r}"  # tylo's own value types
    raise _Unstable(type(value).__name__)


def _llvm_type_text(value: Any, depth: int) -> str:
    """An llvmlite IR type by its IR text (``i32``, ``<4 x float>``, ``{i32, i8*}``), which
    is what its uses emit, and the body of every named struct it reaches (pointee,
    elements, return and argument types; ``opaque`` while it has none)."""
    bodies = []
    seen: set[int] = set()
    stack = [value]
    while stack:
        t = stack.pop()
        if id(t) in seen:
            continue
        seen.add(id(t))
        if len(seen) > 4096:
            raise _Unstable("an llvmlite type too large")
        children = _llvm_children(t)
        if type(t).__name__ == "IdentifiedStructType":
            elements = getattr(t, "elements", None)
            body = "opaque" if elements is None else ",".join(str(e) for e in elements)
            bodies.append(f"{t}={{{body}}}packed={getattr(t, 'packed', False)}")
        stack += children
    return f"{_qualname(type(value))}:{value}[{';'.join(sorted(set(bodies)))}]"


def _llvm_children(t: Any) -> list[Any]:
    out = []
    for name in ("pointee", "element", "return_type"):
        child = getattr(t, name, None)
        if child is not None and type(child).__module__ == "llvmlite.ir.types":
            out.append(child)
    for name in ("elements", "args"):
        out += [
            c for c in getattr(t, name, None) or () if type(c).__module__ == "llvmlite.ir.types"
        ]
    return out


def _is_tylo_type(value: Any) -> bool:
    module = type(value).__module__
    return module == _TYLO or module.startswith(_TYLO + ".")


def _qualname(obj: Any) -> str:
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', '?')}"


def code_digest(code: types.CodeType) -> str:
    """A sha256 of what ``code`` does: its bytecode, constants (nested code objects
    included), names and variable names; equal in every process of one Python version."""
    digest = hashlib.sha256()
    _hash_code(code, digest)
    return digest.hexdigest()


def _hash_code(code: types.CodeType, digest: Any) -> None:
    digest.update(code.co_code)
    for part in (code.co_names, code.co_varnames, code.co_freevars, code.co_cellvars):
        digest.update(repr(part).encode())
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            digest.update(b"<code>")
            _hash_code(const, digest)
        else:  # stable_text: a frozenset's repr follows string hashes, random per process
            try:
                text = stable_text(const)
            except _Unstable:
                text = repr(const)  # Ellipsis
            digest.update(f"{type(const).__name__}:{text};".encode("utf-8", "surrogatepass"))


def _function_text(fn: types.FunctionType, depth: int) -> str:
    """A function by name, with what its code cannot show: closure cells and defaults
    (its code is covered by its file's hash once it runs). A function of tylo's own (say,
    the wrapper ``tylo.inline`` makes) is its name and the function it wraps: its cells
    are tylo's memos, and tylo's sources are in the key."""
    if fn.__code__.co_filename.startswith(_TYLO_DIR):
        wrapped = getattr(fn, "__wrapped__", None)
        inner = "" if wrapped is None else stable_text(wrapped, depth)
        return f"tylo function {_qualname(fn)}({inner})"
    if not os.path.isfile(fn.__code__.co_filename):
        # exec'd code (``<string>``): the trace's hook sees no file, so the globals it
        # reads could not be checked; no stable text keeps it out of the first level
        raise _Unstable(f"{_qualname(fn)} has no source file")
    cells = []
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
        try:
            cells.append(f"{name}={stable_text(cell.cell_contents, depth)}")
        except ValueError:  # an empty cell
            cells.append(f"{name}=<empty>")
    defaults = stable_text(fn.__defaults__, depth) if fn.__defaults__ else ""
    kwdefaults = stable_text(fn.__kwdefaults__, depth) if fn.__kwdefaults__ else ""
    code = code_digest(fn.__code__)
    return f"function {_qualname(fn)}<{code}>[{';'.join(cells)}]({defaults}|{kwdefaults})"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _code_name(code: types.CodeType) -> str:
    return f"{getattr(code, 'co_qualname', code.co_name)} ({code.co_filename})"


def _where(code: types.CodeType, name: str) -> str:
    """``function (file:line)`` of the first instruction of ``code`` (or of a function
    nested in it) that names ``name``; the function's first line when none is found."""
    import dis

    stack = [code]
    while stack:
        c = stack.pop(0)
        line = c.co_firstlineno
        for instr in dis.get_instructions(c):
            # the line: ``line_number`` on 3.13+, ``starts_line`` (an int) before
            at = getattr(instr, "line_number", instr.starts_line)
            if type(at) is int:
                line = at
            if isinstance(instr.argval, str) and instr.argval == name:
                return f"{getattr(c, 'co_qualname', c.co_name)} ({c.co_filename}:{line})"
        stack += [k for k in c.co_consts if isinstance(k, types.CodeType)]
    return f"{_code_name(code)[:-1]}:{code.co_firstlineno})"


def _file_hash(path: str) -> str | None:
    """The sha256 of regular file ``path``, else None (a path read from the cache may name
    a FIFO or a device: opened without blocking, and never read)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except (OSError, TypeError, ValueError):
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with os.fdopen(fd, "rb", closefd=False) as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None
    finally:
        os.close(fd)


def _is_user_module(module: types.ModuleType) -> bool:
    from tylo.kernel.errors import is_user_file

    path = getattr(module, "__file__", None)
    return bool(path) and is_user_file(path)


def _is_user_class(cls: type) -> bool:
    module = sys.modules.get(cls.__module__)
    return module is not None and (cls.__module__ == "__main__" or _is_user_module(module))


def _attribute(obj: Any, name: str) -> Any:
    """``obj.name`` for a module (its namespace) or a class (its MRO's namespaces),
    without running descriptors or ``__getattr__``; ``_ABSENT`` when it has none."""
    if isinstance(obj, types.ModuleType):
        return vars(obj).get(name, _ABSENT)
    if isinstance(obj, type):
        for klass in obj.__mro__:
            if name in vars(klass):
                return vars(klass)[name]
    return _ABSENT


def _value_digest(value: Any, lenient: bool) -> str | None:
    """The digest of ``value``'s stable text; without one, the digest of its type when
    ``lenient`` (reached through an installed library), else None."""
    if value is _ABSENT:
        return _ABSENT
    try:
        return _digest(stable_text(value))
    except (_Unstable, RecursionError):
        if lenient or _is_tylo_type(value):  # tylo's own objects: its sources are in the key
            return _digest(f"<{_qualname(type(value))}>")
        return None
    except Exception:  # noqa: BLE001 - a user __tylo_cache_key__ or __eq__ that raises
        return None


class Dependencies:
    """What a trace read (see the module doc): ``files`` (path -> sha256), ``values``
    (path of names from a module -> ``(lenient, digest)``) and ``unverifiable`` (why
    the entry must not be stored, or None)."""

    def __init__(self) -> None:
        self.files: dict[str, str | None] = {}
        self.values: dict[tuple[str, ...], tuple[bool, str]] = {}
        self._reasons: set[str] = set()

    @property
    def unverifiable(self) -> str | None:
        """Why the record cannot be checked (every reason, sorted, so that the text does
        not depend on the order the code ran in), or None when it can."""
        return "; ".join(sorted(self._reasons)) if self._reasons else None

    @unverifiable.setter
    def unverifiable(self, reason: str | None) -> None:
        if reason is None:
            self._reasons.clear()
        else:
            self._reasons.add(reason)

    def add_code(self, code: types.CodeType, f_globals: dict[str, Any] | None) -> None:
        """Record that ``code`` (a user function) ran with ``f_globals``, and the globals
        (and their attributes) it names."""
        if code.co_filename not in self.files:
            self.files[code.co_filename] = _file_hash(code.co_filename)
        if f_globals is None:
            self.unverifiable = f"the globals of {_code_name(code)} were not visible"
            return
        module = f_globals.get("__name__")
        if type(module) is not str or sys.modules.get(module) is None:
            self.unverifiable = f"{_code_name(code)} runs outside an imported module"
            return
        names = frozenset(code.co_names)
        for name in names:
            if name in f_globals:
                self._record((module, name), f_globals[name], names, False, 0, code)
            elif hasattr(builtins, name):
                self.values.setdefault((module, name), (False, _ABSENT))

    def _record(
        self,
        path: tuple[str, ...],
        value: Any,
        names: frozenset[str],
        lenient: bool,
        depth: int,
        code: types.CodeType,
    ) -> None:
        if path in self.values:
            return
        if isinstance(value, types.ModuleType):
            self.values[path] = (lenient, _value_digest(value, True) or "")
            if value.__name__ == _TYLO or value.__name__.startswith(_TYLO + "."):
                return  # tylo's sources are in the key
            user = _is_user_module(value)
            if user:
                file = value.__file__
                if file not in self.files:
                    self.files[file] = _file_hash(file)
            self._record_attributes(path, value, names, lenient or not user, depth, code)
            return
        digest = _value_digest(value, lenient)
        if digest is None:
            self.unverifiable = (
                f"{'.'.join(path)} ({_qualname(type(value))}) has no stable text; "
                f"read by {_where(code, path[-1])}"
            )
            return
        self.values[path] = (lenient, digest)
        if isinstance(value, type) and _is_user_class(value):
            self._record_attributes(path, value, names, lenient, depth, code)

    def _record_attributes(
        self,
        path: tuple[str, ...],
        obj: Any,
        names: frozenset[str],
        lenient: bool,
        depth: int,
        code: types.CodeType,
    ) -> None:
        if depth >= _ATTR_DEPTH:
            return
        for name in names:
            value = _attribute(obj, name)
            if value is not _ABSENT:
                self._record((*path, name), value, names, lenient, depth + 1, code)

    def to_json(self) -> dict[str, Any]:
        """The record as JSON data (stored with the entry)."""
        if self.unverifiable is not None:
            return {"unverifiable": self.unverifiable}
        return {
            "files": dict(self.files),
            "values": [[list(p), lenient, d] for p, (lenient, d) in sorted(self.values.items())],
        }

    @staticmethod
    def still_valid(record: Any) -> bool:
        """Whether ``record`` (from :meth:`to_json`, read from the cache) is well formed
        and every recorded file and value is unchanged in this process."""
        if type(record) is not dict or "unverifiable" in record:
            return False
        files, values = record.get("files", {}), record.get("values", [])
        if type(files) is not dict or type(values) is not list:
            return False
        for path, digest in files.items():
            if type(digest) is not str or _file_hash(path) != digest:
                return False
        for item in values:
            if not (
                type(item) is list
                and len(item) == 3
                and type(item[0]) is list
                and len(item[0]) >= 2
                and all(type(n) is str for n in item[0])
                and type(item[1]) is bool
                and type(item[2]) is str
            ):
                return False
            names, lenient, digest = item
            obj = sys.modules.get(names[0])
            if obj is None:
                return False
            value = vars(obj).get(names[1], _ABSENT)
            for name in names[2:]:
                value = _attribute(value, name)
            if _value_digest(value, lenient) != digest:
                return False
        return True
