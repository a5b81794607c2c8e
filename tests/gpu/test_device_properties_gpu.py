# TEST_TARGET: cc>=8.0
"""tylo.device_properties on a real GPU: plausible values, the device's target, and the same
numbers torch reads through the runtime API (when torch is installed)."""

from __future__ import annotations

import pytest

import tylo
from tylo.target import Target

INTERPRET_SKIP = (  # the interpreter tier (tests/interp_tier.py)
    "checks the CUDA driver's figures for a real GPU (the interpreter's own device is "
    "tested in tests/host/test_interpret_devicebuffers.py)"
)


def test_values_are_plausible(gpu_runtime: Target) -> None:
    props = tylo.device_properties(0)
    assert props is tylo.device_properties()  # read once per process
    assert props.target == Target.from_device(0) == gpu_runtime
    assert props.name and props.sm_count > 0 and props.warp_size == tylo.WARP_SIZE
    assert props.max_threads_per_block == 1024
    assert props.max_threads_per_sm >= props.max_threads_per_block
    assert props.shared_memory_per_block == 48 * 1024
    assert props.shared_memory_per_block < props.shared_memory_per_block_optin
    assert props.shared_memory_per_block_optin <= props.shared_memory_per_sm
    assert props.l2_cache_bytes >= 2**20 and props.total_memory_bytes >= 2**30
    assert props.registers_per_sm >= 65536 and props.memory_bus_width_bits > 0


def test_matches_torch(gpu_runtime: Target) -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs torch with CUDA (found: torch without a usable device)")
    props = tylo.device_properties(0)
    ref = torch.cuda.get_device_properties(0)
    assert props.name == ref.name
    assert props.compute_capability == (ref.major, ref.minor)
    assert props.sm_count == ref.multi_processor_count
    assert props.total_memory_bytes == ref.total_memory
    # attributes that older torch releases do not expose are compared where present
    pairs = {
        "l2_cache_bytes": "L2_cache_size",
        "warp_size": "warp_size",
        "max_threads_per_block": "max_threads_per_block",
        "max_threads_per_sm": "max_threads_per_multi_processor",
        "registers_per_sm": "regs_per_multiprocessor",
        "shared_memory_per_block": "shared_memory_per_block",
        "shared_memory_per_block_optin": "shared_memory_per_block_optin",
        "shared_memory_per_sm": "shared_memory_per_multiprocessor",
        "memory_bus_width_bits": "memory_bus_width",
    }
    compared = 0
    for ours, theirs in pairs.items():
        if hasattr(ref, theirs):
            assert getattr(props, ours) == getattr(ref, theirs), (ours, theirs)
            compared += 1
    assert compared >= 4, f"torch {torch.__version__} exposes too few device properties"
