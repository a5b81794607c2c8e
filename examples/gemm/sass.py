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
    loop: list[str] = []
    for i, line in enumerate(lines):
        m = _LABEL_RE.match(line)
        if m:
            labels[m.group(1)] = i
        b = _BRANCH_RE.search(line)
        if b and b.group(1) in labels and labels[b.group(1)] < i:
            body = lines[labels[b.group(1)] : i + 1]
            # the main loop: the backward branch whose body holds the most MMAs
            key = (sum("HMMA" in x for x in body), len(body))
            if key > (sum("HMMA" in x for x in loop), len(loop)):
                loop = body
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
