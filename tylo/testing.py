"""Test helpers: GPU test tiers and small hand-written NVVM IR kernels.

Test tiers (docs/backend.md and docs/index.md): a test file under ``tests/gpu`` states what its
runtime half needs in a banner comment among its first lines::

    # TEST_TARGET: cc>=9.0a

Its assembly half always runs (it compiles for an explicit :class:`~tylo.target.Target`).
Its runtime half asks for the ``gpu_runtime`` fixture (``tests/conftest.py``) or calls
:func:`require_gpu_runtime`, which returns the device's target when it satisfies the
banner and otherwise skips with a reason naming the need and what was found
(``"needs a GPU with cc>=9.0a (found: none)"``), or fails instead of skipping when
``TYLO_REQUIRE_GPU_RUNTIME=1``.

Tests of the optional C inline launch path (``tylo._launch``, built by ``pip install``
where a C compiler and Python's headers are present) call :func:`require_c_launch`, which
skips them where the extension is not built, or fails them under ``TYLO_REQUIRE_C_LAUNCH=1``
(CI sets it, so a failed build never silently drops their coverage).

The sample kernels are plain llvmlite NVVM IR, independent of tylo's IR builder, so the
toolchain can be tested on its own.
"""

from __future__ import annotations

import functools
import os
import re

from llvmlite import ir

from tylo.target import Target, parse_spec

__all__ = [
    "BANNER_KEY",
    "NVVM_DATALAYOUT",
    "add_scaled_ir",
    "c_launch_required",
    "dynamic_smem_ir",
    "gpu_runtime_required",
    "raw_param_ir",
    "read_banner",
    "require_c_launch",
    "require_gpu_runtime",
    "runtime_target",
    "shuffle_add_ir",
    "spill_ir",
    "vector_add_ir",
]

BANNER_KEY = "TEST_TARGET"
_BANNER_RE = re.compile(rf"^#\s*{BANNER_KEY}\s*:\s*(.+?)\s*$")
_BANNER_LINES = 30
_TRUE = ("1", "true", "yes", "on")
NVVM_DATALAYOUT = (
    "e-p:64:64:64-i1:8:8-i8:8:8-i16:16:16-i32:32:32-i64:64:64-i128:128:128-"
    "f32:32:32-f64:64:64-v16:16:16-v32:32:32-v64:64:64-v128:128:128-n16:32:64"
)


# ---------------------------------------------------------------------------- tiers


def read_banner(path: str | os.PathLike[str]) -> str | None:
    """The spec in a file's ``# TEST_TARGET: <spec>`` banner (first 30 lines), or None.

    The spec is validated, so a typo fails loudly instead of silently skipping.
    """
    with open(path, encoding="utf-8") as f:
        for _, line in zip(range(_BANNER_LINES), f):
            m = _BANNER_RE.match(line.strip())
            if m:
                spec = m.group(1)
                parse_spec(spec)
                return spec
    return None


@functools.lru_cache(maxsize=1)
def runtime_target() -> tuple[Target | None, str]:
    """(target of device 0, or None; what was found, for skip reasons). Once per process."""
    from tylo.backend import driver
    from tylo.backend.errors import NoDeviceError

    try:
        if driver.device_count() == 0:
            return None, "none"
        target = Target.from_device(0)
    except NoDeviceError as err:
        return None, f"none: {err}"
    return target, target.sm


def gpu_runtime_required() -> bool:
    """True when ``TYLO_REQUIRE_GPU_RUNTIME`` asks to fail rather than skip."""
    return os.environ.get("TYLO_REQUIRE_GPU_RUNTIME", "").strip().lower() in _TRUE


def require_gpu_runtime(spec: str) -> Target:
    """The device's target if it satisfies ``spec`` (``'cc>=8.0'``); otherwise skip the
    calling test (or fail it under ``TYLO_REQUIRE_GPU_RUNTIME=1``)."""
    import pytest

    parse_spec(spec)
    target, found = runtime_target()
    if target is not None and target.satisfies(spec):
        from tylo.backend import driver

        driver.current_context(0)
        return target
    reason = f"needs a GPU with {spec} (found: {found})"
    if gpu_runtime_required():
        pytest.fail(f"TYLO_REQUIRE_GPU_RUNTIME=1: {reason}", pytrace=False)
    pytest.skip(reason)
    raise AssertionError("unreachable")  # pragma: no cover - pytest.skip raises


def c_launch_required() -> bool:
    """True when ``TYLO_REQUIRE_C_LAUNCH`` asks to fail rather than skip where the C
    inline launch extension (``tylo._launch``) is not built."""
    return os.environ.get("TYLO_REQUIRE_C_LAUNCH", "").strip().lower() in _TRUE


def require_c_launch() -> object:
    """The C inline launch module ``tylo._launch`` when it is built; otherwise skip the
    calling test (or fail it under ``TYLO_REQUIRE_C_LAUNCH=1``)."""
    import pytest

    from tylo.kernel import fastpath

    if fastpath._accel is not None:
        return fastpath._accel
    reason = (
        "needs the C inline launch path (tylo._launch), which is not built here "
        "(pip install -e . builds it where a C compiler and Python's headers are present)"
    )
    if c_launch_required():
        pytest.fail(f"TYLO_REQUIRE_C_LAUNCH=1: {reason}", pytrace=False)
    pytest.skip(reason)
    raise AssertionError("unreachable")  # pragma: no cover - pytest.skip raises


# ---------------------------------------------------------------------------- kernels


def _module(name: str) -> ir.Module:
    m = ir.Module(name)
    m.triple = "nvptx64-nvidia-cuda"
    m.data_layout = NVVM_DATALAYOUT
    return m


def _finish(m: ir.Module, kernels: list[ir.Function]) -> str:
    i32 = ir.IntType(32)
    for fn in kernels:
        m.add_named_metadata("nvvm.annotations", [fn, "kernel", ir.Constant(i32, 1)])
    m.add_named_metadata("nvvmir.version", [ir.Constant(i32, 2), ir.Constant(i32, 0)])
    # libNVVM's LLVM 7 parser wants a bare `byval`; llvmlite prints `byval(<type>)`.
    return re.sub(r"byval\([^)]*\)", "byval", str(m))


def _sreg(m: ir.Module, b: ir.IRBuilder, name: str) -> ir.Value:
    fname = f"llvm.nvvm.read.ptx.sreg.{name}"
    fn = m.globals.get(fname) or ir.Function(m, ir.FunctionType(ir.IntType(32), []), fname)
    return b.call(fn, [])


def _global_index(m: ir.Module, b: ir.IRBuilder) -> ir.Value:
    """blockIdx.x * blockDim.x + threadIdx.x"""
    return b.add(b.mul(_sreg(m, b, "ctaid.x"), _sreg(m, b, "ntid.x")), _sreg(m, b, "tid.x"))


def vector_add_ir(name: str = "vadd") -> str:
    """``c[i] = a[i] + b[i]`` for ``i < n``; parameters ``(f32* a, f32* b, f32* c, i32 n)``."""
    m = _module(name)
    f32, i32 = ir.FloatType(), ir.IntType(32)
    gp = f32.as_pointer(1)
    fn = ir.Function(m, ir.FunctionType(ir.VoidType(), [gp, gp, gp, i32]), name)
    a, b_, c, n = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    i = _global_index(m, b)
    with b.if_then(b.icmp_signed("<", i, n)):
        s = b.fadd(b.load(b.gep(a, [i])), b.load(b.gep(b_, [i])))
        b.store(s, b.gep(c, [i]))
    b.ret_void()
    return _finish(m, [fn])


def shuffle_add_ir(name: str = "shfl_add") -> str:
    """``out[i] = x[i] + x[i ^ 1]`` within a warp, written as inline PTX ``shfl.sync`` and
    ``add.f32``; parameters ``(f32* x, f32* out)``, a multiple of 32 threads."""
    m = _module(name)
    f32 = ir.FloatType()
    gp = f32.as_pointer(1)
    fn = ir.Function(m, ir.FunctionType(ir.VoidType(), [gp, gp]), name)
    x, out = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    i = _global_index(m, b)
    v = b.load(b.gep(x, [i]))
    shfl = ir.InlineAsm(
        ir.FunctionType(f32, [f32]), "shfl.sync.bfly.b32 $0, $1, 1, 0x1f, 0xffffffff;", "=f,f"
    )
    other = b.call(shfl, [v])
    add = ir.InlineAsm(ir.FunctionType(f32, [f32, f32]), "add.f32 $0, $1, $2;", "=f,f,f")
    b.store(b.call(add, [v, other]), b.gep(out, [i]))
    b.ret_void()
    return _finish(m, [fn])


def add_scaled_ir(name: str = "add_scaled") -> str:
    """``out[i] = f32(alpha * x[i] + beta) + f32(i)`` for ``i < n``; parameters
    ``(f32* x, f32* out, f32 alpha, f64 beta, i64 n)``: one of each scalar kind."""
    m = _module(name)
    f32, f64, i32, i64 = ir.FloatType(), ir.DoubleType(), ir.IntType(32), ir.IntType(64)
    gp = f32.as_pointer(1)
    fn = ir.Function(m, ir.FunctionType(ir.VoidType(), [gp, gp, f32, f64, i64]), name)
    x, out, alpha, beta, n = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    i = b.zext(_global_index(m, b), i64)
    with b.if_then(b.icmp_signed("<", i, n)):
        v = b.fmul(alpha, b.load(b.gep(x, [i])))
        w = b.fptrunc(b.fadd(b.fpext(v, f64), beta), f32)
        b.store(b.fadd(w, b.sitofp(b.trunc(i, i32), f32)), b.gep(out, [i]))
    b.ret_void()
    return _finish(m, [fn])


def raw_param_ir(name: str = "raw_param", size: int = 16) -> str:
    """Copies a by-value ``size``-byte parameter, as i32 words, to ``out``; parameters
    ``([size x i8] byval align 8, i32* out)``. Exercises raw ArgPack slots."""
    m = _module(name)
    i8, i32 = ir.IntType(8), ir.IntType(32)
    blob = ir.ArrayType(i8, size).as_pointer()
    gp = i32.as_pointer(1)
    fn = ir.Function(m, ir.FunctionType(ir.VoidType(), [blob, gp]), name)
    fn.args[0].add_attribute("byval")
    fn.args[0].attributes.align = 8
    raw, out = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    words = b.bitcast(raw, i32.as_pointer())
    for k in range(size // 4):
        idx = ir.Constant(i32, k)
        b.store(b.load(b.gep(words, [idx])), b.gep(out, [idx]))
    b.ret_void()
    return _finish(m, [fn])


def dynamic_smem_ir(name: str = "dyn_smem") -> str:
    """Each thread stores ``x[t]`` to dynamic shared memory at float index
    ``offset + t``, syncs, and reads its neighbour's ``offset + (t ^ 1)`` into ``out[t]``;
    parameters ``(f32* x, f32* out, i32 offset)``. Launch with enough dynamic shared
    memory for ``offset + blockDim.x`` floats (above 48 KB to test the opt-in)."""
    m = _module(name)
    f32, i8, i32 = ir.FloatType(), ir.IntType(8), ir.IntType(32)
    gp = f32.as_pointer(1)
    smem = ir.GlobalVariable(m, ir.ArrayType(i8, 0), "dyn_smem_base", addrspace=3)
    smem.linkage = "external"
    smem.align = 16
    fn = ir.Function(m, ir.FunctionType(ir.VoidType(), [gp, gp, i32]), name)
    x, out, offset = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    t = _sreg(m, b, "tid.x")
    base = b.bitcast(smem, f32.as_pointer(3))
    b.store(b.load(b.gep(x, [t])), b.gep(base, [b.add(offset, t)]))
    barrier = ir.Function(m, ir.FunctionType(ir.VoidType(), []), "llvm.nvvm.barrier0")
    b.call(barrier, [])
    v = b.load(b.gep(base, [b.add(offset, b.xor(t, ir.Constant(i32, 1)))]))
    b.store(v, b.gep(out, [t]))
    b.ret_void()
    return _finish(m, [fn])


def spill_ir(name: str = "spill", live: int = 64) -> str:
    """A kernel that keeps ``live`` loaded floats alive at once and uses 1 KB of static
    shared memory and a dynamically indexed local array: with a register cap it spills.
    Parameters ``(f32* x, f32* out, i32 k)``."""
    m = _module(name)
    f32, i32 = ir.FloatType(), ir.IntType(32)
    gp = f32.as_pointer(1)
    shared = ir.GlobalVariable(m, ir.ArrayType(f32, 256), "spill_tile", addrspace=3)
    shared.linkage = "internal"
    shared.align = 16
    fn = ir.Function(m, ir.FunctionType(ir.VoidType(), [gp, gp, i32]), name)
    x, out, k = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    t = _sreg(m, b, "tid.x")
    local = b.alloca(ir.ArrayType(f32, live))
    zero = ir.Constant(i32, 0)
    vals = []
    for j in range(live):
        v = b.load(b.gep(x, [b.add(t, ir.Constant(i32, 37 * j))]))
        b.store(v, b.gep(local, [zero, ir.Constant(i32, j)]))
        vals.append(v)
    b.store(vals[0], b.gep(shared, [zero, t]))
    b.call(ir.Function(m, ir.FunctionType(ir.VoidType(), []), "llvm.nvvm.barrier0"), [])
    acc = b.load(b.gep(shared, [zero, b.xor(t, ir.Constant(i32, 1))]))
    acc = b.fadd(acc, b.load(b.gep(local, [zero, b.and_(k, ir.Constant(i32, live - 1))])))
    for j in range(live):
        for h in range(j + 1, min(live, j + 9)):
            acc = b.fadd(acc, b.fmul(vals[j], vals[h]))
    b.store(acc, b.gep(out, [t]))
    b.ret_void()
    return _finish(m, [fn])
