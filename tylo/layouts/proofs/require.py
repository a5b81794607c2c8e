"""``require``: turn a verdict that is not "proved" into a typed, readable error."""

from __future__ import annotations

from typing import Any

from tylo.layouts.proofs.errors import ProofArgumentError, PropertyDisproved, PropertyUnproved
from tylo.layouts.proofs.verdict import DISPROVED, PROVED, Verdict

__all__ = ["render", "require"]


def _fmt(x: Any) -> str:
    if isinstance(x, tuple):
        return "(" + ",".join(_fmt(e) for e in x) + ")"
    return str(x)


def render(verdict: Verdict) -> str:
    """A multi-line, plain-language account of a verdict (what ``require`` raises with).

    >>> from tylo.layouts import Layout
    >>> from tylo.layouts.proofs import prove_injective
    >>> print(render(prove_injective(Layout((4, 8), (1, 2)))))
    injective is disproved for (4,8):(1,2): two-mode gcd rule; counterexample replayed
      coordinates (2,0) -> offset 2
      coordinates (0,1) -> offset 2
      why: 2*1 == 1*2: two coordinates share an offset
    """
    v = verdict
    if v.status == PROVED:
        return f"{v.property} is proved for {v.subject}: {v.reason}"
    if v.status == DISPROVED:
        lines = [f"{v.property} is disproved for {v.subject}: {v.reason}"]
        cex = v.counterexample or {}
        values = ", ".join(f"{k}={val}" for k, val in cex.items() if k != "witness")
        if values:
            lines.append(f"  with {values}")
        w = cex.get("witness", {})
        coords = w.get("coordinates", ())
        offsets = w.get("offsets", ())
        if v.property == "equal":
            i = w.get("indices", (None,))[0]
            for name, c, o in zip(("first", "second"), coords, offsets):
                shown = "absent" if c is None else f"coordinates {_fmt(c)} -> offset {o}"
                lines.append(f"  index {i} of the {name} layout: {shown}")
        else:
            for c, o in zip(coords, offsets):
                lines.append(f"  coordinates {_fmt(c)} -> offset {o}")
        if w.get("why"):
            lines.append(f"  why: {w['why']}")
        if v.hint:
            lines.append(f"  hint: {v.hint}")
        return "\n".join(lines)
    lines = [f"{v.property} could not be proved (nor disproved) for {v.subject}: {v.reason}"]
    if v.obligation is not None:
        lines.append(f"  open obligation: {v.obligation}")
    if v.guard is not None:
        names = ", ".join(v.guard.symbols)
        lines.append(
            f"  a launch-time guard over ({names}) decides each instance exactly: "
            "check verdict.guard(values) before launching"
        )
    return "\n".join(lines)


def require(verdict: Verdict, what: str = "") -> None:
    """Return None when ``verdict`` is proved; otherwise raise :class:`PropertyDisproved`
    (with the counterexample rendered: symbol values, coordinates, offsets) or
    :class:`PropertyUnproved` (with the open obligation and the guard).

    >>> from tylo.layouts import Layout, dim
    >>> from tylo.layouts.proofs import prove_injective
    >>> M, K, lda = dim("M"), dim("K"), dim("lda")
    >>> require(prove_injective(Layout((M, K), (1, lda)), assuming=[lda >= M]), what="copy A")
    >>> require(prove_injective(Layout((M, K), (1, lda))), what="copy A")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    tylo.layouts.proofs.errors.PropertyDisproved: copy A: injective is disproved for ...
      with K=2, M=2, lda=1
      coordinates (1,0) -> offset 1
      coordinates (0,1) -> offset 1
      why: 1*1 == 1*1: two coordinates share an offset
      hint: needs lda >= M
    """
    if not isinstance(verdict, Verdict):
        raise ProofArgumentError(
            f"require: expected a Verdict (from a prove_* function), got {verdict!r}"
        )
    if verdict.status == PROVED:
        return
    prefix = f"{what}: " if what else ""
    message = prefix + render(verdict)
    if verdict.status == DISPROVED:
        raise PropertyDisproved(message, verdict=verdict)
    raise PropertyUnproved(message, verdict=verdict)
