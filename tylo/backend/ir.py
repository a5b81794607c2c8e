"""NVVM IR module builder: the typed-pointer (LLVM 7) dialect that libNVVM accepts.

:class:`NVVMModule` wraps an ``llvmlite.ir.Module`` and adds what libNVVM needs and
llvmlite does not know about (verified facts in ``docs/toolchain.md``):

- the ``nvptx64-nvidia-cuda`` triple and the full NVVM datalayout (an empty one is an
  error on the LLVM 7 path);
- the mandatory ``!nvvmir.version = !{!{i32 2, i32 0}}``;
- ``!nvvm.annotations`` marking kernels (``.entry``), their ``maxntid`` and their
  ``grid_constant`` parameters (NVVM IR spec, "Kernel and function annotations");
- shared memory globals: static ``internal addrspace(3) global [N x T] undef`` and the one
  dynamic ``external addrspace(3) global [0 x i8], align 16``;
- declarations of the special-register intrinsics ``llvm.nvvm.read.ptx.sreg.*``;
- the bare ``byval`` attribute the LLVM 7 parser wants (llvmlite prints ``byval(<T>)``);
- loop identifiers (``!llvm.loop``), distinct self-referential metadata nodes that llvmlite
  cannot build, carrying the ``llvm.loop.unroll.*`` hints libNVVM's unroller honours.

Only intrinsics known to lower on the LLVM 7 path belong here; anything newer (cp.async,
ldmatrix, mma, ...) goes through :mod:`tylo.backend.inline_ptx`, because unknown
``llvm.nvvm.*`` names compile to ``.extern .func`` calls that only ptxas rejects.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from llvmlite import ir

from tylo.errors import TyloError

__all__ = [
    "ADDRSPACE_CONST",
    "ADDRSPACE_GLOBAL",
    "ADDRSPACE_SHARED",
    "NVVM_DATALAYOUT",
    "NVVM_IR_VERSION",
    "NVVM_TRIPLE",
    "SREGS",
    "IRError",
    "NVVMModule",
]

NVVM_TRIPLE = "nvptx64-nvidia-cuda"
NVVM_DATALAYOUT = (
    "e-p:64:64:64-i1:8:8-i8:8:8-i16:16:16-i32:32:32-i64:64:64-i128:128:128-"
    "f32:32:32-f64:64:64-v16:16:16-v32:32:32-v64:64:64-v128:128:128-n16:32:64"
)
# NVVM IR version metadata (major, minor) accepted by libNVVM 13.x (ir_version() 2.0).
NVVM_IR_VERSION = (2, 0)

# NVVM address spaces (NVVM IR spec, "Address spaces").
ADDRSPACE_GLOBAL = 1
ADDRSPACE_SHARED = 3
ADDRSPACE_CONST = 4

# Special registers readable through llvm.nvvm.read.ptx.sreg.<name> (PTX ISA, "Special
# Registers"); all are i32.
SREGS = frozenset(
    [f"{r}.{a}" for r in ("tid", "ntid", "ctaid", "nctaid") for a in "xyz"]
    + ["laneid", "warpid", "nwarpid", "smid", "nsmid"]
)

_I32 = ir.IntType(32)
# Loop hints libNVVM honours (LLVM LangRef, "'llvm.loop.unroll' Metadata"; the unrolled PTX
# carries `.pragma "nounroll"` so ptxas does not unroll again): checked by tests/nvvm.
LOOP_HINTS = frozenset(
    ["llvm.loop.unroll.count", "llvm.loop.unroll.disable", "llvm.loop.unroll.full"]
)
_BYVAL_RE = re.compile(r"byval\((?:[^()]|\([^()]*\))*\)")


class IRError(TyloError):
    """The IR builder was asked for something NVVM cannot express."""


class _LoopID(ir.values.MDValue):
    """A loop identifier: ``!N = distinct !{!N, hints...}`` (LLVM LangRef, "'llvm.loop'").

    The first operand is the node itself, which makes every loop's identifier unique; the
    structural hash and equality of llvmlite's metadata would recurse on it, so a loop
    identifier compares by identity."""

    def descr(self, buf: list[str]) -> None:
        buf.append("distinct ")
        super().descr(buf)

    def __eq__(self, other: object) -> bool:
        return self is other

    def __ne__(self, other: object) -> bool:
        return self is not other

    def __hash__(self) -> int:
        return id(self)


class NVVMModule:
    """An NVVM IR module under construction.

    >>> m = NVVMModule("demo")
    >>> fn = m.add_kernel("k", [ir.PointerType(ir.FloatType(), ADDRSPACE_GLOBAL)], maxntid=(128,))
    >>> b = ir.IRBuilder(fn.append_basic_block("entry"))
    >>> tid = m.sreg(b, "tid.x")
    >>> _ = b.ret_void()
    >>> text = m.to_text()
    >>> '!"maxntidx", i32 128' in text and "llvm.nvvm.read.ptx.sreg.tid.x" in text
    True
    """

    def __init__(self, name: str = "tylo") -> None:
        self.module = ir.Module(name)
        self.module.triple = NVVM_TRIPLE
        self.module.data_layout = NVVM_DATALAYOUT
        self._intrinsics: dict[str, ir.Function] = {}
        self._names: dict[str, int] = {}
        self._dynamic_shared: ir.GlobalVariable | None = None
        self._annotations: list[list[object]] = []
        self.kernels: list[str] = []

    # ------------------------------------------------------------------ names

    def unique_name(self, base: str) -> str:
        """A global name not used before in this module (``base``, ``base_1``, ...)."""
        clean = re.sub(r"[^A-Za-z0-9_.$]", "_", base) or "g"
        n = self._names.get(clean, 0)
        self._names[clean] = n + 1
        return clean if n == 0 else f"{clean}_{n}"

    # ------------------------------------------------------------------ kernels

    def add_kernel(
        self,
        name: str,
        params: Sequence[ir.Type],
        *,
        maxntid: Sequence[int] | None = None,
        grid_constant: Sequence[int] = (),
        byval: Sequence[int] = (),
        param_names: Sequence[str] | None = None,
        cluster: Sequence[int] | None = None,
        maxnreg: int | None = None,
    ) -> ir.Function:
        """Declare a kernel entry (``void name(params...)``) and annotate it.

        ``maxntid`` (1-3 ints) becomes ``.maxntid`` in PTX. ``maxnreg`` (24..255: ptxas
        raises a smaller count to 24) becomes ``.maxnreg``: the cap on registers per thread.
        ptxas ignores ``-maxrregcount`` for an entry with ``.maxntid`` (checked with ptxas
        13.0), so a cap on such a kernel must be this directive. ``grid_constant`` and
        ``byval`` are 0-based parameter indices: a by-value aggregate (a ``[128 x i8]*``
        tensor map) needs both, giving ``.param .align 64 .b8 p[128]`` and ``cvta.param``.
        ``cluster`` (3 positive ints) becomes ``.explicitcluster`` and ``.reqnctapercluster``
        (the ``cluster_dim_{x,y,z}`` annotations, which libNVVM 13 accepts).
        """
        if name in self.kernels or name in self.module.globals:
            raise IRError(f"NVVMModule.add_kernel: a global named {name!r} already exists")
        fn = ir.Function(self.module, ir.FunctionType(ir.VoidType(), list(params)), name)
        for i, arg in enumerate(fn.args):
            if param_names is not None:
                arg.name = param_names[i]
        for i in byval:
            if not isinstance(fn.args[i].type, ir.PointerType):
                raise IRError(f"add_kernel({name!r}): byval parameter {i} must be a pointer")
            fn.args[i].add_attribute("byval")
        self.kernels.append(name)
        self._annotations.append([fn, "kernel", _I32(1)])
        if maxntid is not None:
            dims = tuple(maxntid)
            if not 1 <= len(dims) <= 3 or any(not isinstance(d, int) or d < 1 for d in dims):
                raise IRError(
                    f"add_kernel({name!r}): maxntid {maxntid!r} must be 1-3 positive ints"
                )
            for axis, d in zip("xyz", dims):
                self._annotations.append([fn, f"maxntid{axis}", _I32(d)])
        if maxnreg is not None:
            if type(maxnreg) is not int or not 24 <= maxnreg <= 255:
                raise IRError(
                    f"add_kernel({name!r}): maxnreg {maxnreg!r} must be an int in 24..255"
                )
            self._annotations.append([fn, "maxnreg", _I32(maxnreg)])
        if cluster is not None:
            shape = tuple(cluster)
            if len(shape) != 3 or any(type(d) is not int or d < 1 for d in shape):
                raise IRError(f"add_kernel({name!r}): cluster {cluster!r} must be 3 positive ints")
            for axis, d in zip("xyz", shape):
                self._annotations.append([fn, f"cluster_dim_{axis}", _I32(d)])
        if grid_constant:
            n = len(fn.args)
            if any(not 0 <= i < n for i in grid_constant):
                raise IRError(f"add_kernel({name!r}): grid_constant {grid_constant} out of range")
            # the annotation lists 1-based parameter indices (NVVM IR spec, grid_constant)
            idx = self.module.add_metadata([_I32(i + 1) for i in grid_constant])
            self._annotations.append([fn, "grid_constant", idx])
        return fn

    def set_min_ctas_per_sm(self, fn: ir.Function, n: int) -> None:
        """``.minnctapersm n`` for kernel ``fn`` (the ``minctasm`` annotation). With
        ``.maxntid`` it fixes the registers per thread at entry, which ``setmaxnreg`` needs:
        without it ptxas drops every ``setmaxnreg`` (info C7508). Idempotent."""
        if fn.name not in self.kernels:
            raise IRError(f"set_min_ctas_per_sm: {fn.name!r} is not a kernel of this module")
        if type(n) is not int or n < 1:
            raise IRError(f"set_min_ctas_per_sm: n must be a positive int, got {n!r}")
        for ann in self._annotations:
            if ann[0] is fn and ann[1] == "minctasm":
                if ann[2].constant != n:
                    raise IRError(f"set_min_ctas_per_sm: {fn.name!r} already has {ann[2].constant}")
                return
        self._annotations.append([fn, "minctasm", _I32(n)])

    # ------------------------------------------------------------------ intrinsics

    def intrinsic(self, name: str, ret: ir.Type, args: Sequence[ir.Type]) -> ir.Function:
        """Declare (once) and return the function ``name`` of type ``ret(args)``."""
        fn = self._intrinsics.get(name)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(ret, list(args)), name)
            self._intrinsics[name] = fn
        return fn

    def sreg(self, builder: ir.IRBuilder, name: str) -> ir.Value:
        """Read special register ``name`` ('tid.x', 'ctaid.y', 'laneid', ...) as an i32."""
        if name not in SREGS:
            raise IRError(
                f"NVVMModule.sreg: unknown special register {name!r}; known: {sorted(SREGS)}"
            )
        fn = self.intrinsic(f"llvm.nvvm.read.ptx.sreg.{name}", _I32, [])
        return builder.call(fn, [], name=name.replace(".", "_"))

    # ------------------------------------------------------------------ loops

    def loop_id(self, *hints: tuple[str, ...] | tuple[str, int]) -> ir.values.MDValue:
        """A new loop identifier carrying ``hints``, for the ``!llvm.loop`` metadata of a
        loop's back-edge branch: ``("llvm.loop.unroll.count", 4)``,
        ``("llvm.loop.unroll.disable",)`` or ``("llvm.loop.unroll.full",)``.

        >>> m = NVVMModule("demo")
        >>> str(m.loop_id(("llvm.loop.unroll.count", 4))).strip()
        '!1 = distinct !{ !1, !0 }'
        """
        props: list[ir.values.MDValue] = []
        for hint in hints:
            name, *args = hint
            if name not in LOOP_HINTS or any(type(a) is not int for a in args):
                raise IRError(f"NVVMModule.loop_id: unknown loop hint {hint!r}")
            props.append(self.module.add_metadata([name, *(_I32(a) for a in args)]))
        node = _LoopID(self.module, (), name=str(len(self.module.metadata)))
        node.operands = (node, *props)
        return node

    # ------------------------------------------------------------------ shared memory

    def shared_array(
        self, name: str, element: ir.Type, count: int, *, align: int = 16
    ) -> ir.GlobalVariable:
        """A static shared-memory array ``internal addrspace(3) global [count x element]``
        (uninitialized: libNVVM rejects initializers on shared variables)."""
        if not isinstance(count, int) or count < 1:
            raise IRError(f"shared_array({name!r}): count must be a positive int, got {count!r}")
        if align < 1 or align & (align - 1):
            raise IRError(f"shared_array({name!r}): align {align} is not a power of two")
        ty = ir.ArrayType(element, count)
        gv = ir.GlobalVariable(self.module, ty, self.unique_name(name), addrspace=ADDRSPACE_SHARED)
        gv.linkage = "internal"
        gv.initializer = ir.Constant(ty, ir.Undefined)
        gv.align = align
        return gv

    def dynamic_shared(self, align: int = 16) -> ir.GlobalVariable:
        """The module's dynamic shared memory, ``external addrspace(3) global [0 x i8]``,
        aligned to 16 bytes or the largest ``align`` asked for (a power of two, at most
        1024: TMA and wgmma's 128-byte swizzle need 1024); its size is the launch's
        ``shared`` bytes."""
        if align < 16 or align > 1024 or align & (align - 1):
            raise IRError(
                f"dynamic_shared: align must be a power of two in [16, 1024], got {align}"
            )
        if self._dynamic_shared is not None:
            self._dynamic_shared.align = max(self._dynamic_shared.align, align)
        if self._dynamic_shared is None:
            ty = ir.ArrayType(ir.IntType(8), 0)
            gv = ir.GlobalVariable(
                self.module, ty, self.unique_name("tylo_dynamic_smem"), addrspace=ADDRSPACE_SHARED
            )
            gv.linkage = "external"
            gv.align = align
            self._dynamic_shared = gv
        return self._dynamic_shared

    # ------------------------------------------------------------------ output

    def to_text(self) -> str:
        """The module as NVVM IR text, with annotations and the IR version attached."""
        mod = self.module
        if "nvvm.annotations" not in mod.namedmetadata:
            for ann in self._annotations:
                mod.add_named_metadata("nvvm.annotations", ann)
            mod.add_named_metadata("nvvmir.version", [_I32(v) for v in NVVM_IR_VERSION])
        # The LLVM 7 parser wants a bare `byval`; llvmlite prints `byval(<type>)`.
        return _BYVAL_RE.sub("byval", str(mod))
