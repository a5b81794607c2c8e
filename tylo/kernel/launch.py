"""Compiled specializations and the per-launch fast path.

A :class:`CompiledKernel` is one specialization: its compiled module (every stage), the
entry name, which Python parameters are runtime arguments, the checks launches must pass,
and (once launched) the loaded function and a prebuilt
:class:`~tylo.backend.driver.ArgPack`.

The launch path (``kern[grid, block](*args)``) is: one pass over the arguments with a
reader chosen per (parameter, argument type) that returns a key part and the value to
pass (``(dtype, device)`` and ``data_ptr()`` for a torch tensor, ``None`` and the int for
an int...), one dict lookup of the specialization, the checks (int facts, alignment,
dynamic shared memory), one ``struct.pack_into`` and ``cuLaunchKernel``.
"""

from __future__ import annotations

import functools
import operator
import threading
from collections.abc import Callable, Sequence
from typing import Any

from tylo.kernel.errors import KernelArgumentError, TraceError, user_frames
from tylo.kernel.guards import check_guards
from tylo.kernel.spec import Int, ParamKind, Ptr, classify, static_key
from tylo.kernel.trace import Binding

__all__ = ["CompiledKernel", "Launcher", "make_reader"]

_DEFAULT_SMEM_LIMIT = 48 * 1024  # dynamic shared bytes a launch may use without opt-in
_DEFAULT_INT = Int()
_targets: dict[int, Any] = {}


def device_target(ordinal: int) -> Any:
    """The :class:`~tylo.target.Target` of device ``ordinal`` (read once per process)."""
    t = _targets.get(ordinal)
    if t is None:
        from tylo.target import Target

        t = _targets[ordinal] = Target.from_device(ordinal)
    return t


class CompiledKernel:
    """One compiled specialization of a :class:`~tylo.kernel.decorator.Kernel`.

    ``llvm``, ``ptx``, ``cubin``, ``sass`` (on demand) are the stages; ``resources`` the
    entry's :class:`~tylo.backend.resources.Resources` (registers, shared memory, spills,
    stack); ``timings`` splits the cold compile into ``trace_s``, ``ir_s``, ``nvvm_s``,
    ``link_s`` (and ``cache``: how the module was obtained); ``module`` is the toolchain's
    :class:`~tylo.backend.pipeline.CompiledModule`.
    """

    def __init__(
        self,
        *,
        name: str,
        module: Any,
        entry: str,
        bindings: Sequence[Binding],
        runtime: Sequence[int],
        block: tuple[int, int, int],
        index_bits: int,
        dynamic_shared_bytes: int,
        timings: dict[str, Any],
        guards: Sequence[Any] = (),
    ) -> None:
        self.name = name
        self.module = module
        self.entry = entry
        self.bindings = tuple(bindings)
        self.runtime = tuple(runtime)
        self.block = block
        self.index_bits = index_bits
        self.dynamic_shared_bytes = dynamic_shared_bytes
        self.timings = timings
        self.guards = tuple(guards)
        self._guards = [(g, g.compile()) for g in self.guards]
        self._functions: dict[int, Any] = {}
        self._packs: dict[int, Any] = {}
        self._smem_limit: dict[int, int] = {}
        self._checks = [
            (i, bindings[i].name, bindings[i].check or _DEFAULT_INT)
            for i in self.runtime
            if bindings[i].check is not None or bindings[i].kind is ParamKind.INT
        ]
        self._fast_check = self._make_fast_check()
        # the runtime arguments' values, as a tuple, from all of a launch's values
        getter = operator.itemgetter(*self.runtime) if self.runtime else (lambda v: ())
        self._runtime_values = (lambda v: (getter(v),)) if len(self.runtime) == 1 else getter

    def _make_fast_check(self) -> Callable[[Sequence[Any], int], bool]:
        """One generated function that is True when every launch check passes (the slow
        :meth:`check` then runs only to explain a failure)."""
        terms = [f"{_DEFAULT_SMEM_LIMIT} >= shared >= {self.dynamic_shared_bytes}"]
        limit = (1 << (self.index_bits - 1)) - 1
        for i, _, check in self._checks:
            if isinstance(check, Ptr):
                if check.align is not None:
                    terms.append(f"v[{i}] % {check.align} == 0")
            else:
                hi = limit if check.max is None else min(limit, check.max)
                terms.append(f"{check.min} <= v[{i}] <= {hi}")
                if check.multiple_of > 1:
                    terms.append(f"v[{i}] % {check.multiple_of} == 0")
        terms += [f"({g.source})" for g in self.guards]
        source = f"lambda v, shared: {' and '.join(terms)}"
        return eval(source, {"__builtins__": {"min": min, "max": max}})

    # ------------------------------------------------------------------ stages

    @property
    def llvm(self) -> str:
        return self.module.llvm

    @property
    def ptx(self) -> str:
        return self.module.ptx

    @property
    def cubin(self) -> bytes:
        return self.module.cubin

    @property
    def sass(self) -> str:
        """The entry's SASS (nvdisasm; linker-added helpers left out)."""
        return self.module.sass_for(self.entry)

    @property
    def resources(self) -> Any:
        return self.module.resources.get(self.entry)

    @property
    def target(self) -> Any:
        return self.module.target

    def stage(self, name: str) -> str | bytes:
        """A stage by name ('llvm', 'ptx', 'cubin', 'sass')."""
        return self.sass if name == "sass" else self.module.stage(name)

    def __repr__(self) -> str:
        return (
            f"CompiledKernel({self.name!r}, target={self.target}, block={self.block}, "
            f"cache={self.timings.get('cache')})"
        )

    # ------------------------------------------------------------------ launching

    def function(self, ordinal: int = 0) -> Any:
        """The loaded entry on device ``ordinal``."""
        fn = self._functions.get(ordinal)
        if fn is None:
            fn = self._functions[ordinal] = self.module.load(ordinal).function(self.entry)
        return fn

    def argpack(self) -> Any:
        """This thread's ArgPack for the entry's signature."""
        tid = threading.get_ident()
        pack = self._packs.get(tid)
        if pack is None:
            from tylo.backend import driver

            kinds = []
            for i in self.runtime:
                b = self.bindings[i]
                if b.kind is ParamKind.POINTER:
                    kinds.append(driver.PTR)
                elif b.kind is ParamKind.INT:
                    kinds.append(driver.I64 if self.index_bits == 64 else driver.I32)
                else:
                    kinds.append(driver.F64 if b.dtype.bits == 64 else driver.F32)  # type: ignore[union-attr]
            pack = self._packs[tid] = driver.ArgPack(kinds)
        return pack

    def check(self, values: Sequence[Any], shared: int, ordinal: int) -> None:
        """Launch-time checks: int facts, pointer alignment, guards, dynamic shared
        memory (raises :class:`KernelArgumentError` naming the first violation)."""
        for i, name, check in self._checks:
            if isinstance(check, Ptr):
                check.check(name, values[i])
            else:
                check.check(name, values[i], self.index_bits)
        if self._guards:
            check_guards(self._guards, values, self.name)
        if shared < self.dynamic_shared_bytes:
            raise KernelArgumentError(
                f"{self.name}: the kernel's dynamic shared memory views need "
                f"{self.dynamic_shared_bytes} bytes, but the launch gives shared={shared}"
            )
        if shared > self._smem_limit.get(ordinal, _DEFAULT_SMEM_LIMIT):
            self.function(ordinal).set_max_dynamic_shared_memory(shared)
            self._smem_limit[ordinal] = shared

    def launch(
        self, grid: Any, values: Sequence[Any], shared: int, stream: Any, ordinal: int
    ) -> None:
        """Check ``values`` (one per Python parameter), pack the runtime ones, launch."""
        if not self._fast_check(values, shared):
            self.check(values, shared, ordinal)
        fn = self._functions.get(ordinal) or self.function(ordinal)
        pack = self._packs.get(threading.get_ident()) or self.argpack()
        pack.pack(*self._runtime_values(values))
        (_DRIVER or _driver()).launch(
            fn, grid, self.block, pack, shared_bytes=shared, stream=stream
        )


def _driver() -> Any:
    global _DRIVER
    if _DRIVER is None:
        from tylo.backend import driver

        _DRIVER = driver
    return _DRIVER


_DRIVER: Any = None


class Hot:
    """A specialization bound to a device: what the launch fast path needs at hand.

    The first launch in a thread goes through :meth:`CompiledKernel.launch` (every check,
    the toolchain's :func:`~tylo.backend.driver.launch`, which makes the device's context
    current and checks the packed arguments against the kernel); it then records the
    function handle and that thread's ArgPack, so later launches from the thread with
    the legacy default stream (or an int stream handle) are: the generated checks, one
    ``pack_into``, one ``cuLaunchKernel``.
    """

    __slots__ = ("address", "entry", "fast", "handle", "ordinal", "pack", "thread", "values_of")

    def __init__(self, entry: CompiledKernel, ordinal: int) -> None:
        self.entry = entry
        self.ordinal = ordinal
        self.fast = entry._fast_check
        self.values_of = entry._runtime_values
        self.thread = -1  # no fast launches before a checked one in the same thread
        self.handle: Any = None
        self.pack: Any = None
        self.address = 0

    def slow(self, grid: Any, values: Sequence[Any], shared: int, stream: Any) -> None:
        """A fully checked launch; afterwards this thread may take the fast path."""
        self.entry.launch(grid, values, shared, stream, self.ordinal)
        pack = self.entry.argpack()
        self.handle = self.entry.function(self.ordinal).handle
        self.pack, self.address = _packer(pack), pack.address
        self.thread = threading.get_ident()

    def failed(self, err: Any) -> None:
        _driver().check((err,), "cuLaunchKernel")


def _packer(pack: Any) -> Callable[..., Any]:
    """``pack.pack`` without its per-call checks: ``struct.pack_into`` bound to the
    ArgPack's buffer (the values passed the generated launch checks already). Falls back
    to ``pack.pack`` if the ArgPack does not expose its struct and buffer."""
    packer = getattr(pack, "_struct", None)
    buffer = getattr(pack, "_buffer", None)
    if packer is None or buffer is None or getattr(pack, "_raw", ()):
        return pack.pack
    return functools.partial(packer.pack_into, buffer, 0)


def cu_launch() -> Any:
    """``cuda.bindings.driver.cuLaunchKernel`` (imported on first use)."""
    global _CU_LAUNCH
    if _CU_LAUNCH is None:
        from cuda.bindings import driver as cu

        _CU_LAUNCH = cu.cuLaunchKernel
    return _CU_LAUNCH


_CU_LAUNCH: Any = None


def launch_dims(grid: Any, block: tuple[int, int, int]) -> tuple[int, ...] | None:
    """``(gx, gy, gz, bx, by, bz)`` for a valid grid, else None (the checked path then
    reports the problem)."""
    dims = (grid,) if type(grid) is int else tuple(grid) if isinstance(grid, (tuple, list)) else ()
    if not 1 <= len(dims) <= 3 or not all(type(d) is int and d > 0 for d in dims):
        return None
    return (*dims, 1, 1)[:3] + block


# ---------------------------------------------------------------------------- readers

Reader = Callable[[Any], tuple[Any, Any]]


def _read_int(a: Any) -> tuple[Any, Any]:
    return int, a


def _read_float(a: Any) -> tuple[Any, Any]:
    return float, float(a)


def _read_buffer(a: Any) -> tuple[Any, Any]:
    return (a.dtype.name, a.device), a.ptr


def _read_torch(a: Any) -> tuple[Any, Any]:
    return (a.dtype, a.get_device()), a.data_ptr()


def _array_reader(name: str) -> Reader:
    def read(a: Any) -> tuple[Any, Any]:
        from tylo.arrays import ArrayError, as_device_array

        try:
            arr = as_device_array(a)
        except ArrayError as err:
            raise KernelArgumentError(f"argument {name!r}: {err}") from None
        return (arr.dtype.name, arr.device), arr.ptr

    return read


def make_reader(annotation: Any, arg: Any, name: str) -> tuple[ParamKind, Reader]:
    """The reader for arguments of ``type(arg)`` given to parameter ``name``."""
    kind = classify(annotation, arg, name)
    t = type(arg)
    if kind is ParamKind.STATIC:
        return kind, lambda a: (static_key(name, a), a)
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


# ---------------------------------------------------------------------------- launcher


class Launcher:
    """``kern[grid, block]``: call it with the kernel's arguments to launch.

    Each kernel gets its own subclass whose ``__call__`` is generated for its number of
    parameters (:func:`launcher_class`): the per-argument reads are unrolled, so a launch
    of a cached specialization is a handful of dict lookups and attribute reads before
    packing and ``cuLaunchKernel``.
    """

    __slots__ = ("block", "dims", "grid", "kernel")

    def __init__(self, kernel: Any, grid: Any, block: tuple[int, int, int]) -> None:
        self.kernel = kernel
        self.grid = grid
        self.block = block
        self.dims = launch_dims(grid, block)

    def __repr__(self) -> str:
        return f"{self.kernel.name}[{self.grid}, {self.block}]"

    def _miss(self, args: Sequence[Any], spec: tuple[Any, ...]) -> Hot:
        k = self.kernel
        try:
            hot = k.cache[spec] = Hot(*k.specialize_for(args, spec[1:], self.block))
        except TraceError as err:
            raise err.with_traceback(user_frames(err.__traceback__)) from None
        return hot


_CALL_TEMPLATE = """
def __call__(self, *args, shared=0, stream=None, **kwargs):
    k = self.kernel
    if kwargs or len(args) != {n}:
        args = k.bind(args, kwargs)
    {unpack}
    readers = k.readers
{reads}
    spec = (self.block, {keys})
    hot = k.cache.get(spec)
    if hot is None:
        hot = self._miss(args, spec)
    v = ({values})
    if (hot.thread == get_ident() and (stream is None or type(stream) is int)
            and self.dims is not None and hot.fast(v, shared)):
        hot.pack(*hot.values_of(v))
        err, = launch(hot.handle, *self.dims, shared, stream, hot.address, 0)
        if err:
            hot.failed(err)
    else:
        hot.slow(self.grid, v, shared, stream)
"""
_READ_TEMPLATE = """    r = readers[{i}].get(type(a{i}))
    if r is None:
        r = k.reader({i}, a{i})
    k{i}, v{i} = r(a{i})
"""


def launcher_class(nparams: int) -> type[Launcher]:
    """A :class:`Launcher` subclass with ``__call__`` unrolled for ``nparams`` arguments
    (made on the first launch of a kernel with that many parameters; it binds
    ``cuLaunchKernel``, so compiling alone never imports the driver bindings)."""
    launch = cu_launch()
    cls = _LAUNCHERS.get((nparams, launch))
    if cls is None:
        n = nparams
        source = _CALL_TEMPLATE.format(
            n=n,
            unpack=(", ".join(f"a{i}" for i in range(n)) + ", = args") if n else "pass",
            reads="".join(_READ_TEMPLATE.format(i=i) for i in range(n)),
            keys="".join(f"k{i}, " for i in range(n)),
            values="".join(f"v{i}, " for i in range(n)),
        )
        namespace: dict[str, Any] = {"get_ident": threading.get_ident, "launch": launch}
        exec(compile(source, f"<tylo launcher/{n}>", "exec"), namespace)  # noqa: S102
        cls = type(
            f"Launcher{n}", (Launcher,), {"__call__": namespace["__call__"], "__slots__": ()}
        )
        _LAUNCHERS[(nparams, launch)] = cls
    return cls


_LAUNCHERS: dict[tuple[int, Any], type[Launcher]] = {}
