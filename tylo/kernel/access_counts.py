"""The one line that counts a kernel's accesses by state, ``accesses: N proved, G guarded,
U unproved`` (:mod:`tylo.kernel.accesses`), in a module of its own: the ops' command lines
print it on a cache hit, which must not import the tracer or sympy."""

from __future__ import annotations

__all__ = ["summary_line"]


def summary_line(counts: tuple[int, int, int]) -> str:
    """``accesses: N proved, G guarded, U unproved`` for ``(N, G, U)``."""
    n, g, u = counts
    return f"accesses: {n} proved, {g} guarded, {u} unproved"
