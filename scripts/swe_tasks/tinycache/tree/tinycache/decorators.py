"""Memoizing decorators: ``cached`` for any cache, ``lru_cache`` and ``ttl_cache`` shortcuts."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, MutableMapping
from contextlib import AbstractContextManager, nullcontext
from typing import Any, NamedTuple

from .keys import hashkey, typedkey
from .lru import LRUCache
from .ttl import TTLCache

KeyFunc = Callable[..., Any]


class CacheInfo(NamedTuple):
    hits: int
    misses: int
    maxsize: int | None
    currsize: int


def cached(
    cache: MutableMapping,
    key: KeyFunc = hashkey,
    lock: AbstractContextManager | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Memoize a function in ``cache`` under ``key(*args, **kwargs)``.

    The wrapper gets ``cache``, ``cache_info()`` and ``cache_clear()``. ``lock`` guards the
    cache (not the call: two threads may compute the same value once each).
    """
    guard = lock if lock is not None else nullcontext()

    def decorator(func: Callable[..., Any]) -> Callable[..., Any]:
        hits = misses = 0

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            nonlocal hits, misses
            k = key(*args, **kwargs)
            with guard:
                try:
                    value = cache[k]
                except KeyError:
                    misses += 1
                else:
                    hits += 1
                    return value
            value = func(*args, **kwargs)
            with guard:
                cache[k] = value
            return value

        def cache_info() -> CacheInfo:
            with guard:
                return CacheInfo(hits, misses, getattr(cache, "maxsize", None), len(cache))

        def cache_clear() -> None:
            nonlocal hits, misses
            with guard:
                cache.clear()
                hits = misses = 0

        wrapper.cache = cache  # type: ignore[attr-defined]
        wrapper.cache_info = cache_info  # type: ignore[attr-defined]
        wrapper.cache_clear = cache_clear  # type: ignore[attr-defined]
        return wrapper

    return decorator


def lru_cache(maxsize: int = 128, typed: bool = False) -> Callable[..., Any]:
    """Like ``functools.lru_cache``, with ``cache_info()`` and ``cache_clear()``."""
    return cached(LRUCache(maxsize), key=typedkey if typed else hashkey)


def ttl_cache(
    maxsize: int = 128,
    ttl: float = 600,
    timer: Callable[[], float] = time.monotonic,
    typed: bool = False,
) -> Callable[..., Any]:
    """Like ``lru_cache``, but a result is recomputed once it is ``ttl`` seconds old."""
    return cached(TTLCache(maxsize, ttl, timer), key=typedkey if typed else hashkey)
