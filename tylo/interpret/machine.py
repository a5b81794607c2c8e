"""The interpreter's core: a kernel's IR compiled to per-instruction closures over lanes,
and the lockstep scheduler that runs them.

A batch of CTAs runs at once, one lane per thread (each CTA padded to whole warps; the
padding lanes never run). Every lane has a program counter, a block index in
:func:`~tylo.interpret.cfg.block_order`; each step runs the first block where live lanes
wait, for exactly those lanes (the divergence mask), then moves them along their branches,
assigning the successors' phi values on the edge. A value computed under a mask keeps its
other lanes' old values.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from llvmlite import ir

from tylo.interpret import ops
from tylo.interpret.cfg import block_order, successors
from tylo.interpret.errors import UnsupportedOperation
from tylo.interpret.irtypes import constant, field_offset, np_dtype, size_of
from tylo.interpret.memory import LOCAL_WINDOW, cast_address

__all__ = ["Program", "State"]

Step = Callable[["State", Any], None]


class State:
    """One batch's registers, lanes, memory and launch geometry (set by the launcher)."""

    def __init__(self, program: Program, lanes: int) -> None:
        self.program = program
        self.lanes = lanes
        self.regs: list[Any] = list(program.init)
        self.idx: np.ndarray = np.arange(lanes)
        self.all_lanes = self.idx
        self.memory: Any = None
        self.sreg: dict[str, Any] = {}
        self.live: np.ndarray = np.ones(lanes, dtype=bool)
        self.pc: np.ndarray = np.zeros(lanes, dtype=np.int32)
        self.where: Callable[[int], str] = str
        self.watch: int | None = None  # a lane whose steps are printed
        self.last_line: Any = None  # the source line the watched lane ran last

    def set(self, slot: int, value: Any, m: Any, vector: bool = False) -> None:
        """Write ``value`` to ``slot`` in the lanes of mask ``m`` (None: every lane)."""
        old = self.regs[slot]
        if m is None or old is None:
            self.regs[slot] = value
        elif isinstance(value, tuple):
            self.regs[slot] = tuple(
                np.where(m if np.ndim(v) <= 1 else m[:, None], v, o) for v, o in zip(value, old)
            )
        else:
            self.regs[slot] = np.where(m[:, None] if vector else m, value, old)

    def set_lanes(self, slot: int, vals: np.ndarray, m: Any, vector: bool = False) -> None:
        """Write ``vals`` (one row per active lane, ``self.idx``) to ``slot``."""
        if m is None:
            self.regs[slot] = vals
            return
        old = self.regs[slot]
        shape = (self.lanes,) + vals.shape[1:]
        full = (
            np.zeros(shape, vals.dtype)
            if old is None
            else np.array(np.broadcast_to(old, shape), dtype=vals.dtype)
        )
        full[self.idx] = vals
        self.regs[slot] = full

    def lane_values(self, x: Any, vector: bool = False) -> np.ndarray:
        """``x`` at the active lanes (``self.idx``), broadcast if uniform."""
        a = np.asarray(x)
        if a.ndim == (1 if vector else 0):
            return np.broadcast_to(a, (len(self.idx),) + a.shape)
        return a[self.idx]


class Program:
    """A kernel's entry compiled for the interpreter. ``calls(program, instruction)``
    compiles a call (intrinsics and inline PTX: :mod:`tylo.interpret.calls`)."""

    def __init__(self, kernel: str, fn: ir.Function, global_address: Callable[[str], int],
                 calls: Callable[[Program, Any], Step],
                 lines: dict[int, Any] | None = None) -> None:  # fmt: skip
        self.kernel = kernel
        self.lines = lines or {}  # id(instruction) -> (file, line) (tylo.interpret.source)
        self.fn = fn
        self.global_address = global_address
        self.slots: dict[int, int] = {}
        self.init: list[Any] = []
        self.local_bytes = 0
        self.order = block_order(fn)
        self.index = {id(b): k for k, b in enumerate(self.order)}
        self.exit = len(self.order)
        for a in fn.args:
            self.slot(a)
        self.blocks = []
        self.named: dict[str, int] = {}  # '%"name"' -> slot, for TYLO_INTERPRET_THREAD
        self.step_lines: list[list[Any]] = []  # per block, each step's source location
        for b in self.order:
            steps: list[tuple[Step, str]] = []
            where: list[Any] = []
            for inst in b.instructions:
                if isinstance(inst, ir.PhiInstr):
                    self.slot(inst)
                elif inst is not b.terminator:
                    steps.append((self._compile(inst, calls), str(inst).strip()))
                    where.append(self.lines.get(id(inst)))
                    if inst.name and id(inst) in self.slots:
                        self.named[f"%{_quoted(inst.name)}"] = self.slots[id(inst)]
            self.blocks.append((b.name, steps, self._terminator(b)))
            self.step_lines.append(where)

    def site(self, inst: Any) -> str:
        """How reports name instruction ``inst``: the kernel, the instruction and, when
        known, the source line that emitted it."""
        from tylo.interpret.source import describe

        return f"{self.kernel}: {str(inst).strip()}{describe(self.lines.get(id(inst)))}"

    # ------------------------------------------------------------------ slots

    def slot(self, v: Any) -> int:
        """The register slot of IR value ``v`` (constants get prefilled slots)."""
        k = self.slots.get(id(v))
        if k is None:
            k = self.slots[id(v)] = len(self.init)
            if isinstance(v, (ir.Constant, ir.GlobalValue)):
                self.init.append(constant(v, self.global_address))
            else:
                self.init.append(None)
            if isinstance(v, (ir.Constant, ir.GlobalValue)):
                self._keep = getattr(self, "_keep", [])
                self._keep.append(v)  # ids stay unique while the program lives
        return k

    # ------------------------------------------------------------------ instructions

    def _compile(self, inst: Any, calls: Callable[[Program, Any], Step]) -> Step:
        op = inst.opname
        d = self.slot(inst) if not isinstance(inst.type, ir.VoidType) else -1
        srcs = [self.slot(o) for o in inst.operands] if op != "call" else []
        vector = isinstance(inst.type, ir.VectorType)
        if op in ops.BINARY:
            f = ops.BINARY[op]
            a, b = srcs

            def binary(st: State, m: Any) -> None:
                st.set(d, f(st.regs[a], st.regs[b]), m, vector)

            return binary
        if op == "fneg":
            (a,) = srcs
            return lambda st, m: st.set(d, -st.regs[a], m, vector)
        if op in ("icmp", "fcmp"):
            a, b = srcs
            pred = inst.op
            if op == "icmp":
                uns = pred.startswith("u")
                return lambda st, m: st.set(d, ops.icmp(pred, st.regs[a], st.regs[b], uns), m)
            return lambda st, m: st.set(d, ops.fcmp(pred, st.regs[a], st.regs[b]), m)
        if op == "select":
            c, a, b = srcs
            return lambda st, m: st.set(d, np.where(st.regs[c], st.regs[a], st.regs[b]), m, vector)
        if isinstance(inst, ir.CastInstr) or op in ("bitcast", "addrspacecast", "ptrtoint",
                                                     "inttoptr"):  # fmt: skip
            return self._cast(inst, d, srcs[0])
        if op == "getelementptr":
            return self._gep(inst, d, srcs)
        if op == "load":
            return self._load(inst, d, srcs[0])
        if op == "store":
            return self._store(inst, srcs)
        if op == "alloca":
            size = size_of(inst.type.pointee) * (
                int(inst.operands[0].constant) if inst.operands else 1
            )
            off = (self.local_bytes + 15) // 16 * 16
            self.local_bytes = off + size
            addr = np.int64(LOCAL_WINDOW + off)
            return lambda st, m: st.set(d, addr, m)
        if op == "extractelement":
            v, k = srcs
            return lambda st, m: st.set(d, _extract(st.regs[v], st.regs[k]), m)
        if op == "insertelement":
            v, x, k = srcs
            return lambda st, m: st.set(d, _insert(st.regs[v], st.regs[x], st.regs[k], st),
                                        m, True)  # fmt: skip
        if op == "extractvalue":
            (v,) = srcs
            k = inst.indices[0]
            return lambda st, m: st.set(d, st.regs[v][k], m)
        if op == "call":
            return calls(self, inst)
        if op == "fence":
            return lambda st, m: None
        if op in ("atomicrmw", "cmpxchg"):
            from tylo.interpret.atomics import atomic_instruction

            return atomic_instruction(self, inst, d, srcs)
        raise UnsupportedOperation(op, f"kernel {self.kernel}: the interpreter has no IR "
                                       f"instruction {op!r} (`{str(inst).strip()}`)")  # fmt: skip

    def _cast(self, inst: Any, d: int, a: int) -> Step:
        op = inst.opname
        src_t, dst_t = inst.operands[0].type, inst.type
        if op == "addrspacecast":
            s, t = src_t.addrspace, dst_t.addrspace
            return lambda st, m: st.set(d, cast_address(st.regs[a], s, t), m)
        if op in ("ptrtoint", "inttoptr"):
            dt = np_dtype(dst_t)
            return lambda st, m: st.set(d, np.asarray(st.regs[a]).astype(dt), m)
        if op == "bitcast":
            if isinstance(dst_t, ir.PointerType):
                return lambda st, m: st.set(d, st.regs[a], m)
            sc = src_t.count if isinstance(src_t, ir.VectorType) else 0
            dc = dst_t.count if isinstance(dst_t, ir.VectorType) else 0
            dt = np_dtype(dst_t)
            return lambda st, m: st.set(d, ops.bitcast(st.regs[a], dt, sc, dc), m, dc > 0)
        sd, dd = np_dtype(src_t), np_dtype(dst_t)
        vec = isinstance(dst_t, ir.VectorType)
        return lambda st, m: st.set(d, ops.cast(op, st.regs[a], sd, dd), m, vec)

    def _gep(self, inst: Any, d: int, srcs: list[int]) -> Step:
        base, idxs = srcs[0], srcs[1:]
        t = inst.operands[0].type.pointee
        terms: list[tuple[int, int]] = []  # (slot, stride) for runtime indices
        offset = 0
        for k, (s, v) in enumerate(zip(idxs, inst.operands[1:])):
            if k == 0:
                stride = size_of(t)
            elif isinstance(t, (ir.LiteralStructType, ir.IdentifiedStructType)):
                off, t = field_offset(t, int(v.constant))
                offset += off
                continue
            else:
                t = t.element
                stride = size_of(t)
            if isinstance(v, ir.Constant) and not isinstance(v, ir.FormattedConstant):
                offset += int(self.init[s]) * stride
            else:
                terms.append((s, stride))
        off64 = np.int64(offset)

        def gep(st: State, m: Any) -> None:
            r = st.regs
            addr = r[base] + off64
            for s, stride in terms:
                addr = addr + np.asarray(r[s]).astype(np.int64) * np.int64(stride)
            st.set(d, addr, m)

        return gep

    def _load(self, inst: Any, d: int, p: int) -> Step:
        t = inst.type
        space = inst.operands[0].type.addrspace
        vector = isinstance(t, ir.VectorType)
        n = t.count if vector else 1
        dt = np_dtype(t)
        bool_ = dt == np.bool_
        mem_dt = np.int8 if bool_ else dt
        site = self.site(inst)

        def load(st: State, m: Any) -> None:
            vals = st.memory.load(st.idx, st.lane_values(st.regs[p]), space, mem_dt, n, site)
            if bool_:
                vals = vals != 0
            if vector and n == 1:  # <1 x T>: keep the element axis
                vals = vals[:, None]
            st.set_lanes(d, vals, m, vector)

        return load

    def _store(self, inst: Any, srcs: list[int]) -> Step:
        v, p = srcs
        t = inst.operands[0].type
        space = inst.operands[1].type.addrspace
        vector = isinstance(t, ir.VectorType)
        dt = np_dtype(t)
        mem_dt = np.int8 if dt == np.bool_ else dt
        site = self.site(inst)

        def store(st: State, m: Any) -> None:
            vals = np.ascontiguousarray(st.lane_values(st.regs[v], vector), dtype=mem_dt)
            st.memory.store(st.idx, st.lane_values(st.regs[p]), space, vals, site)

        return store

    # ------------------------------------------------------------------ control flow

    def _terminator(self, b: ir.Block) -> tuple:
        term = b.terminator
        if isinstance(term, ir.Ret):
            return ("ret",)
        if isinstance(term, ir.Unreachable) if hasattr(ir, "Unreachable") else False:
            return ("unreachable",)
        if isinstance(term, (ir.Branch, ir.ConditionalBranch)):
            targets = successors(b)
            edges = [(self.index[id(s)], self._phis(b, s)) for s in targets]
            if isinstance(term, ir.ConditionalBranch):
                return ("cbr", self.slot(term.operands[0]), edges)
            return ("br", edges)
        raise UnsupportedOperation(term.opname, f"kernel {self.kernel}: terminator "
                                                f"`{str(term).strip()}`")  # fmt: skip

    def _phis(self, src: ir.Block, dst: ir.Block) -> list[tuple[int, int, bool]]:
        out = []
        for inst in dst.instructions:
            if not isinstance(inst, ir.PhiInstr):
                continue
            for value, block in inst.incomings:
                if block is src:
                    out.append((self.slot(inst), self.slot(value),
                                isinstance(inst.type, ir.VectorType)))  # fmt: skip
                    break
        return out


def _quoted(name: str) -> str:
    return f'"{name}"'


def _extract(v: Any, k: Any) -> Any:
    v = np.asarray(v)
    k = np.asarray(k)
    if k.ndim == 0:
        return v[..., int(k)]
    return v[np.arange(len(k)), k] if v.ndim == 2 else v[k]


def _insert(v: Any, x: Any, k: Any, st: State) -> Any:
    v = np.asarray(v)
    x = np.asarray(x)
    k = int(np.asarray(k).reshape(-1)[0])
    lanes = max(v.shape[0] if v.ndim == 2 else 1, x.shape[0] if x.ndim == 1 else 1)
    n = v.shape[-1]
    dt = np.result_type(v.dtype, x.dtype) if v.dtype != x.dtype else v.dtype
    if v.ndim == 1 and x.ndim == 0:
        out = v.astype(dt).copy()
        out[k] = x
        return out
    out = np.array(np.broadcast_to(v, (lanes, n)), dtype=dt)
    out[:, k] = x
    return out


def run_blocks(program: Program, st: State, on_step: Any = None) -> None:
    """Run the batch until every lane has returned (see the module docstring)."""
    blocks = program.blocks
    pc = st.pc
    exit_ = program.exit
    regs = st.regs
    while True:
        b = int(pc.min())
        if b >= exit_:
            return
        mask = pc == b
        if mask.all():
            m = None
            st.idx = st.all_lanes
        else:
            m = mask
            st.idx = np.flatnonzero(mask)
        st.mask = mask
        name, steps, term = blocks[b]
        if st.watch is not None and mask[st.watch]:
            _watched(program, st, b, steps, m)
        else:
            for step, _text in steps:
                step(st, m)
        kind = term[0]
        if kind == "ret":
            pc[mask] = exit_
            st.live[mask] = False
        elif kind == "br":
            target, phis = term[1][0]
            _phi(st, phis, m)
            pc[mask] = target
        elif kind == "cbr":
            cond = np.asarray(regs[term[1]])
            (t_true, phis_t), (t_false, phis_f) = term[2]
            if cond.ndim == 0:
                target, phis = (t_true, phis_t) if bool(cond) else (t_false, phis_f)
                _phi(st, phis, m)
                pc[mask] = target
            else:
                mt = mask & cond
                mf = mask & ~cond
                if phis_t or phis_f:
                    vals_t = [regs[s] for _, s, _ in phis_t]
                    vals_f = [regs[s] for _, s, _ in phis_f]
                    for (dslot, _, vec), val in zip(phis_t, vals_t):
                        st.set(dslot, val, mt, vec)
                    for (dslot, _, vec), val in zip(phis_f, vals_f):
                        st.set(dslot, val, mf, vec)
                pc[mt] = t_true
                pc[mf] = t_false
        else:
            raise UnsupportedOperation("unreachable", f"kernel {program.kernel} reached "
                                                      "`unreachable`")  # fmt: skip


def _watched(program: Program, st: State, b: int, steps: list, m: Any) -> None:
    """Run a block's steps, printing each instruction, the source line it came from when
    that changes, and the watched thread's result (``TYLO_INTERPRET_THREAD``) to stderr;
    stop in the debugger before the first step of the line ``TYLO_INTERPRET_BREAK`` names
    (:mod:`tylo.interpret.source`)."""
    import sys

    from tylo.interpret.source import break_spec, breakpoint_at, matches

    lane = st.watch
    sys.stderr.write(f"[{st.where(lane)}] block {program.blocks[b][0]}\n")
    spec = break_spec()
    for (step, text), loc in zip(steps, program.step_lines[b]):
        if loc is not None and loc != st.last_line:
            sys.stderr.write(f"  # {loc[0]}:{loc[1]}\n")
            if spec is not None and matches(spec, loc):
                breakpoint_at(loc, st.where(lane), _thread_values(program, st, lane),
                              st.memory.shared[lane // st.memory.threads],
                              st.memory.local[lane])  # fmt: skip
            st.last_line = loc
        step(st, m)
        value = ""
        lhs = text.split(" = ", 1)[0] if " = " in text else None
        slot = None if lhs is None else program.named.get(lhs)
        if slot is not None:
            value = f" -> {_lane_value(st.regs[slot], lane)}"
        sys.stderr.write(f"  {text}{value}\n")


def _thread_values(program: Program, st: State, lane: int) -> dict[str, Any]:
    """The watched thread's value of every named IR value computed so far."""
    return {
        name: _lane_value(st.regs[slot], lane)
        for name, slot in program.named.items()
        if st.regs[slot] is not None
    }


def _lane_value(r: Any, lane: int) -> Any:
    if isinstance(r, tuple):
        return tuple(_lane_value(x, lane) for x in r)
    a = np.asarray(r)
    return a[lane].tolist() if a.ndim >= 1 and a.shape[0] > lane else a.tolist()


def _phi(st: State, phis: list, m: Any) -> None:
    if not phis:
        return
    vals = [st.regs[s] for _, s, _ in phis]
    for (dslot, _, vec), val in zip(phis, vals):
        st.set(dslot, val, m, vec)
