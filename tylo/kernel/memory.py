"""Memory inside a kernel: global pointers, views with a Layout, shared memory.

- :class:`Tensor` is typed memory in one address space (global or shared) with an
  optional :class:`~tylo.layouts.Layout` (or ``ComposedLayout``, e.g. with a swizzle)
  mapping coordinates to element offsets. ``t[i]`` / ``t[i, j]`` loads, ``t[...] = v``
  stores, ``t.load(c, vector=4)`` / ``t.store(c, values)`` move 4..16-byte vectors
  (``ld.global.v4.f32``, ``ld.shared.v4.b32``...), with optional cache qualifiers.
- A pointer parameter of a kernel is a :class:`Tensor` without layout (``a[i]`` is
  element ``i``); :func:`view` gives it a layout.
- :func:`shared` allocates static shared memory (``internal addrspace(3) global``);
  :func:`dynamic_shared` views the launch's dynamic shared memory (16-byte aligned).
  ``t.address(c)`` is the 32-bit shared address of element ``c``, for ``[r]`` operands of
  inline PTX (``ldmatrix``, ``cp.async``, ...).

Vector accesses need the address to be a multiple of the vector size in bytes. tylo
proves it on the host side of the trace: the base alignment must be known (a
``tylo.Ptr(align=16)`` parameter, shared memory) and the element offset must be provably
a multiple of the vector length from the facts in force (``tylo.Int(multiple_of=...)``,
loop and thread index facts); otherwise the trace fails with a message saying what is
missing. Nothing is assumed silently.
"""

from __future__ import annotations

import re
from typing import Any

from llvmlite import ir

from tylo import dtypes as dt
from tylo.backend.inline_ptx import PTXAsm
from tylo.backend.ir import ADDRSPACE_GLOBAL, ADDRSPACE_SHARED
from tylo.dtypes import DType
from tylo.kernel import accesses, debug, facts
from tylo.kernel.context import current
from tylo.kernel.errors import OutOfBoundsError, TraceError
from tylo.kernel.lower import bounds, lower_int
from tylo.kernel.values import Value, as_value, convert, ir_type, memory_type, to_index
from tylo.layouts._lazy import sympy

__all__ = ["Tensor", "dynamic_shared", "shared", "view"]

_EVICT = r"L1::(?:no_allocate|evict_first|evict_last|evict_normal|evict_unchanged)"
_L2 = r"L2::(?:evict_first|evict_last|evict_normal|64B|128B|256B)"
# PTX ISA "ld": ld.global{.cop}{.nc}{.level::eviction_priority}{.level::prefetch_size};
# "st": st.global{.cop}{.level::eviction_priority}. The order is checked by ptxas.
_LOAD_CACHE = re.compile(rf"^(?:(?:ca|cg|cs|lu|cv|nc|{_EVICT}|{_L2})(?:\.(?!$)|$))+$")
_STORE_CACHE = re.compile(
    rf"^(?:(?:wb|cg|cs|wt|{_EVICT}|L2::(?:evict_first|evict_last|"
    rf"evict_normal))(?:\.(?!$)|$))+$"
)
_VECTOR_BYTES = (4, 8, 16)
# Statically allocated shared memory per block is limited to 48 KB; more must be dynamic
# and opted in per function (CUDA C++ Programming Guide, "Shared Memory" of each
# compute capability).
STATIC_SHARED_LIMIT = 48 * 1024
_SPACE = {ADDRSPACE_GLOBAL: "global", ADDRSPACE_SHARED: "shared"}


def _ptx_type(d: DType) -> tuple[str, ir.Type]:
    """PTX register type and IR type of one element in an inline-asm access."""
    if d.is_float and d.bits in (32, 64):
        return f"f{d.bits}", ir_type(d)
    if d.bits in (16, 32, 64):
        return f"b{d.bits}", ir.IntType(d.bits)
    raise TraceError(
        f"cache-qualified accesses of {d} elements are not supported; use "
        "vectors of at least 4 bytes"
    )


class Tensor:
    """Typed memory (global or shared) with an optional layout; see the module docstring.

    ``dtype``: element type; ``layout``: coordinate -> element offset (None: the index
    is the offset); ``align``: the base address's known alignment in bytes; ``param``:
    the kernel parameter it views, if any; ``extent``: the number of elements from the
    base, where known (shared memory).

    Offsets are checked while tracing: a static offset must fit the kernel's index width
    (``index_bits``) and its byte offset 64 bits, must not be negative (the base is the
    start of the memory: Python's negative indexing does not apply) and must lie within
    a known extent; an offset whose proved range lies entirely outside these limits is
    refused too. With ``TYLO_DEBUG_BOUNDS=1`` the other offsets are checked at run time
    (:mod:`tylo.kernel.debug`).
    """

    __slots__ = ("addrspace", "align", "base", "dtype", "extent", "layout", "name", "param")

    def __init__(
        self,
        dtype: DType,
        base: ir.Value,
        *,
        addrspace: int,
        align: int,
        layout: Any = None,
        name: str = "tensor",
        param: int | None = None,
        extent: int | None = None,
    ) -> None:
        self.dtype = dtype
        self.extent = extent  # elements from the base, where known (shared memory)
        self.base = base
        self.addrspace = addrspace
        self.align = align
        self.layout = layout
        self.name = name
        self.param = param  # index of the kernel parameter it comes from, if any

    @property
    def space(self) -> str:
        return _SPACE[self.addrspace]

    def __repr__(self) -> str:
        layout = f", layout={self.layout}" if self.layout is not None else ""
        return f"Tensor({self.space}, {self.dtype}{layout})"

    def __bool__(self) -> bool:
        return True

    def __iter__(self) -> Any:
        # without this, Python would iterate by calling __getitem__(0), (1), ... forever
        raise TraceError(
            f"{self.name} is memory without a length: it cannot be iterated or searched "
            "with `in`; loop over indices (for i in tylo.range(n))"
        )

    def __contains__(self, item: Any) -> bool:
        return self.__iter__()

    # -------------------------------------------------------------- offsets

    def offset(self, coord: Any) -> Any:
        """The element offset (an index expression) of ``coord``."""
        if self.layout is None:
            if isinstance(coord, tuple):
                raise TraceError(
                    f"{self.name}: a pointer takes one index, got {coord!r}; "
                    "use tylo.view(ptr, layout) for coordinates"
                )
            return to_index(coord, f"{self.name}[...]")
        if isinstance(coord, tuple):
            crd = tuple(_coord(c, self.name) for c in coord)
            return _expr(self.layout(*crd))
        return _expr(self.layout(_coord(coord, self.name)))

    def _check_offset(self, offset: Any, count: int, what: str, kind: str = "access") -> None:
        """Refuse an element offset that cannot address elements ``offset .. offset +
        count - 1`` of this memory (see the class docstring), and record the access
        (``kind``: load, store, address, atomic) with its bounds obligation
        (:mod:`tylo.kernel.accesses`)."""
        ctx = current()
        bits = ctx.index_bits
        lo_lim, hi_lim = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
        where = f"{self.name}{what}"
        if isinstance(offset, sympy.Integer) or isinstance(offset, int):
            lo = hi = int(offset)
        else:
            lo, hi = bounds(ctx, offset)
        static = lo is not None and lo == hi
        if static:
            wraps = not (lo_lim <= lo and lo + count - 1 <= hi_lim)  # type: ignore[operator]
        else:
            wraps = (lo is not None and lo > hi_lim) or (hi is not None and hi < lo_lim)
        if wraps:
            raise TraceError(
                f"{where}: the element offset {offset} does not fit the kernel's {bits}-bit "
                f"index arithmetic ([{lo_lim}, {hi_lim}]); it would wrap to another "
                "element" + ("; use @tylo.kernel(index_bits=64)" if bits == 32 else "")
            )
        nbytes = max(self.dtype.nbytes, 1)
        if static and not -(1 << 63) <= lo * nbytes < (1 << 63):  # type: ignore[operator]
            raise TraceError(
                f"{where}: the element offset {offset} is {lo * nbytes} bytes from the base, "
                "beyond any 64-bit address"
            )
        if hi is not None and hi < 0:
            raise OutOfBoundsError(
                f"{where}: the element offset {offset} is negative, before the start of "
                f"{self.name} (a pointer has no length, so Python's negative indexing does "
                "not apply; index from the start)"
            )
        if self.extent is not None and lo is not None and lo + count > self.extent:
            span = f"elements {lo}..{lo + count - 1}" if count > 1 else f"element {lo}"
            raise OutOfBoundsError(
                f"{where}: {span} of {self.name}, which holds {self.extent} elements"
                + (f" (the offset {offset} is at least {lo})" if lo != hi else "")
            )
        if not static and debug.enabled():  # TYLO_DEBUG_BOUNDS=1: check at run time
            debug.check_access(self, offset, count, where)
        accesses.record(
            ctx,
            offset,
            count,
            kind,
            name=self.name,
            space=self.space,
            extent=self.extent,
            param=self.param,
            base=self.base,
            nbytes=self.dtype.nbytes,
        )

    def _pointer(self, offset: Any, elem: ir.Type | None = None) -> ir.Value:
        ctx = current()
        b = ctx.builder
        off = lower_int(ctx, offset)
        p = b.gep(self.base, [off], inbounds=True)
        return p if elem is None else b.bitcast(p, elem.as_pointer(self.addrspace))

    # -------------------------------------------------------------- access

    def __getitem__(self, coord: Any) -> Value:
        return self.load(coord)

    def __setitem__(self, coord: Any, value: Any) -> None:
        self.store(coord, value)

    def load(self, coord: Any, *, vector: int = 1, cache: str | None = None) -> Any:
        """Load the element at ``coord``, or with ``vector=n`` the ``n`` consecutive
        elements starting there (a tuple of Values, one vector instruction).
        ``cache`` is a PTX cache qualifier ('nc', 'cs', 'L1::no_allocate', ...)."""
        offset = self.offset(coord)
        self._check_offset(offset, vector if type(vector) is int else 1, f"[{coord!r}]", "load")
        if vector != 1:
            self._check_vector(offset, vector, "load")
        if cache is not None:
            return self._load_asm(offset, vector, cache)
        ctx = current()
        b = ctx.builder
        mem = memory_type(self.dtype)
        if vector == 1:
            v = b.load(self._pointer(offset), align=self.dtype.nbytes or 1)
            return Value(self.dtype, self._from_memory(b, v))
        nbytes = vector * self.dtype.nbytes
        if self.dtype.nbytes < 4:
            # Move 16-bit and smaller elements as 32-bit words and split the words with
            # shifts: a bitcast to <8 x i16> lets LLVM split the access into two v4.u16.
            wt = ir.VectorType(ir.IntType(32), nbytes // 4)
            raw = b.load(self._pointer(offset, wt), align=nbytes)
            return tuple(
                Value(self.dtype, self._from_memory(b, e))
                for e in _split_words(b, raw, wt.count, mem)
            )
        vec = b.load(self._pointer(offset, ir.VectorType(mem, vector)), align=nbytes)
        return tuple(
            Value(self.dtype, self._from_memory(b, b.extract_element(vec, ir.IntType(32)(k))))
            for k in range(vector)
        )

    def store(self, coord: Any, value: Any, *, cache: str | None = None) -> None:
        """Store one value at ``coord``, or a tuple/list of values as one vector store."""
        offset = self.offset(coord)
        values = list(value) if isinstance(value, (tuple, list)) else None
        vector = len(values) if values is not None else 1
        self._check_offset(offset, vector, f"[{coord!r}]", "store")
        if values is not None and vector != 1:
            self._check_vector(offset, vector, "store")
        items = [_as_element(v, self.dtype) for v in (values if values is not None else [value])]
        if cache is not None:
            self._store_asm(offset, items, cache)
            return
        ctx = current()
        b = ctx.builder
        mem = memory_type(self.dtype)
        raw = [self._to_memory(b, v) for v in items]
        if vector == 1:
            b.store(raw[0], self._pointer(offset), align=self.dtype.nbytes or 1)
            return
        nbytes = vector * self.dtype.nbytes
        if self.dtype.nbytes < 4:  # join into 32-bit words (see load)
            wt = ir.VectorType(ir.IntType(32), nbytes // 4)
            b.store(_join_words(b, raw, wt.count), self._pointer(offset, wt), align=nbytes)
            return
        vec: ir.Value = ir.Constant(ir.VectorType(mem, vector), ir.Undefined)
        for k, r in enumerate(raw):
            vec = b.insert_element(vec, r, ir.IntType(32)(k))
        b.store(vec, self._pointer(offset, ir.VectorType(mem, vector)), align=nbytes)

    def address(self, coord: Any) -> Value:
        """The address of the element at ``coord``: a u32 shared-window address for shared
        memory (for inline PTX ``[r]`` operands), a u64 global address otherwise."""
        ctx = current()
        offset = self.offset(coord)
        self._check_offset(offset, 1, f".address({coord!r})", "address")
        p = self._pointer(offset)
        if self.addrspace == ADDRSPACE_SHARED:
            return Value(dt.u32, ctx.builder.ptrtoint(p, ir.IntType(32)))
        return Value(dt.u64, ctx.builder.ptrtoint(p, ir.IntType(64)))

    # -------------------------------------------------------------- helpers

    def _from_memory(self, b: ir.IRBuilder, v: ir.Value) -> ir.Value:
        if self.dtype is dt.bool_:
            return b.icmp_unsigned("!=", v, ir.IntType(8)(0))
        return v

    def _to_memory(self, b: ir.IRBuilder, v: Value) -> ir.Value:
        if self.dtype is dt.bool_:
            return b.zext(v.use(), ir.IntType(8))
        return v.use()

    def _check_vector(self, offset: Any, n: int, what: str) -> None:
        nbytes = n * self.dtype.nbytes
        if type(n) is not int or n < 1 or nbytes not in _VECTOR_BYTES:
            raise TraceError(
                f"{self.name}.{what}(vector={n}): a vector access moves 4, 8 or 16 bytes; "
                f"{n} x {self.dtype} is {nbytes} bytes"
            )
        if self.align < nbytes:
            hint = (
                f"annotate the parameter tylo.Ptr(align={nbytes})"
                if self.addrspace == ADDRSPACE_GLOBAL
                else f"allocate with align={nbytes}"
            )
            raise TraceError(
                f"{self.name}.{what}(vector={n}): needs a {nbytes}-byte aligned base, but "
                f"only {self.align}-byte alignment is known; {hint}"
            )
        if facts.divides(n, offset) is not True:
            raise TraceError(
                f"{self.name}.{what}(vector={n}): cannot prove that the element offset "
                f"{offset} is a multiple of {n}; give the facts that make it so (e.g. "
                f"tylo.Int(multiple_of={n}) for a runtime stride)"
            )

    def _load_asm(self, offset: Any, n: int, cache: str) -> Any:
        if not _LOAD_CACHE.match(cache):
            raise TraceError(
                f"{self.name}.load(cache={cache!r}): not a PTX load cache "
                "qualifier (ca, cg, cs, lu, cv, nc, optionally .L1::evict_*...)"
            )
        if self.addrspace != ADDRSPACE_GLOBAL:
            raise TraceError(f"{self.name}.load(cache=...): cache qualifiers are for global memory")
        ctx = current()
        words = n
        d = self.dtype
        if d.nbytes < 4 and n > 1:
            words, d = n * d.nbytes // 4, dt.u32
        ptype, ity = _ptx_type(d)
        asm = PTXAsm(f"ld.global.{cache}")
        outs = [asm.output(ity) for _ in range(words)]
        addr = asm.input(self._pointer(offset))
        regs = outs[0] if words == 1 else "{" + ", ".join(outs) + "}"
        vec = "" if words == 1 else f".v{words}"
        asm.line(f"ld.global.{cache}{vec}.{ptype} {regs}, [{addr}];")
        # read-only (.nc) loads may be reordered freely; others must not pass stores
        readonly = "nc" in cache.split(".")
        results = asm.emit(ctx.builder, side_effects=not readonly, memory=not readonly)
        if d is self.dtype:
            vals = [Value(d, r) for r in results]
        else:
            b = ctx.builder
            vec_t = ir.VectorType(ir.IntType(32), words)
            packed: ir.Value = ir.Constant(vec_t, ir.Undefined)
            for k, r in enumerate(results):
                packed = b.insert_element(packed, r, ir.IntType(32)(k))
            elems = b.bitcast(packed, ir.VectorType(memory_type(self.dtype), n))
            vals = [
                Value(self.dtype, b.extract_element(elems, ir.IntType(32)(k))) for k in range(n)
            ]
        return vals[0] if n == 1 else tuple(vals)

    def _store_asm(self, offset: Any, items: list[Value], cache: str) -> None:
        if not _STORE_CACHE.match(cache):
            raise TraceError(
                f"{self.name}.store(cache={cache!r}): not a PTX store cache "
                "qualifier (wb, cg, cs, wt, optionally .L1::...)"
            )
        if self.addrspace != ADDRSPACE_GLOBAL:
            raise TraceError(
                f"{self.name}.store(cache=...): cache qualifiers are for global memory"
            )
        ctx = current()
        b = ctx.builder
        d = self.dtype
        raw = [v.use() for v in items]
        if d.nbytes < 4 and len(items) > 1:
            vec: ir.Value = ir.Constant(ir.VectorType(memory_type(d), len(items)), ir.Undefined)
            for k, r in enumerate(raw):
                vec = b.insert_element(vec, r, ir.IntType(32)(k))
            words = len(items) * d.nbytes // 4
            wv = b.bitcast(vec, ir.VectorType(ir.IntType(32), words))
            raw = [b.extract_element(wv, ir.IntType(32)(k)) for k in range(words)]
            d = dt.u32
        ptype, _ = _ptx_type(d)
        asm = PTXAsm(f"st.global.{cache}")
        addr = asm.input(self._pointer(offset))
        regs = [asm.input(r) for r in raw]
        text = regs[0] if len(regs) == 1 else "{" + ", ".join(regs) + "}"
        vec_s = "" if len(regs) == 1 else f".v{len(regs)}"
        asm.line(f"st.global.{cache}{vec_s}.{ptype} [{addr}], {text};")
        asm.emit(b, side_effects=True, memory=True)


def _split_words(b: ir.IRBuilder, words: ir.Value, count: int, elem: ir.Type) -> list[ir.Value]:
    """The narrow elements of a ``<count x i32>`` value, lowest address first."""
    per = 32 // elem.width
    out = []
    for k in range(count):
        w = b.extract_element(words, ir.IntType(32)(k))
        for j in range(per):
            part = b.lshr(w, ir.IntType(32)(j * elem.width)) if j else w
            out.append(b.trunc(part, elem))
    return out


def _join_words(b: ir.IRBuilder, elems: list[ir.Value], count: int) -> ir.Value:
    """``<count x i32>`` holding the narrow ``elems``, lowest address first."""
    width = elems[0].type.width
    per = 32 // width
    vec: ir.Value = ir.Constant(ir.VectorType(ir.IntType(32), count), ir.Undefined)
    for k in range(count):
        w: ir.Value | None = None
        for j in range(per):
            part = b.zext(elems[k * per + j], ir.IntType(32))
            if j:
                part = b.shl(part, ir.IntType(32)(j * width))
            w = part if w is None else b.or_(w, part)
        vec = b.insert_element(vec, w, ir.IntType(32)(k))
    return vec


def _coord(c: Any, name: str) -> Any:
    if isinstance(c, tuple):
        return tuple(_coord(x, name) for x in c)
    e = to_index(c, f"{name}[...]")
    return int(e) if e.is_Integer else e


def _expr(x: Any) -> Any:
    return sympy.Integer(x) if isinstance(x, int) else x


def _as_element(v: Any, d: DType) -> Value:
    if isinstance(v, Value):
        if v.dtype is not d:
            raise TraceError(
                f"storing a {v.dtype} value into {d} memory; convert it with "
                f".to(tylo.{d.name}) first"
            )
        return v
    return convert(as_value(v, d), d)


def view(ptr: Tensor, layout: Any) -> Tensor:
    """``ptr`` (a pointer parameter or another view) seen through ``layout``: ``t[c]`` is
    the element at offset ``layout(c)`` from ``ptr``'s base."""
    if not isinstance(ptr, Tensor):
        raise TraceError(
            f"tylo.view: expected a pointer parameter or a tensor, got {type(ptr).__name__}"
        )
    if not callable(layout):
        raise TraceError(f"tylo.view: expected a Layout, got {type(layout).__name__}")
    return Tensor(
        ptr.dtype,
        ptr.base,
        addrspace=ptr.addrspace,
        align=ptr.align,
        layout=layout,
        name=ptr.name,
        param=ptr.param,
        extent=ptr.extent,
    )


def _extent(layout_or_size: Any, what: str) -> tuple[Any, int]:
    """(layout or None, number of elements to allocate)."""
    from tylo.layouts import cosize
    from tylo.layouts.symbolic import require_static

    if isinstance(layout_or_size, int):
        if layout_or_size < 1:
            raise TraceError(f"{what}: size must be >= 1, got {layout_or_size}")
        return None, layout_or_size
    try:
        n = cosize(layout_or_size)
    except Exception as err:  # noqa: BLE001 - any layout error, reported with context
        raise TraceError(f"{what}: cannot size {layout_or_size!r}: {err}") from None
    return layout_or_size, require_static(n, what=f"{what}: the layout's cosize")


def shared(dtype: Any, layout_or_size: Any, *, align: int = 16, name: str = "smem") -> Tensor:
    """Allocate static shared memory for ``layout_or_size`` elements of ``dtype`` (a
    static Layout, or an element count) and return a view of it."""
    ctx = current()
    d = dt.dtype_of(dtype)
    layout, n = _extent(layout_or_size, "tylo.shared")
    if align < 1 or align & (align - 1):
        raise TraceError(f"tylo.shared: align must be a power of two, got {align}")
    if ctx.static_shared_bytes + n * d.nbytes > STATIC_SHARED_LIMIT:
        raise TraceError(
            f"tylo.shared: {n} {d} elements ({n * d.nbytes} bytes) bring the kernel's static "
            f"shared memory to {ctx.static_shared_bytes + n * d.nbytes} bytes, over the "
            f"{STATIC_SHARED_LIMIT}-byte static limit (CUDA C++ Programming Guide, shared "
            "memory); use tylo.dynamic_shared for more"
        )
    gv = ctx.module.shared_array(name, memory_type(d), n, align=max(align, d.nbytes))
    zero = ir.IntType(32)(0)
    base = gv.gep([zero, zero])
    ctx.shared_allocs[id(base)] = gv.name  # one allocation, for the race check
    ctx.shared_bases.append(base)
    pad = -ctx.static_shared_bytes % max(align, d.nbytes)
    ctx.static_shared_bytes += pad + n * d.nbytes
    return Tensor(
        d,
        base,
        addrspace=ADDRSPACE_SHARED,
        align=max(align, d.nbytes),
        layout=layout,
        name=name,
        extent=n,
    )


def dynamic_shared(
    dtype: Any,
    layout_or_size: Any,
    *,
    offset_bytes: int = 0,
    align: int = 16,
    name: str = "dsmem",
) -> Tensor:
    """View the launch's dynamic shared memory (``kern[g, b](..., shared=nbytes)``) from
    ``offset_bytes`` on as ``layout_or_size`` elements of ``dtype``. ``align`` (a power of
    two up to 1024) is the alignment the whole allocation gets (swizzled TMA and wgmma tiles
    need 1024). Launches that give fewer bytes than the views need fail before launching."""
    ctx = current()
    d = dt.dtype_of(dtype)
    layout, n = _extent(layout_or_size, "tylo.dynamic_shared")
    if type(offset_bytes) is not int or offset_bytes < 0 or offset_bytes % max(d.nbytes, 1):
        raise TraceError(
            f"tylo.dynamic_shared: offset_bytes must be a non-negative multiple "
            f"of {d.nbytes} (the {d} size), got {offset_bytes!r}"
        )
    if type(align) is not int or not 16 <= align <= 1024 or align & (align - 1):
        raise TraceError(
            f"tylo.dynamic_shared: align must be a power of two in [16, 1024], got {align!r}"
        )
    gv = ctx.module.dynamic_shared(align)
    base = gv.gep([ir.IntType(32)(0), ir.IntType(32)(offset_bytes)]).bitcast(
        memory_type(d).as_pointer(ADDRSPACE_SHARED)
    )
    ctx.uses_dynamic_shared = True
    ctx.dynamic_shared_bytes = max(ctx.dynamic_shared_bytes, offset_bytes + n * d.nbytes)
    align = align if offset_bytes == 0 else min(align, offset_bytes & -offset_bytes)
    return Tensor(
        d,
        base,
        addrspace=ADDRSPACE_SHARED,
        align=max(align, d.nbytes),
        layout=layout,
        name=name,
        extent=n,
    )
