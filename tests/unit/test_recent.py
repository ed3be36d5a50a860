"""The shared cache shape: most recent values by key, or by an object's identity."""

from __future__ import annotations

import pytest

from llmp.recent import Recent


def test_keeps_the_most_recent_values_and_makes_each_once():
    made = []
    cache = Recent(2)

    def make(k):
        return lambda: made.append(k) or k * 10

    assert [cache.get(k, make(k)) for k in (1, 2, 1, 3, 1, 2)] == [10, 20, 10, 30, 10, 20]
    assert made == [1, 2, 3, 2]  # 2 was the least recent when 3 came, so it was made again
    assert len(cache) == 2


def test_a_make_that_raises_keeps_nothing():
    cache = Recent(2)
    with pytest.raises(ZeroDivisionError):
        cache.get("k", lambda: 1 / 0)
    assert len(cache) == 0 and cache.get("k", lambda: 1) == 1


def test_of_keys_on_identity_not_equality():
    a, b = [1, 2], [1, 2]  # equal, but two objects: each gets its own value
    cache = Recent(4)
    assert cache.of(a, lambda: "a") == "a"
    assert cache.of(b, lambda: "b") == "b"
    assert cache.of(a, lambda: "again") == "a"
    assert cache.of(a, lambda: "other root", "root") == "other root"  # extra keys are part of the key
