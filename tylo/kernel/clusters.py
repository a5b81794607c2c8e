"""Thread-block clusters on the host: the cluster shape of a launch, validated.

A cluster (CUDA C++ Programming Guide, "Thread Block Clusters"; sm_90 and newer) is a group
of CTAs that the hardware schedules together on one GPC, so that they can synchronize
(``barrier.cluster``) and read, write and arrive on each other's shared memory
(distributed shared memory). A kernel is launched with clusters by giving a third item to
the launch configuration::

    kern[grid, block, cluster](...)          # e.g. kern[(8, 4), 128, (2, 1, 1)]

The cluster shape is static, like the block shape: part of the specialization, so kernel
code can read it as Python ints (:data:`tylo.nvgpu.cluster.cluster_dim`). Every launch
passes it to ``cuLaunchKernelEx`` as ``CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION`` (as CUTLASS
launches its cluster kernels); with :data:`SHAPE_IN_PTX` the PTX also carries it. What this
module checks, each with a :class:`ClusterError`:

- the shape is a positive int or 1-3 positive ints (missing axes are 1);
- it holds at most :data:`MAX_CLUSTER_SIZE` CTAs (16); above :data:`PORTABLE_CLUSTER_SIZE`
  (8, the size every sm_90 device supports) the launch sets the function attribute
  ``CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED`` (CUDA driver API, "Execution
  Control"), and the driver refuses it on devices that cannot co-schedule so many CTAs;
- the grid is a multiple of the cluster in every dimension (the grid counts CTAs, not
  clusters);
- the kernel is compiled for sm_90 or newer.
"""

from __future__ import annotations

from typing import Any

from tylo.kernel.errors import KernelArgumentError

__all__ = [
    "MAX_CLUSTER_SIZE",
    "MIN_CLUSTER_CC",
    "PORTABLE_CLUSTER_SIZE",
    "SHAPE_IN_PTX",
    "ClusterError",
    "check_grid",
    "check_target",
    "cluster_dims",
    "cluster_size",
]

#: Whether a cluster kernel's PTX also states its shape (``.explicitcluster`` and
#: ``.reqnctapercluster x, y, z``, from the NVVM annotations ``cluster_dim_{x,y,z}``, which
#: libNVVM 13 accepts). Off: whether the driver takes a compile-time shape together with the
#: launch attribute (the same shape) is not verified on a device yet;
#: ``tests/gpu/test_clusters.py::test_shape_in_ptx_with_the_launch_attribute`` checks it.
SHAPE_IN_PTX = False
PORTABLE_CLUSTER_SIZE = 8  # CUDA C++ Programming Guide, "Thread Block Clusters"
MAX_CLUSTER_SIZE = 16  # non-portable: sm_90 with the opt-in attribute (H100, H200)
MIN_CLUSTER_CC = (9, 0)


class ClusterError(KernelArgumentError):
    """A cluster shape that a launch cannot use (see the module docstring)."""


def cluster_dims(cluster: Any, name: str = "kernel") -> tuple[int, int, int]:
    """The cluster shape ``(x, y, z)`` of ``cluster`` (an int or 1-3 ints, missing axes 1):
    every item a positive int (not a bool) and their product at most
    :data:`MAX_CLUSTER_SIZE`; a :class:`ClusterError` otherwise.

    >>> cluster_dims(2), cluster_dims((2, 2))
    ((2, 1, 1), (2, 2, 1))
    """
    dims = (cluster,) if type(cluster) is int else cluster
    if (
        not isinstance(dims, (tuple, list))
        or not 1 <= len(dims) <= 3
        or not all(type(d) is int and d >= 1 for d in dims)
    ):
        raise ClusterError(
            f"{name}[grid, block, cluster]: cluster {cluster!r} must be a positive int or 1-3 "
            "positive ints (CTAs per cluster along x, y, z), e.g. (2, 1, 1)"
        )
    x, y, z = (*dims, 1, 1)[:3]
    size = x * y * z
    if size > MAX_CLUSTER_SIZE:
        raise ClusterError(
            f"{name}[grid, block, cluster]: cluster {cluster!r} holds {size} CTAs; a cluster "
            f"holds at most {PORTABLE_CLUSTER_SIZE} (portable) or {MAX_CLUSTER_SIZE} "
            "(non-portable, sm_90) CTAs: use a smaller cluster"
        )
    return x, y, z


def cluster_size(cluster: tuple[int, int, int]) -> int:
    """The number of CTAs in a cluster of shape ``cluster``."""
    x, y, z = cluster
    return x * y * z


def check_grid(grid: tuple[int, ...], cluster: tuple[int, int, int], name: str = "kernel") -> None:
    """Raise :class:`ClusterError` unless every grid dimension (1-3 positive ints, CTAs) is a
    multiple of the cluster's: a grid is tiled by whole clusters."""
    dims = (*grid, 1, 1)[:3]
    bad = [
        f"{axis}: {g} is not a multiple of {c}" for axis, g, c in zip("xyz", dims, cluster) if g % c
    ]
    if bad:
        raise ClusterError(
            f"{name}[grid, block, cluster]: the grid {tuple(dims)} is not a whole number of "
            f"clusters {cluster} ({'; '.join(bad)}); the grid counts CTAs, so round each "
            "dimension up to a multiple of the cluster's (and let the extra CTAs exit)"
        )


def check_target(cluster: tuple[int, int, int] | None, target: Any, name: str = "kernel") -> None:
    """Raise :class:`ClusterError` when a cluster launch is compiled for a target older
    than sm_90 (clusters do not exist there)."""
    if cluster is None or target is None:
        return
    if tuple(target.cc) < MIN_CLUSTER_CC:
        raise ClusterError(
            f"{name}: thread-block clusters {cluster} need sm_90 or newer (CUDA C++ "
            f'Programming Guide, "Thread Block Clusters"); the kernel is compiled for '
            f"{target}: launch without a cluster, or on an sm_90 device"
        )
