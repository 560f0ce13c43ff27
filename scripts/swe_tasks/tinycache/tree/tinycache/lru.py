"""LRUCache: a mapping of at most ``maxsize`` items that evicts the least recently used one."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator, MutableMapping
from typing import Any

EvictCallback = Callable[[Any, Any], None]
"""``on_evict(key, value)``: called for every item the cache drops on its own."""


class LRUCache(MutableMapping):
    """Reading (``cache[key]``, ``get``) or writing an item makes it the most recently used;
    ``in``, ``peek`` and iteration do not. ``maxsize=0`` stores nothing."""

    def __init__(self, maxsize: int, on_evict: EvictCallback | None = None) -> None:
        if maxsize < 0:
            raise ValueError(f"maxsize must be >= 0, got {maxsize}")
        self.maxsize = maxsize
        self.on_evict = on_evict
        self._data: OrderedDict[Any, Any] = OrderedDict()

    def __getitem__(self, key: Any) -> Any:
        value = self._data[key]
        self._data.move_to_end(key)
        return value

    def __setitem__(self, key: Any, value: Any) -> None:
        if self.maxsize == 0:
            return
        if key in self._data:
            self._data.move_to_end(key)
        self._data[key] = value
        while len(self._data) > self.maxsize:
            self.popitem()

    def __delitem__(self, key: Any) -> None:
        del self._data[key]

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __iter__(self) -> Iterator[Any]:
        # A copy: items() reads each key, which reorders the dict under the iterator.
        return iter(list(self._data))

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(maxsize={self.maxsize}, currsize={len(self)})"

    def peek(self, key: Any, default: Any = None) -> Any:
        """The value for ``key`` without making it the most recently used."""
        return self._data.get(key, default)

    def popitem(self) -> tuple[Any, Any]:
        """Remove and return the least recently used item (calls ``on_evict``)."""
        key, value = self._data.popitem(last=False)
        self._discard(key, value)
        return key, value

    def clear(self) -> None:
        """Remove everything, without calling ``on_evict``."""
        self._data.clear()

    def _discard(self, key: Any, value: Any) -> None:
        if self.on_evict is not None:
            self.on_evict(key, value)
