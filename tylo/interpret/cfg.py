"""The order in which the interpreter schedules a function's blocks.

Lanes of a CTA run in lockstep: at each step the interpreter runs the block that comes
first in this order among the blocks where live lanes wait. The order is topological once
back edges are removed, and keeps each loop's blocks together before any block after the
loop, so lanes leaving a loop wait at its exit until every lane has left it (reconvergence),
and the two sides of a branch run before their join.
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir

__all__ = ["block_order", "successors"]


def successors(block: ir.Block) -> list[ir.Block]:
    """The blocks ``block``'s terminator may branch to."""
    term = block.terminator
    if isinstance(term, ir.ConditionalBranch):
        return [term.operands[1], term.operands[2]]
    if isinstance(term, ir.Branch):
        return [term.operands[0]]
    if isinstance(term, ir.SwitchInstr):
        return [term.default] + [b for _, b in term.cases]
    return []


def _dominators(blocks: list[ir.Block], succ: dict[Any, list[Any]]) -> dict[Any, set[Any]]:
    preds: dict[Any, list[Any]] = {b: [] for b in blocks}
    for b in blocks:
        for s in succ[b]:
            preds[s].append(b)
    entry = blocks[0]
    dom = {b: set(blocks) for b in blocks}
    dom[entry] = {entry}
    changed = True
    while changed:
        changed = False
        for b in blocks[1:]:
            ps = [dom[p] for p in preds[b]]
            new = set.intersection(*ps) | {b} if ps else {b}
            if new != dom[b]:
                dom[b], changed = new, True
    return dom


def block_order(fn: ir.Function) -> list[ir.Block]:
    """``fn``'s reachable blocks in scheduling order (see the module docstring)."""
    blocks = list(fn.blocks)
    succ = {b: successors(b) for b in blocks}
    dom = _dominators(blocks, succ)
    loops: dict[Any, set[Any]] = {}  # header -> body
    preds: dict[Any, list[Any]] = {b: [] for b in blocks}
    for b in blocks:
        for s in succ[b]:
            preds[s].append(b)
    back = set()
    for b in blocks:
        for s in succ[b]:
            if s in dom[b]:  # b -> s with s dominating b: a back edge
                back.add((b, s))
                body = loops.setdefault(s, {s})
                stack = [b]
                while stack:
                    x = stack.pop()
                    if x not in body:
                        body.add(x)
                        stack.extend(preds[x])
    index = {b: k for k, b in enumerate(blocks)}

    def order(region: set[Any], header: Any) -> list[Any]:
        # the loops directly inside the region collapse to their headers
        inner = [h for h in loops if h in region and h is not header]
        inner = [h for h in inner if not any(h in loops[o] and o is not h for o in inner)]
        rep = {b: b for b in region}
        for h in inner:
            for b in loops[h]:
                rep[b] = h
        nodes = {rep[b] for b in region}
        edges: dict[Any, set[Any]] = {n: set() for n in nodes}
        indeg = {n: 0 for n in nodes}
        for b in region:
            for s in succ[b]:
                if s not in region or (b, s) in back and s is header:
                    continue
                u, v = rep[b], rep[s]
                if u is v or v in edges[u]:
                    continue
                edges[u].add(v)
                indeg[v] += 1
        ready = sorted((n for n in nodes if indeg[n] == 0), key=index.get)
        out: list[Any] = []
        while ready:
            n = ready.pop(0)
            out.extend(order(loops[n], n) if n in inner else [n])
            for v in sorted(edges[n], key=index.get):
                indeg[v] -= 1
                if indeg[v] == 0:
                    ready.append(v)
            ready.sort(key=index.get)
        return out

    reachable: set[Any] = set()
    stack = [blocks[0]]
    while stack:
        x = stack.pop()
        if x not in reachable:
            reachable.add(x)
            stack.extend(succ[x])
    whole = order(reachable, None) if blocks[0] not in loops else None
    if whole is None:  # the entry block heads a loop: wrap it
        whole = order(loops[blocks[0]], blocks[0])
        rest = reachable - set(whole)
        whole += order(rest, None) if rest else []
    return whole
