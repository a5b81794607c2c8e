"""The tensor memory accelerator (TMA, sm_90): tensor maps planned and proved on the host.

A TMA copy moves a *box* of a global tensor into shared memory (or back) in one instruction,
described by a 128-byte tensor map (``CUtensorMap``) that the host encodes with
``cuTensorMapEncodeTiled`` (CUDA driver API, "Tensor Map Object Management") and passes to the
kernel as a ``grid_constant`` parameter. :class:`TensorMapPlan` is the host half: from a
global tile's layout (runtime extents and strides allowed), a static box and a swizzle mode it

- orders the tensor's dimensions as TMA wants them (the contiguous mode first);
- proves that every other stride is a multiple of 16 bytes (or records the condition, checked
  by :meth:`TensorMapPlan.encode` on the concrete strides);
- checks that the box fits the hardware (1-256 elements per dimension, whole 16-byte rows,
  rows of exactly the swizzle's width when swizzled);
- and proves that the shared layout the box writes (row-major in TMA order, swizzled) *equals*
  the shared layout the kernel reads, with :func:`~tylo.layouts.proofs.prove_equal`; a plan
  whose layouts differ is refused with the prover's counterexample.

Elements outside the tensor are filled with zeros on loads (``CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE``),
so edge tiles need no predication.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from tylo import dtypes as dt
from tylo.dtypes import DType
from tylo.layouts import ComposedLayout, Layout, Swizzle
from tylo.layouts.proofs import prove_equal
from tylo.layouts.symbolic import Value as Scalar  # an int or a sympy expression
from tylo.layouts.symbolic import divides, to_value
from tylo.nvgpu.errors import PlanError, as_int

if TYPE_CHECKING:
    from llvmlite import ir

__all__ = [
    "MAX_CLUSTER_CTAS",
    "TMAError",
    "TensorMap",
    "TensorMapPlan",
    "commit_stores",
    "load",
    "store",
    "wait_stores",
]

MAX_RANK = 5
MAX_BOX = 256
_SWIZZLE_BYTES = {"none": 0, "32B": 32, "64B": 64, "128B": 128}
_SWIZZLE_BITS = {"32B": 1, "64B": 2, "128B": 3}
# tylo dtype -> the CUtensorMapDataType enumerator's name
_DATA_TYPES = {
    "u8": "CU_TENSOR_MAP_DATA_TYPE_UINT8",
    "i8": "CU_TENSOR_MAP_DATA_TYPE_UINT8",
    "u16": "CU_TENSOR_MAP_DATA_TYPE_UINT16",
    "i16": "CU_TENSOR_MAP_DATA_TYPE_UINT16",
    "u32": "CU_TENSOR_MAP_DATA_TYPE_UINT32",
    "i32": "CU_TENSOR_MAP_DATA_TYPE_INT32",
    "u64": "CU_TENSOR_MAP_DATA_TYPE_UINT64",
    "i64": "CU_TENSOR_MAP_DATA_TYPE_INT64",
    "f16": "CU_TENSOR_MAP_DATA_TYPE_FLOAT16",
    "bf16": "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16",
    "f32": "CU_TENSOR_MAP_DATA_TYPE_FLOAT32",
    "f64": "CU_TENSOR_MAP_DATA_TYPE_FLOAT64",
}


class TMAError(PlanError):
    """A tensor map that the hardware cannot use, or whose shared layout is not the kernel's."""


def _flat_modes(layout: Any, what: str) -> tuple[tuple[Scalar, ...], tuple[Scalar, ...]]:
    if not isinstance(layout, Layout):
        raise TMAError(f"{what}: the global layout must be a Layout, got {layout!r}")
    shape, stride = layout.shape, layout.stride
    if type(shape) is not tuple:
        shape, stride = (shape,), (stride,)
    if any(type(s) is tuple for s in shape):
        raise TMAError(f"{what}: nested modes are not TMA dimensions; flatten {layout} first")
    return shape, stride


@dataclass(frozen=True)
class TensorMapPlan:
    """A tiled tensor map: ``global_layout`` (flat, modes = the tensor's dimensions, one of
    stride 1), ``box`` (static extent per mode, same order), ``swizzle`` ('none', '32B',
    '64B', '128B') and ``smem_layout`` (what the kernel reads for one box, coordinates in
    the same mode order). See the module docstring for what construction proves.

    >>> from tylo.layouts import composition, dim
    >>> M, K, lda = dim("M"), dim("K"), dim("lda", multiple_of=8)
    >>> p = TensorMapPlan(dt.bf16, Layout((M, K), (lda, 1)), (64, 64), "128B",
    ...                   composition(Swizzle(3, 3, 3), Layout((64, 64), (64, 1))))
    >>> p.order, p.box_bytes, p.conditions
    ((1, 0), 8192, ())
    """

    dtype: DType
    global_layout: Layout
    box: tuple[int, ...]
    swizzle: str
    smem_layout: Any
    order: tuple[int, ...] = field(init=False)
    conditions: tuple[Any, ...] = field(init=False)
    # a plan is also the compile-only spec of a tensor-map parameter (Kernel.compile)
    tylo_param_kind: ClassVar[str] = "tensor_map"

    @property
    def plan(self) -> TensorMapPlan:
        return self

    def __post_init__(self) -> None:
        what = "TensorMapPlan"
        d = dt.dtype_of(self.dtype)
        if d.name not in _DATA_TYPES:
            raise TMAError(f"{what}: TMA has no {d} element type")
        object.__setattr__(self, "dtype", d)
        shape, stride = _flat_modes(self.global_layout, what)
        rank = len(shape)
        if not 1 <= rank <= MAX_RANK:
            raise TMAError(f"{what}: TMA tensors have 1 to {MAX_RANK} dimensions, got {rank}")
        given: tuple[Any, ...] = (
            tuple(self.box) if isinstance(self.box, (tuple, list)) else (self.box,)
        )
        box = tuple(b if (i := as_int(b)) is None else i for b in given)
        if len(box) != rank or any(type(b) is not int or not 1 <= b <= MAX_BOX for b in box):
            raise TMAError(
                f"{what}: box must give one int in [1, {MAX_BOX}] per dimension ({rank}), "
                f"got {self.box!r}"
            )
        object.__setattr__(self, "box", box)
        if type(self.swizzle) is not str or self.swizzle not in _SWIZZLE_BYTES:
            raise TMAError(
                f"{what}: swizzle must be one of {sorted(_SWIZZLE_BYTES)}, got {self.swizzle!r}"
            )
        inner = [i for i, s in enumerate(stride) if to_value(s) == 1]
        if len(inner) != 1:
            raise TMAError(
                f"{what}: TMA needs exactly one contiguous dimension (stride 1) in "
                f"{self.global_layout}; found {len(inner)}"
            )
        order = (inner[0], *(i for i in range(rank) if i != inner[0]))
        object.__setattr__(self, "order", order)
        object.__setattr__(self, "conditions", self._stride_conditions(stride, d, what))
        row = box[order[0]] * d.nbytes
        if row % 16:
            raise TMAError(
                f"{what}: the box's contiguous extent is {row} bytes; TMA moves whole 16-byte "
                "units (CUDA driver API, cuTensorMapEncodeTiled: boxDim[0] * elementSize)"
            )
        sw = _SWIZZLE_BYTES[self.swizzle]
        if sw and row != sw:
            raise TMAError(
                f"{what}: with the {self.swizzle} swizzle the box's contiguous extent must be "
                f"{sw} bytes (one swizzled row), got {row} bytes"
            )
        self._prove_smem(what)

    @staticmethod
    def _stride_conditions(stride: tuple[Scalar, ...], d: DType, what: str) -> tuple[Scalar, ...]:
        out = []
        for s in stride:
            if to_value(s) == 1:
                continue
            nbytes = to_value(s) * d.nbytes
            ok = divides(16, nbytes)
            if ok is False:
                raise TMAError(
                    f"{what}: stride {s} is {nbytes} bytes; TMA needs every global stride to "
                    "be a multiple of 16 bytes (pack or pad the leading dimension)"
                )
            if ok is None:
                out.append(nbytes)  # checked on the concrete strides by encode()
        return tuple(out)

    def box_layout(self) -> Layout | ComposedLayout:
        """The shared layout one box is written in: row-major in TMA order (the contiguous
        dimension innermost), swizzled by the mode's byte swizzle on element offsets."""
        strides = [0] * len(self.box)
        acc = 1
        for i in self.order:
            strides[i] = acc
            acc *= self.box[i]
        lay = Layout(self.box, tuple(strides)) if len(self.box) > 1 else Layout(self.box[0], 1)
        if self.swizzle == "none":
            return lay
        m = 4 - (self.dtype.nbytes.bit_length() - 1)
        if m < 0:
            raise TMAError(f"TensorMapPlan: {self.dtype} elements are wider than 16 bytes")
        return ComposedLayout(Swizzle(_SWIZZLE_BITS[self.swizzle], m, 3), 0, lay)

    def _prove_smem(self, what: str) -> None:
        want = self.box_layout()
        if not getattr(self.smem_layout, "is_static", False):
            raise TMAError(f"{what}: the shared layout must be static, got {self.smem_layout}")
        v = prove_equal(want, self.smem_layout)
        if not v.proved:
            raise TMAError(
                f"{what}: the box is written as {want}, but the kernel reads {self.smem_layout}: "
                f"{v.reason}"
                + (f" (counterexample {dict(v.counterexample)})" if v.counterexample else "")
            )

    @property
    def box_bytes(self) -> int:
        """Bytes one load of the box brings (the barrier's transaction count)."""
        n = self.dtype.nbytes
        for b in self.box:
            n *= b
        return n

    def encode(self, address: int, extents: tuple[int, ...], strides: tuple[int, ...]) -> bytes:
        """The 128-byte ``CUtensorMap`` for a tensor at global ``address`` with these concrete
        extents and strides (elements, in the global layout's mode order), through
        ``cuTensorMapEncodeTiled``. Raises :class:`TMAError` for values the hardware refuses.
        The encoding depends on nothing else, so the last 256 are remembered (a launch loop
        that passes the same arrays encodes once)."""
        rank = len(self.box)
        seqs: list[tuple[int, ...]] = []
        for name, xs in (("extents", extents), ("strides", strides)):
            vals = tuple(as_int(v) for v in xs) if isinstance(xs, (tuple, list)) else ()
            if len(vals) != rank or any(v is None for v in vals):
                raise TMAError(f"encode: {name} must be {rank} ints, got {xs!r}")
            seqs.append(tuple(v for v in vals if v is not None))  # all of them, checked above
        addr = as_int(address)
        if addr is None:
            raise TMAError(f"encode: the global address must be an int, got {address!r}")
        return _encode_memo(self, addr, seqs[0], seqs[1])

    def _encode(self, address: int, extents: tuple[int, ...], strides: tuple[int, ...]) -> bytes:
        from tylo.backend import driver

        rank = len(self.box)
        extents, strides = tuple(extents), tuple(strides)
        if len(extents) != rank or len(strides) != rank:
            raise TMAError(f"encode: give {rank} extents and {rank} strides")
        if type(address) is not int or not 0 < address < 1 << 64 or address % 16:
            raise TMAError(
                f"encode: the global address {address!r} must be a 16-byte aligned address "
                "(a positive int below 2**64)"
            )
        for e in extents:
            if type(e) is not int or not 1 <= e <= 2**32:
                raise TMAError(f"encode: extents must be ints in [1, 2**32], got {extents}")
        if strides[self.order[0]] != 1:
            raise TMAError(f"encode: the contiguous dimension's stride must be 1, got {strides}")
        inner = extents[self.order[0]] * self.dtype.nbytes
        if inner % 16:
            # seen on an H200: a TMA store wrote whole 16-byte units past such an extent
            # (bf16 columns 100..103 of a 100-column view); loads share the map: refused too
            raise TMAError(
                f"encode: the contiguous dimension holds {extents[self.order[0]]} elements "
                f"({inner} bytes); TMA moves whole 16-byte units there, so it must be a "
                "multiple of 16 bytes (pad the rows, or take the edge on another path)"
            )
        gstrides = []
        for i in self.order[1:]:
            b = strides[i] * self.dtype.nbytes
            if type(strides[i]) is not int or b <= 0 or b % 16 or b >= 2**40:
                raise TMAError(
                    f"encode: stride {strides[i]} of dimension {i} is {b} bytes; TMA needs a "
                    "positive multiple of 16 below 2**40"
                )
            gstrides.append(b)
        if os.environ.get("TYLO_INTERPRET") == "1":  # the CPU interpreter has no TMA
            from tylo.interpret.errors import UnsupportedOperation

            raise UnsupportedOperation(
                "cp.async.bulk.tensor",
                "encode: TMA tensor maps (cp.async.bulk.tensor) are not interpreted "
                "(TYLO_INTERPRET=1): run this path on a Hopper GPU",
            )
        driver._init()  # NoDeviceError without a driver, as every host call that needs one
        cu = driver._cuda()
        enum = cu.CUtensorMapDataType
        swz = {
            "none": cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_NONE,
            "32B": cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_32B,
            "64B": cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_64B,
            "128B": cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
        }[self.swizzle]
        tmap = driver.check(
            cu.cuTensorMapEncodeTiled(
                getattr(enum, _DATA_TYPES[self.dtype.name]),
                cu.cuuint32_t(rank),
                address,
                [cu.cuuint64_t(extents[i]) for i in self.order],
                [cu.cuuint64_t(b) for b in gstrides],
                [cu.cuuint32_t(self.box[i]) for i in self.order],
                [cu.cuuint32_t(1)] * rank,
                cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
                swz,
                cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
            ),
            "cuTensorMapEncodeTiled",
        )
        return bytes(_tensor_map_bytes(tmap))


@functools.lru_cache(maxsize=256)
def _encode_memo(
    plan: TensorMapPlan, address: int, extents: tuple[int, ...], strides: tuple[int, ...]
) -> bytes:
    return plan._encode(address, extents, strides)


def _tensor_map_bytes(tmap: Any) -> bytes:
    """The 128 bytes of a ``CUtensorMap`` from cuda.bindings."""
    import ctypes

    ptr = int(tmap.getPtr())
    return ctypes.string_at(ptr, 128)


class TensorMap:
    """A tensor map encoded for one array: pass it to a kernel's parameter (by value, as a
    ``grid_constant``); the kernel sees a :class:`~tylo.kernel.tensormap.TensorMapParam`.
    ``array`` is any device array (tylo, torch, DLPack) whose shape and strides are the
    plan's global layout's, mode by mode; it is kept alive with the map.
    """

    tylo_param_kind: ClassVar[str] = "tensor_map"

    def __init__(self, plan: TensorMapPlan, array: Any) -> None:
        from tylo.arrays import as_device_array

        if not isinstance(plan, TensorMapPlan):
            raise TMAError(f"TensorMap: expected a TensorMapPlan, got {plan!r}")
        arr = as_device_array(array)
        if arr.dtype is not plan.dtype:
            raise TMAError(f"TensorMap: the plan is for {plan.dtype}, the array holds {arr.dtype}")
        if len(arr.shape) != len(plan.box):
            raise TMAError(
                f"TensorMap: the plan has {len(plan.box)} dimensions, the array {len(arr.shape)}"
            )
        self.plan = plan
        self.array = arr
        self.data = plan.encode(int(arr.ptr), tuple(arr.shape), tuple(arr.strides))

    def __repr__(self) -> str:
        return f"TensorMap(box={self.plan.box}, {self.plan.swizzle}, shape={self.array.shape})"


def _check_tile(op: str, tmap: Any, tile: Any) -> None:
    from tylo.kernel.tensormap import TensorMapParam
    from tylo.tile.views import SharedTile

    if not isinstance(tmap, TensorMapParam):
        raise TMAError(f"{op}: expected a tensor-map kernel parameter, got {tmap!r}")
    if not isinstance(tile, SharedTile):
        raise TMAError(f"{op}: the shared side must be a SharedTile, got {tile!r}")
    plan = tmap.plan
    if tuple(tile.shape) != tuple(plan.box) or tile.layout != plan.smem_layout:
        raise TMAError(
            f"{op}: the tile {tile!r} is not the box the plan proved ({plan.box} in "
            f"{plan.smem_layout}); take a window of that shape over that layout"
        )
    align = (
        1024
        if plan.swizzle == "128B"
        else 512
        if plan.swizzle == "64B"
        else 256
        if (plan.swizzle == "32B")
        else 128
    )
    from tylo.kernel import facts
    from tylo.nvgpu.bounds import check_region

    # the box is written from the tile's base on: the view must be the whole box layout
    check_region(op, tile, tuple((0, b) for b in plan.box), access="moves")
    period = align // plan.dtype.nbytes
    if facts.divides(period, tile.base) is not True or tile.storage.align < align:
        raise TMAError(
            f"{op}: TMA with the {plan.swizzle} swizzle writes shared memory from a "
            f"{align}-byte aligned start; allocate with tylo.shared(..., align={align}) and "
            f"keep the tile's offset a proved multiple of {period} elements"
        )


def _coords(b: Any, tmap: Any, coords: Any) -> list[ir.Value]:
    from tylo.kernel import facts
    from tylo.kernel.context import current
    from tylo.kernel.lower import lower_int
    from tylo.kernel.values import to_index

    plan = tmap.plan
    coords = tuple(coords)
    if len(coords) != len(plan.box):
        raise TMAError(f"TMA: give {len(plan.box)} coordinates (one per mode), got {coords}")
    # the box must start on a 16-byte boundary of the contiguous dimension: an H200 raises
    # CUDA_ERROR_ILLEGAL_INSTRUCTION for a bf16 box at inner coordinate 97 and not at 96
    unit = max(16 // plan.dtype.nbytes, 1)
    inner = to_index(coords[plan.order[0]], "TMA coordinate")
    if facts.divides(unit, inner) is not True:
        raise TMAError(
            f"TMA: the box's start {inner} in the contiguous dimension must be a proved "
            f"multiple of {unit} elements (16 bytes of {plan.dtype}); declare it "
            f"tylo.Int(multiple_of={unit}) or tylo.assume(tylo.divisible(x, {unit}))"
        )
    ctx = current()
    # TMA coordinates are signed 32-bit element indices, innermost dimension first
    return [lower_int(ctx, to_index(coords[i], "TMA coordinate"), 32) for i in plan.order]


def load(
    tmap: Any, tile: Any, coords: Any, barriers: Any, i: Any, *, multicast: Any = None
) -> None:
    """``cp.async.bulk.tensor.Nd.shared::cluster.global.tile.mbarrier::complete_tx::bytes``
    (sm_90; PTX ISA 9.7.9.27.1.2): copy the box at element ``coords`` (one per mode of the
    global layout) of ``tmap``'s tensor into shared ``tile``; its ``plan.box_bytes`` complete
    on barrier ``i`` of ``barriers`` (arm it with ``arrive_expect_tx``). Elements outside the
    tensor arrive as zeros. Issued by one thread.

    ``multicast=mask`` (a cluster kernel; a 16-bit CTA mask, static or runtime) adds
    ``.multicast::cluster``: the box is read once and written to ``tile``'s shared offset in
    every CTA whose cluster rank is a bit of ``mask``, and each of them gets the
    ``box_bytes`` on its own barrier ``i`` (at the same offset), so each armed its own
    barrier for them. The issuing CTA receives the box only if its own bit is set."""
    from tylo.backend.inline_ptx import PTXAsm
    from tylo.kernel.context import current
    from tylo.nvgpu.instructions import check_arch
    from tylo.tile.views import shared_address

    _check_tile("tma.load", tmap, tile)
    ctx = current()
    check_arch("mbarrier", ctx.target)
    b = ctx.builder
    asm = PTXAsm("cp.async.bulk.tensor")
    dst = asm.input(shared_address(tile.storage, tile.base, tile.dtype))
    tm = asm.input(tmap.address())
    cs = [asm.input(c) for c in _coords(b, tmap, coords)]
    bar = asm.input(barriers.address(i))
    if multicast is None:
        asm.line(
            f"cp.async.bulk.tensor.{len(cs)}d.shared::cluster.global.tile"
            f".mbarrier::complete_tx::bytes [{dst}], [{tm}, {{{', '.join(cs)}}}], [{bar}];"
        )
    else:
        mask = asm.input(_cta_mask(ctx, multicast))
        asm.line(
            f"cp.async.bulk.tensor.{len(cs)}d.shared::cluster.global.tile"
            ".mbarrier::complete_tx::bytes.multicast::cluster "
            f"[{dst}], [{tm}, {{{', '.join(cs)}}}], [{bar}], {mask};"
        )
    asm.emit(b, memory=True)


MAX_CLUSTER_CTAS = 16  # a multicast mask has one bit per CTA of the cluster (16 bits)


def _cta_mask(ctx: Any, mask: Any) -> Any:
    """The i16 ``ctaMask`` operand: a static mask must be a nonzero int of at most 16 bits
    naming only CTAs of the kernel's cluster; a runtime mask (an int Value or index
    expression) is truncated to its low 16 bits."""
    from llvmlite import ir

    from tylo.kernel.lower import lower_int
    from tylo.kernel.values import Value, convert, to_index
    from tylo.nvgpu.instructions import check_arch

    check_arch("multicast", ctx.target)
    if ctx.cluster is None:
        raise TMAError(
            "tma.load(multicast=...): the kernel is not a cluster kernel; launch it with "
            "kern[grid, block, cluster] (or compile with cluster=...) to multicast"
        )
    n = ctx.cluster[0] * ctx.cluster[1] * ctx.cluster[2]
    i16 = ir.IntType(16)
    if type(mask) is bool or (isinstance(mask, float)):
        raise TMAError(f"tma.load: multicast mask must be an integer CTA mask, got {mask!r}")
    if type(mask) is int:
        if not 0 < mask < 1 << MAX_CLUSTER_CTAS:
            raise TMAError(
                f"tma.load: multicast mask {mask:#x} must be a nonzero {MAX_CLUSTER_CTAS}-bit "
                "CTA mask (bit r: the CTA of cluster rank r)"
            )
        if mask >> n:
            raise TMAError(
                f"tma.load: multicast mask {mask:#x} names CTA rank(s) "
                f"{[r for r in range(MAX_CLUSTER_CTAS) if mask >> r & 1 and r >= n]}, but the "
                f"cluster {ctx.cluster} has {n} CTA(s) (ranks 0..{n - 1})"
            )
        return i16(mask)
    if isinstance(mask, Value):
        if mask.dtype.is_float or mask.dtype is dt.bool_:
            raise TMAError(f"tma.load: multicast mask must be an integer, got a {mask.dtype}")
        return ctx.builder.trunc(convert(mask, dt.u32).use(), i16)
    return ctx.builder.trunc(lower_int(ctx, to_index(mask, "multicast mask"), 32), i16)


def store(tmap: Any, tile: Any, coords: Any) -> None:
    """``cp.async.bulk.tensor.Nd.global.shared::cta.tile.bulk_group`` (sm_90; PTX ISA
    9.7.9.27.1.3): write shared ``tile`` (the plan's box) to the box at ``coords``; elements
    outside the tensor are not written. Fence ordinary shared stores first
    (``fence_shared_to_async()`` and a barrier), then :func:`commit_stores` and
    :func:`wait_stores` before reusing the tile. Issued by one thread."""
    from tylo.backend.inline_ptx import PTXAsm
    from tylo.kernel.context import current
    from tylo.nvgpu.instructions import check_arch
    from tylo.tile.views import shared_address

    _check_tile("tma.store", tmap, tile)
    ctx = current()
    check_arch("mbarrier", ctx.target)
    b = ctx.builder
    asm = PTXAsm("cp.async.bulk.tensor store")
    tm = asm.input(tmap.address())
    cs = [asm.input(c) for c in _coords(b, tmap, coords)]
    src = asm.input(shared_address(tile.storage, tile.base, tile.dtype))
    asm.line(
        f"cp.async.bulk.tensor.{len(cs)}d.global.shared::cta.tile.bulk_group "
        f"[{tm}, {{{', '.join(cs)}}}], [{src}];"
    )
    asm.emit(b, memory=True)


def commit_stores() -> None:
    """``cp.async.bulk.commit_group``: close the group of bulk stores issued so far."""
    _simple("cp.async.bulk.commit_group;")


def wait_stores(n: int = 0, *, read: bool = True) -> None:
    """``cp.async.bulk.wait_group[.read] n``: wait until at most ``n`` bulk-store groups are
    pending (``read=True``: until their shared sources may be overwritten; False: until the
    writes are visible)."""
    count = as_int(n)
    if count is None or not 0 <= count <= 63:
        raise TMAError(f"wait_stores: n must be a static int in [0, 63], got {n!r}")
    if type(read) is not bool:
        raise TMAError(f"wait_stores: read must be a bool, got {read!r}")
    _simple(f"cp.async.bulk.wait_group{'.read' if read else ''} {count};")


def _simple(text: str) -> None:
    from tylo.backend.inline_ptx import PTXAsm
    from tylo.kernel.context import current
    from tylo.nvgpu.instructions import check_arch

    ctx = current()
    check_arch("mbarrier", ctx.target)
    asm = PTXAsm(text.split()[0])
    asm.line(text)
    asm.emit(ctx.builder, memory=True)
