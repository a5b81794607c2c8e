"""What repeated launches of a cached specialization do.

A :class:`Hot` is a specialization bound to a device. The first launch of it in a thread
is fully checked (:meth:`CompiledKernel.launch
<tylo.kernel.launch.CompiledKernel.launch>`: every check, the driver's checked launch,
which makes the device's context current and checks the packed arguments against the
kernel). It then gives the thread a :class:`~tylo.backend.launchex.LaunchRecord`, and
later launches from that thread take one of two fast paths:

- the *reader path*: the launcher reads the arguments (a reader per argument type),
  looks the specialization up, runs the generated checks, packs the record and calls
  ``cuLaunchKernelEx``;
- the *inline path*: a function generated per (specialization, thread, argument types)
  (:meth:`Hot.inline_launch`) that tests the arguments against what was seen (types,
  dtypes, devices, static values, a tensor map's plan and its array's device) and
  the array checks of the readers (a DeviceArray's ``flags``, a tensor's
  ``is_contiguous()``; a null address goes to the reader path), reads the values (a
  tensor map's ``data``: bytes of exactly 128, else the reader path decides), runs the
  same checks and launches.
  The launcher keeps the last one it used and tries it first; when its guards fail it
  returns False and the reader path decides. With the C extension (``tylo._launch``) the
  function is a C object and the launcher's base type calls it without entering Python:
  about 0.3 us per launch on a 2-core CPU besides the driver call (1.4 us in Python).

A kernel's by-value byte parameters (TMA tensor maps, ``raw(128, 64)``) are packed into
the record like the others (:mod:`tylo.backend.launchex`), so kernels taking tensor maps
use both fast paths.

Only the legacy default stream (``stream=None`` or 0) and integer stream handles take the
fast paths; any other stream object, an invalid grid, or a failed check goes through the
checked launch, which converts or reports it.
"""

from __future__ import annotations

import os
import re
import struct
import threading
from collections.abc import Sequence
from typing import Any

from tylo.kernel.readers import TENSOR_MAP_BYTES, ArgSpec, inline_spec, tensor_map_device

__all__ = ["ACCELERATED", "Hot", "make_inline"]

_MISSING = object()
_VALUE_INDEX = re.compile(r"\bv\[(\d+)\]")


class Hot:
    """A specialization bound to a device (see the module doc)."""

    __slots__ = (
        "attrs",
        "bounds",
        "entry",
        "fast",
        "handle",
        "inline",
        "launch",
        "ordinal",
        "records",
        "values_of",
    )

    def __init__(self, entry: Any, ordinal: int) -> None:
        self.entry = entry
        self.ordinal = ordinal
        self.fast = entry._fast_check
        self.values_of = entry._runtime_values
        # the bounds guards' check (tylo.kernel.bounds_check), or None: a specialization
        # with guards takes the Python inline path, which tests them (the C one does not)
        self.bounds = entry.check_bounds
        self.attrs = entry.launch_attributes  # (attrs, numAttrs) of the CUlaunchConfig
        self.handle = 0
        self.launch: Any = None  # cuLaunchKernelEx, once a checked launch succeeded
        self.records: dict[int, Any] = {}  # thread id -> LaunchRecord
        self.inline: dict[tuple[Any, ...], Any] = {}  # (thread, types) -> function or None

    def slow(self, grid: Any, values: Sequence[Any], shared: int, stream: Any) -> None:
        """A fully checked launch; afterwards this thread may take the fast paths."""
        self.entry.launch(grid, values, shared, stream, self.ordinal)
        tid = threading.get_ident()
        if tid not in self.records:
            from tylo.backend import launchex

            signature = self.entry.argpack().signature
            self.launch = launchex.launch_ex()
            if self.launch is not None:
                self.handle = int(self.entry.function(self.ordinal).handle)
                if len(self.records) > 64:  # threads come and go
                    self.records.clear()
                    self.inline.clear()
                self.records[tid] = launchex.LaunchRecord(signature)

    def failed(self, err: Any) -> None:
        from tylo.backend import driver

        driver.check((err,), "cuLaunchKernelEx")

    def inline_launch(self, readers: Sequence[Any], args: Sequence[Any]) -> Any:
        """The inline launch function for arguments like ``args`` from this thread (made
        once per argument types), or None if one of them cannot be inlined."""
        key = (threading.get_ident(), *map(type, args))
        fn = self.inline.get(key, _MISSING)
        if fn is _MISSING:
            specs = []
            for i, a in enumerate(args):
                reader = readers[i].get(type(a))
                spec = None if reader is None else inline_spec(reader, a)
                if spec is None:
                    break
                specs.append(spec)
            else:
                record = self.records.get(key[0])
                if record is not None:
                    fn = make_inline(self, record, key[0], specs)
            if fn is _MISSING:
                fn = None
            self.inline[key] = fn
        return fn


def make_inline(hot: Hot, record: Any, tid: int, specs: Sequence[ArgSpec]) -> Any:
    """The inline launch function ``f(dims, args, shared, stream) -> bool`` for one
    specialization, thread and argument types: the C one (:data:`ACCELERATED`) or the
    generated Python one, which do the same."""
    if (
        ACCELERATED
        and (hot.bounds is None or getattr(_accel, "LAUNCH_GUARDS", 0))  # see _c_inline
        and all(
            s.kind not in ("buffer", "owned", "torch", "tensor_map") or type(s.device) is int
            for s in specs
        )
        and (  # an extension built before tensor maps: the Python function takes them
            getattr(_accel, "TENSOR_MAPS", 0) or all(s.kind != "tensor_map" for s in specs)
        )
    ):
        return _c_inline(hot, record, tid, specs)
    return _python_inline(hot, record, tid, specs)


def _c_inline(hot: Hot, record: Any, tid: int, specs: Sequence[ArgSpec]) -> Any:
    from tylo.backend import driver, launchex

    entry = hot.entry
    ints, aligns = entry.check_values()
    guard = None
    if entry.guards:  # closures built from the guards' validated trees: nothing is eval'd
        from tylo.kernel.guards import compile_guards

        guard = compile_guards(entry.guards)
    if hot.bounds is not None:  # and the bounds guards, on the arrays' extents
        guard = _launch_guard(guard, hot.bounds.passes)
    slots = tuple(
        (i, p.code, off) for i, p, off in zip(entry.runtime, record.signature, record.offsets)
    )
    return _accel.InlineLaunch(
        launchex.launch_ex_address(),
        hot.handle,
        tid,
        hot.ordinal,
        driver._tls,
        hot.failed,
        guard,
        entry._smem_limit,
        entry.dynamic_shared_bytes,
        driver.DEFAULT_DYNAMIC_SHARED_LIMIT,
        tuple((_KINDS[s.kind], s.type, s.dtype, s.device, s.value, s.refuse) for s in specs),
        slots,
        tuple(ints),
        tuple(aligns),
        record.nbytes,
        # (attrs, num_attrs) only for a cluster kernel: an extension built before clusters
        # takes the other launches as it did
        *(hot.attrs if hot.attrs[1] else ()),
    )


def _launch_guard(guard: Any, bounds_ok: Any) -> Any:
    """The C path's guard for a specialization with bounds guards: called on ``(values,
    args, dims)`` (it has ``tylo_launch_guard``), true when the kernel's guards and the
    bounds guards hold; false sends the launch to the checked path, which raises."""

    def check(values: Any, args: Any, dims: Any) -> bool:
        return (guard is None or bool(guard(values))) and bounds_ok(dims, args, values)

    check.tylo_launch_guard = True  # type: ignore[attr-defined]
    return check


_KINDS = {"buffer": 0, "torch": 1, "int": 2, "float": 3, "static": 4, "owned": 5, "tensor_map": 6}

# (guard, value) per argument kind; {a} is the argument, {c} the prefix of its constants
_PY_FORMS = {
    "buffer": ("type({a}) is {c}t and {a}.dtype is {c}d and {a}.device == {c}e", "{a}.ptr"),
    "owned": ("type({a}) is {c}t and {a}.dtype is {c}d and {a}.device == {c}e", "{a}.ptr"),
    "torch": (
        "type({a}) is {c}t and {a}.dtype is {c}d and {a}.get_device() == {c}e",
        "{a}.data_ptr()",
    ),
    "int": ("type({a}) is int", "{a}"),
    "float": ("type({a}) is {c}t", "float({a})"),
    "static": ("type({a}) is {c}t and ({a} is {c}v or {a} == {c}v)", "{a}"),
    # a tensor map: the plan seen (or an equal one, as the key compares) and its array's
    # device; its bytes are checked with the values (exactly TENSOR_MAP_BYTES of bytes,
    # else the reader path decides)
    "tensor_map": (
        "type({a}) is {c}t and (({c}p := getattr({a}, 'plan', None)) is {c}v or {c}p == {c}v)"
        " and {c}m({a}) == {c}e",
        "getattr({a}, 'data', None)",
    ),
}
# appended to a pointer's guard when its ArgSpec refuses layouts (a DeviceBuffer is
# contiguous and writable by construction)
_PY_REFUSE = {
    "buffer": " and not {a}.flags & {c}r",
    "owned": "",
    "torch": " and {a}.is_contiguous()",
}

_TEMPLATE = """
def launch_inline(dims, args, shared, stream):
    if len(args) != {n} or get_ident() != TID or tls.ordinal != ORDINAL:
        return False
    {unpack}
    if not ({guards}):
        return False
    if stream is None:
        stream = 0
    elif type(stream) is not int:
        return False
{values}
    if not ({checks}):
        return False
    try:
        pack(*dims, shared, stream, ATTRS, NATTRS{packed})
    except struct_error:  # a value the parameter cannot hold: the checked path says so
        return False
    err = launch(CONFIG, HANDLE, PARAMS, None)
    if err:
        failed(err)
    return True
"""


def _python_inline(hot: Hot, record: Any, tid: int, specs: Sequence[ArgSpec]) -> Any:
    from tylo.backend import driver
    from tylo.backend.driver import DEFAULT_DYNAMIC_SHARED_LIMIT
    from tylo.kernel.guards import compile_guards

    entry = hot.entry
    n = len(specs)
    names: dict[str, Any] = {
        "get_ident": threading.get_ident,
        "tls": driver._tls,
        "TID": tid,
        "ORDINAL": hot.ordinal,
        "pack": record.pack,
        "launch": hot.launch,
        "CONFIG": record.config,
        "HANDLE": hot.handle,
        "PARAMS": record.params,
        "failed": hot.failed,
        "SMEM": entry._smem_limit,
        "ATTRS": hot.attrs[0],
        "NATTRS": hot.attrs[1],
        "struct_error": struct.error,
    }
    guards, values, value_checks = [], [], []
    for i, spec in enumerate(specs):
        prefix = f"c{i}_"
        guard, value = _PY_FORMS[spec.kind]
        if spec.kind == "float" and spec.type is float:
            value = "{a}"
        if spec.refuse:  # the array's layout: see ArgSpec
            guard += _PY_REFUSE[spec.kind]
        if spec.kind in _PY_REFUSE:  # a null pointer: the reader path decides
            value_checks.append(f"v{i}")
        if spec.kind == "tensor_map":  # bytes of exactly its size (the record checks too)
            value_checks.append(f"type(v{i}) is bytes and len(v{i}) == {TENSOR_MAP_BYTES}")
        guards.append(guard.format(a=f"a{i}", c=prefix))
        values.append(f"    v{i} = {value.format(a=f'a{i}', c=prefix)}\n")
        consts = {
            "t": spec.type,
            "d": spec.dtype,
            "e": spec.device,
            "v": spec.value,
            "r": spec.refuse,
            "m": tensor_map_device,
        }
        names.update({prefix + k: v for k, v in consts.items()})
    names["GUARDS"] = compile_guards(entry.guards)
    call = "GUARDS((" + "".join(f"v{i}, " for i in range(n)) + "))"
    checks = value_checks + [_VALUE_INDEX.sub(r"v\1", t) for t in entry.check_terms(call)]
    if hot.bounds is not None:  # the bounds guards, on the arrays' extents
        names["BOUNDS"] = hot.bounds.passes
        checks.append("BOUNDS(dims, args, (" + "".join(f"v{i}, " for i in range(n)) + "))")
    dyn = entry.dynamic_shared_bytes
    checks.append(
        ("shared == 0 or " if dyn == 0 else "")
        + f"({dyn} <= shared <= {DEFAULT_DYNAMIC_SHARED_LIMIT} or "
        f"{dyn} <= shared <= SMEM.get(ORDINAL, 0))"
    )
    source = _TEMPLATE.format(
        n=n,
        unpack=(", ".join(f"a{i}" for i in range(n)) + ", = args") if n else "pass",
        guards=" and ".join(f"({g})" for g in guards) or "True",
        values="".join(values),
        checks=" and ".join(f"({c})" for c in checks),
        packed="".join(f", v{i}" for i in entry.runtime),
    )
    exec(compile(source, f"<tylo inline launch of {entry.name}>", "exec"), names)  # noqa: S102
    return names["launch_inline"]


try:
    from tylo import _launch as _accel
except ImportError:  # not built (no C compiler at install): the Python function is used
    _accel = None

#: True when the inline launch path runs in C (the optional extension ``tylo._launch``).
ACCELERATED = _accel is not None and os.environ.get("TYLO_PURE_PYTHON_LAUNCH", "") != "1"
