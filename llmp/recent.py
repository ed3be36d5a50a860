"""The few most recently used values by key: the one cache shape llmp's warm paths share.

A what-if, a search or a plan asks again about the spec, device or structure it asked about a
moment ago; each stage that is a pure function of something immutable keeps its answer here.
:meth:`Recent.of` keys on an object's identity (a loaded spec or device is immutable, so the
same object always has the same answer) and holds the object in the entry, so no other object
can take its id while the entry lives.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

T = TypeVar("T")


class Recent:
    """The ``size`` most recently used values by key."""

    def __init__(self, size: int) -> None:
        self._values: OrderedDict[Any, Any] = OrderedDict()
        self._size = size

    def get(self, key: Hashable, make: Callable[[], T]) -> T:
        """The value of ``key``, made (and kept) on a miss; a ``make`` that raises keeps nothing."""
        try:
            self._values.move_to_end(key)
            return self._values[key]  # type: ignore[no-any-return]
        except KeyError:
            value = make()
            self._values[key] = value
            if len(self._values) > self._size:
                self._values.popitem(last=False)
            return value

    def of(self, obj: object, make: Callable[[], T], *extra: Hashable) -> T:
        """The value for the immutable ``obj`` (and ``extra``), kept by the object's identity."""
        return self.get((id(obj), *extra), lambda: (obj, make()))[1]

    def clear(self) -> None:
        self._values.clear()

    def __len__(self) -> int:
        return len(self._values)
