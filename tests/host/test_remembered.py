"""tylo.remembered.Remembered against a model: random sequences of lookups, some of whose
makers raise, over few keys and small limits."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tylo.errors import TyloError
from tylo.remembered import Remembered, RememberedError


class Boom(Exception):
    pass


@settings(max_examples=300, deadline=None)
@given(
    limit=st.integers(1, 5),
    ops=st.lists(st.tuples(st.integers(0, 7), st.booleans()), max_size=40),
)
def test_get_matches_a_first_in_first_out_model(limit, ops):
    """Each get returns the kept value or makes one (exactly when the model has none); a
    raising maker keeps nothing; at most ``limit`` are kept, the earliest made going first."""
    r = Remembered(limit)
    model: list[tuple[int, object]] = []  # (key, value) in the order made
    for key, raises in ops:
        made = []

        def make(key=key, raises=raises, made=made):
            made.append(key)
            if raises:
                raise Boom(key)
            return object()

        kept = dict(model)
        if key in kept:
            assert r.get(key, make) is kept[key] and made == []
            continue
        if raises:
            with pytest.raises(Boom):
                r.get(key, make)
            assert made == [key] and key not in r
            continue
        value = r.get(key, make)
        assert made == [key]
        model.append((key, value))
        if len(model) > limit:
            model.pop(0)
        assert len(r) == len(model) <= limit
        assert all(k in r for k, _ in model)
        assert all(r.get(k, lambda: pytest.fail("made again")) is v for k, v in model)


@pytest.mark.parametrize("limit", [0, -1, 2.0, True, "3", None, 2**63])
def test_limits_that_are_not_positive_ints_are_refused(limit):
    if limit == 2**63:  # huge is fine: a bound, never allocated
        assert Remembered(limit).limit == 2**63
        return
    with pytest.raises(RememberedError, match="positive int") as err:
        Remembered(limit)
    assert isinstance(err.value, TyloError) and isinstance(err.value, ValueError)


def test_clear_repr_and_unhashable_keys():
    r = Remembered(2)
    r.get("a", lambda: 1)
    assert repr(r) == "Remembered(1 of 2)"
    r.clear()
    assert len(r) == 0 and "a" not in r
    with pytest.raises(TypeError):
        r.get(["unhashable"], lambda: 1)
    assert len(r) == 0


def test_many_threads_get_one_value_per_key_and_respect_the_limit():
    """Eight threads, overlapping keys, a small limit: no error, every value returned for a
    key was made for that key, at most ``limit`` kept, and while a key stays kept every
    thread gets one value for it."""
    import threading

    r = Remembered(5)
    errors, seen = [], []
    start = threading.Barrier(8)

    def work(t):
        try:
            start.wait()
            for i in range(3000):
                key = (i * 7 + t) % 11
                value = r.get(key, lambda key=key: (key, object()))
                if value[0] != key:
                    errors.append((key, value))
                assert len(r) <= 5
            seen.append(t)
        except Exception as err:  # noqa: BLE001 - reported below
            errors.append(err)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == [] and sorted(seen) == list(range(8))
    kept = dict(r.table)
    assert all(r.get(k, lambda: pytest.fail("made again")) is v for k, v in kept.items())
