"""The peer-parity table: ``python -m tests.host.layouts.peers.report`` (from the repo root)
runs every peer case through tylo and prints the counts, then every case that is not a
plain pass (each stricter refusal with its reason).
"""

from __future__ import annotations

import sys
from collections import Counter

from tests.host.layouts.peers.cases import GROUPS, SYMBOLIC
from tests.host.layouts.peers.judge import Verdict, judge, judge_symbolic

__all__ = ["all_verdicts", "main", "table"]

ROWS = (
    ("cases run", None),
    ("passing as functions", "pass"),
    ("refused correctly (no result exists)", "refused_correct"),
    ("refused because tylo is stricter", "refused_stricter"),
    ("refused although a result exists (to fix)", "refused_wrongly"),
    ("refused, too large to verify", "refused_unverified"),
    ("crashed with an untyped error", "crash"),
    ("silently wrong (must be 0)", "wrong"),
)


def all_verdicts() -> list[Verdict]:
    """Every peer case (static groups, then the symbolic ones), judged."""
    out = [judge(g.source, c) for g in GROUPS for c in g.cases]
    return out + [judge_symbolic(c) for c in SYMBOLIC]


def table(verdicts: list[Verdict]) -> str:
    """The counts and the listing, as text."""
    n = Counter(v.outcome for v in verdicts)
    stated = [v for v in verdicts if v.exact is not None]
    lines = ["peer parity: CUTLASS pycute and CuTe core tests run against tylo", ""]
    for label, key in ROWS:
        lines.append(f"  {label:<44} {len(verdicts) if key is None else n[key]:>4}")
        if key == "pass":
            same = sum(1 for v in stated if v.exact)
            lines.append(
                f"  {'passing in exact form (of ' + str(len(stated)) + ' stated)':<44} {same:>4}"
            )
    correct = [v for v in verdicts if v.outcome == "refused_correct"]
    if correct:
        lines += ["", "refused correctly (brute force finds no result):"]
        lines += [f"  {v.text}" for v in correct]
    for key, title in (
        ("refused_stricter", "stricter (by design)"),
        ("refused_wrongly", "refused although a result exists"),
        ("refused_unverified", "refused, not verified"),
        ("crash", "untyped errors"),
        ("wrong", "SILENTLY WRONG"),
    ):
        sel = [v for v in verdicts if v.outcome == key]
        if sel:
            lines += ["", f"{title}:"]
            lines += [
                f"  {v.text}{' -> ' + v.result if v.result else ''}  "
                f"[{v.source.rsplit('/', 1)[-1]}]: {v.detail}"
                for v in sel
            ]
    diff = [v for v in stated if not v.exact]
    if diff:
        lines += ["", "exact form differs from the peer's (function equal):"]
        lines += [f"  {v.text} -> {v.result}" for v in diff]
    return "\n".join(lines)


def main() -> int:
    verdicts = all_verdicts()
    print(table(verdicts))
    bad = {"wrong", "crash", "refused_wrongly", "refused_unverified"}
    return 1 if any(v.outcome in bad for v in verdicts) else 0


if __name__ == "__main__":
    sys.exit(main())
