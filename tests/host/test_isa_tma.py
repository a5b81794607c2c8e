"""TMA tensor-map encoding against the CUDA driver API's own enumerator values.

The values below are written out from ``cuda.h`` (CUDA driver API, "Tensor Map Object
Management": ``CUtensorMapDataType``, ``CUtensorMapInterleave``, ``CUtensorMapSwizzle``,
``CUtensorMapL2promotion``, ``CUtensorMapFloatOOBfill``), not read from tylo's tables. The
driver call is replaced by a recorder (no GPU here), so each test sees exactly the numbers
:meth:`TensorMapPlan.encode` hands ``cuTensorMapEncodeTiled``: the element type, the
swizzle (the PTX ISA's modes, section 5.5.7), no interleave, 128-byte L2 promotion and
zero fill out of bounds (the module's documented choice), in the driver's dimension order.
"""

from __future__ import annotations

import ctypes
import types

import pytest

from tylo import dtypes as dt
from tylo.backend import driver
from tylo.layouts import Layout, Swizzle, composition
from tylo.nvgpu import tma
from tylo.nvgpu.tma import TensorMapPlan, TMAError

# cuda.h: typedef enum CUtensorMapDataType_enum { ... }
CU_DATA_TYPE = {
    "UINT8": 0,
    "UINT16": 1,
    "UINT32": 2,
    "INT32": 3,
    "UINT64": 4,
    "INT64": 5,
    "FLOAT16": 6,
    "FLOAT32": 7,
    "FLOAT64": 8,
    "BFLOAT16": 9,
    "FLOAT32_FTZ": 10,
    "TFLOAT32": 11,
    "TFLOAT32_FTZ": 12,
}
CU_INTERLEAVE = {"NONE": 0, "16B": 1, "32B": 2}
CU_SWIZZLE = {"NONE": 0, "32B": 1, "64B": 2, "128B": 3}
CU_L2_PROMOTION = {"NONE": 0, "L2_64B": 1, "L2_128B": 2, "L2_256B": 3}
CU_OOB_FILL = {"NONE": 0, "NAN_REQUEST_ZERO_FMA": 1}

# the element type each tylo dtype must be encoded as (bits are bits: i8 and i16 travel as
# their unsigned kin, which have the same size; the driver has no signed 8- or 16-bit type)
WANT_TYPE = {
    dt.u8: 0, dt.i8: 0, dt.u16: 1, dt.i16: 1, dt.u32: 2, dt.i32: 3, dt.u64: 4, dt.i64: 5,
    dt.f16: 6, dt.f32: 7, dt.f64: 8, dt.bf16: 9,
}  # fmt: skip


def test_the_bindings_enumerators_are_cuda_h():
    from cuda.bindings import driver as cu

    pairs = [
        (cu.CUtensorMapDataType, "CU_TENSOR_MAP_DATA_TYPE_", CU_DATA_TYPE),
        (cu.CUtensorMapInterleave, "CU_TENSOR_MAP_INTERLEAVE_", CU_INTERLEAVE),
        (cu.CUtensorMapSwizzle, "CU_TENSOR_MAP_SWIZZLE_", CU_SWIZZLE),
        (cu.CUtensorMapL2promotion, "CU_TENSOR_MAP_L2_PROMOTION_", CU_L2_PROMOTION),
        (cu.CUtensorMapFloatOOBfill, "CU_TENSOR_MAP_FLOAT_OOB_FILL_", CU_OOB_FILL),
    ]
    for enum, prefix, values in pairs:
        for name, value in values.items():
            assert int(getattr(enum, prefix + name)) == value, prefix + name


@pytest.fixture
def calls(monkeypatch):
    """The driver with ``cuInit`` and ``cuTensorMapEncodeTiled`` replaced by recorders (the
    enumerations stay the real bindings'); yields the list of recorded argument tuples."""
    from cuda.bindings import driver as cu

    seen: list[tuple] = []
    buf = ctypes.create_string_buffer(128)

    def encode(*args):
        seen.append(args)
        return (0, types.SimpleNamespace(getPtr=lambda: ctypes.addressof(buf)))

    fake = types.SimpleNamespace(
        cuInit=lambda flags: (0,),
        cuTensorMapEncodeTiled=encode,
        cuuint32_t=int,
        cuuint64_t=int,
        CUtensorMapDataType=cu.CUtensorMapDataType,
        CUtensorMapInterleave=cu.CUtensorMapInterleave,
        CUtensorMapSwizzle=cu.CUtensorMapSwizzle,
        CUtensorMapL2promotion=cu.CUtensorMapL2promotion,
        CUtensorMapFloatOOBfill=cu.CUtensorMapFloatOOBfill,
    )
    monkeypatch.setattr(driver, "_cuda", lambda: fake)
    # cuInit's outcome is memoized per process: another test in this worker may already have
    # found no driver, so the recorder stands in for an initialized one
    monkeypatch.setattr(driver, "_initialized", True)
    tma._encode_memo.cache_clear()
    yield seen
    tma._encode_memo.cache_clear()


def _swizzled(mode, dtype, layout):
    # PTX ISA 5.5.7: the byte swizzle Swizzle<b,4,3>, on element offsets base 4 - log2(size)
    bits = {"none": 0, "32B": 1, "64B": 2, "128B": 3}[mode]
    if not bits:
        return layout
    return composition(Swizzle(bits, 4 - (dtype.nbytes.bit_length() - 1), 3), layout)


def _plan(dtype, mode="none", rows=8):
    width = {"none": 32, "32B": 32, "64B": 64, "128B": 128}[mode]
    cols = width // dtype.nbytes
    smem = _swizzled(mode, dtype, Layout((rows, cols), (cols, 1)))
    return TensorMapPlan(dtype, Layout((512, 1024), (1024, 1)), (rows, cols), mode, smem)


@pytest.mark.parametrize("dtype", list(WANT_TYPE), ids=str)
def test_element_types_are_the_drivers(calls, dtype):
    _plan(dtype).encode(1 << 20, (512, 1024), (1024, 1))
    (args,) = calls
    assert int(args[0]) == WANT_TYPE[dtype]


@pytest.mark.parametrize("mode", ["none", "32B", "64B", "128B"])
def test_swizzle_interleave_promotion_and_fill(calls, mode):
    plan = _plan(dt.bf16, mode)
    out = plan.encode(1 << 20, (512, 1024), (1024, 1))
    assert out == bytes(128)
    (args,) = calls
    rank, address, dims, strides, box, elem = args[1:7]
    interleave, swizzle, l2, fill = (int(a) for a in args[7:11])
    assert swizzle == CU_SWIZZLE[mode.upper()]
    assert (interleave, l2, fill) == (
        CU_INTERLEAVE["NONE"],
        CU_L2_PROMOTION["L2_128B"],
        CU_OOB_FILL["NONE"],  # zeros out of bounds: what the module promises edge tiles
    )
    # the driver's order: the contiguous dimension first; strides in bytes, all but the first
    cols = plan.box[1]
    assert (rank, address, dims, strides, box, elem) == (
        2, 1 << 20, [1024, 512], [2048], [cols, 8], [1, 1]
    )  # fmt: skip


def test_three_dimensions_in_driver_order(calls):
    # (a, b, c) with b contiguous: the driver sees (b, a, c) and the byte strides of a and c
    g = Layout((4, 64, 8), (64, 1, 256))
    plan = TensorMapPlan(dt.f32, g, (2, 8, 4), "none", Layout((2, 8, 4), (8, 1, 16)))
    plan.encode(1 << 20, (4, 64, 8), (64, 1, 256))
    (args,) = calls
    assert int(args[0]) == CU_DATA_TYPE["FLOAT32"]
    assert args[1] == 3 and args[3] == [64, 4, 8] and args[4] == [256, 1024]
    assert args[5] == [8, 2, 4]


def test_values_the_driver_would_refuse_never_reach_it(calls):
    plan = _plan(dt.bf16)
    for address, extents, strides in [
        (8, (512, 1024), (1024, 1)),  # not 16-byte aligned
        (1 << 20, (512, 1000 + 1), (1024, 1)),  # contiguous extent not whole 16 bytes
        (1 << 20, (512, 1024), (1028, 1)),  # row stride not a multiple of 16 bytes
        (1 << 20, (512, 1024), (1 << 40, 1)),  # row stride past 2**40 bytes
        (1 << 20, (512, 1024), (0, 1)),  # a zero stride
        (1 << 20, (512, 1024), (-1024, 1)),  # a negative stride
        (1 << 20, (0, 1024), (1024, 1)),  # empty
    ]:
        with pytest.raises(TMAError):
            plan.encode(address, extents, strides)
    assert calls == []


@pytest.mark.parametrize("rows,ok", [(1, True), (2**32, True), (2**32 + 1, False), (0, False)])
def test_extents_the_driver_takes(calls, rows, ok):
    """cuTensorMapEncodeTiled: every globalDim is non-zero and at most 2**32."""
    plan = _plan(dt.bf16)
    if ok:
        plan.encode(1 << 20, (rows, 1024), (1024, 1))
        assert calls[-1][3] == [1024, rows]
    else:
        with pytest.raises(TMAError, match="extents"):
            plan.encode(1 << 20, (rows, 1024), (1024, 1))
