"""The CUDA driver, through ``cuda.bindings.driver``: context, modules, launch, memory.

Importing this module loads nothing: the bindings are imported on first use, so compiling
works on machines without a driver. Every driver call goes through :func:`check`, which
turns a failing ``CUresult`` into :class:`~tylo.backend.errors.CudaError` naming the call
(``"cuModuleLoadData failed: CUDA_ERROR_INVALID_IMAGE (200)"``).

Launching is built for low overhead: arguments travel in an
:class:`~tylo.backend.argpack.ArgPack` (re-exported here), laid out once per kernel
signature; a launch writes the values and passes the address of its ``void*[]`` array as
``cuLaunchKernel``'s ``kernelParams``.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Sequence
from typing import Any

from tylo.backend.argpack import F32, F64, I32, I64, PTR, U32, U64, ArgPack, Param, raw
from tylo.backend.capture import forbid_in_capture
from tylo.backend.errors import CudaError, LaunchError, NoDeviceError, ToolchainError

__all__ = [
    "F32",
    "F64",
    "I32",
    "I64",
    "PTR",
    "U32",
    "U64",
    "ArgPack",
    "Event",
    "Function",
    "Module",
    "Param",
    "check",
    "compute_capability",
    "current_context",
    "device_count",
    "driver_version",
    "elapsed_ms",
    "launch",
    "raw",
    "stream_handle",
    "stream_is_capturing",
    "synchronize",
]

# Dynamic shared memory above this needs an explicit opt-in per function
# (CUDA C++ Programming Guide, "Shared Memory", compute capability 7.x and later).
DEFAULT_DYNAMIC_SHARED_LIMIT = 48 * 1024

# What loading a missing library raises: cuda.pathfinder's DynamicLibNotFoundError is a
# RuntimeError; older bindings raise RuntimeError or OSError from dlopen.
_LOAD_ERRORS = (ImportError, OSError, RuntimeError)
_driver: Any = None
_init_error: str | None = None
_initialized = False
_lock = threading.Lock()
_contexts: dict[int, Any] = {}


class _ThreadState(threading.local):
    """Per thread: the context made current by tylo and its device (None until then).
    The launch fast paths read ``ordinal`` directly, so it always exists."""

    ctx: Any = None
    ordinal: int | None = None


_tls = _ThreadState()


def _cuda() -> Any:
    """``cuda.bindings.driver``, imported on first use."""
    global _driver
    if _driver is None:
        try:
            from cuda.bindings import driver
        except ImportError as err:  # pragma: no cover - cuda-bindings is a dependency
            raise ToolchainError(
                f"cuda-bindings is not importable ({err}); install it: pip install cuda-bindings"
            ) from err
        _driver = driver
    return _driver


def _error_name(code: int) -> tuple[str, str]:
    """(enum name, description) of a ``CUresult`` code, without failing: the driver's
    ``cuGetErrorName``/``cuGetErrorString`` when it is there, else the bindings' enum."""
    d = _cuda()
    try:
        result: Any = d.CUresult(code)
        name = result.name
    except ValueError:  # a code this version of the bindings does not know
        result, name = code, f"CUDA_ERROR_{code}"
    description = ""
    try:
        err, raw_name = d.cuGetErrorName(result)
        if not err and raw_name:
            name = raw_name.decode() if isinstance(raw_name, bytes) else str(raw_name)
        err, raw_desc = d.cuGetErrorString(result)
        if not err and raw_desc:
            description = raw_desc.decode() if isinstance(raw_desc, bytes) else str(raw_desc)
    except (*_LOAD_ERRORS, TypeError, ValueError):  # no driver library, or an unknown code
        pass
    return name, description


def cuda_error(call: str, code: int) -> CudaError:
    """The :class:`CudaError` for ``call`` having returned ``code``."""
    name, description = _error_name(int(code))
    return CudaError(call, int(code), name, description)


def check(result: tuple[Any, ...], call: str) -> Any:
    """Raise :class:`CudaError` if ``result[0]`` is not ``CUDA_SUCCESS``; else return the
    call's outputs: ``None``, the single value, or a tuple of values."""
    err = result[0]
    if err:  # CUresult is an int subclass and CUDA_SUCCESS == 0
        raise cuda_error(call, err)
    n = len(result)
    return None if n == 1 else result[1] if n == 2 else result[1:]


def _init() -> None:
    """``cuInit(0)`` once per process; :class:`NoDeviceError` (memoized) when impossible."""
    global _initialized, _init_error
    if _initialized:
        return
    with _lock:
        if _initialized:
            return
        if _init_error is None:
            try:
                d = _cuda()
                (err,) = d.cuInit(0)
                if err:
                    name, _ = _error_name(int(err))
                    _init_error = f"cuInit failed: {name} ({int(err)})"
            except ToolchainError as e:
                _init_error = str(e)
            except _LOAD_ERRORS as e:  # libcuda.so missing
                _init_error = f"no CUDA driver library ({type(e).__name__}: {e})"
            if _init_error is None:
                _initialized = True
                return
    raise NoDeviceError(f"no usable CUDA driver: {_init_error}")


def device_count() -> int:
    """Number of CUDA devices; 0 when there is no driver or no GPU (never raises for that)."""
    try:
        _init()
        return int(check(_cuda().cuDeviceGetCount(), "cuDeviceGetCount"))
    except (NoDeviceError, CudaError):
        return 0


def driver_version() -> int | None:
    """The driver's CUDA version as an int (13000 for 13.0), or None without a driver."""
    try:
        _init()
        return int(check(_cuda().cuDriverGetVersion(), "cuDriverGetVersion"))
    except (NoDeviceError, CudaError):
        return None


def _device(ordinal: int) -> Any:
    _init()
    count = int(check(_cuda().cuDeviceGetCount(), "cuDeviceGetCount"))
    if not 0 <= ordinal < count:
        raise NoDeviceError(f"no CUDA device {ordinal}: the driver reports {count} device(s)")
    return check(_cuda().cuDeviceGet(ordinal), "cuDeviceGet")


def _device_attribute(ordinal: int, attr: str) -> int:
    d = _cuda()
    value = d.cuDeviceGetAttribute(getattr(d.CUdevice_attribute, attr), _device(ordinal))
    return int(check(value, "cuDeviceGetAttribute"))


def compute_capability(ordinal: int = 0) -> tuple[int, int]:
    """(major, minor) of device ``ordinal``; :class:`NoDeviceError` when there is none."""
    try:
        return (
            _device_attribute(ordinal, "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR"),
            _device_attribute(ordinal, "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR"),
        )
    except CudaError as err:
        raise NoDeviceError(f"cannot query CUDA device {ordinal}: {err}") from err


def current_context(ordinal: int = 0) -> Any:
    """The primary context of device ``ordinal``, retained once per process and made
    current on the calling thread (the same context PyTorch and CuPy use); None with
    ``TYLO_INTERPRET=1`` (the CPU interpreter is the device)."""
    if os.environ.get("TYLO_INTERPRET") == "1":  # the interpreter's device has no context
        return None
    current = getattr(_tls, "ctx", None)
    if current is not None and _tls.ordinal == ordinal:
        return current
    with _lock:
        ctx = _contexts.get(ordinal)
    if ctx is None:
        dev = _device(ordinal)
        with _lock:
            ctx = _contexts.get(ordinal)
            if ctx is None:
                ctx = check(_cuda().cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
                _contexts[ordinal] = ctx
    check(_cuda().cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    _tls.ctx, _tls.ordinal = ctx, ordinal
    return ctx


def _ensure_context() -> None:
    if getattr(_tls, "ctx", None) is None:
        current_context(0)  # the first device, unless the thread already chose one


# ---------------------------------------------------------------------------- streams


def stream_handle(stream: Any) -> Any:
    """Normalize a stream for the driver: ``None`` (legacy default stream), an int handle,
    a ``CUstream``, an object with ``__cuda_stream__`` (returns ``(version, handle)``) or
    with ``.cuda_stream`` (``torch.cuda.Stream``)."""
    if stream is None or type(stream) is int:
        return stream
    d = _cuda()
    if isinstance(stream, d.CUstream):
        return stream
    proto = getattr(stream, "__cuda_stream__", None)
    if proto is not None:
        value = proto() if callable(proto) else proto
        if isinstance(value, tuple) and len(value) == 2:
            return int(value[1])
        raise LaunchError(
            f"stream: __cuda_stream__ of {type(stream).__name__} returned {value!r}; "
            "expected (version, handle)"
        )
    handle = getattr(stream, "cuda_stream", None)
    if isinstance(handle, int):
        return handle
    if isinstance(stream, int):  # int subclasses (enums, numpy ints converted by caller)
        return int(stream)
    raise LaunchError(
        f"stream: cannot use {type(stream).__name__} as a CUDA stream; pass None, an int "
        "handle, a CUstream, or an object with __cuda_stream__ or .cuda_stream"
    )


def stream_is_capturing(stream: Any) -> bool:
    """True when the driver says ``stream`` (anything :func:`stream_handle` takes) is being
    captured into a CUDA graph."""
    d = _cuda()
    handle = stream_handle(stream)
    status = check(d.cuStreamIsCapturing(0 if handle is None else handle), "cuStreamIsCapturing")
    return int(status) == int(d.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_ACTIVE)


def synchronize(stream: Any = None) -> None:
    """Wait for ``stream`` (or, with None, for all work in the current context). With
    ``TYLO_INTERPRET=1`` there is nothing to wait for: interpreted launches finish before
    they return."""
    if os.environ.get("TYLO_INTERPRET") == "1":
        return
    forbid_in_capture("synchronize")
    _ensure_context()
    if stream is None:
        check(_cuda().cuCtxSynchronize(), "cuCtxSynchronize")
    else:
        check(_cuda().cuStreamSynchronize(stream_handle(stream)), "cuStreamSynchronize")


# ---------------------------------------------------------------------------- events


class Event:
    """A CUDA event for timing: ``start.record(); ...; end.record(); elapsed_ms(start, end)``."""

    def __init__(self, *, timing: bool = True) -> None:
        _ensure_context()
        d = _cuda()
        flags = 0 if timing else int(d.CUevent_flags.CU_EVENT_DISABLE_TIMING)
        self.handle: Any = check(d.cuEventCreate(flags), "cuEventCreate")

    def record(self, stream: Any = None) -> Event:
        """Record the event on ``stream``; returns self."""
        check(_cuda().cuEventRecord(self.handle, stream_handle(stream)), "cuEventRecord")
        return self

    def synchronize(self) -> None:
        """Wait until the event has completed."""
        check(_cuda().cuEventSynchronize(self.handle), "cuEventSynchronize")

    def elapsed_ms(self, end: Event) -> float:
        """Milliseconds from this event to ``end`` (waits for ``end``)."""
        return elapsed_ms(self, end)

    def close(self) -> None:
        """Destroy the event (idempotent)."""
        handle, self.handle = self.handle, None
        if handle is not None:
            check(_cuda().cuEventDestroy(handle), "cuEventDestroy")

    def __del__(self) -> None:
        # at interpreter shutdown or with a dead context there is nothing left to free
        with contextlib.suppress(Exception):
            self.close()


def elapsed_ms(start: Event, end: Event) -> float:
    """Milliseconds between two recorded events (waits for ``end``)."""
    end.synchronize()
    return float(check(_cuda().cuEventElapsedTime(start.handle, end.handle), "cuEventElapsedTime"))


# ---------------------------------------------------------------------------- modules


class Module:
    """A loaded cubin. ``Module.load(cubin).function("vadd")``."""

    def __init__(self, handle: Any, ordinal: int, image: bytes | None = None) -> None:
        self.handle = handle
        self.ordinal = ordinal
        self._functions: dict[str, Function] = {}
        self._image = image
        self._param_table: dict[str, tuple[int, ...]] | None = None

    @classmethod
    def load(cls, image: bytes, *, ordinal: int = 0) -> Module:
        """Load a cubin (``cuModuleLoadData``) into device ``ordinal``'s primary context."""
        current_context(ordinal)
        image = bytes(image)
        handle = check(_cuda().cuModuleLoadData(image), "cuModuleLoadData")
        return cls(handle, ordinal, image)

    def param_sizes(self, name: str) -> tuple[int, ...] | None:
        """Kernel ``name``'s parameter sizes as the loaded cubin records them, or None."""
        if self._param_table is None:
            from tylo.backend.resources import CubinFormatError, cubin_param_sizes

            try:
                self._param_table = cubin_param_sizes(self._image or b"")
            except CubinFormatError:
                self._param_table = {}
            self._image = None
        return self._param_table.get(name)

    def function(self, name: str) -> Function:
        """The kernel entry ``name`` (memoized)."""
        fn = self._functions.get(name)
        if fn is None:
            if self.handle is None:
                raise LaunchError(f"Module.function({name!r}): the module was closed")
            handle = check(
                _cuda().cuModuleGetFunction(self.handle, name.encode()), "cuModuleGetFunction"
            )
            fn = self._functions[name] = Function(handle, name, self)
        return fn

    def close(self) -> None:
        """Unload the module (idempotent); its functions become unusable."""
        handle, self.handle = self.handle, None
        if handle is not None:
            check(_cuda().cuModuleUnload(handle), "cuModuleUnload")

    def __del__(self) -> None:
        # at interpreter shutdown or with a dead context there is nothing left to free
        with contextlib.suppress(Exception):
            self.close()


class Function:
    """A kernel entry of a loaded :class:`Module`, with its driver attributes."""

    def __init__(self, handle: Any, name: str, module: Module) -> None:
        self.handle = handle
        self.name = name
        self.module = module  # keeps the module loaded while the function lives
        self.max_dynamic_shared_bytes = DEFAULT_DYNAMIC_SHARED_LIMIT
        self._param_sizes: tuple[int, ...] | None | bool = False
        self._checked: set[int] = set()

    def attribute(self, name: str) -> int:
        """``cuFuncGetAttribute`` by short name: ``attribute("NUM_REGS")``."""
        d = _cuda()
        attr = getattr(d.CUfunction_attribute, f"CU_FUNC_ATTRIBUTE_{name.upper()}")
        return int(check(d.cuFuncGetAttribute(attr, self.handle), "cuFuncGetAttribute"))

    @property
    def num_regs(self) -> int:
        return self.attribute("NUM_REGS")

    @property
    def max_threads_per_block(self) -> int:
        return self.attribute("MAX_THREADS_PER_BLOCK")

    @property
    def shared_size_bytes(self) -> int:
        """Static shared memory of the kernel, as the driver reports it."""
        return self.attribute("SHARED_SIZE_BYTES")

    @property
    def local_size_bytes(self) -> int:
        return self.attribute("LOCAL_SIZE_BYTES")

    @property
    def const_size_bytes(self) -> int:
        return self.attribute("CONST_SIZE_BYTES")

    def set_max_dynamic_shared_memory(self, nbytes: int) -> None:
        """Allow launches with up to ``nbytes`` of dynamic shared memory (required above
        48 KB; ``cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)``)."""
        limit = _device_attribute(
            self.module.ordinal, "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"
        )
        static = self.shared_size_bytes
        if nbytes < 0 or nbytes + static > limit:
            raise LaunchError(
                f"{self.name}: {nbytes} B dynamic + {static} B static shared memory exceeds "
                f"the device's opt-in limit of {limit} B per block"
            )
        d = _cuda()
        attr = d.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        check(d.cuFuncSetAttribute(self.handle, attr, nbytes), "cuFuncSetAttribute")
        self.max_dynamic_shared_bytes = max(nbytes, DEFAULT_DYNAMIC_SHARED_LIMIT)

    def param_sizes(self) -> tuple[int, ...] | None:
        """Byte sizes of the kernel's parameters, in order, or None when nothing can say.

        From the loaded cubin when tylo can read it (every cubin tylo links): no driver
        call. Otherwise ``cuFuncGetParamCount``, then ``cuFuncGetParamInfo`` per index,
        never past the last (``compute-sanitizer`` reports such a call as an API error);
        only a foreign image on a driver without ``cuFuncGetParamCount`` is asked until
        ``CUDA_ERROR_INVALID_VALUE``, there being no other way to learn its count."""
        if self._param_sizes is False:
            sizes = self.module.param_sizes(self.name)
            self._param_sizes = sizes if sizes is not None else self._driver_param_sizes()
        return self._param_sizes  # type: ignore[return-value]

    def _driver_param_sizes(self) -> tuple[int, ...] | None:
        """Sizes from the driver for an image tylo cannot read: ``cuFuncGetParamInfo`` below
        ``cuFuncGetParamCount`` only (probing past the last parameter is an API error to
        compute-sanitizer); None when the driver lacks either call or fails."""
        d = _cuda()
        info, count_of = (getattr(d, f"cuFuncGetParam{x}", None) for x in ("Info", "Count"))
        if info is None or count_of is None:
            return None
        try:
            err, count = count_of(self.handle)
            if err:
                return None
            sizes: list[int] = []
            for i in range(int(count)):
                err, _, size = info(self.handle, i)
                if err:
                    return None
                sizes.append(int(size))
        except (RuntimeError, TypeError, ValueError, OverflowError):  # e.g. no entry point
            return None
        return tuple(sizes)

    def check_args(self, args: ArgPack) -> None:
        """Check (once per ArgPack layout) that ``args`` matches the kernel's parameters."""
        key = args.signature_id
        if key in self._checked:
            return
        sizes = self.param_sizes()
        if sizes is not None and sizes != args.sizes:
            raise LaunchError(
                f"{self.name}: the kernel takes {len(sizes)} parameter(s) of sizes "
                f"{list(sizes)} B, but the ArgPack has {len(args.sizes)} of sizes "
                f"{list(args.sizes)} B ({args.describe()})"
            )
        self._checked.add(key)


# ---------------------------------------------------------------------------- launch


def _dim3(value: Any, what: str) -> tuple[int, int, int]:
    kind = type(value)
    if kind is int and value > 0:
        return (value, 1, 1)
    if kind is tuple and len(value) == 3:
        x, y, z = value
        if type(x) is int and type(y) is int and type(z) is int and x > 0 and y > 0 and z > 0:
            return value
    dims = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    if not 1 <= len(dims) <= 3 or not all(
        isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in dims
    ):
        raise LaunchError(f"launch: {what} {value!r} must be a positive int or 1-3 positive ints")
    return tuple(int(v) for v in (*dims, 1, 1)[:3])  # type: ignore[return-value]


def launch(
    function: Function,
    grid: int | Sequence[int],
    block: int | Sequence[int],
    args: ArgPack,
    *,
    shared_bytes: int = 0,
    stream: Any = None,
) -> None:
    """Launch ``function`` with packed ``args`` (``cuLaunchKernel``).

    ``shared_bytes`` is the dynamic shared memory per block; above 48 KB call
    :meth:`Function.set_max_dynamic_shared_memory` first. ``stream`` is anything
    :func:`stream_handle` accepts.
    """
    gx, gy, gz = _dim3(grid, "grid")
    bx, by, bz = _dim3(block, "block")
    if shared_bytes > function.max_dynamic_shared_bytes or shared_bytes < 0:
        raise LaunchError(
            f"launch {function.name}: {shared_bytes} B of dynamic shared memory exceeds the "
            f"function's limit of {function.max_dynamic_shared_bytes} B; call "
            f"function.set_max_dynamic_shared_memory({shared_bytes}) first"
        )
    if type(args) is not ArgPack and not isinstance(args, ArgPack):
        raise LaunchError(
            f"launch {function.name}: args must be an ArgPack, got {type(args).__name__}"
        )
    if args.signature_id not in function._checked:
        function.check_args(args)
    if getattr(_tls, "ordinal", None) != function.module.ordinal:
        current_context(function.module.ordinal)
    if stream is not None and type(stream) is not int:
        stream = stream_handle(stream)
    (err,) = _driver.cuLaunchKernel(
        function.handle, gx, gy, gz, bx, by, bz, shared_bytes, stream, args.address, 0
    )
    if err:
        raise cuda_error("cuLaunchKernel", err)
