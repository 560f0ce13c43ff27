"""tinycache: LRU and TTL caches and memoizing decorators."""

from .decorators import CacheInfo, cached, lru_cache, ttl_cache
from .keys import hashkey, methodkey, typedkey
from .lru import LRUCache
from .ttl import TTLCache

__version__ = "0.3.0"

__all__ = [
    "CacheInfo",
    "LRUCache",
    "TTLCache",
    "cached",
    "hashkey",
    "lru_cache",
    "methodkey",
    "ttl_cache",
    "typedkey",
]
