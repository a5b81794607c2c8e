"""The launch fast path's one foreign call: ``cuLaunchKernelEx`` with a prebuilt record.

A checked launch (:func:`tylo.backend.driver.launch`) goes through
``cuda.bindings.driver.cuLaunchKernel``, whose eleven converted arguments cost about
1.5 us of Python on the H200's host, half the driver's own ~3 us. A cached kernel's
later launches instead write everything the driver reads into one preallocated
:class:`LaunchRecord` with a single ``struct.pack_into``:

- a ``CUlaunchConfig`` (CUDA driver API, "Execution Control": grid and block
  dimensions, dynamic shared bytes, stream, and the launch attributes: none, or the
  cluster shape of a cluster launch, :func:`cluster_attribute`), then
- the kernel's argument values, each at its natural alignment, and
- a ``void*[]`` array pointing at each value (``kernelParams``),

and call ``cuLaunchKernelEx(config, function, kernelParams, NULL)``: four pointer-sized
arguments through ctypes. The function pointer comes from the driver itself, through
``cuda.bindings``' ``cuGetProcAddress`` with legacy default-stream semantics (stream 0 is
the legacy default stream, as for ``cuda.bindings``' ``cuLaunchKernel``).

A record is not thread-safe: each thread packs into its own. A by-value byte parameter
(:func:`~tylo.backend.argpack.raw`, a 128-byte ``CUtensorMap``) is packed like the others,
at its declared alignment in absolute address terms (the record's buffer is aligned to its
largest parameter alignment, :func:`~tylo.backend.argpack.aligned_buffer`); its value must
be a ``bytes`` or ``bytearray`` of exactly the parameter's size, which ``pack`` checks
(``struct``'s ``"128s"`` would silently zero-pad a shorter value and truncate a longer one:
a corrupt tensor map), raising ``struct.error``, on which the launcher takes the checked
path that reports it (:class:`~tylo.backend.errors.LaunchError`).

A cluster launch (``kern[grid, block, cluster]``) passes one ``CUlaunchAttribute``,
``CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION`` (CUDA driver API, "Execution Control",
``CUlaunchAttributeValue::clusterDim``): the fast paths point the record's ``attrs`` at an
immortal 72-byte attribute made once per cluster shape, and the checked path
(:func:`launch_cluster`) builds the same configuration through ``cuda.bindings``.
"""

from __future__ import annotations

import ctypes
import functools
import struct
import threading
from collections.abc import Callable, Sequence
from typing import Any

from tylo.backend.argpack import Param, aligned_buffer, lay_out
from tylo.backend.errors import LaunchError

__all__ = [
    "ATTRIBUTE_BYTES",
    "CLUSTER_DIMENSION",
    "CONFIG_BYTES",
    "LAUNCH_EX_TYPE",
    "NO_ATTRIBUTES",
    "LaunchRecord",
    "allow_non_portable_clusters",
    "cluster_attribute",
    "launch_cluster",
    "launch_ex",
    "launch_ex_address",
]

# CUlaunchConfig: gridDim x/y/z, blockDim x/y/z, sharedMemBytes (7 x u32), padding to 8,
# hStream (pointer), attrs (pointer), numAttrs (u32), padding to 8: 56 bytes.
_CONFIG_FORMAT = "<7I4xQQI4x"
CONFIG_BYTES = struct.calcsize(_CONFIG_FORMAT)
assert CONFIG_BYTES == 56
_CONFIG_FIELDS = 10  # the values pack() takes before the arguments
# CUlaunchAttribute: id (u32), padding to 8, CUlaunchAttributeValue (a 64-byte union whose
# clusterDim member is three u32 x, y, z): 72 bytes (cuda.h, CUlaunchAttribute_st).
ATTRIBUTE_BYTES = 72
CLUSTER_DIMENSION = 4  # CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
#: (attrs, numAttrs) of a launch without attributes.
NO_ATTRIBUTES = (0, 0)
_cluster_attributes: dict[tuple[int, int, int], Any] = {}

#: The C type of ``cuLaunchKernelEx``: int (const CUlaunchConfig*, CUfunction, void**, void**).
LAUNCH_EX_TYPE = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p
)
_lock = threading.Lock()
_launch_ex: Any = None
_launch_ex_error: str | None = None


class LaunchRecord:
    """One thread's launch record for one kernel signature (see the module doc).

    ``pack(gx, gy, gz, bx, by, bz, shared, stream, attrs, num_attrs, *values)`` writes a
    launch (``attrs, num_attrs``: :data:`NO_ATTRIBUTES` or a :func:`cluster_attribute`);
    then ``launch_ex()(record.config, function_handle, record.params, None)`` launches it.

    >>> from tylo.backend.argpack import PTR, I32
    >>> r = LaunchRecord([PTR, I32])
    >>> r.pack(4, 1, 1, 256, 1, 1, 0, 0, *NO_ATTRIBUTES, 0x7F0000000000, 1000)
    >>> r.values()
    (139637976727552, 1000)
    >>> r.config_values()
    (4, 1, 1, 256, 1, 1, 0, 0, 0, 0)
    """

    __slots__ = (
        "_buffer",
        "_pointers",
        "_shift",
        "_struct",
        "config",
        "nbytes",
        "offsets",
        "pack",
        "params",
        "signature",
    )

    def __init__(self, params: Sequence[Param]) -> None:
        self.signature = tuple(params)
        for p in self.signature:
            if not isinstance(p, Param):
                raise LaunchError(
                    f"LaunchRecord: {p!r} is not a Param (use argpack.PTR, I32, raw(...))"
                )
        fmt, offsets, pos = lay_out(self.signature, _CONFIG_FORMAT, CONFIG_BYTES)
        self.offsets = offsets
        self.nbytes = pos
        self._struct = struct.Struct(fmt)
        # the config's pointers need 8 bytes; a tensor map declares 64
        align = max(8, max((p.align for p in self.signature), default=1))
        self._buffer, self._shift = aligned_buffer(pos, align)
        base = ctypes.addressof(self._buffer) + self._shift
        self._pointers = (ctypes.c_void_p * max(len(offsets), 1))(*(base + off for off in offsets))
        self.config = base
        self.params = ctypes.addressof(self._pointers) if offsets else None
        # buffer and offset bound once: pack(*config, *values)
        pack_into = functools.partial(self._struct.pack_into, self._buffer, self._shift)
        sized = tuple(
            (_CONFIG_FIELDS + i, p.size) for i, p in enumerate(self.signature) if p.kind == "raw"
        )
        self.pack: Callable[..., None] = (
            _checking_pack(pack_into, sized, _CONFIG_FIELDS + len(self.signature))
            if sized
            else pack_into
        )

    def values(self) -> tuple[Any, ...]:
        """The argument values last packed (for debugging and tests)."""
        return self._struct.unpack_from(self._buffer, self._shift)[_CONFIG_FIELDS:]

    def config_values(self) -> tuple[int, ...]:
        """The ``CUlaunchConfig`` fields last packed: grid, block, shared bytes, stream,
        attrs, numAttrs."""
        return self._struct.unpack_from(self._buffer, self._shift)[:_CONFIG_FIELDS]


def _checking_pack(
    pack_into: Callable[..., None], sized: tuple[tuple[int, int], ...], count: int
) -> Callable[..., None]:
    """``pack_into`` after checking that each by-value byte argument (position, size in
    ``sized``) is a ``bytes`` or ``bytearray`` of exactly that size: ``struct.error`` (as
    for any value the record cannot hold) otherwise, before anything is written."""

    def pack(*values: Any) -> None:
        if len(values) != count:
            raise struct.error(f"LaunchRecord.pack: {len(values)} values, expected {count}")
        for i, size in sized:
            v = values[i]
            if type(v) not in _BYTES or len(v) != size:
                got = f"{len(v)} bytes" if type(v) in _BYTES else type(v).__name__
                raise struct.error(
                    f"LaunchRecord.pack: value {i - _CONFIG_FIELDS} is {got}, not exactly "
                    f"{size} bytes"
                )
        pack_into(*values)

    return pack


_BYTES = (bytes, bytearray)


def launch_ex() -> Callable[[int, int, Any, Any], int] | None:
    """``cuLaunchKernelEx`` as a ctypes function of four pointers, or None where the
    driver does not provide it (then launches stay on the checked path). Looked up once
    per process through ``cuda.bindings``' ``cuGetProcAddress``."""
    global _launch_ex, _launch_ex_error
    if _launch_ex is not None or _launch_ex_error is not None:
        return _launch_ex
    with _lock:
        if _launch_ex is None and _launch_ex_error is None:
            try:
                from cuda.bindings import driver as cu

                flags = cu.CUdriverProcAddress_flags.CU_GET_PROC_ADDRESS_LEGACY_STREAM
                err, pfn, _status = cu.cuGetProcAddress(b"cuLaunchKernelEx", 12000, flags)
                if err != cu.CUresult.CUDA_SUCCESS or not pfn:
                    _launch_ex_error = f"cuGetProcAddress(cuLaunchKernelEx): {err}"
                else:
                    _launch_ex = LAUNCH_EX_TYPE(int(pfn))
            except Exception as exc:  # no bindings or no driver: the checked path remains
                _launch_ex_error = f"{type(exc).__name__}: {exc}"
    return _launch_ex


def launch_ex_address() -> int:
    """The address of the function :func:`launch_ex` calls (0 if there is none): what
    the C inline path (``tylo._launch``) calls directly."""
    fn = launch_ex()
    if fn is None:
        return 0
    return ctypes.cast(fn, ctypes.c_void_p).value or 0


def cluster_attribute(cluster: tuple[int, int, int]) -> tuple[int, int]:
    """``(attrs, numAttrs)`` for a launch with thread-block clusters of shape ``cluster``:
    the address of one ``CUlaunchAttribute`` with id ``CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION``
    and value ``clusterDim = {x, y, z}``, and 1. Made once per shape and never freed (a few
    dozen shapes exist), so a record may point at it for as long as it lives.

    >>> import ctypes, struct
    >>> address, n = cluster_attribute((2, 1, 1))
    >>> struct.unpack_from("<I4x3I", ctypes.string_at(address, ATTRIBUTE_BYTES)), n
    ((4, 2, 1, 1), 1)
    """
    buf = _cluster_attributes.get(cluster)
    if buf is None:
        x, y, z = cluster
        value = struct.pack("<I4x3I", CLUSTER_DIMENSION, x, y, z)
        buf = ctypes.create_string_buffer(value, ATTRIBUTE_BYTES)
        with _lock:
            buf = _cluster_attributes.setdefault(tuple(cluster), buf)
    return ctypes.addressof(buf), 1


def _cluster_config(
    cu: Any, grid: tuple, block: tuple, cluster: tuple, shared_bytes: int, stream: Any
) -> Any:
    """A ``cuda.bindings`` ``CUlaunchConfig`` with one cluster-dimension attribute."""
    attr = cu.CUlaunchAttribute()
    attr.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = cluster
    config = cu.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = grid
    config.blockDimX, config.blockDimY, config.blockDimZ = block
    config.sharedMemBytes = shared_bytes
    config.hStream = 0 if stream is None else stream
    config.attrs = [attr]
    config.numAttrs = 1
    return config


def launch_cluster(
    function: Any,
    grid: Any,
    block: Any,
    args: Any,
    *,
    cluster: tuple[int, int, int],
    shared_bytes: int = 0,
    stream: Any = None,
) -> None:
    """The checked launch of a cluster kernel: as :func:`tylo.backend.driver.launch` (the
    same checks of the dimensions, shared memory, arguments, context and stream), through
    ``cuda.bindings``' ``cuLaunchKernelEx`` with a ``CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION``
    attribute. The cluster shape was validated by the caller
    (:func:`tylo.kernel.clusters.cluster_dims`); the driver checks the rest (a grid that is
    not a multiple of it, a size the device cannot co-schedule)."""
    from tylo.backend import driver
    from tylo.backend.errors import LaunchError

    gx, gy, gz = driver._dim3(grid, "grid")
    bx, by, bz = driver._dim3(block, "block")
    cx, cy, cz = driver._dim3(cluster, "cluster")
    if shared_bytes > function.max_dynamic_shared_bytes or shared_bytes < 0:
        raise LaunchError(
            f"launch {function.name}: {shared_bytes} B of dynamic shared memory exceeds the "
            f"function's limit of {function.max_dynamic_shared_bytes} B; call "
            f"function.set_max_dynamic_shared_memory({shared_bytes}) first"
        )
    if args.signature_id not in function._checked:
        function.check_args(args)
    if getattr(driver._tls, "ordinal", None) != function.module.ordinal:
        driver.current_context(function.module.ordinal)
    if stream is not None and type(stream) is not int:
        stream = driver.stream_handle(stream)
    cu = driver._cuda()
    config = _cluster_config(cu, (gx, gy, gz), (bx, by, bz), (cx, cy, cz), shared_bytes, stream)
    (err,) = cu.cuLaunchKernelEx(config, function.handle, args.address, 0)
    if err:
        raise driver.cuda_error("cuLaunchKernelEx", err)


def max_active_clusters(
    function: Any, block: Any, cluster: tuple[int, int, int], shared_bytes: int = 0
) -> int:
    """How many clusters of shape ``cluster`` of ``function`` (a
    :class:`tylo.backend.driver.Function`) the device can run at once with this block and
    dynamic shared memory: ``cuOccupancyMaxActiveClusters`` (CUDA driver API, "Occupancy").
    A persistent kernel launches no more clusters than this: the GPCs' SM counts need not
    be multiples of the cluster size, so fewer than ``SMs / cluster size`` may fit, and
    any more would wait for a second wave. Raises :class:`~tylo.backend.errors.LaunchError`
    when the driver reports none can run (the configuration does not fit)."""
    from tylo.backend import driver
    from tylo.backend.errors import LaunchError

    bx, by, bz = driver._dim3(block, "block")
    cx, cy, cz = driver._dim3(cluster, "cluster")
    if shared_bytes > function.max_dynamic_shared_bytes:
        function.set_max_dynamic_shared_memory(shared_bytes)
    if getattr(driver._tls, "ordinal", None) != function.module.ordinal:
        driver.current_context(function.module.ordinal)
    cu = driver._cuda()
    config = _cluster_config(cu, (cx, cy, cz), (bx, by, bz), (cx, cy, cz), shared_bytes, None)
    err, count = cu.cuOccupancyMaxActiveClusters(function.handle, config)
    if err:
        raise driver.cuda_error("cuOccupancyMaxActiveClusters", err)
    if count < 1:
        raise LaunchError(
            f"{function.name}: no cluster of {cluster} with block {block} and {shared_bytes} B "
            "of dynamic shared memory fits on this device"
        )
    return int(count)


def allow_non_portable_clusters(function: Any) -> None:
    """Let ``function`` (a :class:`tylo.backend.driver.Function`) launch with clusters of
    more than 8 CTAs: ``cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED,
    1)`` (CUDA driver API, "Execution Control"; sm_90 allows up to 16)."""
    from tylo.backend import driver

    cu = driver._cuda()
    attr = cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED
    driver.check(cu.cuFuncSetAttribute(function.handle, attr, 1), "cuFuncSetAttribute")
