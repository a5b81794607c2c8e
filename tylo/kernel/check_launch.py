"""``kernel.check_launch``: every check a launch makes, without a GPU, and
:class:`ArraySpec`, an array described by its shape, dtype and strides.

A launch ``kern[grid, block](*args, shared=s)`` reads its arguments (kinds, dtypes,
devices), specializes the kernel, checks the runtime integers' facts, the pointers'
alignment, the kernel's guards and its dynamic shared memory, then the bounds guards of
its guarded accesses (:mod:`tylo.kernel.bounds_check`), and only then calls the driver.
:func:`check_launch` runs the same checks in the same order, tracing the specialization
instead of compiling it and taking the device's limits from ``target``, and raises
exactly what the launch would raise before it reached the driver. Arguments may be real
arrays or :class:`ArraySpec` s, so a test or a user can ask without a GPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tylo.arrays import DeviceArray

__all__ = ["ArraySpec", "check_launch"]

#: The address an ArraySpec claims: aligned to every alignment a launch checks.
SPEC_ADDRESS = 1 << 32


class ArraySpec(DeviceArray):
    """A device array described, not allocated: ``shape``, ``dtype``, ``strides`` in
    elements (None: C-contiguous), ``device``. It stands for an array of that shape in
    :meth:`tylo.Kernel.check_launch` (its address, :data:`SPEC_ADDRESS`, is aligned to
    any alignment a launch checks); fields are validated like a DeviceArray's
    (:class:`~tylo.arrays.ArrayError`)."""

    def __init__(
        self,
        shape: Any,
        dtype: Any,
        strides: Any = None,
        *,
        device: int = 0,
        ptr: int = SPEC_ADDRESS,
    ) -> None:
        from tylo.arrays import _c_strides, _normalize_shape

        shape = _normalize_shape(shape, "ArraySpec")
        if strides is None:
            strides = _c_strides(shape)
        DeviceArray.__init__(self, ptr, shape, strides, dtype, device)


def check_launch(
    kernel: Any,
    grid: Any,
    block: tuple[int, int, int],
    args: Sequence[Any],
    kwargs: dict[str, Any],
    shared: int,
    target: Any = "sm_90a",
) -> None:
    """Raise what ``kernel[grid, block](*args, **kwargs, shared=shared)`` would raise
    before calling the driver (nothing when the launch would proceed); see the module
    docstring."""
    from tylo.backend.driver import _dim3
    from tylo.backend.errors import LaunchError
    from tylo.kernel.launch import CompiledKernel
    from tylo.target import Target

    block3 = block  # normalized by Kernel.check_launch
    dims = (*_dim3(grid, "grid"), *_dim3(block3, "block"))
    if type(shared) is not int:
        raise LaunchError(f"{kernel.name}: shared must be an int (bytes), got {shared!r}")
    args = kernel.bind(args, kwargs)
    values = []
    for i, a in enumerate(args):
        _, value = kernel.reader(i, a)(a)
        values.append(value)
    bindings, _ = kernel.launch_bindings(args)
    target = Target.parse(target)
    result = kernel.trace_bindings(bindings, block3, target)
    entry = CompiledKernel.from_trace(result, kernel, bindings, block3, module=None, timings={})
    limit = target.max_shared_bytes - result.static_shared_bytes
    if shared > limit or shared < 0:
        raise LaunchError(
            f"launch {kernel.name}: {shared} B of dynamic shared memory exceeds the "
            f"{limit} B a block can have on {target} beside {result.static_shared_bytes} B "
            "of static shared memory"
        )
    entry._smem_limit[0] = max(limit, 0)  # no driver: the target's limit stands for it
    entry.check(values, shared, 0)
    if entry.check_bounds is not None:
        entry.check_bounds(dims, args, values)
