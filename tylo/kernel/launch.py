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

import threading
from collections.abc import Callable, Sequence
from typing import Any

from tylo.kernel.errors import KernelArgumentError, TraceError, user_frames
from tylo.kernel.guards import check_guards
from tylo.kernel.spec import Int, ParamKind, Ptr, classify, static_key
from tylo.kernel.trace import Binding

__all__ = ["CompiledKernel", "Launcher", "make_reader"]

_DEFAULT_SMEM_LIMIT = 48 * 1024
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
            (i, bindings[i].name, bindings[i].check)
            for i in self.runtime
            if bindings[i].check is not None or bindings[i].kind is ParamKind.INT
        ]

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
        """Launch-time checks: int facts, pointer alignment, dynamic shared memory."""
        for i, name, check in self._checks:
            if isinstance(check, Ptr):
                check.check(name, values[i])
            else:
                (check or Int()).check(name, values[i], self.index_bits)
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
        from tylo.backend import driver

        self.check(values, shared, ordinal)
        fn = self._functions.get(ordinal) or self.function(ordinal)
        pack = self._packs.get(threading.get_ident()) or self.argpack()
        pack.pack(*[values[i] for i in self.runtime])
        driver.launch(fn, grid, self.block, pack, shared_bytes=shared, stream=stream)


# ---------------------------------------------------------------------------- readers

Reader = Callable[[Any], tuple[Any, Any]]


def _read_int(a: Any) -> tuple[Any, Any]:
    return int, a


def _read_float(a: Any) -> tuple[Any, Any]:
    return float, float(a)


def _read_buffer(a: Any) -> tuple[Any, Any]:
    return (a.dtype, a.device), a.ptr


def _read_torch(a: Any) -> tuple[Any, Any]:
    return (a.dtype, a.get_device()), a.data_ptr()


def _read_array(a: Any) -> tuple[Any, Any]:
    from tylo.arrays import as_device_array

    arr = as_device_array(a)
    return (arr.dtype, arr.device), arr.ptr


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
    from tylo.arrays import DeviceBuffer

    if t is DeviceBuffer:
        return kind, _read_buffer
    if t.__module__.startswith("torch") and hasattr(arg, "data_ptr"):
        return kind, _read_torch
    return kind, _read_array


def _is_int(x: Any) -> bool:
    import operator

    try:
        operator.index(x)
        return True
    except TypeError:
        return False


# ---------------------------------------------------------------------------- launcher


class Launcher:
    """``kern[grid, block]``: call it with the kernel's arguments to launch."""

    __slots__ = ("block", "grid", "kernel")

    def __init__(self, kernel: Any, grid: Any, block: tuple[int, int, int]) -> None:
        self.kernel = kernel
        self.grid = grid
        self.block = block

    def __call__(self, *args: Any, shared: int = 0, stream: Any = None, **kwargs: Any) -> None:
        k = self.kernel
        if kwargs or len(args) != k.nparams:
            args = k.bind(args, kwargs)
        readers = k.readers
        keys = []
        values = []
        for i, a in enumerate(args):
            r = readers[i].get(type(a))
            if r is None:
                r = k.reader(i, a)
            key, value = r(a)
            keys.append(key)
            values.append(value)
        spec = (self.block, *keys)
        hit = k.cache.get(spec)
        if hit is None:
            try:
                hit = k.cache[spec] = k.specialize_for(args, keys, self.block)
            except TraceError as err:
                raise err.with_traceback(user_frames(err.__traceback__)) from None
        hit[0].launch(self.grid, values, shared, stream, hit[1])

    def __repr__(self) -> str:
        return f"{self.kernel.name}[{self.grid}, {self.block}]"
