"""Compiled specializations and the launcher.

A :class:`CompiledKernel` is one specialization: its compiled module (every stage), the
entry name, which Python parameters are runtime arguments, the checks launches must pass,
and (once launched) the loaded function and a prebuilt
:class:`~tylo.backend.driver.ArgPack`.

The launch path (``kern[grid, block](*args)``): the launcher first tries the inline
function it last used (:mod:`tylo.kernel.fastpath`); otherwise one pass over the
arguments with a reader chosen per (parameter, argument type) (:mod:`tylo.kernel.readers`)
gives the specialization key and the values, one dict lookup finds the specialization,
the generated checks run (int facts, alignment, guards, dynamic shared memory), and the
thread's launch record is packed and launched with ``cuLaunchKernelEx``
(:mod:`tylo.backend.launchex`). The first launch in a thread is the fully checked one.
A cluster launch (``kern[grid, block, cluster](*args)``, :mod:`tylo.kernel.clusters`) takes
the same paths; its cluster shape is part of the specialization and its launch record
carries the cluster attribute.
"""

from __future__ import annotations

import operator
import struct
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tylo.errors import TyloError
from tylo.kernel import fastpath
from tylo.kernel.errors import KernelArgumentError, TraceError, user_frames
from tylo.kernel.fastpath import Hot
from tylo.kernel.guards import check_guards, compile_guards
from tylo.kernel.readers import make_reader
from tylo.kernel.spec import Binding, Int, ParamKind, Ptr

__all__ = ["Alignment", "CompiledKernel", "Launcher", "make_reader"]

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


@dataclass(frozen=True)
class Alignment:
    """What a pointer parameter's address must be a multiple of: ``align``, the larger
    of the declared ``tylo.Ptr(align=...)`` (``declared``, 1 when none) and the element
    size of ``dtype`` (the kernel's loads and stores assume whole, aligned elements)."""

    align: int
    dtype: Any
    declared: int

    @staticmethod
    def of(binding: Binding) -> Alignment:
        """The alignment a specialization's pointer ``binding`` was compiled to assume."""
        check = binding.check
        declared = check.align if isinstance(check, Ptr) and check.align else 1
        return Alignment(max(declared, binding.dtype.nbytes), binding.dtype, declared)

    def check(self, name: str, address: int) -> None:
        """Raise :class:`KernelArgumentError` unless ``address % align == 0``."""
        if not address % self.align:
            return
        if self.declared == self.align:
            Ptr(align=self.declared).check(name, address)
        raise KernelArgumentError(
            f"argument {name!r}: address 0x{address:x} is not a multiple of "
            f"{self.align} bytes, the size of its {self.dtype} elements, which the kernel's "
            "loads and stores assume; pass an array that starts on an element boundary "
            "(not a view at a byte offset)"
        )


class CompiledKernel:
    """One compiled specialization of a :class:`~tylo.kernel.decorator.Kernel`.

    ``cluster`` is the static cluster shape of a cluster kernel (None: no clusters).
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
        cluster: tuple[int, int, int] | None = None,
        bounds: Sequence[Any] = (),
        access_counts: tuple[int, int, int] | None = None,
    ) -> None:
        from tylo.backend import launchex
        from tylo.kernel.bounds_check import make_checker

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
        # the bounds guards of guarded accesses, and the check of all of them
        # (check(dims, args, values); None without guards: the launch pays nothing)
        self.bounds = tuple(bounds)
        self.check_bounds = make_checker(name, self.bounds, self.bindings)
        # (proved, guarded, unproved) accesses of the trace (tylo.kernel.accesses), where known
        self.access_counts = access_counts
        self.cluster = cluster
        # (attrs, numAttrs) of the fast paths' CUlaunchConfig
        self.launch_attributes = (
            launchex.NO_ATTRIBUTES if cluster is None else launchex.cluster_attribute(cluster)
        )
        self._guards = [(g, g.compile()) for g in self.guards]
        self._functions: dict[int, Any] = {}
        self._packs: dict[int, Any] = {}
        self._smem_limit: dict[int, int] = {}
        self._non_portable: set[int] = set()
        self._checks: list[tuple[int, str, Any]] = []
        for i in self.runtime:
            b = bindings[i]
            if b.kind is ParamKind.INT:
                self._checks.append((i, b.name, b.check or _DEFAULT_INT))
            elif b.kind is ParamKind.POINTER:
                a = Alignment.of(b)
                if a.align > 1:
                    self._checks.append((i, b.name, a))
        self._fast_check = self._make_fast_check()
        # the runtime arguments' values, as a tuple, from all of a launch's values
        getter = operator.itemgetter(*self.runtime) if self.runtime else (lambda v: ())
        self._runtime_values = (lambda v: (getter(v),)) if len(self.runtime) == 1 else getter

    @classmethod
    def from_trace(
        cls,
        result: Any,
        kernel: Any,
        bindings: Sequence[Binding],
        block: tuple[int, int, int],
        *,
        module: Any,
        timings: dict[str, Any],
        cluster: tuple[int, int, int] | None = None,
    ) -> CompiledKernel:
        """The specialization a trace ``result`` of ``kernel`` describes, with ``module``
        (its compiled code; None where only its launch checks are wanted)."""
        return cls(
            name=kernel.name,
            module=module,
            entry=result.entry,
            bindings=bindings,
            runtime=result.runtime,
            block=block,
            index_bits=kernel.index_bits,
            dynamic_shared_bytes=result.dynamic_shared_bytes,
            timings=timings,
            guards=result.guards,
            bounds=result.bounds,
            access_counts=result.accesses.counts(),
            cluster=cluster,
        )

    def check_terms(self, guard_call: str = "GUARDS(v)") -> list[str]:
        """The launch checks on the values ``v[i]`` as Python expressions (int facts,
        alignment) and, when the kernel has guards, ``guard_call``: a call of the guards'
        compiled closures (:func:`~tylo.kernel.guards.compile_guards`, bound as ``GUARDS``
        where the expressions run), so no guard is ever rendered into evaluated code; all
        true means the checked path would accept the values."""
        terms = []
        limit = (1 << (self.index_bits - 1)) - 1
        for i, _, check in self._checks:
            if isinstance(check, Alignment):
                terms.append(f"v[{i}] % {check.align} == 0")
            else:
                hi = limit if check.max is None else min(limit, check.max)
                terms.append(f"{check.min} <= v[{i}] <= {hi}")
                if check.multiple_of > 1:
                    terms.append(f"v[{i}] % {check.multiple_of} == 0")
        return terms + ([guard_call] if self.guards else [])

    def check_values(self) -> tuple[list[tuple[int, int, int, int]], list[tuple[int, int]]]:
        """The launch checks as data (the guards aside): ``(index, lo, hi, multiple)``
        per runtime int and ``(index, align)`` per pointer whose alignment is more than
        one byte (the C inline path)."""
        ints, aligns = [], []
        limit = (1 << (self.index_bits - 1)) - 1
        for i, _, check in self._checks:
            if isinstance(check, Alignment):
                aligns.append((i, check.align))
            else:
                hi = limit if check.max is None else min(limit, check.max)
                ints.append((i, check.min, hi, check.multiple_of))
        return ints, aligns

    def _make_fast_check(self) -> Callable[[Sequence[Any], int, int], bool]:
        """One generated function ``(values, shared, ordinal)`` that is True when every
        launch check passes (the slow :meth:`check` then runs only to explain a
        failure). Dynamic shared memory may exceed 48 KB once the function's limit was
        raised on that device."""
        dyn = self.dynamic_shared_bytes
        terms = [
            f"({dyn} <= shared <= {_DEFAULT_SMEM_LIMIT} or "
            f"{dyn} <= shared <= smem.get(ordinal, 0))",
            *self.check_terms(),
        ]
        source = f"lambda v, shared, ordinal: {' and '.join(terms)}"
        scope = {
            "__builtins__": {"min": min, "max": max},
            "smem": self._smem_limit,
            "GUARDS": compile_guards(self.guards),
        }
        return eval(source, scope)  # noqa: S307 - tylo's own int checks, no cached text

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
        cluster = "" if self.cluster is None else f", cluster={self.cluster}"
        return (
            f"CompiledKernel({self.name!r}, target={self.target}, block={self.block}{cluster}, "
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
                elif b.kind is ParamKind.TENSOR_MAP:
                    kinds.append(driver.raw(128, 64))  # CUtensorMap: 128 bytes, 64-aligned
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
            if isinstance(check, Alignment):
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
        if not self._fast_check(values, shared, ordinal):
            self.check(values, shared, ordinal)
        fn = self._functions.get(ordinal) or self.function(ordinal)
        pack = self._packs.get(threading.get_ident()) or self.argpack()
        pack.pack(*self._runtime_values(values))
        if self.cluster is None:
            (_DRIVER or _driver()).launch(
                fn, grid, self.block, pack, shared_bytes=shared, stream=stream
            )
        else:
            self._launch_cluster(fn, grid, pack, shared, stream, ordinal)

    def _launch_cluster(
        self, fn: Any, grid: Any, pack: Any, shared: int, stream: Any, ordinal: int
    ) -> None:
        """The checked launch of a cluster kernel (:func:`tylo.backend.launchex.launch_cluster`),
        after the grid was checked to be whole clusters; a cluster above the portable size
        first opts the function in (once per device)."""
        from tylo.backend import launchex
        from tylo.kernel import clusters

        dims = launch_dims(grid, self.block)
        if dims is not None:
            clusters.check_grid(dims[:3], self.cluster, self.name)
        size = clusters.cluster_size(self.cluster)
        if size > clusters.PORTABLE_CLUSTER_SIZE and ordinal not in self._non_portable:
            launchex.allow_non_portable_clusters(fn)
            self._non_portable.add(ordinal)
        launchex.launch_cluster(
            fn, grid, self.block, pack, cluster=self.cluster, shared_bytes=shared, stream=stream
        )


def _driver() -> Any:
    global _DRIVER
    if _DRIVER is None:
        from tylo.backend import driver

        _DRIVER = driver
    return _DRIVER


_DRIVER: Any = None


def launch_dims(grid: Any, block: tuple[int, int, int]) -> tuple[int, ...] | None:
    """``(gx, gy, gz, bx, by, bz)`` for a valid grid, else None (the checked path then
    reports the problem)."""
    dims = (grid,) if type(grid) is int else tuple(grid) if isinstance(grid, (tuple, list)) else ()
    if not 1 <= len(dims) <= 3 or not all(type(d) is int and 0 < d < 1 << 32 for d in dims):
        return None
    return (*dims, 1, 1)[:3] + block


# ---------------------------------------------------------------------------- launcher


# With the C extension, calling a launcher tries its inline launch without entering
# Python (tylo/_launch_module.c, LauncherBase holds ``inline`` and ``dims``); the generated
# ``_launch`` runs when that declines.
_LauncherBase: Any = fastpath._accel.LauncherBase if fastpath.ACCELERATED else object


class Launcher(_LauncherBase):  # type: ignore[misc]
    """``kern[grid, block]`` or ``kern[grid, block, cluster]``: call it with the kernel's
    arguments to launch.

    Each kernel gets its own subclass whose ``__call__`` is generated for its number of
    parameters (:func:`launcher_class`): the per-argument reads are unrolled. A launcher
    remembers the inline launch function it last used (:mod:`tylo.kernel.fastpath`) and
    tries it first, so a repeated launch of a cached specialization is a few identity
    tests and attribute reads, one ``pack_into`` and ``cuLaunchKernelEx``.
    """

    __slots__ = ("block", "cluster", "grid", "kernel", "shape") + (
        () if _LauncherBase is not object else ("dims", "inline")
    )

    def __init__(
        self,
        kernel: Any,
        grid: Any,
        block: tuple[int, int, int],
        cluster: tuple[int, int, int] | None = None,
    ) -> None:
        self.kernel = kernel
        self.grid = grid
        self.block = block
        self.cluster = cluster
        # the static launch shape that selects specializations: the block, and the cluster
        self.shape = block if cluster is None else (block, cluster)
        self.dims = launch_dims(grid, block)
        if cluster is not None and self.dims is not None:
            from tylo.kernel.clusters import check_grid

            check_grid(self.dims[:3], cluster, kernel.name)
        self.inline: Any = None

    def __repr__(self) -> str:
        cluster = "" if self.cluster is None else f", {self.cluster}"
        return f"{self.kernel.name}[{self.grid}, {self.block}{cluster}]"

    def _miss(self, args: Sequence[Any], spec: tuple[Any, ...], stream: Any = None) -> Hot:
        k = self.kernel
        refuse_compile_in_capture(k.name, stream)
        try:
            hot = k.cache[spec] = Hot(*k.specialize_for(args, spec[1:], self.block, self.cluster))
        except TraceError as err:
            blamed = none_arguments_blamed(k, args, err)
            if blamed is not None:
                raise blamed from None
            raise err.with_traceback(user_frames(err.__traceback__)) from None
        return hot


def refuse_compile_in_capture(name: str, stream: Any) -> None:
    """Raise :class:`~tylo.backend.capture.CaptureError` before specializing ``name`` (a
    trace, a compile or a module load) while ``stream`` is captured into a CUDA graph."""
    from tylo.backend.capture import CaptureError, forbid_in_capture
    from tylo.backend.driver import stream_is_capturing

    forbid_in_capture(f"specializing kernel {name} (trace, compile, module load)")
    if stream is None or stream == 0:
        return  # the legacy default stream is never captured
    try:
        capturing = stream_is_capturing(stream)
    except TyloError:  # no driver: the launch itself will say so
        return
    if capturing:
        raise CaptureError(
            f"specializing kernel {name} during CUDA-graph capture: launch "
            "it once with the same argument types before capturing"
        )


def none_arguments_blamed(kernel: Any, args: Sequence[Any], err: TraceError) -> Any:
    """A :class:`KernelArgumentError` naming the unannotated parameters given ``None``
    when tracing with them failed on a ``NoneType`` (``out=None``: an unannotated None
    is a static value, an optional array left out, so only its use shows the mistake);
    None when the failure is not that."""
    original = err.original
    if original is None:  # tylo's own TraceError (tylo.view(None, ...))
        text = err.message
    elif isinstance(original, (TypeError, AttributeError)):
        text = f"{type(original).__name__}: {original}"
    else:
        return None
    if "NoneType" not in text:
        return None
    names = [
        n
        for n, ann, a in zip(kernel.param_names, kernel.annotations, args)
        if a is None and ann is None
    ]
    if not names:
        return None
    which = " or ".join(repr(n) for n in names)
    where = f" ({err.filename}:{err.lineno}: {err.source_line})" if err.lineno else ""
    return KernelArgumentError(
        f"{kernel.name}: argument {which} is None, which an unannotated parameter takes as a "
        f"static value (an optional array left out), but the kernel uses it as a value: "
        f"{text}{where}; pass an array or a number, or "
        "test `if x is None` in the kernel"
    )


_CALL_TEMPLATE = """
def _launch(self, *args, shared=0, stream=None, **kwargs):
    if stream is None and TORCH_SEEN[0]:
        stream = torch_stream(args, kwargs)
    inline = self.inline
    if inline is not None and not kwargs and inline(self.dims, args, shared, stream):
        return
    k = self.kernel
    if kwargs or len(args) != {n}:
        args = k.bind(args, kwargs)
    {unpack}
    readers = k.readers
{reads}
    spec = (self.shape, {keys})
    hot = k.cache.get(spec)
    if hot is None:
        hot = self._miss(args, spec, stream)
    v = ({values})
    if hot.bounds is not None:  # the launch checks first, then the bounds guards
        if not hot.fast(v, shared, hot.ordinal):
            hot.entry.check(v, shared, hot.ordinal)
            hot.bounds(self.dims, args, v)
            return hot.slow(self.grid, v, shared, stream)
        hot.bounds(self.dims, args, v)
    record = hot.records.get(get_ident())
    if (record is not None and (stream is None or type(stream) is int)
            and self.dims is not None and tls.ordinal == hot.ordinal
            and hot.fast(v, shared, hot.ordinal)):
        try:
            record.pack(*self.dims, shared, stream or 0, *hot.attrs, *hot.values_of(v))
        except struct_error:  # a value the parameter cannot hold: the checked path says so
            return hot.slow(self.grid, v, shared, stream)
        err = hot.launch(record.config, hot.handle, record.params, None)
        if err:
            hot.failed(err)
        self.inline = torch_inline(hot.inline_launch(readers, args), args)
    else:
        hot.slow(self.grid, v, shared, stream)
"""
_READ_TEMPLATE = """    r = readers[{i}].get(type(a{i}))
    if r is None:
        r = k.reader({i}, a{i})
        if stream is None and TORCH_SEEN[0]:  # the first torch tensor any kernel reads
            stream = torch_stream(args, None)
    k{i}, v{i} = r(a{i})
"""


def launcher_class(nparams: int) -> type[Launcher]:
    """A :class:`Launcher` subclass with ``__call__`` unrolled for ``nparams`` arguments
    (made once per number of parameters; it loads no CUDA library, so compiling alone
    never needs the driver)."""
    cls = _LAUNCHERS.get(nparams)
    if cls is None:
        from tylo.backend import driver
        from tylo.kernel import torch_streams

        n = nparams
        source = _CALL_TEMPLATE.format(
            n=n,
            unpack=(", ".join(f"a{i}" for i in range(n)) + ", = args") if n else "pass",
            reads="".join(_READ_TEMPLATE.format(i=i) for i in range(n)),
            keys="".join(f"k{i}, " for i in range(n)),
            values="".join(f"v{i}, " for i in range(n)),
        )
        namespace: dict[str, Any] = {
            "get_ident": threading.get_ident,
            "tls": driver._tls,
            "struct_error": struct.error,
            "TORCH_SEEN": torch_streams.SEEN,
            "torch_stream": torch_streams.torch_stream,
            "torch_inline": torch_streams.torch_inline,
        }
        exec(compile(source, f"<tylo launcher/{n}>", "exec"), namespace)  # noqa: S102
        body = {"_launch": namespace["_launch"], "__slots__": ()}
        if _LauncherBase is object:  # no C dispatch: the Python method is the call
            body["__call__"] = namespace["_launch"]
        cls = type(f"Launcher{n}", (Launcher,), body)
        _LAUNCHERS[nparams] = cls
    return cls


_LAUNCHERS: dict[int, type[Launcher]] = {}
