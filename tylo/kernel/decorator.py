"""``@tylo.kernel``: a Python function traced, compiled and launched as a CUDA kernel.

>>> import tylo
>>> @tylo.kernel
... def scale(out, x, n, alpha):
...     i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
...     if i < n:
...         out[i] = x[i] * alpha
>>> k = scale.compile(tylo.f32, tylo.f32, int, float, block=128, target="sm_80")
>>> "ld.global.f32" in k.ptx and k.resources.registers > 0
True

Launch with ``scale[grid, block](out, x, n, 2.0)`` (grid and block: an int or 1-3 ints;
``shared=`` dynamic shared bytes, ``stream=`` a stream), or with thread-block clusters
``scale[grid, block, cluster](...)`` (sm_90; :mod:`tylo.kernel.clusters`). The block and
cluster shapes are static (part of the specialization; the block is ``.maxntid`` in PTX);
the grid is a runtime value. The first launch of
each configuration (static arguments, array dtypes and devices, block shape) traces and
compiles; later launches only pack arguments and launch. ``kern.compile(...)`` compiles for
an explicit target with no GPU.
"""

from __future__ import annotations

import functools
import inspect
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tylo import dtypes as dt
from tylo.dtypes import DType
from tylo.kernel import debug
from tylo.kernel.clusters import check_target, cluster_dims
from tylo.kernel.errors import KernelArgumentError, TraceError, user_frames
from tylo.kernel.launch import (
    CompiledKernel,
    Launcher,
    device_target,
    launcher_class,
    make_reader,
)
from tylo.kernel.readers import tensor_map_device
from tylo.kernel.spec import Binding, Float, Int, ParamKind, Ptr, Static, classify
from tylo.kernel.torch_streams import note_type

if TYPE_CHECKING:
    from tylo.kernel.trace import TraceResult

# The tracer (tylo.kernel.trace, control, ast_rewrite) and with it sympy are imported when
# a kernel is first traced, never by a specialization the disk cache serves.

__all__ = ["Kernel", "KernelStats", "inline", "kernel"]

_MAX_THREADS_PER_BLOCK = 1024  # CUDA C++ Programming Guide, "Compute Capabilities"


@dataclass
class KernelStats:
    """Counters of a :class:`Kernel`: ``traces`` (Python function runs), ``compiles``
    (specializations built: traced and compiled, or found in the disk cache) and
    ``disk_hits`` (specializations loaded from the disk cache without tracing)."""

    traces: int = 0
    compiles: int = 0
    disk_hits: int = 0


def _block3(block: Any) -> tuple[int, int, int]:
    dims = (
        (block,)
        if isinstance(block, int)
        else tuple(block)
        if isinstance(block, (tuple, list))
        else None
    )
    if dims is None or not 1 <= len(dims) <= 3 or not all(type(d) is int and d >= 1 for d in dims):
        raise KernelArgumentError(f"block {block!r} must be a positive int or 1-3 positive ints")
    x, y, z = (*dims, 1, 1)[:3]
    if x * y * z > _MAX_THREADS_PER_BLOCK:
        raise KernelArgumentError(
            f"block {block!r} has {x * y * z} threads; a block holds at most "
            f"{_MAX_THREADS_PER_BLOCK}"
        )
    return x, y, z


def _annotation(value: Any) -> Any:
    """Normalize an annotation: the classes Int/Float/Ptr stand for their defaults."""
    if value is Int:
        return Int()
    if value is Float:
        return Float()
    if value is Ptr:
        return Ptr()
    return value


class Kernel:
    """A traced kernel (see the module docstring). Create with :func:`kernel`."""

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        index_bits: int = 64,
        options: Any = None,
        name: str | None = None,
        bounds: str = "guard",
    ) -> None:
        if not inspect.isfunction(fn):
            raise TraceError(f"@tylo.kernel decorates a Python function, got {fn!r}")
        if index_bits not in (32, 64):
            raise TraceError(f"@tylo.kernel(index_bits={index_bits!r}): must be 32 or 64")
        from tylo.backend.pipeline import CompileOptions

        if options is not None and not isinstance(options, CompileOptions):
            raise TraceError(
                f"@tylo.kernel(options=...): expected a tylo CompileOptions (or None), got "
                f"{type(options).__name__}"
            )
        from tylo.kernel.spec import BOUNDS_POLICIES as POLICIES

        if type(bounds) is not str or bounds not in POLICIES:
            raise TraceError(
                f"@tylo.kernel(bounds={bounds!r}): must be one of {', '.join(POLICIES)}"
            )
        self.bounds = bounds
        self.fn = fn
        self.name = name or fn.__name__
        self.index_bits = index_bits
        self.options = options
        self.signature = inspect.signature(fn)
        params = list(self.signature.parameters.values())
        for p in params:
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise TraceError(
                    f"kernel {self.name}: *args and **kwargs parameters are not "
                    "supported; name every parameter"
                )
        self.param_names = tuple(p.name for p in params)
        try:
            hints = inspect.get_annotations(fn, eval_str=True)
        except Exception as err:  # noqa: BLE001 - any failure of the user's annotations
            raise TraceError(
                f"kernel {self.name}: cannot evaluate its annotations ({err})"
            ) from None
        self.annotations = tuple(_annotation(hints.get(n)) for n in self.param_names)
        self.nparams = len(params)
        self.readers: list[dict[type, Any]] = [{} for _ in params]
        self.cache: dict[Any, Any] = {}  # (block, argument keys...) -> launch.Hot
        self.stats = KernelStats()
        self._built: dict[Any, CompiledKernel] = {}
        self._launchers: dict[Any, Launcher] = {}
        self._lock = threading.RLock()
        self._rewritten: Any = None
        functools.update_wrapper(self, fn)  # type: ignore[arg-type]

    # ------------------------------------------------------------------ plumbing

    def rewritten(self) -> Callable[..., Any]:
        """The function with its control flow rewritten for tracing (built once)."""
        if self._rewritten is None:
            from tylo.kernel import control
            from tylo.kernel.ast_rewrite import rewrite_function

            self._rewritten = rewrite_function(self.fn, control)
        return self._rewritten

    def bind(self, args: Sequence[Any], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        """Positional arguments for every parameter (keywords and defaults filled in)."""
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as err:
            raise KernelArgumentError(f"{self.name}: {err}") from None
        bound.apply_defaults()
        return tuple(bound.arguments[n] for n in self.param_names)

    def reader(self, i: int, arg: Any) -> Any:
        """The reader for ``type(arg)`` at parameter ``i`` (made once per type)."""
        _, r = make_reader(self.annotations[i], arg, self.param_names[i])
        note_type(type(arg))
        self.readers[i][type(arg)] = r
        return r

    def __getitem__(self, config: Any) -> Launcher:
        if os.environ.get("TYLO_INTERPRET") == "1":  # run on the CPU (tylo.interpret)
            return self.interpret[config]
        try:
            launcher = self._launchers.get(config)
            cacheable = True
        except TypeError:  # an unhashable grid (a list): a fresh launcher each time
            launcher, cacheable = None, False
        if launcher is None:
            if not isinstance(config, tuple) or len(config) not in (2, 3):
                raise KernelArgumentError(
                    f"{self.name}[...]: give a grid and a block, e.g. {self.name}[blocks, 256], "
                    f"and optionally a cluster shape, e.g. {self.name}[blocks, 256, (2, 1, 1)]"
                )
            grid, block, *rest = config
            cluster = cluster_dims(rest[0], self.name) if rest else None
            launcher = launcher_class(self.nparams)(self, grid, _block3(block), cluster)
            if cacheable:
                if len(self._launchers) > 256:
                    self._launchers.clear()
                self._launchers[config] = launcher
        return launcher

    @property
    def interpret(self) -> Any:
        """``kern.interpret[grid, block](*args)`` runs the kernel's traced IR on the CPU
        (:mod:`tylo.interpret`); ``TYLO_INTERPRET=1`` makes ``kern[grid, block]`` do so."""
        from tylo.interpret import Interpreted

        return Interpreted(self)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TraceError(
            f"launch a kernel with a grid and a block: {self.name}[grid, block](...), or "
            f"compile it without a GPU with {self.name}.compile(..., target='sm_90a')"
        )

    def __repr__(self) -> str:
        return f"<tylo.kernel {self.name}({', '.join(self.param_names)})>"

    # ------------------------------------------------------------------ specializing

    def specialize_for(
        self,
        args: Sequence[Any],
        keys: Sequence[Any],
        block: tuple[int, int, int],
        cluster: tuple[int, int, int] | None = None,
    ) -> tuple[CompiledKernel, int]:
        """Build (or find) the specialization for launch arguments ``args``."""
        bindings, ordinal = self.launch_bindings(args)
        return self._build(bindings, block, device_target(ordinal), cluster), ordinal

    def launch_bindings(self, args: Sequence[Any]) -> tuple[tuple[Binding, ...], int]:
        """The bindings of launch arguments ``args`` (one per parameter) and the device
        ordinal their arrays live on (0 without arrays); refuses mismatched dtypes and
        arrays on different devices (:class:`KernelArgumentError`)."""
        from tylo.arrays import ArrayError, as_device_array, device_clash

        bindings = []
        devices: list[tuple[str, int | None]] = []  # (argument, its array's device)
        for name, ann, a in zip(self.param_names, self.annotations, args):
            kind = classify(ann, a, name)
            if kind is ParamKind.POINTER:
                try:
                    arr = as_device_array(a)
                except ArrayError as err:
                    raise KernelArgumentError(f"argument {name!r}: {err}") from None
                want = ann.dtype if isinstance(ann, Ptr) else None
                if want is not None and want is not arr.dtype:
                    raise KernelArgumentError(
                        f"argument {name!r}: the kernel takes {want} elements (tylo.Ptr("
                        f"{want.name})), got a {arr.dtype} array"
                    )
                devices.append((name, arr.device))
                bindings.append(
                    Binding(name, kind, arr.dtype, check=ann if isinstance(ann, Ptr) else None)
                )
            else:
                if kind is ParamKind.TENSOR_MAP:  # its array's device, as a pointer's
                    devices.append((name, tensor_map_device(a)))
                bindings.append(self._binding(name, ann, kind, a))
        where = device_clash(devices)
        if where is not None:
            raise KernelArgumentError(
                f"{self.name}: the array arguments live on different devices ({where}); a "
                "kernel runs on one device: copy them to one device first (e.g. x.to(y.device))"
            )
        ordinal = next((d for _, d in devices if d is not None), 0)
        return tuple(bindings), ordinal

    def _binding(self, name: str, ann: Any, kind: ParamKind, value: Any) -> Binding:
        if kind is ParamKind.STATIC:
            return Binding(name, kind, static=value)
        if kind is ParamKind.TENSOR_MAP:  # the plan selects the specialization
            return Binding(name, kind, value.plan.dtype, static=value.plan)
        if kind is ParamKind.INT:
            check = ann if isinstance(ann, Int) else value if isinstance(value, Int) else None
            return Binding(name, kind, check=check)
        if kind is ParamKind.FLOAT:
            d = (
                ann.dtype
                if isinstance(ann, Float)
                else (value.dtype if isinstance(value, Float) else dt.f32)
            )
            return Binding(name, kind, d)
        # a pointer spec (compile-only)
        spec = value if isinstance(value, Ptr) else Ptr(value) if isinstance(value, DType) else None
        if spec is None or spec.dtype is None:
            if isinstance(ann, Ptr) and ann.dtype is not None and spec is None:
                spec = ann
            else:
                raise KernelArgumentError(
                    f"argument {name!r}: give a pointer spec such as tylo.pointer(tylo.f32) "
                    f"or a DType, got {value!r}"
                )
        align = (
            spec.align if spec.align is not None else (ann.align if isinstance(ann, Ptr) else None)
        )
        check = Ptr(spec.dtype, align) if align is not None else None
        return Binding(name, kind, spec.dtype, check=check)

    def compile(
        self,
        *specs: Any,
        block: Any = 1,
        target: Any = "sm_90a",
        cluster: Any = None,
        **kwspecs: Any,
    ) -> CompiledKernel:
        """Compile for ``target`` without a GPU. Each argument is a spec of the runtime
        argument (``tylo.pointer(tylo.f32, align=16)`` or a DType, ``int``/``tylo.Int``,
        ``float``/``tylo.Float``) or the value of a static parameter; ``cluster`` the
        cluster shape of a cluster launch (``kern[grid, block, cluster]``)."""
        from tylo.target import Target

        bindings = self._spec_bindings(specs, kwspecs)
        shape = None if cluster is None else cluster_dims(cluster, self.name)
        try:
            return self._build(tuple(bindings), _block3(block), Target.parse(target), shape)
        except TraceError as err:
            raise err.with_traceback(user_frames(err.__traceback__)) from None

    def trace(
        self,
        *specs: Any,
        block: Any = 1,
        target: Any = "sm_90a",
        cluster: Any = None,
        **kwspecs: Any,
    ) -> TraceResult:
        """Trace a specialization to NVVM IR (``.llvm``) without compiling it (needs
        neither libNVVM nor a GPU); arguments as for :meth:`compile`."""
        from tylo.target import Target

        bindings = self._spec_bindings(specs, kwspecs)
        shape = None if cluster is None else cluster_dims(cluster, self.name)
        target = Target.parse(target)
        check_target(shape, target, self.name)
        try:
            return self.trace_bindings(bindings, _block3(block), target, shape)
        except TraceError as err:
            raise err.with_traceback(user_frames(err.__traceback__)) from None

    def trace_bindings(
        self,
        bindings: Sequence[Binding],
        block: tuple[int, int, int],
        target: Any,
        cluster: tuple[int, int, int] | None = None,
        *,
        track_files: bool = False,
    ) -> TraceResult:
        """Trace this kernel for ``bindings`` with its own options (index width, register
        cap, access policy): the one trace of :meth:`trace`, compiling and
        :meth:`check_launch`."""
        from tylo.kernel.trace import trace_kernel

        return trace_kernel(
            self.rewritten(),
            name=self.name,
            bindings=bindings,
            block=block,
            target=target,
            index_bits=self.index_bits,
            track_files=track_files,
            cluster=cluster,
            max_registers=self._max_registers(),
            bounds=self.bounds,
        )

    def accesses(
        self,
        *specs: Any,
        block: Any = 1,
        target: Any = "sm_90a",
        cluster: Any = None,
        **kwspecs: Any,
    ) -> Any:
        """The :class:`~tylo.kernel.accesses.AccessReport` of a specialization: every
        memory access with its state (proved, guarded, unproved), its condition or reason
        and its source line; arguments as for :meth:`compile` (traces, needs no GPU)."""
        result = self.trace(*specs, block=block, target=target, cluster=cluster, **kwspecs)
        return result.accesses

    def check_launch(
        self, grid: Any, block: Any, *args: Any, shared: int = 0, **kwargs: Any
    ) -> None:
        """Run every check a launch ``kern[grid, block](*args, shared=shared)`` makes
        before calling the driver (argument kinds, integer facts, alignment, guards,
        dynamic shared memory and the bounds guards), without a GPU: raises exactly what
        the launch would raise. ``args`` may be arrays or :class:`tylo.ArraySpec`
        descriptions (:mod:`tylo.kernel.check_launch`)."""
        from tylo.kernel.check_launch import check_launch

        check_launch(self, grid, _block3(block), args, kwargs, shared)

    def _max_registers(self) -> int | None:
        """``CompileOptions.max_registers`` of this kernel (None: no cap), traced into the
        entry as ``.maxnreg`` (ptxas ignores the linker's cap on a ``.maxntid`` entry)."""
        return None if self.options is None else self.options.max_registers

    def _spec_bindings(self, specs: Sequence[Any], kwspecs: dict[str, Any]) -> tuple[Binding, ...]:
        values = self.bind(specs, kwspecs)
        bindings = []
        for name, ann, v in zip(self.param_names, self.annotations, values):
            if ann is Static:
                kind = ParamKind.STATIC
            elif isinstance(v, DType) and ann is None:
                kind = ParamKind.POINTER  # a bare DType spec stands for a pointer
            else:
                kind = classify(ann, v, name)
            bindings.append(self._binding(name, ann, kind, v))
        return tuple(bindings)

    def _build(
        self,
        bindings: tuple[Binding, ...],
        block: tuple[int, int, int],
        target: Any,
        cluster: tuple[int, int, int] | None = None,
    ) -> CompiledKernel:
        # the bounds-debug mode (TYLO_DEBUG_BOUNDS) changes the traced code
        key = (bindings, block, target, debug.key_text(), cluster, self.bounds)
        built = self._built.get(key)
        if built is not None:
            return built
        check_target(cluster, target, self.name)
        with self._lock:
            built = self._built.get(key)
            if built is None:
                built = self._built[key] = self._compile(bindings, block, target, cluster)
        return built

    def _compile(
        self,
        bindings: tuple[Binding, ...],
        block: tuple[int, int, int],
        target: Any,
        cluster: tuple[int, int, int] | None = None,
    ) -> CompiledKernel:
        from tylo.backend.pipeline import compile_ir
        from tylo.kernel import diskcache

        start = time.perf_counter()
        key = diskcache.specialization_key(self, bindings, block, target, cluster)
        if key is not None:
            hit = diskcache.lookup(key)
            if hit is not None:
                self.stats.compiles += 1
                self.stats.disk_hits += 1
                return self._from_disk(bindings, block, target, key, *hit, start, cluster)
        self.stats.traces += 1
        result = self.trace_bindings(bindings, block, target, cluster, track_files=key is not None)
        module = compile_ir(
            result.llvm, target, entries=(result.entry,), options=self.options, name=self.name
        )
        self.stats.compiles += 1
        timings = {
            **result.timings,
            "nvvm_s": module.timings.get("nvvm_s", 0.0),
            "link_s": module.timings.get("link_s", 0.0),
            "cache": module.timings.get("cache"),
        }
        if key is not None:
            diskcache.store(
                key,
                module,
                {
                    "entry": result.entry,
                    "runtime": list(result.runtime),
                    "dynamic_shared_bytes": result.dynamic_shared_bytes,
                    "guards": [g.to_data() for g in result.guards],
                    "bounds": [g.to_data() for g in result.bounds],
                    "accesses": list(result.accesses.counts()),
                    "deps": result.deps.to_json() if result.deps is not None else {},
                },
            )
        timings["total_s"] = time.perf_counter() - start
        return CompiledKernel.from_trace(
            result, self, bindings, block, module=module, timings=timings, cluster=cluster
        )

    def _from_disk(
        self,
        bindings: tuple[Binding, ...],
        block: tuple[int, int, int],
        target: Any,
        key: str,
        entry: Any,
        meta: dict[str, Any],
        start: float,
        cluster: tuple[int, int, int] | None = None,
    ) -> CompiledKernel:
        from tylo.backend.pipeline import CompiledModule
        from tylo.backend.resources import kernel_resources
        from tylo.kernel.bounds_check import BoundsGuard
        from tylo.kernel.guards import Guard

        name = meta["entry"]
        timings = {"trace_s": 0.0, "ir_s": 0.0, "nvvm_s": 0.0, "link_s": 0.0, "cache": "kernel-hit"}
        module = CompiledModule(
            llvm=meta.get("llvm", ""),
            ptx=entry.ptx,
            cubin=entry.cubin,
            target=target,
            entries=(name,),
            resources=kernel_resources(entry.cubin, entry.info_log),
            timings=dict(timings),
            info_log=entry.info_log,
            key=key,
            name=self.name,
        )
        timings["total_s"] = time.perf_counter() - start
        return CompiledKernel(
            name=self.name,
            module=module,
            entry=name,
            bindings=bindings,
            runtime=tuple(meta["runtime"]),
            block=block,
            index_bits=self.index_bits,
            dynamic_shared_bytes=int(meta["dynamic_shared_bytes"]),
            timings=timings,
            guards=tuple(Guard.from_data(g) for g in meta.get("guards", [])),
            bounds=tuple(BoundsGuard.from_data(g) for g in meta.get("bounds", [])),
            access_counts=_counts(meta.get("accesses")),
            cluster=cluster,
        )


def _counts(data: Any) -> tuple[int, int, int] | None:
    """The ``(proved, guarded, unproved)`` a cache entry recorded (None if malformed)."""
    if type(data) is list and len(data) == 3 and all(type(x) is int and x >= 0 for x in data):
        return data[0], data[1], data[2]
    return None


def kernel(
    fn: Callable[..., Any] | None = None,
    *,
    index_bits: int = 64,
    options: Any = None,
    name: str | None = None,
    bounds: str = "guard",
) -> Any:
    """Decorate a Python function as a kernel: ``@tylo.kernel`` or
    ``@tylo.kernel(index_bits=32, options=CompileOptions(max_registers=128))``.

    ``bounds`` is the policy for memory accesses (docs/accesses.md): ``"guard"`` (the
    default) proves what the facts settle and checks the rest at each launch
    (:class:`~tylo.kernel.errors.OutOfBoundsLaunchError`); ``"prove"`` refuses to compile
    a kernel with an access it cannot prove; ``"off"`` records nothing.

    ``index_bits`` is the width of runtime integers and index arithmetic: 64 (default;
    no overflow for any array size) or 32 (leaner index math; every runtime int must fit,
    which launches check, and index expressions must stay below 2**31).
    """

    def wrap(f: Callable[..., Any]) -> Kernel:
        return Kernel(f, index_bits=index_bits, options=options, name=name, bounds=bounds)

    return wrap(fn) if fn is not None else wrap


def inline(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a helper called from kernels so that its ``for``/``if``/``and``/``or`` are
    rewritten like a kernel's (a ``tylo.range`` loop or a runtime ``if`` inside it
    works). It runs inline at trace time; it is not a separate device function."""
    state: dict[str, Any] = {}

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        f = state.get("fn")
        if f is None:
            from tylo.kernel import control
            from tylo.kernel.ast_rewrite import rewrite_function

            f = state["fn"] = rewrite_function(fn, control)
        return f(*args, **kwargs)

    return wrapper
