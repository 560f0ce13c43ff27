import threading

import pytest

from tinycache import CacheInfo, LRUCache, cached, lru_cache, ttl_cache


def counting(func):
    calls = []

    def wrapper(*args, **kwargs):
        calls.append((args, kwargs))
        return func(*args, **kwargs)

    wrapper.calls = calls
    return wrapper


def test_cached_calls_the_function_once_per_key():
    inner = counting(lambda x, y=0: x + y)
    add = cached(LRUCache(10))(inner)
    assert add(1, y=2) == 3
    assert add(1, y=2) == 3
    assert add(2) == 2
    assert len(inner.calls) == 2


def test_cache_info_and_clear():
    @lru_cache(maxsize=2)
    def square(x):
        return x * x

    square(2), square(2), square(3)
    assert square.cache_info() == CacheInfo(hits=1, misses=2, maxsize=2, currsize=2)
    square.cache_clear()
    assert square.cache_info() == CacheInfo(0, 0, 2, 0)


def test_wraps_the_function():
    @lru_cache()
    def documented():
        """Docstring."""

    assert documented.__name__ == "documented"
    assert documented.__doc__ == "Docstring."


def test_exceptions_are_not_cached():
    inner = counting(lambda: 1 / 0)
    func = cached(LRUCache(10))(inner)
    for _ in range(2):
        with pytest.raises(ZeroDivisionError):
            func()
    assert len(inner.calls) == 2


def test_lock_is_used():
    class Lock:
        def __init__(self):
            self.lock = threading.Lock()
            self.entered = 0

        def __enter__(self):
            self.entered += 1
            return self.lock.__enter__()

        def __exit__(self, *exc):
            return self.lock.__exit__(*exc)

    lock = Lock()
    func = cached(LRUCache(10), lock=lock)(lambda x: x)
    func(1)
    func(1)
    assert lock.entered == 3


def test_lru_cache_typed_separates_argument_types():
    inner = counting(lambda x: repr(x))
    func = lru_cache(typed=True)(inner)
    assert [func(1), func(1.0), func(True)] == ["1", "1.0", "True"]


def test_ttl_cache_recomputes_after_ttl():
    clock = [0.0]
    inner = counting(lambda x: x * 2)
    func = ttl_cache(maxsize=10, ttl=5, timer=lambda: clock[0])(inner)
    func(1)
    clock[0] = 4
    func(1)
    clock[0] = 5
    func(1)
    assert len(inner.calls) == 2


def test_lru_cache_typed_separates_keyword_argument_types():
    func = lru_cache(typed=True)(lambda x: repr(x))
    assert [func(x=1), func(x=1.0)] == ["1", "1.0"]


def test_ttl_cache_typed_separates_argument_types():
    func = ttl_cache(typed=True)(lambda x: repr(x))
    assert [func(1), func(1.0), func(x=2), func(x=2.0)] == ["1", "1.0", "2", "2.0"]
