"""Launching a kernel in the interpreter: ``kern.interpret[grid, block](*args)``, or any
``kern[grid, block](*args)`` with ``TYLO_INTERPRET=1``.

The kernel is traced for the arguments exactly as a GPU launch would trace it (the same
bindings, so the same IR), for the target ``TYLO_INTERPRET_TARGET`` (default ``sm_80``);
the launch's checks run (int facts, guards, dynamic shared memory); then the CTAs of the
grid run in batches of up to ``TYLO_INTERPRET_LANES`` threads (default 65536).
"""

from __future__ import annotations

import functools
import os
from typing import Any

import numpy as np

from tylo import dtypes as dt
from tylo.interpret.calls import compile_call
from tylo.interpret.errors import InterpretError, UnsupportedOperation
from tylo.interpret.globalrace import GlobalRaces
from tylo.interpret.irtypes import align_of, size_of
from tylo.interpret.machine import Program, State, run_blocks
from tylo.interpret.memory import CONSTANT_BASE, Allocation, Memory
from tylo.interpret.pool import processes, run_split, splittable
from tylo.interpret.source import record_lines
from tylo.kernel.errors import KernelArgumentError, TraceError, user_frames
from tylo.kernel.spec import Int, ParamKind, Ptr, classify
from tylo.kernel.trace import Binding, trace_kernel

__all__ = ["HostArray", "Interpreted", "InterpretedLaunch"]


class HostArray:
    """A host array seen as elements of tylo dtype ``dtype`` (same element size): bf16
    data held in a numpy ``uint16`` array, for instance, without ml_dtypes."""

    def __init__(self, data: Any, dtype: Any) -> None:
        d = dt.dtype_of(dtype)
        if not isinstance(data, np.ndarray) or data.dtype.itemsize != d.nbytes:
            raise InterpretArgumentError(
                f"HostArray: give a numpy array with {d.nbytes}-byte elements for {d}, got "
                f"{type(data).__name__} {getattr(data, 'dtype', '')}"
            )
        self.data = data
        self.dtype = d


class InterpretArgumentError(InterpretError, KernelArgumentError):
    """An argument the interpreter cannot take (a GPU-only array, a non-contiguous one)."""


def _host_bytes(a: Any, name: str) -> tuple[np.ndarray, int]:
    """(the bytes of array argument ``a`` as a writable uint8 view of its memory, the
    address's offset in its 4 KiB page: the alignment a kernel sees)."""
    if isinstance(a, HostArray):
        a = a.data
    if _is_device_array(a):
        return _emulated_bytes(a, name)
    if type(a).__module__.startswith("torch"):
        if a.device.type != "cpu":
            raise InterpretArgumentError(
                f"argument {name!r}: a torch tensor on {a.device}; the interpreter runs on "
                "the CPU: pass a CPU tensor (t.cpu()) or a numpy array"
            )
        a = a.detach().numpy()
    if not isinstance(a, np.ndarray):
        raise InterpretArgumentError(
            f"argument {name!r}: the interpreter takes numpy arrays, torch CPU tensors and "
            f"DeviceBuffers allocated with TYLO_INTERPRET=1 as arrays, got {type(a).__name__}"
        )
    skew = a.ctypes.data % 4096
    if a.flags.c_contiguous or a.flags.f_contiguous:
        return a.ravel(order="K").view(np.uint8), skew
    if any(st < 0 for st in a.strides) or a.size == 0:
        raise InterpretArgumentError(
            f"argument {name!r}: an array with negative strides {a.strides} (or empty and "
            "strided); pass np.ascontiguousarray(a)"
        )
    # a strided view: its bytes from its first element to its last, as on the GPU
    span = sum((n - 1) * st for n, st in zip(a.shape, a.strides)) + a.itemsize
    return np.asarray(_Span(a, span)), skew


def _is_device_array(a: Any) -> bool:
    """A tylo DeviceBuffer or DeviceArray, or another object with a CUDA array interface
    (torch tensors excepted: they are read directly)."""
    from tylo.arrays import DeviceArray, DeviceBuffer

    if isinstance(a, (DeviceBuffer, DeviceArray)):
        return True
    return not type(a).__module__.startswith("torch") and hasattr(a, "__cuda_array_interface__")


def _check_device_array(name: str, a: Any, ann: Any, binding: Binding) -> None:
    """What a GPU launch refuses of a device array (:mod:`tylo.kernel.readers`,
    :mod:`tylo.kernel.launch`): strided or read-only arrays the annotation does not allow,
    a null address, an address off its elements' alignment."""
    from tylo.arrays import as_device_array
    from tylo.kernel.launch import Alignment
    from tylo.kernel.readers import check_array, refusals

    da = as_device_array(a)
    check_array(name, da, refusals(ann))
    if da.size:
        Alignment.of(binding).check(name, da.ptr)


def _emulated_bytes(a: Any, name: str) -> tuple[np.ndarray, int]:
    """The host bytes behind a device array of emulated memory (:mod:`tylo.backend.hostmem`):
    from its first element to its last, as for a strided numpy view."""
    from tylo.arrays import as_device_array
    from tylo.backend import hostmem
    from tylo.errors import TyloError

    try:
        da = as_device_array(a)
    except TyloError as err:
        raise InterpretArgumentError(f"argument {name!r}: {err}") from None
    if da.size == 0:
        return np.zeros(0, np.uint8), da.ptr % 4096
    if not hostmem.owns(da.ptr):
        raise InterpretArgumentError(
            f"argument {name!r}: a device array at 0x{da.ptr:x} lives in GPU memory; the "
            "interpreter reads host memory: allocate it with TYLO_INTERPRET=1 set (tylo "
            "DeviceBuffers then live in host memory), or pass a numpy array"
        )
    if any(st < 0 for n, st in zip(da.shape, da.strides) if n > 1):
        raise InterpretArgumentError(
            f"argument {name!r}: a device array with negative strides {da.strides}; pass a "
            "copy with positive strides"
        )
    span = (sum((n - 1) * st for n, st in zip(da.shape, da.strides)) + 1) * da.dtype.nbytes
    try:
        return hostmem.host_bytes(da.ptr, span), da.ptr % 4096
    except TyloError as err:
        raise InterpretArgumentError(f"argument {name!r}: {err}") from None


class _Span:
    """``span`` bytes from array ``a``'s first element (keeps ``a`` alive)."""

    def __init__(self, a: np.ndarray, span: int) -> None:
        self.a = a
        self.__array_interface__ = {
            "data": (a.ctypes.data, not a.flags.writeable),
            "shape": (span,),
            "typestr": "|u1",
            "version": 3,
        }


def _is_array(a: Any) -> bool:
    return (
        isinstance(a, (np.ndarray, HostArray))
        or (type(a).__module__.startswith("torch") and hasattr(a, "data_ptr"))
        or _is_device_array(a)
    )


def _dtype(a: Any) -> Any:
    """The tylo dtype of an array argument (a torch tensor's ``dtype``, a
    CUDA-array-interface object's typestr)."""
    if type(a).__module__.startswith("torch"):
        return dt.dtype_of(a.dtype)
    if _is_device_array(a) and not hasattr(a, "dtype"):
        from tylo.arrays import as_device_array

        return as_device_array(a).dtype
    return dt.dtype_of(a)


def _dims(x: Any, what: str) -> tuple[int, int, int]:
    dims = (x,) if isinstance(x, int) else tuple(x) if isinstance(x, (tuple, list)) else None
    if dims is None or not 1 <= len(dims) <= 3 or not all(type(d) is int and d >= 1 for d in dims):
        raise InterpretArgumentError(f"{what} {x!r} must be a positive int or 1-3 positive ints")
    return (*dims, 1, 1)[:3]  # type: ignore[return-value]


class Interpreted:
    """``kern.interpret``: index it with ``[grid, block]`` to get a launcher."""

    def __init__(self, kernel: Any) -> None:
        self.kernel = kernel

    def __getitem__(self, config: Any) -> InterpretedLaunch:
        if not isinstance(config, tuple) or len(config) != 2:
            raise InterpretArgumentError(
                f"{self.kernel.name}.interpret[...]: give a grid and a block, e.g. "
                f"[blocks, 256] (clusters are not interpreted)"
            )
        block = _dims(config[1], "block")
        if block[0] * block[1] * block[2] > 1024:
            raise InterpretArgumentError(
                f"block {config[1]!r} has {block[0] * block[1] * block[2]} threads; a block "
                "holds at most 1024"
            )
        grid = _dims(config[0], "grid")
        if grid[0] >= 2**31 or grid[1] > 65535 or grid[2] > 65535:
            raise InterpretArgumentError(
                f"grid {config[0]!r} exceeds CUDA's limits (2**31 - 1, 65535, 65535)"
            )
        return InterpretedLaunch(self.kernel, grid, block)


class InterpretedLaunch:
    """One ``kern.interpret[grid, block]``; call it with the kernel's arguments."""

    def __init__(self, kernel: Any, grid: tuple[int, int, int],
                 block: tuple[int, int, int]) -> None:  # fmt: skip
        self.kernel = kernel
        self.grid = grid
        self.block = block

    def __call__(self, *args: Any, shared: int = 0, stream: Any = None, **kwargs: Any) -> None:
        k = self.kernel
        values = k.bind(args, kwargs)
        bindings, memory_args = [], []
        for name, ann, a in zip(k.param_names, k.annotations, values):
            if _is_array(a) and ann is not dt.DType:
                data, skew = _host_bytes(a, name)
                want = ann.dtype if isinstance(ann, Ptr) else None
                got = a.dtype if isinstance(a, HostArray) else _dtype(a)
                if want is not None and want.nbytes != got.nbytes:
                    raise InterpretArgumentError(
                        f"argument {name!r}: the kernel takes {want} elements, got a {got} array"
                    )
                bindings.append(Binding(name, ParamKind.POINTER, want or got,
                                        check=ann if isinstance(ann, Ptr) else None))  # fmt: skip
                if _is_device_array(a):  # the checks a GPU launch makes of a device array
                    _check_device_array(name, a, ann, bindings[-1])
                memory_args.append((name, data, skew))
            else:
                kind = classify(ann, a, name)
                if kind in (ParamKind.POINTER, ParamKind.TENSOR_MAP):
                    raise InterpretArgumentError(
                        f"argument {name!r}: {type(a).__name__} is not an array the "
                        "interpreter can read (numpy arrays and torch CPU tensors; TMA tensor "
                        "maps are not interpreted)"
                    )
                bindings.append(k._binding(name, ann, kind, a))
        program, result = self._program(tuple(bindings))
        runtime = list(result.runtime)
        addresses = iter(Allocation.address(j, skew)
                         for j, (_, _, skew) in enumerate(memory_args))  # fmt: skip
        checked = tuple(next(addresses) if b.kind is ParamKind.POINTER else v
                        for b, v in zip(bindings, values))  # fmt: skip
        self._check(bindings, checked, result, shared)
        sizes = [b.dtype.nbytes for b in bindings if b.kind is ParamKind.POINTER]
        allocs = [Allocation(n, d, skew, g)
                  for (n, d, skew), g in zip(memory_args, sizes)]  # fmt: skip
        memory: dict[int, Allocation] = dict(enumerate(allocs))
        for name, (window, data) in program.constants.items():
            memory[window] = Allocation(name, np.frombuffer(data, np.uint8).copy())
        params = []
        ptr = 0
        for i in runtime:
            b = bindings[i]
            if b.kind is ParamKind.POINTER:
                params.append(np.int64(Allocation.address(ptr, allocs[ptr].skew)))
                ptr += 1
            elif b.kind is ParamKind.INT:
                params.append((np.int64 if k.index_bits == 64 else np.int32)(values[i]))
            else:
                params.append((np.float64 if b.dtype.bits == 64 else np.float32)(values[i]))
        static = program.static_shared
        total = static + shared
        _run(program, params, memory, self.grid, self.block, total)

    def _program(self, bindings: tuple[Binding, ...]) -> tuple[Program, Any]:
        from tylo.target import Target

        k = self.kernel
        target = Target.parse(os.environ.get("TYLO_INTERPRET_TARGET", "sm_80"))
        cache = k.__dict__.setdefault("_interpreted", {})
        from tylo.kernel.debug import key_text

        # the bounds-debug mode changes the IR; the access policy the accesses judged
        key = (bindings, self.block, target, key_text(), k.bounds)
        hit = cache.get(key)
        if hit is not None:
            return hit
        fn_code = getattr(k.rewritten(), "__code__", None)
        try:
            with record_lines(fn_code) as lines:
                result = trace_kernel(k.rewritten(), name=k.name, bindings=bindings,
                                      block=self.block, target=target, index_bits=k.index_bits,
                                      max_registers=k._max_registers(),
                                      bounds=k.bounds)  # fmt: skip
        except TraceError as err:
            raise err.with_traceback(user_frames(err.__traceback__)) from None
        fn = result.module.get_global(result.entry)
        layout, static = _shared_layout(result.module)
        dyn_name = next((n for n, (_, dyn) in layout.items() if dyn), None)
        constants = _constants(result.module)

        def address(name: str) -> int:
            if name in constants:
                return Allocation.address(constants[name][0], 0)
            if name not in layout:
                raise UnsupportedOperation(
                    f"global {name}",
                    f"kernel {k.name}: global {name!r} is neither shared memory nor "
                    "constant bytes (not interpreted)",
                )
            return layout[name][0]

        program = Program(k.name, fn, address, compile_call, lines)
        program.static_shared = static
        program.dynamic_name = dyn_name
        program.constants = constants
        cache[key] = (program, result)
        return program, result

    def _check(self, bindings: list[Binding], values: tuple, result: Any, shared: int) -> None:
        k = self.kernel
        for i in result.runtime:
            b = bindings[i]
            if b.kind is ParamKind.INT:
                (b.check or Int()).check(b.name, values[i], k.index_bits)
        if result.guards:
            from tylo.kernel.guards import check_guards

            check_guards([(g, g.compile()) for g in result.guards], values, k.name)
        if type(shared) is not int or shared < result.dynamic_shared_bytes:
            raise InterpretArgumentError(
                f"{k.name}: the kernel's dynamic shared memory views need "
                f"{result.dynamic_shared_bytes} bytes, but the launch gives shared={shared!r}"
            )


def _watch_lane(block: tuple, grid: tuple, padded: int, start: int, nb: int) -> int | None:
    """The batch lane of ``TYLO_INTERPRET_THREAD="bx,by,bz/tx,ty,tz"`` (or linear
    ``"b/t"``), when that thread is in this batch."""
    text = os.environ.get("TYLO_INTERPRET_THREAD")
    if not text:
        return None
    try:
        b_text, t_text = text.replace(" ", "").strip("()").split("/")
        b = [int(v) for v in b_text.strip("()").split(",")] + [0, 0]
        t = [int(v) for v in t_text.strip("()").split(",")] + [0, 0]
    except ValueError:
        raise InterpretArgumentError(
            f"TYLO_INTERPRET_THREAD={text!r}: write the block and the thread as "
            "'bx,by,bz/tx,ty,tz' (or '0/5')"
        ) from None
    cta = b[0] + grid[0] * (b[1] + grid[1] * b[2])
    thread = t[0] + block[0] * (t[1] + block[1] * t[2])
    if not start <= cta < start + nb:
        return None
    return (cta - start) * padded + thread


def _constants(module: Any) -> dict[str, tuple[int, bytes]]:
    """The module's constant byte arrays (printf formats): name -> (window, bytes)."""
    from llvmlite import ir

    out = {}
    for g in module.global_values:
        init = getattr(g, "initializer", None)
        if (
            isinstance(g, ir.GlobalVariable)
            and g.type.addrspace != 3
            and isinstance(getattr(init, "constant", None), bytearray)
        ):
            out[g.name] = (CONSTANT_BASE + len(out), bytes(init.constant))
    return out


def _shared_layout(module: Any) -> tuple[dict[str, tuple[int, bool]], int]:
    """Offsets of the shared globals (static ones in module order, the dynamic one after
    them), and the static bytes."""
    from llvmlite import ir

    layout: dict[str, tuple[int, bool]] = {}
    off = 0
    dynamic = None
    for g in module.global_values:
        if not isinstance(g, ir.GlobalVariable) or g.type.addrspace != 3:
            continue
        if g.linkage == "external":
            dynamic = g
            continue
        align = max(g.align or 1, align_of(g.value_type))
        off = (off + align - 1) // align * align
        layout[g.name] = (off, False)
        off += size_of(g.value_type)
    if dynamic is not None:
        align = max(dynamic.align or 16, 16)
        off = (off + align - 1) // align * align
        layout[dynamic.name] = (off, True)
    return layout, off


def _run(program: Program, params: list[Any], allocs: dict[int, Allocation],
         grid: tuple[int, int, int], block: tuple[int, int, int], shared: int) -> None:  # fmt: skip
    threads = block[0] * block[1] * block[2]
    padded = (threads + 31) // 32 * 32
    ctas = grid[0] * grid[1] * grid[2]
    per = max(1, int(os.environ.get("TYLO_INTERPRET_LANES", "65536")) // padded)
    strict = os.environ.get("TYLO_INTERPRET_STRICT") == "1"
    races = os.environ.get("TYLO_INTERPRET_RACES", "1") != "0"
    arg_slots = [program.slot(a) for a in program.fn.args]

    def where(k: int, start: int = 0) -> str:
        k = int(k)
        tt, cc = k % padded, start + k // padded
        b = (cc % grid[0], cc // grid[0] % grid[1], cc // (grid[0] * grid[1]))
        th = (tt % block[0], tt // block[0] % block[1], tt // (block[0] * block[1]))
        return f"block {b} thread {th}"

    def run_range(first: int, last: int) -> GlobalRaces | None:
        """Interpret CTAs ``first .. last - 1``, in batches; returns the race tracker."""
        tracker = GlobalRaces(padded, where) if races else None
        with np.errstate(all="ignore"):
            for start in range(first, last, per):
                _run_batch(start, min(per, last - start), tracker)
        return tracker

    def _run_batch(start: int, nb: int, tracker: GlobalRaces | None) -> None:
        lanes = nb * padded
        st = State(program, lanes)
        lane = np.arange(lanes)
        t = lane % padded
        c = start + lane // padded
        real = t < threads
        st.where = functools.partial(where, start=start)
        if tracker is not None:
            tracker.batch(start, nb)
        st.memory = Memory(allocs, shared, program.local_bytes, ctas=nb, threads=padded,
                           where=st.where, strict=strict, races=races,
                           global_races=tracker)  # fmt: skip
        i32 = np.int32
        st.sreg = {
            "tid.x": (t % block[0]).astype(i32),
            "tid.y": (t // block[0] % block[1]).astype(i32),
            "tid.z": (t // (block[0] * block[1])).astype(i32),
            "ctaid.x": (c % grid[0]).astype(i32),
            "ctaid.y": (c // grid[0] % grid[1]).astype(i32),
            "ctaid.z": (c // (grid[0] * grid[1])).astype(i32),
            "laneid": (t % 32).astype(i32),
            "warpid": (t // 32).astype(i32),
            "nwarpid": i32(padded // 32),
            **{f"ntid.{a}": i32(n) for a, n in zip("xyz", block)},
            **{f"nctaid.{a}": i32(n) for a, n in zip("xyz", grid)},
        }
        for s, v in zip(arg_slots, params):
            st.regs[s] = v
        watch = _watch_lane(block, grid, padded, start, nb)
        st.watch = watch
        st.live = real.copy()
        st.pc = np.where(real, 0, program.exit).astype(np.int32)
        st.mask = real
        run_blocks(program, st)

    n = processes()
    watched = bool(os.environ.get("TYLO_INTERPRET_THREAD"))
    if n > 1 and splittable(str(program.fn), ctas, watched):
        run_split(run_range, ctas, n, allocs)
    else:
        run_range(0, ctas)
