"""Reading the GEMM's assembly: registers, spills and instruction counts of the main loop
(used by ``run.py --compile-only``, the assembly tests and the sweep)."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["sass_summary"]

_OPCODE_RE = re.compile(r"^\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]+)", re.MULTILINE)
_LABEL_RE = re.compile(r"^\s*(\.L_x_\d+):", re.MULTILINE)
_BRANCH_RE = re.compile(r"BRA `\((\.L_x_\d+)\)")
_FAMILIES = ("HMMA", "LDSM", "LDGSTS", "LDG", "STG", "STS", "LDS", "BAR", "LDL", "STL", "SHFL")


def sass_summary(compiled: Any) -> dict[str, Any]:
    """Registers, spills and instruction counts of a compiled GEMM, overall and in its
    main loop (the longest backward-branch body): what the assembly checks and the sweep
    print."""
    sass = compiled.module.sass_for(compiled.entry)
    ops = _OPCODE_RE.findall(sass)
    lines = sass.splitlines()
    labels: dict[str, int] = {}
    span = (0, -1)
    for i, line in enumerate(lines):
        m = _LABEL_RE.match(line)
        if m:
            labels[m.group(1)] = i
        b = _BRANCH_RE.search(line)
        if b and b.group(1) in labels and labels[b.group(1)] < i:
            start = labels[b.group(1)]
            # the main loop: the backward branch whose body holds the most MMAs
            key = (sum("HMMA" in x for x in lines[start : i + 1]), i + 1 - start)
            best = lines[span[0] : span[1] + 1]
            if key > (sum("HMMA" in x for x in best), len(best)):
                span = (start, i)
    loop = lines[span[0] : span[1] + 1] + _out_of_line(lines, labels, span)
    loop_ops = _OPCODE_RE.findall("\n".join(loop))

    def families(seq: list[str]) -> dict[str, int]:
        out = dict.fromkeys(_FAMILIES, 0)
        for op in seq:
            head = op.split(".")[0]
            if head in out and not (head == "LDS" and op != "LDS" and "M88" in op):
                out[head] += 1
        return out

    r = compiled.resources
    return {
        "registers": r.registers,
        "spills": (r.spill_stores, r.spill_loads),
        "stack": r.stack_bytes,
        "opcodes": sorted(set(ops)),
        "total": families(ops),
        "loop": {**families(loop_ops), "instructions": len(loop_ops)},
    }


def _out_of_line(lines: list[str], labels: dict[str, int], span: tuple[int, int]) -> list[str]:
    """Blocks the loop branches out to that end by branching back into it (ptxas places a
    rarely taken branch of the loop body after the loop): part of every iteration's code."""
    lo, hi = span
    out: list[str] = []
    for line in lines[lo : hi + 1]:
        b = _BRANCH_RE.search(line)
        start = labels.get(b.group(1), -1) if b else -1
        if b is None or lo <= start <= hi or start < 0:
            continue
        for j in range(start, len(lines)):
            e = _BRANCH_RE.search(lines[j])
            if e and "@" not in lines[j]:  # the block's unconditional branch
                if lo <= labels.get(e.group(1), -1) <= hi:
                    out += lines[start : j + 1]
                break
    return out
