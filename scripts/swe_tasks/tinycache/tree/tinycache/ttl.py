"""TTLCache: an LRUCache whose items also expire ``ttl`` seconds after they were set."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from .lru import EvictCallback, LRUCache


class TTLCache(LRUCache):
    """An expired item behaves as if it were absent; it is dropped (and passed to
    ``on_evict``) by the next write, ``len()``, iteration or ``expire()``.

    ``timer`` returns the current time in seconds; tests pass a fake clock.
    """

    def __init__(
        self,
        maxsize: int,
        ttl: float,
        timer: Callable[[], float] = time.monotonic,
        on_evict: EvictCallback | None = None,
    ) -> None:
        if ttl <= 0:
            raise ValueError(f"ttl must be > 0 seconds, got {ttl}")
        super().__init__(maxsize, on_evict)
        self.ttl = ttl
        self.timer = timer

    def __getitem__(self, key: Any) -> Any:
        value, expires = self._data[key]
        if expires <= self.timer():
            raise KeyError(key)
        self._data.move_to_end(key)
        return value

    def __setitem__(self, key: Any, value: Any) -> None:
        self.expire()
        super().__setitem__(key, (value, self.timer() + self.ttl))

    def __contains__(self, key: object) -> bool:
        item = self._data.get(key)
        return item is not None and item[1] > self.timer()

    def __iter__(self) -> Iterator[Any]:
        self.expire()
        return super().__iter__()

    def __len__(self) -> int:
        self.expire()
        return super().__len__()

    def peek(self, key: Any, default: Any = None) -> Any:
        item = self._data.get(key)
        if item is None or item[1] <= self.timer():
            return default
        return item[0]

    def popitem(self) -> tuple[Any, Any]:
        key, (value, _) = self._data.popitem(last=False)
        self._discard(key, value)
        return key, value

    def expire(self) -> list[tuple[Any, Any]]:
        """Drop every expired item; return them as ``(key, value)`` pairs, oldest first."""
        now = self.timer()
        expired = [(key, value) for key, (value, expires) in self._data.items() if expires <= now]
        for key, value in expired:
            del self._data[key]
            self._discard(key, value)
        return expired
