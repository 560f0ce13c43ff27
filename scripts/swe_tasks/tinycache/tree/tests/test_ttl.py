import pytest

from tinycache import TTLCache


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


@pytest.fixture
def clock():
    return Clock()


def test_items_expire_after_ttl(clock):
    cache = TTLCache(maxsize=10, ttl=5, timer=clock)
    cache["a"] = 1
    clock.now = 4.9
    assert cache["a"] == 1
    clock.now = 5
    assert "a" not in cache
    with pytest.raises(KeyError):
        cache["a"]
    assert cache.get("a") is None


def test_setting_again_restarts_the_clock(clock):
    cache = TTLCache(maxsize=10, ttl=5, timer=clock)
    cache["a"] = 1
    clock.now = 4
    cache["a"] = 2
    clock.now = 8
    assert cache["a"] == 2


def test_len_and_iteration_skip_expired_items(clock):
    cache = TTLCache(maxsize=10, ttl=5, timer=clock)
    cache["a"] = 1
    clock.now = 3
    cache["b"] = 2
    clock.now = 6
    assert len(cache) == 1
    assert list(cache) == ["b"]


def test_lru_eviction_still_applies(clock):
    cache = TTLCache(maxsize=2, ttl=5, timer=clock)
    cache["a"], cache["b"] = 1, 2
    cache["a"]
    cache["c"] = 3
    assert set(cache) == {"a", "c"}


def test_peek_ignores_expired_items(clock):
    cache = TTLCache(maxsize=2, ttl=5, timer=clock)
    cache["a"] = 1
    assert cache.peek("a") == 1
    clock.now = 5
    assert cache.peek("a", "stale") == "stale"


def test_expire_returns_the_dropped_items(clock):
    cache = TTLCache(maxsize=10, ttl=5, timer=clock)
    cache["a"], cache["b"] = 1, 2
    clock.now = 2
    cache["c"] = 3
    clock.now = 6
    assert cache.expire() == [("a", 1), ("b", 2)]
    assert dict(cache.items()) == {"c": 3}


def test_ttl_must_be_positive():
    with pytest.raises(ValueError, match="ttl must be > 0"):
        TTLCache(maxsize=1, ttl=0)


def test_expire_finds_items_that_were_read_recently(clock):
    cache = TTLCache(maxsize=10, ttl=5, timer=clock)
    cache["a"] = 1
    clock.now = 1
    cache["b"] = 2
    clock.now = 2
    assert cache["a"] == 1
    clock.now = 5.5
    assert cache.expire() == [("a", 1)]
    assert len(cache) == 1
    assert dict(cache.items()) == {"b": 2}


def test_items_do_not_fail_after_reads_and_expiry(clock):
    cache = TTLCache(maxsize=10, ttl=10, timer=clock)
    for i, key in enumerate("abcd"):
        clock.now = i
        cache[key] = i
    clock.now = 5
    cache["a"], cache["b"]
    clock.now = 11.5
    assert dict(cache.items()) == {"c": 2, "d": 3}


def test_on_evict_is_called_for_expired_items(clock):
    evicted = []
    cache = TTLCache(maxsize=10, ttl=5, timer=clock, on_evict=lambda k, v: evicted.append(k))
    cache["a"] = 1
    clock.now = 1
    cache["b"] = 2
    clock.now = 5
    cache["c"] = 3
    assert evicted == ["a"]
    clock.now = 20
    assert len(cache) == 0
    assert evicted == ["a", "b", "c"]


def test_on_evict_is_called_once_per_item(clock):
    evicted = []
    cache = TTLCache(maxsize=1, ttl=5, timer=clock, on_evict=lambda k, v: evicted.append((k, v)))
    cache["a"] = 1
    cache["b"] = 2
    clock.now = 10
    cache.expire()
    cache.expire()
    assert evicted == [("a", 1), ("b", 2)]
