"""Call sequences for tests of remembered launch preparations (imported by the
``test_*remembered*`` and ``test_*prepare*`` files; not a test module itself): a first call's
arguments, then calls that each change exactly one argument of the one before, so that a
cache key missing an argument is found out (two calls differing only in it come up)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st


def one_change_sequences(fields: tuple[Any, ...], max_steps: int) -> Any:
    """A strategy of lists of argument tuples (one strategy per argument in ``fields``):
    the first drawn whole, each next one equal to the one before but in one argument."""
    step = st.integers(0, len(fields) - 1).flatmap(lambda f: st.tuples(st.just(f), fields[f]))

    def unfold(drawn: tuple[tuple, list]) -> list[tuple]:
        first, steps = drawn
        calls = [first]
        for field, value in steps:
            calls.append(calls[-1][:field] + (value,) + calls[-1][field + 1 :])
        return calls

    return st.tuples(st.tuples(*fields), st.lists(step, max_size=max_steps)).map(unfold)
