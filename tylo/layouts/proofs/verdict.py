"""The three-valued answer of every prover: :class:`Verdict`.

- ``"proved"``: ``reason`` names the rule and the assumptions it relied on;
- ``"disproved"``: ``counterexample`` maps each symbol's name to its value, plus the key
  ``"witness"`` (coordinates, 1-D indices and offsets that show the failure), replayed on
  the concrete layout before it is reported; ``hint`` names the missing assumption when
  one can be named;
- ``"unknown"``: ``obligation`` is the open condition and ``guard`` a cheap callable that
  decides a concrete instance exactly (kernels evaluate it at launch).

``bool(verdict)`` is True only when proved.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tylo.layouts._scope import Fact

__all__ = ["FrozenDict", "Verdict"]

PROVED, DISPROVED, UNKNOWN = "proved", "disproved", "unknown"
STATUSES = (PROVED, DISPROVED, UNKNOWN)


class FrozenDict(dict[str, Any]):
    """A ``dict`` that refuses mutation (verdicts are cached and shared).

    >>> d = FrozenDict(M=2)
    >>> d["M"], d == {"M": 2}
    (2, True)
    >>> d["M"] = 3
    Traceback (most recent call last):
    ...
    TypeError: a counterexample is read-only; copy it with dict(...) to change it
    """

    def _readonly(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("a counterexample is read-only; copy it with dict(...) to change it")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _readonly
    __ior__ = _readonly

    def __reduce__(self) -> Any:
        return (FrozenDict, (dict(self),))

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(sorted((k, _hashable(v)) for k, v in self.items())))


def _hashable(v: Any) -> Any:
    if isinstance(v, dict):
        return tuple(sorted((k, _hashable(x)) for k, x in v.items()))
    if isinstance(v, (list, tuple)):
        return tuple(_hashable(x) for x in v)
    return v


@dataclass(frozen=True)
class Verdict:
    """The outcome of a prover (see the module docstring for each field's meaning).

    >>> v = Verdict("proved", "injective", "sorted-span rule")
    >>> bool(v), v.proved, str(v)
    (True, True, 'injective: proved (sorted-span rule)')
    """

    status: str
    property: str
    reason: str
    counterexample: Mapping[str, Any] | None = None
    hint: str | None = None
    obligation: Any = None  # Obligation when unknown (or disproved, the failed condition)
    guard: Any = None  # Guard when not proved and the layout is symbolic
    assumptions: tuple[Fact, ...] = ()
    subject: str = ""  # the layout(s) in CuTe notation

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            from tylo.layouts.proofs.errors import ProofArgumentError

            raise ProofArgumentError(
                f"Verdict: status must be one of {STATUSES}, got {self.status!r}"
            )

    def __bool__(self) -> bool:
        return self.status == PROVED

    @builtins.property  # the field ``property`` shadows the builtin in this body
    def proved(self) -> bool:
        """True when the property holds for every allowed value of the symbols."""
        return self.status == PROVED

    @builtins.property
    def disproved(self) -> bool:
        """True when a replayed counterexample exists."""
        return self.status == DISPROVED

    @builtins.property
    def unknown(self) -> bool:
        """True when neither proved nor disproved (see ``obligation`` and ``guard``)."""
        return self.status == UNKNOWN

    @builtins.property
    def witness(self) -> Mapping[str, Any] | None:
        """The counterexample's ``"witness"`` entry (None unless disproved)."""
        return None if self.counterexample is None else self.counterexample.get("witness")

    @builtins.property
    def values(self) -> dict[str, int]:
        """The counterexample's symbol values (empty unless disproved)."""
        if self.counterexample is None:
            return {}
        return {k: v for k, v in self.counterexample.items() if k != "witness"}

    def __str__(self) -> str:
        s = f"{self.property}: {self.status} ({self.reason})"
        if self.hint:
            s += f"; {self.hint}"
        return s

    def __hash__(self) -> int:
        return hash((self.status, self.property, self.reason, self.subject))
